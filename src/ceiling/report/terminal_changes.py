"""``ceiling history --changes``: the steps and drifts found in the history (analysis/changes.py),
worse first, each on one line a ticket can take, with the configuration fields that changed at
that moment and, on a cluster, whether the other nodes changed with it; then the newest runs that
fall outside their rolling baseline, and what was left out (acknowledged changes, skipped rows)."""
from __future__ import annotations

from typing import Any, List

from ..results.history_keys import context_text
from ..units import with_unit
from . import _format as F


def _pct(f: float) -> str:
    return f"{100 * f:+.1f}%" if abs(f) < 10 else f"{100 * f:+.0f}%"


def _p(p: float) -> str:
    return f"p = {p:.2g}" if p >= 0.001 else "p < 0.001"


def _value(v: float, unit: str) -> str:
    return with_unit(v, unit)


def _config(c: Any) -> str:
    if c.config:
        shown = "; ".join(f"{f.field} {_short(f.before)} -> {_short(f.after)}" for f in c.config[:4])
        more = f"; and {len(c.config) - 4} more" if len(c.config) > 4 else ""
        return "configuration: " + shown + more
    return "configuration: " + (c.config_note or "unchanged")


def _drift_config(c: Any) -> str:
    text = _config(c)
    return text.replace("configuration: ", "configuration between its first and last run: ", 1)


def _short(v: Any) -> str:
    text = "none" if v is None else str(v)
    return text if len(text) <= 40 else text[:39] + "…"


def change_line(c: Any) -> List[str]:
    """A change as its lines: the headline, then the configuration and the nodes."""
    where = f"{c.metric} on {c.host}" + (f" ({context_text(c.context)})" if context_text(c.context) else "")
    if c.kind == "step":
        head = (f"{c.direction:6s} step   {where}: {_pct(c.change)} ({_value(c.before, c.unit)} -> "
                f"{_value(c.after, c.unit)}) at run {c.run_id[:8]} ({F.when(c.started)}; the run before: "
                f"{c.before_run[:8]}, {F.when(c.before_started)}), {_p(c.p_value)} at level {c.alpha:.2g}")
    else:
        head = (f"{c.direction:6s} drift  {where}: {_pct(c.change)} over {c.runs} runs ({_value(c.before, c.unit)} "
                f"-> {_value(c.after, c.unit)}; {F.when(c.started)} to {F.when(c.before_started)}), "
                f"Mann-Kendall {_p(c.p_value)}; a steady trend, no step")
    lines = [head, "       " + (_config(c) if c.kind == "step" else _drift_config(c))]
    if c.scope:
        lines.append("       " + c.scope + (f" ({', '.join(c.nodes)})" if 1 < len(c.nodes) <= 8 else ""))
    if c.acked:
        lines.append("       acknowledged")
    return lines


def event_lines(same: List[Any]) -> List[str]:
    """One event seen on several nodes at once (analysis/changes.py: scopes), said once."""
    c = same[0]
    ctx = context_text(c.context)
    sizes = sorted(d.change for d in same)
    size = _pct(sizes[0]) if _pct(sizes[0]) == _pct(sizes[-1]) else f"{_pct(sizes[0])} to {_pct(sizes[-1])}"
    first = min(same, key=lambda d: d.started)
    configs = {tuple((f.field, str(f.before), str(f.after)) for f in d.config) or (d.config_note,) for d in same}
    lines = [f"{c.direction:6s} {c.kind:6s} {c.metric}" + (f" ({ctx})" if ctx else "") +
             f" on {len(same)} nodes, {c.scope}: {size} per node, from run {first.run_id[:8]} on {first.host} "
             f"({F.when(first.started)}), p <= {max(d.p_value for d in same):.2g} on each node"]
    lines.append("       " + _config(c) + ("" if len(configs) == 1 else " (on " + c.host + "; the nodes differ)"))
    lines.append("       nodes: " + ", ".join(d.host for d in same[:12]) + (", ..." if len(same) > 12 else ""))
    return lines


def render_changes(report: Any, *, new_only: bool = False, show_acked: bool = False) -> str:
    """The text of ``history --changes`` (``new_only``: with --since, the changes since the last look)."""
    series = report.series
    hosts = sorted({s.host for s in series})
    lines = []
    if report.since is not None and new_only:
        what = f"since the last look (runs up to {F.when(report.since)})"
    elif new_only:
        what = "at the first look (everything)"
    else:
        what = "over the whole history"
    lines.append(f"Changes {what}: {len(series)} series on {len(hosts)} node" + ("" if len(hosts) == 1 else "s") +
                 f", {report.examined} examined" + (f", newest run {F.when(report.through)}" if report.through else ""))
    changes = report.changes(new_only=new_only, acked=show_acked)
    if not series:
        lines.append("No series to examine: the history holds no value that matches.")
    elif not changes:
        lines.append("No significant change" + (" since the last look." if new_only and report.since else "."))
    done = set()
    for c in changes:
        if id(c) in done:
            continue
        same = [d for d in changes if len(c.nodes) > 1 and d.kind == c.kind and d.metric == c.metric and
                d.context == c.context and d.nodes == c.nodes and id(d) not in done]
        done.update(id(d) for d in same or [c])
        lines += event_lines(same) if len(same) > 1 else change_line(c)
    outside = [s for s in series if s.baseline is not None and s.baseline.outside]
    if outside:
        lines.append(f"Newest run outside its rolling baseline (median of the {outside[0].baseline.runs} runs before, "
                     f"beyond 5 of their standard deviations):")
        for s in outside:
            b = s.baseline
            z = "all earlier runs equal" if abs(b.z) > 1e300 else f"z = {b.z:+.1f}"
            lines.append(f"  {b.direction:6s} {s.metric} on {s.host}: {_value(b.latest, s.unit)} against "
                         f"{_value(b.median, s.unit)} ({_pct(b.change)}, {z}) at run {b.run_id[:8]} "
                         f"({F.when(b.started)})")
    hidden = [c for c in report.changes(new_only=new_only, acked=True) if c.acked]
    if hidden and not show_acked:
        lines.append(f"{len(hidden)} acknowledged change" + ("s" if len(hidden) > 1 else "") +
                     " not shown (--all shows them).")
    if new_only and report.since is not None:
        earlier = len(report.changes(acked=show_acked)) - len(changes)
        if earlier > 0:
            lines.append(f"{earlier} earlier change" + ("s" if earlier > 1 else "") +
                         " (history --changes without --since lists every one).")
    if report.skipped:
        total = sum(report.skipped.values())
        why = ", ".join(f"{n} {k}" for k, n in sorted(report.skipped.items()))
        lines.append(f"{total} stored value" + ("s" if total > 1 else "") + f" skipped: {why}.")
    lines += report.notes
    if changes:
        lines.append("A known change is acknowledged with: ceiling history --ack RUN:METRIC (not reported again).")
    return F.printable("\n".join(lines))

