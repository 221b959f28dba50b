"""What the analysis layer concluded about a run, stored with it (``Run.analysis``).

The analysis layer (ceiling.analysis) fills these; reports only render them,
so a stored run shows the same verdict, roofline and bounds wherever and
whenever it is read. Documents of schema_version 1 carry none: they load with
an empty Analysis (``Analysis.empty``) and the analysis is computed when they
are rendered.

These are the stored forms. analysis/roofline.py has its own working types
(its Roof and Roofline compute attainable rates); the ones here are the
plain records it writes out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .base import HIGHER, Peak, Record

# Verdict.kind: what the headline conclusion rests on.
BELOW_PEAK = "below_peak"              # the metric furthest below its known peak
UNKNOWN_PEAKS = "unknown_peaks"        # metrics were measured but no peak is known
NO_PEAK = "no_peak"                    # nothing measured has a peak to compare with
NOTHING_MEASURED = "nothing_measured"  # the run holds no measured value
NO_VERDICT = "no_verdict"              # the analysis declined to conclude (see evidence)
VERDICT_KINDS = (BELOW_PEAK, UNKNOWN_PEAKS, NO_PEAK, NOTHING_MEASURED, NO_VERDICT)

# Figure.state: why a metric is not shown as the node's value as it stands.
DISTURBED = "disturbed"    # measured while other processes were busy: not the node's value at all
UNSTABLE = "unstable"      # its repetitions spread too far for the best to stand: the median is shown
FIGURE_STATES = (DISTURBED, UNSTABLE)

# Roof.kind
COMPUTE = "compute"
BANDWIDTH = "bandwidth"
ROOF_KINDS = (COMPUTE, BANDWIDTH)

# Bound.bound: what limits the subject. "cpu": on a CPU, compute and memory not told apart
# (no hardware counters); "oversubscribed": runnable but waiting for a CPU.
BOUND_KINDS = ("compute", "memory", "cpu", "mpi", "mpi_latency", "mpi_bandwidth", "imbalance", "io", "oversubscribed",
               "waiting", "unknown")


@dataclass
class Verdict(Record):
    """The one-line conclusion of a run: how far below its ceiling, or why that is unknown."""

    kind: str                              # one of VERDICT_KINDS
    metric: str = ""                       # Metric.name the verdict is about; "" = none
    node: str = ""                         # Metric.node of that metric; "" = the run's own host
    value: Optional[float] = None          # the metric's value, in unit
    unit: str = ""                         # unit of value
    efficiency: Optional[float] = None     # value / peak.value, a fraction; None when no peak
    peak: Optional[Peak] = None            # the ceiling it is compared with
    unknown: List[Dict[str, str]] = field(default_factory=list)  # [{"metric": ..., "reason": ...}] peaks not known
    evidence: str = ""                     # the figures the verdict rests on, in words


@dataclass
class Roof(Record):
    """One roof of a stored roofline: a compute ceiling or a bandwidth slope."""

    name: str                 # the metric it comes from, or "peak:<Machine.peaks key>" for a theoretical roof
    label: str                # words for a legend
    kind: str                 # "compute" | "bandwidth"
    value: float              # Gflop/s for a compute roof, GB/s for a bandwidth roof
    unit: str                 # "Gflop/s" | "GB/s"
    measured: bool            # False: a theoretical peak
    source: str = ""          # "measured, best of N" or the peak's provenance


@dataclass
class Ridge(Record):
    """Where a bandwidth roof meets a compute roof."""

    compute: str              # Roof.name of the compute roof
    bandwidth: str            # Roof.name of the bandwidth roof
    intensity: float          # flop/byte where the two roofs meet


@dataclass
class RooflinePoint(Record):
    """A measured kernel or application placed on the roofline."""

    name: str                 # metric or region name, e.g. "dgemm.node", "application"
    label: str                # words for a legend
    intensity: float          # arithmetic intensity, flop/byte
    value: float              # achieved rate, Gflop/s
    source: str = ""          # where intensity and rate come from (counters, kernel model)


@dataclass
class Roofline(Record):
    """The roofline of the run's node as stored: roofs, ridge points and placed points."""

    roofs: List[Roof] = field(default_factory=list)             # compute and bandwidth roofs
    ridges: List[Ridge] = field(default_factory=list)           # one per compute/bandwidth pair drawn
    missing: List[str] = field(default_factory=list)            # one line per roof not drawn, with the reason
    points: List[RooflinePoint] = field(default_factory=list)   # kernels or the application on the plot


@dataclass
class Bound(Record):
    """What limits a subject (the application, a rank, a node)."""

    subject: str                           # "application", "rank 3", a node name, ...
    bound: str                             # one of BOUND_KINDS
    share: Optional[float] = None          # fraction of time spent in that bound; None = not measured
    evidence: str = ""                     # the figures it rests on, in words
    data: Dict[str, Any] = field(default_factory=dict)   # the same figures, structured (JSON values)


@dataclass
class Uniformity(Record):
    """How one metric varies across nodes, and which nodes stand out."""

    metric: str                            # Metric.name
    unit: str                              # unit of the values
    better: str = HIGHER                   # "higher" | "lower"
    values: Dict[str, Optional[float]] = field(default_factory=dict)  # node -> value, in unit
    median: Optional[float] = None         # median of values, in unit
    min: Optional[float] = None            # smallest value, in unit
    max: Optional[float] = None            # largest value, in unit
    spread: Optional[float] = None         # (max - min) / median, a fraction; None when median is 0 or unknown
    mad: Optional[float] = None            # median absolute deviation from the median, in unit
    # [{"node", "value" (unit), "z", "worse" (fraction), "than" ("median" or a node), "evidence" (its own findings)}]
    outliers: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class Absent(Record):
    """An expected series the run lacks, and why (a report says it instead of drawing empty axes)."""

    series: str               # Series.name the report expected
    reason: str               # why it is not in the run, in words


@dataclass
class Capacity(Record):
    """A cache capacity a working-set axis is read against: what ``instances`` caches of one level hold."""

    series: str               # Series.name of the working-set plot
    level: Optional[int]      # cache level (1, 2, 3); None when unknown
    type: str                 # "data" | "unified"
    bytes: int                # capacity usable by the series' threads, bytes
    instances: int            # cache instances those threads span (1 for one thread)


@dataclass
class Figure(Record):
    """A metric a summary must not show as the node's value as it stands, and what it shows instead.

    The metric keeps its value (the best repetition: comparisons and the cluster's ranking rely
    on it); this says how a headline presents it."""

    metric: str                            # Metric.name
    node: str = ""                         # Metric.node; "" = the run's own host
    state: str = DISTURBED                 # one of FIGURE_STATES
    shown: Optional[float] = None          # the figure shown as the node's, in unit; None: none (disturbed)
    unit: str = ""                         # unit of shown, measured and median
    measured: Optional[float] = None       # the metric's value (its best repetition), in unit
    median: Optional[float] = None         # median of its repetitions, in unit; None when not recorded
    cv: Optional[float] = None             # coefficient of variation of its repetitions, a fraction
    efficiency: Optional[float] = None     # shown over the metric's peak, a fraction; None without either
    evidence: str = ""                     # why, with the figures, and what to do


@dataclass
class Analysis(Record):
    """Everything the analysis layer concluded; empty when not (yet) analysed."""

    verdict: Optional[Verdict] = None                            # the headline conclusion
    roofline: Optional[Roofline] = None                          # the node's roofline
    bounds: List[Bound] = field(default_factory=list)            # what limits each subject
    uniformity: List[Uniformity] = field(default_factory=list)   # per-metric spread across nodes
    notes: List[str] = field(default_factory=list)               # free-text analysis notes
    absent: List[Absent] = field(default_factory=list)           # expected series not in the run, with why
    capacities: List[Capacity] = field(default_factory=list)     # cache capacities of working-set series
    # Added to schema 2 after documents of it were written: always written, absent in older ones.
    figures: List[Figure] = field(default_factory=list)          # metrics not shown as they stand (disturbed, unstable)

    def absent_reason(self, series: str) -> Optional[str]:
        return next((a.reason for a in self.absent if a.series == series), None)

    def capacities_of(self, series: str) -> List[Capacity]:
        return [c for c in self.capacities if c.series == series]

    def figure(self, metric: str, node: str = "") -> Optional[Figure]:
        """How the metric ``metric`` of ``node`` is shown when not as it stands; None: as it stands."""
        return next((f for f in self.figures if f.metric == metric and f.node == node), None)

    @property
    def empty(self) -> bool:
        """True when nothing was stored (a v1 document, or a run not analysed)."""
        return (self.verdict is None and self.roofline is None and not self.bounds
                and not self.uniformity and not self.notes and not self.absent and not self.capacities
                and not self.figures)
