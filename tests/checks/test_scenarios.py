"""Whole nodes: every check at once on recorded machines, healthy and broken.

Each check has its own tests beside its module; here the question is the one
an admin asks of `ceiling check --root`: on this kind of node, does the
whole set give the right verdicts together, with nothing crashing? The
layouts are real (hwloc's recordings of a 2-socket Intel Xeon and a
4-socket AMD Opteron in a cgroup v2 cpuset) with files added in the
kernel's formats, and a cloud VM written from scratch.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict

import pytest

from ceiling import machine as machine_mod
from ceiling.checks import base, run_checks
from ceiling.results.model import FAIL, OK, SKIPPED, WARN

from machine_fixtures import fsroot

INTEL_2S = "32em64t-2n8c+dax+nvme+mic+dimms"
AMD_4S_CGROUP = "32amd64-4s2n4c-cgroup2"

HEALTHY = {
    "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
    "proc/sys/kernel/numa_balancing": "0\n",
    "proc/sys/kernel/osrelease": "5.14.0-362.8.1.el9_3.x86_64\n",
    "proc/sys/kernel/perf_event_paranoid": "1\n",
    "sys/devices/system/clocksource/clocksource0/current_clocksource": "tsc\n",
    "sys/devices/system/clocksource/clocksource0/available_clocksource": "tsc hpet acpi_pm\n",
    "sys/devices/system/edac/mc/mc0/mc_name": "Sandy Bridge SrcID#0_Ha#0\n",
    "sys/devices/system/edac/mc/mc0/ce_count": "0\n",
    "sys/devices/system/edac/mc/mc0/ue_count": "0\n",
}

BROKEN = {
    "sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]\n",
    "proc/sys/kernel/numa_balancing": "1\n",
    "sys/devices/system/clocksource/clocksource0/current_clocksource": "hpet\n",
    "sys/devices/system/clocksource/clocksource0/available_clocksource": "hpet acpi_pm\n",
    "sys/devices/system/edac/mc/mc0/mc_name": "Sandy Bridge SrcID#0_Ha#0\n",
    "sys/devices/system/edac/mc/mc0/ce_count": "152\n",
    "sys/devices/system/edac/mc/mc0/ue_count": "1\n",
    "sys/devices/system/cpu/cpu5/thermal_throttle/core_throttle_count": "4711\n",
}


def overlay(src: Path, dest: Path, files: Dict[str, str]) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    for rel, text in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return dest


def verdicts(root: Path) -> Dict[str, str]:
    m = machine_mod.detect(str(root), measure=False)
    findings = run_checks(m, str(root), strict=True)
    assert len({f.id for f in findings}) == len(findings) == len(base.REGISTRY)
    return {f.id: f.status for f in findings}


@pytest.fixture(scope="module")
def intel(tmp_path_factory):
    return fsroot(INTEL_2S, tmp_path_factory, full=True)


def test_intel_two_socket_healthy(intel, tmp_path):
    v = verdicts(overlay(intel, tmp_path / "node", HEALTHY))
    assert FAIL not in v.values()
    for cid in ("numa.domains", "numa.memory_balance", "numa.balancing", "mem.thp", "mem.population",
                "thermal.throttle_events", "ras.edac", "cpu.governor", "os.clocksource", "env.virtualized"):
        assert v[cid] == OK, (cid, v[cid])
    # a Xeon E5-2680 (Sandy Bridge EP) is older than the CPU families data file: no launch year to compare
    assert v["os.kernel_age"] == SKIPPED
    # what this recorded node really has: C2 with a 93 µs exit latency enabled
    assert v["cpu.cstates"] == WARN
    # live checks do not judge a tree
    for cid in ("limits.stack", "fs.space", "noise.os", "placement.stability", "perf.pmu", "load.competing"):
        assert v[cid] == SKIPPED


def test_intel_two_socket_broken(intel, tmp_path):
    v = verdicts(overlay(intel, tmp_path / "node", BROKEN))
    assert v["ras.edac"] == FAIL                       # an uncorrected error
    for cid in ("thermal.throttle_events", "mem.thp", "numa.balancing", "os.clocksource"):
        assert v[cid] == WARN, (cid, v[cid])


def test_amd_four_socket_in_a_cgroup(tmp_path_factory):
    root = fsroot(AMD_4S_CGROUP, tmp_path_factory, full=True)
    m = machine_mod.detect(str(root), measure=False)
    findings = {f.id: f for f in run_checks(m, str(root), strict=True)}
    assert findings["cgroup.affinity"].status == WARN
    assert "6 of the node's 32" in findings["cgroup.affinity"].title
    assert findings["cpu.governor"].status == WARN
    assert findings["numa.domains"].status == OK and "8 NUMA domains on 4 sockets" in findings["numa.domains"].title
    assert findings["thermal.throttle_events"].status == SKIPPED   # AMD: no thermal_throttle counters


def cloud_vm(root: Path) -> Path:
    """A 2-vCPU KVM guest as clouds give them: no cpufreq, cpuidle haltpoll, no EDAC, no NUMA."""
    files = {
        "proc/cpuinfo": "".join(
            f"processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\n"
            f"model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\nstepping\t: 6\ncpu MHz\t\t: 2899.998\n"
            f"physical id\t: 0\nsiblings\t: 2\ncore id\t\t: 0\ncpu cores\t: 1\n"
            f"flags\t\t: fpu sse2 ht syscall nx lm constant_tsc hypervisor avx avx2 fma avx512f\n\n"
            for i in range(2)),
        "proc/meminfo": "MemTotal:        7864320 kB\nMemFree:         6000000 kB\nMemAvailable:    7000000 kB\n"
                        "SwapTotal:             0 kB\nSwapFree:              0 kB\nHugePages_Total:       0\n"
                        "HugePages_Free:        0\nHugepagesize:       2048 kB\n",
        "proc/sys/kernel/osrelease": "6.1.0-18-cloud-amd64\n",
        "sys/devices/system/cpu/online": "0-1\n",
        "sys/devices/system/cpu/possible": "0-1\n",
        "sys/devices/system/cpu/present": "0-1\n",
        "sys/devices/system/cpu/cpuidle/current_driver": "haltpoll\n",
        "sys/devices/system/clocksource/clocksource0/current_clocksource": "kvm-clock\n",
        "sys/devices/system/clocksource/clocksource0/available_clocksource": "kvm-clock tsc acpi_pm\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    }
    for i in range(2):
        t = f"sys/devices/system/cpu/cpu{i}/topology/"
        files.update({t + "physical_package_id": "0\n", t + "core_id": "0\n",
                      t + "thread_siblings_list": "0-1\n", t + "core_siblings_list": "0-1\n"})
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_cloud_vm(tmp_path):
    v = verdicts(cloud_vm(tmp_path))
    assert v["env.virtualized"] == WARN
    assert v["os.clocksource"] == OK                   # kvm-clock reads stay in user space
    assert FAIL not in v.values()
    for cid in ("cpu.governor", "thermal.throttle_events", "ras.edac", "numa.balancing"):
        assert v[cid] == SKIPPED, (cid, v[cid])
