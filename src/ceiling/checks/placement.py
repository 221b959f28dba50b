"""Placement stability: does the same pair of CPUs keep the same distance?

On bare metal the core-to-core latency of a pair of CPUs is a property of the
chip. In a VM, or under a busy hypervisor, the virtual CPUs are threads the
host may move between physical cores, so the same pair can be 30 ns apart one
minute and 140 ns the next. Then every later figure depends on when it was
taken. The check repeats a short ping-pong (the c2c_pingpong kernel of
bench/cores.py) a few times and compares the medians.
"""
from __future__ import annotations

import statistics
import time
from typing import List, Optional, Sequence, Tuple

from .. import core
from ..probes.c2c import WARMUP, classify_pair, measure_pair, one_way_ns
from ..errors import CoreError
from ..machine.model import Machine
from ..results.model import Finding
from .base import Probe, check, ok, skipped, warn

RATIO_WARN = 1.5            # max / min of the per-probe medians above which placement is unstable
SPAN_S = 0.5                # the probes are spread over this long
PROBE_S = 0.06              # each probe runs about this long
BUDGET_S = 0.8              # no probe starts later than this after the first
CALIBRATE_REPS = 10         # repetitions of the first, untimed probe that sizes the others
MIN_REPS, MAX_REPS = 10, 2000

WHY = ("the host moves virtual CPUs between physical cores (or shares them with other guests), so "
       "communication latency, cache sharing and bandwidth change from one minute to the next: every "
       "later figure depends on when it was taken, and runs cannot be compared")
FIX = ("ask for dedicated, pinned vCPUs (a VM type with dedicated hosts or CPU pinning; libvirt "
       "<vcpupin>, OpenStack hw:cpu_policy=dedicated), or run on bare metal")
BARE_METAL_WHY = ("the same pair of cores measured at different latencies: every later figure depends on when it "
                  "was taken, and runs cannot be compared")
# On bare metal no one moves a CPU: the latency of a fixed pair changes with what else runs
# there and with the cores' clocks.
BARE_METAL_FIX = ("on bare metal the pair's latency changes with other load and with the cores' clocks: see "
                  "load.competing and noise.os for who else ran, cpu.governor and cpu.cstates for the clock; "
                  "measure on an idle node")


def advice(virtualized: Optional[str]) -> Tuple[str, str]:
    """(cause, fix) of unstable placement: the hypervisor moving vCPUs, or, on bare
    metal, other load and changing clocks."""
    return ("vcpu_migration", FIX) if virtualized else ("bare_metal_variation", BARE_METAL_FIX)


def pick_pair(machine: Machine, cpus: Sequence[int]) -> Optional[Tuple[int, int]]:
    """The first CPU and the first after it on another physical core (else simply the second)."""
    cpus = list(cpus)
    if len(cpus) < 2:
        return None
    a = cpus[0]
    ca = machine.cpu(a)
    for b in cpus[1:]:
        cb = machine.cpu(b)
        if ca is not None and cb is not None and ca.core >= 0 and (cb.socket, cb.core) != (ca.socket, ca.core):
            return a, b
    return a, cpus[1]


def judge(pair: Tuple[int, int], medians_ns: Sequence[float], level: Optional[str] = None,
          span_s: Optional[float] = None, spreads: Sequence[Tuple[float, float]] = (),
          virtualized: Optional[str] = None) -> Finding:
    """The placement.stability finding from the per-probe medians of one-way latency (pure)."""
    a, b = pair
    where = f"CPUs {a} and {b}" + (f" ({level.replace('_', ' ')})" if level else "")
    vals = [v for v in medians_ns if v and v > 0]
    if len(vals) < 2:
        return skipped("Placement stability: too few valid probes",
                       evidence=f"{where}: {len(vals)} valid probe(s) of {len(medians_ns)}")
    lo, hi = min(vals), max(vals)
    ratio = hi / lo
    ev = [f"{where}: one-way latency, median of each of {len(vals)} probes: "
          + ", ".join(f"{v:.0f}" for v in vals) + " ns"]
    if spreads:
        ev.append("range within probes: " + ", ".join(f"{x:.0f}-{y:.0f}" for x, y in spreads) + " ns")
    ev.append(f"max/min {ratio:.2f} (warn above {RATIO_WARN:g})"
              + (f", over {span_s:.2f} s" if span_s else ""))
    if virtualized:
        ev.append(f"{virtualized} guest")
    if ratio > RATIO_WARN:
        cause, fix = advice(virtualized)
        return warn(f"Placement is unstable: the same CPU pair measured between {lo:.0f} and {hi:.0f} ns "
                    f"({ratio:.1f}x)",
                    evidence="; ".join(ev), why=WHY if virtualized else BARE_METAL_WHY, fix=fix, cause=cause)
    return ok(f"Placement is stable: {lo:.0f}-{hi:.0f} ns between CPUs {a} and {b} over {len(vals)} probes",
              evidence="; ".join(ev))


def probe_pair(pair: Tuple[int, int], probes: int, span_s: float = SPAN_S, probe_s: float = PROBE_S,
               budget_s: float = BUDGET_S) -> Tuple[List[float], List[Tuple[float, float]], float]:
    """Run ``probes`` ping-pongs between the pair, one every span_s / probes seconds.

    Each probe is sized to last about ``probe_s`` from the wall time of the one
    before (a loaded node stretches them); no probe starts after ``budget_s``.
    Returns each probe's median and (min, max) of one-way ns, and the seconds
    taken. A probe whose kernel check failed gives no value. Raises CoreError."""
    k = core.find("c2c_pingpong")
    a, b = pair
    t = time.monotonic()
    measure_pair(k, a, b, CALIBRATE_REPS)
    rep_s = (time.monotonic() - t) / (CALIBRATE_REPS + WARMUP)
    step = span_s / probes
    medians, ranges = [], []
    t0 = time.monotonic()
    for i in range(probes):
        wait = t0 + i * step - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if time.monotonic() - t0 > budget_s:
            break
        reps = int(min(MAX_REPS, max(MIN_REPS, probe_s / max(rep_s, 1e-9))))
        t = time.monotonic()
        vals = one_way_ns(measure_pair(k, a, b, reps))
        rep_s = (time.monotonic() - t) / (reps + WARMUP)
        if vals:
            medians.append(statistics.median(vals))
            ranges.append((min(vals), max(vals)))
    return medians, ranges, time.monotonic() - t0


@check("placement.stability", live=True)
def stability(p: Probe):
    """Placement stability: the same CPU pair, measured several times, should keep its latency.

    Runs the core-to-core ping-pong (c2c_pingpong, the kernel of ``ceiling
    bench cores``) between the first allowed CPU and the next one on another
    physical core, ``stability_probes`` times (5 by default), each about
    60 ms, spread over half a second; each probe gives the median one-way
    latency of its repetitions.

    warn: the largest probe median is more than 1.5 times the smallest: the
    hypervisor (or a busy host) is moving virtual CPUs between physical
    cores, or sharing them. In a VM the same pair has been seen to jump
    between about 30 and 140 ns. ok: within 1.5x. skipped: fewer than two
    allowed CPUs, the C core missing, or fewer than two valid probes.

    Why: when placement changes under the program, communication latency,
    cache sharing and memory bandwidth change with it; every later figure
    depends on when it was taken and runs cannot be compared. Heavy
    competing load (load.competing) can also stretch single probes.

    Fix: dedicated, pinned vCPUs (a VM type on dedicated hosts, libvirt
    <vcpupin>, OpenStack hw:cpu_policy=dedicated), or bare metal.
    """
    pair = pick_pair(p.machine, p.cpus())
    if pair is None:
        return skipped("Placement stability: needs two CPUs", evidence=f"CPUs this process may use: {p.cpus()}")
    n = max(2, int(p.options.stability_probes or 0))
    try:
        medians, ranges, took = probe_pair(pair, n)
    except CoreError as e:
        return skipped("Placement stability: the probe could not run", evidence=str(e))
    return judge(pair, medians, classify_pair(p.machine, *pair), took, ranges, p.machine.virtualized)
