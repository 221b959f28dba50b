"""One core-to-core pair: two threads pinned on CPUs a and b bounce one cache line
(csrc/kernels/c2c.c, compare-and-swap on one shared counter); the one-way
latency is the round trip halved. bench/cores.py measures every pair of a
node with it; checks/placement.py takes a few short probes with it to see
whether a placement is stable.
"""
from __future__ import annotations

from typing import List, Optional

from .. import core
from ..machine.model import Machine

ROUND_TRIPS = 1000             # per repetition, core-to-core-latency's default
WARMUP = 2


def classify_pair(machine: Machine, a: int, b: int) -> Optional[str]:
    """What CPUs a and b share: "smt", "l2", "l3", "socket", "cross_socket"; None when a CPU is unknown.

    "socket" means the same socket with no L3 instance known to be shared.
    """
    ca, cb = machine.cpu(a), machine.cpu(b)
    if ca is None or cb is None or a == b:
        return None
    if ca.socket != cb.socket:
        return "cross_socket"
    if ca.core == cb.core and ca.core >= 0:
        return "smt"
    if ca.l2 is not None and ca.l2 == cb.l2:
        return "l2"
    if ca.l3 is not None and ca.l3 == cb.l3:
        return "l3"
    return "socket"


def measure_pair(k: core.Kernel, a: int, b: int, reps: int, round_trips: int = ROUND_TRIPS) -> core.RawResult:
    return core.run(k, iters=round_trips, reps=reps, warmup=WARMUP, nthreads=2, cpus=[a, b])


def one_way_ns(raw: core.RawResult) -> Optional[List[float]]:
    """One-way latency of each repetition (round trip / 2); None when the check failed."""
    if not raw.valid or raw.iters <= 0:
        return None
    return [t / (2 * raw.iters) * 1e9 for t in raw.times_s if t > 0] or None
