"""Node configuration checks: each a small function returning one Finding.

They read /proc and /sys below ``root`` (fixture trees in tests) and the
Machine already detected; none needs root, and none changes anything.
"""
from __future__ import annotations

import resource
from pathlib import Path
from typing import List, Optional

from ..machine.model import Machine
from ..results.model import OK, SKIPPED, WARN, Finding


def _read(root: Path, rel: str) -> Optional[str]:
    try:
        return (root / rel.lstrip("/")).read_text().strip()
    except OSError:
        return None


def governor(m: Machine, root: Path) -> Finding:
    govs = {}
    for c in m.cpus:
        g = _read(root, f"sys/devices/system/cpu/cpu{c.id}/cpufreq/scaling_governor")
        if g is not None:
            govs.setdefault(g, []).append(c.id)
    if not govs:
        return Finding("cpu.governor", SKIPPED, "CPU frequency governor: no cpufreq on this node",
                       evidence="/sys/devices/system/cpu/cpu*/cpufreq is absent (a VM, or no cpufreq driver)",
                       why="without cpufreq the clock is set by firmware or the hypervisor; ceiling measures it instead")
    slow = {g: cs for g, cs in govs.items() if g not in ("performance",)}
    evidence = "; ".join(f"{g} on {len(cs)} CPUs" for g, cs in sorted(govs.items()))
    if not slow:
        return Finding("cpu.governor", OK, "CPU frequency governor is 'performance'", evidence=evidence)
    return Finding("cpu.governor", WARN, "CPU frequency governor is not 'performance'", evidence=evidence,
                   why="power-saving governors ramp the clock up late: short or bursty phases run slower and timings vary",
                   fix="cpupower frequency-set -g performance (or the batch system's --cpu-freq=performance)",
                   needs_root=True)


def turbo(m: Machine, root: Path) -> Finding:
    no_turbo = _read(root, "sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read(root, "sys/devices/system/cpu/cpufreq/boost")
    if no_turbo is None and boost is None:
        return Finding("cpu.turbo", SKIPPED, "Turbo/boost state: not exposed by this kernel",
                       evidence="no intel_pstate/no_turbo and no cpufreq/boost")
    off = (no_turbo == "1") or (boost == "0")
    ev = f"intel_pstate/no_turbo={no_turbo}" if no_turbo is not None else f"cpufreq/boost={boost}"
    if off:
        return Finding("cpu.turbo", WARN, "Turbo/boost is disabled", evidence=ev,
                       why="cores stay at the base clock: peak flop/s and single-thread speed are lower",
                       fix="enable it (echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo, or echo 1 > .../cpufreq/boost) "
                           "unless it is off on purpose for reproducible timings", needs_root=True)
    return Finding("cpu.turbo", OK, "Turbo/boost is enabled", evidence=ev)


def clock(m: Machine, root: Path) -> Finding:
    c = m.clocks
    nominal, nominal_src = next(((v, src) for v, src in ((c.base_ghz, c.base_source), (c.max_ghz, c.max_source),
                                                          (c.current_ghz, c.current_source)) if v), (None, ""))
    if c.measured_all_ghz is None:
        return Finding("cpu.clock", SKIPPED, "Clock under load: not measured", evidence=c.measured_method or "")
    ev = f"measured {c.measured_all_ghz:.2f} GHz with all allowed cores busy"
    if c.measured_single_ghz:
        ev += f", {c.measured_single_ghz:.2f} GHz on one core"
    if nominal is None:
        return Finding("cpu.clock", OK, f"Cores run at {c.measured_all_ghz:.2f} GHz under load", evidence=ev + "; no nominal clock to compare")
    ev += f"; the OS reports {nominal:.2f} GHz ({nominal_src})"
    ratio = c.measured_all_ghz / nominal
    if ratio < 0.9:
        return Finding("cpu.clock", WARN, f"Cores run {1 - ratio:.0%} below the reported clock under load", evidence=ev,
                       why="thermal or power throttling, a power cap, or a powersave governor lowers every compute-bound result",
                       fix="check cooling and power capping (BMC), the governor, and the 'cpu.governor' finding")
    note = (f", {ratio - 1:.0%} above the {nominal:.2f} GHz the OS reports (turbo; peaks from the reported clock would be "
            f"wrong by as much)") if ratio > 1.05 else ""
    return Finding("cpu.clock", OK, f"Cores run at {c.measured_all_ghz:.2f} GHz under load{note}", evidence=ev,
                   why="peaks are computed from the measured clock, not the nominal one")


def transparent_hugepages(m: Machine, root: Path) -> Finding:
    v = _read(root, "sys/kernel/mm/transparent_hugepage/enabled")
    if v is None:
        return Finding("mem.thp", SKIPPED, "Transparent huge pages: not exposed", evidence="no /sys/kernel/mm/transparent_hugepage")
    sel = v[v.find("[") + 1:v.find("]")] if "[" in v else v
    if sel == "never":
        return Finding("mem.thp", WARN, "Transparent huge pages are disabled", evidence=f"enabled: {v}",
                       why="large arrays then use 4 KiB pages: more TLB misses, lower bandwidth and higher latency for big working sets",
                       fix="echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or always)", needs_root=True)
    return Finding("mem.thp", OK, f"Transparent huge pages: {sel}", evidence=f"enabled: {v}")


def numa_balancing(m: Machine, root: Path) -> Finding:
    v = _read(root, "proc/sys/kernel/numa_balancing")
    if len(m.nodes) <= 1:
        return Finding("numa.balancing", SKIPPED, "Automatic NUMA balancing: one NUMA domain, not relevant",
                       evidence=f"{len(m.nodes) or 1} NUMA domain")
    if v is None:
        return Finding("numa.balancing", SKIPPED, "Automatic NUMA balancing: not exposed", evidence="no /proc/sys/kernel/numa_balancing")
    if v != "0":
        return Finding("numa.balancing", WARN, "Automatic NUMA balancing is on", evidence=f"numa_balancing={v}",
                       why="the kernel migrates pages and unmaps them to sample accesses: OS noise and jitter in pinned HPC codes",
                       fix="echo 0 > /proc/sys/kernel/numa_balancing (pinned, first-touch codes do not need it)", needs_root=True)
    return Finding("numa.balancing", OK, "Automatic NUMA balancing is off", evidence="numa_balancing=0")


def memlock(m: Machine, root: Path) -> Finding:
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    fmt = lambda v: "unlimited" if v == resource.RLIM_INFINITY else f"{v // 1024} KiB"  # noqa: E731
    ev = f"ulimit -l: soft {fmt(soft)}, hard {fmt(hard)}"
    if soft != resource.RLIM_INFINITY and soft < 64 * 2**20:
        return Finding("limits.memlock", WARN, "Locked-memory limit is low", evidence=ev,
                       why="InfiniBand/RDMA MPI registers (pins) its buffers: a low limit makes MPI fail or fall back to slow paths",
                       fix="set 'memlock unlimited' in /etc/security/limits.conf (and in the batch system's daemon limits)",
                       needs_root=True)
    return Finding("limits.memlock", OK, "Locked-memory limit allows RDMA registration", evidence=ev)


def cgroup_quota(m: Machine, root: Path) -> Finding:
    quota = m.cgroup.get("cpu_quota_cpus") if m.cgroup else None
    n = len(m.affinity) or m.threads
    if quota is None:
        return Finding("cgroup.cpu_quota", OK, "No CPU quota on this process's cgroup",
                       evidence=f"{n} CPUs in this process's affinity")
    if quota + 1e-9 < n:
        return Finding("cgroup.cpu_quota", WARN, f"CPU quota ({quota:g} CPUs) is below the CPUs this process sees ({n})",
                       evidence=f"cgroup quota {quota:g} CPUs; affinity {n} CPUs",
                       why="threads beyond the quota are throttled every scheduling period: all-core results drop and jitter",
                       fix="run with as many threads as the quota, or ask for a larger allocation")
    return Finding("cgroup.cpu_quota", OK, f"CPU quota ({quota:g} CPUs) covers the CPUs this process sees", evidence=f"{n} CPUs")


def virtualization(m: Machine, root: Path) -> Finding:
    if m.virtualized:
        return Finding("env.virtualized", WARN, f"Running in a virtual machine ({m.virtualized})",
                       evidence=f"hypervisor: {m.virtualized}",
                       why="the hypervisor decides clocks, placement of virtual CPUs on physical cores, and memory layout: "
                           "topology and peaks may differ from the host's, and other guests compete for the same hardware",
                       fix="for reference numbers run on bare metal, or with dedicated (pinned) vCPUs")
    return Finding("env.virtualized", OK, "Bare metal (no hypervisor flag)")


CHECKS = (clock, governor, turbo, transparent_hugepages, numa_balancing, cgroup_quota, memlock, virtualization)


def run(m: Machine, root: str = "/") -> List[Finding]:
    r = Path(root)
    out = []
    for check in CHECKS:
        try:
            out.append(check(m, r))
        except Exception as e:  # a broken check must not cost the run
            out.append(Finding(f"check.{check.__name__}", SKIPPED, f"check {check.__name__} could not run",
                               evidence=f"{type(e).__name__}: {e}"))
    return out
