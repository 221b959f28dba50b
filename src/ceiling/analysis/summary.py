"""The verdict of a run: the subsystem furthest below its peak, or why no
efficiency can be given; and the problems a summary lists first.

Pure functions over a results.model.Run. ``verdict`` is computed once, stored
in ``Run.analysis`` (analysis.analyse), and only rendered afterwards: the
words for it are the report's (report/labels.py).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..results.analysis import NO_VERDICT, Verdict
from ..results.machine_view import MachineFacts
from ..results.model import FAIL, WARN, Finding, Metric, Run
from ..units import figure

# Suffixes that name a kernel variant: such a metric measures the variant, not
# the subsystem (the widest variant carries the plain name).
ISA_SUFFIXES = frozenset({"scalar", "sse2", "avx", "avx2", "avx512", "neon", "sve"})

# Machine.peaks keys behind each metric, for when a metric carries no Peak itself.
MACHINE_PEAK = {
    "flops.dp.core": "flops.dp.core", "flops.sp.core": "flops.sp.core",
    "flops.dp.node": "flops.dp.node", "flops.sp.node": "flops.sp.node",
    "dgemm.node": "flops.dp.node", "stream.triad": "membw.node",
}


def is_variant(name: str) -> bool:
    return name.rpartition(".")[2] in ISA_SUFFIXES


def _eligible(m: Metric) -> bool:
    # a NaN efficiency (a peak of NaN while measuring) would sort anywhere: it is no figure
    return (figure(m.efficiency) is not None and m.value is not None and m.valid
            and m.peak is not None and m.peak.known and not is_variant(m.name))


def furthest_below_peak(run: Run) -> Optional[Metric]:
    """The valid metric with the lowest known efficiency; None when no metric has a known peak.

    Per-ISA variants are left out: they rate a kernel variant, not the node.
    STREAM copy/scale/add stand aside when the triad has a known efficiency.
    """
    cands = [m for m in run.metrics if _eligible(m)]
    if any(m.name == "stream.triad" for m in cands):
        # STREAM's headline is the triad; copy and scale count no write-allocate
        # traffic, so they read lower without the memory being any slower.
        cands = [m for m in cands if m.name == "stream.triad" or not m.name.startswith("stream.")]
    if not cands:
        return None
    return min(cands, key=lambda x: (x.efficiency, x.name))


def unknown_peaks(run: Run) -> List[Tuple[str, str]]:
    """(metric name, reason) for headline metrics whose peak is unknown.

    The reason is the peak's provenance when the bench attached an unknown
    Peak, else the machine's peak of the same key, else "no theoretical peak
    was recorded for it".
    """
    facts = MachineFacts(run.machine)
    out = []
    for m in run.metrics:
        if m.value is None or is_variant(m.name) or (m.peak is not None and m.peak.known):
            continue
        if m.name not in MACHINE_PEAK and m.peak is None:
            continue     # latencies and the like have no peak by nature: nothing to explain
        reason = m.peak.provenance if m.peak is not None else ""
        if not reason:
            mp = facts.peak(MACHINE_PEAK.get(m.name, m.name))
            reason = mp.provenance if mp is not None and not mp.known else ""
        out.append((m.name, reason or "no theoretical peak was recorded for it"))
    return out


def verdict(run: Run) -> Verdict:
    """What a summary leads with, as data: the metric furthest below its peak, or why there is none.
    A metric measured under competing load (``context["disturbed"]``, set when a step met it twice)
    is never the verdict: "no verdict", with the load's evidence."""
    m = furthest_below_peak(run)
    if m is not None and m.context.get("disturbed"):
        return Verdict(kind=NO_VERDICT, metric=m.name, node=m.node, value=m.value, unit=m.unit,
                       efficiency=m.efficiency, peak=m.peak,
                       evidence=f"{m.name} would be furthest below its peak, but it was measured while other "
                                f"processes were busy ({m.context['disturbed']}); rerun on an idle node")
    if m is not None:
        return Verdict(kind="below_peak", metric=m.name, node=m.node, value=m.value, unit=m.unit,
                       efficiency=m.efficiency, peak=m.peak)
    unknown = unknown_peaks(run)
    if unknown:
        return Verdict(kind="unknown_peaks", unknown=[{"metric": n, "reason": why} for n, why in unknown])
    if not run.metrics:
        return Verdict(kind="nothing_measured")
    return Verdict(kind="no_peak")


def problems(run: Run) -> List[Tuple[Finding, int]]:
    """Fail and warn findings, fails first, each with how many more share its why and fix.

    The same cause met in several steps (competing load during each bench) is
    one problem to the reader: the first finding stands for the group.
    """
    groups: List[Tuple[Finding, int]] = []
    index: Dict[tuple, int] = {}
    for status in (FAIL, WARN):
        for f in run.findings:
            if f.status != status:
                continue
            key = (f.status, f.why, f.fix) if (f.why or f.fix) else (f.status, f.id, f.title)
            if key in index:
                first, n = groups[index[key]]
                groups[index[key]] = (first, n + 1)
            else:
                index[key] = len(groups)
                groups.append((f, 0))
    return groups
