"""A scaling study's analysis (analysis/scaling_models.analyse) as lines of text: one per point
(median, spread, every repetition, speedup, efficiency, Karp-Flatt; scaled efficiency when weak),
Amdahl's or Gustafson's serial fraction with its interval, the chosen model with its
cross-validated error and its predictions (marked as extrapolations), and the honesty findings.
They are the study's analysis notes (results.model.StudyAnalysis), so the terminal, the HTML page
and ``ceiling show STUDY`` print the same lines."""
from __future__ import annotations

from typing import Any, Dict, List


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:.0%}"


def _x(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}x"


def point_line(r: Dict[str, Any], resource: str, weak: bool, unit: str = "") -> str:
    rate = "median" in r                 # a rate: its own figures shown, the speedup from their inverse
    reps = ", ".join(f"{t:.4g}" for t in (r["values"] if rate else r["times"]))
    u = f" {unit}" if unit else ""
    head = f"{r['p']:g} {resource}: median {r['median'] if rate else r['median_s']:.4g}{u}, " \
           f"spread {_pct(r['spread'])} ({reps})"
    if weak:
        return f"{head}; scaled efficiency {_pct(r.get('scaled_efficiency'))}"
    kf = r.get("serial_fraction")
    return (f"{head}; speedup {_x(r.get('speedup'))}, efficiency {_pct(r.get('efficiency'))}"
            + (f", Karp-Flatt serial fraction {kf:.3f}" if kf is not None else ""))


def summary_lines(result: Dict[str, Any]) -> List[str]:
    resource, weak = result.get("resource", "threads"), result.get("weak", False)
    rate, unit = result.get("rate", False), result.get("unit", "")
    u = f" {unit}" if unit else ""
    lines = []
    if rate:
        lines.append(f"figure: a rate{u} (higher is better); speedup, efficiency and the model use its inverse, "
                     "the time per unit of work")
    lines += [point_line(r, resource, weak, unit) for r in result.get("points", [])]
    fit = result.get("gustafson" if weak else "amdahl")
    if fit:
        name = "Gustafson" if weak else "Amdahl"
        extra = (f" (speedup at most {fit['max_speedup']:.3g}x)" if fit.get("max_speedup") else "")
        lines.append(f"{name}: serial fraction {fit['serial_fraction']:.4f}, {fit['level']:.0%} interval "
                     f"{fit['low']:.4f} to {fit['high']:.4f}{extra}")
    model = result.get("model")
    if model:
        what = f"1/rate (time per unit of work{', 1/' + unit if unit else ''})" if rate else "time"
        lines.append(f"model (PMNF, cross-validated, the least unusual the repetitions' noise does not reject): "
                     f"{what} = {model['text']}; cross-validated error (symmetric, Extra-P's SMAPE) "
                     f"{model['cv_error'] ** 0.5:.1%}")
        for pr in result.get("predictions", []):
            if rate and pr.get("value") is not None:
                lo, hi = pr.get("value_low"), pr.get("value_high")
                span = f"{lo:.4g} to {hi:.4g}" if lo is not None and hi is not None else "unbounded (the interval " \
                    "of the time per unit reaches zero)"
                figure = f"{pr['value']:.4g}{u}, {pr['level']:.0%} interval {span}"
            else:
                figure = f"{pr['time_s']:.4g}, {pr['level']:.0%} interval {pr['low']:.4g} to {pr['high']:.4g}"
            lines.append(f"extrapolation to {pr['p']:g} {resource} (beyond the data, the model assumed to hold): "
                         + figure)
    elif result.get("why_no_model"):
        lines.append(f"no model: {result['why_no_model']}")
    if result.get("split"):
        from ..analysis.scaling_split import lines as split_lines
        lines += split_lines(result["split"], resource)
    if result.get("calls"):
        from ..analysis.scaling_calls import lines as call_lines
        lines.append("per MPI call and region (PMNF models as Extra-P makes them, seconds):")
        lines += ["  " + x for x in call_lines(result["calls"], resource)]
    for f in result.get("findings", []):
        lines.append(f"{f.status}: {f.title}" + (f" ({f.evidence})" if f.evidence else ""))
    return lines
