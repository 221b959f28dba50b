"""Read the interposer's event files (``ceiling trace``'s recording) into ``results.events.Events``.

The interposer (csrc/interpose/trace.c, on when CEILING_TRACE_DIR is set) writes one file per
thread, ``trace-<pid>-<tid>-<start_ns>.bin``: a 256-byte header (magic ``CEILTRC1``, format
version, event size, the FNV-1a 64 hash of calls.def's call names in id order, the tick rate, t0 on
CLOCK_MONOTONIC and the wall clock with the ticks at t0, pid, ppid, tid, MPI rank, host, boot), then
48-byte events read here with one structured dtype (``np.fromfile``). Ticks become nanoseconds with
the rate fitted between the header's t0 and the file's last clock event (written at every
write-out: CLOCK_MONOTONIC ns beside the ticks of the same instant), which also carry the tracer's
own time writing buffers out. A last event cut short by a crash is skipped and counted
(``torn``). A file written with another call numbering is refused with one line: its call ids
would name the wrong functions. Event kinds this reader does not know are skipped.

Times are put on one clock, world rank 0's (probes/interpose_clocks.py: each other node's
CLOCK_MONOTONIC mapped with the offsets a wrapped launch measured at MPI_Init and MPI_Finalize,
its SYNC events; said where none was measured), and ``Reading.clocks`` says how. A process is
its node's clock (the header's boot, else its host) and its pid: two ranks of two nodes with one
pid stay two processes, the second given a stand-in id above Linux's pid_max (``PID_STAND_IN``;
``Process.os_pid`` keeps its pid for display). The files table comes from the record files
beside the events (the ``file id=N ... path=P`` lines of each process's record,
probes/interpose_record's format), keyed by host and pid; the region names by the event
file's image (pid, start, and the -r<rank> a gathered file carries); the communicators' members
from the ``trace-*.comms`` lines (csrc/interpose/mpi_comm.c: each one's world ranks in rank order,
written when it is made), keyed by the communicator's id (those text files read by
probes/interpose_sidecars.py).

A directory is read in two steps (``plan``, then ``chunks``): every file's header, clock, sync and
drop events first (the clocks and the time origin need all of them), one file at a time with its
events let go; then each file again, one thread's Events at a time. ``EventSource`` keeps the plan
and reads the files again at each pass, so that a trace of many ranks goes through the Perfetto
writer, the OTF2 writer and each analysis with one thread's events in memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import StoreError
from ..results import events as E
from . import interpose_clocks as C
from . import interpose_names
from .interpose_sidecars import FILE_PATTERN, comm_members, files_of, record_files, region_names  # noqa: F401

MAGIC = b"CEILTRC1"
VERSION = 1
HEADER_BYTES = 256
# csrc/interpose/interpose.h's ceil_ip_trace_hdr and ceil_ip_trace_ev
HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("event_bytes", "<u4"), ("calls_hash", "<u8"),
                   ("ns_per_tick", "<f8"), ("t0_ns", "<u8"), ("t0_unix_ns", "<u8"), ("t0_ticks", "<u8"),
                   ("pid", "<i4"), ("ppid", "<i4"), ("tid", "<i4"), ("rank", "<i4"), ("host", "S64"),
                   ("boot", "<u8"), ("pad", "V112")])
EVENT = np.dtype([("t0", "<u8"), ("dur", "<u8"), ("result", "<i8"), ("bytes", "<u8"), ("offset", "<i8"),
                  ("call", "<u2"), ("kind", "<u2"), ("file", "<i4")])
assert HEADER.itemsize == HEADER_BYTES and EVENT.itemsize == 48
EV_CALL, EV_INSTANT, EV_CLOCK, EV_REGION, EV_DROP, EV_SYNC = 0, 1, 2, 3, 4, 5
# Linux's largest pid_max (2^22): ids from here on stand in for a pid another node's process has too
PID_STAND_IN = 4194304
# interpose.h's CEIL_IP_DROP_*, in order: the reasons results/events.Dropped names
DROP_REASONS = ("max-size", "calls", "exclude", "min-duration", "max-per-site", "window", "buffer")

# calls.def's class -> the coarse kind every consumer groups by
KIND_OF_CLASS = {
    ("posix", "read"): E.IO_READ, ("posix", "write"): E.IO_WRITE, ("posix", "meta"): E.IO_META,
    ("posix", "sync"): E.IO_SYNC, ("stdio", "read"): E.IO_READ, ("stdio", "write"): E.IO_WRITE,
    ("stdio", "meta"): E.IO_META, ("stdio", "flush"): E.IO_SYNC, ("copy", "copy"): E.IO_WRITE,
    ("mpi", "io_read"): E.IO_READ, ("mpi", "io_write"): E.IO_WRITE, ("mpi", "io_meta"): E.IO_META,
    ("mpi", "io_sync"): E.IO_SYNC, ("mpi", "send"): E.MPI_P2P, ("mpi", "recv"): E.MPI_P2P,
    ("mpi", "sendrecv"): E.MPI_P2P, ("mpi", "post"): E.MPI_P2P, ("mpi", "wait"): E.MPI_WAIT,
    ("mpi", "coll"): E.MPI_COLL, ("mpi", "icoll"): E.MPI_COLL,
}


def calls_hash(names: interpose_names.Names) -> int:
    """FNV-1a 64 of the call names in id order joined by newlines: what trace.c writes in each header."""
    h = 0xcbf29ce484222325
    for b in "\n".join(c.fn for c in names.calls).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


@dataclass
class ThreadFile:
    """One thread's events as read: raw ticks turned into ns since the thread's process t0."""
    path: str
    header: np.ndarray
    events: Optional[np.ndarray]  # EVENT rows (calls, instants and regions; clock events taken out); None: not
                                  # kept (read_thread's keep_events), read again when its chunk is made
    ns_per_tick: float
    tracer_ns: int
    torn: int                    # bytes of a last event cut short (0 or 1 event's worth, skipped)
    rank: int
    dropped: Dict[str, Tuple[int, int]] = field(default_factory=dict)   # reason -> (events, first ticks)
    sync: Optional[np.ndarray] = None   # its SYNC rows (csrc/interpose/mpi_clock.c), EVENT dtype
    count: int = 0               # its events (calls, instants and regions)

    @property
    def host(self) -> str:
        return bytes(self.header["host"]).split(b"\0")[0].decode(errors="replace")

    @property
    def clock(self) -> C.BootKey:
        """Which clock its times are on: its boot (0 in files from before the field: its host)."""
        return C.boot_key(int(self.header["boot"]), self.host)

    @property
    def sent_by(self) -> str:
        """"" for a file of this node, else the -r<rank> of one that rank 0's interposer received."""
        m = FILE_PATTERN.match(Path(self.path).name)
        return f"-r{m.group(4)}" if m and m.group(4) else ""


@dataclass
class Reading:
    """What ``read_dir`` found beside the Events: files it refused or could not read, torn events."""
    refused: List[str] = field(default_factory=list)
    torn_events: int = 0
    files: int = 0
    clocks: Optional[C.Clocks] = None      # how the nodes' clocks were put on rank 0's


def read_thread(path: str, expect_hash: int, keep_events: bool = True) -> ThreadFile:
    """One event file; StoreError with one line when it is not one, or was written with other call ids.
    ``keep_events`` False: its header, clock, sync and drop events and its count, not its events (what the
    trace's plan needs of every file at once: memory for one file at a time)."""
    raw = np.fromfile(path, dtype=np.uint8)
    if len(raw) < HEADER_BYTES or bytes(raw[:8]) != MAGIC:
        raise StoreError(f"{path}: not a ceiling trace event file (no {MAGIC.decode()} header)")
    h = raw[:HEADER_BYTES].view(HEADER)[0]
    if int(h["version"]) != VERSION or int(h["event_bytes"]) != EVENT.itemsize:
        raise StoreError(f"{path}: event file version {int(h['version'])} (event {int(h['event_bytes'])} bytes); "
                        f"this ceiling reads version {VERSION}")
    if int(h["calls_hash"]) != expect_hash:
        raise StoreError(f"{path}: written by an interposer with another call table (hash "
                        f"{int(h['calls_hash']):016x}, this ceiling's {expect_hash:016x}); read it with the "
                        "ceiling that recorded it")
    body = raw[HEADER_BYTES:]
    torn = len(body) % EVENT.itemsize
    ev = body[:len(body) - torn].view(EVENT)
    clock = ev[ev["kind"] == EV_CLOCK]
    t0_ticks, t0_ns = int(h["t0_ticks"]), int(h["t0_ns"])
    rate = float(h["ns_per_tick"])
    if len(clock):
        last = clock[-1]
        dt = int(last["t0"]) - t0_ticks
        if dt > 0 and int(last["offset"]) > t0_ns:
            rate = (int(last["offset"]) - t0_ns) / dt
    rank = int(h["rank"])
    if len(clock) and int(clock[-1]["result"]) >= 0:
        rank = int(clock[-1]["result"])
    sync = ev[ev["kind"] == EV_SYNC]
    own = np.concatenate([clock["dur"], sync["dur"]]).astype(np.float64)
    tracer = int(round(float(np.sum(own)) * rate)) if len(own) else 0
    dropped = {}
    for d in ev[ev["kind"] == EV_DROP]:          # cumulative: the last of each reason counts
        why = int(d["call"])
        if why < len(DROP_REASONS):
            dropped[DROP_REASONS[why]] = (int(d["bytes"]), int(d["t0"]))
    keep = np.isin(ev["kind"], (EV_CALL, EV_INSTANT, EV_REGION))       # kinds from later interposers: skipped
    return ThreadFile(path, h.copy(), ev[keep] if keep_events else None, rate, tracer, torn, rank, dropped,
                      sync.copy(), int(np.count_nonzero(keep)))


def event_files(directory: str) -> List[str]:
    return sorted(str(p) for p in Path(directory).iterdir() if FILE_PATTERN.match(p.name))


def read_dir(directory: str, names: Optional[interpose_names.Names] = None) -> Tuple[E.Events, Reading]:
    """Every thread's events under directory as one Events (sorted), and what was refused or torn."""
    chunks = list(iter_chunks(directory, names))
    if not chunks:
        return E.Events.empty(calls=(names or interpose_names.names()).calls), Reading()
    reading = chunks[0][1]
    evs = [c for c, _ in chunks]
    first = evs[0]
    cols = {k: np.concatenate([e.columns[k] for e in evs]) for k in E.COLUMNS}
    out = E.Events(first.t0_ns, first.t0_unix_ns, cols, first.calls, first.files, first.regions, first.comms,
                   first.processes, first.threads, first.dropped, sum(e.tracer_ns for e in evs))
    out.sort()
    return out, reading


@dataclass
class Plan:
    """What reading a directory's event files needs of every file at once (``plan``): each thread's
    header, clock and sync events and count (not its events), the clocks, the processes' ids, the
    time origin, the records' file tables, region names and communicators' members."""
    directory: str
    names: interpose_names.Names
    want: int
    reading: Reading
    threads: List[ThreadFile]
    proc_rank: Dict[Tuple, int]
    ids: Dict[Tuple, int]
    maps: Dict
    t0: int
    t0_unix: int
    records: Dict
    per_image: Dict
    members: Dict[int, List[int]]
    dropped: E.Dropped

    def local(self, t: ThreadFile, ticks: np.ndarray) -> np.ndarray:
        """Ticks of t's file as its node's absolute CLOCK_MONOTONIC ns."""
        h = t.header
        return np.int64(h["t0_ns"]) + np.round((ticks.astype(np.int64) - np.int64(h["t0_ticks"])) * t.ns_per_tick
                                               ).astype(np.int64)

    def on_ref(self, t: ThreadFile, ns: np.ndarray) -> np.ndarray:
        m = self.maps.get(t.clock)
        return ns if m is None else m.apply(ns)


def plan(directory: str, names: Optional[interpose_names.Names] = None) -> Optional[Plan]:
    """The directory's event files looked at once, one at a time (their events let go): None when there are
    none; StoreError when every one was refused (another call table, not an event file)."""
    names = names or interpose_names.names()
    want = calls_hash(names)
    reading = Reading()
    threads: List[ThreadFile] = []
    for p in event_files(directory):
        try:
            threads.append(read_thread(p, want, keep_events=False))
        except StoreError as e:
            reading.refused.append(str(e))
    if not threads:
        if reading.refused:
            raise StoreError(reading.refused[0])
        return None
    reading.files = len(threads)
    reading.torn_events = sum(1 for t in threads if t.torn)
    proc_rank: Dict[Tuple, int] = {}
    for t in threads:               # a thread whose last write-out came before MPI_Init knows no rank
        proc_rank[_proc(t)] = max(proc_rank.get(_proc(t), -1), t.rank)
    clocks = reading.clocks = _clocks(threads, proc_rank)
    ref = next(n.key for n in clocks.nodes if n.reference)
    threads.sort(key=lambda t: t.clock != ref)      # stable: rank 0's node's processes keep their pids
    ids = _ids(threads)
    out = Plan(directory, names, want, reading, threads, proc_rank, ids, {n.key: n.map for n in clocks.nodes}, 0, 0,
               record_files(directory), region_names(directory), comm_members(directory), E.Dropped())
    starts = {id(t): int(out.on_ref(t, np.array([int(t.header["t0_ns"])], np.int64))[0]) for t in threads}
    out.t0 = t0 = min(starts.values())
    # the wall clock at t0 from rank 0's node's headers (another node's wall clock is another clock)
    here = [t for t in threads if t.clock == ref] or threads
    out.t0_unix = min(int(t.header["t0_unix_ns"]) - (starts[id(t)] - t0) for t in here)
    for t in threads:
        for why, (n, first) in t.dropped.items():
            at = int(out.on_ref(t, out.local(t, np.array([first], np.uint64)))[0]) - t0
            out.dropped.events[why] = out.dropped.events.get(why, 0) + n
            out.dropped.first_ns[why] = min(out.dropped.first_ns.get(why, at), at)
    return out


def iter_chunks(directory: str, names: Optional[interpose_names.Names] = None
                ) -> Iterator[Tuple[E.Events, Reading]]:
    """One Events per thread file (the chunks results/events.py describes), sharing the tables and one t0:
    the earliest header's. Files with another call table are refused (said in Reading.refused). One
    file's events in memory at a time (and the chunks the caller keeps)."""
    p = plan(directory, names)
    if p is not None:
        for ev in chunks(p):
            yield ev, p.reading


class EventSource:
    """A directory's event files as chunks that can be gone through again and again (``ceiling trace``'s
    passes: the Perfetto trace, the OTF2 archive, the anti-patterns, the wait states, the bins): each pass
    reads the files again, one at a time, so memory holds one thread's events whatever the number of
    ranks. Empty (false) where there is no event file."""

    def __init__(self, directory: str, names: Optional[interpose_names.Names] = None):
        self.plan = plan(directory, names)

    def __iter__(self) -> Iterator[E.Events]:
        return chunks(self.plan) if self.plan is not None else iter(())

    def __bool__(self) -> bool:
        return self.plan is not None

    @property
    def reading(self) -> Optional[Reading]:
        return self.plan.reading if self.plan is not None else None

    @property
    def t0_ns(self) -> int:
        return self.plan.t0 if self.plan is not None else 0

    def per_process(self) -> Dict[int, Tuple[int, int]]:
        """Each process's id in the events -> (its events, its tracer's own ns), from the plan."""
        out: Dict[int, Tuple[int, int]] = {}
        if self.plan is not None:
            for t in self.plan.threads:
                if t.count:
                    pid = self.plan.ids[_proc(t)]
                    n, ns = out.get(pid, (0, 0))
                    out[pid] = (n + t.count, ns + t.tracer_ns)
        return out


def chunks(p: Plan) -> Iterator[E.Events]:
    """The plan's files read again one by one, each as one Events (the module docstring's times, ids and
    tables; the tables grow chunk by chunk and are shared: the last chunk's hold every one)."""
    names, threads, ids, proc_rank, t0, t0_unix = p.names, p.threads, p.ids, p.proc_rank, p.t0, p.t0_unix
    records, per_image, members, dropped, local, on_ref = p.records, p.per_image, p.members, p.dropped, p.local, \
        p.on_ref
    maps, want = p.maps, p.want          # (p is a process further on)
    regions: List[str] = []
    region_index: Dict[str, int] = {}
    files: List[str] = []
    index: Dict[str, int] = {}
    comms: List[E.Comm] = []
    comm_index: Dict[int, int] = {}
    processes: Dict[int, E.Process] = {}
    tids: Dict[int, str] = {}
    kind_of = np.array([KIND_OF_CLASS.get((c.module, c.cls), E.MPI_OTHER) for c in names.calls] or [0],
                       dtype=np.uint8)
    left: Dict[Tuple[int, int], int] = {}       # files still to come per thread (an exec'd image has one more)
    for t in threads:
        k = (ids[_proc(t)], _tid(t, ids[_proc(t)]))
        left[k] = left.get(k, 0) + 1
    for t in threads:
        h = t.header
        os_pid, key = int(h["pid"]), _proc(t)
        pid = ids[key]
        fmap = files_of(records, t.host, os_pid)
        lut = {0: -1}
        for fid, path in fmap.items():
            if path not in index:
                index[path] = len(files)
                files.append(path)
            lut[fid] = index[path]
        ev = t.events if t.events is not None else read_thread(t.path, want).events
        instant = ev["kind"] == EV_INSTANT
        dur = np.where(instant, -1, np.round(ev["dur"].astype(np.float64) * t.ns_per_tick)).astype(np.int64)
        at = local(t, ev["t0"])
        if maps.get(t.clock) is None:
            ts = at - t0
        else:                       # both ends mapped: the drift stretches the slices too
            ts = on_ref(t, at) - t0
            dur = np.where(instant, -1, on_ref(t, at + np.maximum(dur, 0)) - t0 - ts)
        call = ev["call"].astype(np.uint16)
        kind = np.where(instant, E.INSTANT, np.where(ev["kind"] == EV_REGION, E.REGION,
                                                      kind_of[np.minimum(call, len(kind_of) - 1)])).astype(np.uint8)
        # an MPI call's (not MPI-IO's) file field is its peer as a world rank
        mpi = (~instant) & (ev["kind"] == EV_CALL) & np.isin(kind, E.MPI_KINDS)
        f = _mapped(ev["file"], lut)
        f[mpi] = -1
        peer = np.where(mpi, ev["file"], -1).astype(np.int32)
        # and its offset field the tag (low 32 bits) and the communicator's id (high: mpi.c's tag_on)
        raw = ev["offset"].astype(np.int64).view(np.uint64)
        tag = np.where(mpi, (raw & 0xFFFFFFFF).astype(np.uint32).view(np.int32), -1).astype(np.int32)
        comm = _comm_index(np.where(mpi, raw >> 32, COMM_UNKNOWN), comms, comm_index, members)
        reg = (ev["kind"] == EV_REGION)
        if np.any(reg):
            names_here = per_image.get((os_pid, int(h["t0_ns"]), t.sent_by), {})
            glob = []
            for i in range(int(call[reg].max()) + 1):
                name = names_here.get(i, f"region {i}")
                if name not in region_index:
                    region_index[name] = len(regions)
                    regions.append(name)
                glob.append(region_index[name])
            call = call.copy()
            call[reg] = np.array(glob, dtype=np.uint16)[call[reg]]
        n = len(ev)
        tid = _tid(t, pid)
        cols = {"ts": ts, "dur": dur, "pid": np.full(n, pid, np.int32), "tid": np.full(n, tid, np.int32),
                "rank": np.full(n, proc_rank[key], np.int32), "kind": kind, "call": call, "file": f,
                "offset": ev["offset"].astype(np.int64), "nbytes": ev["bytes"].astype(np.int64),
                "result": ev["result"].astype(np.int64), "peer": peer,
                "tag": tag, "comm": comm}
        cols["offset"][instant | mpi] = -1
        if pid not in processes:
            ppid = int(h["ppid"])
            processes[pid] = E.Process(pid=pid, ppid=ids.get((t.clock, ppid), ppid), host=t.host,
                                       rank=proc_rank[key], os_pid=os_pid if pid != os_pid else -1)
        p = processes[pid]
        codes = call[instant]
        if np.any(codes == E.INSTANT_PROCESS_START):
            p.start_ns = int(ts[instant][codes == E.INSTANT_PROCESS_START][0])
        if np.any(codes == E.INSTANT_PROCESS_END):
            p.end_ns = int(ts[instant][codes == E.INSTANT_PROCESS_END][-1])
        tids[tid] = ""
        left[(pid, tid)] -= 1
        out = E.Events(t0, t0_unix, cols, names.calls, files, regions, comms, processes, tids, dropped, t.tracer_ns,
                       final=left[(pid, tid)] == 0)
        if n > 1 and np.any(np.diff(ts) < 0):
            # an event is written when its call ends: a call made from a signal handler (Open MPI's mpirun
            # writes its libevent pipe from SIGCHLD's, inside a read) precedes the call it interrupted
            out.sort()
        yield out


def _tid(t: ThreadFile, pid: int) -> int:
    """The thread's id in Events: its tid, but for a process's main thread its process's id (a stand-in's too)."""
    return pid if int(t.header["tid"]) == int(t.header["pid"]) else int(t.header["tid"])


def _mapped(ids: np.ndarray, lut: Dict[int, int]) -> np.ndarray:
    """Each file id through ``lut`` (the process's file id -> the trace's file index), -1 where it has none."""
    keys = np.fromiter(lut.keys(), np.int64, len(lut))
    vals = np.fromiter(lut.values(), np.int32, len(lut))
    order = np.argsort(keys)
    keys, vals = keys[order], vals[order]
    x = ids.astype(np.int64)
    at = np.clip(np.searchsorted(keys, x), 0, len(keys) - 1)
    return np.where(keys[at] == x, vals[at], -1).astype(np.int32)


def _proc(t: ThreadFile) -> Tuple:
    """A process of the trace: its node's clock and its pid (two nodes may give one pid)."""
    return (t.clock, int(t.header["pid"]))


def _ids(threads: List[ThreadFile]) -> Dict[Tuple, int]:
    """Each process's id in Events: its pid, or for the second of two nodes' processes with one pid a
    stand-in from PID_STAND_IN on (in the threads' order: rank 0's node's first)."""
    ids: Dict[Tuple, int] = {}
    used = set()
    spare = PID_STAND_IN
    for t in threads:
        key = _proc(t)
        if key in ids:
            continue
        pid = key[1]
        if pid in used:
            pid, spare = spare, spare + 1
        ids[key] = pid
        used.add(pid)
    return ids


def _clocks(threads: List[ThreadFile], proc_rank: Dict[Tuple, int]) -> C.Clocks:
    """The trace's clocks (probes/interpose_clocks): rank 0's node is the reference (else this node's:
    the files no other rank sent), each other one mapped by its ranks' SYNC events."""
    procs: Dict[C.BootKey, Tuple[List[str], List[int]]] = {}
    syncs: Dict[C.BootKey, List[C.Sync]] = {}
    for t in threads:
        hosts, ranks = procs.setdefault(t.clock, ([], []))
        hosts.append(t.host)
        ranks.append(proc_rank[_proc(t)])
        if t.sync is not None and len(t.sync):
            syncs.setdefault(t.clock, []).extend(C.syncs_of(t.sync, proc_rank[_proc(t)], t.ns_per_tick))
    zero = [t.clock for t in threads if proc_rank[_proc(t)] == 0]
    mine = [t.clock for t in threads if not t.sent_by]
    ref = (zero or mine or [threads[0].clock])[0]
    return C.align(procs, syncs, ref)


COMM_UNKNOWN = 0xFFFFFFFF       # mpi.h's MPI_COMM_ID_UNKNOWN; 0 is MPI_COMM_WORLD


def _comm_index(ids: np.ndarray, comms: List[E.Comm], index: Dict[int, int],
                members: Optional[Dict[int, List[int]]] = None) -> np.ndarray:
    """Each event's communicator as an index into ``comms`` (grown as new ids appear), -1 unknown.
    The id is the same in every member's events (csrc/interpose/mpi_comm.c), so a message's send and
    receive pair on it; its members (world ranks in rank order) come from the ``.comms`` lines
    (``comm_members``) where the recording has them: not for an intercommunicator, nor for one of
    more than mpi_comm.c's table holds at once."""
    out = np.full(len(ids), -1, np.int32)
    for raw in np.unique(ids):
        raw = int(raw)
        if raw == COMM_UNKNOWN:
            continue
        if raw not in index:
            index[raw] = len(comms)
            comms.append(E.Comm("MPI_COMM_WORLD" if raw == 0 else f"communicator {raw:08x}",
                                list((members or {}).get(raw, []))))
        out[ids == raw] = index[raw]
    return out


def torn_note(reading: Reading) -> str:
    """One line for the trace's page when files ended in a torn event (a crash while writing)."""
    if not reading.torn_events:
        return ""
    return (f"{reading.torn_events} event file(s) ended in an event cut short (the process died while writing "
            f"it): skipped")


__all__ = ["read_dir", "iter_chunks", "read_thread", "calls_hash", "Reading", "ThreadFile", "event_files",
           "record_files", "comm_members", "torn_note"]
