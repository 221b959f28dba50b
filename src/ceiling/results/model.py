"""The one result model: a Run holds Metrics, Findings and Series.

Everything ceiling measures or concludes ends up here, and every report and
the store read only this. Objects are plain dataclasses that convert to and
from the versioned JSON document (``to_dict`` / ``from_dict``); the document's
shape is pinned by ``schema.json`` beside this file and by the golden files in
tests/golden/.

Version history of the JSON document (``schema_version``):
  1 - first version.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional

SCHEMA_VERSION = 1

HIGHER = "higher"
LOWER = "lower"

# Coefficient of variation above which a measurement is noisy: benches note it on the
# metric as they measure, analysis.stats warns with it.
CV_WARN = 0.05

OK, WARN, FAIL, SKIPPED = "ok", "warn", "fail", "skipped"
STATUSES = (OK, WARN, FAIL, SKIPPED)


@dataclass(frozen=True)
class Stats:
    """Summary of repeated measurements, in the metric's unit."""

    n: int            # repetitions
    best: float       # max when better is higher, min when lower
    median: float
    mean: float
    min: float
    max: float
    stdev: float      # sample standard deviation (0 when n == 1)
    cv: float         # stdev / mean (coefficient of variation, a fraction)

    @classmethod
    def of(cls, values, better: str = HIGHER) -> "Stats":
        vals = sorted(float(v) for v in values)
        if not vals:
            raise ValueError("no values")
        n = len(vals)
        mean = math.fsum(vals) / n
        mid = n // 2
        median = vals[mid] if n % 2 else 0.5 * (vals[mid - 1] + vals[mid])
        stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
        best = vals[-1] if better == HIGHER else vals[0]
        cv = stdev / mean if mean else 0.0
        return cls(n, best, median, mean, vals[0], vals[-1], stdev, cv)


@dataclass(frozen=True)
class Peak:
    """A theoretical ceiling and where it came from, or why it is unknown."""

    value: Optional[float]   # None = unknown
    unit: str
    provenance: str          # the formula with its inputs, or the reason it is unknown

    @property
    def known(self) -> bool:
        return self.value is not None


@dataclass
class Metric:
    """One measured quantity with its spread, peak and context."""

    name: str                          # dotted: "stream.triad", "flops.dp.avx2", "latency.dram"
    value: Optional[float]             # headline = stats.best (STREAM's convention); None = not measured
    unit: str                          # "GB/s", "Gflop/s", "ns", "GHz", "cycles"
    better: str = HIGHER               # "higher" | "lower"
    stats: Optional[Stats] = None
    values: List[float] = field(default_factory=list)   # every timed repetition, in unit
    peak: Optional[Peak] = None
    efficiency: Optional[float] = None  # value / peak.value, a fraction; None when peak unknown
    valid: bool = True                 # the kernel's output matched its analytic value
    context: Dict[str, Any] = field(default_factory=dict)  # threads, cpus, placement, sizes, isa, ...
    note: str = ""                     # warnings attached to this measurement (high CV, load)

    @classmethod
    def measured(cls, name: str, values, unit: str, better: str = HIGHER,
                 peak: Optional[Peak] = None, **kw) -> "Metric":
        vals = [float(v) for v in values]
        st = Stats.of(vals, better)
        eff = None
        if peak is not None and peak.known and peak.value:
            eff = st.best / peak.value
        return cls(name=name, value=st.best, unit=unit, better=better, stats=st, values=vals,
                   peak=peak, efficiency=eff, **kw)


@dataclass
class Finding:
    """One conclusion about the node, with what it rests on and what to do."""

    id: str                 # stable, dotted: "cpu.governor", "load.competing"
    status: str             # ok | warn | fail | skipped
    title: str              # one line a user reads first
    evidence: str = ""      # what was read or measured
    why: str = ""           # why it matters for performance
    fix: str = ""           # what to do about it
    needs_root: bool = False


@dataclass
class Series:
    """Data behind a plot: x/y points or a labelled matrix."""

    name: str                     # "stream.triad.threads", "latency.chase", "c2c.matrix"
    kind: str                     # "xy" | "matrix"
    title: str = ""
    x_label: str = ""
    x_unit: str = ""
    y_label: str = ""
    y_unit: str = ""
    x: List[float] = field(default_factory=list)
    y: List[Optional[float]] = field(default_factory=list)
    labels: List[str] = field(default_factory=list)        # matrix rows/columns (CPU ids)
    matrix: List[List[Optional[float]]] = field(default_factory=list)
    context: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """One invocation of ceiling on one host."""

    tool_version: str
    host: str
    started: str                           # ISO 8601 UTC
    command: List[str]
    run_id: str = ""
    finished: str = ""
    schema_version: int = SCHEMA_VERSION
    machine: Dict[str, Any] = field(default_factory=dict)       # Machine.to_dict()
    environment: Dict[str, Any] = field(default_factory=dict)   # OMP_*, threads, placement, affinity
    metrics: List[Metric] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    series: List[Series] = field(default_factory=list)
    partial: bool = False                  # interrupted or failed before the end
    partial_reason: str = ""

    def metric(self, name: str) -> Optional[Metric]:
        for m in self.metrics:
            if m.name == name:
                return m
        return None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Run":
        d = dict(d)
        d["metrics"] = [_metric_from(m) for m in d.get("metrics", [])]
        d["findings"] = [Finding(**_known(Finding, f)) for f in d.get("findings", [])]
        d["series"] = [Series(**_known(Series, s)) for s in d.get("series", [])]
        return cls(**_known(cls, d))


def _known(cls, d: Dict[str, Any]) -> Dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _metric_from(d: Dict[str, Any]) -> Metric:
    d = _known(Metric, d)
    if d.get("stats") is not None:
        d["stats"] = Stats(**d["stats"])
    if d.get("peak") is not None:
        d["peak"] = Peak(**d["peak"])
    return Metric(**d)
