"""The program's named regions (`ceiling_region_begin/end`, region.h; ceiling.region in Python) in
its profile: the interposer's "region" lines (csrc/interpose/region.c: per process, each region's
pairs ended and their time from begin to end, every thread) summed over the program's processes.
The time is inclusive: a region nested in another counts in both, and threads inside a region at
once each add theirs. ``ceiling scale --profile`` models each region's time over the counts
(analysis/scaling_calls.py). Pure functions over the records."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple


def summarise(records: Sequence[Any]) -> Tuple[List[Dict[str, Any]], int]:
    """([{name, calls, ns, processes, max_ns}] by time, most first; the region names the processes
    used past the interposer's table, uncounted)."""
    from ..probes.interpose_lines import Region, RegionsLost
    by: Dict[str, Dict[str, Any]] = {}
    lost = 0
    for r in records:
        lost += sum(ln.lost or 0 for ln in r.of("region", RegionsLost))
        mine: Dict[str, int] = {}
        for ln in r.of("region", Region):
            if ln.name is None or not ln.calls:
                continue
            row = by.setdefault(ln.name, {"name": ln.name, "calls": 0, "ns": 0, "processes": 0, "max_ns": 0})
            row["calls"] += ln.calls
            row["ns"] += ln.ns or 0
            mine[ln.name] = mine.get(ln.name, 0) + (ln.ns or 0)
        for name, ns in mine.items():
            by[name]["processes"] += 1
            by[name]["max_ns"] = max(by[name]["max_ns"], ns)
    return sorted(by.values(), key=lambda row: (-row["ns"], row["name"])), lost

