"""The I/O anti-patterns a trace shows on its time line (issue 28): pure functions from
``results.events.Events`` chunks (+ the sampler's ``Counters``, + this node's measured storage
ceilings where the history has them) to ``Finding``s. Entry point: ``trace_findings``.

Each finding's ``data`` carries ``start_s`` and ``end_s`` (its window, s since the trace's
start), ``windows`` ([[start_s, end_s], ...], at most ``MAX_WINDOWS``) and ``time_lost_s``.
The analysis reads the trace at ``ANALYSIS_BINS`` bins (trace_bins.timeline_bins), so its
windows are exact to one bin (the run / 1000).

Thresholds, and why:

- single writer / reader: in a bin one rank is in I/O at least ``BUSY`` (half) of its time
  while the median other rank is in MPI (any class) at least ``BUSY``; such bins with the same
  rank, merged, are its windows; said when that rank moved at least ``SINGLE_SHARE`` (0.9, the
  profile's own ``profile_mpi.SINGLE_WRITER``) of the bytes moved in them and the windows are
  at least ``MIN_SHARE`` (5%) of the run: shorter, and the waiting costs less than measuring it.
  It refines the profile's whole-run ``profile.io.single_writer`` (when, how long, time lost);
  ``data["refines"]`` names it.
- fluctuating I/O: reads or writes of one call and one size (power-of-two bucket), at least
  ``FLUCT_MIN_CALLS`` (20) of them, whose p99 is at least ``FLUCT_RATIO`` (4x) the median and
  whose slow calls (over ``FLUCT_RATIO`` x the median) take at least ``SLOW_SHARE`` (20%) of the
  group's time: storage behind a page cache spreads a few x; a 4x tail that costs a fifth of the
  time is worth acting on. One slow call in ten at 10x the median costs half. And only where
  the slow calls lose at least ``LOST_SHARE`` (1%) of the run: a cold cache's slow first reads
  of a program's own files lose microseconds.
- serialized I/O phase: bins in which no lane computes more than ``IDLE`` (10%) of its time and
  some lane is in I/O at least ``BUSY``; phases of at least ``MIN_SHARE`` of the run together,
  except the bins another finding explains (the same bins said once): a single writer's windows,
  the slow calls of fluctuating I/O, a storm's bins.
- metadata / small-I/O storm: stretches of bins in which metadata calls (or reads and writes under
  ``SMALL_IO``, 64 KiB, profile_io's) take at least ``STORM_SHARE`` (25%) of the lanes' time, at
  ``STORM_RATE`` (1,000) calls/s or more over the stretch, together at least ``MIN_SHARE`` of the
  run; the rate is set beside this node's measured metadata rate where the history has it.

Under a launcher (mpiexec and its proxies, lanes of their own) the single writer and the
serialized phase look at the ranks alone (``_job``): a launcher waits in poll, outside every
intercepted call, which the time line takes for computing. The single writer reads each rank
by its thread most in I/O (or in MPI): an MPI library's helper thread, asleep all along, would
halve the rank's shares (``_busiest_thread``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..results.events import IO_META, IO_READ, IO_WRITE, Counters, Events, Track
from ..results.model import WARN, Finding
from .trace_bins import Bins, again, histogram, lane_of, off_storage, timeline_bins

ANALYSIS_BINS = 1000
BUSY = 0.5
IDLE = 0.10
SINGLE_SHARE = 0.9
MIN_SHARE = 0.05
FLUCT_MIN_CALLS = 20
FLUCT_RATIO = 4.0
SLOW_SHARE = 0.20
SMALL_IO = 64 * 1024
STORM_SHARE = 0.25
STORM_RATE = 1000.0
MAX_WINDOWS = 20
LOST_SHARE = 0.01       # fluctuating calls are said when their slow ones lose at least this share of the run
OWN_TRAFFIC = 1.5       # the device moved at most this x what the program wrote: its own write-back
CPU_WAIT = 0.25         # PSI cpu "some" around the slow calls from which they may have waited for a CPU


@dataclass
class StorageCeilings:
    """This node's measured storage ceilings (history: ``ceiling bench storage``), None unknown."""
    write_mbs: Optional[float] = None       # sequential write, MB/s
    read_mbs: Optional[float] = None        # sequential read, MB/s
    meta_ops: Optional[float] = None        # metadata operations/s (create/stat/remove)
    source: str = ""                        # where they come from, in words


def _runs(flag: np.ndarray) -> List[Tuple[int, int]]:
    """[lo, hi) index ranges where flag is true."""
    f = np.concatenate(([False], flag, [False])).astype(np.int8)
    d = np.diff(f)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def _win(b: Bins, runs: Sequence[Tuple[int, int]]) -> List[List[float]]:
    return [[float(b.edges_ns[lo]) / 1e9, float(b.edges_ns[hi]) / 1e9] for lo, hi in runs]


def _data(b: Bins, runs: Sequence[Tuple[int, int]], lost_s: float, **extra: Any) -> Dict[str, Any]:
    w = _win(b, runs)
    return dict(start_s=w[0][0], end_s=w[-1][1], windows=w[:MAX_WINDOWS], time_lost_s=lost_s, **extra)


def _run_s(b: Bins) -> float:
    return float(b.edges_ns[-1] - b.edges_ns[0]) / 1e9


def _t(s: float) -> str:
    return f"{s:.3g} s"


def _bytes_in(chunks: Sequence[Events], kind: int, edges: np.ndarray, lanes: List[int]) -> np.ndarray:
    """[lanes, bins]: bytes the lane's calls of ``kind`` moved, by start time."""
    out = np.zeros((len(lanes), len(edges) - 1), np.float64)
    index = {k: i for i, k in enumerate(lanes)}
    for ev in chunks:
        m = (ev.kind == kind) & (ev.nbytes > 0) & ~off_storage(ev)
        if not m.any():
            continue
        keys = np.array(sorted(index), np.int64)
        li = np.array([index[int(k)] for k in keys], np.int64)[np.searchsorted(keys, lane_of(ev)[m])]
        bi = np.clip(np.searchsorted(edges, ev.ts[m], "right") - 1, 0, len(edges) - 2)
        np.add.at(out, (li, bi), ev.nbytes[m].astype(np.float64))
    return out


def _job(b: Bins) -> np.ndarray:
    """The lanes that are the job: its ranks where it has any (not the launcher's processes, mpiexec
    and its proxies, which wait in poll outside every intercepted call: taken to compute, they
    would hide every phase in which no rank computes, and be the median rank that does not wait
    in MPI); every lane otherwise."""
    ranks = np.flatnonzero(np.array(b.lanes) >= 0)
    return ranks if len(ranks) else np.arange(len(b.lanes))


def _busiest_thread(chunks: Sequence[Events], b: Bins, job: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """[job's lanes, bins]: each rank's share of I/O and of MPI (waiting included), each that of the
    rank's thread most in it. A rank's lane averages its threads, and an MPI library's helper threads (MPICH's, Open
    MPI's PMIx and event threads), asleep outside every intercepted call from MPI_Init to MPI_Finalize,
    would halve a rank that writes or waits all the time into one in I/O or MPI half of it."""
    keys: Dict[int, int] = {}               # rank << 32 | tid -> the thread's lane
    per_thread = []
    for ev in chunks:
        ev = ev.select(ev.rank >= 0)
        if not len(ev):
            continue
        pair = (ev.rank.astype(np.int64) << 32) | (ev.tid.astype(np.int64) & 0xFFFFFFFF)
        uniq, inv = np.unique(pair, return_inverse=True)
        lane = np.array([keys.setdefault(int(u), len(keys)) for u in uniq], np.int32)
        cols = dict(ev.columns, rank=lane[inv.reshape(-1)])
        per_thread.append(Events(ev.t0_ns, ev.t0_unix_ns, cols, ev.calls, ev.files, ev.regions, ev.comms))
    tb = timeline_bins(per_thread, b.nbins, (int(b.edges_ns[0]), int(b.edges_ns[-1])))
    rank_of = {k: u >> 32 for u, k in keys.items()}
    io = np.zeros((len(job), b.nbins))
    mpi = np.zeros((len(job), b.nbins))
    at = {b.lanes[i]: n for n, i in enumerate(job)}
    t_io, t_mpi = tb.of("io"), tb.of("mpi") + tb.of("wait")
    for li, k in enumerate(tb.lanes):
        n = at.get(rank_of.get(k, -1))
        if n is not None:
            io[n] = np.maximum(io[n], t_io[li])
            mpi[n] = np.maximum(mpi[n], t_mpi[li])
    return io, mpi


def single_mover(chunks: Sequence[Events], b: Bins) -> List[Finding]:
    """Single writer and single reader: one rank in I/O while the other ranks wait in MPI."""
    job = _job(b)
    if len(job) < 2 or not any(b.lanes[i] >= 0 for i in job):
        return []
    io, mpi = _busiest_thread(chunks, b, job)
    lanes, labels = [b.lanes[i] for i in job], [b.labels[i] for i in job]
    out = []
    for kind, verb in ((IO_WRITE, "write"), (IO_READ, "read")):
        moved = _bytes_in(chunks, kind, b.edges_ns, b.lanes)[job]
        top = np.argmax(io, axis=0)
        others = np.where(np.arange(len(job))[:, None] == top[None, :], np.nan, mpi)
        waiting = np.nanmedian(others, axis=0)
        # the bytes are counted at a call's start: a bin inside a long call moved none, and stays in
        flag = (io[top, np.arange(b.nbins)] >= BUSY) & (waiting >= BUSY)
        runs = []
        for rank_i in np.unique(top[flag]):
            for lo, hi in _runs(flag & (top == rank_i)):
                runs.append((int(rank_i), lo, hi))
        if not runs:
            continue
        by_rank: Dict[int, List[Tuple[int, int]]] = {}
        for r, lo, hi in runs:
            by_rank.setdefault(r, []).append((lo, hi))
        r, spans = max(by_rank.items(), key=lambda kv: sum(h - lo for lo, h in kv[1]))
        inside = np.zeros(b.nbins, bool)
        for lo, hi in spans:
            inside[lo:hi] = True
        total = moved[:, inside].sum()
        share = moved[r, inside].sum() / total if total else 0.0
        dur_s = inside.sum() * b.width_ns / 1e9
        if share < SINGLE_SHARE or dur_s < MIN_SHARE * _run_s(b):
            continue
        lost = float((mpi[:, inside].sum() - mpi[r, inside].sum()) * b.width_ns / 1e9)
        rank = lanes[r]
        w = _win(b, spans)
        words = (f"{labels[r]} {verb}s {share:.0%} of the {total / 1e6:.4g} MB moved in {len(spans)} window(s) "
                 f"of {_t(dur_s)} in all ({dur_s / _run_s(b):.0%} of the run, first {w[0][0]:.3g}-{w[0][1]:.3g} s) "
                 f"while the other {len(job) - 1} ranks wait in MPI: {lost:.3g} rank-seconds lost")
        out.append(Finding(
            id=f"trace.io.single_{verb}r", status=WARN,
            title=f"A single {verb}r on the time line: {labels[r]}, while the others wait {_t(dur_s)}",
            evidence=words,
            why=f"One rank's {verb}s run at one client's bandwidth while every other rank waits for it; a "
                "parallel file system needs many clients to reach its bandwidth.",
            fix=f"{verb.capitalize()} per rank (each its part of one file, MPI_File_{verb}_at_all) or with one "
                "rank per node; or overlap: a non-blocking MPI_File_i" + verb + "_at while the others compute.",
            data=_data(b, spans, lost, rank=rank, share=float(share), bytes=float(total),
                       refines="profile.io.single_writer" if verb == "write" else "")))
    return out


def _node_tracks(counters: Optional[Counters], verb: str) -> List[Track]:
    if counters is None:
        return []
    return [t for t in counters.tracks if t.scope == "node" and "disk" in t.name and verb in t.name
            and len(t.ts)]


def _mean_in(track: Track, windows: Sequence[Tuple[int, int]]) -> Tuple[Optional[float], Optional[float]]:
    """The track's mean over the intervals that overlap the windows (ns) and over the others. Each
    value is a rate over the interval that ends at its time (the first: as long as the second), so a
    slow call of 3 ms between two readings 100 ms apart falls in the interval that holds it."""
    ts = track.ts.astype(np.int64)
    if len(ts) < 2:
        return None, None
    lo_t = np.concatenate(([ts[0] - (ts[1] - ts[0])], ts[:-1]))
    inside = np.zeros(len(ts), bool)
    for lo, hi in windows:
        inside |= (lo_t < hi) & (ts > lo)
    v = track.value.astype(np.float64)
    return (float(v[inside].mean()) if inside.any() else None,
            float(v[~inside].mean()) if (~inside).any() else None)


def _cpu_wait(counters: Optional[Counters], spans: Sequence[Tuple[int, int]]) -> Optional[str]:
    """Words when some task waited for a CPU for much of the slow calls' intervals (PSI cpu "some"):
    a call preempted then is slow without the device's doing, which the device's figures cannot tell."""
    track = next((t for t in (counters.tracks if counters else []) if t.name == "psi cpu some" and len(t.ts)), None)
    if track is None:
        return None
    inside, outside = _mean_in(track, spans)
    if inside is None or inside < CPU_WAIT:
        return None
    return (f"some task waited for a CPU {inside:.0%} of the time around the slow calls (PSI cpu some; "
            + (f"{outside:.0%} otherwise" if outside is not None else "no other interval") + ")")


def fluctuating(chunks: Sequence[Events], counters: Optional[Counters], ceilings: StorageCeilings,
                run_ns: float, explained: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> List[Finding]:
    """Reads or writes of one call and size whose durations spread, with the node's device throughput.
    ``explained``: (bin edges, a bool per bin), the bins a slow call said here overlaps set true."""
    cols = {k: [] for k in ("kind", "call", "nbytes", "ts", "dur")}
    for ev in chunks:
        m = ((ev.kind == IO_WRITE) | (ev.kind == IO_READ)) & (ev.dur >= 0) & (ev.nbytes > 0) & ~off_storage(ev)
        for k in cols:
            cols[k].append(getattr(ev, k)[m])
    if not cols["ts"] or not sum(len(x) for x in cols["ts"]):
        return []
    c = {k: np.concatenate(v) for k, v in cols.items()}
    bucket = np.floor(np.log2(c["nbytes"].astype(np.float64))).astype(np.int64)
    key = (c["kind"].astype(np.int64) << 40) | (c["call"].astype(np.int64) << 20) | bucket
    out = []
    for k in np.unique(key):
        m = key == k
        if m.sum() < FLUCT_MIN_CALLS:
            continue
        d = c["dur"][m].astype(np.float64)
        p50, p99 = np.percentile(d, 50), np.percentile(d, 99)
        if p50 <= 0 or p99 < FLUCT_RATIO * p50:
            continue
        slow = d > FLUCT_RATIO * p50
        slow_share = d[slow].sum() / d.sum()
        if slow_share < SLOW_SHARE:
            continue
        ts = c["ts"][m][slow]
        ends = ts + c["dur"][m][slow]
        spans: List[Tuple[int, int]] = []
        for a, e in sorted(zip(ts.tolist(), ends.tolist())):     # overlapping slow calls: one window
            if spans and a <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], e))
            else:
                spans.append((a, e))
        lost = float((d[slow] - p50).sum()) / 1e9
        if lost < LOST_SHARE * run_ns / 1e9:
            continue                # a cold cache's one slow open-and-read: microseconds of a second's run
        if explained is not None:
            edges, mask = explained
            for a, e in spans:
                mask |= (edges[:-1] < e) & (edges[1:] > a)
        verb = "write" if int(c["kind"][m][0]) == IO_WRITE else "read"
        doer = "writer" if verb == "write" else "reader"
        size = int(np.median(c["nbytes"][m]))
        words = (f"{int(m.sum())} {verb}s of about {size / 1024:.4g} KiB: median {p50 / 1e6:.3g} ms, p99 "
                 f"{p99 / 1e6:.3g} ms ({p99 / p50:.3g}x); the {int(slow.sum())} slow ones (over {FLUCT_RATIO:g}x "
                 f"the median) take {slow_share:.0%} of these calls' time, {lost:.3g} s more than at the median")
        cause, why_dev = _device_cause(chunks, counters, verb, spans)
        waited = _cpu_wait(counters, spans)
        if waited and not cause.startswith("another job"):
            cause = ("waiting for a CPU: " + waited + ", so the slow calls may have been preempted rather than "
                     "slowed by the device; measure again on a quiet node, or with fewer threads than CPUs")
        elif waited:
            why_dev = (why_dev + "; " if why_dev else "") + waited
        mbs = size / p50 * 1e3 if p50 else None      # bytes/ns -> MB/s: x 1e3
        ceiling = ceilings.write_mbs if verb == "write" else ceilings.read_mbs
        tie = (f" At the median these calls move {mbs:.4g} MB/s; this node's storage measured "
               f"{ceiling:.4g} MB/s ({ceilings.source or 'history'})." if ceiling and mbs else
               " This node's storage ceiling is unknown: 'ceiling bench storage --dir DIR' measures it.")
        out.append(Finding(
            id=f"trace.io.fluctuating_{verb}s", status=WARN,
            title=f"Fluctuating {verb}s: {int(slow.sum())} of {int(m.sum())} same-size calls take "
                  f"{p99 / p50:.3g}x the median",
            evidence=words + (" " + why_dev if why_dev else ""),
            why=cause,
            fix=(f"Overlap the I/O with computation (non-blocking MPI_File_i{verb}_at, a {doer} thread), or let "
                 f"collective MPI-IO aggregate it (MPI_File_{verb}_at_all); for large sequential files O_DIRECT "
                 "with requests aligned to the file system's block (1 MiB or more) bypasses the page cache and "
                 "its write-back stalls." + tie),
            data=dict(start_s=spans[0][0] / 1e9, end_s=spans[-1][1] / 1e9,
                      windows=[[a / 1e9, e / 1e9] for a, e in spans[:MAX_WINDOWS]], time_lost_s=lost,
                      calls=int(m.sum()), slow_calls=int(slow.sum()), p50_ns=float(p50), p99_ns=float(p99),
                      slow_share=float(slow_share), bytes=size, cause=cause.split(":")[0])))
    return out


def _device_cause(chunks: Sequence[Events], counters: Optional[Counters], verb: str,
                  spans: Sequence[Tuple[int, int]]) -> Tuple[str, str]:
    """Why slow calls: the program's own write-back, another job on the device, or unknown."""
    tracks = _node_tracks(counters, verb)
    if not tracks:
        return ("unknown: no node-wide disk throughput was sampled to tell the page cache's write-back from "
                "another job on a shared device"), ""
    own = sum(float(ev.nbytes[(ev.kind == (IO_WRITE if verb == "write" else IO_READ)) & (ev.nbytes > 0)
                                & ~off_storage(ev)].sum())
              for ev in chunks)
    parts, other = [], False
    for t in tracks:
        if len(t.ts) < 2:
            continue
        dt = np.diff(t.ts).astype(np.float64) / 1e9
        device = float((t.value[1:].astype(np.float64) * dt).sum())
        inside, outside = _mean_in(t, spans)
        parts.append(f"{t.device or t.name}: {device / 1e6:.4g} MB over the trace (the program's {verb}s "
                     f"{own / 1e6:.4g} MB)" + (f", {inside / 1e6:.4g} MB/s during the slow calls" if inside is not
                                                None else "")
                     + (f" against {outside / 1e6:.4g} MB/s otherwise" if outside is not None else ""))
        other = other or device > OWN_TRAFFIC * own
    words = "node-wide device throughput: " + "; ".join(parts)
    if other:
        return ("another job: the node's device moved more than this program did, so something else shared it "
                "while these calls were slow"), words
    return ("the page cache's write-back: the device moved no more than the program's own data, so the slow calls "
            "waited for its own earlier writes to reach the device"), words


def serialized(b: Bins, exclude: np.ndarray) -> List[Finding]:
    """Phases in which no lane computes: all in I/O or waiting. A lane's I/O is counted in threads (its share of
    the lane's thread time times its threads): one thread of three writing is a lane busy with I/O when the
    other two wait off a CPU (an MPI library's helper threads asleep in poll)."""
    if not b.lanes:
        return []
    job = _job(b)
    nth = np.maximum(np.asarray(b.threads, np.float64), 1.0)[job][:, None]
    io = (b.of("io") + b.of("meta"))[job] * nth
    flag = (b.compute[job].max(axis=0) <= IDLE) & (io.max(axis=0) >= BUSY) & ~exclude
    runs = _runs(flag)
    dur_s = sum(hi - lo for lo, hi in runs) * b.width_ns / 1e9
    if not runs or dur_s < MIN_SHARE * _run_s(b):
        return []
    share = dur_s / _run_s(b)
    lost = dur_s * len(job)
    w = _win(b, runs)
    return [Finding(
        id="trace.io.serialized", status=WARN,
        title=f"Serialized I/O: no rank computes for {share:.0%} of the run ({_t(dur_s)})",
        evidence=f"{len(runs)} phase(s) in which every one of the {len(job)} lanes is in I/O or waiting, "
                 f"{_t(dur_s)} in all, first {w[0][0]:.3g}-{w[0][1]:.3g} s",
        why="While every rank does I/O or waits for it, the program makes no progress: the run is as long as "
            "its computation plus this.",
        fix="Overlap I/O with computation: non-blocking MPI_File_iwrite_at_all or a writer thread per node, "
            "writing step N while step N+1 computes; or write less often.",
        data=_data(b, runs, lost, share=share))]


def storms(chunks: Sequence[Events], b: Bins, ceilings: StorageCeilings,
           explained: Optional[np.ndarray] = None) -> List[Finding]:
    """Metadata and small-I/O storms over time; ``explained`` (a bool per bin): a storm's bins set true."""
    out = []
    nl = max(1, len(b.lanes))
    width_s = b.width_ns / 1e9
    if width_s <= 0:
        return []
    for what, mask_of, time_share in (
            ("metadata", lambda ev: ev.kind == IO_META, b.of("meta").mean(axis=0)),
            ("small I/O", lambda ev: ((ev.kind == IO_READ) | (ev.kind == IO_WRITE)) & (ev.nbytes >= 0)
             & (ev.nbytes < SMALL_IO) & ~off_storage(ev), None)):
        counts = histogram(chunks, b.edges_ns, mask_of)
        if time_share is None:
            time_share = _small_time(chunks, b) / nl
        rate = counts / width_s
        # a stretch of bins in which these calls take STORM_SHARE of the time, at STORM_RATE over the stretch
        # (a bin inside one long call starts none: per bin, it would split the storm, and its bins, with no
        # one computing, would be said again as a serialized phase)
        runs = [(lo, hi) for lo, hi in _runs(time_share >= STORM_SHARE)
                if counts[lo:hi].sum() >= STORM_RATE * (hi - lo) * width_s]
        flag = np.zeros(b.nbins, bool)
        for lo, hi in runs:
            flag[lo:hi] = True
        dur_s = sum(hi - lo for lo, hi in runs) * width_s
        if not runs or dur_s < MIN_SHARE * _run_s(b):
            continue
        calls = int(sum(counts[lo:hi].sum() for lo, hi in runs))
        if explained is not None:
            explained |= flag
        peak = float(rate[flag].max())
        lost = float(sum(time_share[lo:hi].sum() for lo, hi in runs) * width_s * nl)
        against = ""
        if what == "metadata" and ceilings.meta_ops:
            against = (f"; this node's storage measured {ceilings.meta_ops:.4g} metadata operations/s "
                       f"({ceilings.source or 'history'}): the storm reaches {peak / ceilings.meta_ops:.0%} of it")
        elif what == "metadata":
            against = "; this node's metadata rate is unknown"
        w = _win(b, runs)
        ident = "metadata_storm" if what == "metadata" else "small_io_storm"
        out.append(Finding(
            id=f"trace.io.{ident}", status=WARN,
            title=f"A {what} storm: {calls} calls in {_t(dur_s)}, up to {peak:.4g} calls/s",
            evidence=f"{len(runs)} window(s), first {w[0][0]:.3g}-{w[0][1]:.3g} s, in which {what} calls take "
                     f"{STORM_SHARE:.0%} or more of the ranks' time{against}",
            why=("Each open, stat or close is a round trip to the file system's metadata server, shared by every "
                 "job: a storm is slow for this program and for the others." if what == "metadata" else
                 "Each small request costs a system call and, on a parallel file system, a round trip."),
            fix=("Open each file once and keep it open; fewer, larger files (one per rank per checkpoint, or one "
                 "shared file with MPI-IO); stat once, not per step." if what == "metadata" else
                 "Buffer into requests of 1 MiB or more (setvbuf, an aggregation layer, collective MPI-IO)."),
            data=_data(b, runs, lost, calls=calls, peak_rate=peak)))
    return out


def _small_time(chunks: Sequence[Events], b: Bins) -> np.ndarray:
    """Per bin: small reads' and writes' time over every lane, as a share of one lane's bin."""
    small = [ev.select(((ev.kind == IO_READ) | (ev.kind == IO_WRITE)) & (ev.nbytes >= 0) & (ev.nbytes < SMALL_IO)
                       & ~off_storage(ev)) for ev in chunks]
    sb = timeline_bins(small, b.nbins, (int(b.edges_ns[0]), int(b.edges_ns[-1])))
    if not sb.lanes:
        return np.zeros(b.nbins)
    per = sb.of("io") * np.array(sb.threads)[:, None]      # back to thread time, then per lane of b
    return per.sum(axis=0)


def trace_findings(chunks: Iterable[Events], counters: Optional[Counters] = None,
                   ceilings: Optional[StorageCeilings] = None, split=None) -> List[Finding]:
    """Every anti-pattern the trace shows, each with its window and time lost; [] on a clean run.
    ``split``: Bins -> Bins, the time outside calls split into computing and waiting off a CPU
    (trace_bins.split_off_cpu with the sampler's series): without it, all of it is computing."""
    chunks = again(chunks)
    ceilings = ceilings or StorageCeilings()
    b = timeline_bins(chunks, ANALYSIS_BINS)
    if split is not None:
        b = split(b)
    if not b.lanes:
        return []
    single = single_mover(chunks, b)
    # the bins another finding explains are not said again as a serialized phase: a single writer's
    # windows, the slow calls of fluctuating I/O (a single process stalled in one is, for its bins, in
    # I/O with no one computing), a storm's bins (an open/close loop computes nothing either)
    covered = np.zeros(b.nbins, bool)
    for f in single:
        for lo_s, hi_s in f.data["windows"]:
            covered |= (b.edges_ns[:-1] >= lo_s * 1e9 - 1) & (b.edges_ns[1:] <= hi_s * 1e9 + 1)
    fluct = fluctuating(chunks, counters, ceilings, float(b.edges_ns[-1]), (b.edges_ns, covered))
    storm = storms(chunks, b, ceilings, covered)
    return single + fluct + serialized(b, covered) + storm
