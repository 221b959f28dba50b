"""A model per MPI call and per named region over a scaling study (`ceiling scale --profile`), as
Extra-P makes one per call path: each profiled run's time inside the call (the interposer's MPI
counts) or the region (``ceiling_region_begin/end``, analysis/profile_regions.py) at each count,
fitted with the same performance-model normal form and selection as the whole program's time
(scaling_models.series_model, given as ``fit`` by scaling_study), with its prediction at 2x and 4x the largest count.

The value per run follows Extra-P's own reading of profiles (its Cube reader's ``--scaling``):
under strong scaling the time summed over the processes (the resources the call consumes), under
weak scaling the mean per process (each process's time is what a user waits for when every one
does the same work). A run whose profile has MPI records counts a call it never made as 0 s; a
region likewise. A series with a zero at some count, or fewer counts than a model needs, gets no
model, with the reason. Pure functions over the member runs.
"""
from __future__ import annotations

import statistics
from typing import Any, Callable, Dict, List, Sequence, Tuple

SHOWN = 8           # the series the terminal and the HTML show: the longest at the largest count
MPI, REGION = "mpi", "region"


def per_run(run, weak: bool) -> Dict[Tuple[str, str], float]:
    """One member run's value per (kind, name) in seconds: summed over processes (strong) or their
    mean (weak); {} for a run that was not profiled or did not end well."""
    app = run.application if run is not None else None
    if app is None or app.profile is None or app.exit_status != 0:
        return {}
    prof = app.profile
    out: Dict[Tuple[str, str], float] = {}
    if prof.mpi is not None and prof.mpi.ranks:
        for f in prof.mpi.functions:
            out[(MPI, f.fn)] = f.ns / 1e9 / (prof.mpi.ranks if weak else 1)
    for g in prof.regions:
        out[(REGION, g.name)] = g.ns / 1e9 / (max(g.processes, 1) if weak else 1)
    return out


def gathered(members: Sequence[Any], weak: bool) -> Dict[Tuple[str, str], Dict[float, List[float]]]:
    """Each series' values per count over the members (Member: value, run), a profiled run's
    absent call or region as 0 where the run had that kind at all."""
    runs = [(float(m.value), per_run(m.run, weak), m.run) for m in members]
    runs = [(p, got, run) for p, got, run in runs if got or (run is not None and run.application is not None
                                                           and run.application.profile is not None
                                                           and run.application.exit_status == 0)]
    keys = sorted({k for _, got, _ in runs for k in got})
    out: Dict[Tuple[str, str], Dict[float, List[float]]] = {k: {} for k in keys}
    for p, got, run in runs:
        prof = run.application.profile
        has = {MPI: prof.mpi is not None and bool(prof.mpi.ranks), REGION: True}
        for k in keys:
            if k in got:
                out[k].setdefault(p, []).append(got[k])
            elif has[k[0]]:
                out[k].setdefault(p, []).append(0.0)
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
