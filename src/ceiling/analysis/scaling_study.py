"""A scaling study's analysis from its member runs (`ceiling scale`): the figures, competing load
and failures per count gathered from the members, then scaling_models' fits and checks, and with
--profile the time split per point (scaling_split) and a model per MPI call and region
(scaling_calls). What verbs/scale.py stores and report/html_study.py draws."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..results.model import OK
from . import scaling_calls, scaling_split
from .scaling_models import analyse, series_model


def gathered(study) -> Tuple[Dict[float, List[float]], Dict[float, List[str]], Dict[float, List[Any]]]:
    """From a scaling study's member runs (verbs/scale.py makes them): the figures per count, the
    competing load's lines, the failed runs' exit statuses (or signals)."""
    times: Dict[float, List[float]] = {}
    competing: Dict[float, List[str]] = {}
    failed: Dict[float, List[Any]] = {}
    for m in study.members:
        if m.run is None:
            continue
        n = float(m.value)
        metric = m.run.metric("scale.metric") or m.run.metric("scale.time")
        app = m.run.application
        if metric is not None and metric.value is not None:
            times.setdefault(n, []).append(metric.value)
        elif app is not None and (app.exit_status not in (0, None) or app.signal):
            failed.setdefault(n, []).append(app.exit_status if app.exit_status is not None else app.signal)
        competing.setdefault(n, []).extend(f.title for f in m.run.findings if f.status != OK)
    return times, competing, failed


def of_study(study) -> Dict[str, Any]:
    """``analyse`` over a scaling study's members, with what the study recorded (CPUs, weak, seed)."""
    import os
    times, competing, failed = gathered(study)
    out = analyse(times, study.parameter, int(study.fixed.get("cpus") or os.cpu_count() or 1),
                   weak=bool(study.fixed.get("weak")), competing=competing, failed=failed,
                   seed=int(study.fixed.get("seed") or 0), rate=study.fixed.get("metric_kind") == "rate",
                   unit=str(study.fixed.get("metric_unit") or ""))
    profiles: Dict[float, List[Dict[str, float]]] = {}
    for m in study.members:
        got = scaling_split.of_run(m.run) if m.run is not None else None
        if got is not None:
            profiles.setdefault(float(m.value), []).append(got)
    if profiles:
        out["shares"] = profiles                # every run's, for the export (report/extrap.py)
        out["split"], more = scaling_split.split(profiles, study.parameter)
        out["findings"] = list(out["findings"]) + more
        seed = int(study.fixed.get("seed") or 0)
        calls = scaling_calls.of_members(study.members, bool(study.fixed.get("weak")),
                                         lambda t: series_model(t, seed))
        if calls:
            out["calls"] = calls
    return out
