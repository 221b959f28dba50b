"""``ceiling compare``: the comparison (analysis/compare.py) as a terminal table, significant regressions
first, and as the JSON ``--json`` prints. Each change is in % of A's value, signed in the metric's own
direction (positive = better), with its interval and what the verdict rests on; the configuration fields
that differ and any competing load are said above the table, what was not compared below it."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..analysis import significance as sig
from ..analysis.compare import Change, Comparison, Side
from ..results.history_keys import context_text, key_fields
from ..units import DASH, figure, num, pct_sig
from . import _format as F

_MARK = {sig.WORSE: "WORSE", sig.BETTER: "better", sig.SAME: "same", sig.UNKNOWN: "unknown"}
_RED, _GREEN, _RESET = "\033[31m", "\033[32m", "\033[0m"


def signed_pct(fraction: Optional[float]) -> str:
    if fraction is None:
        return DASH
    return ("+" if fraction > 0 else "") + f"{100.0 * fraction:.1f}%"


def interval_text(c: Change) -> str:
    j = c.judgement
    return DASH if j.low is None or j.high is None else f"[{signed_pct(j.low)}, {signed_pct(j.high)}]"


def _side_line(tag: str, s: Side) -> str:
    runs = f"{len(s.runs)} runs" if len(s.runs) > 1 else ""
    return f"  {tag}  {s.label}  ({', '.join(x for x in (s.host, F.when(s.started), runs) if x)})"


def _n(f) -> str:
    return str(len(f.reps)) if f.reps else "1*"


def render(c: Comparison, *, width: int = 100, color: bool = False, fail_on: Optional[float] = None) -> str:
    out: List[str] = ["ceiling compare", _side_line("A", c.a), _side_line("B", c.b)]
    for tag, s in (("A", c.a), ("B", c.b)):
        for d in s.disturbed:
            out.append(f"  ! {tag} was disturbed: {d}")
        if s.disturbed_metrics:
            out.append(f"  ! {tag}: {len(s.disturbed_metrics)} metric{'s' if len(s.disturbed_metrics) != 1 else ''} "
                       f"measured beside competing load ({', '.join(sorted(s.disturbed_metrics))}), marked ! below")
    if c.config:
        out.append("")
        out.append("Configuration that differs")
        w = max(len(k) for k, _, _ in c.config)
        out += [f"  {k.ljust(w)}  A: {a}   B: {b}" for k, a, b in c.config]
    elif c.a.config and c.b.config:
        out += ["", "Configuration: the same on both sides (the fields the history records)"]
    else:
        out += ["", "Configuration: not recorded on " + ("either side" if not (c.a.config or c.b.config)
                                                          else "side " + ("A" if not c.a.config else "B"))]
    out.append("")
    # context fields every compared row shares are said once, above the table (as `ceiling history` does)
    fields = [key_fields(ch.context) for ch in c.changes]
    common = {k: v for k, v in fields[0].items() if all(f.get(k, object()) == v for f in fields[1:])} \
        if len(fields) > 1 else {}
    if common:
        from ..results.history_keys import key_of
        out += [f"  Every row measured with {context_text(key_of(common))}", ""]
    rows = []
    for ch in c.changes:
        j = ch.judgement
        ctx = context_text(ch.context, leave_out=common) or ("context unknown" if ch.context == "" else "")
        a_val = ch.a.median if ch.a.reps and ch.b.reps else ch.a.value
        b_val = ch.b.median if ch.a.reps and ch.b.reps else ch.b.value
        name = ch.name + (" !" if ch.disturbed else "")
        rows.append([_MARK[j.verdict], name, ctx, num(a_val), num(b_val), ch.unit, signed_pct(j.change),
                     interval_text(ch), f"{_n(ch.a)}/{_n(ch.b)}", pct_sig(j.threshold.fraction, 3)
                     + ("h" if j.threshold.source == "history" else "")])
    if rows:
        head = ["", "metric", "context", "A", "B", "unit", "change", "interval", "reps", "noise"]
        right = [False, False, False, True, True, False, True, False, True, True]
        lines = _table(head, rows, right)
        if color:
            lines = [lines[0]] + [(_RED if r[0] == "WORSE" else _GREEN if r[0] == "better" else "") + ln
                                  + (_RESET if r[0] in ("WORSE", "better") else "") for r, ln in zip(rows, lines[1:])]
        out += lines
        out.append("")
        worse = [ch for ch in c.changes if ch.judgement.verdict == sig.WORSE]
        better = [ch for ch in c.changes if ch.judgement.verdict == sig.BETTER]
        unknown = [ch for ch in c.changes if ch.judgement.verdict == sig.UNKNOWN]
        out.append(f"  {len(c.changes)} metrics compared: {len(worse)} significantly worse, {len(better)} better, "
                   f"{len(unknown)} of unknown significance, {len(c.changes) - len(worse) - len(better) - len(unknown)}"
                   " with no significant change")
        for ch in worse + better:
            out.append(f"  {ch.name}: {ch.judgement.verdict}: {ch.judgement.basis}"
                       + (f"; measured beside competing load in {ch.disturbed}" if ch.disturbed else ""))
        out.append(f"  change: in % of A, positive = better in the metric's own direction; values are medians of "
                   f"the repetitions (* none kept: the headline figure); interval: {c.level:.0%} bootstrap of the "
                   f"ratio of medians, {c.resamples} resamples, seed {sig.SEED}; noise: the family's threshold, or "
                   f"(h) {sig.HISTORY_Z:g} x sqrt(2) x the run-to-run spread of {sig.MIN_HISTORY}+ earlier runs")
    else:
        out.append("  No metric measured the same way on both sides: nothing compared.")
    if c.not_compared:
        out += ["", "Not compared"]
        rows = [[n.name, n.why, n.a or DASH, n.b or DASH] for n in c.not_compared]
        out += _table(["metric", "why", "A", "B"], rows, [False] * 4)
    for tag, s in (("A", c.a), ("B", c.b)):
        if s.skipped:
            out.append(f"  {tag}: {s.skipped} damaged row{'s' if s.skipped != 1 else ''} skipped")
        if s.unmeasured:
            out.append(f"  {tag}: {s.unmeasured} figure{'s' if s.unmeasured != 1 else ''} not measured (no value)")
    out += [f"  Note: {n}" for n in c.notes]
    if fail_on is not None:
        hits = c.regressions(fail_on)
        out.append("")
        out.append(f"  --fail-on worse:{pct_sig(fail_on)}: " + (
            f"{len(hits)} significant regression{'s' if len(hits) != 1 else ''} at or beyond it ("
            + ", ".join(f"{h.name} {signed_pct(h.judgement.change)}" for h in hits) + ")" if hits else "none"))
    return F.printable("\n".join(out))


def _table(head: List[str], rows: List[List[str]], right: List[bool]) -> List[str]:
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    return [("  " + "  ".join(x.rjust(w[i]) if right[i] else x.ljust(w[i]) for i, x in enumerate(r))).rstrip()
            for r in [head] + rows]


def _figure(f) -> Dict[str, Any]:
    return {"value": f.value, "median": f.median, "n": len(f.reps), "reps": f.reps}


def _side(s: Side) -> Dict[str, Any]:
    return {"label": s.label, "host": s.host, "started": s.started, "runs": s.runs, "disturbed": s.disturbed,
            "disturbed_metrics": s.disturbed_metrics, "damaged_rows_skipped": s.skipped, "unmeasured": s.unmeasured,
            "configuration": s.config}


def as_dict(c: Comparison, fail_on: Optional[float] = None) -> Dict[str, Any]:
    """The comparison as ``--json`` prints it."""
    out: Dict[str, Any] = {
        "a": _side(c.a), "b": _side(c.b),
        "bootstrap": {"resamples": c.resamples, "level": c.level, "seed": sig.SEED},
        "changes": [{"metric": ch.name, "context": key_fields(ch.context), "unit": ch.unit, "better": ch.better,
                     "verdict": ch.judgement.verdict, "change": ch.judgement.change,
                     "interval": [ch.judgement.low, ch.judgement.high] if ch.judgement.low is not None else None,
                     "basis": ch.judgement.basis, "beyond_threshold": ch.judgement.beyond_threshold,
                     "threshold": {"fraction": ch.judgement.threshold.fraction,
                                   "source": ch.judgement.threshold.source,
                                   "run_to_run_spread": ch.judgement.threshold.spread,
                                   "earlier_runs": ch.judgement.threshold.runs},
                     "disturbed": ch.disturbed.split(", ") if ch.disturbed else [],
                     "history_runs_read": ch.history_runs, "history_z": figure(ch.judgement.history_z),
                     "a": _figure(ch.a), "b": _figure(ch.b)} for ch in c.changes],
        "not_compared": [{"metric": n.name, "why": n.why, "a": n.a, "b": n.b} for n in c.not_compared],
        "configuration_differs": [{"field": k, "a": a, "b": b} for k, a, b in c.config],
        "notes": c.notes,
    }
    if fail_on is not None:
        out["fail_on"] = {"worse": fail_on, "regressions": [ch.name for ch in c.regressions(fail_on)]}
    return out
