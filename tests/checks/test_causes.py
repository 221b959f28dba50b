"""Every finding's fix follows its cause (issue 34, item 5).

A check that warns or fails records what caused it in ``data["cause"]`` and
picks its fix for that cause, so the advice cannot contradict the evidence
(noise from another process answered with nohz_full; "run sudo" said to
root). Here each check family that has no cause test beside its own tests
gets one: a cause is planted (a small tree, a limit, a statvfs, a privilege)
and the cause and the fix chosen for it are checked. The checks with their
own test files (cpu, irq, mem.population, noise, numa, os, ras, thermal,
load) assert their causes there.

The last tests are cross-cutting: every warn or fail any check returns on
every recorded machine carries a cause, and the strict runner refuses one
that does not, so a new check cannot skip it.
"""
from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

import pytest

from ceiling import machine as machine_mod
from ceiling.checks import base, fs, limits, load, load_all, perf, placement, run_checks
from ceiling.machine.model import Cpu, Machine
from ceiling.results.model import FAIL, WARN, Finding
from checkutil import write
from machine_fixtures import HWLOC, fsroot

GIB = 2 ** 30
load_all()


def node(**kw) -> Machine:
    cpus = [Cpu(id=i, core=i, socket=i // 4, node=i // 4, smt=0) for i in range(8)]
    kw.setdefault("affinity", list(range(8)))
    return Machine(arch="x86_64", sockets=2, cores=8, threads=8, cpus=cpus, **kw)


def run(check_id, m, root, live=False, is_root=None):
    p = base.Probe(Path(root), m, live=live, is_root=is_root)
    return base.run_one(base.REGISTRY[check_id], p, strict=True)


# ---- cgroup: a cgroup's cpuset against this process's own mask --------------------------

def test_cgroup_affinity_cpuset_or_launcher_mask(tmp_path):
    m = node(affinity=[0, 1], cgroup={"cpuset_cpus": [0, 1], "cpuset": "0-1"})
    f = run("cgroup.affinity", m, tmp_path)
    assert f.data["cause"] == "cgroup_cpuset" and "srun --exclusive" in f.fix and "--cpu-bind" not in f.fix
    # the cgroup allows every CPU, the process's own mask does not: an allocation changes nothing
    m = node(affinity=[0, 1], cgroup={"cpuset_cpus": list(range(8)), "cpuset": "0-7"})
    f = run("cgroup.affinity", m, tmp_path)
    assert f.data["cause"] == "affinity_mask" and "--cpu-bind=verbose" in f.fix and "--exclusive" not in f.fix


def test_cgroup_quota_and_memory_limit(tmp_path):
    m = node(cgroup={"cpu_quota_cpus": 2.0}, mem_total_bytes=64 * GIB)
    f = run("cgroup.cpu_quota", m, tmp_path)
    assert f.data == {"cause": "cpu_quota", "quota_cpus": 2.0, "affinity_cpus": 8}
    m = node(cgroup={"memory_limit_bytes": 8 * GIB}, mem_total_bytes=64 * GIB)
    f = run("cgroup.memory_limit", m, tmp_path)
    assert f.data["cause"] == "memory_limit" and "--mem" in f.fix


# ---- env -----------------------------------------------------------------------------

def test_env_virtualized(tmp_path):
    f = run("env.virtualized", node(virtualized="KVM"), tmp_path)
    assert f.data == {"cause": "virtual_machine", "hypervisor": "KVM"}


# ---- fs: full, out of inodes, read-only, not permitted; /dev/shm in a container or not --

def statvfs(free_b, total_b=100 * GIB, files=1000, favail=900, flag=0):
    bs = 4096
    return os.statvfs_result((bs, bs, total_b // bs, free_b // bs, free_b // bs, files, favail, favail, flag, 255))


@pytest.mark.parametrize("st,writable,status,cause,fix_has,fix_lacks", [
    (statvfs(50 * 2 ** 20), True, FAIL, fs.FULL, "free space", "inode"),
    (statvfs(500 * 2 ** 20, total_b=10 * GIB), True, WARN, fs.FULL, "larger quota", "read-only"),
    (statvfs(50 * GIB, favail=5), True, FAIL, fs.NO_INODES, "inode quota", "TMPDIR"),
    (statvfs(50 * GIB, flag=os.ST_RDONLY), True, FAIL, fs.READ_ONLY, "admin", "free space"),
    (statvfs(50 * GIB), False, FAIL, fs.NO_PERMISSION, "you own", "free space"),
])
def test_fs_space_causes(tmp_path, monkeypatch, st, writable, status, cause, fix_has, fix_lacks):
    monkeypatch.setattr(fs, "_places", lambda: [("tmp", str(tmp_path))])
    monkeypatch.setattr(os, "statvfs", lambda path: st)
    monkeypatch.setattr(os, "access", lambda path, mode: writable)
    f = run("fs.space", node(), tmp_path, live=True)
    assert f.status == status and f.data["cause"] == cause
    assert fix_has in f.fix and fix_lacks not in f.fix


def test_fs_shm_small_in_a_container_or_on_a_host(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "statvfs", lambda path: statvfs(60 * 2 ** 20, total_b=64 * 2 ** 20))
    host = tmp_path / "host"
    host.mkdir()
    f = run("fs.shm", node(), host, live=True)
    assert f.data == {"cause": "shm_small", "container": None}
    assert "remount" in f.fix and "docker" not in f.fix and f.needs_root
    box = tmp_path / "box"
    write(box, ".dockerenv", "")
    f = run("fs.shm", node(), box, live=True)
    assert f.data == {"cause": "shm_small", "container": "Docker"}
    assert "--shm-size=8g" in f.fix and "remount" not in f.fix and not f.needs_root


# ---- limits: a soft limit the user raises, a hard limit only root raises -------------------

def limit(monkeypatch, which, soft, hard):
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda r: (soft, hard) if r == which else real(r))


@pytest.mark.parametrize("check_id,which,low,ok_hard,unit", [
    ("limits.memlock", resource.RLIMIT_MEMLOCK, 64 * 1024, 1024 * 2 ** 20, "-l"),
    ("limits.stack", resource.RLIMIT_STACK, 1024 * 1024, 64 * 2 ** 20, "-s"),
    ("limits.nofile", resource.RLIMIT_NOFILE, 1024, 65536, "-n"),
])
def test_limits_soft_or_hard(tmp_path, monkeypatch, check_id, which, low, ok_hard, unit):
    limit(monkeypatch, which, low, ok_hard)
    f = run(check_id, node(), tmp_path, live=True)
    assert f.data["cause"] == limits.SOFT and f"ulimit {unit} " in f.fix
    assert "limits.conf" not in f.fix and not f.needs_root
    if check_id != "limits.nofile":              # the hard limit's own value, never "unlimited" past it
        assert f"ulimit {unit} {ok_hard // 1024} " in f.fix
    limit(monkeypatch, which, low, low)
    f = run(check_id, node(), tmp_path, live=True)
    assert f.data["cause"] == limits.HARD and "limits.conf" in f.fix and f.needs_root
    # in a container the hard limit is the container's: set where it starts, not in limits.conf
    write(tmp_path, ".dockerenv", "")
    f = run(check_id, node(), tmp_path, live=True)
    assert f.data["cause"] == limits.HARD and "--ulimit" in f.fix and "limits.conf" not in f.fix
    assert not f.needs_root


def test_limits_core_to_the_working_directory(tmp_path, monkeypatch):
    limit(monkeypatch, resource.RLIMIT_CORE, resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    write(tmp_path, "proc/sys/kernel/core_pattern", "core\n")
    f = run("limits.core", node(), tmp_path, live=True)
    assert f.data["cause"] == "cores_to_working_directory" and "ulimit -c 0" in f.fix


# ---- perf: the sysctl, a seccomp profile, no PMU, a stub PMU ------------------------------

def test_perf_paranoid_cause(tmp_path):
    write(tmp_path, "proc/sys/kernel/perf_event_paranoid", "3\n")
    f = run("perf.paranoid", node(), tmp_path)
    assert f.data == {"cause": "paranoid", "level": 3} and "perf_event_paranoid=1" in f.fix


@pytest.mark.parametrize("err,paranoid,cause,fix_has,fix_lacks", [
    (errno.EACCES, 3, "paranoid", "perf_event_paranoid=2", "seccomp"),
    # level 1 allows counting one's own process: the sysctl is not what refuses it
    (errno.EACCES, 1, "denied", "seccomp", "sysctl"),
    (errno.ENOENT, 1, "no_pmu", "virtual PMU", "paranoid"),
])
def test_perf_pmu_causes(err, paranoid, cause, fix_has, fix_lacks):
    f = perf.pmu_verdict(["cpu", "software"], {"cycles": (None, err), "instructions": (None, err)}, paranoid)
    assert f.status == WARN and f.data["cause"] == cause
    assert fix_has in f.fix and fix_lacks not in f.fix


def test_perf_pmu_stub_counts_nothing():
    f = perf.pmu_verdict(["cpu"], {"cycles": (0, None), "instructions": (0, None)}, 1)
    assert f.data["cause"] == "stub_pmu" and "virtual PMU" in f.fix


# ---- placement: a hypervisor moving vCPUs, or bare metal with other load --------------------

def test_placement_cause_follows_the_platform():
    f = placement.judge((0, 1), [40.0, 140.0, 40.0], virtualized="KVM")
    assert f.data["cause"] == "vcpu_migration" and "pinned vCPUs" in f.fix
    f = placement.judge((0, 1), [40.0, 140.0, 40.0])
    assert f.data["cause"] == "bare_metal_variation" and "vCPU" not in f.fix and "load.competing" in f.fix


# ---- mem: swap or short of memory; fragmentation or an unused pool; THP --------------------

def meminfo(root, total_kb, avail_kb, swap_total_kb=0, swap_free_kb=0):
    write(root, "proc/meminfo", f"MemTotal: {total_kb} kB\nMemFree: {avail_kb // 2} kB\nMemAvailable: {avail_kb} kB\n"
                                f"SwapTotal: {swap_total_kb} kB\nSwapFree: {swap_free_kb} kB\n")


def test_mem_pressure_swap_or_little_available(tmp_path):
    meminfo(tmp_path, 100 * 2 ** 20, 90 * 2 ** 20, swap_total_kb=8 * 2 ** 20, swap_free_kb=6 * 2 ** 20)
    f = run("mem.pressure", node(), tmp_path)
    assert f.data["cause"] == "swap_in_use" and "swapoff" in f.fix and f.needs_root
    meminfo(tmp_path, 100 * 2 ** 20, 5 * 2 ** 20)
    f = run("mem.pressure", node(), tmp_path)
    # no swap in use: nothing to swap back in, and finding the holder needs no root
    assert f.data["cause"] == "low_available" and "swap" not in f.fix and not f.needs_root


def test_mem_hugepages_fragmented_or_unused_pool(tmp_path):
    write(tmp_path, "sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "2097152\n")
    write(tmp_path, "proc/meminfo", "MemTotal: 16777216 kB\nMemFree: 8388608 kB\nHugepagesize: 2048 kB\n")
    write(tmp_path, "proc/buddyinfo", "Node 0, zone   Normal " + " ".join(["100000"] + ["0"] * 10) + "\n")
    f = run("mem.hugepages", node(), tmp_path)
    assert f.data["cause"] == "fragmented" and "compact_memory" in f.fix and "nr_hugepages" not in f.fix
    write(tmp_path, "proc/buddyinfo", "Node 0, zone   Normal " + " ".join(["0"] * 10 + ["4096"]) + "\n")
    d = "sys/kernel/mm/hugepages/hugepages-2048kB"
    write(tmp_path, f"{d}/nr_hugepages", "4096\n")
    write(tmp_path, f"{d}/free_hugepages", "4096\n")
    write(tmp_path, f"{d}/resv_hugepages", "0\n")
    f = run("mem.hugepages", node(), tmp_path)
    assert f.data["cause"] == "pool_unused" and "nr_hugepages" in f.fix and "compact_memory" not in f.fix


def test_mem_thp_disabled(tmp_path):
    write(tmp_path, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
    assert run("mem.thp", node(), tmp_path).data["cause"] == "thp_disabled"


# ---- load: memory held by others, another user's processes --------------------------------

def test_load_memory_and_other_users_causes():
    page = os.sysconf("SC_PAGE_SIZE")
    phys = os.sysconf("SC_PHYS_PAGES")
    before = load.LoadSample(procs={7: load.ProcTimes(7, "leftover", 100, 5, rss_pages=phys // 10, uid=4321)})
    after = load.LoadSample(procs={7: load.ProcTimes(7, "leftover", 200, 5, rss_pages=phys // 10, uid=4321)})
    problems, ev, causes = load._memory_and_users(before, after, own_uid=1000)
    assert causes == [load.MEMORY_HELD, load.OTHER_USER] and len(problems) == 2 and page > 0
    fix = load.fix_for(causes)
    assert "ask the admin" in fix and "if they are yours" in fix
    assert load.fix_for([load.OTHER_USER]).startswith("another user's processes") \
        and "srun" not in load.fix_for([load.OTHER_USER])
    # the idle-node advice once, however many of the node's own causes hold
    assert load.fix_for([load.COMPETING, load.BUSY_BEFORE, load.MEMORY_HELD]).count("srun --exclusive") == 1


# ---- ras: a daemon installed but not recording, or not installed -------------------------

def test_rasdaemon_not_recording_or_not_installed(tmp_path, monkeypatch):
    import shutil
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/sbin/{name}")
    f = run("ras.rasdaemon", node(), tmp_path, live=True)
    assert f.data["cause"] == "not_recording" and "--record" in f.fix and "not installed" not in f.fix + f.why
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    f = run("ras.rasdaemon", node(), tmp_path, live=True)
    assert f.data["cause"] == "not_installed" and "not installed" in f.why
    f = run("ras.rasdaemon", node(), tmp_path)                 # a recorded tree: whether it is installed is unknown
    assert f.data["cause"] == "no_database"


# ---- root-ness is an input ------------------------------------------------------------------

def test_probe_root_is_planted_and_read_live(tmp_path):
    assert base.Probe.of(node(), str(tmp_path)).is_root is None            # a recorded tree: unknown
    assert base.Probe.of(node(), str(tmp_path), is_root=True).is_root is True
    assert base.Probe.of(node(), "/").is_root is (os.geteuid() == 0)


# ---- cross-cutting: every warn and fail carries its cause ----------------------------------

def test_the_strict_runner_refuses_a_warning_without_a_cause(tmp_path):
    @base.check("env.test_without_cause")
    def no_cause(p):
        return Finding("", WARN, "something is wrong", fix="do something")
    try:
        with pytest.raises(ValueError, match="without data\\['cause'\\]"):
            base.run_one(base.REGISTRY["env.test_without_cause"], base.Probe.of(node(), str(tmp_path)), strict=True)
        # outside tests it is still reported, never lost
        f = base.run_one(base.REGISTRY["env.test_without_cause"], base.Probe.of(node(), str(tmp_path)))
        assert f.status == WARN
    finally:
        del base.REGISTRY["env.test_without_cause"]


TREES = sorted(p.name[:-len(".tar.bz2")] for p in (HWLOC / "linux-fsroot").glob("*.tar.bz2"))


@pytest.mark.parametrize("name", TREES)
def test_every_warning_on_every_recorded_machine_has_a_cause(name, tmp_path_factory):
    root = fsroot(name, tmp_path_factory, full=True)
    m = machine_mod.detect(str(root), measure=False)
    found = run_checks(m, str(root))                 # not strict: a missing cause is asserted here, by name
    bad = [f.id for f in found if f.status in (WARN, FAIL) and not f.data.get("cause")]
    assert not bad, f"{name}: findings without data['cause']: {bad}"
    for f in found:
        if f.status in (WARN, FAIL):
            assert isinstance(f.data["cause"], str) and f.fix, f.id
