"""A traced program's events, as columns: the one shape the trace's parts exchange.

``ceiling trace`` (issue 28) records every intercepted call as an event. The interposer writes
them as fixed-size binary records (csrc/interpose, read by probes/interpose_events.py); what the
reader gives everyone else is an ``Events``: one numpy array per field, one row per event,
so that 10^7 events stay a few hundred MB and every step is vectorised. The Perfetto writer
(report/exporters/perfetto.py), the HTML timeline (report/html_trace.py) and the anti-pattern
analysis (analysis/trace_patterns.py) read only this; none of them reads the binary files.

Times are nanoseconds of the node's CLOCK_MONOTONIC, relative to ``t0_ns`` (the trace's
start, itself on CLOCK_MONOTONIC; ``t0_unix_ns`` is the same instant on the wall clock); with
several nodes, of MPI world rank 0's node, the others' mapped onto it where their offsets were
measured (probes/interpose_clocks.py says how, and the reader's ``Reading.clocks`` what was done).
Rows are sorted by ``ts`` (then ``pid``, ``tid``) once built (``sort``). A reader may give a
long trace as several ``Events`` (chunks sharing the same tables: each holds whole threads, or a
time-ordered part of one thread whose earlier part came in an earlier chunk), so that the
consumers stream with bounded memory; each consumer takes an iterable of chunks (one ``Events``
is the simplest such iterable: ``[ev]``).

Each row is one call (``dur`` >= 0: a slice), a user region's span (``kind`` REGION: ``call``
is the index of its name in ``regions``), or an instant (``dur`` == -1: a process or thread
start or end, fork or exec; ``call`` is one of the INSTANT_* codes). A call's module and class
come from the names table (``calls``: id -> probes/interpose_names.Call, calls.def's order);
``kind`` is the coarse class every consumer colours and groups by.

``Counters`` are the sampler's tracks (per process CPU use, RSS, read and write bytes/s;
node-wide disk throughput per device, network per interface, PSI): one ``Track`` each, its
samples as two arrays. ``Dropped`` says what a limit cut and from when: never silently.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

# The coarse class of an event (the ``kind`` column). IO_* are POSIX, stdio, copy and MPI-IO calls
# alike; MPI_P2P are sends and receives (blocking, or the posting of a non-blocking one), MPI_WAIT
# the completion calls (Wait*, Test*), MPI_COLL collectives (blocking, or the start of a
# non-blocking one), MPI_OTHER the rest (init, finalize, RMA, communicator management).
IO_READ, IO_WRITE, IO_META, IO_SYNC = 1, 2, 3, 4
MPI_P2P, MPI_WAIT, MPI_COLL, MPI_OTHER = 5, 6, 7, 8
REGION = 9          # a user region (ceiling_region_begin/end): call = index into Events.regions
INSTANT = 10        # dur == -1; call = INSTANT_*
KIND_NAMES = {IO_READ: "read", IO_WRITE: "write", IO_META: "metadata", IO_SYNC: "sync", MPI_P2P: "mpi p2p",
              MPI_WAIT: "mpi wait", MPI_COLL: "mpi collective", MPI_OTHER: "mpi other", REGION: "region",
              INSTANT: "instant"}
IO_KINDS = (IO_READ, IO_WRITE, IO_META, IO_SYNC)
MPI_KINDS = (MPI_P2P, MPI_WAIT, MPI_COLL, MPI_OTHER)

INSTANT_PROCESS_START, INSTANT_PROCESS_END, INSTANT_THREAD_START, INSTANT_THREAD_END = 0, 1, 2, 3
INSTANT_FORK, INSTANT_EXEC = 4, 5

# column -> dtype; -1 is "none" or "unknown" in every signed column
COLUMNS = {
    "ts": np.int64,       # start, ns since t0_ns
    "dur": np.int64,      # ns; -1: an instant
    "pid": np.int32,
    "tid": np.int32,
    "rank": np.int32,     # MPI world rank of the process, -1 outside MPI
    "kind": np.uint8,     # IO_READ .. INSTANT
    "call": np.uint16,    # calls.def id (or region index, or INSTANT_*)
    "file": np.int32,     # index into Events.files, -1
    "offset": np.int64,   # file offset of a read or write, -1 unknown (a stream's, an append)
    "nbytes": np.int64,   # bytes the call moved (I/O: what it returned; MPI: the message or the rank's share)
    "result": np.int64,   # what the call returned (-1 with errno for POSIX; MPI's error code)
    "peer": np.int32,     # MPI: the partner as a world rank (ANY_SOURCE resolved from the status), or
                          # the root of a rooted collective; -1 none
    "tag": np.int32,      # MPI tag, -1 none
    "comm": np.int32,     # index into Events.comms, -1 none
}


@dataclass
class Process:
    """A process of the trace. ``pid`` is its id in the events: its pid, or, for the second of two
    nodes' processes with one pid, a stand-in above Linux's pid_max (probes/interpose_events.py), its
    pid then in ``os_pid``; ``shown_pid`` is the one to print."""
    pid: int
    ppid: int
    host: str
    rank: int = -1                 # MPI world rank, -1 outside MPI
    exe: str = ""
    start_ns: int = -1             # relative to t0_ns, -1 unknown
    end_ns: int = -1
    os_pid: int = -1               # its pid on its node where ``pid`` stands in for it, else -1

    @property
    def shown_pid(self) -> int:
        return self.os_pid if self.os_pid >= 0 else self.pid


@dataclass
class Comm:
    """A communicator as the trace names it: its members as world ranks, where the recording has them."""
    name: str                       # "MPI_COMM_WORLD", "communicator 3fa2b1c0", ...
    world_ranks: List[int] = field(default_factory=list)    # rank r of it is world rank world_ranks[r]; [] unknown


@dataclass
class Dropped:
    """What a limit cut: events not written, by why ("max-size", "calls", "exclude", "min-duration",
    "max-per-site", "window", "buffer"), from when (ns since t0_ns, the first one dropped)."""
    events: Dict[str, int] = field(default_factory=dict)
    first_ns: Dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.events.values())


@dataclass
class Events:
    t0_ns: int
    t0_unix_ns: int
    columns: Dict[str, np.ndarray]            # COLUMNS' names -> arrays of equal length
    calls: Sequence = ()                      # calls.def id -> probes/interpose_names.Call (module, fn, cls)
    files: List[str] = field(default_factory=list)
    regions: List[str] = field(default_factory=list)
    comms: List[Comm] = field(default_factory=list)
    processes: Dict[int, Process] = field(default_factory=dict)
    threads: Dict[int, str] = field(default_factory=dict)       # tid -> its name (comm), where known
    dropped: Dropped = field(default_factory=Dropped)
    tracer_ns: int = 0                        # the tracer's own time writing buffers out (stated on the trace)
    final: bool = False                       # no later chunk has rows of this one's threads (a writer may close
                                              # them: probes/interpose_events.chunks says so); False: unknown

    def __post_init__(self):
        n = None
        for name, dtype in COLUMNS.items():
            col = self.columns.get(name)
            if col is None:
                raise ValueError(f"Events: column {name!r} missing")
            if col.dtype != dtype:
                self.columns[name] = col.astype(dtype)
            if n is None:
                n = len(col)
            elif len(col) != n:
                raise ValueError(f"Events: column {name!r} has {len(col)} rows, not {n}")

    def __len__(self) -> int:
        return len(self.columns["ts"])

    def __getattr__(self, name):
        cols = self.__dict__.get("columns")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    @classmethod
    def empty(cls, t0_ns: int = 0, t0_unix_ns: int = 0, **kw) -> "Events":
        return cls(t0_ns, t0_unix_ns, {k: np.empty(0, d) for k, d in COLUMNS.items()}, **kw)

    @classmethod
    def from_rows(cls, rows: Sequence[dict], t0_ns: int = 0, t0_unix_ns: int = 0, **kw) -> "Events":
        """For tests and small fixtures: each row a dict of some COLUMNS (the others -1, kind 0)."""
        cols = {k: np.array([r.get(k, -1 if np.issubdtype(d, np.signedinteger) else 0) for r in rows], dtype=d)
                for k, d in COLUMNS.items()}
        ev = cls(t0_ns, t0_unix_ns, cols, **kw)
        ev.sort()
        return ev

    def sort(self) -> None:
        order = np.lexsort((self.columns["tid"], self.columns["pid"], self.columns["ts"]))
        for k in COLUMNS:
            self.columns[k] = self.columns[k][order]

    def select(self, mask: np.ndarray) -> "Events":
        """The rows where mask is true, with the same tables."""
        out = Events(self.t0_ns, self.t0_unix_ns, {k: v[mask] for k, v in self.columns.items()}, self.calls,
                     self.files, self.regions, self.comms, self.processes, self.threads, self.dropped,
                     self.tracer_ns)
        return out

    @property
    def end_ns(self) -> int:
        """The end of the last event (0 when there is none)."""
        if not len(self):
            return 0
        return int(np.max(self.columns["ts"] + np.maximum(self.columns["dur"], 0)))


@dataclass
class Track:
    """One counter track from the sampler: ``scope`` "process" (``pid`` set) or "node"; ``name`` as
    shown ("cpu", "rss", "read bytes/s", "disk sda write bytes/s", "net eth0 rx bytes/s", "psi io some");
    samples at ``ts`` (ns since Events.t0_ns) with ``value`` in ``unit``."""
    name: str
    unit: str
    scope: str
    ts: np.ndarray
    value: np.ndarray
    pid: Optional[int] = None
    device: str = ""


@dataclass
class Counters:
    tracks: List[Track] = field(default_factory=list)
    interval_s: float = 0.0

    def doc(self, points: int = 600) -> List[dict]:
        """The tracks as a run keeps them (``ceiling trace``'s time line, drawn again from the
        history): at most ``points`` samples each, the mean of consecutive ones beyond."""
        out = []
        for t in self.tracks:
            ts, v = np.asarray(t.ts, np.int64), np.asarray(t.value, np.float64)
            if len(ts) > points:
                cut = np.linspace(0, len(ts), points + 1).astype(int)
                ts = (np.add.reduceat(ts, cut[:-1]) // np.diff(cut)).astype(np.int64)
                v = np.add.reduceat(v, cut[:-1]) / np.diff(cut)
            out.append({"name": t.name, "unit": t.unit, "scope": t.scope, "device": t.device,
                        "ts_ns": ts.tolist(), "value": [round(float(x), 6) for x in v]})
        return out

    @classmethod
    def from_doc(cls, kept: Sequence[dict]) -> Optional["Counters"]:
        """``doc``'s inverse; a damaged track is left out, the others kept; None for none."""
        tracks = []
        for d in kept or ():
            try:
                tracks.append(Track(str(d["name"]), str(d["unit"]), str(d.get("scope", "node")),
                                    np.asarray(d["ts_ns"], np.int64), np.asarray(d["value"], np.float64),
                                    device=str(d.get("device", ""))))
            except (KeyError, TypeError, ValueError):
                continue
        return cls(tracks) if tracks else None
