"""What the thread-scaling runs of `ceiling profile --experiments` say (experiments/scaling.py).

Per thread count n, from the medians over rounds: the speedup S(n) = T(1) / T(n), the
parallel efficiency S(n) / n, the serial fraction by Karp and Flatt, e = (1/S - 1/n) /
(1 - 1/n), and the CPUs the program kept busy, its CPU time over its wall time. At the
largest count N:

- the program ignores OMP_NUM_THREADS: it kept as many CPUs busy at 1 as at N (within
  IGNORED): no verdict, it is not an OpenMP program (or sets its threads itself);
- it scales: efficiency at least SCALES;
- contention: efficiency below that while its N threads kept at least BUSY x N CPUs
  busy: the threads run but do not speed up, so they compete for something they
  share (memory bandwidth or the last-level cache, most often) or repeat work;
- serial or waiting: efficiency below that and the threads idle: a serial part (the
  Karp-Flatt fraction), locks, or imbalance between the threads.

Speedups above n (caches adding up) are reported as they are. How sure: "medium" when
the rounds of each count agree within SPREAD of their median, else "low".
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Sequence

from ..results.model import OK, WARN, Finding
from .scaling_models import karp_flatt

SCALES = 0.80
BUSY = 0.80
IGNORED = 0.25          # busy CPUs at N within 25 % of those at 1: OMP_NUM_THREADS changed nothing
SPREAD = 0.10


def classify(times: Dict[int, Sequence[float]], cpu_s: Dict[int, Sequence[float]]) -> Dict[str, Any]:
    """{"kind": scales|contention|serial|ignored|None, "points": [{threads, median_s, speedup,
    efficiency, serial_fraction, busy_cpus}], "words", "confidence", "why" (kind None)}."""
    med = {n: statistics.median(v) for n, v in times.items() if v}
    if 1 not in med or len(med) < 2:
        return {"kind": None, "why": "the runs on one thread or on several did not finish"}
    busy = {n: statistics.median(c) / statistics.median(times[n]) for n, c in cpu_s.items()
            if c and times.get(n) and statistics.median(times[n]) > 0}
    points: List[Dict[str, Any]] = []
    for n in sorted(med):
        s = med[1] / med[n] if med[n] > 0 else None
        e = karp_flatt(s, n)
        points.append({"threads": n, "median_s": med[n], "speedup": s,
                       "efficiency": s / n if s else None, "serial_fraction": e, "busy_cpus": busy.get(n)})
    top = points[-1]
    n, s, eff = top["threads"], top["speedup"], top["efficiency"]
    words = "; ".join(f"{p['threads']} thread{'s' if p['threads'] != 1 else ''}: {p['median_s']:.3g} s"
                      + (f", speedup {p['speedup']:.2f}" if p["threads"] > 1 and p["speedup"] else "")
                      + (f", {p['busy_cpus']:.2f} CPUs busy" if p["busy_cpus"] is not None else "")
                      for p in points)
    spread = max((max(v) - min(v)) / statistics.median(v) for v in times.values() if v)
    out: Dict[str, Any] = {"points": points, "words": words, "confidence": "medium" if spread <= SPREAD else "low",
                           "spread": spread}
    b1, bn = busy.get(1), busy.get(n)
    if b1 and bn and abs(bn - b1) <= IGNORED * b1:
        return {**out, "kind": "ignored", "why": f"the program kept {b1:.2f} CPUs busy on 1 thread and {bn:.2f} on "
                                                  f"{n}: OMP_NUM_THREADS does not set its threads"}
    if eff is not None and eff >= SCALES:
        return {**out, "kind": "scales"}
    if bn is not None and bn >= BUSY * n:
        return {**out, "kind": "contention"}
    return {**out, "kind": "serial"}


def finding(result: Dict[str, Any]) -> Finding:
    """The scaling runs' finding (the bound itself is left to the other experiments and the
    counters: scaling alone does not tell memory from a serial part for certain)."""
    kind = result.get("kind")
    if not kind or kind == "ignored":
        return Finding(id="profile.scaling", status=OK, title="Thread scaling: no verdict",
                       evidence=result.get("why", ""), data={"kind": kind})
    top = result["points"][-1]
    n, s, e = top["threads"], top["speedup"], top["serial_fraction"]
    evidence = f"{result['words']}; confidence {result['confidence']}"
    if kind == "scales":
        return Finding(id="profile.scaling", status=OK,
                       title=f"Thread scaling: {s:.2f}x on {n} threads ({top['efficiency']:.0%} efficiency)",
                       evidence=evidence, data=result)
    if kind == "contention":
        return Finding(
            id="profile.scaling", status=WARN,
            title=f"Thread scaling: {s:.2f}x on {n} threads while {top['busy_cpus']:.2f} CPUs were busy: the threads "
                  "compete for something they share",
            evidence=evidence,
            why="Threads that run but do not speed up the program wait inside the hardware they share: memory "
                "bandwidth, the last-level cache, or a contended line; or they repeat work.",
            fix="Check the memory bound (hardware counters, or the co-runner experiments above); place threads over "
                "every memory channel (OMP_PROC_BIND=spread, OMP_PLACES=cores); keep per-thread data apart "
                "(no false sharing).", data=result)
    return Finding(
        id="profile.scaling", status=WARN,
        title=f"Thread scaling: {s:.2f}x on {n} threads, the threads often idle"
              + (f" (serial fraction {e:.0%}, Karp-Flatt)" if e is not None else ""),
        evidence=evidence,
        why="Threads that wait do not compute: a serial part of the program, locks, or work split unevenly "
            "between threads caps the speedup (Amdahl).",
        fix="Parallelise the serial part, shorten critical sections, balance the work (schedule(dynamic) for "
            "uneven loops).", data=result)
