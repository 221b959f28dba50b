"""The one result model: a Run holds Metrics, Findings and Series.

Everything ceiling measures or concludes ends up here, and every report and
the store read only this. Objects are plain dataclasses that convert to and
from the versioned JSON document (``to_dict`` / ``from_dict``); the document's
shape is pinned by ``schema.json`` beside this file and by the golden files in
tests/golden/. ``from_dict`` refuses keys the model does not have, naming
their path (base.DocumentError, a ValueError); older documents are brought up
to date by migrate.upgrade before they are read.

A run of several nodes (an MPI job) lists them in ``Run.nodes`` and says
where each Metric, Finding and Series was made with its ``node`` ("" = the
run's own host, which is what a one-node run uses throughout). What the
analysis layer concluded is stored in ``Run.analysis`` (analysis.py).

Stats, Peak, HIGHER/LOWER and CV_WARN live in base.py and the stored
analysis types in analysis.py; all are re-exported here, the one place
callers import the model from.

Version history of the JSON document (``schema_version``):
  1 - first version.
  2 - several nodes and what ran: Metric/Finding/Series.node, Finding.data,
      Run.nodes, Run.job, Run.application; the stored analysis (Run.analysis:
      verdict, roofline, bounds, uniformity, notes). Unknown keys are refused
      everywhere. migrate.py turns a version 1 document into version 2.
  3 - the application section typed (profile.py): Application.profile, what `ceiling
      profile` found (until 2 an untyped dict in Run.environment["profile"]), and
      Application.overhead a record (until 2 a free dict; {} is now null). migrate.py
      moves a version 2 profile there, keeping any key the types lack where it was.

A Study groups several runs that vary one thing (threads, ranks, time, the node, nothing but
the attempt) and is a document of its own, beside Run, with its own version (``study_version``,
STUDY_VERSION): a run keeps its schema_version whether or not it is a member. Each member is a
whole Run, or, where the runs are stored apart (the history keeps each member as a normal run),
a reference by run_id. A document says which it is by its version key: ``schema_version`` (a
Run) or ``study_version`` (a Study); jsonio reads either.

Version history of the study document (``study_version``):
  1 - first version: kind, the parameter that varies and each member's value of it, what is
      held fixed, the members, an analysis slot (notes only, for now), provenance.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from .analysis import (BANDWIDTH, BELOW_PEAK, BOUND_KINDS, COMPUTE, NO_PEAK, NO_VERDICT,
                       NOTHING_MEASURED, ROOF_KINDS, UNKNOWN_PEAKS, VERDICT_KINDS, Absent, Analysis,
                       Bound, Capacity, DISTURBED, FIGURE_STATES, Figure, Ridge, Roof, Roofline, RooflinePoint,
                       UNSTABLE, Uniformity, Verdict)
from .base import CV_WARN, HIGHER, LOWER, DocumentError, Peak, Record, Stats
from .profile import CallTimes, Profile
from .profile_cost import Overhead

__all__ = [
    "SCHEMA_VERSION", "HIGHER", "LOWER", "CV_WARN", "OK", "WARN", "FAIL", "SKIPPED", "STATUSES",
    "DocumentError", "Record", "Stats", "Peak", "Metric", "Finding", "Series",
    "Node", "Job", "OutputFile", "Application", "Run",
    "Analysis", "Absent", "Capacity", "Figure", "DISTURBED", "UNSTABLE", "FIGURE_STATES",
    "Verdict", "Roof", "Ridge", "RooflinePoint", "Roofline", "Bound", "Uniformity",
    "VERDICT_KINDS", "BELOW_PEAK", "UNKNOWN_PEAKS", "NO_PEAK", "NOTHING_MEASURED", "NO_VERDICT",
    "ROOF_KINDS", "COMPUTE", "BANDWIDTH", "BOUND_KINDS",
    "STUDY_VERSION", "STUDY_KINDS", "SCALING", "SERIES", "COMPARISON", "REPETITION",
    "Member", "StudyAnalysis", "Study",
]

SCHEMA_VERSION = 3


def utcnow() -> str:
    """Now as the document's times are written: UTC, ISO 8601, to the second."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

OK, WARN, FAIL, SKIPPED = "ok", "warn", "fail", "skipped"
STATUSES = (OK, WARN, FAIL, SKIPPED)


@dataclass
class Metric(Record):
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
    node: str = ""                     # node it was measured on; "" = the run's own host

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
class Finding(Record):
    """One conclusion about the node, with what it rests on and what to do."""

    id: str                 # stable, dotted: "cpu.governor", "load.competing"
    status: str             # ok | warn | fail | skipped
    title: str              # one line a user reads first
    evidence: str = ""      # what was read or measured
    why: str = ""           # why it matters for performance
    fix: str = ""           # what to do about it
    needs_root: bool = False
    node: str = ""          # node it is about; "" = the run's own host
    data: Dict[str, Any] = field(default_factory=dict)  # the evidence as JSON values (per-CPU figures, ...)


@dataclass
class Series(Record):
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
    node: str = ""                # node it was measured on; "" = the run's own host


@dataclass
class Node(Record):
    """One node of a run of several: what it is and how it was set up."""

    name: str                                                    # node name as the job saw it (Metric.node)
    machine: Dict[str, Any] = field(default_factory=dict)        # Machine.to_dict() of that node
    environment: Dict[str, Any] = field(default_factory=dict)    # as Run.environment, on that node


@dataclass
class Job(Record):
    """How a run of several processes was launched."""

    launcher: str = ""                     # "mpiexec", "srun", ...; "" = not launched by one
    mpi_library: str = ""                  # MPI library and version, e.g. "MPICH 4.1.2"; "" = none
    ranks: int = 1                         # processes in the job
    nodes: int = 1                         # nodes the ranks ran on
    ranks_per_node: Optional[int] = None   # None when uneven or not known
    node_names: List[str] = field(default_factory=list)   # in rank order of first appearance


@dataclass
class OutputFile(Record):
    """A file a profile or trace wrote beside the run document."""

    path: str                        # as written, relative to the run directory when inside it
    kind: str                        # "trace-perfetto", "trace-otf2", "log", ...
    bytes: Optional[int] = None      # size in bytes; None = not known (not written yet, remote)
    description: str = ""            # one line: what it holds


@dataclass
class Application(Record):
    """The program a profile or trace ran, and how it ended."""

    command: List[str] = field(default_factory=list)   # argv of the application
    exit_status: Optional[int] = None      # exit code; None when killed by a signal or not finished
    signal: str = ""                       # "SIGKILL", ... when a signal ended it; "" = none
    wall_s: Optional[float] = None         # wall-clock time from start to end, seconds
    started: str = ""                      # ISO 8601 UTC; "" = not started
    finished: str = ""                     # ISO 8601 UTC; "" = did not finish
    overhead: Optional[Overhead] = None    # measured cost of watching it; None = not measured
    files: List[OutputFile] = field(default_factory=list)   # traces and logs written
    profile: Optional[Profile] = None      # what `ceiling profile` found in it; None = not profiled
    calls: Optional[CallTimes] = None      # time per MPI call and region (scale --profile); None = not kept


@dataclass
class Run(Record):
    """One invocation of ceiling, on one host or on the nodes of a job."""

    tool_version: str
    host: str                              # the node ceiling was started on (rank 0's)
    started: str                           # ISO 8601 UTC
    command: List[str]
    run_id: str = ""
    finished: str = ""
    schema_version: int = SCHEMA_VERSION
    machine: Dict[str, Any] = field(default_factory=dict)       # Machine.to_dict() of host
    environment: Dict[str, Any] = field(default_factory=dict)   # OMP_*, threads, placement, affinity
    metrics: List[Metric] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    series: List[Series] = field(default_factory=list)
    partial: bool = False                  # interrupted or failed before the end
    partial_reason: str = ""
    nodes: List[Node] = field(default_factory=list)   # every node of a run of several; empty for one node
    job: Optional[Job] = None              # how the ranks were launched; None = not an MPI job
    application: Optional[Application] = None   # the program profiled or traced; None = none
    analysis: Analysis = field(default_factory=Analysis)   # what the analysis layer concluded

    def metric(self, name: str) -> Optional[Metric]:
        for m in self.metrics:
            if m.name == name:
                return m
        return None

    def node_names(self) -> List[str]:
        """The nodes of the run: Run.nodes' names, or the host alone for a one-node run."""
        return [n.name for n in self.nodes] if self.nodes else [self.host]

    def _node(self, node: str) -> str:
        return node or self.host

    def machine_of(self, node: str) -> Dict[str, Any]:
        """Machine.to_dict() of ``node`` ("" = the host). KeyError for a node not in the run."""
        name = self._node(node)
        for n in self.nodes:
            if n.name == name:
                return n.machine
        if name == self.host:
            return self.machine
        raise KeyError(f"no node {name!r} in run {self.run_id or '(unsaved)'}")

    def metrics_of(self, node: str) -> List[Metric]:
        """The metrics measured on ``node`` ("" or the host name: the host's, including node "")."""
        name = self._node(node)
        return [m for m in self.metrics if self._node(m.node) == name]

    @classmethod
    def from_dict(cls, d: Any, path: str = "") -> "Run":
        if isinstance(d, dict) and d.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise DocumentError(f"{path}.schema_version" if path else "schema_version",
                                f"{d['schema_version']!r} is not {SCHEMA_VERSION}: "
                                f"upgrade the document first (results.migrate.upgrade)")
        return super().from_dict(d, path)


# -- studies: several runs shown and stored as one ---------------------------------------

STUDY_VERSION = 1

# What a study is, by what its members vary (the verb that will make each is in DESIGN.md).
SCALING = "scaling"          # the same work over more resources: ranks, threads, nodes
SERIES = "series"            # the same observation over time
COMPARISON = "comparison"    # the same measurement of different things: nodes, builds, settings
REPETITION = "repetition"    # the same measurement again, nothing varied on purpose
STUDY_KINDS = (SCALING, SERIES, COMPARISON, REPETITION)


@dataclass
class Member(Record):
    """One run of a study: its value of the varying parameter, and the run or its id."""

    value: Union[float, str]          # the parameter's value for this run (a number or a name)
    run_id: str = ""                  # the run's id; "" = a run not stored, held in ``run``
    run: Optional[Run] = None         # the whole run; None = stored apart, found by run_id


@dataclass
class StudyAnalysis(Record):
    """What analysis concluded across the members; empty until models and compare fill it."""

    notes: List[str] = field(default_factory=list)   # one line each
    # Added after study documents of this version were written: always written, absent in older ones.
    roofline: Optional[Roofline] = None              # the node's roofline with the study's points on it


@dataclass
class Study(Record):
    """Several runs that vary one parameter, shown and stored as one; each member is still a Run."""

    kind: str                              # one of STUDY_KINDS
    parameter: str                         # what varies: "repetition", "threads", "ranks", "time", "node"
    tool_version: str
    host: str                              # the node the study was started on
    started: str                           # ISO 8601 UTC
    command: List[str]                     # argv of the ceiling invocation that made it
    study_id: str = ""                     # unique id (uuid4 hex); "" before stored
    finished: str = ""                     # ISO 8601 UTC; "" = did not finish
    study_version: int = STUDY_VERSION
    unit: str = ""                         # of the parameter's values ("s", "ranks"); "" = a count or a name
    fixed: Dict[str, Any] = field(default_factory=dict)   # what every member shares: suites, threads, placement
    hosts: List[str] = field(default_factory=list)        # the nodes the members ran on, first seen first
    members: List[Member] = field(default_factory=list)   # in the order they were made
    partial: bool = False                  # stopped before every member was made
    partial_reason: str = ""
    analysis: StudyAnalysis = field(default_factory=StudyAnalysis)

    def runs(self) -> List[Run]:
        """The members' runs that are held here (a member stored apart and not found has none)."""
        return [m.run for m in self.members if m.run is not None]

    @classmethod
    def from_dict(cls, d: Any, path: str = "") -> "Study":
        if isinstance(d, dict) and d.get("study_version", STUDY_VERSION) != STUDY_VERSION:
            raise DocumentError(f"{path}.study_version" if path else "study_version",
                                f"{d['study_version']!r} is not {STUDY_VERSION}")
        return super().from_dict(d, path)
