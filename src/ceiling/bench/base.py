"""What every bench module shares: options, context, outcome, and the one
place where raw kernel times become rates.

A bench module exposes functions ``f(ctx: Context) -> Outcome``. It calls the
C core (``ceiling.core.run``), turns raw times into Metrics with
``rate_metric`` / ``per_iter_metric``, and never prints: progress goes through
``ctx.progress``, warnings into Metric.note or Findings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .. import core
from ..machine.model import Machine
from ..analysis.stats import CV_WARN
from ..results.model import HIGHER, LOWER, Finding, Metric, Peak, Series



@dataclass
class Options:
    """What the user asked for; None means "choose for this machine"."""

    quick: bool = False
    threads: Optional[int] = None        # None: every CPU this process may use (or OMP_NUM_THREADS)
    placement: str = "compact"           # compact | scatter | node:N
    reps: Optional[int] = None           # timed repetitions per measurement
    size_bytes: Optional[int] = None     # working set / array bytes override
    isa: Optional[str] = None            # force one ISA variant
    nt_stores: bool = False              # STREAM with non-temporal stores
    oversubscribe: bool = False          # allow more threads than CPUs
    storage_dir: Optional[str] = None    # bench storage: where its ceiling-io-* directory goes ($TMPDIR)


class NullProgress:
    """Progress sink that draws nothing (tests, --json, non-TTY)."""

    def start(self, label: str, total: float = 0.0) -> None: ...
    def advance(self, amount: float = 1.0) -> None: ...
    def done(self) -> None: ...


@dataclass
class Context:
    machine: Machine
    opts: Options
    cpus: List[int]                      # the placement plan: thread i runs on cpus[i]
    progress: Any = field(default_factory=NullProgress)

    @property
    def nthreads(self) -> int:
        return len(self.cpus)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a bench step: ``outcome`` holds what was measured before it."""

    def __init__(self, outcome: "Outcome", *args):
        super().__init__(*(args or ("interrupted",)))
        self.outcome = outcome


@dataclass
class Outcome:
    metrics: List[Metric] = field(default_factory=list)
    series: List[Series] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)

    def extend(self, other: "Outcome") -> "Outcome":
        self.metrics += other.metrics
        self.series += other.series
        self.findings += other.findings
        return self


def meminfo_bytes(field: str = "MemAvailable") -> Optional[int]:
    """A /proc/meminfo figure in bytes (MemAvailable, MemTotal), None where unreadable."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


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


def judge(m: Metric, valid: bool, problem: str = "",
          spread_why: str = "other load or frequency changes; rerun on an idle node") -> Metric:
    """Every bench's verdict on a metric: invalid (``problem`` says why) and a spread above CV_WARN, in its note."""
    notes = [m.note]
    if not valid:
        notes.append(problem)
    if m.stats is not None and m.stats.n > 1 and m.stats.cv > CV_WARN:
        notes.append(f"spread {m.stats.cv:.0%} (CV) is high: {spread_why}")
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
