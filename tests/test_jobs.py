"""probes/jobs.py against recorded Slurm cgroup trees (tests/fixtures/slurm_cgroups/README.md), and the
process tree of a real command."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ceiling.probes import jobs

FIX = Path(__file__).parent / "fixtures" / "slurm_cgroups"


def _v2(root: Path):
    return jobs.slurm_jobs(str(root / "sys" / "fs" / "cgroup"), str(root / "proc"))


def test_v2_jobs_with_their_user_cpus_memory_io_and_cpu_time():
    got = {j.job_id: j for j in _v2(FIX / "v2")}
    assert set(got) == {"4242", "4243"}
    a = got["4242"]
    assert (a.kind, a.uid, a.cpus, a.cpu_list) == ("slurm-v2", 1000, 4, "0-3")
    assert (a.mem_bytes, a.mem_peak_bytes) == (2147483648, 3221225472)
    assert (a.read_bytes, a.write_bytes) == (104857600 + 4096, 52428800)
    assert a.cpu_s == 1200.0
    b = got["4243"]
    assert (b.uid, b.cpus, b.mem_peak_bytes, b.read_bytes, b.write_bytes) == (1001, 5, None, 0, 0)


def test_v1_job_from_every_controller_once():
    got = jobs.slurm_jobs(str(FIX / "v1" / "sys" / "fs" / "cgroup"), str(FIX / "v1" / "proc"))
    assert len(got) == 1
    j = got[0]
    assert (j.job_id, j.kind, j.uid, j.cpus, j.cpu_list) == ("777", "slurm-v1", 1000, 4, "0-1,4-5")
    assert (j.mem_bytes, j.mem_peak_bytes, j.cpu_s) == (536870912, 805306368, 90.0)
    assert j.read_bytes is None and j.write_bytes is None        # Slurm makes no blkio cgroup


def test_no_slurm_is_no_job(tmp_path):
    assert jobs.slurm_jobs(str(tmp_path), str(tmp_path)) == []


def test_a_job_that_ends_is_gone_and_a_reused_id_is_a_new_job(tmp_path):
    root = tmp_path / "node"
    shutil.copytree(FIX / "v2", root, symlinks=True)
    job = root / "sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242"
    first = {j.job_id: j for j in _v2(root)}["4242"]
    shutil.rmtree(job)                                    # the job ended
    assert "4242" not in {j.job_id for j in _v2(root)}
    time.sleep(0.01)
    shutil.copytree(FIX / "v2/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242", job)   # requeued: same id
    again = {j.job_id: j for j in _v2(root)}["4242"]
    assert again.key != first.key
    rates = jobs.job_rates(first, again)
    assert "cpu_busy" not in rates and rates["mem"] == 2147483648      # no rate across two jobs


def test_job_rates_over_an_interval():
    a = jobs.JobRead("1", "1@x", "slurm-v2", 100.0, cpu_s=10.0, read_bytes=0, write_bytes=1000)
    b = jobs.JobRead("1", "1@x", "slurm-v2", 110.0, cpu_s=50.0, read_bytes=10_000, write_bytes=1000, cpus=4)
    r = jobs.job_rates(a, b)
    assert r == {"cpus": 4.0, "cpu_busy": 4.0, "read_Bps": 1000.0, "write_Bps": 0.0}


def test_count_cpus():
    assert jobs.count_cpus("0-3,8") == 5 and jobs.count_cpus("") is None and jobs.count_cpus("x") is None


def test_command_tree_counts_the_children():
    p = subprocess.Popen([sys.executable, "-c", "import subprocess,sys,time; "
                          "c=subprocess.Popen([sys.executable,'-c','x=bytearray(64<<20);import time;time.sleep(5)']);"
                          "time.sleep(5)"])
    try:
        deadline = time.monotonic() + 10
        while True:
            r = jobs.command_tree(p.pid)
            if r is not None and r.mem_bytes > 64 << 20 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r is not None and r.job_id == f"cmd-{p.pid}" and r.mem_bytes > 64 << 20, r
        assert r.uid == os.getuid() and r.cpus and r.cpu_s is not None
    finally:
        p.kill()
        p.wait()
    assert jobs.command_tree(p.pid) is None
