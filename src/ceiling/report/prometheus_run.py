"""A measured run's headline for Prometheus: ``ceiling run/check/bench --textfile DIR`` writes
``DIR/ceiling.prom`` for node_exporter's textfile collector (written as the probe's textfile is:
prometheus.write_textfile, atomic), so that a site's Prometheus holds each node's measured ceilings
and failed checks beside its usual metrics.

Series (gauges; the node is Prometheus's ``instance``, so no node label; every label bounded):

- ``ceiling_metric_value{metric, unit, threads, placement}``: a figure as the run reports it
  (Metric.value, in ``unit``; a label the context lacks is ""); ``ceiling_metric_peak{...}`` its
  theoretical peak where known, ``ceiling_metric_efficiency_ratio{...}`` value / peak (a fraction),
  ``ceiling_metric_timestamp_seconds{...}`` when its run started (Unix time). A figure that failed
  validation is left out (not trusted); a second figure with the same labels (another size) too:
  the first is the headline.
- ``ceiling_verdict_info{kind, metric}`` 1: the run's verdict (analysis/summary.py: the figure
  furthest below its peak, or why none is named), ``ceiling_verdict_efficiency_ratio{metric}``.
- ``ceiling_check_severity{check}``: SEVERITY of each check's finding (the worst where a check gives
  several): 0 ok, 1 warn, 2 fail, -1 skipped (alert on ``> 0``); ``ceiling_check_timestamp_seconds
  {check}`` when it ran.

One file holds the latest of each: a run replaces the series of the metrics it measured, of the checks
it ran and (when it measured anything) the verdict, and keeps the rest of the previous file, so that a
check from cron every ten minutes does not erase the ceilings measured after the last maintenance. A
previous file that cannot be read as ours is replaced whole.
"""
from __future__ import annotations

import os
from datetime import datetime
from typing import Dict, Iterable, List, Optional, Tuple

from ..results.model import FAIL, OK, SKIPPED, WARN, Run
from .prometheus import check_textfile_dir, write_textfile

RUN_TEXTFILE = "ceiling.prom"
SEVERITY = {OK: 0, WARN: 1, FAIL: 2, SKIPPED: -1}
METRIC_LABELS = ("metric", "unit", "threads", "placement")

# family -> (help, label names, what selects its samples: "metric", "check" or "verdict")
FAMILIES: Dict[str, Tuple[str, Tuple[str, ...], str]] = {
    "ceiling_metric_value": ("A figure ceiling measured on this node, in its unit label", METRIC_LABELS, "metric"),
    "ceiling_metric_peak": ("The figure's theoretical peak, in its unit label", METRIC_LABELS, "metric"),
    "ceiling_metric_efficiency_ratio": ("The figure / its theoretical peak", METRIC_LABELS, "metric"),
    "ceiling_metric_timestamp_seconds": ("When the run that measured the figure started", METRIC_LABELS, "metric"),
    "ceiling_verdict_info": ("The last measuring run's verdict (kind; the metric furthest below its peak)",
                             ("kind", "metric"), "verdict"),
    "ceiling_verdict_efficiency_ratio": ("The verdict's figure / its theoretical peak", ("metric",), "verdict"),
    "ceiling_check_severity": ("A check's finding: 0 ok, 1 warn, 2 fail, -1 skipped", ("check",), "check"),
    "ceiling_check_timestamp_seconds": ("When the run that made the check's finding started", ("check",), "check"),
}

Sample = Tuple[Tuple[str, ...], float]          # label values in FAMILIES' order, value


def _epoch(iso: str) -> Optional[float]:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


def _label(v) -> str:
    return "" if v is None else str(v)


def samples(run: Run) -> Dict[str, List[Sample]]:
    """This run's series, by family: the host's own metrics and findings (module docstring)."""
    out: Dict[str, List[Sample]] = {f: [] for f in FAMILIES}
    when = _epoch(run.started)
    seen = set()
    for m in run.metrics_of(""):
        if m.value is None or not m.valid:
            continue
        ctx = m.context if isinstance(m.context, dict) else {}
        labels = (m.name, m.unit, _label(ctx.get("threads")), _label(ctx.get("placement")))
        if labels in seen:
            continue
        seen.add(labels)
        out["ceiling_metric_value"].append((labels, float(m.value)))
        if m.peak is not None and m.peak.value is not None:
            out["ceiling_metric_peak"].append((labels, float(m.peak.value)))
        if m.efficiency is not None:
            out["ceiling_metric_efficiency_ratio"].append((labels, float(m.efficiency)))
        if when is not None:
            out["ceiling_metric_timestamp_seconds"].append((labels, when))
    if out["ceiling_metric_value"]:
        v = run.analysis.verdict
        if v is not None:
            out["ceiling_verdict_info"].append(((v.kind, v.metric), 1.0))
            if v.efficiency is not None:
                out["ceiling_verdict_efficiency_ratio"].append(((v.metric,), float(v.efficiency)))
    worst: Dict[str, int] = {}
    host = run.host
    for f in run.findings:
        if f.node not in ("", host) or f.status not in SEVERITY:
            continue
        worst[f.id] = max(worst.get(f.id, -1), SEVERITY[f.status])
    for check, sev in sorted(worst.items()):
        out["ceiling_check_severity"].append(((check,), float(sev)))
        if when is not None:
            out["ceiling_check_timestamp_seconds"].append(((check,), when))
    return out


def previous(path: str) -> Optional[Dict[str, List[Sample]]]:
    """Our series in the file a previous run wrote; None when there is none or it is not ours to read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {f: [] for f in FAMILIES}
    except (OSError, UnicodeDecodeError):
        return None
    from prometheus_client.parser import text_string_to_metric_families
    out: Dict[str, List[Sample]] = {f: [] for f in FAMILIES}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                spec = FAMILIES.get(s.name)
                if spec is None or set(s.labels) != set(spec[1]):
                    continue
                out[s.name].append((tuple(s.labels[k] for k in spec[1]), float(s.value)))
    except Exception:       # noqa: BLE001 - whatever the parser cannot take is not ours: replaced whole
        return None
    return out


def merged(new: Dict[str, List[Sample]], old: Dict[str, List[Sample]]) -> Dict[str, List[Sample]]:
    """``old`` less what ``new`` replaces, then ``new`` (module docstring)."""
    metrics = {labels[0] for labels, _ in new["ceiling_metric_value"]}
    checks = {labels[0] for labels, _ in new["ceiling_check_severity"]}
    verdict = bool(new["ceiling_verdict_info"]) or bool(metrics)
    out: Dict[str, List[Sample]] = {}
    for fam, (_, names, by) in FAMILIES.items():
        keep = [(labels, v) for labels, v in old.get(fam, ())
                if not (by == "metric" and labels[0] in metrics or by == "check" and labels[0] in checks
                        or by == "verdict" and verdict)]
        got = {labels for labels, _ in new[fam]}
        out[fam] = sorted([s for s in keep if s[0] not in got] + new[fam])
    return out


class _Collector:
    def __init__(self, series: Dict[str, List[Sample]]):
        self.series = series

    def collect(self) -> Iterable:
        from prometheus_client.core import GaugeMetricFamily
        for fam, (doc, names, _) in FAMILIES.items():
            if not self.series.get(fam):
                continue
            g = GaugeMetricFamily(fam, doc, labels=list(names))
            for labels, v in self.series[fam]:
                g.add_metric(list(labels), v)
            yield g


def write_run(run: Run, textfile_dir: str) -> str:
    """Write ``run``'s headline into ``textfile_dir``/ceiling.prom, merged with what is there; the path."""
    from prometheus_client import CollectorRegistry
    check_textfile_dir(textfile_dir)
    path = os.path.join(textfile_dir, RUN_TEXTFILE)
    old = previous(path)
    series = merged(samples(run), old if old is not None else {})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(series))      # type: ignore[arg-type]
    write_textfile(path, registry)
    return path
