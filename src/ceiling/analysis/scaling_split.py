"""Why a scaling curve bends (`ceiling scale --profile`): each run's time split, as `ceiling
profile` measures it (analysis/profile_run.py: the /proc sampler's three-way split of the threads'
time, the interposer's time inside I/O and MPI calls), gathered per point and compared from the
smallest to the largest count. Pure functions over the member runs' metrics.

Per run, from its metrics: on a CPU, waiting for a CPU (runnable), waiting off a CPU (``app.time.*``,
shares of the threads' time), inside MPI calls (``app.mpi.time``, the ranks' mean share),
the ranks' load balance (``app.mpi.load_balance``, a percentage: imbalance is 1 minus its fraction), and the time inside
I/O calls over the wall time (``app.io.*.time``; over 100 % when several threads read at once).
MPI and I/O cut across the three-way split: an MPI call polls on a CPU, an I/O call waits off one.
The part that grows most, by at least GROWS percentage points, is named as what bends the curve.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence

from ..results.model import OK, WARN, Finding

PARTS = (("on_cpu", "on a CPU"), ("runq", "waiting for a CPU"), ("off_cpu", "waiting off a CPU"),
         ("mpi", "inside MPI calls"), ("imbalance", "MPI load imbalance"), ("io", "inside I/O calls (of wall time)"))
GROWS = 0.05            # a part whose share grows by less than 5 points between the ends explains no bend
IO_CALLS = ("read", "write", "meta", "sync")


def of_run(run) -> Optional[Dict[str, float]]:
    """One profiled run's shares (0..1) by PARTS key, None when it was not profiled."""
    def value(name: str) -> Optional[float]:
        m = run.metric(name)
        return m.value if m is not None and m.value is not None else None
    on = value("app.time.on_cpu")
    if on is None:
        return None
    out = {"on_cpu": on / 100, "runq": (value("app.time.runq") or 0.0) / 100,
           "off_cpu": (value("app.time.off_cpu") or 0.0) / 100}
    mpi, lb = value("app.mpi.time"), value("app.mpi.load_balance")
    if mpi is not None:
        out["mpi"] = mpi / 100
    if lb is not None:
        out["imbalance"] = 1 - lb / 100               # the metric is a percentage, as app.mpi.time
    wall = run.application.wall_s if run.application else None
    io = [value(f"app.io.{c}.time") for c in IO_CALLS]
    if wall and any(v is not None for v in io):
        out["io"] = sum(v or 0.0 for v in io) / wall
    return out


def split(profiles: Dict[float, List[Dict[str, float]]], resource: str):
    """(rows, findings): per count the median share of each part over its runs, and a finding
    naming the part that grows most from the smallest to the largest count (or saying none does)."""
    rows: List[Dict[str, Any]] = []
    for p in sorted(profiles):
        runs = profiles[p]
        if not runs:
            continue
        row: Dict[str, Any] = {"p": p, "runs": len(runs)}
        for key, _ in PARTS:
            vals = [r[key] for r in runs if key in r]
            if vals:
                row[key] = statistics.median(vals)
        rows.append(row)
    if len(rows) < 2:
        return rows, []
    first, last = rows[0], rows[-1]
    growth = [(last[k] - first[k], k, words) for k, words in PARTS if k in first and k in last]
    if not growth:
        return rows, []
    up, key, words = max(growth)
    words = words[0].upper() + words[1:]
    ends = f"{first['p']:g} and {last['p']:g} {resource}"
    if up < GROWS:
        return rows, [Finding(
            id="scale.split_steady", status=OK,
            title=f"The time split stays the same from {first['p']:g} to {last['p']:g} {resource}",
            evidence="; ".join(f"{w} {first[k]:.0%} -> {last[k]:.0%}" for k, w in PARTS if k in first and k in last),
            why=f"No part of the time grows by {GROWS:.0%} of it or more between {ends}: the curve's shape comes "
                "from the work itself, not from a part that takes over.")]
    return rows, [Finding(
        id="scale.bends", status=WARN,
        title=f"{words} grows from {first[key]:.0%} at {first['p']:g} {resource} to {last[key]:.0%} "
              f"at {last['p']:g}",
        evidence="; ".join(f"{r['p']:g}: {r[key]:.0%}" for r in rows if key in r),
        why=_WHY[key], fix=_FIX[key], data={"part": key, "from": first[key], "to": last[key]})]


_WHY = {"on_cpu": "More of the threads' time is on a CPU: the work per thread does not shrink as the count grows "
                  "(replicated work, spinning at barriers).",
        "runq": "The threads wait for a CPU: more threads than free CPUs (oversubscription or other load).",
        "off_cpu": "The threads sleep: they wait for each other (locks, barriers), for I/O or for messages.",
        "mpi": "Communication takes over from computation: each rank's share of the work shrinks, its messages do "
               "not (latency-bound collectives grow with log p or p).",
        "imbalance": "Some ranks get more work than others, and the rest wait for them.",
        "io": "I/O takes a growing part: the file system does not scale with the count."}
_FIX = {"on_cpu": "ceiling profile -- the program at the largest count: where the extra CPU time goes.",
        "runq": "Keep the count at or below the free CPUs (ceiling check names other load).",
        "off_cpu": "ceiling profile -- the program at the largest count: which waits grow.",
        "mpi": "ceiling profile -- mpirun ...: the MPI calls and message sizes that grow; fewer, larger messages.",
        "imbalance": "Balance the decomposition; ceiling profile shows the per-rank times.",
        "io": "Fewer, larger requests, or one writer per node; ceiling bench storage for the file system's ceiling."}


def lines(rows: Sequence[Dict[str, Any]], resource: str) -> List[str]:
    """One line per point: its shares."""
    return [f"{r['p']:g} {resource} split ({r['runs']} run{'s' if r['runs'] != 1 else ''}): "
            + ", ".join(f"{w} {r[k]:.0%}" for k, w in PARTS if k in r) for r in rows]
