"""Clocks: what the system says (cpufreq, the brand string, cpuid) and what
the cores actually reach (measured with the C core's dependent-add chain).

Read figures say where they came from in ``Clocks.*_source``. The measured
figures need no root, no cpufreq and no counters, so they are the ones
peaks use: in a VM or with a power cap the nominal clock is not the clock.

The chain's adds are divided by each thread's own CPU time, not the wall
time: another process sharing a CPU makes the thread wait in the run queue
while the wall clock runs, and adds over wall time then read as a lower
clock (3.68 instead of 4.37 GHz beside one busy process on a 2-CPU VM).
How long the threads waited is measured too; a wait over WAIT_DISTURBED of
the windows marks the figure (``Clocks.measured_disturbed``), and peaks say so.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..sysfs import Root
from .cpuinfo import CpuInfo, nominal_ghz
from .model import Clocks

CPU_DIR = "sys/devices/system/cpu"

# Many short repetitions, best taken: a 5 ms window is long against the
# timer (ns) and a barrier (us), and short enough that on a shared node some
# windows run without a preemption; the best of them is the clock itself.
# With 5 windows of 50 ms and other load on a 2-CPU VM, every window was
# preempted and the "all cores busy" clock came out at a third of the real one.
TARGET_REP_S = 0.005
REPS = 40
WARMUP_REPS = 10      # about 50 ms of load first, for the clock to ramp up
# On bigger nodes the single-core clock is sampled on this many CPUs.
MAX_SINGLE_CPUS = 8
# The threads off a CPU (run queue, steal) for more than this share of the timed windows:
# other processes shared the CPUs, and the measurement says so. The barrier and the clock
# reads cost microseconds of 5 ms windows, well under it.
WAIT_DISTURBED = 0.05


def _khz_to_ghz(v: Optional[int]) -> Optional[float]:
    return round(v / 1e6, 3) if v and v > 0 else None


def read_clocks(root: Root, info: CpuInfo, online: List[int],
                cpuid: Optional[Callable[[int, int], Tuple[int, int, int, int]]] = None
                ) -> Tuple[Clocks, Dict[str, str]]:
    """Base, max and current clocks from cpufreq, else /proc/cpuinfo, else cpuid leaf 0x16.

    ``cpuid`` is only given on a live x86 system; leaf 0x16 is Intel's
    "processor frequency information" (base and max MHz as marketed).
    """
    c = Clocks()
    unknowns: Dict[str, str] = {}
    base, top, cur = [], [], []
    for cpu in online:
        d = f"{CPU_DIR}/cpu{cpu}/cpufreq"
        b = root.read_int(f"{d}/base_frequency")
        m = root.read_int(f"{d}/cpuinfo_max_freq")
        s = root.read_int(f"{d}/scaling_cur_freq") or root.read_int(f"{d}/cpuinfo_cur_freq")
        if b:
            base.append(b)
        if m:
            top.append(m)
        if s:
            cur.append(s)
    if base:
        c.base_ghz, c.base_source = _khz_to_ghz(max(base)), "cpufreq base_frequency"
    if top:
        c.max_ghz, c.max_source = _khz_to_ghz(max(top)), "cpufreq cpuinfo_max_freq"
    if cur:
        c.current_ghz = _khz_to_ghz(round(sum(cur) / len(cur)))
        c.current_source = f"cpufreq scaling_cur_freq (mean of {len(cur)} CPUs)"

    if c.base_ghz is None:
        nom = nominal_ghz(info.model_name)
        if nom:
            c.base_ghz, c.base_source = round(nom, 3), "/proc/cpuinfo model name (nominal)"
    if c.current_ghz is None and info.mhz:
        on = set(online)
        vals = [v for k, v in info.mhz.items() if k in on] or list(info.mhz.values())
        if vals:
            c.current_ghz = round(sum(vals) / len(vals) / 1000.0, 3)
            c.current_source = "/proc/cpuinfo cpu MHz (mean; often the nominal or the hypervisor's figure)"

    if cpuid is not None and (c.base_ghz is None or c.max_ghz is None):
        try:
            from .isa import leaf16_mhz
            b16, m16 = leaf16_mhz(cpuid)
        except Exception:  # the core may be missing: cpuid is a bonus
            b16 = m16 = None
        if c.base_ghz is None and b16:
            c.base_ghz, c.base_source = b16 / 1000.0, "cpuid leaf 0x16 (base)"
        if c.max_ghz is None and m16:
            c.max_ghz, c.max_source = m16 / 1000.0, "cpuid leaf 0x16 (max)"

    if c.base_ghz is None:
        unknowns["clocks.base_ghz"] = "no cpufreq base_frequency, no clock in the model name, no cpuid leaf 0x16"
    if c.max_ghz is None:
        unknowns["clocks.max_ghz"] = "no cpufreq cpuinfo_max_freq and no cpuid leaf 0x16"
    return c, unknowns


# ---- measured ------------------------------------------------------------

def _kernel():
    from .. import core
    return core, core.find("clock_add", "scalar")


def _calibrate(core, k, cpus: List[int], target_s: float) -> int:
    """Adds per thread so that one repetition on ``cpus`` lasts about ``target_s``."""
    iters = 1 << 20
    for _ in range(12):
        raw = core.run(k, iters=iters, reps=1, warmup=0, nthreads=len(cpus), cpus=cpus)
        t = raw.times_s[0]
        if t >= target_s * 0.5:
            return max(1, int(iters * target_s / t))
        iters = iters * 8 if t < target_s / 16 else max(iters + 1, int(iters * target_s / max(t, 1e-9)))
    return iters


def _ghz(core, k, cpus: List[int], iters: int, reps: int) -> Tuple[float, List[float], Optional[float]]:
    """Best (highest) GHz over ``reps``, every repetition's value, and the share of the timed
    windows the slowest thread spent off its CPU (None when its CPU time could not be read).

    Each repetition's GHz is its adds over the slowest thread's own CPU time; where the core
    cannot read thread CPU time, over the wall time, as before."""
    raw = core.run(k, iters=iters, reps=reps, warmup=WARMUP_REPS, nthreads=len(cpus), cpus=cpus,
                   flags=core.F_THREAD_CPU)
    if not raw.valid:
        from ..errors import ValidationError
        raise ValidationError(f"clock kernel output did not validate: {raw.msg}")
    per_thread = raw.iters / max(1, raw.nthreads)
    pairs = [(w, c) for w, c in zip(raw.times_s, raw.cpu_s) if w > 0 and c > 0]
    if pairs and len(pairs) == len(raw.times_s):
        vals = [per_thread / c / 1e9 for _, c in pairs]
        wall = sum(w for w, _ in pairs)
        waited: Optional[float] = max(0.0, 1.0 - sum(c for _, c in pairs) / wall)
    else:
        vals = [per_thread / t / 1e9 for t in raw.times_s if t > 0]
        waited = None
    return max(vals), vals, waited


def _disturbed(waits: Dict[str, Optional[float]]) -> str:
    """Words for the measurements whose threads waited for a CPU, "" when none did."""
    hit = [f"{what}: the threads waited for a CPU {w:.0%} of the time" for what, w in waits.items()
           if w is not None and w > WAIT_DISTURBED]
    if not hit:
        return ""
    return ("other processes shared the CPUs (" + "; ".join(hit) + "); the clock is taken over the threads' "
            "own CPU time, which waiting does not lower")


def _sample(cpus: List[int], n: int) -> List[int]:
    if len(cpus) <= n:
        return list(cpus)
    step = (len(cpus) - 1) / (n - 1)
    return sorted({cpus[round(i * step)] for i in range(n)})


def measure_clock(cpus: Sequence[int], *, domain_cpus: Optional[Sequence[int]] = None,
                  single_cpus: Optional[Sequence[int]] = None, reps: int = REPS,
                  target_s: float = TARGET_REP_S) -> Dict[str, Any]:
    """Measure the clock the cores reach under load with the "clock_add" kernel.

    One dependent 1-cycle add per cycle per thread, so adds per second is
    the clock. ``cpus``: every CPU this process may use (all busy at once for
    measured_all_ghz). ``single_cpus``: where to measure one busy core at a
    time (default: ``cpus``; up to 8 each, a spread sample beyond).
    ``domain_cpus``: one NUMA domain's CPUs, busy together, when the node has
    more than one. Raises CoreError when the C core or the kernel is missing.
    """
    cpus = list(cpus)
    if not cpus:
        raise ValueError("measure_clock needs at least one CPU")
    core, k = _kernel()
    singles = _sample(list(single_cpus or cpus), MAX_SINGLE_CPUS)
    iters = _calibrate(core, k, singles[:1], target_s)
    per_cpu: Dict[int, float] = {}
    per_cpu_vals: Dict[int, List[float]] = {}
    waits: Dict[str, Optional[float]] = {}
    for c in singles:
        per_cpu[c], per_cpu_vals[c], waits[f"CPU {c} alone"] = _ghz(core, k, [c], iters, reps)
    all_ghz, all_vals, waits["all CPUs"] = _ghz(core, k, cpus, iters, reps)
    fastest = max(per_cpu, key=per_cpu.get)
    out: Dict[str, Any] = {
        "measured_single_ghz": round(per_cpu[fastest], 3),
        "measured_all_ghz": round(all_ghz, 3),
        "measured_per_cpu_ghz": {c: round(v, 3) for c, v in per_cpu.items()},
        "measured_domain_ghz": None,
        "single_cpu": fastest,
        "single_values_ghz": [round(v, 4) for v in per_cpu_vals[fastest]],
        "all_values_ghz": [round(v, 4) for v in all_vals],
    }
    if domain_cpus and 1 < len(domain_cpus) < len(cpus):
        dom, _, waits["one NUMA domain"] = _ghz(core, k, list(domain_cpus), iters, reps)
        out["measured_domain_ghz"] = round(dom, 3)
    sampled = "" if len(singles) == len(single_cpus or cpus) else f" (a sample of {len(singles)})"
    out["measured_method"] = (
        f"dependent 1-cycle integer add chain (C core kernel clock_add), {iters} adds per thread "
        f"per repetition (~{target_s * 1e3:.0f} ms), best of {reps} after {WARMUP_REPS} warm-up, "
        f"over each thread's own CPU time{'' if None not in waits.values() else ' where read, else wall time'}; "
        f"single: each of CPUs {singles}{sampled} "
        f"alone; all: {len(cpus)} CPUs at once")
    out["measured_disturbed"] = _disturbed(waits)
    return out
