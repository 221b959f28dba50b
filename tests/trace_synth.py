"""Synthetic traces with planted patterns, for the trace analysis and timeline tests: numpy
columns built directly (Events.from_rows is for a handful of rows). Deterministic from a seed."""
import numpy as np

from ceiling.results.events import (COLUMNS, IO_META, IO_READ, IO_SYNC, IO_WRITE, MPI_COLL, MPI_P2P, Counters,
                                    Events, Track)

MS = 1_000_000
S = 1_000_000_000
WRITE, OPEN, BARRIER, SEND = 17, 3, 200, 210      # call ids: the analysis groups by them, names unused


def events(parts):
    """parts: list of dicts of equal-length arrays (ts, dur, rank, kind, call, nbytes, ...)."""
    n = sum(len(p["ts"]) for p in parts)
    cols = {}
    for k, d in COLUMNS.items():
        fill = -1 if np.issubdtype(d, np.signedinteger) else 0
        cols[k] = np.concatenate([np.asarray(p.get(k, np.full(len(p["ts"]), fill)), d) for p in parts]) \
            if parts else np.empty(0, d)
    if "pid" not in parts[0]:
        cols["pid"] = (cols["rank"] + 1000).astype(np.int32)
    cols["tid"] = cols["pid"]
    assert len(cols["ts"]) == n
    ev = Events(0, 0, cols)
    ev.sort()
    return ev


def calls(rank, ts, dur, kind, call, nbytes=-1):
    ts = np.atleast_1d(np.asarray(ts, np.int64))
    n = len(ts)
    return dict(ts=ts, dur=np.broadcast_to(np.asarray(dur, np.int64), (n,)).copy(),
                rank=np.broadcast_to(np.asarray(rank, np.int32), (n,)).copy(),
                kind=np.full(n, kind, np.uint8), call=np.full(n, call, np.uint16),
                nbytes=np.broadcast_to(np.asarray(nbytes, np.int64), (n,)).copy(),
                # a read, write or sync is on a file (index 0): one on no file is not storage I/O
                file=np.full(n, 0 if kind in (IO_READ, IO_WRITE, IO_SYNC) else -1, np.int32))


def clean(nranks=4, seed=1):
    """10 s: compute in 100 ms steps with a 1 ms allreduce; each rank opens, writes its 4 MB part in
    four 1 MiB writes of 2 ms (+-5%) at the end, and closes."""
    rng = np.random.default_rng(seed)
    parts = []
    for r in range(nranks):
        steps = np.arange(0, 99) * 100 * MS + 99 * MS
        parts.append(calls(r, steps, MS, MPI_COLL, BARRIER))
        t = 9_950 * MS
        parts.append(calls(r, [t], 50_000, IO_META, OPEN))
        parts.append(calls(r, t + 100_000 + np.arange(4) * 3 * MS, (2 * MS * rng.uniform(0.95, 1.05, 4)),
                           IO_WRITE, WRITE, 1 << 20))
        parts.append(calls(r, [t + 14 * MS], 50_000, IO_META, OPEN + 1))
    return events(parts)


def single_writer(nranks=4):
    """10 s; rank 0 writes 1 MiB blocks from 4 s to 6 s (40 x 50 ms) while the others sit in a barrier."""
    parts = [calls(0, 4 * S + np.arange(40) * 50 * MS, 50 * MS, IO_WRITE, WRITE, 1 << 20)]
    for r in range(1, nranks):
        parts.append(calls(r, [4 * S], 2 * S, MPI_COLL, BARRIER))
    for r in range(nranks):
        parts.append(calls(r, [6 * S], MS, MPI_COLL, BARRIER))
    return events(parts)


def fluctuating(nranks=2):
    """Each rank: 100 writes of 1 MiB, 1 ms each, every 50 ms; one in ten takes 10 ms (planted at 2.0-2.5 s)."""
    parts = []
    for r in range(nranks):
        ts = np.arange(100) * 50 * MS + r * MS
        dur = np.full(100, MS)
        dur[40:50] = 10 * MS               # ten slow calls of a hundred: one in ten
        parts.append(calls(r, ts, dur, IO_WRITE, WRITE, 1 << 20))
    return events(parts)


def disk_track(value_bps, other_bps=0.0, slow=(2.0, 2.5)):
    """A node-wide disk write throughput track sampled every 100 ms over 5 s."""
    ts = np.arange(51) * 100 * MS
    v = np.full(51, value_bps, np.float64)
    if other_bps:
        v[(ts >= slow[0] * S) & (ts <= slow[1] * S)] += other_bps
    return Counters([Track("disk sda write bytes/s", "B/s", "node", ts, v, device="sda")], 0.1)


def cpu_wait_track(inside, outside=0.0, slow=(2.0, 2.5)):
    """PSI cpu "some" sampled every 100 ms over 5 s: ``inside`` in the intervals around the slow calls."""
    ts = np.arange(51) * 100 * MS
    v = np.full(51, outside, np.float64)
    v[(ts > slow[0] * S) & (ts <= slow[1] * S)] = inside
    return Track("psi cpu some", "share", "node", ts, v)


def serialized(nranks=4):
    """10 s; every rank writes its own part from 3 s to 5 s (20 x 100 ms writes), nobody computes then."""
    parts = [calls(r, 3 * S + np.arange(20) * 100 * MS, 100 * MS, IO_WRITE, WRITE, 8 << 20) for r in range(nranks)]
    parts += [calls(r, [9 * S], MS, MPI_COLL, BARRIER) for r in range(nranks)]
    return events(parts)


def open_close_storm(nranks=4):
    """10 s; from 7 s to 8 s each rank opens and closes a file every 100 µs (20,000 calls of 40 µs)."""
    parts = []
    for r in range(nranks):
        ts = 7 * S + np.arange(20_000) * 50_000
        parts.append(calls(r, ts, 40_000, IO_META, OPEN))
        parts.append(calls(r, [9_999 * MS], MS, MPI_COLL, BARRIER))
    return events(parts)


def big(nranks=256, steps=40, seed=7):
    """A 256-rank run of 20 s: compute steps with p2p exchanges and an allreduce, a checkpoint every
    5 s through rank 0 (others wait), one slow rank; about 10^5 events."""
    rng = np.random.default_rng(seed)
    step = 500 * MS
    r = np.repeat(np.arange(nranks), steps)
    k = np.tile(np.arange(steps), nranks)
    t = k * step
    comp = (400 * MS * rng.uniform(0.9, 1.0, r.size)).astype(np.int64)
    comp[r == 77] = 480 * MS
    parts = [
        calls(r, t + comp, 2 * MS, MPI_P2P, SEND, 1 << 16),
        calls(r, t + comp + 2 * MS, step - comp - 2 * MS - 100 * MS // 10, MPI_COLL, BARRIER),
    ]
    ck = np.arange(1, 4) * 5 * S
    for c in ck:
        parts.append(calls(0, c + np.arange(50) * 10 * MS, 10 * MS, IO_WRITE, WRITE, 4 << 20))
        others = np.arange(1, nranks)
        parts.append(calls(others, np.full(others.size, c), 500 * MS, MPI_COLL, BARRIER + 1))
    return events(parts)
