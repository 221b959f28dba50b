"""Throttling: thermal and power-limit events since boot, and throttling now.

The counters are Intel's (x86 therm_throt): per CPU in
/sys/devices/system/cpu/cpuN/thermal_throttle/, described in the kernel's
Documentation/ABI/testing/sysfs-devices-system-cpu and implemented in
arch/x86/kernel/cpu/mce/therm_throt.c. Core counters are shared by the SMT
siblings of a core and package counters by every CPU of a package, so each
is counted once per core or package here, not once per CPU.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..sysfs import format_cpulist
from ..machine.clocks import measure_clock
from ..sysfs import parse_uptime
from .base import Probe, check, fail, ok, skipped, warn

CPU_DIR = "sys/devices/system/cpu"
CORE_COUNTS = ("core_throttle_count", "core_power_limit_count")
PKG_COUNTS = ("package_throttle_count", "package_power_limit_count")
CORE_TIMES = ("core_throttle_total_time_ms", "core_throttle_max_time_ms")
PKG_TIMES = ("package_throttle_total_time_ms", "package_throttle_max_time_ms")
# Kernels before the core/package split had one per-CPU counter of thermal events.
OLD_COUNT = "count"
KNOWN = set(CORE_COUNTS + PKG_COUNTS + CORE_TIMES + PKG_TIMES)

# The all-core busy window of thermal.throttling_now: two short clock
# measurements (one core, then all allowed cores) of (10 warm-up + WINDOW_REPS)
# repetitions of 5 ms each: about 0.3 s of load in all.
WINDOW_REPS = 15
# All-core clock under load below 95% of base: throttled or capped. Under an
# all-core scalar load a CPU does not run below its base clock unless it is
# throttled or power-capped, so 5% leaves room for measurement error only.
# cpu.clock uses the same threshold, so the two checks agree on one machine.
ALL_BELOW_BASE = 0.95
SINGLE_BELOW_MAX = 0.85   # one-core clock below 85% of the maximum: turbo not reached
CONTENDED = 0.10          # tasks waiting for a CPU over 10% of the window (PSI): competing load

# thermal.throttling_now's causes (data["cause"]) and the fix for each: cooling and power caps
# are the admin's; a VM's clock is the hypervisor's; competing load is nobody's hardware.
ROSE, BELOW_BASE, HYPERVISOR = "counters_rose", "below_base", "hypervisor"
CONTENDED_LOAD, ONE_CORE_SLOW = "competing_load", "single_core_below_max"
NOW_FIXES = {
    ROSE: "check cooling and the power cap (ipmitool sdr type temperature; ipmitool dcmi power get_limit); drain "
          "the node if it throttles under load",
    BELOW_BASE: "check cooling and the power cap (ipmitool sdr type temperature; ipmitool dcmi power get_limit) "
                "and the governor (cpu.governor); drain the node if it throttles under load",
    HYPERVISOR: "in a VM the host sets the clock: ask for dedicated (pinned) vCPUs, or measure on bare metal",
    CONTENDED_LOAD: "other tasks shared the CPUs: measure on an idle node (see load.competing)",
    ONE_CORE_SLOW: "check that turbo is on and the clocks are not capped (cpu.turbo, cpu.consistency) and the "
                   "power cap (ipmitool dcmi power get_limit)",
}


def read_counters(p: Probe) -> Dict[int, Dict[str, int]]:
    """CPU id -> {counter file: value} for every CPU that has a thermal_throttle directory.

    A CPU whose directory exists but whose files are all unreadable maps to
    {}; the old single ``count`` is read as core_throttle_count.
    """
    out: Dict[int, Dict[str, int]] = {}
    for name in p.listdir(CPU_DIR):
        m = re.fullmatch(r"cpu(\d+)", name)
        if not m:
            continue
        d = f"{CPU_DIR}/{name}/thermal_throttle"
        files = p.listdir(d)
        if not files:
            continue
        vals: Dict[str, int] = {}
        for f in files:
            if f not in KNOWN and f != OLD_COUNT:
                continue
            v = p.read_int(f"{d}/{f}")
            if v is not None and v >= 0:
                vals["core_throttle_count" if f == OLD_COUNT else f] = v
        out[int(m[1])] = vals
    return out


@dataclass
class Tally:
    """Counters de-duplicated: once per core and once per package."""

    cores: Dict[Any, Dict[str, int]] = field(default_factory=dict)     # (socket, core) -> counters
    core_cpus: Dict[Any, List[int]] = field(default_factory=dict)      # (socket, core) -> CPU ids
    packages: Dict[Any, Dict[str, int]] = field(default_factory=dict)  # socket -> counters

    def sockets(self) -> List[Any]:
        keys = set(self.packages) | {k[0] for k in self.cores}
        return sorted(keys, key=lambda s: (0, s, "") if isinstance(s, int) else (1, 0, str(s)))

    def core_sum(self, socket, name: str) -> Optional[int]:
        vals = [v[name] for k, v in self.cores.items() if k[0] == socket and name in v]
        return sum(vals) if vals else None

    def total(self, names) -> int:
        return (sum(v.get(n, 0) for v in self.cores.values() for n in names)
                + sum(v.get(n, 0) for v in self.packages.values() for n in names))


def tally(p: Probe, counters: Dict[int, Dict[str, int]]) -> Tally:
    """Group per-CPU counters by core and package using the machine's topology.

    SMT siblings read the same core counter and every CPU of a package the
    same package counter; the largest reading is kept (they are equal unless
    an event arrived between two reads). A CPU the topology does not place
    counts as a core and a package of its own, named by its CPU id.
    """
    where = {c.id: c for c in p.machine.cpus}
    t = Tally()
    for cpu, vals in counters.items():
        c = where.get(cpu)
        if c is not None and c.socket >= 0 and c.core >= 0:
            ckey, skey = (c.socket, c.core), c.socket
        else:
            ckey, skey = (f"cpu{cpu}", f"cpu{cpu}"), f"cpu{cpu}"
        core = t.cores.setdefault(ckey, {})
        t.core_cpus.setdefault(ckey, []).append(cpu)
        pkg = t.packages.setdefault(skey, {})
        for name, v in vals.items():
            dest = core if name.startswith("core_") else pkg
            dest[name] = max(dest.get(name, 0), v)
    return t


def _uptime(p: Probe) -> str:
    s = parse_uptime(p.read("proc/uptime"))
    if s is None:
        return "uptime unknown: /proc/uptime not readable"
    d, rest = divmod(int(s), 86400)
    h, rest = divmod(rest, 3600)
    return (f"up {d} d {h} h" if d else f"up {h} h {rest // 60} min") + " (/proc/uptime)"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _label(socket) -> str:
    return f"socket {socket}" if not isinstance(socket, str) else socket


def _core_label(t: Tally, key) -> str:
    cpus = ",".join(str(c) for c in sorted(t.core_cpus.get(key, [])))
    if isinstance(key[1], str):
        return f"{key[1]}"
    return f"core {key[1]} (CPU {cpus}) on socket {key[0]}"


def _package_lines(t: Tally) -> List[str]:
    lines = []
    for s in t.sockets():
        pkg = t.packages.get(s, {})
        parts = []
        if "package_throttle_count" in pkg:
            ms = pkg.get("package_throttle_total_time_ms")
            parts.append(f"package {pkg['package_throttle_count']} thermal" + (f" ({ms} ms)" if ms else ""))
        if "package_power_limit_count" in pkg:
            parts.append(f"package {pkg['package_power_limit_count']} power-limit")
        ct = t.core_sum(s, "core_throttle_count")
        if ct is not None:
            ms = t.core_sum(s, "core_throttle_total_time_ms")
            parts.append(f"cores {ct} thermal" + (f" ({ms} ms)" if ms else ""))
        cp = t.core_sum(s, "core_power_limit_count")
        if cp is not None:
            parts.append(f"cores {cp} power-limit")
        if parts:
            lines.append(f"{_label(s)}: " + ", ".join(parts))
    return lines


def _worst_cores(t: Tally, n: int = 3) -> List[str]:
    ranked = sorted(((v.get("core_throttle_count", 0), v.get("core_power_limit_count", 0), k)
                     for k, v in t.cores.items()), key=lambda x: (-x[0], -x[1], str(x[2])))
    out = []
    for thermal, power, k in ranked[:n]:
        if thermal == 0 and power == 0:
            break
        ms = t.cores[k].get("core_throttle_total_time_ms")
        what = [f"{thermal} thermal" + (f" ({ms} ms)" if ms else "")] if thermal else []
        if power:
            what.append(f"{power} power-limit")
        out.append(f"{_core_label(t, k)}: {', '.join(what)}")
    return out


@check("thermal.throttle_events")
def throttle_events(p: Probe):
    """Thermal and power-limit throttling events since boot (Intel).

    Reads the per-CPU counters in /sys/devices/system/cpu/cpuN/thermal_throttle/
    (core_throttle_count, package_throttle_count, core_power_limit_count,
    package_power_limit_count, and *_throttle_total_time_ms /
    *_throttle_max_time_ms where the kernel has them; ``count`` on old
    kernels). A core counter is shared by the SMT siblings of a core and a
    package counter by all CPUs of a package: each is counted once, then
    summed per package; the worst cores are named.

    warn: any counter above zero. The counters start at zero at boot, so the
    finding says how long the node has been up. Thermal events mean a core or
    package reached its temperature limit and the CPU lowered its clock to
    cool down; power-limit events mean it reached its power limit (RAPL
    PL1/PL2, or a cap set by the BMC) and lowered the clock to stay within it.
    Either way compute-bound code ran slower for that time, and in a parallel
    job the throttled node sets the pace for all. A few events over months are
    harmless; thousands, or one core far above the others, point at cooling
    (fans, heat-sink contact, air flow, inlet temperature) or at a power cap.
    Recent kernels count power-limit events only when booted with
    ``int_pln_enable``; without it the *_power_limit_count files are absent.

    skipped: no thermal_throttle directories — a VM, a non-Intel CPU (AMD,
    Arm), or a kernel without x86 thermal monitoring.

    Fix: look at temperatures and fans (``ipmitool sdr type temperature``,
    ``sensors``), the power cap (``ipmitool dcmi power get_limit``), and
    compare with the other nodes (``ceiling check --cluster``); see
    thermal.throttling_now for whether it is happening now.
    """
    counters = read_counters(p)
    if not counters:
        return skipped("Throttle counters: not exposed on this node",
                       evidence=f"no /{CPU_DIR}/cpu*/thermal_throttle directories",
                       why="only Intel CPUs on bare metal have them: a VM, an AMD or Arm CPU, "
                           "or a kernel without x86 thermal monitoring")
    if not any(counters.values()):
        return skipped("Throttle counters: not readable",
                       evidence=f"{len(counters)} CPUs have /{CPU_DIR}/cpuN/thermal_throttle "
                                f"but none of its counters could be read as a number")
    t = tally(p, counters)
    thermal = t.total(("core_throttle_count", "package_throttle_count"))
    power = t.total(("core_power_limit_count", "package_power_limit_count"))
    since = _uptime(p)
    scope = (f"{_n(len(counters), 'CPU')}, {_n(len(t.cores), 'core')}, {_n(len(t.packages), 'package')} "
             f"(/{CPU_DIR}/cpu*/thermal_throttle)")
    pkg_lines = _package_lines(t)
    if thermal == 0 and power == 0:
        return ok("No thermal or power-limit throttling since boot",
                  evidence=f"every counter is 0 since boot, {since}; {scope}")
    worst = _worst_cores(t)
    evidence = "; ".join(pkg_lines)
    if worst:
        evidence += "; worst cores: " + "; ".join(worst)
    evidence += f"; counted since boot, {since}; {scope}"
    if thermal and power:
        title = f"Thermal throttling ({thermal} events) and power-limit throttling ({power}) since boot"
    elif thermal:
        title = f"Thermal throttling since boot: {thermal} events"
    else:
        title = f"Power-limit throttling since boot: {power} events"
    # Thermal events point at cooling, power-limit events at the power cap: the fix follows the counter.
    causes = [c for c, n in (("thermal", thermal), ("power_limit", power)) if n]
    fixes = {"thermal": "check temperatures, fans and air flow (ipmitool sdr type temperature; sensors)",
             "power_limit": "check the power cap and the BIOS power profile (ipmitool dcmi power get_limit)"}
    return warn(title, evidence=evidence,
                why="a throttled core runs below its normal clock while it lasts: compute-bound code slows down, "
                    "and in a parallel job the slowest node sets the pace; many events point at cooling or a power cap",
                fix="; ".join(fixes[c] for c in causes) + "; compare with other nodes (ceiling check --cluster); "
                    "thermal.throttling_now says whether it happens now",
                needs_root=True, cause=causes[0], data={"causes": causes, "thermal_events": thermal,
                                                        "power_limit_events": power})


# ---- now -----------------------------------------------------------------

def _deltas(before: Dict[int, Dict[str, int]], after: Dict[int, Dict[str, int]]) -> Dict[int, Dict[str, int]]:
    out: Dict[int, Dict[str, int]] = {}
    for cpu, vals in after.items():
        for name, v in vals.items():
            b = before.get(cpu, {}).get(name)
            if b is not None and v > b:
                out.setdefault(cpu, {})[name] = v - b
    return out


def _base_for(p: Probe, cpus: List[int]) -> Tuple[Optional[float], str]:
    """The base clock the allowed CPUs promise: the lowest cpufreq base_frequency
    among them (on a hybrid CPU the efficient cores' base is lower), else the
    machine's base clock."""
    bases = [v for v in (p.read_int(f"{CPU_DIR}/cpu{c}/cpufreq/base_frequency") for c in cpus) if v and v > 0]
    if bases:
        lo, hi = min(bases), max(bases)
        src = "cpufreq base_frequency" + (f" (lowest of the allowed CPUs; they range {lo / 1e6:.2f}-{hi / 1e6:.2f} GHz)"
                                          if lo != hi else "")
        return lo / 1e6, src
    c = p.machine.clocks
    return (c.base_ghz, c.base_source) if c.base_ghz else (None, "")


def _cpu_stall_us(p: Probe) -> Optional[int]:
    """Microseconds some task waited for a CPU since boot (/proc/pressure/cpu "some total=";
    Linux 4.20+ with PSI), None where not available."""
    for line in p.lines("proc/pressure/cpu"):
        if line.startswith("some"):
            m = re.search(r"\btotal=(\d+)", line)
            return int(m[1]) if m else None
    return None


def _best(*vals: Optional[float]) -> Optional[float]:
    got = [v for v in vals if isinstance(v, (int, float)) and v > 0]
    return max(got) if got else None


@check("thermal.throttling_now", live=True)
def throttling_now(p: Probe):
    """Throttling happening now: counters and the clock under a short all-core load.

    Reads the thermal_throttle counters (see thermal.throttle_events), keeps
    every allowed core busy for about 0.3 s with the dependent-add clock
    kernel (one core alone, then all allowed cores at once), and reads the
    counters again. Then compares the clock reached with the clocks the CPU
    promises. The best of this window and of the measurement ``ceiling``
    made when it described the machine is used, so a moment of competing
    load does not count as throttling.

    fail: a thermal or power-limit counter rose during the window (the CPU is
    throttling now), or the all-core clock is below 95% of the base clock
    (cpufreq base_frequency, else the model name or cpuid): under an
    all-core scalar load a CPU never runs below base unless it is throttled
    or power-capped. On a hybrid CPU the lowest base of the allowed cores is
    used. In a VM this is a warn: the hypervisor running other work on the
    same cores lowers it too; and it is a warn when other tasks waited for a
    CPU over 10% of the window (/proc/pressure/cpu, where the kernel has
    PSI): competing load lowers it as well (see load.*). Not judged under a
    cgroup CPU quota smaller than the allowed CPUs (the threads are then
    descheduled, which looks like a low clock).
    warn: the one-core clock below 85% of the maximum (cpufreq
    cpuinfo_max_freq): turbo is not reached (turbo off, a power-saving
    governor or energy-performance preference, or a power cap).
    skipped: nothing could be read or measured; parts that cannot be (no
    counters, no C core, no base or maximum clock) are named in the evidence.

    Fix: check cooling and the BMC's power cap (``ipmitool sdr type
    temperature``, ``ipmitool dcmi power get_limit``), the governor and turbo
    (cpu.governor, cpu.turbo); drain the node if it throttles under load.
    """
    cpus = p.cpus()
    j = _Now()
    before = read_counters(p)
    fresh, window_s, stall = _busy_window(p, cpus, j)
    _judge_counters(p, j, before, fresh, window_s)
    c = p.machine.clocks
    all_ghz = _best(fresh.get("measured_all_ghz") if fresh else None, c.measured_all_ghz)
    single_ghz = _best(fresh.get("measured_single_ghz") if fresh else None, c.measured_single_ghz)
    _judge_all_core(p, j, cpus, all_ghz, stall)
    _judge_one_core(j, c, single_ghz, all_ghz)
    if stall is not None:
        j.facts.append(f"tasks waited for a CPU {stall:.0%} of the window (/proc/pressure/cpu)")
    if fresh:
        j.facts.append(f"busy window on CPUs {format_cpulist(cpus)}; clocks are the best of this window and of the "
                       f"measurement made when the machine was described")
    elif all_ghz is not None or single_ghz is not None:
        j.facts.append("clocks from the measurement made when the machine was described")
    facts, notes, failures, warnings, causes, judged = j.facts, j.notes, j.failures, j.warnings, j.causes, j.judged

    evidence = "; ".join(facts + ([f"not judged: {'; '.join(notes)}"] if notes else []))
    why = ("a throttled or power-capped CPU runs every compute-bound phase slower now, and a node that throttles "
           "under load is the slow one in every parallel job")
    # Failures come first in the title, so their causes lead.
    causes = sorted(dict.fromkeys(causes), key=lambda c: c not in (ROSE, BELOW_BASE))
    fix = "; ".join(dict.fromkeys(NOW_FIXES[c] for c in causes))
    root = any(c in (ROSE, BELOW_BASE, ONE_CORE_SLOW) for c in causes)
    if failures:
        return fail("Throttling now: " + "; ".join(failures), evidence=evidence, why=why, fix=fix, needs_root=root,
                    cause=causes[0], data={"causes": causes})
    if warnings:
        return warn("Clock under load below what the CPU promises: " + "; ".join(warnings), evidence=evidence,
                    why=why, fix=fix, needs_root=root, cause=causes[0], data={"causes": causes})
    if not judged:
        return skipped("Throttling now: nothing could be compared", evidence=evidence)
    return ok("No throttling under a short all-core load", evidence=evidence)


@dataclass
class _Now:
    """What throttling_now's parts found."""
    notes: List[str] = field(default_factory=list)      # parts that could not be judged, and why
    facts: List[str] = field(default_factory=list)      # what was read and measured
    failures: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    causes: List[str] = field(default_factory=list)     # what made each failure or warning (NOW_FIXES)
    judged: int = 0                                     # comparisons actually made


def _busy_window(p: Probe, cpus: List[int], j: _Now) -> Tuple[Optional[Dict[str, Any]], float, Optional[float]]:
    """Keep the allowed CPUs busy for the window and measure the clocks; returns the
    measurement (None without one), the window's length (s) and the share of it other
    tasks waited for a CPU (/proc/pressure/cpu; None where the kernel has no PSI)."""
    fresh: Optional[Dict[str, Any]] = None
    stall0 = _cpu_stall_us(p)
    t0 = time.perf_counter()
    if cpus:
        try:
            fresh = measure_clock(cpus, single_cpus=[cpus[-1]], reps=WINDOW_REPS)
        except Exception as e:  # no C core or kernel, pinning refused, validation
            j.notes.append(f"no busy window ({type(e).__name__}: {e})")
    else:
        j.notes.append("no busy window (no allowed CPU known)")
    window_s = time.perf_counter() - t0
    stall1 = _cpu_stall_us(p)
    fresh = fresh if isinstance(fresh, dict) else None
    # Other tasks waiting for a CPU during the window: competing load, which
    # lowers the measured clock as throttling would.
    stall = (stall1 - stall0) / (window_s * 1e6) if (stall0 is not None and stall1 is not None and fresh
                                                   and window_s > 0 and stall1 >= stall0) else None
    return fresh, window_s, stall


def _judge_counters(p: Probe, j: _Now, before, fresh, window_s: float) -> None:
    """Thermal and power-limit counters that rose during the busy window."""
    if not before or not any(before.values()):
        j.notes.append("counters: no readable thermal_throttle counters (a VM, AMD or Arm)")
        return
    if fresh is None:
        j.notes.append("counters: not compared, there was no busy window")
        return
    rise = _deltas(before, read_counters(p))
    j.judged += 1
    if not rise:
        j.facts.append(f"no thermal_throttle counter rose during the {window_s:.2f} s all-core window "
                       f"({len(before)} CPUs)")
        return
    t = tally(p, rise)
    thermal = t.total(("core_throttle_count", "package_throttle_count"))
    power = t.total(("core_power_limit_count", "package_power_limit_count"))
    kinds = " and ".join(x for x in (f"{thermal} thermal" if thermal else "",
                                     f"{power} power-limit" if power else "") if x) or "throttle time"
    where = "; ".join(_package_lines(t) + [f"worst: {w}" for w in _worst_cores(t, 2)])
    j.failures.append(f"{kinds} events during a {window_s:.2f} s all-core load")
    j.causes.append(ROSE)
    j.facts.append(f"counters rose during the {window_s:.2f} s window: {where}")


def _judge_all_core(p: Probe, j: _Now, cpus: List[int], all_ghz: Optional[float], stall: Optional[float]) -> None:
    """The all-core clock against the base clock."""
    base, base_src = _base_for(p, cpus)
    quota = p.machine.cgroup.get("cpu_quota_cpus") if isinstance(p.machine.cgroup, dict) else None
    if all_ghz is None:
        j.notes.append("all-core clock: not measured")
    elif base is None:
        j.facts.append(f"all-core clock {all_ghz:.2f} GHz")
        j.notes.append("all-core clock vs base: no base clock known "
                       "(no cpufreq base_frequency, none in the model name)")
    elif isinstance(quota, (int, float)) and quota < len(cpus) - 0.5:
        j.facts.append(f"all-core clock {all_ghz:.2f} GHz, base {base:.2f} GHz ({base_src})")
        j.notes.append(f"all-core clock vs base: not judged under a cgroup CPU quota of {quota:g} CPUs "
                       f"for {len(cpus)} allowed CPUs (the threads are descheduled, which looks like a low clock)")
    else:
        ratio = all_ghz / base
        j.judged += 1
        j.facts.append(f"all-core clock {all_ghz:.2f} GHz = {ratio:.0%} of base {base:.2f} GHz ({base_src})")
        if ratio < ALL_BELOW_BASE:
            msg = f"all cores run at {all_ghz:.2f} GHz under load, {1 - ratio:.0%} below the {base:.2f} GHz base clock"
            if p.machine.virtualized:
                j.warnings.append(msg + f" (in a {p.machine.virtualized} VM: the hypervisor's other work "
                                        "lowers it too)")
                j.causes.append(HYPERVISOR)
            elif stall is not None and stall > CONTENDED:
                j.warnings.append(msg + f" (but tasks waited for a CPU {stall:.0%} of the window: competing load "
                                        f"lowers it too, see load.*)")
                j.causes.append(CONTENDED_LOAD)
            else:
                j.failures.append(msg)
                j.causes.append(BELOW_BASE)


def _judge_one_core(j: _Now, c, single_ghz: Optional[float], all_ghz: Optional[float]) -> None:
    """The one-core clock against the CPU's maximum."""
    if single_ghz is None:
        if all_ghz is not None:
            j.notes.append("one-core clock: not measured")
        return
    if not c.max_ghz:
        j.facts.append(f"one-core clock {single_ghz:.2f} GHz")
        j.notes.append("one-core clock vs max: no maximum clock known (no cpufreq cpuinfo_max_freq)")
        return
    r1 = single_ghz / c.max_ghz
    j.judged += 1
    j.facts.append(f"one-core clock {single_ghz:.2f} GHz = {r1:.0%} of max {c.max_ghz:.2f} GHz ({c.max_source})")
    if r1 < SINGLE_BELOW_MAX:
        j.warnings.append(f"one core reaches {single_ghz:.2f} GHz, {1 - r1:.0%} below the {c.max_ghz:.2f} GHz "
                          "maximum")
        j.causes.append(ONE_CORE_SLOW)
