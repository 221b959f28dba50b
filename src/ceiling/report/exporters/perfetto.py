"""The Perfetto trace of ``ceiling trace``: a native .pftrace (TracePacket stream, TrackEvent).

``write_perfetto(path, chunks, counters, meta)`` is the whole API: it takes the events as chunks
(results/events.Events, one or many sharing their tables), the sampler's counter tracks and a few
facts to state, writes the file chunk by chunk (memory bounded by one chunk, whatever the number
of events) and returns a ``PerfettoSummary``. Open the file in ui.perfetto.dev.

What the file holds:

- a process track per process, named "rank 3 (node01) pid 1234" ("app (node01) pid 1234" outside
  MPI), and a thread track per thread (its name and tid) under it;
- a slice per call (named by the call's fn, category "io.write", "mpi.p2p", ...; arguments bytes,
  offset, file, peer (a rooted collective's: root), tag, comm, and result where it is not the bytes moved (I/O) or not
  MPI_SUCCESS (MPI)), a slice per user region (category "region"), an instant per process or
  thread start and end, fork and exec;
- a flow arrow from each MPI send to its matching receive. Each side computes the flow id alone:
  the k-th send from rank A to rank B with tag T on communicator C pairs with the k-th receive at
  B from A with tag T on C (MPI's non-overtaking order), so the id is a hash of (A, B, T, C, k).
  MPI_Sendrecv carries one peer and one tag for two messages and gets no arrow; a receive posted
  (MPI_Irecv) before its send began may lose its arrow in the viewer, which binds a flow's end
  only after its start;
- counter tracks (``Counters``): per process under its process, node-wide at the top, each with
  its unit;
- the trace's own facts, on a track "ceiling trace: cost and drops" at the top: the tracer's own
  time, the events dropped by each limit (and an instant where each limit started dropping),
  slices cut to nest, and ``meta``'s facts (command, version, the recording's measured cost...).

Encoding: one trusted packet sequence per thread (and per counter track), names and file paths
interned per sequence, timestamps as deltas on a sequence-scoped incremental clock anchored to
CLOCK_MONOTONIC; a clock snapshot ties CLOCK_MONOTONIC to the wall clock (``t0_unix_ns``). The
packets of calls are made in C (csrc/trace/perfetto.c, through core/pftrace.py): Python only
prepares the tables, the descriptors and the flow ids.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...core.pftrace import Encoder
from ...results import events as E

# debug annotation names: their iids (1..8) are fixed in csrc/trace/perfetto.c (A_BYTES ..); a collective's
# peer is its root, named "root"
ANNOTATIONS = ("bytes", "offset", "file", "result", "peer", "tag", "comm", "root")
# categories: iid = the event's kind
CATEGORIES = {E.IO_READ: "io.read", E.IO_WRITE: "io.write", E.IO_META: "io.metadata", E.IO_SYNC: "io.sync",
              E.MPI_P2P: "mpi.p2p", E.MPI_WAIT: "mpi.wait", E.MPI_COLL: "mpi.collective", E.MPI_OTHER: "mpi.other",
              E.REGION: "region", E.INSTANT: "instant"}
INSTANT_NAMES = {E.INSTANT_PROCESS_START: "process start", E.INSTANT_PROCESS_END: "process end",
                 E.INSTANT_THREAD_START: "thread start", E.INSTANT_THREAD_END: "thread end",
                 E.INSTANT_FORK: "fork", E.INSTANT_EXEC: "exec"}
STATEMENT_TRACK = "ceiling trace: cost and drops"

_CLOCK_REALTIME, _CLOCK_MONOTONIC = 1, 3
_META_SEQ = 1                       # the sequence of the descriptors and the statement
_FIRST_EVENT_SEQ = 2
_UUID_PROCESS, _UUID_COUNTER, _UUID_STATEMENT = 1 << 56, 3 << 56, 4 << 56


@dataclass(frozen=True)
class PerfettoSummary:
    """What ``write_perfetto`` wrote, for the run's record and the terminal's receipt."""
    path: str
    bytes: int
    events: int                 # rows read from the chunks
    slices: int                 # calls and regions (a BEGIN/END pair each)
    instants: int
    flows: int                  # sends that start an arrow
    flows_ended: int            # receives that end one (sends whose receiver was not traced have none)
    clipped: int                # slices cut at their enclosing slice's end, so that nesting is proper
    counter_samples: int
    processes: int
    threads: int
    dropped: int                # events the recording dropped (Events.dropped), stated in the file
    tracer_ns: int              # the tracer's own time, stated in the file


# ---- protobuf, for the few packets made here (the hot path is C) ----

def _varint(v: int) -> bytes:
    v = int(v) & ((1 << 64) - 1)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _int(field: int, v: int) -> bytes:
    return _varint(field << 3) + _varint(v)


def _msg(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def _str(field: int, s: str) -> bytes:
    return _msg(field, s.encode("utf-8", "replace"))


def _double(field: int, v: float) -> bytes:
    return _varint(field << 3 | 1) + struct.pack("<d", v)


def _packet(*fields: bytes) -> bytes:
    return _msg(1, b"".join(fields))            # Trace.packet


def _annotation(name: str, value) -> bytes:
    if isinstance(value, bool):
        v = _int(2, int(value))
    elif isinstance(value, int):
        v = _int(4, value)
    elif isinstance(value, float):
        v = _double(5, value)
    else:
        v = _str(6, str(value))
    return _msg(4, _str(10, name) + v)          # TrackEvent.debug_annotations {name, value}


def _static_interned() -> bytes:
    body = b"".join(_msg(1, _int(1, iid) + _str(2, name)) for iid, name in CATEGORIES.items())
    body += b"".join(_msg(3, _int(1, i + 1) + _str(2, name)) for i, name in enumerate(ANNOTATIONS))
    return body


def _track(uuid: int, *fields: bytes) -> bytes:
    return _packet(_int(10, _META_SEQ), _msg(60, _int(1, uuid) + b"".join(fields)))


# ---- the tables every chunk shares ----

def message_sides(calls: Sequence) -> np.ndarray:
    """Per call id: 1 a send, 2 a receive (what a flow arrow joins, and the OTF2 archive's MpiSend and
    MpiRecv records: report/exporters/otf2.py), 0 neither. MPI_Sendrecv is neither: its event names one
    peer and one tag for two messages."""
    tab = np.zeros(max(len(calls), 1), np.uint8)
    for i, c in enumerate(calls):
        if c is None:
            continue
        fn, cls = c.fn.lower(), c.cls
        if cls == "send" or (cls == "post" and "send" in fn):
            tab[i] = 1
        elif (cls == "recv" and not fn.endswith("probe")) or (cls == "post" and "recv" in fn):
            tab[i] = 2
    return tab


def _name_table(ev: E.Events, top: int) -> List[str]:
    n = max(len(ev.calls), len(ev.regions), len(INSTANT_NAMES), top + 1)
    names = [""] * (3 * n + 1)
    for c in range(n):
        call = ev.calls[c] if c < len(ev.calls) else None
        names[3 * c + 1] = call.fn if call is not None else f"call {c}"
        names[3 * c + 2] = ev.regions[c] if c < len(ev.regions) else f"region {c}"
        names[3 * c + 3] = INSTANT_NAMES.get(c, f"instant {c}")
    return names


def _string_table(ev: E.Events, top: int) -> List[str]:
    n = max(len(ev.files), len(ev.comms), top + 1)
    strings = [""] * (2 * n + 1)
    for i in range(n):
        strings[2 * i + 1] = ev.files[i] if i < len(ev.files) else f"file {i}"
        strings[2 * i + 2] = ev.comms[i].name if i < len(ev.comms) else f"comm {i}"
    return strings


# ---- flows: the k-th message of (src, dst, tag, comm), computed by each side alone ----

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def flow_id(src, dst, tag, comm, k) -> np.ndarray:
    """The flow id of the k-th message from world rank src to dst with tag on comm (never 0)."""
    h = np.full(np.shape(src), 0x6365696C696E6721, np.uint64)       # "ceiling!"
    with np.errstate(over="ignore"):
        for v in (src, dst, tag, comm, k):
            h = _mix(h ^ np.asarray(v).astype(np.int64).astype(np.uint64))
    return np.where(h == 0, np.uint64(1), h)


class _Flows:
    """Counts each side's messages per (src, dst, tag, comm) across chunks."""

    def __init__(self, dirtab: np.ndarray):
        self.dirtab = dirtab
        self.seen: Dict[Tuple[int, ...], int] = {}

    def ids(self, ev: E.Events) -> Optional[np.ndarray]:
        rows = np.flatnonzero(ev.kind == E.MPI_P2P)
        if not len(rows):
            return None
        call = ev.call[rows].astype(np.int64)
        d = np.where(call < len(self.dirtab), self.dirtab[np.minimum(call, len(self.dirtab) - 1)], 0)
        rank, peer = ev.rank[rows], ev.peer[rows]
        ok = (d > 0) & (rank >= 0) & (peer >= 0)
        rows, d, rank, peer = rows[ok], d[ok].astype(np.int64), rank[ok], peer[ok]
        if not len(rows):
            return None
        src = np.where(d == 1, rank, peer).astype(np.int64)
        dst = np.where(d == 1, peer, rank).astype(np.int64)
        tag, comm = ev.tag[rows].astype(np.int64), ev.comm[rows].astype(np.int64)
        keys, inv = np.unique(np.stack([d, src, dst, tag, comm], axis=1), axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        order = np.argsort(inv, kind="stable")
        starts = np.searchsorted(inv[order], np.arange(len(keys)))
        k = np.empty(len(rows), np.int64)
        k[order] = np.arange(len(rows)) - starts[inv[order]]
        base = np.empty(len(keys), np.int64)
        counts = np.bincount(inv, minlength=len(keys))
        for g, key in enumerate(map(tuple, keys.tolist())):
            base[g] = self.seen.get(key, 0)
            self.seen[key] = base[g] + counts[g]
        flow = np.zeros(len(ev), np.uint64)
        flow[rows] = flow_id(src, dst, tag, comm, k + base[inv])
        return flow


# ---- the writer ----

def _process_name(pid: int, p: Optional[E.Process]) -> Tuple[str, bytes]:
    """The process's name and its ProcessDescriptor fields."""
    if p is None:
        return f"pid {pid}", _int(1, pid)
    host = f" ({p.host})" if p.host else ""
    who = f"rank {p.rank}" if p.rank >= 0 else (os.path.basename(p.exe) or "process")
    name = who + host
    fields = _int(1, pid) + _str(6, name)
    if p.exe:
        fields += _str(2, p.exe)
    labels = ([f"host {p.host}"] if p.host else []) + ([f"rank {p.rank}"] if p.rank >= 0 else [])
    fields += b"".join(_str(8, lab) for lab in labels)
    return name, fields


class _Writer:
    def __init__(self, enc: Encoder, first: E.Events):
        self.enc = enc
        self.first = first
        self.dirtab = message_sides(first.calls)
        self.flows = _Flows(self.dirtab)
        self.pids: Dict[int, None] = {}
        self.threads = 0
        self.rows = 0
        self.table_key: Tuple = ()
        self.last = first
        self.tracer_ns = 0          # the chunks' own times summed: each thread file's chunk carries its thread's

    def process(self, pid: int, ev: E.Events) -> None:
        if pid in self.pids:
            return
        self.pids[pid] = None
        name, fields = _process_name(pid, ev.processes.get(pid))
        p = ev.processes.get(pid)
        shown = p.shown_pid if p is not None else pid          # a stand-in id (two nodes, one pid) is not shown
        self.enc.raw(_track(_UUID_PROCESS | (pid & 0xFFFFFFF), _str(2, f"{name} pid {shown}"), _msg(3, fields)))

    def chunk(self, ev: E.Events) -> None:
        if ev.t0_ns != self.first.t0_ns:
            raise ValueError(f"Perfetto writer: a chunk's t0_ns ({ev.t0_ns}) is not the first chunk's "
                             f"({self.first.t0_ns}): chunks of one trace share their time origin")
        self.last = ev
        self.tracer_ns += int(ev.tracer_ns)
        for pid in ev.processes:
            self.process(pid, ev)
        if not len(ev):
            return
        cols = {k: np.ascontiguousarray(ev.columns[k], d) for k, d in E.COLUMNS.items()}
        top_call = int(cols["call"].max())
        top_str = int(max(cols["file"].max(), cols["comm"].max(), 0))
        key = (len(ev.calls), len(ev.regions), len(ev.files), len(ev.comms), id(ev.files))
        if key != self.table_key[:5] or top_call > self.table_key[5] or top_str > self.table_key[6]:
            top_call, top_str = max([top_call, *self.table_key[5:6]]), max([top_str, *self.table_key[6:7]])
            self.enc.tables(_name_table(ev, top_call), _string_table(ev, top_str))
            self.table_key = key + (top_call, top_str)
        for pid, tid, _seq, uuid in self.enc.threads(cols["pid"], cols["tid"]):
            self.process(pid, ev)
            proc = ev.processes.get(pid)
            main = tid == pid and proc is not None and proc.exe
            tname = ev.threads.get(tid) or (os.path.basename(proc.exe) if main else f"thread {tid}")
            self.enc.raw(_track(uuid, _int(5, _UUID_PROCESS | (pid & 0xFFFFFFF)), _str(2, tname),
                                _msg(4, _int(1, pid) + _int(2, tid) + _str(5, tname))))
            self.threads += 1
        self.enc.events(cols, self.flows.ids(ev), self.dirtab)
        self.rows += len(ev)

    def counters(self, counters: Optional[E.Counters]) -> None:
        for i, t in enumerate(counters.tracks if counters else ()):
            uuid = _UUID_COUNTER | i
            fields = [_str(2, t.name if not t.device or t.device in t.name else f"{t.device} {t.name}")]
            if t.scope == "process" and t.pid is not None:
                self.process(t.pid, self.last)
                fields.append(_int(5, _UUID_PROCESS | (t.pid & 0xFFFFFFF)))
            unit = 3 if t.unit in ("B", "bytes") else 0       # CounterDescriptor.UNIT_SIZE_BYTES
            fields.append(_msg(8, (_int(3, unit) if unit else b"") + _str(6, t.unit)))
            self.enc.raw(_track(uuid, *fields))
            order = np.argsort(np.asarray(t.ts, np.int64), kind="stable")
            self.enc.counter(self.enc.take_seq(), uuid, np.asarray(t.ts, np.int64)[order],
                             np.asarray(t.value, np.float64)[order])

    def statement(self, meta: Mapping[str, object], clipped: int) -> Tuple[int, int]:
        """The trace's own facts: an instant at its start and one where each limit began dropping."""
        ev = self.last
        dropped = ev.dropped
        lines = [f"tracer's own time: {self.tracer_ns / 1e6:.3f} ms (writing its buffers out, all threads)"]
        if dropped.total:
            lines.append(f"events dropped: {dropped.total:,} (" + ", ".join(
                f"{why}: {n:,}" for why, n in sorted(dropped.events.items())) + ")")
        else:
            lines.append("events dropped: none")
        if clipped:
            lines.append(f"slices cut to nest in their enclosing slice: {clipped:,}")
        lines += [f"{k}: {v}" for k, v in meta.items()]
        seq = self.enc.take_seq()
        self.enc.raw(_track(_UUID_STATEMENT, _str(2, STATEMENT_TRACK), _str(14, "\n".join(lines))))
        args = [_annotation("tracer own time ns", self.tracer_ns), _annotation("events dropped", dropped.total)]
        args += [_annotation(f"dropped ({why})", int(n)) for why, n in sorted(dropped.events.items())]
        args += [_annotation(f"first dropped at ns ({why})", int(t)) for why, t in sorted(dropped.first_ns.items())]
        args += [_annotation("slices cut to nest", clipped)]
        args += [_annotation(str(k), v if isinstance(v, (int, float, bool)) else str(v)) for k, v in meta.items()]
        title = "; ".join(lines[:2])
        self._instant(seq, 0, title, args)
        for why, t in sorted(dropped.first_ns.items(), key=lambda wt: (wt[1], wt[0])):
            n = dropped.events.get(why, 0)
            self._instant(seq, int(t), f"dropped from here: {why} ({n:,} events)", [_annotation("events", n)])
        return dropped.total, self.tracer_ns

    def _instant(self, seq: int, ts: int, name: str, args: List[bytes]) -> None:
        te = _int(9, 3) + _int(11, _UUID_STATEMENT) + _str(22, "ceiling") + _str(23, name) + b"".join(args)
        self.enc.raw(_packet(_int(8, self.first.t0_ns + ts), _int(58, _CLOCK_MONOTONIC), _int(10, seq),
                             _msg(11, te)))


def write_perfetto(path, chunks: Iterable[E.Events], counters: Optional[E.Counters] = None,
                   meta: Optional[Mapping[str, object]] = None) -> PerfettoSummary:
    """Write the Perfetto trace of ``chunks`` to ``path`` and say what it holds.

    ``chunks``: the events, one ``Events`` or an iterable of them sharing their tables (a thread's
    rows in time order across chunks; each chunk is encoded and let go before the next is read).
    The last chunk's ``dropped`` is the one the trace states (the chunks' ``tracer_ns`` are summed), and its tables
    name everything (tables only grow from chunk to chunk). ``counters``: the sampler's tracks, or
    None. ``meta``: facts stated on the trace's own track, name -> value (the command, ceiling's
    version, the recording's measured cost per event...). The file is written beside ``path`` and
    renamed into place once complete, so a reader never sees half a trace under its name.
    Raises OSError when the file cannot be written, ValueError when a thread's rows go back in time
    or a chunk has another ``t0_ns`` than the first.
    """
    if isinstance(chunks, E.Events):
        chunks = [chunks]
    it = iter(chunks)
    first = next(it, None) or E.Events.empty()
    path = Path(path)
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with Encoder(fd, first.t0_ns, _FIRST_EVENT_SEQ) as enc:
            clocks = (_msg(1, _int(1, _CLOCK_MONOTONIC) + _int(2, first.t0_ns))
                      + _msg(1, _int(1, _CLOCK_REALTIME) + _int(2, int(first.t0_unix_ns))))
            enc.raw(_packet(_int(8, first.t0_ns), _int(58, _CLOCK_MONOTONIC), _int(10, _META_SEQ),
                            _msg(6, clocks + _int(2, _CLOCK_MONOTONIC))))
            enc.static_interned(_static_interned())
            w = _Writer(enc, first)
            w.chunk(first)
            for ev in it:
                w.chunk(ev)
            w.counters(counters)
            enc.finish()
            st = enc.stats()
            dropped, tracer_ns = w.statement(dict(meta or {}), st.clipped)
            enc.finish()
            st = enc.stats()
    except BaseException:
        os.close(fd)
        part.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(part, path)
    return PerfettoSummary(str(path), st.bytes, w.rows, st.slices, st.instants, st.flows_out, st.flows_in, st.clipped,
                           st.counter_samples, len(w.pids), w.threads, dropped, tracer_ns)
