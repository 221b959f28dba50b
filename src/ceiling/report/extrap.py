"""A scaling study's points in Extra-P's text input format (`ceiling scale --extrap FILE`), so
Extra-P's users can model the same data with their own tool and cross-check ours.

The format (Extra-P's docs/file-formats.md, "Text file format"): PARAMETER names the parameter,
POINTS lists its values, then METRIC and REGION lines each followed by one DATA line per point,
in the order of POINTS, holding that point's repetitions. Its grammar's numbers have no exponent,
so values are written positionally. The region is "main" (the whole program); the metric is
"time" (seconds, or the figure --metric read, inverted for a rate: time per unit of work), and
with --profile one metric per part of the time split (shares, 0 to 1) where every point has it.
With --profile each MPI call and named region is a region of its own under main, as a call path
("main->MPI_Allreduce", "main->solve"; Extra-P builds its call tree from the "->"), with its own
metric: "time_sum", seconds summed over the processes (strong), or "time_mean", their mean over
every process (weak), as Extra-P reads a Cube profile (analysis/scaling_calls.py). Not "time": main's
is the wall time, and a sum over processes is no part of it. A region's time is inclusive (nested
regions and the MPI calls inside count in it too), not Extra-P's exclusive call-path time; the
file's header says so. Extra-P's reader collapses white space in a name to one space.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..analysis.scaling_split import PARTS


def _n(v: float) -> str:
    """Positional, and the shortest text that reads back as the same double: 2.5e-7 s of an MPI call
    keeps every digit (a fixed 12 places after the point kept 6, and wrote what is under 5e-13 as 0)."""
    return np.format_float_positional(float(v), trim="-", unique=True)


def _path(series: Dict[str, Any], taken: set) -> str:
    """The call path "main->NAME" of an MPI call or a region, once in the file: Extra-P squeezes white
    space and splits on "->", so "a->b" is written "a-b"; a name met twice (a region "a->b" and one
    "a-b", a region named as an MPI call) is told apart by its kind, then a number (Extra-P refuses a
    file whose region repeats)."""
    name = str(series["name"])
    while "->" in name:                 # "x->>y" once replaced is "x->y"
        name = name.replace("->", "-")
    name = " ".join(name.split()) or "unnamed"
    path = f"main->{name}"
    if path in taken:
        path = f"main->{name} ({'MPI call' if series.get('kind') == 'mpi' else 'region'})"
    k = 2
    base = path
    while path in taken:
        path, k = f"{base} {k}", k + 1
    taken.add(path)
    return path


def text(result: Dict[str, Any]) -> str:
    """The file's text for a study's result (analysis/scaling_study.of_study): its points, with
    --profile every run's shares per count (``shares``, scaling_split.of_run's) and the series per
    MPI call and region (``calls``)."""
    rows = result.get("points") or []
    param = result.get("resource") or "p"
    weak = bool(result.get("weak"))
    lines = [f"# ceiling scale: {'weak' if weak else 'strong'} scaling over {result.get('resource')}",
             f"PARAMETER {param}", "POINTS " + " ".join(_n(r["p"]) for r in rows),
             "REGION main", "METRIC time" if not result.get("rate") else "METRIC time_per_unit_of_work"]
    lines += ["DATA " + " ".join(_n(t) for t in r["times"]) for r in rows]
    for key, _ in PARTS:
        per = [[x[key] for x in (result.get("shares") or {}).get(r["p"], []) if key in x] for r in rows]
        if rows and all(per):
            lines.append(f"METRIC share_{key}")
            lines += ["DATA " + " ".join(_n(v) for v in vals) for vals in per]
    counts = [r["p"] for r in rows]
    taken = {"main"}
    calls = [c for c in result.get("calls") or [] if [x["p"] for x in c["points"]] == counts]
    if calls:                           # a DATA line for every point or none: a series some count lacks is left out
        lines.insert(1, "# main->NAME: each MPI call's and named region's inclusive time, "
                     + ("time_mean: the mean over every process" if weak else "time_sum: summed over the processes"))
    for c in calls:
        lines += [f"REGION {_path(c, taken)}", "METRIC time_mean" if weak else "METRIC time_sum"]
        lines += ["DATA " + " ".join(_n(v) for v in x["values"]) for x in c["points"]]
    return "\n".join(lines) + "\n"
