"""The OTF2 archive of ``ceiling trace --format otf2``: Score-P's trace format, for Vampir, Scalasca,
``otf2-print`` and the tools of the Score-P world.

``write_otf2(path, chunks, counters, meta)`` is the whole API, as ``write_perfetto``'s: the events as
chunks (results/events.Events), the sampler's counter tracks, a few facts to state; the archive is
written chunk by chunk by OTF2's own library (core/otf2lib.py finds it; csrc/trace/otf2.c writes the
events), memory bounded by one chunk and libotf2's buffer per location still writing (a chunk marked
``final``, as probes/interpose_events.chunks marks a thread's last, has its threads' event writers closed
and their buffers freed after it), and an ``Otf2Summary`` comes back. ``path`` is the archive's
directory: Vampir opens ``path/traces.otf2``.

What the archive holds:

- definitions: a system tree (the machine, a node per host), a location group (PROCESS) per process,
  its id the MPI world rank for a rank (Score-P's numbering) and the ranks' count on for the others
  (ids dense: readers warn otherwise), and a CPU_THREAD location per thread (id: thread index << 32
  | group, the main thread index 0); a region per call name (paradigm MPI for MPI calls, UNKNOWN for
  POSIX and stdio, which OTF2 has no paradigm for: their I/O paradigm is on their handles; role
  POINT2POINT, BARRIER, COLL_*, FILE_IO, FILE_IO_METADATA, RMA or FUNCTION) and per user region
  (USER, FUNCTION); the MPI world's COMM_LOCATIONS group and a COMM_GROUP and communicator per
  communicator the recording names (MPI_COMM_WORLD with every rank; another with its members as the
  interposer noted them at its creation, partners and roots translated to its ranks; one whose
  members the recording lacks, an intercommunicator, is defined over the world's ranks, so that its
  partners, which the interposer gives as world ranks, stay right, and its name says so); I/O
  paradigms POSIX, ISOC and MPI-IO, an IoRegularFile per file and an IoHandle per (process, file,
  paradigm); a metric member, class and instance per counter track (scope: its process, or its
  node), recorded by a METRIC location of the process (node tracks: of the first process).
- events: what csrc/trace/otf2.h lists per row (Enter/Leave, MpiSend/MpiRecv, collective
  begin/end, I/O operation begin/complete, instants left out) and a Metric record per sample.
  A non-blocking send or receive is written as sent or received when it was posted (the
  recording does not tie a request to the wait that completes it), so each message has its
  send and its receive record, as Scalasca's replay needs; a non-blocking or persistent
  collective, and a neighbourhood one, gets Enter/Leave only; MPI_Sendrecv too (one peer and one
  tag for its two messages). A collective's bytes are its message size as IMB names it
  (csrc/interpose/mpi_coll.c), in both sizeSent and sizeReceived: not Score-P's totals.
- the clock: ns of CLOCK_MONOTONIC (world rank 0's node's, others mapped on it:
  probes/interpose_clocks.py), the offset of the first record, the wall clock there; the
  anchor's description states ``meta``, the drops and what the archive leaves out.

The archive is written beside ``path`` (``path.part``) and renamed into place once complete.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from ... import __version__
from ...core import otf2lib as O
from ...results import events as E
from .perfetto import message_sides

ARCHIVE = "traces"                  # the anchor file: path/traces.otf2, as Score-P names it
UNDEF32 = 0xFFFFFFFF
UNDEF8 = 0xFF
METRIC_THREAD = 0xFFFFFFFE          # the thread index of a process's metric location

# OTF2's values (csrc/trace/otf2_abi.h, checked against OTF2's headers by tests/test_trace_otf2.py)
PARADIGM_UNKNOWN, PARADIGM_USER, PARADIGM_MPI = 0, 1, 4
PARADIGM_CLASS_PROCESS = 0
GROUP_PROCESS, LOCATION_THREAD, LOCATION_METRIC = 1, 1, 3
ROLE = {"function": 1, "barrier": 15, "one2all": 23, "all2one": 24, "all2all": 25, "coll_other": 26, "file_io": 27,
        "p2p": 28, "rma": 29, "file_io_metadata": 38}
GROUP_COMM_LOCATIONS, GROUP_COMM_GROUP = 4, 5
IO_READ, IO_WRITE, IO_FLUSH = 0, 1, 2
# I/O paradigms: (identification, name, class: 0 serial 1 parallel, flags: 1 the OS's), Score-P's identifications
IO_PARADIGMS = (("POSIX", "POSIX I/O", 0, 1), ("ISOC", "ISO C I/O", 0, 0), ("MPI-IO", "MPI I/O", 1, 0))
METRIC_OTHER, METRIC_ABSOLUTE_POINT, TYPE_DOUBLE, BASE_DECIMAL = 0, 17, 10, 1
METRIC_ASYNCHRONOUS, RECORDER_ABSTRACT, SCOPE_GROUP, SCOPE_NODE = 2, 1, 1, 2
# MPI collectives -> OTF2_COLLECTIVE_OP_*, and their region role
COLLECTIVES = {"barrier": (0, "barrier"), "bcast": (1, "one2all"), "gather": (2, "all2one"),
               "gatherv": (3, "all2one"), "scatter": (4, "one2all"), "scatterv": (5, "one2all"),
               "allgather": (6, "all2all"), "allgatherv": (7, "all2all"), "alltoall": (8, "all2all"),
               "alltoallv": (9, "all2all"), "alltoallw": (10, "all2all"), "allreduce": (11, "all2all"),
               "reduce": (12, "all2one"), "reduce_scatter": (13, "all2all"), "scan": (14, "coll_other"),
               "exscan": (15, "coll_other"), "reduce_scatter_block": (16, "all2all")}
NO_OP = 255


@dataclass(frozen=True)
class Otf2Summary:
    """What ``write_otf2`` wrote, for the run's record and the tests."""
    path: str                   # the anchor file, DIR/traces.otf2 (what Vampir opens)
    directory: str
    bytes: int                  # the archive's files together
    events: int                 # rows read from the chunks
    records: int                # event records written
    enters: int                 # Enter records (as many Leaves): calls and regions
    sends: int                  # MpiSend records
    recvs: int                  # MpiRecv records
    unpaired: int               # sends and receives without a record: partner or communicator unknown
    collectives: int            # MpiCollectiveBegin/End pairs
    io_ops: int                 # IoOperationBegin/Complete pairs
    io_bytes: int               # bytes in IoOperationComplete records
    msg_bytes: int              # bytes in MpiSend records
    metrics: int                # Metric records (counter samples)
    clipped: int                # calls cut at their enclosing call's end, so that Enter/Leave nest
    instants: int               # process and thread starts and ends: no record
    processes: int              # of the events (a rank without events, a process of counters alone: not counted)
    threads: int
    dropped: int                # events the recording dropped (stated in the anchor's description)
    library: str                # which libotf2 wrote it
    buffer_peak: int            # the most bytes libotf2's buffers held at once (bounded, whatever the events)


def _base(fn: str) -> str:
    """A collective's name without MPI_/MPIX_, a non-blocking I, a persistent _init or a large-count _c."""
    b = re.sub(r"^MPIX?_", "", fn).lower()
    b = re.sub(r"(_c)$", "", b)
    return b


def call_tables(calls) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per call id: message side (perfetto.message_sides), OTF2 collective op (blocking collectives of a
    whole communicator only), I/O operation mode, I/O paradigm ref + 1."""
    n = max(len(calls), 1)
    collop = np.full(n, NO_OP, np.uint8)
    iomode = np.full(n, NO_OP, np.uint8)
    iopar = np.zeros(n, np.uint8)
    for i, c in enumerate(calls):
        if c is None:
            continue
        if c.module == "mpi" and c.cls == "coll" and _base(c.fn) in COLLECTIVES:
            collop[i] = COLLECTIVES[_base(c.fn)][0]
        cls = c.cls[3:] if c.module == "mpi" and c.cls.startswith("io_") else c.cls
        if c.module in ("posix", "stdio", "copy") or c.cls.startswith("io_"):
            mode = {"read": IO_READ, "write": IO_WRITE, "copy": IO_WRITE, "sync": IO_FLUSH, "flush": IO_FLUSH}
            if cls in mode:
                iomode[i] = mode[cls]
                iopar[i] = {"posix": 1, "copy": 1, "stdio": 2, "mpi": 3}[c.module]
    return message_sides(calls)[:n], collop, iomode, iopar


def region_kind(c) -> Tuple[int, int]:
    """(role, paradigm) of a call's region."""
    if c.module != "mpi":
        role = "file_io_metadata" if c.cls == "meta" else "file_io"
        return ROLE[role], PARADIGM_UNKNOWN
    if c.cls.startswith("io_"):
        return ROLE["file_io_metadata" if c.cls == "io_meta" else "file_io"], PARADIGM_MPI
    if c.cls in ("send", "recv", "sendrecv", "post"):
        return ROLE["p2p"], PARADIGM_MPI
    if c.cls in ("coll", "icoll"):
        b = re.sub(r"^i(?=[a-z])", "", re.sub(r"_init$", "", _base(c.fn)))
        return ROLE[COLLECTIVES[b][1] if b in COLLECTIVES else "coll_other"], PARADIGM_MPI
    if c.cls.startswith("rma"):
        return ROLE["rma"], PARADIGM_MPI
    return ROLE["function"], PARADIGM_MPI


class _Strings:
    def __init__(self):
        self.ids: Dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.ids)
        return self.ids[s]


class _Archive:
    """The numbering of one archive: processes to location groups, threads to locations, communicators."""

    def __init__(self, w: O.Writer, ranks: int):
        self.w = w
        self.ranks = ranks
        self.groups: Dict[int, int] = {}            # pid -> location group id
        self.group_info: Dict[int, Tuple[str, str, int]] = {}     # group id -> (name, host, rank)
        self.taken_ranks: Dict[int, int] = {}       # rank -> pid
        self.next_free = ranks
        self.world = 0
        self.rank_locations: List[int] = []       # COMM_LOCATIONS: rank r's location
        self.threads: Dict[int, int] = {}           # group id -> threads beside the main one
        self.locations: List[Tuple[int, str, int, int]] = []     # (location, name, type, group)
        self.comms = 0
        self.threads_seen = 0                       # threads of the events (not the empty ranks' locations)
        self.pids_seen: set = set()                 # processes of the events (not those of counters alone)
        self.top_peer = -1
        self.rows = 0
        self.last: Optional[E.Events] = None

    def group(self, pid: int, ev: E.Events, rank: int = -1) -> int:
        if pid in self.groups:
            return self.groups[pid]
        p = ev.processes.get(pid)
        if p is not None and p.rank >= 0:
            rank = p.rank
        if rank >= 0 and rank not in self.taken_ranks and rank not in self.group_info:
            gid = rank
            self.taken_ranks[rank] = pid
        else:
            rank = -1
            gid = self.next_free
            self.next_free += 1
            while gid in self.group_info:
                gid = self.next_free
                self.next_free += 1
        host = p.host if p is not None else ""
        who = f"rank {rank}" if rank >= 0 else (os.path.basename(p.exe) if p is not None and p.exe else "process")
        shown = p.shown_pid if p is not None else pid
        self.groups[pid] = gid
        self.group_info[gid] = (f"{who}{f' ({host})' if host else ''} pid {shown}", host, rank)
        return gid

    def chunk(self, ev: E.Events) -> None:
        self.last = ev
        while self.comms < len(ev.comms):
            c = ev.comms[self.comms]
            xlat = None
            if _members_known(c):
                xlat = np.full(max(c.world_ranks) + 1, -1, np.int32)
                xlat[np.asarray(c.world_ranks, np.int64)] = np.arange(len(c.world_ranks), dtype=np.int32)
            self.w.comm(self.comms, xlat)
            self.comms += 1
        if not len(ev):
            return
        cols = {k: np.ascontiguousarray(ev.columns[k], d) for k, d in E.COLUMNS.items()}
        mpi = np.isin(cols["kind"], E.MPI_KINDS)
        if mpi.any():
            self.top_peer = max(self.top_peer, int(cols["peer"][mpi].max()), int(cols["rank"][mpi].max()))
        for pid, tid in self.w.threads(cols["pid"], cols["tid"]):
            rank = int(cols["rank"][np.argmax((cols["pid"] == pid) & (cols["tid"] == tid))])
            gid = self.group(pid, ev, rank)
            if tid == pid:
                index = 0
            else:
                index = self.threads.get(gid, 0) + 1
                self.threads[gid] = index
            proc = ev.processes.get(pid)
            name = ev.threads.get(tid) or (os.path.basename(proc.exe) if tid == pid and proc is not None and proc.exe
                                           else "main" if tid == pid else f"thread {tid}")
            loc = (index << 32) | gid
            self.w.locate(pid, tid, loc, gid)
            self.locations.append((loc, name, LOCATION_THREAD, gid))
            self.threads_seen += 1
            self.pids_seen.add(pid)
        self.w.events(cols)
        self.rows += len(ev)
        if ev.final:        # its threads have no more rows: their buffers written out and freed now
            both = np.unique((cols["pid"].astype(np.int64) << 32) | (cols["tid"].astype(np.int64) & 0xFFFFFFFF))
            for x in both.tolist():
                self.w.thread_done(x >> 32, x & 0xFFFFFFFF)         # pids and tids are below 2^31


def _members_known(c: E.Comm) -> bool:
    """Whether the recording gave a communicator's members (world ranks, none outside the world)."""
    return bool(c.world_ranks) and min(c.world_ranks) >= 0


def _world(a: _Archive) -> None:
    """The MPI world's size, its ranks' locations (COMM_LOCATIONS: rank r's main thread, else its first traced
    thread), and a location group with an empty location for every rank whose files never came."""
    ranked = [i[2] for i in a.group_info.values() if i[2] >= 0]
    members = [r for c in (a.last.comms[:a.comms] if a.last else []) if _members_known(c) for r in c.world_ranks]
    a.world = max(a.ranks, max(ranked, default=-1) + 1, a.top_peer + 1 if a.comms else 0, max(members, default=-1) + 1)
    first: Dict[int, int] = {}
    for loc, _name, kind, gid in a.locations:
        if kind == LOCATION_THREAD and gid < a.world:
            first[gid] = min(first.get(gid, loc), loc)
    for r in range(a.world):
        if r not in a.group_info:
            a.group_info[r] = (f"rank {r} (no events recorded)", "", r)
        if r not in first:
            a.w.touch(r)
            a.locations.append((r, "main (no events recorded)", LOCATION_THREAD, r))
            first[r] = r
    a.rank_locations = [first[r] for r in range(a.world)]


def _metrics(a: _Archive, counters: Optional[E.Counters], host: str) -> List[Tuple]:
    """The counter tracks as Metric records, each on its process's metric location (node tracks: the first
    process's); returns their definitions: (track, class id, instance id, recorder, scope kind, scope)."""
    tracks = list(counters.tracks) if counters else []
    if not tracks:
        return []
    ev = a.last or E.Events.empty()
    first = min(a.group_info) if a.group_info else None
    if first is None:
        first = a.group(-1, ev)
        a.group_info[first] = (f"{host} node counters" if host else "node counters", host, -1)
    per_loc: Dict[int, List[Tuple[np.ndarray, int, np.ndarray]]] = {}
    defs = []
    n = len(tracks)
    for i, t in enumerate(tracks):
        if t.scope == "process" and t.pid is not None:
            gid = a.group(int(t.pid), ev)
            scope = (SCOPE_GROUP, gid)
        else:
            gid = first
            scope = (SCOPE_NODE, None)          # the host's node, set by the caller
        loc = (METRIC_THREAD << 32) | gid
        per_loc.setdefault(loc, []).append((np.asarray(t.ts, np.int64), n + i, np.asarray(t.value, np.float64)))
        defs.append((t, i, n + i, loc, *scope))
    for loc, parts in per_loc.items():
        ts = np.concatenate([p[0] for p in parts])
        metric = np.concatenate([np.full(len(p[0]), p[1], np.uint32) for p in parts])
        value = np.concatenate([p[2] for p in parts])
        order = np.argsort(ts, kind="stable")
        a.w.metrics(loc, ts[order], metric[order], value[order])
        a.locations.append((loc, "counters", LOCATION_METRIC, loc & 0xFFFFFFFF))
    return defs


def _definitions(a: _Archive, ev: E.Events, st: O.WriterStats, metric_defs: List[Tuple], region_base: int,
                 description: str, host: str) -> None:
    w, s = a.w, _Strings()
    defs: List[Tuple[int, List[int], Optional[str], List[int]]] = []

    def d(what, *args, text=None, members=()):
        defs.append((what, list(args), text, list(members)))

    world = a.world
    hosts = sorted({i[1] or host or "localhost" for i in a.group_info.values()} | {host or "localhost"})
    node = {h: k + 1 for k, h in enumerate(hosts)}
    d(O.DEF_NODE, 0, s("machine"), s("machine"), UNDEF32)
    for h in hosts:
        d(O.DEF_NODE, node[h], s(h), s("node"), 0)
    for gid, (name, h, _rank) in sorted(a.group_info.items()):
        d(O.DEF_LOCATION_GROUP, gid, s(name), GROUP_PROCESS, node[h or host or "localhost"], UNDEF32)
    for loc, name, kind, gid in sorted(a.locations):
        d(O.DEF_LOCATION, loc, s(name), kind, gid)
    for rid, src in enumerate(w.regions()):
        if src < region_base:
            c = ev.calls[src]
            role, paradigm = region_kind(c)
            text = f"{c.module} {c.cls} (ceiling's interposer)"
            name = c.fn
        else:
            role, paradigm = ROLE["function"], PARADIGM_USER
            name = ev.regions[src - region_base] if src - region_base < len(ev.regions) else f"region {src}"
            text = "user region (ceiling_region_begin/end)"
        d(O.DEF_REGION, rid, s(name), s(name), s(text), role, paradigm, 0, UNDEF32, 0, 0)
    if a.comms or world:
        d(O.DEF_PARADIGM, PARADIGM_MPI, s("MPI"), PARADIGM_CLASS_PROCESS)
        d(O.DEF_GROUP, 0, s("MPI_COMM_WORLD's locations"), GROUP_COMM_LOCATIONS, PARADIGM_MPI, 0,
          members=a.rank_locations)
        for i in range(a.comms):
            c = ev.comms[i]
            known = _members_known(c) or c.name == "MPI_COMM_WORLD"
            members = list(c.world_ranks) if _members_known(c) else list(range(world))
            name = c.name if known else f"{c.name} (members not recorded: its ranks are world ranks)"
            d(O.DEF_GROUP, 1 + i, s(name), GROUP_COMM_GROUP, PARADIGM_MPI, 0, members=members)
            d(O.DEF_COMM, i, s(name), 1 + i, UNDEF32, 0)
    handles = w.handles()
    for k, (ident, name, cls, flags) in enumerate(IO_PARADIGMS):
        d(O.DEF_IO_PARADIGM, k, s(ident), s(name), cls, flags)
    files: Dict[int, set] = {}           # file index -> the hosts whose processes used it
    for g, f, _p in handles:
        files.setdefault(f, set()).add(a.group_info.get(g, ("", "", -1))[1] or host or "localhost")
    fid = {f: k for k, f in enumerate(sorted(files))}
    for f, k in fid.items():
        path = ev.files[f] if f < len(ev.files) else f"file {f}"
        where = files[f]
        d(O.DEF_IO_FILE, k, s(path), node[next(iter(where))] if len(where) == 1 else 0)
    for k, (g, f, p) in enumerate(handles):
        path = ev.files[f] if f < len(ev.files) else f"file {f}"
        d(O.DEF_IO_HANDLE, k, s(path), fid[f], p - 1, 0, UNDEF32, UNDEF32)
    # metric classes and instances share their ids: the classes first, then the instances
    for t, cls, _inst, _loc, _kind, _scope in metric_defs:
        label = t.name if not t.device or t.device in t.name else f"{t.device} {t.name}"
        d(O.DEF_METRIC_MEMBER, cls, s(label), s(f"{t.scope} counter, read from /proc by ceiling every interval"),
          METRIC_OTHER, METRIC_ABSOLUTE_POINT, TYPE_DOUBLE, BASE_DECIMAL, 0, s(t.unit))
    for t, cls, _inst, _loc, _kind, _scope in metric_defs:
        d(O.DEF_METRIC_CLASS, cls, METRIC_ASYNCHRONOUS, RECORDER_ABSTRACT, members=[cls])
    for t, cls, inst, loc, scope_kind, scope in metric_defs:
        d(O.DEF_METRIC_INSTANCE, inst, cls, loc, scope_kind, node[host or "localhost"] if scope is None else scope)
    # the clock first, the strings before what names them (readers resolve a name when they meet it)
    first, last = (st.first_ts, st.last_ts) if st.records else (ev.t0_ns, ev.t0_ns)
    w.define(O.DEF_CLOCK, [10**9, first, max(last - first, 0), int(ev.t0_unix_ns) + first - ev.t0_ns])
    for text, sid in s.ids.items():
        w.define(O.DEF_STRING, [sid], text)
    for what, args, text, members in defs:
        w.define(what, args, text, members)
    w.describe(description)


def _description(ev: E.Events, meta: Mapping[str, object], st: O.WriterStats) -> str:
    dropped = ev.dropped
    lines = [f"ceiling {__version__} trace"]
    lines.append("events dropped: " + (f"{dropped.total:,} (" + ", ".join(
        f"{why}: {n:,}" for why, n in sorted(dropped.events.items())) + ")" if dropped.total else "none"))
    lines.append(f"left out: {st.instants:,} process and thread starts and ends; {st.unpaired:,} MPI sends and "
                 "receives without a partner or communicator known (their Enter/Leave are in)")
    if st.clipped:
        lines.append(f"calls cut to nest in their enclosing call: {st.clipped:,}")
    lines += [f"{k}: {v}" for k, v in meta.items()]
    return "\n".join(lines)


def write_otf2(path, chunks: Iterable[E.Events], counters: Optional[E.Counters] = None,
               meta: Optional[Mapping[str, object]] = None, ranks: Optional[int] = None,
               library: Optional[O.Library] = None) -> Otf2Summary:
    """Write the OTF2 archive of ``chunks`` into the directory ``path`` (which must not exist) and say what
    it holds. ``chunks``, ``counters`` and ``meta`` as ``write_perfetto`` takes them; ``ranks``: the MPI
    world's size where known before the events, 0 for none (the other processes' groups are numbered from
    it; None: the ranks of the first chunk's processes; a rank whose id another process took first gets
    the next free one, its COMM_LOCATIONS entry still right);
    ``library``: libotf2 (default: core/otf2lib.library()). Raises Otf2UnavailableError without libotf2,
    OSError when the archive cannot be written (the partial one is removed), ValueError when a thread's
    rows go back in time or a chunk has another ``t0_ns`` than the first."""
    lib = library or O.library()
    if isinstance(chunks, E.Events):
        chunks = [chunks]
    it = iter(chunks)
    first = next(it, None) or E.Events.empty()
    meta = dict(meta or {})
    host = str(meta.get("host", "")) or next((p.host for p in first.processes.values() if p.host), "")
    path = Path(path)
    if path.exists():
        raise FileExistsError(17, f"{path}: exists; ceiling does not overwrite a trace")
    part = path.with_name(path.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    region_base = len(first.calls)
    try:
        with O.Writer(lib, str(part), ARCHIVE, first.t0_ns, region_base, creator=f"ceiling {__version__}",
                      machine=host) as w:
            w.calls(*call_tables(first.calls))
            if ranks is None:           # the ranks the first chunk knows of
                ranks = max([p.rank + 1 for p in first.processes.values()], default=0)
            a = _Archive(w, ranks)
            ev = first
            a.chunk(first)
            for ev in it:
                if ev.t0_ns != first.t0_ns:
                    raise ValueError(f"OTF2 writer: a chunk's t0_ns ({ev.t0_ns}) is not the first chunk's "
                                     f"({first.t0_ns}): chunks of one trace share their time origin")
                a.chunk(ev)
            _world(a)
            metric_defs = _metrics(a, counters, host)
            w.finish()
            st = w.stats()
            _definitions(a, ev, st, metric_defs, region_base, _description(ev, meta, st), host)
            w.close()
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise
    os.replace(part, path)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    threads = a.threads_seen
    return Otf2Summary(str(path / f"{ARCHIVE}.otf2"), str(path), size, a.rows, st.records, st.enters, st.sends,
                       st.recvs, st.unpaired, st.collectives, st.io_ops, st.io_bytes, st.msg_bytes, st.metrics,
                       st.clipped, st.instants, len(a.pids_seen), threads, ev.dropped.total, lib.path,
                       st.buffer_peak)
