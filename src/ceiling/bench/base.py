"""What every bench module shares: the one place where raw kernel times
become rates, and the verdict every bench writes into a metric's note.

A bench module exposes functions ``f(ctx: Context) -> Outcome``. It calls the
C core (``ceiling.core.run``), turns raw times into Metrics with
``rate_metric`` / ``per_iter_metric``, and never prints: progress goes through
``ctx.progress``, warnings into Metric.note or Findings.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from .. import core
from ..machine.model import Machine
from ..results.measure import Outcome
from ..results.model import HIGHER, LOWER, Finding, Metric, Peak


def single_numa_domain(machine: Machine, finding_id: str, what: str) -> Optional[Outcome]:
    """The skipped Outcome of a NUMA-matrix bench on a node with one domain, else None."""
    n = len(machine.nodes)
    if n >= 2:
        return None
    return Outcome(findings=[Finding(
        id=finding_id, status="skipped", title=f"NUMA {what}: one NUMA domain, nothing to compare",
        evidence=f"{n or 1} NUMA node(s) in the machine model",
        why=f"Remote-memory {what} only exists with several NUMA domains.")])


def _context(raw: core.RawResult, extra: Dict[str, Any]) -> Dict[str, Any]:
    ctx = {"kernel": raw.kernel.name, "isa": raw.kernel.isa, "threads": raw.nthreads,
           "iters_per_rep": raw.iters, "reps": len(raw.times_s), "hugepages": raw.hugepages}
    ctx.update(extra)
    return ctx


def judge(m: Metric, valid: bool, problem: str = "") -> Metric:
    """Every bench's verdict on a metric: invalid, with ``problem`` in its note saying why. (A spread
    above CV_WARN is in its stats; the reports mark it and say why once per run.)"""
    notes = [m.note]
    if not valid:
        notes.append(problem)
    m.valid = m.valid and valid
    m.note = "; ".join(filter(None, notes))
    return m


def _note(m: Metric, raw: core.RawResult) -> Metric:
    return judge(m, raw.valid, f"validation failed: {raw.msg or 'output did not match'}")


def rate_metric(name: str, raw: core.RawResult, *, per: str = "bytes", unit: str = "GB/s",
                scale: float = 1e-9, peak: Optional[Peak] = None, **context) -> Metric:
    """Throughput: (iters x bytes_per_iter or flops_per_iter) / seconds, one value per repetition.

    ``scale`` converts to the unit (1e-9 for GB/s and Gflop/s, decimal as STREAM uses).
    """
    work = raw.kernel.bytes_per_iter if per == "bytes" else raw.kernel.flops_per_iter
    vals = [raw.iters * work * scale / t for t in raw.times_s if t > 0]
    m = Metric.measured(name, vals, unit, HIGHER, peak=peak, context=_context(raw, context))
    return _note(m, raw)


def per_iter_metric(name: str, raw: core.RawResult, *, unit: str = "ns", scale: float = 1e9,
                    better: str = LOWER, peak: Optional[Peak] = None, **context) -> Metric:
    """Time per iteration (latency): seconds / iters x scale, one value per repetition."""
    vals = [t / raw.iters * scale for t in raw.times_s if raw.iters > 0]
    m = Metric.measured(name, vals, unit, better, peak=peak, context=_context(raw, context))
    return _note(m, raw)


ProgressFn = Callable[[str], None]
