"""The application section (profile.py), part three: what tells compute from memory, the
hardware counters and --experiments (the program again beside co-runners, with the
other page size, and on 1, half and all the CPUs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .base import Record


# -- hardware counters -------------------------------------------------------------

@dataclass
class CounterEvent(Record):
    """One perf event as read back."""

    value: Optional[float] = None       # count scaled to the time enabled; null = not counted
    raw: Optional[int] = None           # count as read
    scaled: Optional[float] = None      # share of the time it was on the PMU (running / enabled)
    errno: Optional[str] = None         # why it could not be opened ("ENOENT", ...); null = opened
    why: str = ""                       # why value is null or scaled
    enabled_ns: Optional[int] = None    # time enabled, nanoseconds
    running_ns: Optional[int] = None    # time on the PMU, nanoseconds


@dataclass
class Derived(Record):
    """A figure that follows from the counts."""

    value: float                   # the figure, in the unit its name says
    how: str = ""                  # its formula
    note: str = ""                 # its caveat


@dataclass
class Counters(Record):
    """Hardware and software counters on the program (probes/perf_counters.py)."""

    available: bool = False        # hardware counters counted
    why: str = ""                  # what is missing when they did not
    events: Dict[str, CounterEvent] = field(default_factory=dict)   # by perf event name
    derived: Dict[str, Derived] = field(default_factory=dict)       # figures derived from the counts
    not_derived: Dict[str, str] = field(default_factory=dict)       # figures not derived, and why
    paranoid: Optional[int] = None      # /proc/sys/kernel/perf_event_paranoid; null = not read
    user_only: Optional[bool] = None    # counted in user space only


@dataclass
class CountersVerdict(Record):
    """What the counters say bounds the program (analysis/profile_counters.py)."""

    bound: Optional[str] = None    # "memory", "compute"; null = not decided
    by: Optional[str] = None       # "bandwidth", "latency"; null for compute
    words: str = ""                # the verdict in words
    confidence: str = ""           # "high", "low"
    why: str = ""                  # why it was not decided


# -- --experiments -----------------------------------------------------------------

@dataclass
class Footprint(Record):
    """The working set read in windows of a run on a CPU."""

    window_s: Optional[float] = None                           # window length, seconds
    referenced_bytes: List[int] = field(default_factory=list)  # bytes referenced per window
    cpu_s: List[float] = field(default_factory=list)           # CPU time per window, seconds
    wall_s: Optional[float] = None                             # the run's wall time, seconds
    anon_huge_bytes: Optional[int] = None                      # anonymous huge pages at the end, bytes
    exit_status: Optional[int] = None                          # the run's exit status
    interval_s: List[float] = field(default_factory=list)      # CPU time asked of each window, seconds
    span_s: List[Optional[float]] = field(default_factory=list)      # wall time between the window's page walks, s
    cpu_span_s: List[Optional[float]] = field(default_factory=list)  # wall time its CPU time was read over, s
    rss_bytes: List[int] = field(default_factory=list)         # resident memory at each window's end, bytes
    look_s: Optional[float] = None                             # time the page walks took, seconds


@dataclass
class PageSetting(Record):
    """How the program was run with the other page size (probes/rerun.py)."""

    mode: str = ""                 # transparent huge pages' mode on this node
    how: str = ""                  # what was changed
    env: Dict[str, str] = field(default_factory=dict)            # environment set for it
    no_thp: Optional[bool] = None  # huge pages turned off (PR_SET_THP_DISABLE)
    anon_huge_bytes: List[int] = field(default_factory=list)     # huge pages per run, bytes
    why: str = ""                  # why it could not be done


@dataclass
class PagesRate(Record):
    """How fast it went through its data with one page size: the bytes of the pages it referenced
    per second of its CPU time (analysis/profile_footprint.stream_rate)."""

    # StreamRate is this and two fields more: one record for both would write "other_pages": null and
    # "against": [] inside other_pages (every field is written), a change of the documents and the schema

    windows: Optional[int] = None          # windows that gave a rate
    full_windows: Optional[int] = None     # windows that went through all its data (lower bounds)
    faulting_windows: Optional[int] = None  # windows left out: mostly new pages faulted in
    look_s: Optional[float] = None         # time the page walks took, seconds
    reference_bps: Optional[float] = None  # one core's streaming rate per second of CPU, bytes per second
    median_bps: Optional[float] = None     # its median rate, bytes per second of CPU
    lower_bps: Optional[float] = None      # a lower bound on its median rate, bytes per second of CPU
    share: Optional[float] = None          # its rate over one core's streaming rate, a fraction
    share_at_least: Optional[float] = None  # the lower bound over one core's streaming rate, a fraction
    why: str = ""                          # why it is not known


@dataclass
class StreamRate(PagesRate):
    """Its rate with the default page size and the other, and what speaks against a stream."""

    other_pages: Optional[PagesRate] = None  # the same with the other page size
    against: List[str] = field(default_factory=list)   # what speaks against a stream, each a phrase


@dataclass
class WorkingSet(Record):
    """The working set against the caches."""

    windows: Optional[int] = None          # windows read
    window_s: Optional[float] = None       # window length, seconds
    median_bytes: Optional[float] = None   # median bytes per window
    max_bytes: Optional[int] = None        # largest window, bytes
    private_bytes: Optional[int] = None    # one core's private caches, bytes
    llc_bytes: Optional[int] = None        # the last-level cache, bytes
    share_fitting: Optional[float] = None  # windows within the private caches, a fraction
    share_beyond: Optional[float] = None   # windows beyond the last-level cache, a fraction
    fits: Optional[bool] = None            # it fits the private caches
    beyond: Optional[bool] = None          # it goes beyond the last-level cache
    why: str = ""                          # why it is not known


@dataclass
class PagesResult(Record):
    """What the other page size changed."""

    gain: Optional[float] = None           # time saved with the other page size, a fraction
    how: str = ""                          # what was changed
    taken: Optional[bool] = None           # huge pages were taken in the runs
    sensitive: Optional[bool] = None       # the difference is beyond the noise
    huge_bytes: Dict[str, Optional[int]] = field(default_factory=dict)   # huge pages by setting, bytes
    why: str = ""                          # why it is not known


@dataclass
class ScalingPoint(Record):
    """The program on one thread count."""

    threads: int                           # OMP_NUM_THREADS
    median_s: Optional[float] = None       # median wall time, seconds
    speedup: Optional[float] = None        # over one thread
    efficiency: Optional[float] = None     # speedup over threads, a fraction
    serial_fraction: Optional[float] = None   # Karp-Flatt serial fraction
    busy_cpus: Optional[float] = None      # CPUs kept busy on average


@dataclass
class Scaling(Record):
    """--experiments: the program on 1, half and all the CPUs (analysis/profile_scaling.py)."""

    counts: List[int] = field(default_factory=list)                  # thread counts run
    times_s: Dict[str, List[float]] = field(default_factory=dict)    # wall times by thread count, seconds
    cpu_s: Dict[str, List[float]] = field(default_factory=dict)      # CPU times by thread count, seconds
    cost_s: Optional[float] = None         # time the runs took, seconds
    stopped_by: str = ""                   # what stopped them ("" = nothing)
    kind: Optional[str] = None             # scales, contention, serial, ignored; null = not judged
    points: List[ScalingPoint] = field(default_factory=list)         # one per thread count
    words: str = ""                        # the verdict in words
    confidence: str = ""                   # "medium", "low"
    spread: Optional[float] = None         # the runs' spread, a fraction
    why: str = ""                          # why it was not judged


@dataclass
class Experiments(Record):
    """--experiments: the program again beside co-runners (analysis/profile_experiments.py)."""

    rounds: Optional[int] = None           # rounds of every arm
    corunner_cpus: List[int] = field(default_factory=list)           # CPUs the co-runners ran on
    reference_cpu: Optional[int] = None    # CPU of the reference threads
    cost_s: Optional[float] = None         # time the runs took, seconds
    times_s: Dict[str, List[float]] = field(default_factory=dict)    # the program's wall times by arm, seconds
    deadline_s: Optional[float] = None     # each run's deadline, seconds
    corunner_rates: Dict[str, List[float]] = field(default_factory=dict)   # co-runners' rates by arm
    failed: Dict[str, int] = field(default_factory=dict)             # exit status by arm that failed
    interrupted: Optional[bool] = None     # Ctrl-C or SIGTERM stopped them
    footprint: Optional[Footprint] = None  # the working set's run
    footprint_pages: Optional[Footprint] = None   # the working set's run with the other page size
    page_setting: Optional[PageSetting] = None   # how the other page size was set
    stopped_by: str = ""                   # what stopped them ("" = nothing)
    competing_load: str = ""               # other load during them, as read
    bound: Optional[str] = None            # "compute", "memory"; null = not decided
    by: Optional[str] = None               # "bandwidth", "cache", "latency"; null for compute
    confidence: str = ""                   # "high", "low"
    words: str = ""                        # the verdict in words
    net: Dict[str, Optional[float]] = field(default_factory=dict)        # net slowdown by arm, a fraction
    slowdown: Dict[str, Optional[float]] = field(default_factory=dict)   # slowdown by arm, a fraction
    median_s: Dict[str, Optional[float]] = field(default_factory=dict)   # median wall time by arm, seconds
    noise: Optional[float] = None          # spread of the runs alone, a fraction
    power: Optional[float] = None          # co-runners' bandwidth power on the reference, a fraction
    cache_power: Optional[float] = None    # the cache co-runner's power on the reference, a fraction
    pressure: Optional[float] = None       # the program's pressure on the co-runners, a fraction
    corunner_lost: Dict[str, Optional[float]] = field(default_factory=dict)   # co-runners' loss beside it
    working_set: Optional[WorkingSet] = None   # its working set against the caches
    pages: Optional[PagesResult] = None        # what the other page size changed
    disturbed: List[str] = field(default_factory=list)   # what disturbed the node meanwhile
    basis: str = ""                        # what decided the verdict ("working-set rate", ...)
    stream_rate: Optional[StreamRate] = None   # how fast it went through its data
    scaling: Optional[Scaling] = None          # thread scaling
    why: str = ""                              # why they were not run or not decided


