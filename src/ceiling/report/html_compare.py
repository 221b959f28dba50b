"""``ceiling compare --out FILE.html``: the comparison as one self-contained page. Each compared metric is a
row with a bar of its change (in % of A, right = better in the metric's own direction), the whisker of its
bootstrap interval, and the band of the noise threshold around zero; regressions first, as in the terminal.
The configuration that differs, the disturbed runs and what was not compared are listed beside."""
from __future__ import annotations

import os
from typing import List

from ..analysis import significance as sig
from ..analysis.compare import Change, Comparison, Side
from ..files import output
from ..results.history_keys import context_text
from ..units import num
from . import _format as F
from .html_plots import esc
from .html_style import CSS
from .terminal_compare import interval_text, signed_pct

_W, _H, _PAD = 360, 22, 8          # one bar's plot: width, height, inner margin (px)
_COLOR = {sig.WORSE: "#C2410C", sig.BETTER: "#00785A", sig.SAME: "#7a7a7a", sig.UNKNOWN: "#E69F00"}
_EXTRA_CSS = """
table.cmp{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
table.cmp th,table.cmp td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:middle}
table.cmp td.n{text-align:right}
table.cmp td.n,table.cmp td:nth-child(2){white-space:nowrap}
svg.cmpbar{display:block;width:360px;height:22px}
.v-worse{color:var(--fail);font-weight:650}.v-better{color:var(--ok);font-weight:650}
.v-unknown{color:var(--warn)}.v-same{color:var(--muted)}
"""


def _scale(c: Comparison) -> float:
    """The half-width of every bar's axis, as a fraction: the largest end of any interval, change or threshold."""
    ends = [0.05]
    for ch in c.changes:
        j = ch.judgement
        ends += [abs(x) for x in (j.change, j.low, j.high) if x is not None] + [j.threshold.fraction]
    return min(max(ends) * 1.1, 10.0)


def _bar(ch: Change, half: float) -> str:
    j = ch.judgement
    mid = _W / 2

    def x(f: float) -> float:
        return mid + max(-1.0, min(1.0, f / half)) * (mid - _PAD)

    band = j.threshold.fraction
    parts = [f'<rect class="noise" x="{x(-band):.1f}" y="2" width="{x(band) - x(-band):.1f}" height="{_H - 4}" '
             'fill="#e3e5e8"/>',
             f'<line x1="{mid}" y1="0" x2="{mid}" y2="{_H}" stroke="#5f6368" stroke-width="1"/>']
    if j.change is not None:
        lo, hi = sorted((x(0.0), x(j.change)))
        parts.append(f'<rect class="change" x="{lo:.1f}" y="6" width="{max(hi - lo, 1.0):.1f}" height="{_H - 12}" '
                     f'fill="{_COLOR[j.verdict]}"/>')
    if j.low is not None and j.high is not None:
        y = _H / 2
        parts.append(f'<path class="interval" d="M{x(j.low):.1f},{y} H{x(j.high):.1f} M{x(j.low):.1f},{y - 5} '
                     f'V{y + 5} M{x(j.high):.1f},{y - 5} V{y + 5}" stroke="#1f1f1f" stroke-width="1.5" fill="none"/>')
    title = (f"{ch.name}: {signed_pct(j.change)}, interval {interval_text(ch)}, noise threshold "
             f"{j.threshold.fraction:.1%} ({j.threshold.source})")
    return (f'<svg class="plot cmpbar" data-series="{esc(ch.name)}" width="{_W}" height="{_H}" '
            f'viewBox="0 0 {_W} {_H}" role="img"><title>{esc(title)}</title>{"".join(parts)}</svg>')


def _side(tag: str, s: Side) -> str:
    runs = f", {len(s.runs)} runs" if len(s.runs) > 1 else ""
    out = [f"<p class=\"sub\"><b>{tag}</b> {esc(s.label)} ({esc(s.host)}, {esc(F.when(s.started))}{runs})</p>"]
    out += [f'<div class="banner">{tag} was disturbed: {esc(d)}</div>' for d in s.disturbed]
    return "\n".join(out)


def _table(head: List[str], rows: List[List[str]]) -> str:
    return ('<table class="cmp"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(rows_i) + "</tr>" for rows_i in rows) + "</tbody></table>")


def render(c: Comparison) -> str:
    half = _scale(c)
    rows = []
    for ch in c.changes:
        j = ch.judgement
        cls = {sig.WORSE: "worse", sig.BETTER: "better", sig.SAME: "same", sig.UNKNOWN: "unknown"}[j.verdict]
        both = bool(ch.a.reps and ch.b.reps)
        rows.append([f'<td class="v-{cls}" title="{esc(j.basis)}">{esc(j.verdict)}</td>',
                     f"<td><code>{esc(ch.name)}</code></td>",
                     f"<td>{esc(context_text(ch.context))}</td>",
                     f'<td class="n">{num(ch.a.median if both else ch.a.value)}</td>',
                     f'<td class="n">{num(ch.b.median if both else ch.b.value)}</td>', f"<td>{esc(ch.unit)}</td>",
                     f'<td class="n">{signed_pct(j.change)}</td>', f"<td>{esc(interval_text(ch))}</td>",
                     f"<td>{_bar(ch, half)}</td>"])
    body = ["<h1>ceiling compare</h1>", _side("A", c.a), _side("B", c.b), "<h2>Changes</h2>"]
    if rows:
        body.append(f'<p class="hint">Change in % of A, positive = better in the metric\'s own direction; bars span '
                    f"&plusmn;{half:.0%}; the grey band is the noise threshold, the whisker the {c.level:.0%} "
                    f"bootstrap interval of the ratio of medians ({c.resamples} resamples, seed {sig.SEED}).</p>")
        body.append(_table(["", "metric", "context", "A", "B", "unit", "change", "interval", ""], rows))
        body += [f'<p class="hint"><code>{esc(ch.name)}</code> {esc(context_text(ch.context))}: '
                 f"{esc(ch.judgement.verdict)}: {esc(ch.judgement.basis)}</p>" for ch in c.changes if ch.significant]
    else:
        body.append("<p>No metric measured the same way on both sides: nothing compared.</p>")
    body.append("<h2>Configuration that differs</h2>")
    body.append(_table(["field", "A", "B"], [[f"<td><code>{esc(k)}</code></td>", f"<td>{esc(a)}</td>",
                                              f"<td>{esc(b)}</td>"] for k, a, b in c.config])
                if c.config else "<p>None among the fields the runs recorded.</p>")
    if c.not_compared:
        body.append("<h2>Not compared</h2>")
        body.append(_table(["metric", "why", "A", "B"], [[f"<td><code>{esc(n.name)}</code></td>",
                                                           f"<td>{esc(n.why)}</td>", f"<td>{esc(n.a)}</td>",
                                                           f"<td>{esc(n.b)}</td>"] for n in c.not_compared]))
    body += [f'<p class="hint">Note: {esc(n)}</p>' for n in c.notes]
    skipped = [f"{tag}: {s.skipped} damaged rows skipped" for tag, s in (("A", c.a), ("B", c.b)) if s.skipped]
    if skipped:
        body.append(f'<p class="hint">{esc("; ".join(skipped))}</p>')
    body.append("<footer>Generated by ceiling compare. A self-contained file: it loads nothing from the "
                "network.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>ceiling compare - {esc(c.a.label)} / {esc(c.b.label)}</title>\n"
            f"<style>{CSS}{_EXTRA_CSS}</style>\n</head>\n<body>\n<main>\n" + "\n".join(body)
            + "\n</main>\n</body>\n</html>\n")


def write(c: Comparison, path: "os.PathLike[str] | str") -> None:
    """Write the page by files/output.py's rules (atomically; PathError, one line, when it cannot be)."""
    output.write(path, render(c), "the HTML comparison to ")
