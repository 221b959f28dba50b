"""OS noise: how much of each CPU the system takes from a program that only computes.

The probe is csrc/kernels/noise.c (selfish detour): one pinned thread per
allowed CPU reads the clock in a tight loop, all in one window, and every gap
between two reads longer than a threshold is a detour. Around the window the
check takes deltas of /proc/interrupts and /proc/softirqs on those CPUs and of
every process's CPU time, so the finding names who made the noise: the answer
PowerTOP gives, without root.

``parse_counts`` and ``deltas`` are pure functions of the file texts, ``judge``
a pure function of a measured :class:`Window`; only ``measure`` touches the
node.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .. import core
from ..errors import CoreError
from ..results.model import Finding
from . import load
from .base import Probe, check, ok, skipped, warn

NOISE_WARN = 0.01          # share of a CPU lost to detours above which we warn
DETOUR_WARN_S = 1e-3       # a single detour longer than this: warn
THRESHOLD_NS = 1000        # a gap between clock reads longer than this is a detour ...
THRESHOLD_LOOP_FACTOR = 10  # ... or 10 clock reads, where reading the clock is slow
CALIBRATE_S = 0.02         # short first window that measures the cost of a clock read
TOP_DETOURS = 5            # longest detours kept per CPU
TOP_SOURCES = 5            # interrupt / softirq sources and processes named
WORST_CPUS = 8             # CPUs whose largest detours are listed

WHY = ("every detour stops the thread it lands on; a parallel program that synchronises "
       "(MPI collectives, OpenMP barriers) waits at each step for its unluckiest thread, so noise "
       "on any CPU slows all of them, and more so the more nodes a job spans")
IRQ_RATE = 100             # device interrupts per second on the noisy CPUs that count as a cause (irq.MIN_RATE)
EXPLAINS = 0.5             # other processes whose CPU time is at least half the detour time caused it

# What made the noise, and the fix for each (data["cause"]; several can hold at once, the
# first is the main one). Chosen from the evidence in ``causes``, never all offered at once.
COMPETING, INTERRUPTS, KERNEL, HYPERVISOR = "competing_process", "interrupts", "kernel", "hypervisor"

Counts = Dict[str, Tuple[str, Dict[int, int]]]   # label -> (description, {cpu: count})


# -- /proc/interrupts and /proc/softirqs ----------------------------------------

def parse_counts(text: Optional[str]) -> Counts:
    """Per-CPU counters of /proc/interrupts or /proc/softirqs.

    Both files start with a header naming the CPU columns ("CPU0 CPU1 ...",
    online CPUs only), then one row per source: "LABEL:" and one count per
    column, then (interrupts only) a description. Rows may have fewer counts
    than columns (ERR:, MIS:). Anything else is skipped; no header gives {}.
    """
    out: Counts = {}
    if not text:
        return out
    cols: Optional[List[int]] = None
    for line in text.splitlines():
        toks = line.split()
        if not toks:
            continue
        if cols is None:
            if all(t.startswith("CPU") and t[3:].isdigit() for t in toks):
                cols = [int(t[3:]) for t in toks]
            continue
        label, sep, glued = toks[0].partition(":")
        if not sep or not label:
            continue
        rest = ([glued] if glued else []) + toks[1:]
        counts: Dict[int, int] = {}
        i = 0
        while i < len(rest) and i < len(cols) and rest[i].isdigit():
            counts[cols[i]] = int(rest[i])
            i += 1
        if label not in out:
            out[label] = (" ".join(rest[i:]), counts)
    return out


_TRIGGERS = ("edge", "level", "fasteoi", "simple", "bad")


def source_name(label: str, desc: str) -> str:
    """A readable name: "IRQ 36 (virtio1-req.0)", "LOC (Local timer interrupts)", "TIMER"."""
    if not desc:
        return label
    if label.isdigit():
        # "IO-APIC 2-edge timer", "PCI-MSI 524288-edge nvme0q1", "GICv3 27 Level arch_timer":
        # the device names follow the trigger type; older kernels write "IO-APIC-edge timer".
        toks = desc.split()
        cut = max((i for i, t in enumerate(toks) if t.lower().rsplit("-", 1)[-1] in _TRIGGERS), default=-1)
        dev = " ".join(toks[cut + 1:]) if 0 <= cut < len(toks) - 1 else desc
        return f"IRQ {label} ({dev})"
    return f"{label} ({desc})"


@dataclass(frozen=True)
class Source:
    name: str
    count: int                    # events on the measured CPUs during the window
    per_cpu: Dict[int, int]
    irq: str = ""                 # the IRQ number of a device interrupt ("" for LOC, RES, softirqs)


def deltas(before: Counts, after: Counts, cpus: Sequence[int]) -> List[Source]:
    """Events of each source on ``cpus`` between two readings, largest first; sources
    with none are left out. A counter that went backwards (CPU hotplug) counts 0."""
    want = set(cpus)
    out = []
    for label, (desc, a) in after.items():
        if label not in before:
            continue
        b = before[label][1]
        per = {c: a[c] - b[c] for c in a if c in want and c in b and a[c] > b[c]}
        total = sum(per.values())
        if total > 0:
            out.append(Source(source_name(label, desc), total, per, irq=label if label.isdigit() else ""))
    out.sort(key=lambda s: (-s.count, s.name))
    return out


# -- the measurement -------------------------------------------------------------

@dataclass
class Window:
    """One OS-noise window and what happened around it."""

    result: core.NoiseResult
    interval_s: float                                      # between the two readings of the counters
    irqs: Optional[List[Source]] = None                    # None: /proc/interrupts not readable
    softirqs: Optional[List[Source]] = None                # None: /proc/softirqs not readable
    procs: List[Tuple[int, str, float]] = field(default_factory=list)   # (pid, comm, share of a CPU)
    procs_note: str = ""                                   # why the process list is empty or partial
    kernel_pids: Set[int] = field(default_factory=set)     # kernel threads among procs (children of kthreadd)


def measure(p: Probe, cpus: Sequence[int], duration_s: float, own_pids: Sequence[int] = ()) -> Window:
    """Run the probe on ``cpus`` for ``duration_s`` and take the deltas around it.

    Raises CoreError when the probe cannot run (core not built, a CPU not pinnable)."""
    cpus = list(cpus)
    # The cost of one clock read sets the threshold: 1 µs, or 10 reads where the
    # clocksource has no fast path and each read is a system call.
    cal = core.noise_detour(cpus[:1], CALIBRATE_S, THRESHOLD_NS, 0)
    loop_ns = cal.cpus[0].min_gap_s * 1e9
    if loop_ns <= 0:
        raise CoreError("the clock did not advance between two reads: its resolution is too coarse "
                        "to see detours (clocksource jiffies?)")
    threshold = max(THRESHOLD_NS, int(THRESHOLD_LOOP_FACTOR * loop_ns))
    root = str(p.root)
    s0 = load.sample(root)
    i0, q0 = p.read("proc/interrupts"), p.read("proc/softirqs")
    t0 = time.monotonic()
    res = core.noise_detour(cpus, duration_s, threshold, TOP_DETOURS)
    t1 = time.monotonic()
    i1, q1 = p.read("proc/interrupts"), p.read("proc/softirqs")
    s1 = load.sample(root)
    w = Window(res, t1 - t0)
    ib, ia = parse_counts(i0), parse_counts(i1)
    if ib and ia:
        w.irqs = deltas(ib, ia, cpus)
    qb, qa = parse_counts(q0), parse_counts(q1)
    if qb and qa:
        w.softirqs = deltas(qb, qa, cpus)
    if s0.available and s1.available:
        w.procs = load.consumers(s0, s1, own_pids)
        w.kernel_pids = {pid for pid, t in s1.procs.items() if pid == load.KTHREADD or t.ppid == load.KTHREADD}
        if s1.unreadable:
            w.procs_note = f"{s1.unreadable} processes not readable (hidepid)"
    else:
        w.procs_note = s0.reason or s1.reason or "process accounting not readable"
    return w


# -- the verdict ------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _us(s: float) -> str:
    us = s * 1e6
    return f"{us:.0f}" if us >= 10 else f"{us:.1f}"


def _rate(n: int, interval_s: float) -> str:
    r = n / interval_s
    return f"{r:.0f}/s" if r >= 10 else f"{r:.1f}/s"


def _sources(kind: str, srcs: Optional[List[Source]], interval_s: float, many_cpus: bool) -> str:
    if srcs is None:
        return f"{kind}: not readable"
    if not srcs:
        return f"{kind}: none on these CPUs"
    parts = []
    for s in srcs[:TOP_SOURCES]:
        extra = [_rate(s.count, interval_s)] if interval_s > 0 else []
        if many_cpus and s.per_cpu:
            cpu, n = max(s.per_cpu.items(), key=lambda kv: (kv[1], -kv[0]))
            if n > s.count / 2:
                extra.append(f"most on CPU {cpu}")
        parts.append(f"{s.name} {s.count}" + (f" [{', '.join(extra)}]" if extra else ""))
    return f"{kind} on these CPUs: " + ", ".join(parts)


def causes(w: Window, cpus: Sequence[Any], virtualized: Optional[str] = None
           ) -> Tuple[List[str], Dict[str, Any], str, bool]:
    """What made the noise on ``cpus`` (the noisy ones), from the window's own evidence:
    (causes, their data, the fix for them, whether it needs root).

    Other processes are the cause when their CPU time is at least half the detour time
    (a process that runs takes the CPU from the probe's thread for as long); device
    interrupts when they reach the noisy CPUs at 100/s or more; else, in a VM, the
    hypervisor; else the kernel's own housekeeping (timer tick, kernel threads, softirqs).
    """
    noise_s = sum(c.fraction for c in cpus) * w.result.duration_s
    named = [x for x in w.procs if x[2] >= load.MIN_SHARE]
    users = [x for x in named if x[0] not in w.kernel_pids]
    kthreads = [x for x in named if x[0] in w.kernel_pids]
    out: List[str] = []
    data: Dict[str, Any] = {}
    fixes: List[str] = []
    root = False
    proc_s = sum(x[2] for x in users) * w.interval_s
    if users and proc_s >= EXPLAINS * noise_s:
        out.append(COMPETING)
        data["processes"] = [{"pid": pid, "comm": comm, "cpu_share": share} for pid, comm, share in users[:TOP_SOURCES]]
        who = ", ".join(f"pid {pid} ({comm}, {share:.0%} of a CPU)" for pid, comm, share in users[:TOP_SOURCES])
        fixes.append(f"the noise is other processes: {who}; stop them or move them off these CPUs (kill, or "
                     f"taskset -cp on the CPUs you do not use), or measure when the node is idle (an exclusive "
                     f"allocation: srun --exclusive); a system service belongs to the admin")
    ids = {c.cpu for c in cpus}
    dev = [s for s in (w.irqs or []) if s.irq and any(s.per_cpu.get(c, 0) for c in ids)]
    rate = sum(n for s in dev for c, n in s.per_cpu.items() if c in ids) / w.interval_s if w.interval_s > 0 else 0.0
    if dev and rate >= IRQ_RATE:
        out.append(INTERRUPTS)
        top = dev[:TOP_SOURCES]
        data["interrupts"] = [{"irq": s.irq, "name": s.name, "count": s.count} for s in top]
        data["interrupt_rate_per_s"] = rate
        others = sorted({c for s in w.irqs or [] for c in s.per_cpu} - ids)
        # Every CPU measured is a compute CPU: one must be kept out of the job to take them.
        spare = (f"echo {others[0]} > /proc/irq/{top[0].irq}/smp_affinity_list" if others else
                 f"keep one CPU out of the job (e.g. CPU {min(ids)}) and route them there: echo {min(ids)} > "
                 f"/proc/irq/{top[0].irq}/smp_affinity_list")
        fixes.append(f"move the device interrupts off these CPUs ({', '.join(s.name for s in top)}): "
                     f"{spare}, or irqbalance with IRQBALANCE_BANNED_CPULIST set to the compute CPUs")
        root = True
    if not out and virtualized:
        out.append(HYPERVISOR)
        data["hypervisor"] = virtualized
        fixes.append(f"no process or interrupt here explains it: in a VM ({virtualized}) the host takes the time; "
                     f"ask for dedicated (pinned) vCPUs")
    if not out:
        out.append(KERNEL)
        if kthreads:
            data["kernel_threads"] = [{"pid": pid, "comm": comm, "cpu_share": share} for pid, comm, share in kthreads]
        # CPU 0 (the boot CPU) keeps the housekeeping: it cannot be made tickless.
        comp = [c for c in sorted(ids) if c != 0]
        cpulist = ",".join(str(c) for c in comp)
        head = ("no other process or device interrupt explains it: it is the kernel's own housekeeping "
                "(timer tick, kernel threads, softirqs)")
        if comp:
            fixes.append(f"{head}; keep it off the compute CPUs with the kernel parameters nohz_full={cpulist} "
                         f"rcu_nocbs={cpulist} (or isolcpus=), leaving CPU 0 for housekeeping")
            root = True
        else:
            fixes.append(f"{head} on CPU 0, which keeps that work whatever the kernel parameters: keep the job's "
                         f"busiest thread off CPU 0 (taskset, srun --cpu-bind)")
    return out, data, "; ".join(fixes), root


def judge(w: Window, virtualized: Optional[str] = None) -> Finding:
    """The noise.os finding for a measured window (pure); ``virtualized`` names the
    hypervisor when the node is a VM."""
    r = w.result
    if not r.valid:
        return skipped("OS noise: the probe's own check failed", evidence=r.msg or "invalid result")
    cs = sorted(r.cpus, key=lambda c: c.cpu)
    noisy = [c for c in cs if c.fraction > NOISE_WARN]
    long_ = [c for c in cs if c.max_gap_s > DETOUR_WARN_S and c.detours > 0]
    worst = max(cs, key=lambda c: (c.fraction, -c.cpu))
    longest = max(cs, key=lambda c: (c.max_gap_s if c.detours else 0.0, -c.cpu))
    longest_s = longest.max_gap_s if longest.detours else 0.0

    ev = [f"noise per CPU over {r.duration_s:g} s (detour time / window): "
          + ", ".join(f"CPU {c.cpu} {_pct(c.fraction)}" for c in cs)]
    ranked = sorted(cs, key=lambda c: (-c.fraction, -c.max_gap_s, c.cpu))[:WORST_CPUS]
    det = [f"CPU {c.cpu}: {' '.join(_us(g[1]) for g in c.top)} ({c.detours} detour{'s' if c.detours != 1 else ''})"
           for c in ranked if c.top]
    if det:
        ev.append("largest detours (µs): " + ", ".join(det))
    else:
        ev.append("no detours")
    many = len(cs) > 1
    ev.append(_sources("interrupts", w.irqs, w.interval_s, many))
    ev.append(_sources("softirqs", w.softirqs, w.interval_s, many))
    named = [x for x in w.procs if x[2] >= load.MIN_SHARE][:TOP_SOURCES]
    if named:
        ev.append("other processes that ran: " + ", ".join(f"pid {pid} ({comm}) {share:.0%} of a CPU"
                                                          for pid, comm, share in named))
    else:
        ev.append("other processes that ran: none above 1% of a CPU")
    if w.procs_note:
        ev.append(w.procs_note)
    loop_ns = min(c.min_gap_s for c in cs) * 1e9
    ev.append(f"probe: detour = gap between clock reads > {r.threshold_ns} ns; one read costs "
              f"{loop_ns:.0f} ns; {sum(c.reads for c in cs)} reads")

    # The same figures as data, for a cluster's comparison of nodes and for plots.
    data = {"window_s": r.duration_s, "threshold_ns": r.threshold_ns,
            "cpus": [{"cpu": c.cpu, "fraction": c.fraction, "detours": c.detours, "max_detour_s": c.max_gap_s,
                      "reads": c.reads} for c in cs]}
    if not noisy and not long_:
        title = (f"OS noise {_pct(worst.fraction)} at most (CPU {worst.cpu})"
                 + (f", largest detour {_us(longest_s)} µs (CPU {longest.cpu})" if longest_s else ""))
        f = ok(title, evidence="; ".join(ev), why=WHY)
        f.data = data
        return f
    problems = []
    if noisy:
        names = ", ".join(f"CPU {c.cpu} {_pct(c.fraction)}"
                          for c in sorted(noisy, key=lambda c: (-c.fraction, c.cpu))[:WORST_CPUS])
        more = f" and {len(noisy) - WORST_CPUS} more" if len(noisy) > WORST_CPUS else ""
        problems.append(f"OS noise above {NOISE_WARN:.0%} on {len(noisy)} of {len(cs)} CPUs ({names}{more})")
    if long_:
        names = ", ".join(f"CPU {c.cpu} {c.max_gap_s * 1e3:.1f} ms"
                          for c in sorted(long_, key=lambda c: (-c.max_gap_s, c.cpu))[:WORST_CPUS])
        more = f" and {len(long_) - WORST_CPUS} more" if len(long_) > WORST_CPUS else ""
        problems.append(f"detours over {DETOUR_WARN_S * 1e3:g} ms ({names}{more})")
    found, cdata, fix, root = causes(w, sorted({*noisy, *long_}, key=lambda c: c.cpu), virtualized)
    data.update(cdata, causes=found)
    return warn("; ".join(problems), evidence="; ".join(ev), why=WHY, fix=fix, needs_root=root,
                cause=found[0], data=data)


@check("noise.os", live=True)
def os_noise(p: Probe):
    """OS noise on every allowed CPU, and who makes it (selfish detour, no root).

    One thread pinned on each CPU this process may use reads the clock in a
    tight loop, all CPUs in one window of ``noise_s`` seconds (2 s by
    default). A gap between two reads longer than 1 µs (or ten times the cost
    of one read, where reading the clock is slow) is a detour: time the CPU
    spent on something else. Reported per CPU: the noise fraction (detour
    time / window) and the longest detours in µs. Around the window the
    check takes deltas of /proc/interrupts and /proc/softirqs on those CPUs
    (the top sources with counts and rates) and of every process's CPU time
    (/proc/[pid]/stat; the processes that ran, with their share of a CPU),
    which names the source without root, as PowerTOP would.

    warn: any CPU loses more than 1% of its time, or any single detour is
    longer than 1 ms; the CPUs are named. ok: below both. skipped: the C core
    is missing, a CPU cannot be pinned, or the probe's own consistency check
    failed (the reason is given). The per-CPU fractions are in the evidence,
    ready to paste into a ticket. On a busy node the noise is the competing
    load itself (see load.competing).

    Why: a parallel program that synchronises (MPI collectives, OpenMP
    barriers) waits at each step for its unluckiest thread, so noise on any
    CPU slows every thread, and more so the more nodes a job spans. Typical
    sources: the timer tick, device interrupts routed to compute CPUs,
    monitoring agents and daemons, kernel threads, and in a VM the
    hypervisor (steal time).

    Fix, for the cause the evidence shows (data["cause"], all of them in
    data["causes"]): other processes whose CPU time is at least half the
    detour time (competing_process): stop them or move them off these CPUs,
    or measure on an idle node (no root needed for your own processes);
    device interrupts at 100/s or more on the noisy CPUs (interrupts): move
    them with /proc/irq/N/smp_affinity_list or irqbalance's banned CPU list
    (root); neither, in a VM (hypervisor): ask for dedicated vCPUs; neither,
    on bare metal (kernel: the timer tick, kernel threads, softirqs):
    nohz_full= rcu_nocbs= (or isolcpus=) for the compute CPUs (root).
    """
    cpus = p.cpus()
    if not cpus:
        return skipped("OS noise: no CPU to measure", evidence="the affinity mask and the online CPU list are empty")
    if not p.options.noise_s or p.options.noise_s <= 0:
        return skipped("OS noise: not measured", evidence=f"noise window {p.options.noise_s} s")
    try:
        w = measure(p, cpus, p.options.noise_s)
    except CoreError as e:
        return skipped("OS noise: the probe could not run", evidence=str(e))
    return judge(w, p.machine.virtualized)
