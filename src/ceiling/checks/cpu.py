"""CPU clock and power: the clock under load, governor, turbo, energy-performance
preference, C-states, SMT, and the same settings on every CPU."""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..sysfs import format_cpulist
from ..sysfs import parse_cpulist as cpulist
from .base import Probe, check, fail, ok, skipped, warn
from .thermal import ALL_BELOW_BASE


@check("cpu.clock")
def clock(p: Probe):
    """Clock under load against the base clock the OS reports.

    Reads the clock ceiling measured with a dependent add chain (one core,
    then all allowed cores busy; ``ceiling machine`` shows the method) and
    compares it with the base clock (cpufreq base_frequency, cpuid or the
    model name).

    warn: all-core clock more than 5% below the base clock (the threshold
    thermal.throttling_now uses). Thermal or power throttling, a power cap or
    a power-saving governor then lowers every compute-bound result. A clock
    well above base is turbo, and is fine: peaks are computed from the
    measured clock, not the nominal one.
    skipped: not measured, or no base clock known (common on AMD and Arm).
    The maximum clock is single-core turbo and the current one is an idle
    sample: an all-core clock below either is normal, so neither is used.

    Fix: check cooling and power capping (BMC / IPMI), the governor
    (cpu.governor) and the throttle counters (thermal.*).
    """
    c = p.machine.clocks
    if c.measured_all_ghz is None:
        return skipped("Clock under load: not measured", evidence=c.measured_method or "")
    ev = f"measured {c.measured_all_ghz:.2f} GHz with all allowed cores busy"
    if c.measured_single_ghz:
        ev += f", {c.measured_single_ghz:.2f} GHz on one core"
    if not c.base_ghz:
        known = "; ".join(f"{name} {v:.2f} GHz ({src})" for name, v, src in
                          (("maximum", c.max_ghz, c.max_source), ("current", c.current_ghz, c.current_source)) if v)
        return skipped(f"Clock under load: {c.measured_all_ghz:.2f} GHz, no base clock to compare with",
                       evidence=ev + "; no base clock known" + (f" (the OS reports {known})" if known else ""),
                       why="the maximum clock is single-core turbo and the current one an idle sample: an all-core "
                           "clock under load below either is normal, so only a base clock can show throttling")
    nominal = c.base_ghz
    ev += f"; the OS reports a base clock of {nominal:.2f} GHz ({c.base_source})"
    ratio = c.measured_all_ghz / nominal
    if ratio < ALL_BELOW_BASE:
        return warn(f"Cores run {1 - ratio:.0%} below the base clock under load", evidence=ev,
                    why="thermal or power throttling, a power cap, or a powersave governor lowers every compute-bound "
                        "result; "
                        "so do other processes sharing the cores while the clock was measured (see load.competing)",
                    fix="check for competing load, then cooling and power capping (BMC), the governor (cpu.governor) "
                        "and the throttle counters (thermal.*)", cause="clock_below_base",
                    data={"measured_ghz": c.measured_all_ghz, "base_ghz": nominal})
    note = (f", {ratio - 1:.0%} above the {nominal:.2f} GHz base clock (turbo; peaks from the base clock would be "
            f"wrong by as much)") if ratio > 1.05 else ""
    return ok(f"Cores run at {c.measured_all_ghz:.2f} GHz under load{note}", evidence=ev,
              why="peaks are computed from the measured clock, not the nominal one")


@check("cpu.governor")
def governor(p: Probe):
    """Frequency governor of every CPU (cpufreq/scaling_governor).

    warn: any CPU not on 'performance'. Power-saving governors (powersave,
    ondemand, schedutil, conservative) raise the clock late: short or bursty
    phases run slower and timings vary from run to run.
    skipped: no cpufreq (most VMs; the clock is then set by firmware or the
    hypervisor, and ceiling measures it instead).

    Fix: ``cpupower frequency-set -g performance`` (root), or the batch
    system's ``srun --cpu-freq=performance``.
    """
    govs: Dict[str, List[int]] = {}
    for c in online_cpus(p):
        g = p.read(f"{CPU}/cpu{c}/cpufreq/scaling_governor")
        if g is not None:
            govs.setdefault(g, []).append(c)
    if not govs:
        return skipped("CPU frequency governor: no cpufreq on this node",
                       evidence="/sys/devices/system/cpu/cpu*/cpufreq is absent (a VM, or no cpufreq driver)",
                       why="without cpufreq the clock is set by firmware or the hypervisor; ceiling measures it "
                           "instead",
                       cause="no_cpufreq")
    slow = {g: cs for g, cs in govs.items() if g != "performance"}
    evidence = "; ".join(f"{word(g)} on {cpus_text(cs)}" for g, cs in sorted(govs.items()))
    drv = p.read(f"{CPU}/cpu{min(min(cs) for cs in govs.values())}/cpufreq/scaling_driver")
    evidence += f" (driver {word(drv)})" if drv else ""
    if not slow:
        return ok("CPU frequency governor is 'performance'", evidence=evidence)
    return warn("CPU frequency governor is not 'performance'", evidence=evidence,
                why="power-saving governors ramp the clock up late: short or bursty phases run slower and timings vary",
                fix="cpupower frequency-set -g performance (or the batch system's --cpu-freq=performance)",
                needs_root=True, cause="power_saving_governor", data={"governors": sorted(slow)})


@check("cpu.turbo")
def turbo(p: Probe):
    """Turbo / boost state (intel_pstate/no_turbo, or cpufreq/boost).

    warn: turbo disabled. Cores then stay at the base clock: peak flop/s and
    single-thread speed are lower. Some sites disable it on purpose for
    reproducible timings; then the warning is expected.

    Fix: ``echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo`` or
    ``echo 1 > /sys/devices/system/cpu/cpufreq/boost`` (root).
    """
    no_turbo = p.read("sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = p.read("sys/devices/system/cpu/cpufreq/boost")
    if no_turbo is None and boost is None:
        return skipped("Turbo/boost state: not exposed by this kernel",
                       evidence="no intel_pstate/no_turbo and no cpufreq/boost")
    off = (no_turbo == "1") or (boost == "0")
    ev = f"intel_pstate/no_turbo={no_turbo}" if no_turbo is not None else f"cpufreq/boost={boost}"
    if off:
        # The switch that is off is the one to turn back on.
        if no_turbo == "1":
            cause, cmd = "intel_pstate_no_turbo", "echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo"
        else:
            cause, cmd = "cpufreq_boost_off", "echo 1 > /sys/devices/system/cpu/cpufreq/boost"
        return warn("Turbo/boost is disabled", evidence=ev,
                    why="cores stay at the base clock: peak flop/s and single-thread speed are lower",
                    fix=f"{cmd}, unless it is off on purpose for reproducible timings", needs_root=True, cause=cause)
    return ok("Turbo/boost is enabled", evidence=ev)


# -- shared readers ----------------------------------------------------------------
# Layouts follow the kernel's Documentation/admin-guide/pm/cpufreq.rst,
# intel_pstate.rst, amd-pstate.rst, cpuidle.rst and
# Documentation/ABI/testing/sysfs-devices-system-cpu.

CPU = "sys/devices/system/cpu"

# EPP raw values and the names intel_pstate / amd-pstate / cppc_cpufreq give them
# (0 = performance ... 255 = power; intel_pstate.rst "Energy vs performance hints").
EPP_NAMES = {0: "performance", 128: "balance_performance", 192: "balance_power", 255: "power"}


def online_cpus(p: Probe) -> List[int]:
    """Online CPUs from the machine model, else the cpuN directories present."""
    ids = [c.id for c in p.machine.cpus if c.online]
    if ids:
        return sorted(ids)
    return [int(n[3:]) for n in p.listdir(CPU) if re.fullmatch(r"cpu\d{1,6}", n)]


def offline_cpus(p: Probe) -> Tuple[List[int], str]:
    """CPUs that exist but are offline, and where that was read.

    /sys/devices/system/cpu/offline also lists possible-but-absent CPUs (a
    kernel built for 128 on a 16-CPU board says "16-127"), so it is
    intersected with 'present' (else with the cpuN directories)."""
    offline, present = p.read(f"{CPU}/offline"), p.read(f"{CPU}/present")
    there = cpulist(present) or [int(n[3:]) for n in p.listdir(CPU) if re.fullmatch(r"cpu\d{1,6}", n)]
    ids = (set(cpulist(offline)) & set(there)) | {c.id for c in p.machine.cpus if not c.online}
    src = [f"{name}={word(text, 60)}" for name, text in (("offline", offline), ("present", present)) if text]
    return sorted(ids), ", ".join(src)


def group(values: Dict[int, object]) -> Dict[object, List[int]]:
    """value -> CPUs having it, from CPU -> value."""
    out: Dict[object, List[int]] = {}
    for cpu, v in sorted(values.items()):
        out.setdefault(v, []).append(cpu)
    return out


def cpus_text(ids: List[int]) -> str:
    return f"CPU{'s' * (len(ids) != 1)} {format_cpulist(ids)}"


def word(text: str, limit: int = 40) -> str:
    """The first word of a sysfs value, shortened: garbled files stay one short line."""
    w = text.split()[0] if text.split() else ""
    return w if len(w) <= limit else w[:limit] + "…"


def epp_of(p: Probe, cpu: int) -> Optional[str]:
    """The CPU's energy-performance preference as a name ('performance',
    'balance_power', ...) or 'raw N'; None when the driver has none.

    intel_pstate and amd-pstate (active mode) write names; a raw value written
    by an admin reads back as a number; cppc_cpufreq (Arm, e.g. NVIDIA Grace)
    has only energy_performance_preference_val, a number."""
    base = f"{CPU}/cpu{cpu}/cpufreq"
    v = p.read(f"{base}/energy_performance_preference")
    if v is None:
        v = p.read(f"{base}/energy_performance_preference_val")
        if v is None:
            return None
    w = word(v)
    try:
        n = int(w, 0)
    except ValueError:
        return w
    return EPP_NAMES.get(n, f"raw {n}")


@check("cpu.epp")
def epp(p: Probe):
    """Energy-performance preference (EPP) of every CPU
    (cpufreq/energy_performance_preference; intel_pstate and amd-pstate in
    active mode, where the hardware picks the clock itself; cppc_cpufreq's
    energy_performance_preference_val on Arm servers).

    The EPP is a hint from 0 (performance) to 255 (power) that the CPU's own
    frequency controller (Intel HWP, AMD CPPC) follows. Values other than
    'performance' (balance_performance, the usual default, balance_power,
    power, or a raw number above 0) make the core ramp its clock up more
    slowly and settle lower: short phases, barriers and communication-bound
    codes run slower and timings vary.

    warn: any CPU not at 'performance'.
    skipped: no EPP files (acpi-cpufreq, passive mode, most VMs).

    Fix: ``cpupower frequency-set -g performance`` (intel_pstate then pins EPP
    to performance), or ``echo performance | tee
    /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference``
    (root), or a tuned profile such as throughput-performance.
    """
    prefs = {c: e for c in online_cpus(p) if (e := epp_of(p, c)) is not None}
    if not prefs:
        return skipped("Energy-performance preference: not exposed",
                       evidence="no cpufreq/energy_performance_preference (acpi-cpufreq, passive mode, or a VM)",
                       why="the CPU's own frequency control (HWP/CPPC) is not in use or not visible here",
                       cause="no_epp")
    drv = p.read(f"{CPU}/cpu{min(prefs)}/cpufreq/scaling_driver")
    groups = group(prefs)
    ev = "; ".join(f"{v} on {cpus_text(cs)}" for v, cs in groups.items())
    ev += f" (driver {word(drv)})" if drv else ""
    slow = {v: cs for v, cs in groups.items() if v != "performance"}
    if not slow:
        return ok("Energy-performance preference is 'performance'", evidence=ev)
    n = sum(len(cs) for cs in slow.values())
    return warn(f"Energy-performance preference is not 'performance' on {n} of {len(prefs)} CPUs",
                evidence=ev,
                why="with a balance/power preference the core raises its clock late and settles lower: short phases, "
                    "barriers and communication run slower and timings vary",
                fix="cpupower frequency-set -g performance, or echo performance | tee "
                    "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference", needs_root=True,
                cause="power_saving_epp", data={"preferences": sorted(str(v) for v in slow)})


DEEP_US = 50  # exit latency above which a C-state is 'deep' for HPC waits


def idle_states(p: Probe, cpu: int) -> List[Tuple[str, Optional[int], bool]]:
    """(name, exit latency in µs or None, enabled) per cpuidle state of one CPU.
    A missing 'disable' file (kernels before 3.x) means enabled."""
    base = f"{CPU}/cpu{cpu}/cpuidle"
    out = []
    for s in p.listdir(base):
        if not re.fullmatch(r"state\d{1,3}", s):
            continue
        name = word(p.read(f"{base}/{s}/name") or s)
        lat = p.read_int(f"{base}/{s}/latency")
        if lat is not None and not 0 <= lat < 10 ** 9:
            lat = None
        out.append((name, lat, p.read(f"{base}/{s}/disable") != "1"))
    return out


@check("cpu.cstates")
def cstates(p: Probe):
    """Idle states (C-states) and the idle driver
    (/sys/devices/system/cpu/cpuidle/current_driver: intel_idle, acpi_idle,
    haltpoll, none; per CPU cpuN/cpuidle/stateK/{name,latency,disable}).

    A CPU that waits (MPI, barriers, I/O completion, a lock) goes idle; the
    deeper its idle state, the longer it takes to wake: the state's exit
    latency is added to every such short wait, and deep package states also
    slow the other cores' wake-ups.

    warn: a state with exit latency above 50 µs is enabled on some CPU (names
    the deepest, its latency and the CPUs).
    ok: only shallow states (POLL, C1, C1E, ...), or no cpuidle driver
    ('none': the CPU idles with HLT/WFI, a shallow state).
    skipped: no cpuidle in sysfs (some VMs and containers), or a driver but no
    per-CPU state files.

    Fix: ``cpupower idle-set -D 50`` (disables states slower than 50 µs; root),
    or the kernel parameters intel_idle.max_cstate=1 / processor.max_cstate=1,
    or a tuned profile (latency-performance) that holds /dev/cpu_dma_latency.
    Deep states save power on idle nodes; sites often keep them and disable
    them per job.
    """
    driver = p.read(f"{CPU}/cpuidle/current_driver")
    gov = p.read(f"{CPU}/cpuidle/current_governor") or p.read(f"{CPU}/cpuidle/current_governor_ro")
    per_cpu = {c: s for c in online_cpus(p) if (s := idle_states(p, c))}
    head = f"idle driver {word(driver)}" if driver else "no cpuidle/current_driver"
    head += f", governor {word(gov)}" if gov else ""
    if not per_cpu:
        if driver is None:
            return skipped("C-states: no cpuidle on this node", evidence="no /sys/devices/system/cpu/cpuidle",
                           why="idle states are managed by the hypervisor or firmware, or cpuidle is not built in")
        if word(driver) == "none":
            return ok("C-states: no cpuidle driver; CPUs idle with the default shallow state (HLT/WFI)", evidence=head)
        return skipped(f"C-states: driver {word(driver)}, but no per-CPU state files",
                       evidence=head + "; no cpuN/cpuidle/state* readable")
    first = min(per_cpu)
    listing = ", ".join(f"{n} {'?' if lat is None else lat} µs{'' if en else ' (disabled)'}"
                        for n, lat, en in per_cpu[first])
    ev = f"{head}; states of CPU{first}: {listing}"
    deep: Dict[Tuple[str, int], List[int]] = {}
    for c, states in per_cpu.items():
        for n, lat, en in states:
            if en and lat is not None and lat > DEEP_US:
                deep.setdefault((n, lat), []).append(c)
    if not deep:
        return ok(f"C-states: only shallow states enabled (exit latency <= {DEEP_US} µs)", evidence=ev)
    (name, lat), cpus = max(deep.items(), key=lambda kv: kv[0][1])
    ev += "; enabled deep states: " + "; ".join(f"{n} ({l} µs) on {cpus_text(cs)}" for (n, l), cs in
                                                sorted(deep.items(), key=lambda kv: kv[0][1]))
    # The boot parameter belongs to the idle driver in use.
    param = {"intel_idle": "intel_idle.max_cstate=1", "acpi_idle": "processor.max_cstate=1"}.get(
        word(driver) if driver else "", "intel_idle.max_cstate=1 / processor.max_cstate=1")
    return warn(f"Deep C-states enabled: {name} with {lat} µs exit latency on {len(cpus)} of {len(per_cpu)} CPUs",
                evidence=ev,
                why="waking from a deep state adds its exit latency to every short wait: MPI messages, barriers, "
                    "locks and I/O completions take longer and vary",
                fix=f"cpupower idle-set -D {DEEP_US} (disables states slower than {DEEP_US} µs), or boot with "
                    f"{param}", needs_root=True, cause="deep_cstates",
                data={"driver": word(driver) if driver else None, "state": name, "exit_latency_us": lat})


@check("cpu.smt")
def smt(p: Probe):
    """Simultaneous multithreading (Hyper-Threading): /sys/devices/system/cpu/smt/
    {control,active} and the threads per core found in the topology.

    Informational: ok whether SMT is on, off, forced off or not supported.
    Compute-bound codes often run best with one thread per core (two threads
    share one core's vector units and caches); memory- or latency-bound codes
    can gain from SMT. Try both: one rank or thread per core
    (OMP_PLACES=cores, srun --hint=nomultithread) against all threads.

    warn: SMT is on but some cores have fewer threads online than others
    while CPUs are offline: part of the node's siblings were switched off by
    hand, an inconsistent node whose per-core results differ.

    Fix: bring the siblings back (echo 1 > /sys/devices/system/cpu/cpuN/online)
    or switch SMT off as a whole (echo off > /sys/devices/system/cpu/smt/control,
    or nosmt on the kernel command line); root.
    """
    m = p.machine
    control = p.read(f"{CPU}/smt/control")
    active = p.read_int(f"{CPU}/smt/active")
    ctl = word(control) if control else None
    threads: Dict[Tuple[int, int], int] = {}
    for c in m.cpus:
        if c.online and c.core >= 0:
            threads[(c.socket, c.core)] = threads.get((c.socket, c.core), 0) + 1
    tpc = max(threads.values(), default=m.smt or 1)
    ev = ", ".join(x for x in (f"smt/control={ctl}" if ctl else "no smt/control",
                               f"smt/active={active}" if active is not None else "",
                               f"{tpc} thread{'s' * (tpc != 1)} per core in the topology") if x)
    offline, _ = offline_cpus(p)
    on = ctl == "on" or active == 1 or tpc > 1
    short = sorted(k for k, n in threads.items() if n < tpc)
    if on and tpc > 1 and short and offline:
        cpus = sorted(c.id for c in m.cpus if c.online and (c.socket, c.core) in set(short))
        return warn(f"SMT is on but {len(short)} cores have siblings offline", evidence=ev +
                    f"; {cpus_text(cpus)} run with fewer than {tpc} threads per core; offline {cpus_text(offline)}",
                    why="some cores run one thread and others two: per-core results differ and a placement "
                        "that assumes uniform cores is wrong",
                    fix="bring the siblings back online (echo 1 > /sys/devices/system/cpu/cpuN/online) or switch "
                        "SMT off as a whole (echo off > /sys/devices/system/cpu/smt/control)", needs_root=True,
                    cause="siblings_offline")
    why = ("compute-bound codes often run best with one thread per core; memory- or latency-bound codes can gain "
           "from SMT: try both (OMP_PLACES=cores, srun --hint=nomultithread)")
    if on and tpc > 1:
        return ok(f"SMT is on ({tpc} threads per core)", evidence=ev, why=why)
    if ctl == "forceoff":
        return ok("SMT is off (forced: nosmt=force on the kernel command line)", evidence=ev)
    if ctl == "off" or (ctl == "on" and active == 0):
        return ok("SMT is off", evidence=ev)
    if ctl == "notsupported":
        return ok("SMT: not available (the CPU has none, or it is off in the BIOS)", evidence=ev)
    if ctl == "notimplemented":
        return ok(f"SMT: the kernel has no SMT control here; {tpc} thread{'s' * (tpc != 1)} per core", evidence=ev)
    return ok(f"SMT: {tpc} thread{'s' * (tpc != 1)} per core", evidence=ev)


def ghz(khz: int) -> str:
    return f"{khz / 1e6:.2f} GHz"


def khz(p: Probe, rel: str) -> Optional[int]:
    """A cpufreq frequency in kHz; None when absent or not a plausible clock (0 < f < 100 GHz)."""
    v = p.read_int(rel)
    return v if v is not None and 0 < v < 100_000_000 else None


@check("cpu.consistency")
def consistency(p: Probe):
    """The same clock settings on every CPU: online state, scaling_max_freq
    against cpuinfo_max_freq, and scaling_min_freq (cpufreq files under
    /sys/devices/system/cpu/cpuN/cpufreq, /sys/devices/system/cpu/offline).
    Governors and energy-performance preferences are judged per CPU by
    cpu.governor and cpu.epp, which name the CPUs that differ.

    fail: CPUs offline (present but not online; names them) while SMT is not
    switched off as a whole: the node has fewer cores than it should (a CPU
    taken offline after a machine check, or by hand), and the batch system
    may not know it: a node to drain (``check --nhc``).

    warn:
    - CPUs offline with SMT switched off (smt/control off or forceoff): the
      siblings are offline by design; named so that the count is no surprise;
    - a CPU capped below its hardware maximum (scaling_max_freq <
      cpuinfo_max_freq; names the CPUs and the cap): a leftover power cap or a
      manual limit slows those cores;
    - minimum clocks that differ between CPUs: some cores then run slower
      than others and the slowest rank sets the pace.
    Cores of different types (hybrid and big.LITTLE parts) have different
    hardware limits; that alone is not an inconsistency.
    ok: uniform. With no cpufreq only the online state is compared.

    Fix: ``cpupower -c all frequency-set -u MAX -d MIN``,
    echo 1 > /sys/devices/system/cpu/cpuN/online (root), or find the tool
    that set the limit (tuned, power capping, a previous job's epilogue).
    """
    cpus = online_cpus(p)
    caps, mins, limits = {}, {}, {}
    for c in cpus:
        base = f"{CPU}/cpu{c}/cpufreq"
        smax, cmax = khz(p, f"{base}/scaling_max_freq"), khz(p, f"{base}/cpuinfo_max_freq")
        smin, cmin = khz(p, f"{base}/scaling_min_freq"), khz(p, f"{base}/cpuinfo_min_freq")
        if cmax and cmax > 0:
            limits[c] = cmax
            if smax is not None and smax < cmax:
                caps[c] = (smax, cmax)
        if smin is not None:
            mins[c] = "at the hardware minimum" if cmin is not None and smin <= cmin else f"raised to {ghz(smin)}"
    problems, notes, causes, fixes = [], [], [], []
    offline, src = offline_cpus(p)
    smt_off = (p.read(f"{CPU}/smt/control") or "").strip() in ("off", "forceoff")
    if offline:
        problems.append(f"{cpus_text(offline)} offline")
        causes.append("smt_off" if smt_off else "cpus_offline")
        if not smt_off:
            fixes.append("echo 1 > /sys/devices/system/cpu/cpuN/online for the offline CPUs (after a machine "
                         "check, look at ras.* first), or drain the node")
        notes.insert(0, f"offline from {src or 'the machine topology'}"
                        + ("; SMT is switched off (smt/control)" if smt_off else ""))
    if caps:
        for (smax, cmax), cs in group(caps).items():
            problems.append(f"{cpus_text(cs)} capped at {ghz(smax)} (hardware maximum {ghz(cmax)})")
        causes.append("capped")
        fixes.append("cpupower -c all frequency-set -u MAX to lift the cap; find what set it (tuned, power "
                     "capping, a previous job's epilogue)")
    g = group(mins)
    if len(g) > 1:
        problems.append("minimum clock differs: " + "; ".join(f"{v} on {cpus_text(cs)}" for v, cs in g.items()))
        causes.append("min_clock_differs")
        fixes.append("cpupower -c all frequency-set -d MIN to set the same minimum everywhere")
    elif g:
        notes.append(f"minimum clock {next(iter(g))}")
    kinds = group(limits)
    if len(kinds) > 1:
        notes.append("hardware maxima differ by core type: " +
                     "; ".join(f"{ghz(v)} on {cpus_text(cs)}" for v, cs in kinds.items()))
    elif kinds:
        notes.append(f"hardware maximum {ghz(next(iter(kinds)))}")
    n = len(cpus)
    base_ev = f"{n} online CPU{'s' * (n != 1)}" + ("" if mins or limits else "; no cpufreq to compare")
    if problems:
        judge = fail if offline and not smt_off else warn
        if causes == ["smt_off"]:
            fixes.append("nothing, if SMT is off on purpose (the siblings stay offline); else echo on > "
                         "/sys/devices/system/cpu/smt/control")
        return judge(f"CPUs are not configured alike: {problems[0]}"[:160],
                    evidence="; ".join([base_ev] + problems + notes),
                    why="cores that are offline, capped or set differently run slower than the rest, and the "
                        "slowest rank sets the pace of a parallel job",
                    fix="; ".join(fixes), needs_root=True, cause=causes[0], data={"causes": causes})
    return ok(f"All {n} online CPUs have the same clock settings", evidence="; ".join([base_ev] + notes))
