"""``ceiling compare A B``: what changed from A to B, metric by metric, and whether it is real.

A side is one run, one node of a cluster run, or a set of runs of one host (``Side``): its figures by
(metric, context key), each with the repetitions it kept. Only like is compared with like: a metric
on both sides with the same unit and the same context key (history_keys.py: threads, placement,
size...). The rest is listed, not compared: metrics on one side only, and those whose units or
contexts differ.

Each compared figure gets significance.judge's verdict: a bootstrap interval on the ratio of
medians from the repetitions (seeded: the same runs give the same output), the family's noise
threshold, and where the history holds at least MIN_HISTORY earlier runs of the same metric and
context on B's host, their run-to-run spread as well. A set of several runs is compared through one
value per run (its median), the runs being the repetitions: what varies between runs is what a
set should be judged by.

Beside the changes: the configuration fields that differ (the stored inventory, history_keys.py,
and the fields cluster mode compares where the run kept them, machine/inventory.py), and a
competing-load finding in either side (checks/load.py: that run was disturbed).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..results import history_keys as keys
from ..results.model import HIGHER, LOWER, Run
from . import significance as sig

Key = Tuple[str, str]          # (metric name, context key)
HISTORY_RUNS = 50              # earlier runs read for the run-to-run spread (the newest before A)


@dataclass
class Figure:
    """One metric of one side."""

    name: str
    unit: str
    better: str
    context: str                                  # the context key
    value: Optional[float]                        # the headline (best repetition; a set: median of its runs)
    reps: List[float] = field(default_factory=list)   # repetitions (a set of runs: one value per run)
    host: str = ""

    @property
    def median(self) -> Optional[float]:
        xs = [x for x in self.reps if x is not None]
        return _median(xs) if xs else self.value


@dataclass
class Side:
    """One side of a comparison."""

    label: str                                    # what the user named: run id, file, node, set
    host: str                                     # the node measured on (for the history)
    started: str                                  # the earliest start among its runs
    runs: List[str] = field(default_factory=list)     # run ids
    figures: Dict[Key, Figure] = field(default_factory=dict)
    config: Dict[str, str] = field(default_factory=dict)   # flat configuration fields
    disturbed: List[str] = field(default_factory=list)     # competing-load findings, in words
    disturbed_metrics: Dict[str, str] = field(default_factory=dict)   # metric -> what disturbed its step
    skipped: int = 0                              # damaged rows left out
    unmeasured: int = 0                           # figures with no value and no repetitions


@dataclass
class Change:
    name: str
    context: str
    unit: str
    better: str
    a: Figure
    b: Figure
    judgement: sig.Judgement
    history_runs: int                             # earlier runs of this series on B's host that were read

    disturbed: str = ""                           # "A", "B" or "A, B": whose step of this metric met competing load

    @property
    def significant(self) -> bool:
        return self.judgement.verdict in (sig.WORSE, sig.BETTER)


@dataclass
class NotCompared:
    name: str
    why: str                                      # "only in A", "only in B", "units differ: ...", "contexts differ"
    a: str = ""                                   # A's context and unit, in words ("" = none)
    b: str = ""


@dataclass
class Comparison:
    a: Side
    b: Side
    changes: List[Change]
    not_compared: List[NotCompared]
    config: List[Tuple[str, str, str]]            # (field, A's value, B's value) that differ
    resamples: int = sig.RESAMPLES
    level: float = sig.LEVEL
    notes: List[str] = field(default_factory=list)    # what the comparison could not use, in words

    def regressions(self, at_least: float) -> List[Change]:
        """Significant regressions of at least ``at_least`` (a fraction)."""
        return [c for c in self.changes if c.judgement.verdict == sig.WORSE
                and c.judgement.change is not None and -c.judgement.change >= at_least]


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def figure_of_row(name: Any, unit: Any, better: Any, context: Any, value: Any, reps: Sequence[Any],
                  host: str) -> Optional[Figure]:
    """A Figure from a stored row's fields, or None when the row is damaged (a wrong type, a direction
    that is neither higher nor lower, a context key that is not one)."""
    if not isinstance(name, str) or not name or not isinstance(unit, str) or better not in (HIGHER, LOWER):
        return None
    if not isinstance(context, str) or (context and not _context_key_ok(context)):
        return None
    if value is not None and not _number(value):
        return None
    if any(r is not None and not _number(r) for r in reps):
        return None
    return Figure(name, unit, better, context, float(value) if value is not None else None,
                  [float(r) for r in reps if r is not None], host)


@functools.lru_cache(maxsize=1024)
def _context_key_ok(text: str) -> bool:
    """A context key is a JSON object: parsed once per distinct key (a set of runs repeats a few keys over
    thousands of rows, and parsing each row's was a tenth of compare's own time)."""
    return isinstance(_json_obj(text), dict)


def _json_obj(text: str) -> Any:
    import json
    try:
        return json.loads(text)
    except ValueError:
        return None


def add_figure(side: Side, f: Optional[Figure]) -> None:
    """Put a figure into ``side``: a damaged one (None) is counted, an unmeasured one counted, the
    first of two with the same name and context kept."""
    if f is None:
        side.skipped += 1
    elif f.value is None and not f.reps:
        side.unmeasured += 1
    else:
        side.figures.setdefault((f.name, f.context), f)


def flat_config(inventory: Optional[Dict[str, Any]], cluster: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """One string per configuration field: the stored inventory's (``system.bios_version``...: history_keys.flat,
    a value that is not a string as its JSON), and cluster mode's (``kernel``, ``microcode``, ``governor``...)
    where the run kept them."""
    import json
    out: Dict[str, str] = {k: v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
                           for k, v in keys.flat(inventory or {}).items()}
    for k, v in (cluster or {}).items():
        out[k] = str(v)
    return out


def side_of_run(run: Run, node: str = "", label: str = "") -> Side:
    """The side of one run (a JSON file, or a stored run read whole), or of one of its nodes."""
    host = node or run.host
    if node and node not in run.node_names():
        from ..errors import UsageError
        raise UsageError(f"run {run.run_id or label} has no node {node!r} (its nodes: {', '.join(run.node_names())})")
    side = Side(label or run.run_id, host, run.started, [run.run_id] if run.run_id else [])
    for m in run.metrics:
        if (m.node or run.host) != host:
            continue
        add_figure(side, figure_of_row(m.name, m.unit, m.better, keys.context_key(m.context), m.value,
                                       list(m.values), host))
        if isinstance(m.context, dict) and m.context.get("disturbed"):
            side.disturbed_metrics.setdefault(m.name, str(m.context["disturbed"]))
    try:
        machine = run.machine_of(node)
    except KeyError:
        machine = {}
    env = next((n.environment for n in run.nodes if n.name == host), {})
    cluster = env.get("inventory") if isinstance(env, dict) and isinstance(env.get("inventory"), dict) else None
    side.config = flat_config(keys.inventory(machine), cluster)
    if not node or node == run.host:
        side.disturbed[:0] = [f"{f.status}: {f.title}" for f in run.findings
                              if f.id.startswith("load.competing") and f.status in ("warn", "fail")]
    return side


def merge_runs(label: str, sides: Sequence[Side]) -> Side:
    """A set of runs of one host as one side: each figure's repetitions are its runs' medians (one run:
    its own repetitions), its value their median; the configuration fields the runs agree on."""
    out = Side(label, sides[0].host, min(s.started for s in sides), [r for s in sides for r in s.runs])
    out.skipped = sum(s.skipped for s in sides)
    out.unmeasured = sum(s.unmeasured for s in sides)
    out.disturbed = [f"run {s.runs[0][:8] if s.runs else s.label}: {d}" for s in sides for d in s.disturbed]
    for s in sides:
        for k, v in s.disturbed_metrics.items():
            out.disturbed_metrics.setdefault(k, v)
    if len(sides) == 1:
        out.figures, out.config = dict(sides[0].figures), dict(sides[0].config)
        return out
    by_key: Dict[Key, List[Figure]] = {}
    for s in sides:
        for k, f in s.figures.items():
            by_key.setdefault(k, []).append(f)
    for k, fs in by_key.items():
        first = fs[0]
        same = [f for f in fs if f.unit == first.unit and f.better == first.better]
        per_run = [m for m in (f.median for f in same) if m is not None]
        out.figures[k] = Figure(first.name, first.unit, first.better, first.context,
                                _median(per_run) if per_run else None, per_run, first.host)
    fields = set().union(*(s.config for s in sides))
    for k in sorted(fields):
        values = {s.config.get(k, "") for s in sides}
        out.config[k] = values.pop() if len(values) == 1 else "varies: " + ", ".join(sorted(v or "-" for v in values))
    return out


# history(name, host, context, before) -> (headline, median of its repetitions) of each earlier run, newest first
History = Callable[[str, str, str, str], List[Tuple[Optional[float], Optional[float]]]]


def compare(a: Side, b: Side, history: Optional[History] = None, resamples: int = sig.RESAMPLES) -> Comparison:
    """Every figure of ``a`` against ``b`` (module docstring)."""
    changes: List[Change] = []
    not_compared: List[NotCompared] = []
    names_a = {n for n, _ in a.figures}
    names_b = {n for n, _ in b.figures}
    before = min(a.started, b.started)
    for k in sorted(set(a.figures) | set(b.figures)):
        name, ctx = k
        fa, fb = a.figures.get(k), b.figures.get(k)
        if fa is not None and fb is not None:
            if fa.unit != fb.unit or fa.better != fb.better:
                why = "units differ" if fa.unit != fb.unit else "directions differ"
                not_compared.append(NotCompared(name, why, _where(fa), _where(fb)))
                continue
            # two nodes: no one node's history judges both
            earlier = history(name, b.host, ctx, before) if history is not None and b.host == a.host else []
            if fa.reps and fb.reps:            # medians, against the earlier runs' medians
                hist = [med if med is not None else v for v, med in earlier]
                j = sig.judge(fa.reps, fb.reps, fa.better, name, history=hist, resamples=resamples)
            else:                              # a side without repetitions: the headline figures, like with like
                hist = [v for v, _ in earlier]
                j = sig.judge([], [], fa.better, name, a_value=fa.value, b_value=fb.value, history=hist,
                              resamples=resamples)
            hit = ", ".join(t for t, s in (("A", a), ("B", b)) if name in s.disturbed_metrics)
            changes.append(Change(name, ctx, fa.unit, fa.better, fa, fb, j, len(earlier), hit))
            continue
        f = fa or fb
        assert f is not None
        other = names_b if fa is not None else names_a
        if name in other:       # measured on both sides, but not so: each side's own contexts are listed
            theirs = b if fa is not None else a
            units = {x.unit for (n, _), x in theirs.figures.items() if n == name}
            why = "contexts differ" if f.unit in units else "units differ"
            not_compared.append(NotCompared(name, why, _where(fa), _where(fb)))
        else:
            not_compared.append(NotCompared(name, "only in A" if fa is not None else "only in B",
                                            _where(fa) if fa else "", _where(fb) if fb else ""))
    changes.sort(key=_order)
    config = [(k, a.config.get(k, "-"), b.config.get(k, "-")) for k in sorted(set(a.config) | set(b.config))
              if a.config.get(k) != b.config.get(k)]
    return Comparison(a, b, changes, _dedupe(not_compared), config, resamples)


def _dedupe(items: List[NotCompared]) -> List[NotCompared]:
    seen, out = set(), []
    for i in items:
        k = (i.name, i.why, i.a, i.b)
        if k not in seen:
            seen.add(k)
            out.append(i)
    return out


def _where(f: Optional[Figure]) -> str:
    if f is None:
        return ""
    ctx = keys.context_text(f.context)
    return f"{ctx + ', ' if ctx else ''}{f.unit}" if f.unit else ctx


_RANK = {sig.WORSE: 0, sig.BETTER: 1, sig.UNKNOWN: 2, sig.SAME: 3}


def _order(c: Change) -> Tuple:
    ch = c.judgement.change
    # significant regressions first, the largest first; then improvements, unknowns, the rest
    return (_RANK[c.judgement.verdict], -abs(ch) if ch is not None else 0.0, c.name, c.context)
