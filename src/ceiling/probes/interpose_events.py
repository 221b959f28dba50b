"""Read the interposer's event files (``ceiling trace``'s recording) into ``results.events.Events``.

The interposer (csrc/interpose/trace.c, on when CEILING_TRACE_DIR is set) writes one file per
thread, ``trace-<pid>-<tid>-<start_ns>.bin``: a 256-byte header (magic ``CEILTRC1``, format
version, event size, the FNV-1a 64 hash of calls.def's call names in id order, the tick rate, t0 on
CLOCK_MONOTONIC and the wall clock with the ticks at t0, pid, ppid, tid, MPI rank, host), then
48-byte events read here with one structured dtype (``np.fromfile``). Ticks become nanoseconds with
the rate fitted between the header's t0 and the file's last clock event (written at every
write-out: CLOCK_MONOTONIC ns beside the ticks of the same instant), which also carry the tracer's
own time writing buffers out. A last event cut short by a crash is skipped and counted
(``torn``). A file written with another call numbering is refused with one line: its call ids
would name the wrong functions. Event kinds this reader does not know are skipped.

The files table comes from the record files beside the events (the ``file id=N ... path=P``
lines of each process's record, probes/interpose_record's format), keyed by pid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple
from urllib.parse import unquote

import numpy as np

from ..errors import StoreError
from ..results import events as E
from . import interpose_names

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
# interpose.h's CEIL_IP_DROP_*, in order: the reasons results/events.Dropped names
DROP_REASONS = ("max-size", "calls", "exclude", "min-duration", "max-per-site", "window", "buffer")
# -r<rank>: another rank's file that rank 0's interposer received at MPI_Finalize (a wrapped launch,
# csrc/interpose/mpi_trace.c), named apart since two nodes may have the same pid
FILE_PATTERN = re.compile(r"^trace-(\d+)-(\d+)-(\d+)(?:-r\d+)?\.bin$")

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
    events: np.ndarray           # EVENT rows (calls, instants and regions; clock events taken out)
    ns_per_tick: float
    tracer_ns: int
    torn: int                    # bytes of a last event cut short (0 or 1 event's worth, skipped)
    rank: int
    dropped: Dict[str, Tuple[int, int]] = field(default_factory=dict)   # reason -> (events, first ticks)


@dataclass
class Reading:
    """What ``read_dir`` found beside the Events: files it refused or could not read, torn events."""
    refused: List[str] = field(default_factory=list)
    torn_events: int = 0
    files: int = 0


def read_thread(path: str, expect_hash: int) -> ThreadFile:
    """One event file; StoreError with one line when it is not one, or was written with other call ids."""
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
    tracer = int(round(float(np.sum(clock["dur"].astype(np.float64))) * rate)) if len(clock) else 0
    dropped = {}
    for d in ev[ev["kind"] == EV_DROP]:          # cumulative: the last of each reason counts
        why = int(d["call"])
        if why < len(DROP_REASONS):
            dropped[DROP_REASONS[why]] = (int(d["bytes"]), int(d["t0"]))
    keep = np.isin(ev["kind"], (EV_CALL, EV_INSTANT, EV_REGION))       # kinds from later interposers: skipped
    return ThreadFile(path, h, ev[keep], rate, tracer, torn, rank, dropped)


_FILE_LINE = re.compile(r"^file id=(\d+) .*? path=(\S+)")
_PROCESS = re.compile(r"^process pid=(\d+) ppid=(\d+) .*? host=(\S+) exe=(\S+)")


def record_files(directory: str) -> Dict[int, Dict[int, str]]:
    """pid -> {file id: path} from the records in directory (every file not an event file)."""
    out: Dict[int, Dict[int, str]] = {}
    for p in sorted(Path(directory).iterdir()):
        if FILE_PATTERN.match(p.name) or not p.is_file():
            continue
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        pid = None
        for line in text.splitlines():
            m = _PROCESS.match(line)
            if m:
                pid = int(m.group(1))
                out[pid] = {}
                continue
            m = _FILE_LINE.match(line)
            if m and pid is not None:
                out[pid][int(m.group(1))] = unquote(m.group(2))
    return out


def region_names(directory: str) -> Dict[Tuple[int, int], Dict[int, str]]:
    """(pid, start_ns) -> {index: name} from region.c's ``trace-<pid>-<start_ns>.regions`` files."""
    out: Dict[Tuple[int, int], Dict[int, str]] = {}
    for p in Path(directory).glob("trace-*-*.regions"):
        m = re.match(r"^trace-(\d+)-(\d+)(?:-r\d+)?\.regions$", p.name)
        if not m:
            continue
        names = out.setdefault((int(m.group(1)), int(m.group(2))), {})
        for line in p.read_text(errors="replace").splitlines():
            i, _, name = line.partition(" ")
            if i.isdigit():
                names[int(i)] = name
    return out


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


def iter_chunks(directory: str, names: Optional[interpose_names.Names] = None
                ) -> Iterator[Tuple[E.Events, Reading]]:
    """One Events per thread file (the chunks results/events.py describes), sharing the tables and one t0:
    the earliest header's. Files with another call table are refused (said in Reading.refused)."""
    names = names or interpose_names.names()
    want = calls_hash(names)
    reading = Reading()
    threads: List[ThreadFile] = []
    for p in event_files(directory):
        try:
            threads.append(read_thread(p, want))
        except StoreError as e:
            reading.refused.append(str(e))
    if not threads:
        if reading.refused:
            raise StoreError(reading.refused[0])
        return
    reading.files = len(threads)
    reading.torn_events = sum(1 for t in threads if t.torn)
    t0 = min(int(t.header["t0_ns"]) for t in threads)
    t0_unix = min(int(t.header["t0_unix_ns"]) - (int(t.header["t0_ns"]) - t0) for t in threads)
    per_pid = record_files(directory)
    per_image = region_names(directory)
    regions: List[str] = []
    region_index: Dict[str, int] = {}
    pid_rank: Dict[int, int] = {}
    for t in threads:               # a thread whose last write-out came before MPI_Init knows no rank
        pid_rank[int(t.header["pid"])] = max(pid_rank.get(int(t.header["pid"]), -1), t.rank)
    dropped = E.Dropped()
    for t in threads:
        start = int(t.header["t0_ns"]) - t0
        for why, (n, first) in t.dropped.items():
            at = start + int(round((first - int(t.header["t0_ticks"])) * t.ns_per_tick))
            dropped.events[why] = dropped.events.get(why, 0) + n
            dropped.first_ns[why] = min(dropped.first_ns.get(why, at), at)
    files: List[str] = []
    index: Dict[str, int] = {}
    comms: List[E.Comm] = []
    comm_index: Dict[int, int] = {}
    processes: Dict[int, E.Process] = {}
    tids: Dict[int, str] = {}
    kind_of = np.array([KIND_OF_CLASS.get((c.module, c.cls), E.MPI_OTHER) for c in names.calls] or [0],
                       dtype=np.uint8)
    for t in threads:
        h = t.header
        pid = int(h["pid"])
        fmap = per_pid.get(pid, {})
        lut = {0: -1}
        for fid, path in fmap.items():
            if path not in index:
                index[path] = len(files)
                files.append(path)
            lut[fid] = index[path]
        ev = t.events
        start = int(h["t0_ns"]) - t0
        ts = start + np.round((ev["t0"].astype(np.int64) - np.int64(h["t0_ticks"])) * t.ns_per_tick).astype(np.int64)
        instant = ev["kind"] == EV_INSTANT
        dur = np.where(instant, -1, np.round(ev["dur"].astype(np.float64) * t.ns_per_tick)).astype(np.int64)
        call = ev["call"].astype(np.uint16)
        kind = np.where(instant, E.INSTANT, np.where(ev["kind"] == EV_REGION, E.REGION,
                                                      kind_of[np.minimum(call, len(kind_of) - 1)])).astype(np.uint8)
        # an MPI call's (not MPI-IO's) file field is its peer as a world rank
        mpi = (~instant) & (ev["kind"] == EV_CALL) & np.isin(kind, E.MPI_KINDS)
        f = np.array([lut.get(int(x), -1) for x in ev["file"]], dtype=np.int32) if len(ev) else np.empty(0, np.int32)
        f[mpi] = -1
        peer = np.where(mpi, ev["file"], -1).astype(np.int32)
        # and its offset field the tag (low 32 bits) and the communicator's id (high: mpi.c's tag_on)
        raw = ev["offset"].astype(np.int64).view(np.uint64)
        tag = np.where(mpi, (raw & 0xFFFFFFFF).astype(np.uint32).view(np.int32), -1).astype(np.int32)
        comm = _comm_index(np.where(mpi, raw >> 32, COMM_UNKNOWN), comms, comm_index)
        reg = (ev["kind"] == EV_REGION)
        if np.any(reg):
            names_here = per_image.get((pid, int(h["t0_ns"])), {})
            glob = []
            for local in range(int(call[reg].max()) + 1):
                name = names_here.get(local, f"region {local}")
                if name not in region_index:
                    region_index[name] = len(regions)
                    regions.append(name)
                glob.append(region_index[name])
            call = call.copy()
            call[reg] = np.array(glob, dtype=np.uint16)[call[reg]]
        n = len(ev)
        cols = {"ts": ts, "dur": dur, "pid": np.full(n, pid, np.int32), "tid": np.full(n, int(h["tid"]), np.int32),
                "rank": np.full(n, pid_rank[pid], np.int32), "kind": kind, "call": call, "file": f,
                "offset": ev["offset"].astype(np.int64), "nbytes": ev["bytes"].astype(np.int64),
                "result": ev["result"].astype(np.int64), "peer": peer,
                "tag": tag, "comm": comm}
        cols["offset"][instant | mpi] = -1
        if pid not in processes:
            host = bytes(h["host"]).split(b"\0")[0].decode(errors="replace")
            processes[pid] = E.Process(pid=pid, ppid=int(h["ppid"]), host=host, rank=pid_rank[pid])
        p = processes[pid]
        codes = call[instant]
        if np.any(codes == E.INSTANT_PROCESS_START):
            p.start_ns = int(ts[instant][codes == E.INSTANT_PROCESS_START][0])
        if np.any(codes == E.INSTANT_PROCESS_END):
            p.end_ns = int(ts[instant][codes == E.INSTANT_PROCESS_END][-1])
        tids[int(h["tid"])] = ""
        yield (E.Events(t0, t0_unix, cols, names.calls, files, regions, comms, processes, tids, dropped,
                        t.tracer_ns), reading)


COMM_UNKNOWN = 0xFFFFFFFF       # mpi.h's MPI_COMM_ID_UNKNOWN; 0 is MPI_COMM_WORLD


def _comm_index(ids: np.ndarray, comms: List[E.Comm], index: Dict[int, int]) -> np.ndarray:
    """Each event's communicator as an index into ``comms`` (grown as new ids appear), -1 unknown.
    The id is the same in every member's events (csrc/interpose/mpi_comm.c), so a message's send and
    receive pair on it; its members are not in the events."""
    out = np.full(len(ids), -1, np.int32)
    for raw in np.unique(ids):
        raw = int(raw)
        if raw == COMM_UNKNOWN:
            continue
        if raw not in index:
            index[raw] = len(comms)
            comms.append(E.Comm("MPI_COMM_WORLD" if raw == 0 else f"communicator {raw:08x}"))
        out[ids == raw] = index[raw]
    return out


def torn_note(reading: Reading) -> str:
    """One line for the trace's page when files ended in a torn event (a crash while writing)."""
    if not reading.torn_events:
        return ""
    return (f"{reading.torn_events} event file(s) ended in an event cut short (the process died while writing "
            f"it): skipped")


__all__ = ["read_dir", "iter_chunks", "read_thread", "calls_hash", "Reading", "ThreadFile", "event_files",
           "record_files", "torn_note"]
