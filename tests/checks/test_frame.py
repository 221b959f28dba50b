"""The check frame (checks/base.py) and the checks of this process's limits,
cgroups and file systems; `ceiling check` end to end."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.checks import REGISTRY, base, load_all
from ceiling.machine.model import Cpu, Machine
from ceiling.results.model import FAIL, OK, SKIPPED, WARN, Finding

load_all()


def machine(n=4, affinity=None, cgroup=None, mem=64 * 2**30):
    return Machine(cpus=[Cpu(id=i, socket=0, core=i, node=0, smt=0) for i in range(n)], threads=n, cores=n,
                   affinity=list(range(n)) if affinity is None else affinity, cgroup=cgroup or {},
                   mem_total_bytes=mem)


def run(check_id, m=None, root="/"):
    return base.run_one(REGISTRY[check_id], base.Probe.of(m or machine(), root), strict=True)


# -- the frame -------------------------------------------------------------------

def test_every_check_has_an_area_an_explanation_and_a_unique_id():
    assert len(REGISTRY) >= 15
    for c in REGISTRY.values():
        assert c.area in base.AREAS
        assert len(c.explain.splitlines()) >= 3, f"{c.id}: write the long explanation in its docstring"
        assert "(no explanation written)" not in c.explain


def test_a_crashing_check_becomes_skipped_outside_tests_and_raises_in_them():
    def broken(p):
        raise KeyError("boom")
    c = base.Check("env.broken_for_test", broken)
    f = base.run_one(c, base.Probe.of(machine(), "/"))
    assert f.status == SKIPPED and "KeyError" in f.evidence and f.id == "env.broken_for_test"
    with pytest.raises(KeyError):
        base.run_one(c, base.Probe.of(machine(), "/"), strict=True)


def test_live_checks_are_skipped_on_a_recorded_tree(tmp_path):
    f = run("limits.stack", root=str(tmp_path))
    assert f.status == SKIPPED and "recorded tree" in f.title


def test_probe_reads_garbage_as_none(tmp_path):
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "empty").write_text("  \n")
    (tmp_path / "num").write_text("0x10 junk\n")
    p = base.Probe.of(machine(), str(tmp_path))
    assert p.read("bin") is None and p.read("empty") is None and p.read("missing") is None
    assert p.read_int("num") == 16 and p.read_int("bin") is None
    assert p.listdir("missing") == []


def test_select_by_area_and_id():
    ids = [c.id for c in base.select(["limits", "fs.shm"])]
    assert "limits.stack" in ids and "fs.shm" in ids and all(i.startswith(("limits.", "fs.shm")) for i in ids)


def test_worst():
    mk = lambda s: Finding("x.y", s, "t")  # noqa: E731
    assert base.worst([mk(OK), mk(SKIPPED)]) == OK
    assert base.worst([mk(OK), mk(WARN)]) == WARN
    assert base.worst([mk(WARN), mk(FAIL), mk(SKIPPED)]) == FAIL


# -- limits ------------------------------------------------------------------------

def _with_limit(which, soft, fn):
    old = resource.getrlimit(which)
    resource.setrlimit(which, (soft, old[1]))
    try:
        return fn()
    finally:
        resource.setrlimit(which, old)


def test_stack_limit():
    small = _with_limit(resource.RLIMIT_STACK, 1024 * 1024, lambda: run("limits.stack"))
    assert small.status == WARN and "1024 KiB" in small.title
    big = _with_limit(resource.RLIMIT_STACK, 16 * 2**20, lambda: run("limits.stack"))
    assert big.status == OK and "16384 KiB" in big.evidence


def test_nofile_limit():
    low = _with_limit(resource.RLIMIT_NOFILE, 256, lambda: run("limits.nofile"))
    assert low.status == WARN and "256" in low.title
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard >= 4096:
        high = _with_limit(resource.RLIMIT_NOFILE, 4096, lambda: run("limits.nofile"))
        assert high.status == OK


def test_core_limit():
    off = _with_limit(resource.RLIMIT_CORE, 0, lambda: run("limits.core"))
    assert off.status == OK and "off" in off.title
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == resource.RLIM_INFINITY:
        unl = _with_limit(resource.RLIMIT_CORE, resource.RLIM_INFINITY, lambda: run("limits.core"))
        pattern = Path("/proc/sys/kernel/core_pattern").read_text()
        assert unl.status == (OK if pattern.startswith(("|", "/")) else WARN)


@pytest.mark.parametrize("pattern, status, title", [
    ("core\n", WARN, "Core dumps are unlimited and written to the working directory"),
    ("cores/core.%p\n", WARN, "Core dumps are unlimited and written to the working directory"),
    ("/var/crash/core.%p\n", OK, "Core dumps: unlimited, written to /var/crash"),
    ("/core.%e\n", OK, "Core dumps: unlimited, written to /"),
    ("|/usr/lib/systemd/systemd-coredump %P %u\n", OK, "Core dumps: piped to a collector"),
])
def test_core_pattern_location(tmp_path, monkeypatch, pattern, status, title):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/core_pattern").write_text(pattern)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    probe = base.Probe(tmp_path, machine(), live=True)   # live: limits.core reads this process
    f = base.run_one(REGISTRY["limits.core"], probe, strict=True)
    assert (f.status, f.title) == (status, title)
    assert f"core_pattern: {pattern.strip()}" in f.evidence


def test_memlock_limit():
    f = run("limits.memlock")
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    expect = OK if soft == resource.RLIM_INFINITY or soft >= 64 * 2**20 else WARN
    assert f.status == expect and "ulimit -l" in f.evidence


# -- cgroups -------------------------------------------------------------------------

def test_cpu_quota():
    assert run("cgroup.cpu_quota", machine(8, cgroup={"cpu_quota_cpus": 2.0})).status == WARN
    assert run("cgroup.cpu_quota", machine(2, cgroup={"cpu_quota_cpus": 2.0})).status == OK
    assert run("cgroup.cpu_quota", machine(8)).status == OK


def test_memory_limit():
    f = run("cgroup.memory_limit", machine(mem=64 * 2**30, cgroup={"memory_limit_bytes": 8 * 2**30}))
    assert f.status == WARN and "8.0 GiB" in f.title and "64.0 GiB" in f.title
    assert run("cgroup.memory_limit", machine(mem=64 * 2**30)).status == OK


def test_affinity_narrower_than_the_node():
    f = run("cgroup.affinity", machine(8, affinity=[2, 3], cgroup={"cpuset": "2-3"}))
    assert f.status == WARN and "2 of the node's 8" in f.title and "2-3" in f.evidence
    assert run("cgroup.affinity", machine(8)).status == OK


def test_container_markers(tmp_path):
    m = machine()
    assert run("cgroup.container", m, str(tmp_path)).title == "Not in a container"
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/kubepods/besteffort/pod1234/abcd\n")
    f = run("cgroup.container", m, str(tmp_path))
    assert f.status == OK and "Kubernetes" in f.title
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".containerenv").write_text("")
    assert "Podman" in run("cgroup.container", m, str(tmp_path)).title


# -- file systems ----------------------------------------------------------------------

def fake_statvfs(blocks, bavail, files=1000, favail=900, flag=0, frsize=4096):
    def statvfs(path):
        return os.statvfs_result((frsize, frsize, blocks, bavail, bavail, files, favail, favail, flag, 255))
    return statvfs


@pytest.mark.parametrize("blocks,bavail,favail,flag,status,text", [
    (1_000_000, 500_000, 900, 0, OK, "room to spare"),
    (1_000_000, 50_000, 900, 0, WARN, "nearly full"),
    (1_000_000, 10_000, 900, 0, FAIL, "full"),
    (1_000_000, 500_000, 5, 0, FAIL, "out of inodes"),
    (1_000_000, 500_000, 900, os.ST_RDONLY, FAIL, "read-only"),
])
def test_space(monkeypatch, blocks, bavail, favail, flag, status, text):
    from ceiling.checks import fs
    monkeypatch.setattr(fs.os, "statvfs", fake_statvfs(blocks, bavail, favail=favail, flag=flag))
    f = run("fs.space")
    assert f.status == status and text in (f.title + f.evidence), f


def test_small_dev_shm(monkeypatch):
    from ceiling.checks import fs
    monkeypatch.setattr(fs.os, "statvfs", fake_statvfs(16384, 16384))   # 64 MiB, Docker's default
    f = run("fs.shm")
    assert f.status == WARN and "64 MiB" in f.title


# -- load ----------------------------------------------------------------------------

def test_competing_load_names_a_busy_process():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        f = run("load.competing")
        assert f.status == WARN, f
        assert f"pid {hog.pid}" in f.evidence
    finally:
        hog.kill()
        hog.wait()


# -- the verb ------------------------------------------------------------------------

def ceiling(*args):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=120)


def test_check_verb_json_and_strict_codes(tmp_path):
    r = ceiling("check", "--only", "limits,cgroup", "--json", "--no-store")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ids = {f["id"] for f in doc["findings"]}
    assert "limits.stack" in ids and "cgroup.affinity" in ids and not any(i.startswith("cpu.") for i in ids)
    worst = base.worst(Finding(f["id"], f["status"], f["title"]) for f in doc["findings"])
    r = ceiling("check", "--only", "limits,cgroup", "--strict", "--no-store")
    assert r.returncode == {OK: 0, WARN: 1, FAIL: 2}[worst]
    r = ceiling("check", "--only", "limits,cgroup", "--nhc", "--no-store")
    assert r.returncode == {OK: 0, WARN: 0, FAIL: 2}[worst]       # NHC drains on errors only
    assert len(r.stdout.strip().splitlines()) == 1
    assert r.stdout.startswith({OK: "OK: ceiling", WARN: "WARNING: ceiling", FAIL: "ERROR: ceiling"}[worst])


def test_check_verb_explain_and_list():
    r = ceiling("check", "--explain", "limits.stack")
    assert r.returncode == 0 and "ulimit -s" in r.stdout and "Fix" in r.stdout
    r = ceiling("check", "--list")
    assert r.returncode == 0 and "limits.stack" in r.stdout and "cpu.governor" in r.stdout


def test_check_on_a_recorded_tree(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "sys").mkdir()
    r = ceiling("check", "--root", str(tmp_path), "--only", "mem,limits")
    assert r.returncode == 0, r.stderr
    assert "not applicable to a recorded tree" in r.stdout and "Traceback" not in r.stderr


def test_nhc_drains_on_failures_only(tmp_path):
    """`check --nhc` exits 2 when a check fails, 0 when checks only warn (printed in its
    line), and `--nhc --strict` 1 on warnings too: LBNL NHC drains on errors only, and the
    README's Slurm wrapper must not drain a node for a setting (issue 10, item 6)."""
    thp = tmp_path / "sys/kernel/mm/transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("always madvise [never]\n")
    (tmp_path / "proc").mkdir()
    r = ceiling("check", "--root", str(tmp_path), "--only", "mem.thp", "--nhc")
    assert r.returncode == 0 and r.stdout.startswith("WARNING: ceiling: mem.thp:"), (r.returncode, r.stdout)
    r = ceiling("check", "--root", str(tmp_path), "--only", "mem.thp", "--nhc", "--strict")
    assert r.returncode == 1
    cpu = tmp_path / "sys/devices/system/cpu"
    for c in range(4):
        (cpu / f"cpu{c}").mkdir(parents=True)
    (cpu / "present").write_text("0-3\n")
    (cpu / "online").write_text("0-1\n")
    (cpu / "offline").write_text("2-3\n")
    r = ceiling("check", "--root", str(tmp_path), "--only", "mem.thp,cpu.consistency", "--nhc")
    assert r.returncode == 2 and r.stdout.startswith("ERROR: ceiling: Health check failed: cpu.consistency:"), \
        (r.returncode, r.stdout)
