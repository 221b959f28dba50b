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


def point_line(r: Dict[str, Any], resource: str, weak: bool) -> str:
    reps = ", ".join(f"{t:.4g}" for t in r["times"])
    head = f"{r['p']:g} {resource}: median {r['median_s']:.4g}, spread {_pct(r['spread'])} ({reps})"
    if weak:
        return f"{head}; scaled efficiency {_pct(r.get('scaled_efficiency'))}"
    kf = r.get("serial_fraction")
    return (f"{head}; speedup {_x(r.get('speedup'))}, efficiency {_pct(r.get('efficiency'))}"
            + (f", Karp-Flatt serial fraction {kf:.3f}" if kf is not None else ""))


def summary_lines(result: Dict[str, Any]) -> List[str]:
    resource, weak = result.get("resource", "threads"), result.get("weak", False)
    lines = [point_line(r, resource, weak) for r in result.get("points", [])]
    fit = result.get("gustafson" if weak else "amdahl")
    if fit:
        name = "Gustafson" if weak else "Amdahl"
        extra = (f" (speedup at most {fit['max_speedup']:.3g}x)" if fit.get("max_speedup") else "")
        lines.append(f"{name}: serial fraction {fit['serial_fraction']:.4f}, {fit['level']:.0%} interval "
                     f"{fit['low']:.4f} to {fit['high']:.4f}{extra}")
    model = result.get("model")
    if model:
        lines.append(f"model (PMNF, chosen by leave-one-point-out cross-validation): time = {model['text']}; "
                     f"cross-validated relative error {model['cv_error'] ** 0.5:.1%}")
        for pr in result.get("predictions", []):
            lines.append(f"extrapolation to {pr['p']:g} {resource} (beyond the data, the model assumed to hold): "
                         f"{pr['time_s']:.4g}, {pr['level']:.0%} interval {pr['low']:.4g} to {pr['high']:.4g}")
    elif result.get("why_no_model"):
        lines.append(f"no model: {result['why_no_model']}")
    for f in result.get("findings", []):
        lines.append(f"{f.status}: {f.title}" + (f" ({f.evidence})" if f.evidence else ""))
    return lines
