"""The application section (profile.py), part four: what watching the program cost
(Application.overhead; verbs/profile_overhead.py writes it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from .base import Record


# -- what watching cost (Application.overhead) ---------------------------------------

@dataclass
class OwnTime(Record):
    """ceiling's own time, apart from the program's."""

    startup_s: Optional[float] = None          # from ceiling's start to the program's, seconds
    wrap_up_s: Optional[float] = None          # from the program's end to its analysis done, seconds
    quick_ceilings_s: Optional[float] = None   # of which quick ceilings, seconds
    interposer_cost_cached: Optional[bool] = None   # the interposer's cost per call came from the cache
    how: str = ""                              # how they were timed


@dataclass
class Range(Record):
    """Smallest and largest of a set of figures."""

    min: float                     # smallest
    max: float                     # largest


@dataclass
class ExitStatuses(Record):
    """Exit statuses of --overhead's reruns."""

    plain: List[int] = field(default_factory=list)      # alone
    profiled: List[int] = field(default_factory=list)   # watched


@dataclass
class Uninstrumented(Record):
    """--overhead: the program alone and watched, interleaved (verbs/profile_overhead.py)."""

    rounds: Optional[int] = None               # runs each way
    plain_s: List[float] = field(default_factory=list)      # wall times alone, seconds
    profiled_s: List[float] = field(default_factory=list)   # wall times watched, seconds
    exit_statuses: Optional[ExitStatuses] = None            # how each ended
    first_profiled_s: Optional[float] = None   # the profiled run's wall time, seconds
    profiled_exit_status: Optional[int] = None   # how the profiled run ended
    how: str = ""                              # what was run
    wall_s: Optional[float] = None             # median alone, seconds
    profiled_wall_s: Optional[float] = None    # median watched, seconds
    slowdown: Optional[float] = None           # profiled_wall_s / wall_s - 1, a fraction
    spread: Optional[Range] = None             # each pair's slowdown, fractions
    why: str = ""                              # why there is no slowdown


@dataclass
class Overhead(Record):
    """What watching the program cost (Application.overhead)."""

    per_call_ns: Optional[float] = None        # ns added per intercepted call, measured on the node
    calls: Optional[int] = None                # POSIX and stdio calls intercepted
    mpi_calls: Optional[int] = None            # MPI calls intercepted
    sampler_cpu_s: Optional[float] = None      # the sampler's CPU time, seconds
    sampler_share_of_one_cpu: Optional[float] = None   # the same over the run, a fraction of one CPU
    interposer_s: Optional[float] = None       # per_call_ns x calls, seconds
    busiest_calls: Optional[int] = None        # calls of the busiest process
    fraction: Optional[float] = None           # per_call_ns x busiest_calls over the wall time, a fraction
    how: str = ""                              # how per_call_ns was measured
    why: str = ""                              # why it was not
    ceiling: Optional[OwnTime] = None          # ceiling's own time
    uninstrumented: Optional[Uninstrumented] = None   # --overhead's reruns


