"""A model per MPI call and per named region over a scaling study (`ceiling scale --profile`), as
Extra-P makes one per call path: each profiled run's time inside the call (the interposer's MPI
counts) or the region (``ceiling_region_begin/end``, analysis/profile_regions.py) at each count,
fitted with the same performance-model normal form and selection as the whole program's time
(scaling_models.series_model, given as ``fit`` by scaling_study), with its prediction at 2x and
4x the largest count.

Each profiled point keeps them as ``Application.calls`` (verbs/scale.py). The value per run follows
Extra-P's own reading of profiles (its Cube reader's ``--scaling``): under strong scaling the time
summed over the processes (the resources the call consumes), under weak scaling the mean over every
process of the program, those that never made the call included (each process's time is what a
user waits for when every one does the same work). A profiled run that never made a call, or
never ended a region, spent 0 s in it. A region's time is inclusive (a nested region counts in
its parent too, and so do the MPI calls inside it). A series that series_model cannot fit (a zero
at some count, too few counts, a step no law follows) gets no model, with the reason. Pure
functions over the member runs.
"""
from __future__ import annotations

import statistics
from typing import Any, Callable, Dict, List, Sequence, Tuple

SHOWN = 8           # the series the terminal and the HTML show: the longest at the largest count
MPI, REGION = "mpi", "region"


def per_run(run, weak: bool) -> Dict[Tuple[str, str], float]:
    """One member run's value per (kind, name) in seconds: summed over processes (strong) or their
    mean over every process of the program, zeros included, as Extra-P averages over every location
    (weak); {} for a run that was not profiled or did not end well."""
    calls = _calls(run)
    if calls is None:
        return {}
    div = max(calls.processes, 1) if weak else 1
    out: Dict[Tuple[str, str], float] = {}
    for f in calls.mpi:
        out[(MPI, f.fn)] = f.ns / 1e9 / div
    for g in calls.regions:
        out[(REGION, g.name)] = g.ns / 1e9 / div
    return out


def _calls(run):
    app = run.application if run is not None else None
    return app.calls if app is not None and app.exit_status == 0 else None


def gathered(members: Sequence[Any], weak: bool) -> Dict[Tuple[str, str], Dict[float, List[float]]]:
    """Each series' values per count over the members (Member: value, run): a profiled run that did
    not make a call, or did not end a region, spent 0 s in it."""
    runs = [(float(m.value), per_run(m.run, weak)) for m in members if _calls(m.run) is not None]
    keys = sorted({k for _, got in runs for k in got})
    out: Dict[Tuple[str, str], Dict[float, List[float]]] = {k: {} for k in keys}
    for p, got in runs:
        for k in keys:
            out[k].setdefault(p, []).append(got.get(k, 0.0))
    return out


def of_members(members: Sequence[Any], weak: bool,
               fit: Callable[[Dict[float, List[float]]], Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every series: {"kind", "name", "aggregate", "points": [{"p", "median", "values"}], and what
    ``fit`` gives for its values per count ({"model", "predictions"} or {"why_no_model"})}, the
    longest at the largest count first."""
    rows = []
    for (kind, name), times in gathered(members, weak).items():
        if not times:
            continue
        row: Dict[str, Any] = {"kind": kind, "name": name,
                               "aggregate": "mean per process" if weak else "sum over processes",
                               "points": [{"p": p, "median": statistics.median(v), "values": v}
                                          for p, v in sorted(times.items())]}
        row.update(fit(times))
        rows.append(row)
    return sorted(rows, key=lambda r: (-r["points"][-1]["median"], r["kind"], r["name"]))


def lines(rows: Sequence[Dict[str, Any]], resource: str, shown: int = SHOWN) -> List[str]:
    """One line per series (the ``shown`` longest): its model or why none, and its time at the ends."""
    out = []
    for r in rows[:shown]:
        what = f"{r['name']}" if r["kind"] == MPI else f"region {r['name']!r}"
        first, last = r["points"][0], r["points"][-1]
        ends = f"{first['median']:.3g} s at {first['p']:g}, {last['median']:.3g} s at {last['p']:g} {resource}"
        if r.get("model"):
            pr = r["predictions"][-1]
            out.append(f"{what} ({r['aggregate']}): {r['model']['text']} s (cross-validated error "
                       f"{r['model']['cv_error'] ** 0.5:.0%}); {ends}; at {pr['p']:g} "
                       f"(extrapolated) {pr['time_s']:.3g} s, {pr['level']:.0%} interval {pr['low']:.3g} to "
                       f"{pr['high']:.3g}")
        else:
            out.append(f"{what} ({r['aggregate']}): no model ({r['why_no_model']}); {ends}")
    if len(rows) > shown:
        out.append(f"and {len(rows) - shown} more series in the JSON and the --extrap file")
    return out
