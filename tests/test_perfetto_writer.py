"""The Perfetto writer (report/exporters/perfetto.py, csrc/trace/perfetto.c), checked by parsing its
files with the `perfetto` package's protobuf classes (tests/perfetto_read.py), not with the UI."""
from __future__ import annotations

from collections import Counter as Multiset
from collections import defaultdict

import numpy as np
import pytest
from perfetto_read import Broken, check_nesting, read

from ceiling.probes import interpose_names
from ceiling.report.exporters.perfetto import STATEMENT_TRACK, write_perfetto
from ceiling.results import events as E

CALLS = interpose_names.names().calls
ID = {c.fn: c.id for c in CALLS}
T0, T0_UNIX = 5_000_000_000_000, 1_790_000_000_000_000_000


def _events(rows, **kw):
    kw.setdefault("calls", CALLS)
    kw.setdefault("files", ["/scratch/out.dat", "/scratch/in.dat"])
    kw.setdefault("regions", ["checkpoint", "solve"])
    kw.setdefault("comms", [E.Comm("MPI_COMM_WORLD", [0, 1, 2])])
    kw.setdefault("processes", {100 + r: E.Process(100 + r, 1, f"node0{r}", r, "/bin/app") for r in range(3)})
    return E.Events.from_rows(rows, t0_ns=T0, t0_unix_ns=T0_UNIX, **kw)


def _blank(n):
    return {k: np.full(n, -1 if np.issubdtype(d, np.signedinteger) else 0, d) for k, d in E.COLUMNS.items()}


def _expected(ev: E.Events):
    """The input rows as (pid, tid, ts, dur, name) with the arguments the writer documents."""
    out = []
    for i in range(len(ev)):
        r = {k: int(v[i]) for k, v in ev.columns.items()}
        kind = r["kind"]
        if kind == E.REGION:
            name = ev.regions[r["call"]]
        elif kind == E.INSTANT:
            name = {0: "process start", 1: "process end", 2: "thread start", 3: "thread end"}[r["call"]]
        else:
            name = CALLS[r["call"]].fn
        args = {}
        if kind in E.IO_KINDS + E.MPI_KINDS:
            io = kind in E.IO_KINDS
            if r["nbytes"] >= 0:
                args["bytes"] = r["nbytes"]
            if io and r["offset"] >= 0:
                args["offset"] = r["offset"]
            if io and r["file"] >= 0:
                args["file"] = ev.files[r["file"]]
            if (r["result"] != r["nbytes"]) if io else r["result"] != 0:
                args["result"] = r["result"]
            if not io:
                if r["peer"] >= 0:
                    args["root" if kind == E.MPI_COLL else "peer"] = r["peer"]
                if r["tag"] >= 0:
                    args["tag"] = r["tag"]
                if r["comm"] >= 0:
                    args["comm"] = ev.comms[r["comm"]].name
        out.append((r["pid"], r["tid"], T0 + r["ts"], r["dur"], name, tuple(sorted(args.items()))))
    return Multiset(out)


def _got(tr):
    thread_of = {u: (d.thread.pid, d.thread.tid) for u, d in tr.tracks.items() if d.HasField("thread")}
    return Multiset((*thread_of[s.track], s.ts, s.dur, s.name, tuple(sorted(s.args.items()))) for s in tr.slices)


def _mixed_rows():
    w, r, send, recv = ID["write"], ID["read"], ID["MPI_Send"], ID["MPI_Recv"]
    return [
        dict(ts=0, dur=-1, pid=100, tid=100, rank=0, kind=E.INSTANT, call=E.INSTANT_PROCESS_START),
        # starts with its region, and comes first among the rows: the region must still enclose it
        dict(ts=10, dur=100, pid=100, tid=100, rank=0, kind=E.IO_WRITE, call=w, file=0, offset=0, nbytes=4096,
             result=4096),
        dict(ts=10, dur=1000, pid=100, tid=100, rank=0, kind=E.REGION, call=0),
        dict(ts=200, dur=0, pid=100, tid=100, rank=0, kind=E.IO_WRITE, call=w, file=0, offset=4096, nbytes=0,
             result=-1),
        dict(ts=300, dur=50, pid=100, tid=100, rank=0, kind=E.MPI_P2P, call=send, peer=1, tag=7, comm=0, nbytes=8,
             result=0),
        dict(ts=400, dur=50, pid=100, tid=100, rank=0, kind=E.MPI_P2P, call=send, peer=1, tag=7, comm=0, nbytes=16,
             result=0),
        dict(ts=250, dur=300, pid=101, tid=101, rank=1, kind=E.MPI_P2P, call=recv, peer=0, tag=7, comm=0, nbytes=8,
             result=0),
        dict(ts=600, dur=20, pid=101, tid=101, rank=1, kind=E.MPI_P2P, call=recv, peer=0, tag=7, comm=0, nbytes=16,
             result=0),
        dict(ts=700, dur=30, pid=101, tid=102, rank=1, kind=E.IO_READ, call=r, file=1, offset=-1, nbytes=10, result=10),
        dict(ts=2000, dur=-1, pid=101, tid=102, rank=1, kind=E.INSTANT, call=E.INSTANT_THREAD_END),
    ]


def test_slices_args_and_timestamps_equal_the_input(tmp_path):
    ev = _events(_mixed_rows(), threads={102: "writer"})
    s = write_perfetto(tmp_path / "t.pftrace", ev)
    tr = read(tmp_path / "t.pftrace")
    assert _got(tr) == _expected(ev)
    check_nesting(tr)
    assert (s.slices, s.instants, s.clipped, s.threads, s.processes) == (8, 2, 0, 3, 3)
    assert s.bytes == (tmp_path / "t.pftrace").stat().st_size
    names = {d.name for d in tr.tracks.values()}
    assert {"rank 0 (node00) pid 100", "rank 1 (node01) pid 101", "writer", "app"} <= names
    assert tr.clocks and tr.clocks[0].primary_trace_clock == 3            # CLOCK_MONOTONIC
    assert {c.clock_id: c.timestamp for c in tr.clocks[0].clocks} == {3: T0, 1: T0_UNIX}


def test_a_rooted_collective_shows_its_root(tmp_path):
    rows = [dict(ts=0, dur=50, pid=100, tid=100, rank=0, kind=E.MPI_COLL, call=ID["MPI_Bcast"], peer=2, nbytes=8,
                 result=0),
            dict(ts=100, dur=50, pid=100, tid=100, rank=0, kind=E.MPI_COLL, call=ID["MPI_Allreduce"], nbytes=8,
                 result=0)]
    ev = _events(rows)
    write_perfetto(tmp_path / "t.pftrace", ev)
    tr = read(tmp_path / "t.pftrace")
    assert _got(tr) == _expected(ev)
    got = {s.name: s.args for s in tr.slices}
    assert got["MPI_Bcast"] == {"bytes": 8, "root": 2} and got["MPI_Allreduce"] == {"bytes": 8}


def test_a_region_starting_with_its_first_call_encloses_it(tmp_path):
    ev = _events(_mixed_rows())
    write_perfetto(tmp_path / "t.pftrace", ev)
    tr = read(tmp_path / "t.pftrace")
    region = next(s for s in tr.slices if s.name == "checkpoint")
    write = next(s for s in tr.slices if s.name == "write" and s.dur == 100)
    assert region.ts == write.ts and region.dur == 1000


def test_flows_pair_the_kth_send_with_the_kth_receive(tmp_path):
    ev = _events(_mixed_rows())
    s = write_perfetto(tmp_path / "t.pftrace", ev)
    tr = read(tmp_path / "t.pftrace")
    starts = {f: sl for sl in tr.slices for f in sl.flows}
    ends = {f: sl for sl in tr.slices for f in sl.ends_flows}
    assert len(starts) == len(ends) == s.flows == s.flows_ended == 2
    assert set(starts) == set(ends)
    pairs = sorted((starts[f].args["bytes"], ends[f].args["bytes"]) for f in starts)
    assert pairs == [(8, 8), (16, 16)]
    assert all(starts[f].name == "MPI_Send" and ends[f].name == "MPI_Recv" for f in starts)


def test_flows_match_across_chunks_and_many_ranks(tmp_path):
    """Ring exchange among 4 ranks with 2 tags, sends and receives split over 3 chunks: each side
    counts alone, and every send meets the receive of the same (src, dst, tag, k)."""
    rows, nmsg = [], 30
    for k in range(nmsg):
        for src in range(4):
            dst, tag = (src + 1) % 4, k % 2
            t = 1000 * k + 10 * src
            rows.append(dict(ts=t, dur=5, pid=100 + src, tid=100 + src, rank=src, kind=E.MPI_P2P,
                             call=ID["MPI_Isend"], peer=dst, tag=tag, comm=0, nbytes=k * 10 + src, result=0))
            rows.append(dict(ts=t + 3, dur=50, pid=100 + dst, tid=1000 + dst, rank=dst, kind=E.MPI_P2P,
                             call=ID["MPI_Recv"], peer=src, tag=tag, comm=0, nbytes=k * 10 + src, result=0))
    procs = {100 + r: E.Process(100 + r, 1, "n", r) for r in range(4)}
    ev = _events(rows, processes=procs)
    cut = [0, len(ev) // 3, 2 * len(ev) // 3, len(ev)]
    idx = np.arange(len(ev))
    chunks = [ev.select((idx >= a) & (idx < b)) for a, b in zip(cut, cut[1:])]
    s = write_perfetto(tmp_path / "t.pftrace", chunks)
    tr = read(tmp_path / "t.pftrace")
    starts = {f: sl for sl in tr.slices for f in sl.flows}
    ends = {f: sl for sl in tr.slices for f in sl.ends_flows}
    assert s.flows == s.flows_ended == len(starts) == len(ends) == 4 * nmsg
    assert all(starts[f].args["bytes"] == ends[f].args["bytes"] for f in starts)
    assert _got(tr) == _expected(ev)


def test_chunks_give_the_same_trace_as_one_piece(tmp_path):
    """3*10^4 events on 6 threads with regions around calls, cut into time-ordered chunks: the state a
    thread carries from chunk to chunk (open slices, interning, the clock) is kept."""
    rng = np.random.default_rng(7)
    n = 30_000
    pid = rng.integers(0, 2, n).astype(np.int32) + 100
    tid = pid * 10 + rng.integers(0, 3, n).astype(np.int32)
    ts = np.sort(rng.integers(0, 10**9, n))
    kind = rng.choice([E.IO_READ, E.IO_WRITE, E.IO_META, E.MPI_COLL], n).astype(np.uint8)
    cols = _blank(n)
    cols.update(ts=ts, dur=np.zeros(n, np.int64), pid=pid, tid=tid, rank=pid - 100, kind=kind,
                call=np.where(kind == E.IO_READ, ID["read"], ID["pwrite"]).astype(np.uint16),
                file=rng.integers(0, 50, n).astype(np.int32), offset=rng.integers(0, 10**12, n),
                nbytes=rng.integers(0, 1 << 20, n), result=rng.integers(-1, 1 << 20, n))
    cols["call"][kind == E.MPI_COLL] = ID["MPI_Allreduce"]
    cols["call"][kind == E.IO_META] = ID["open"]
    # each call lasts until at most the next event of its thread, so calls never overlap
    ev = E.Events(T0, T0_UNIX, cols, calls=CALLS, files=[f"/f/{i}" for i in range(50)],
                  comms=[E.Comm("w", [0, 1])])
    ev.sort()
    nxt = np.full(n, 10**9 + 10)
    for key in np.unique(ev.tid):
        idx = np.flatnonzero(ev.tid == key)
        nxt[idx[:-1]] = ev.ts[idx[1:]]
    ev.columns["dur"] = ((nxt - ev.ts) * rng.random(n) * 0.9).astype(np.int64)
    # a region per thread around all its calls
    regions = [dict(ts=0, dur=10**9 + 100, pid=int(t) // 10, tid=int(t), rank=int(t) // 10 - 100, kind=E.REGION,
                    call=1) for t in np.unique(ev.tid)]
    reg = E.Events.from_rows(regions)
    allc = {k: np.concatenate([reg.columns[k], ev.columns[k]]) for k in E.COLUMNS}
    ev = E.Events(T0, T0_UNIX, allc, calls=CALLS, files=ev.files, regions=["a", "solve"], comms=ev.comms)
    ev.sort()
    whole = write_perfetto(tmp_path / "one.pftrace", ev)
    bounds = np.linspace(0, len(ev), 8).astype(int)
    chunks = (ev.select((np.arange(len(ev)) >= a) & (np.arange(len(ev)) < b)) for a, b in zip(bounds, bounds[1:]))
    parts = write_perfetto(tmp_path / "parts.pftrace", chunks)
    one, many = read(tmp_path / "one.pftrace"), read(tmp_path / "parts.pftrace")
    assert _got(one) == _got(many) == _expected(ev)
    check_nesting(many)
    assert whole.slices == parts.slices == len(ev) and parts.clipped == 0
    per_call = Multiset(s.name for s in many.slices)
    assert per_call["open"] == int(np.sum(ev.kind == E.IO_META))
    assert per_call["MPI_Allreduce"] == int(np.sum(ev.kind == E.MPI_COLL))


def test_overlapping_rows_are_cut_to_nest(tmp_path):
    rows = [dict(ts=0, dur=100, pid=100, tid=100, kind=E.REGION, call=0),
            dict(ts=50, dur=100, pid=100, tid=100, kind=E.IO_SYNC, call=ID["fsync"], result=0)]
    s = write_perfetto(tmp_path / "t.pftrace", _events(rows))
    tr = read(tmp_path / "t.pftrace")
    check_nesting(tr)
    assert s.clipped == 1
    assert sorted((x.name, x.ts - T0, x.dur) for x in tr.slices) == [("checkpoint", 0, 100), ("fsync", 50, 50)]
    assert any("cut to nest" in line for line in tr.tracks[_statement_uuid(tr)].description.splitlines())


def _statement_uuid(tr):
    return next(u for u, d in tr.tracks.items() if d.name == STATEMENT_TRACK)


def test_the_trace_states_its_cost_and_what_was_dropped(tmp_path):
    dropped = E.Dropped({"max-size": 1234, "min-duration": 5}, {"max-size": 700, "min-duration": 20})
    ev = _events(_mixed_rows(), dropped=dropped, tracer_ns=4_500_000)
    s = write_perfetto(tmp_path / "t.pftrace", ev, meta={"command": "mpirun -n 3 ./app", "ceiling": "0.9"})
    tr = read(tmp_path / "t.pftrace")
    desc = tr.tracks[_statement_uuid(tr)].description
    assert "events dropped: 1,239 (max-size: 1,234, min-duration: 5)" in desc
    assert "tracer's own time: 4.500 ms" in desc and "command: mpirun -n 3 ./app" in desc
    head = next(x for x in tr.statement if x.ts == T0)
    assert head.args["events dropped"] == 1239 and head.args["tracer own time ns"] == 4_500_000
    assert head.args["dropped (max-size)"] == 1234 and head.args["first dropped at ns (max-size)"] == 700
    marks = {x.ts - T0: x.name for x in tr.statement if x.ts != T0}
    assert marks == {700: "dropped from here: max-size (1,234 events)",
                     20: "dropped from here: min-duration (5 events)"}
    assert (s.dropped, s.tracer_ns) == (1239, 4_500_000)


def test_the_tracer_time_stated_is_every_threads_not_the_last_chunks(tmp_path):
    # one chunk per thread file, each with its own thread's write-out time: the trace states their sum
    ev = _events(_mixed_rows())
    chunks = []
    for i, pid in enumerate(sorted(set(ev.pid.tolist()))):
        c = ev.select(ev.pid == pid)
        c.tracer_ns = 1_000_000 * (i + 1)
        chunks.append(c)
    assert len(chunks) >= 2
    s = write_perfetto(tmp_path / "t.pftrace", chunks)
    total = sum(c.tracer_ns for c in chunks)
    assert s.tracer_ns == total
    tr = read(tmp_path / "t.pftrace")
    assert f"tracer's own time: {total / 1e6:.3f} ms" in tr.tracks[_statement_uuid(tr)].description


def test_nothing_dropped_is_said_too(tmp_path):
    write_perfetto(tmp_path / "t.pftrace", _events(_mixed_rows()))
    tr = read(tmp_path / "t.pftrace")
    assert "events dropped: none" in tr.tracks[_statement_uuid(tr)].description


def test_counter_tracks_carry_the_samples_and_units(tmp_path):
    ts = np.arange(0, 10**9, 10**8)
    tracks = [E.Track("cpu", "%", "process", ts, np.linspace(0, 100, len(ts)), pid=100),
              E.Track("disk sda write bytes/s", "bytes/s", "node", ts, np.arange(len(ts)) * 1.5e6, device="sda"),
              E.Track("rss", "bytes", "process", ts[:3], np.array([1.0, 2.0, 3.0]), pid=999)]
    s = write_perfetto(tmp_path / "t.pftrace", _events(_mixed_rows()), E.Counters(tracks, 0.1))
    tr = read(tmp_path / "t.pftrace")
    by_name = {d.name: (u, d) for u, d in tr.tracks.items() if d.HasField("counter")}
    assert set(by_name) == {"cpu", "disk sda write bytes/s", "rss"}
    for t in tracks:
        uuid, d = by_name[t.name]
        assert tr.counters[uuid] == [(T0 + int(a), float(b)) for a, b in zip(t.ts, t.value)]
        assert d.counter.unit_name == t.unit
        if t.scope == "process":
            assert tr.tracks[d.parent_uuid].process.pid == t.pid
        else:
            assert not d.HasField("parent_uuid")
    assert s.counter_samples == 10 + 10 + 3


def test_an_empty_trace_is_valid_and_still_states_itself(tmp_path):
    s = write_perfetto(tmp_path / "t.pftrace", [])
    tr = read(tmp_path / "t.pftrace")
    assert tr.slices == [] and s.slices == 0 and s.events == 0
    assert _statement_uuid(tr) and tr.statement


def test_a_trace_of_instants_only(tmp_path):
    rows = [dict(ts=t, dur=-1, pid=100, tid=100, kind=E.INSTANT, call=c)
            for t, c in ((0, E.INSTANT_PROCESS_START), (5, E.INSTANT_THREAD_START), (5, E.INSTANT_THREAD_END),
                         (9, E.INSTANT_PROCESS_END))]
    ev = _events(rows)
    s = write_perfetto(tmp_path / "t.pftrace", ev)
    tr = read(tmp_path / "t.pftrace")
    assert s.instants == 4 and s.slices == 0
    assert _got(tr) == _expected(ev)


def test_a_thread_going_back_in_time_is_refused(tmp_path):
    a = _events([dict(ts=100, dur=1, pid=100, tid=100, kind=E.IO_SYNC, call=ID["fsync"], result=0)])
    b = _events([dict(ts=50, dur=1, pid=100, tid=100, kind=E.IO_SYNC, call=ID["fsync"], result=0)])
    with pytest.raises(ValueError, match="time order"):
        write_perfetto(tmp_path / "t.pftrace", [a, b])
    assert not (tmp_path / "t.pftrace").exists() and not (tmp_path / "t.pftrace.part").exists()


def test_chunks_of_another_time_origin_are_refused(tmp_path):
    a = _events([dict(ts=100, dur=1, pid=100, tid=100, kind=E.IO_SYNC, call=ID["fsync"], result=0)])
    b = _events([dict(ts=200, dur=1, pid=100, tid=100, kind=E.IO_SYNC, call=ID["fsync"], result=0)])
    b.t0_ns += 1
    with pytest.raises(ValueError, match="t0_ns"):
        write_perfetto(tmp_path / "t.pftrace", [a, b])


def test_io_calls_on_a_few_files_cost_at_most_64_bytes_each(tmp_path):
    """Issue 28's size goal: a program repeating 4 KiB to 1 MiB writes and reads on 4 files."""
    rng = np.random.default_rng(1)
    n = 200_000
    gap = rng.integers(2_000, 50_000, n)                  # 2 to 50 µs between calls
    ts = np.cumsum(gap)
    dur = (gap * rng.uniform(0.2, 0.9, n)).astype(np.int64)
    nbytes = rng.choice([4096, 65536, 1 << 20], n)
    f = rng.integers(0, 4, n).astype(np.int32)
    cols = _blank(n)
    kind = np.where(rng.random(n) < 0.5, E.IO_WRITE, E.IO_READ).astype(np.uint8)
    cols.update(ts=ts, dur=dur, pid=np.full(n, 100, np.int32), tid=np.full(n, 100, np.int32), kind=kind,
                call=np.where(kind == E.IO_WRITE, ID["pwrite"], ID["pread"]).astype(np.uint16), file=f,
                offset=rng.integers(0, 64 << 30, n), nbytes=nbytes, result=nbytes)
    ev = E.Events(T0, T0_UNIX, cols, calls=CALLS, files=[f"/scratch/run/rank{i}.dat" for i in range(4)])
    s = write_perfetto(tmp_path / "t.pftrace", ev)
    assert s.bytes / n <= 64, f"{s.bytes / n:.1f} bytes per I/O call"


def test_the_reader_refuses_a_corrupted_file(tmp_path):
    """The checks above fail on a broken encoder: a varint cut short, a delta changed."""
    ev = _events(_mixed_rows())
    write_perfetto(tmp_path / "t.pftrace", ev)
    data = bytearray((tmp_path / "t.pftrace").read_bytes())
    cut = tmp_path / "cut.pftrace"
    cut.write_bytes(data[:-3])
    with pytest.raises(Exception):
        read(cut)
    # the last event packets' timestamp deltas: find a delta byte (field 8 right after a packet head)
    tr = read(tmp_path / "t.pftrace")
    good = _got(tr)
    changed = 0
    for i in range(len(data) - 3):
        if data[i] == 0x0A and data[i + 2] == 0x40 and 0 < data[i + 3] < 0x40:       # packet, timestamp, small delta
            bad = bytearray(data)
            bad[i + 3] += 1
            (tmp_path / "bad.pftrace").write_bytes(bad)
            try:
                assert _got(read(tmp_path / "bad.pftrace")) != good
            except Broken:
                pass
            changed += 1
    assert changed > 0


def test_per_call_counts_in_a_large_trace(tmp_path):
    counts = defaultdict(int)
    rows = []
    for i in range(2000):
        fn = ("read", "write", "lseek", "MPI_Barrier")[i % 4]
        kind = {"read": E.IO_READ, "write": E.IO_WRITE, "lseek": E.IO_META, "MPI_Barrier": E.MPI_COLL}[fn]
        rows.append(dict(ts=i * 100, dur=50, pid=100, tid=100 + i % 3, rank=0, kind=kind, call=ID[fn], nbytes=i,
                         result=i))
        counts[fn] += 1
    write_perfetto(tmp_path / "t.pftrace", _events(rows))
    tr = read(tmp_path / "t.pftrace")
    assert dict(Multiset(s.name for s in tr.slices)) == counts


def test_two_nodes_processes_with_one_pid_are_two_tracks_each_named_with_its_own_pid(tmp_path):
    """The reader gives the second of two nodes' processes with one pid a stand-in id (above pid_max,
    probes/interpose_events.py): two processes in Perfetto, each track named with the pid its node gave it."""
    stand_in = 4194304
    procs = {100: E.Process(100, 1, "node00", 0, "/bin/app"),
             stand_in: E.Process(stand_in, 1, "node01", 1, "/bin/app", os_pid=100)}
    rows = [dict(ts=0, dur=10, pid=100, tid=100, rank=0, kind=E.MPI_COLL, call=ID["MPI_Barrier"], result=0),
            dict(ts=5, dur=10, pid=stand_in, tid=stand_in, rank=1, kind=E.MPI_COLL, call=ID["MPI_Barrier"], result=0)]
    s = write_perfetto(tmp_path / "t.pftrace", _events(rows, processes=procs))
    tr = read(tmp_path / "t.pftrace")
    names = {d.name for d in tr.tracks.values()}
    assert {"rank 0 (node00) pid 100", "rank 1 (node01) pid 100"} <= names and s.processes == 2
    assert len({x.track for x in tr.slices}) == 2
