"""What every measuring verb shares, below the measurements themselves: the
options a user gave, the context a step runs in, and the outcome it returns.

A measurement step is a function ``f(ctx: Context) -> Outcome``: checks, bench
suites and (later) profile and trace steps all have this shape, so a verb
strings steps together without knowing what they measure. Nothing here runs
or prints anything.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional

from .model import Finding, Metric, Series

if TYPE_CHECKING:                       # machine sits beside results, not under it
    from ..machine.model import Machine


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
    node_timeout_s: Optional[float] = None   # MPI: every wait's deadline (cluster/watchdog.py); None: sized
    storage_clean: bool = False          # bench storage --clean: remove what killed runs left there first
    retry_disturbed: int = 0             # a step that met competing load: measured again up to this many times


class NullProgress:
    """Progress sink that draws nothing (tests, --json, non-TTY, ranks other than 0)."""

    def start(self, label: str, total: float = 0.0, step: bool = False) -> None: ...
    def advance(self, amount: float = 1.0) -> None: ...
    def done(self, step: bool = False) -> None: ...


@dataclass
class Context:
    machine: "Machine"
    opts: Options
    cpus: List[int]                      # the placement plan: thread i runs on cpus[i]
    progress: Any = field(default_factory=NullProgress)

    @property
    def nthreads(self) -> int:
        return len(self.cpus)


@dataclass
class Outcome:
    """What one step measured or concluded, added to the Run by the session."""

    metrics: List[Metric] = field(default_factory=list)
    series: List[Series] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)

    def extend(self, other: "Outcome") -> "Outcome":
        self.metrics += other.metrics
        self.series += other.series
        self.findings += other.findings
        return self


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a step: ``outcome`` holds what was measured before it."""

    def __init__(self, outcome: Outcome, *args):
        super().__init__(*(args or ("interrupted",)))
        self.outcome = outcome
