"""``ceiling history``: the stored runs, newest first (results.store.RunSummary); with
``--metric NAME``, one metric's stored values over time, each with what a comparison needs
(results.store.Point): the best repetition, the median, how many repetitions and their spread
(coefficient of variation, ``cv``), how it was measured (its context) and on which configuration.

The fields of the context that every row shares are said once, above the table; a column lists
the ones that differ from row to row, so that a 1-thread and a 2-thread figure are never read as
one series. The configuration column (the first 8 digits of the node's inventory hash) is shown
when the rows do not all share one.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..results.history_keys import context_text, key_fields, key_of
from ..units import DASH, figure, num, pct, time_scale
from . import _format as F

# Short column titles for the headline metrics a history line shows (results.store.HEADLINE).
_HISTORY_COLUMNS = {"flops.dp.node": "DP flops", "dgemm.node": "DGEMM", "stream.triad": "triad",
                    "bandwidth.dram": "DRAM bw", "latency.dram": "DRAM lat"}


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> List[str]:
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return ("  " + "  ".join(c.rjust(w[i]) if right[i] else c.ljust(w[i]) for i, c in enumerate(cells))).rstrip()

    return [line(head)] + [line(r) for r in rows]


def render_history(rows: Sequence, *, metric: Optional[str] = None, width: int = 100) -> str:
    """``ceiling history``: stored runs (results.store.RunSummary), newest first, or, with
    ``metric``, that metric's values (results.store.Point), oldest first."""
    if metric:
        return F.printable(render_series(rows, metric))
    return F.printable(_history(rows, width=width))


def _history(rows: Sequence, *, width: int = 100) -> str:
    if not rows:
        return "No runs are recorded."
    keys = [k for k in _HISTORY_COLUMNS if any(k in (getattr(r, "headline", None) or {}) for r in rows)]
    studied = any(getattr(r, "study", "") for r in rows)      # members of a study: its id, a column
    body = []
    for r in rows:
        head = getattr(r, "headline", None) or {}
        verb = str(getattr(r, "verb", ""))
        cells = [str(getattr(r, "run_id", "")), F.when(getattr(r, "started", "")), str(getattr(r, "host", "")),
                 verb if len(verb) <= 24 else verb[:23] + "…",
                 str(getattr(r, "tool_version", "")), str(getattr(r, "n_metrics", "")) +
                 (" partial" if getattr(r, "partial", False) else "")]
        for k in keys:
            value, unit = head.get(k, (None, ""))
            cells.append(F.with_unit(value, unit))
        if studied:
            cells.append(str(getattr(r, "study", ""))[:12] or DASH)
        body.append(cells)
    lines = _table(["run", "started", "host", "verb", "version", "metrics"] + [_HISTORY_COLUMNS[k] for k in keys]
                   + (["study"] if studied else []),
                   body, [False, False, False, False, False, True] + [True] * len(keys) + [False] * studied)
    if studied:
        lines.append("A run with a study is one of its members: ceiling show STUDY shows them together.")
    return "\n".join(lines)


def render_studies(rows: Sequence) -> str:
    """``ceiling history --studies``: stored studies (results.store.StudySummary), newest first."""
    if not rows:
        return "No studies are recorded."
    body = []
    for r in rows:
        values = ", ".join(str(v) for v in r.values)
        verb = " ".join(w for w in r.command[1:3] if not w.startswith("-"))
        body.append([r.study_id, F.when(r.started), r.host, verb, r.kind, r.parameter,
                     values if len(values) <= 30 else values[:29] + "…",
                     str(r.members) + (" partial" if r.partial else "")])
    lines = _table(["study", "started", "host", "verb", "kind", "varies", "values", "runs"], body,
                   [False] * 7 + [True])
    return F.printable("\n".join(lines + ["ceiling show STUDY shows one, its members by what varies."]))


def _shared(points: Sequence[Any]) -> Dict[str, Any]:
    """The context fields every point has with one value; none when a point's context is not known."""
    if any(not p.context for p in points):
        return {}
    fields = [key_fields(p.context) for p in points]
    return {k: v for k, v in fields[0].items() if all(k in f and f[k] == v for f in fields[1:])}


def render_series(points: Sequence[Any], metric: str) -> str:
    """The text of ``history --metric``; ``points`` oldest first (Store.series)."""
    if not points:
        return f"No value of {metric} is recorded."
    shared = _shared(points)
    varied = any(context_text(p.context, shared) or not p.context for p in points)
    hashes = {p.inventory_hash for p in points}
    title = f"{metric}: {len(points)} value" + ("" if len(points) == 1 else "s") + ", oldest first"
    common = context_text(key_of(shared)) if shared else ""
    lines = [title + (f"; measured with {common}" if common else "")]
    if len(hashes) == 1 and "" not in hashes:
        lines.append(f"configuration {next(iter(hashes))[:8]} throughout")
    head = ["started", "host", "best", "median", "unit", "reps", "cv"]
    right = [False, False, True, True, False, True, True]
    if varied:
        head.append("context")
        right.append(False)
    if len(hashes) > 1:
        head.append("config")
        right.append(False)
    head.append("run")
    right.append(False)
    body = []
    for p in points:
        factor, shown = time_scale(p.value if figure(p.value) is not None else p.median, p.unit)
        cells = [F.when(p.started), p.host, _scaled(p.value, factor), _scaled(p.median, factor), shown,
                 DASH if p.n is None else str(p.n), DASH if p.n is None or p.n < 2 else pct(p.cv)]
        if varied:
            cells.append(context_text(p.context, shared) if p.context else "not known")
        if len(hashes) > 1:
            cells.append(p.inventory_hash[:8] or DASH)
        cells.append(p.run_id + ("" if p.valid is not False else " (invalid)"))
        body.append(cells)
    return "\n".join(lines + _table(head, body, right))


def _scaled(v: Any, factor: float) -> str:
    f = figure(v)
    return num(None if f is None else f * factor)
