"""cgroup limits (v1 and v2) from small hand-made trees: cpuset, CPU quota, memory limit."""
from ceiling.machine import cgroups
from ceiling.sysfs import Root


def write(root, rel, text):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_v2_quota_memory_and_cpuset(tmp_path):
    write(tmp_path, "proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n")
    write(tmp_path, "proc/self/cgroup", "0::/slurm/job_7/step_0\n")
    base = "sys/fs/cgroup/slurm/job_7/step_0"
    write(tmp_path, f"{base}/cpuset.cpus.effective", "0-3,8-11\n")
    write(tmp_path, f"{base}/cpu.max", "max 100000\n")
    write(tmp_path, "sys/fs/cgroup/slurm/job_7/cpu.max", "400000 100000\n")     # the parent limits: 4 CPUs
    write(tmp_path, f"{base}/memory.max", "max\n")
    write(tmp_path, "sys/fs/cgroup/slurm/job_7/memory.max", "17179869184\n")
    got = cgroups.read(Root(tmp_path))
    assert got["version"] == "v2"
    assert got["cpuset"] == "0-3,8-11" and got["cpuset_cpus"] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert got["cpu_quota_cpus"] == 4.0 and got["sources"]["cpu_quota_cpus"].endswith("job_7/cpu.max")
    assert got["memory_limit_bytes"] == 16 * 1024 ** 3


def test_v1_quota_and_memory(tmp_path):
    write(tmp_path, "proc/mounts",
          "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
          "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
          "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n")
    write(tmp_path, "proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n2:cpuset:/docker/abc\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n")
    write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    write(tmp_path, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n")
    write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")   # root: unlimited
    write(tmp_path, "sys/fs/cgroup/cpuset/docker/abc/cpuset.cpus", "2-3\n")
    got = cgroups.read(Root(tmp_path))
    assert got["version"] == "v1" and got["cpu_quota_cpus"] == 1.5
    assert got["memory_limit_bytes"] == 2 * 1024 ** 3 and got["cpuset_cpus"] == [2, 3]


def test_container_whose_mount_is_its_own_cgroup(tmp_path):
    """Without a cgroup namespace the path in /proc/self/cgroup does not exist under the mount."""
    write(tmp_path, "proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 ro 0 0\n")
    write(tmp_path, "proc/self/cgroup", "0::/system.slice/docker-123.scope\n")
    write(tmp_path, "sys/fs/cgroup/cpu.max", "200000 100000\n")
    write(tmp_path, "sys/fs/cgroup/cpuset.cpus.effective", "0-1\n")
    got = cgroups.read(Root(tmp_path))
    assert got["cpu_quota_cpus"] == 2.0 and got["cpuset_cpus"] == [0, 1]


def test_no_limits_no_keys(tmp_path):
    write(tmp_path, "proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n")
    write(tmp_path, "proc/self/cgroup", "0::/\n")
    write(tmp_path, "sys/fs/cgroup/cpu.max", "max 100000\n")
    got = cgroups.read(Root(tmp_path))
    assert "cpu_quota_cpus" not in got and "memory_limit_bytes" not in got and got["version"] == "v2"
    assert cgroups.read(Root(tmp_path / "nothing")) == {}
