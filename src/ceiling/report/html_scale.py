"""A scaling study's plots on its HTML page (report/html_study.py): speedup and parallel
efficiency (scaled efficiency when weak) over the thread or rank count on a log2 axis (the
speedup on log2 y too, the efficiency in percent; checked in headless Chromium,
tests/test_scale_browser.py), with the
ideal line, the fitted model (analysis/scaling_models.py; dashed past the largest point, where it
is an extrapolation) and the measured medians with their spread (the slowest and fastest run of
each point, as two thin lines). Drawn with report/svg.py's line_plot, as the run report's plots."""
from __future__ import annotations

from typing import Any, Dict, List

from ..analysis.scaling_models import evaluate
from . import svg as S
from .html_plots import esc


def _grid(lo: float, hi: float, n: int = 24) -> List[float]:
    return [lo * (hi / lo) ** (k / n) for k in range(n + 1)]


def section(result: Dict[str, Any]) -> str:
    """The plots' <section>, or one that says why there are none."""
    rows = result.get("points") or []
    resource, weak = result.get("resource", "threads"), result.get("weak", False)
    if len(rows) < 2:
        return ('<section id="scaling"><h2>Scaling</h2><p class="hint">Fewer than two points finished: '
                "nothing to plot.</p></section>")
    p0, t0 = rows[0]["p"], rows[0]["median_s"]
    xs = [r["p"] for r in rows]
    model = result.get("model")
    top = max(xs) * (4 if model else 1)
    dense = _grid(p0, top)

    def speed(t: float, p: float) -> float:       # speedup (strong) or scaled efficiency (weak) from a time
        return t0 / t if weak else t0 * p0 / t

    plots = []
    for what in ("speedup", "efficiency"):
        if weak and what == "speedup":
            continue
        per_p = (lambda v, p: v / p) if what == "efficiency" and not weak else (lambda v, p: v)
        ideal = [1.0 if (weak or what == "efficiency") else p / p0 for p in dense]
        lines = [S.Line("ideal", dense, ideal, color=S.MUTED, dash=True, markers=False, width=1.0)]
        if model:
            inside = [p for p in dense if p <= max(xs)]
            beyond = [max(xs)] + [p for p in dense if p > max(xs)]     # from the last point on, no gap
            f = [per_p(speed(evaluate(model, p), p), p) for p in inside]
            g = [per_p(speed(evaluate(model, p), p), p) for p in beyond]
            lines.append(S.Line(f"model: {model['text']}", inside, f, color=S.PALETTE[1], markers=False))
            lines.append(S.Line("model, extrapolated", beyond, g, color=S.PALETTE[1], dash=True, markers=False))
        lines.append(S.Line("measured (median)", xs, [per_p(speed(r["median_s"], r["p"]), r["p"]) for r in rows],
                            color=S.PALETTE[0]))
        lines.append(S.Line("slowest run", xs, [per_p(speed(max(r["times"]), r["p"]), r["p"]) for r in rows],
                            color=S.PALETTE[5], markers=False, width=1.0))
        lines.append(S.Line("fastest run", xs, [per_p(speed(min(r["times"]), r["p"]), r["p"]) for r in rows],
                            color=S.PALETTE[5], markers=False, width=1.0))
        name = "scaled efficiency" if weak else what
        # speedup on log2 y: the ideal is a diagonal and the measured points are not squashed under an ideal
        # line drawn out to the extrapolation's 4x; efficiency as a percentage; the extrapolated counts get
        # ticks and a rule at the largest measured count, where the data end
        log_y = what == "speedup"
        ticks = sorted(set(xs) | ({2 * max(xs), 4 * max(xs)} if model else set()))
        rules = [S.Rule(max(xs), "largest point measured")] if model else []
        try:
            plots.append(S.line_plot(lines, title=f"{name.capitalize()} over {resource}", x_label=resource,
                                     y_label=name + (" (log2)" if log_y else ""), x_scale="log2",
                                     y_scale="log2" if log_y else "linear", x_ticks=ticks, rules=rules,
                                     y_format=None if log_y else (lambda v: f"{v:.0%}"),
                                     uid=f"scale-{what}", desc=f"{name} over {resource}, log2 x, ideal line dashed"))
        except S.NothingToPlot as e:
            plots.append(f'<p class="hint">{esc(e)}</p>')
    note = ("Log2 scale on x (and on the speedup's y). Dashed grey: ideal. Dashed model: beyond the largest point "
            "measured, an extrapolation (the model assumed to hold)."
            if model else "Log2 scale on x (and on the speedup's y). Dashed grey: ideal. No model: "
            + esc(result.get("why_no_model", "none fitted")) + ".")
    return ('<section id="scaling"><h2>Scaling</h2>' + "".join(f'<figure class="plot">{p}</figure>' for p in plots)
            + f'<p class="hint">{esc(note)}</p>' + _calls(result.get("calls") or [], resource) + "</section>")


def _calls(rows: List[Dict[str, Any]], resource: str) -> str:
    """The models per MPI call and region (scale --profile), the longest at the largest count first."""
    if not rows:
        return ""
    from ..analysis.scaling_calls import SHOWN
    counts = sorted({x["p"] for r in rows[:SHOWN] for x in r["points"]})
    head = "".join(f'<th class="n">{p:g}</th>' for p in counts)
    body = []
    for r in rows[:SHOWN]:
        at = {x["p"]: x["median"] for x in r["points"]}
        cells = "".join(f'<td class="n">{at[p]:.3g}</td>' if p in at else "<td>-</td>" for p in counts)
        what = r["name"] if r["kind"] == "mpi" else f"region {r['name']}"
        model = (f"{r['model']['text']}" if r.get("model") else f"no model: {r.get('why_no_model', '')}")
        body.append(f"<tr><td>{esc(what)}</td>{cells}<td>{esc(model)}</td></tr>")
    more = (f'<p class="hint">{len(rows) - SHOWN} more in the JSON and the --extrap file.</p>'
            if len(rows) > SHOWN else "")
    return (f"<h3>Per MPI call and region</h3><p>Median seconds at each count of {esc(resource)} "
            f"({esc(rows[0]['aggregate'])}, as Extra-P reads a profile) and each one's model (PMNF, p = "
            f"{esc(resource)}).</p><table><thead><tr><th>call or region</th>{head}<th>model (s)</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{more}")
