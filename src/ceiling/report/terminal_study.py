"""A study in the terminal (``ceiling show STUDY``, ``ceiling bench --repeat N``): what it varied
and what it held fixed, then one row per member by the varying parameter, with its run id and
its key metrics (the headline figures a history line shows, else the first the members
measured). Each member stays a run: ``ceiling show RUN`` shows it whole. The page computes
nothing across members: that is the study's analysis, filled by compare and the models.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

from ..results.model import Metric, Run, Study
from ..units import DASH
from . import _format as F

# The figures a member row shows first, in this order, when its runs have them (store.HEADLINE's).
HEADLINE = ("flops.dp.node", "dgemm.node", "stream.triad", "bandwidth.dram", "latency.dram")
COLUMNS = 5           # key metrics shown per member


def key_metrics(study: Study, limit: int = COLUMNS) -> List[str]:
    """The metric names a member row shows: the headline ones any member has, then the others in
    the order the members measured them, ``limit`` at most."""
    seen: Dict[str, None] = {}
    for run in study.runs():
        for m in run.metrics_of(run.host):
            seen.setdefault(m.name)
    names = [n for n in HEADLINE if n in seen] + [n for n in seen if n not in HEADLINE]
    return names[:limit]


def metric_of(run: Run, name: str) -> Optional[Metric]:
    """The run's host's figure of ``name`` (a member run of several nodes: its own host's)."""
    return next((m for m in run.metrics_of(run.host) if m.name == name), None)


def value_text(m: Optional[Metric]) -> str:
    """A member's figure as the row shows it: value and unit; 'invalid' where the kernel failed its check."""
    if m is None:
        return DASH
    text = F.with_unit(m.value, m.unit)
    if not m.valid:
        return text + " invalid"
    if m.context.get("disturbed"):
        return text + " disturbed"
    return text


def parameter_text(study: Study, value: Any) -> str:
    return f"{value:g} {study.unit}".strip() if isinstance(value, (int, float)) else str(value)


def member_state(study: Study, i: int) -> str:
    m = study.members[i]
    if m.run is None:
        return "not in this history" if m.run_id else "not recorded"
    return "partial" if m.run.partial else ""


def title(study: Study) -> str:
    what = " ".join(study.command) or "(no command recorded)"
    hosts = ", ".join(study.hosts or [study.host])
    n = len(study.members)
    runs = f"{n} run{'' if n == 1 else 's'}"
    return f"{study.kind.capitalize()} study of {runs} over {study.parameter}: {what} on {hosts}"


def fixed_text(study: Study) -> str:
    """What every member shares, as ``key=value`` words (JSON's spelling of true and false)."""
    def word(v: Any) -> str:
        if isinstance(v, list):
            return ",".join(word(x) for x in v)
        return json.dumps(v) if isinstance(v, bool) or v is None else str(v)
    return " ".join(f"{k}={word(v)}" for k, v in study.fixed.items())


def render(study: Study, width: int = 100) -> str:
    """The study as text: title, what was held fixed, the members' table, how to see one member."""
    lines = [title(study)]
    if study.study_id:
        lines.append(f"study {study.study_id}")
    lines.append(f"started {F.when(study.started)}" + (f", finished {F.when(study.finished)}" if study.finished
                                                       else ", did not finish"))
    if study.fixed:
        lines.append(f"held fixed: {fixed_text(study)}")
    if study.partial:
        lines.append(f"partial: {study.partial_reason or 'stopped before every member was made'}")
    names = key_metrics(study)
    head = [study.parameter, "run"] + names + ["state"]
    body = []
    for i, mem in enumerate(study.members):
        cells = [parameter_text(study, mem.value), mem.run_id[:12] or DASH]
        cells += [value_text(metric_of(mem.run, n)) if mem.run is not None else DASH for n in names]
        cells.append(member_state(study, i))
        body.append(cells)
    lines += _table(head, body, [True, False] + [True] * len(names) + [False])
    for note in study.analysis.notes:
        lines.append(f"note: {note}")
    if any(m.run_id for m in study.members):
        lines.append("Each member is a run of its own: ceiling show RUN shows it whole.")
    return F.printable("\n".join(lines))


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> List[str]:
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return ("  " + "  ".join(c.rjust(w[i]) if right[i] else c.ljust(w[i]) for i, c in enumerate(cells))).rstrip()
    return [line(head)] + [line(r) for r in rows]
