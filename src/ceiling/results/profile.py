"""The application section of a run document: what ``ceiling profile`` found in a program
(``Application.profile``, the ``Profile`` here) and what watching it cost
(``Application.overhead``, profile_cost.py), as typed records (schema version 3). The
records are in four files along the section's seams: profile_run.py (the split of the
threads' time, I/O by class and by file, launch, interposer, ceilings compared),
profile_mpi.py (per rank and per call), profile_evidence.py (counters, --experiments
and the scaling inside the node) and profile_cost.py.

The analysis (analysis/profile*.py) still assembles its figures as one dict; verbs/profile.py
turns that dict into a ``Profile`` once, with ``profile_from``, where the run is put
together. Every key of the dict is a field, with the same name (``RENAMED`` lists the one
exception) and a one-line comment on what it holds and its unit, so the JSON keeps the
shape the analysis writes; the reports (report/terminal_profile.py, html_profile.py) read
these fields only. ``profile_from`` refuses a key no field has (base.DocumentError naming
its path): a key added to the analysis without its field fails the tests that run
``ceiling profile``, rather than a reader of the document later.

To add a key the analysis writes: one field on the dataclass that holds it, with a default
that means "not recorded" and its comment; then ``python scripts/profile_schema.py`` to
write its property into schema.json; then the report reads the field. No new schema
version is needed for a field with a default: ``from_dict`` fills it in for documents
written before it (list it in tests/test_results_schema.py's ADDED_LATER).

Conventions: a dict the analysis writes as ``{}`` for "nothing" (a spread over no
threads, an empty summary) is None here; a field an older document lacks takes its
default, which says "not recorded" (None for a figure, "" for a text, an empty list or
map), never 0 for an unknown count. Maps keyed by a name (an I/O class, an MPI call
class, a counter event, an experiment's arm) are ``Dict[str, X]`` with X typed.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field, is_dataclass
from typing import Any, Dict, List, Optional, Tuple

from .base import DocumentError, Record, plain
from .profile_cost import Overhead
from .profile_evidence import Counters, CountersVerdict, Experiments
from .profile_mpi import Mpi, MpiFunction
from .profile_run import (Comparison, CompetingLoad, Files, FromRecords, Interposer, IoClass, IoTotals, Launch,
                          PerThread, QuickCeiling, Runnable, Sampler, Shares, Wrapped)

# the records of the section, in the order schema.json lists them (scripts/profile_schema.py)
PARTS = ("profile_run", "profile_mpi", "profile_evidence", "profile", "profile_cost")


# -- the section -------------------------------------------------------------------

@dataclass
class Supervisor(Record):
    """A parent that waited while its children worked (analysis/profile_supervisors.py): its
    waiting left the split, its time alone stayed."""

    process: str                   # "PID comm"
    waited_s: float                # time it was timed with a child alive and counted as waiting, seconds
    cpu_s: float = 0.0             # its CPU time over that time, seconds
    own_s: float = 0.0             # its time alone (before, between and after its children), seconds


@dataclass
class Region(Record):
    """A user region (ceiling_region_begin/end) over the program's processes (analysis/profile_regions.py)."""

    name: str                      # the name the program gave it
    calls: int = 0                 # begin/end pairs ended, every thread of every process
    ns: int = 0                    # their time from begin to end, summed over threads and processes, nanoseconds
    processes: int = 0             # processes that ended it at least once
    max_ns: int = 0                # the most any one process spent in it, nanoseconds


@dataclass
class CallTimes(Record):
    """One profiled point of a scaling study: the time inside each MPI call and named region (Application.calls)."""

    processes: int = 0             # the program's MPI ranks, else the most processes that ended one region
    mpi: List[MpiFunction] = field(default_factory=list)   # each MPI function over every rank, by time
    regions: List[Region] = field(default_factory=list)    # each named region over every process, by time


@dataclass
class Profile(Record):
    """What ``ceiling profile`` found in the program (Application.profile)."""

    thread_seconds: Optional[float] = None     # the threads' lives summed, seconds
    shares: Optional[Shares] = None            # where their time went; null = no sample
    per_thread: Optional[PerThread] = None     # the same per thread: min / mean / max
    threads: Optional[int] = None              # threads in the split
    unsampled_cpu_s: Optional[float] = None    # CPU time of threads no sample saw, seconds
    samples: Optional[int] = None              # readings of /proc
    launchers: List[str] = field(default_factory=list)      # processes left out: launchers ("PID comm")
    supervisors: List[Supervisor] = field(default_factory=list)   # parents whose waiting for children left the split
    idle_threads: List[str] = field(default_factory=list)   # idle helper threads left out
    schedstat: Optional[bool] = None           # the kernel reports run-queue delays
    cpus: Optional[int] = None                 # CPUs the program may use
    from_records: Optional[FromRecords] = None   # threads from records, not sampled
    sampler: Optional[Sampler] = None          # the /proc sampler
    runnable: Optional[Runnable] = None        # its runnable threads against its CPUs
    io_totals: Optional[IoTotals] = None       # /proc/PID/io totals
    competing_load: List[CompetingLoad] = field(default_factory=list)   # other load during the run
    io_calls: Dict[str, IoClass] = field(default_factory=dict)   # I/O calls by class: read, write, meta, ...
    mpi: Optional[Mpi] = None                  # its MPI; null = none
    counters: Optional[Counters] = None        # hardware counters; null = not opened
    launch: Optional[Launch] = None            # how it was started and waited for
    interposer: Optional[Interposer] = None    # the LD_PRELOAD interposer
    wrapped: Optional[Wrapped] = None          # every rank under its own ceiling; null = not so
    files: Optional[Files] = None              # per-file records; null = none
    ceilings: List[Comparison] = field(default_factory=list)      # against this node's ceilings
    quick_ceilings: Dict[str, QuickCeiling] = field(default_factory=dict)   # measured now, by kind
    counters_verdict: Optional[CountersVerdict] = None   # what the counters decided
    experiments: Optional[Experiments] = None  # --experiments; null = not asked
    regions: List[Region] = field(default_factory=list)   # the program's named regions, by time
    regions_lost: int = 0                      # region names past the interposer's table, not counted


# -- from the analysis' dict -------------------------------------------------------

# Keys the analysis writes under another name here (a Python keyword cannot be a field).
RENAMED = {"async": "async_io"}


def profile_from(breakdown: Dict[str, Any]) -> Profile:
    """The typed section of the analysis' dict (verbs/profile.py's ``breakdown``).
    DocumentError naming the path of a key no field has."""
    return Profile.from_dict(fit(Profile, plain(breakdown))[0])


def overhead_from(overhead: Dict[str, Any]) -> Optional[Overhead]:
    """The typed cost of watching; None for {} (not measured)."""
    return Overhead.from_dict(fit(Overhead, plain(overhead))[0]) if overhead else None


def fit(cls, d: Any, keep_unknown: bool = True) -> Tuple[Any, Dict[str, Any]]:
    """``d`` shaped for ``cls.from_dict``: renamed keys (RENAMED), ``{}`` as None where a
    record is optional. Keys no field has stay (from_dict refuses them) or, with
    ``keep_unknown`` False, are moved to the second value, a dict of the same nesting
    (what migrate keeps of an older document beside the typed part)."""
    if not isinstance(d, dict):
        return d, {}
    hints = {name: hint for name, hint, _ in _spec(cls)}
    out: Dict[str, Any] = {}
    rest: Dict[str, Any] = {}
    for key, v in d.items():
        name = RENAMED.get(key, key)
        if name not in hints:
            if keep_unknown:
                out[name] = v
            else:
                rest[key] = v
            continue
        out[name], left = _fit_value(hints[name], v, keep_unknown)
        if left:
            rest[key] = left
    return out, rest


def _fit_value(hint: Any, v: Any, keep_unknown: bool) -> Tuple[Any, Any]:
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)][0]
        if v == {} and is_dataclass(inner):
            return None, None
        return _fit_value(inner, v, keep_unknown) if v is not None else (None, None)
    if is_dataclass(hint) and isinstance(v, dict):
        return fit(hint, v, keep_unknown)
    if origin is list and isinstance(v, list):
        (item,) = typing.get_args(hint)
        if is_dataclass(item):
            pairs = [fit(item, x, keep_unknown) for x in v]
            left = {str(i): r for i, (_, r) in enumerate(pairs) if r}
            return [x for x, _ in pairs], left
    if origin is dict and isinstance(v, dict):
        _, item = typing.get_args(hint)
        if is_dataclass(item):
            pairs = {k: fit(item, x, keep_unknown) for k, x in v.items()}
            left = {k: r for k, (_, r) in pairs.items() if r}
            return {k: x for k, (x, _) in pairs.items()}, left
    return v, None


def _spec(cls):
    from .base import _hints
    if not is_dataclass(cls):
        raise DocumentError("", f"{cls!r} is not a record")
    return _hints(cls)
