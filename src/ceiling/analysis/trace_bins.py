"""A trace's events pre-binned per lane: what the HTML timeline (report/html_trace.py), the
terminal page and the anti-pattern analysis (trace_patterns.py) draw and read, so that none of
them holds more than lanes x classes x bins numbers, whatever the number of events.

A lane is an MPI rank (a process outside MPI). Each bin holds the share of the lane's thread
time spent in each class (``CLASSES``); compute is the rest (1 - their sum, never below 0): a
thread outside every intercepted call is taken to compute. The classes:

- ``io``: reads, writes and syncs (IO_READ, IO_WRITE, IO_SYNC) of files (``off_storage``: not
  those on pipes, sockets, terminals and devices like /dev/zero, which count as the rest);
- ``meta``: metadata calls (IO_META: open, close, stat, ...);
- ``mpi``: point-to-point calls and the rest of MPI (MPI_P2P, MPI_OTHER);
- ``wait``: completion calls and collectives (MPI_WAIT, MPI_COLL), where a rank waits for others.
  Part 2 (wait states) will move the waiting part of a blocking receive here; until then a
  blocking receive is ``mpi``.

Outside the calls, computing or waiting (``split_off_cpu``): the /proc sampler's series of each
process (probes/proc_sampler.Sampled.series: at each sample the CPU time its threads used so far)
says how much of each interval between two samples the lane spent on a CPU. In each interval the
lane's time outside calls (from the bins: its life less its calls) less all the CPU time it used
is time it cannot have been computing: the least off-CPU time the samples allow (a shell waiting
for its child, ``sleep``, a read of a pipe the interposer does not count as I/O). That part is
``off_cpu`` (drawn as waiting), spread over the interval's bins in proportion to their time
outside calls; the rest outside calls stays compute. The split is only as fine as the sampler:
every bin inside one interval (0.1 s by default) gets the interval's share, a phase shorter than
an interval is mixed with its neighbours, and what no two samples enclose (a process's last
moments after its last sample) stays compute. Where the sampler kept each thread's series
(``Sampled.thread_series``), the split is made thread by thread: each thread's time outside its
own calls less its own CPU time, so that the CPU a writer spends inside its write does not make
its sleeping siblings compute (a thread with no series of its own stays compute); a thread on a CPU
under ``IDLE_CPU`` of its life that made no call of a class drawn (a library's helper, asleep) is
left out of its lane (``Bins.threads`` less it, the shares over the others). Per process,
CPU a lane's threads used inside calls (an MPI progress loop polling) is counted against its
time outside calls, and threads that made no intercepted call are counted too: either way
waiting is never overstated. A run stored before the split has no ``off_cpu`` and draws as before.

Method: the time a set of slices covers up to t is C(t) = sum over slices of clip(t - start, 0,
dur) = sum_{start<t}(t - start) - sum_{end<t}(t - end), computed at every bin edge with two
sorted arrays, searchsorted and cumulative sums: O(n log n) per chunk, additive over chunks, so
chunks stream through one at a time. Nested intercepted calls (an MPI-IO call and the writes it
makes) count twice; a share is clipped to 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..results.events import (IO_META, IO_READ, IO_SYNC, IO_WRITE, MPI_COLL, MPI_OTHER, MPI_P2P, MPI_WAIT,
                              Events)

CLASSES = ("io", "meta", "mpi", "wait")
NBINS = 2000            # bins a lane: finer than a screen's pixels across the report's 1,180 px
_CLASS_OF = np.full(256, -1, np.int8)
for _k, _c in ((IO_READ, 0), (IO_WRITE, 0), (IO_SYNC, 0), (IO_META, 1), (MPI_P2P, 2), (MPI_OTHER, 2),
               (MPI_WAIT, 3), (MPI_COLL, 3)):
    _CLASS_OF[_k] = _c


@dataclass
class Bins:
    """Shares of each lane's thread time per class and bin: ``share[lane, class, bin]`` in [0, 1]."""
    edges_ns: np.ndarray                    # nbins + 1 edges, ns since Events.t0_ns
    lanes: List[int]                        # the lane's rank, or -(pid + 1) outside MPI
    threads: List[int]                      # threads seen in each lane
    share: np.ndarray                       # float32 [lanes, len(CLASSES), nbins]
    labels: List[str] = field(default_factory=list)   # "rank 3", "pid 1234"
    alive: Optional[np.ndarray] = None      # float32 [lanes, nbins]: the share of the bin the lane existed
                                            # (its first event to its last); None: the whole run
    off_cpu: Optional[np.ndarray] = None    # float32 [lanes, nbins]: the share outside calls off a CPU
                                            # (split_off_cpu); None: not split (all of it compute)
    off_cpu_interval_s: Optional[float] = None   # the sampler's interval the split rests on, seconds

    @property
    def nbins(self) -> int:
        return len(self.edges_ns) - 1

    @property
    def width_ns(self) -> float:
        return float(self.edges_ns[1] - self.edges_ns[0]) if self.nbins else 0.0

    def of(self, cls: str) -> np.ndarray:
        """[lanes, bins] share of one class."""
        return self.share[:, CLASSES.index(cls), :]

    @property
    def compute(self) -> np.ndarray:
        """[lanes, bins]: the rest, the time outside every intercepted call while the lane existed
        (a process that started late or ended early computes nothing outside its life)."""
        return np.clip(self.outside - (0.0 if self.off_cpu is None else self.off_cpu), 0.0, 1.0)

    @property
    def outside(self) -> np.ndarray:
        """[lanes, bins]: the share outside every intercepted call while the lane existed."""
        alive = 1.0 if self.alive is None else self.alive
        return np.clip(alive - self.share.sum(axis=1), 0.0, 1.0)

    @property
    def waiting_off_cpu(self) -> np.ndarray:
        """[lanes, bins]: the share outside calls off a CPU (zeros when not split)."""
        return np.zeros_like(self.outside) if self.off_cpu is None else np.minimum(self.off_cpu, self.outside)


def lane_of(ev: Events) -> np.ndarray:
    """Each event's lane key: its rank, or -(pid + 1) outside MPI."""
    return np.where(ev.rank >= 0, ev.rank, -(ev.pid.astype(np.int64) + 1)).astype(np.int64)


def _covered(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """C(edge) for each edge: the time the slices cover before it (float64 ns)."""
    s = np.sort(starts).astype(np.float64)
    e = np.sort(ends).astype(np.float64)
    cs = np.concatenate(([0.0], np.cumsum(s)))
    ce = np.concatenate(([0.0], np.cumsum(e)))
    x = edges.astype(np.float64)
    i = np.searchsorted(s, x, "left")
    j = np.searchsorted(e, x, "left")
    return (i * x - cs[i]) - (j * x - ce[j])


def off_storage(ev: Events) -> np.ndarray:
    """Reads, writes and syncs of POSIX, stdio and copy calls on something the interposer keeps no
    file record of (a pipe, a socket, a terminal, /dev/zero, /dev/null: its ``file`` is -1): not
    storage I/O, as the profile counts them ("other"), so neither drawn nor analysed as I/O: the
    time inside them is the rest's (dd's reads of /dev/zero are the kernel filling its buffer). An
    MPI-IO call names its file like the others (mpi_io.c); one whose file is unknown (a handle past
    the interposer's table, a Fortran call, a path it could not resolve) is still storage: MPI-IO
    opens nothing else."""
    data = (ev.kind == IO_READ) | (ev.kind == IO_WRITE) | (ev.kind == IO_SYNC)
    if not data.any():
        return data
    unknown = data & (ev.file < 0)
    if not unknown.any():
        return unknown
    mpi = np.array([getattr(c, "module", "") == "mpi" for c in ev.calls] or [False], bool)
    return unknown & ~mpi[np.minimum(ev.call, len(mpi) - 1)]


def again(chunks: Iterable[Events]) -> Iterable[Events]:
    """``chunks`` as something to go through more than once: itself where it can be (a list, or
    probes/interpose_events.EventSource, which reads its files again at each pass and so keeps one
    thread's events in memory at a time), else its chunks in a list."""
    return list(chunks) if iter(chunks) is chunks else chunks


def span_ns(chunks: Iterable[Events]) -> int:
    """The end of the last event over every chunk (0 when none)."""
    return max((c.end_ns for c in chunks), default=0)


def timeline_bins(chunks: Iterable[Events], nbins: int = NBINS, span: Optional[Tuple[int, int]] = None) -> Bins:
    """The chunks binned: ``nbins`` equal bins over ``span`` (start, end ns; by default 0 to the
    last event's end, which needs the chunks twice: pass ``span`` to stream a generator once)."""
    if span is None:
        chunks = again(chunks)
        span = (0, span_ns(chunks))
    t0, t1 = int(span[0]), int(span[1])
    if t1 <= t0:
        t1 = t0 + 1
    edges = np.linspace(t0, t1, nbins + 1).astype(np.int64)
    cov: Dict[Tuple[int, int], np.ndarray] = {}
    life: Dict[int, List[int]] = {}
    threads: Dict[int, Set[int]] = {}
    labels: Dict[int, str] = {}
    for ev in chunks:
        if not len(ev):
            continue
        lane = lane_of(ev)
        ends = ev.ts + np.maximum(ev.dur, 0)
        for key in np.unique(lane):
            k = int(key)
            m = lane == key
            threads.setdefault(k, set()).update(np.unique(ev.tid[m]).tolist())
            labels.setdefault(k, f"rank {k}" if k >= 0 else f"pid {_shown_pid(ev, -k - 1)}")
            lo, hi = int(ev.ts[m].min()), int(ends[m].max())
            span = life.setdefault(k, [lo, hi])
            span[0], span[1] = min(span[0], lo), max(span[1], hi)
        cls = _CLASS_OF[ev.kind]
        keep = (cls >= 0) & (ev.dur > 0) & ~off_storage(ev)
        if not keep.any():
            continue
        lane, cls = lane[keep], cls[keep].astype(np.int64)
        ts, dur = ev.ts[keep], ev.dur[keep]
        group = lane * len(CLASSES) + cls
        order = np.argsort(group, kind="stable")
        group, ts, dur = group[order], ts[order], dur[order]
        cuts = np.flatnonzero(np.diff(group)) + 1
        for lo, hi in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(group)]))):
            g = int(group[lo])
            k, c = divmod(g, len(CLASSES))     # floor division: right for negative lane keys too
            s = ts[lo:hi]
            acc = _covered(s, s + dur[lo:hi], edges)
            cov[(k, c)] = cov[(k, c)] + acc if (k, c) in cov else acc
    keys = sorted(threads, key=lambda k: (k < 0, abs(k)))
    share = np.zeros((len(keys), len(CLASSES), nbins), np.float32)
    width = np.diff(edges).astype(np.float64)
    alive = np.zeros((len(keys), nbins), np.float32)
    for li, k in enumerate(keys):
        lo, hi = life[k]
        alive[li] = np.clip((np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo)) / np.maximum(width, 1), 0, 1)
    for li, k in enumerate(keys):
        nth = max(1, len(threads[k]))
        for c in range(len(CLASSES)):
            if (k, c) in cov:
                share[li, c] = np.clip(np.diff(cov[(k, c)]) / (width * nth), 0.0, 1.0)
    return Bins(edges, keys, [len(threads[k]) for k in keys], share, [labels[k] for k in keys], alive)


def _shown_pid(ev: Events, pid: int) -> int:
    """The pid to print: a stand-in id (two nodes' processes with one pid) is not one."""
    p = ev.processes.get(pid)
    return p.shown_pid if p is not None else pid


def lane_pids(chunks: Iterable[Events]) -> Dict[int, int]:
    """pid -> its lane key, from the events."""
    out: Dict[int, int] = {}
    for ev in chunks:
        if len(ev):
            lanes = lane_of(ev)
            for pid in np.unique(ev.pid):
                out[int(pid)] = int(lanes[ev.pid == pid][-1])
    return out


def split_off_cpu(b: Bins, series: Dict[int, Sequence[Tuple[float, float, int]]], pid_lane: Dict[int, int],
                  t0_ns: int, interval_s: Optional[float] = None,
                  threads: Optional[Dict[Tuple[int, int], Sequence[Tuple[float, float]]]] = None,
                  chunks: Optional[Sequence[Events]] = None) -> Bins:
    """``b`` with ``off_cpu`` from the sampler's per-process ``series`` (monotonic s, CPU s so far,
    threads): see the module docstring. ``t0_ns``: the events' origin on CLOCK_MONOTONIC (the
    sampler's clock). A lane no series covers is not split (its time outside calls stays compute).
    With the per-thread series (``threads``: (pid, tid) -> (monotonic s, CPU s so far)) and the
    ``chunks`` the bins came from, each thread's time outside its own calls is set against its own
    CPU time (``_thread_off``), so that a helper thread asleep while the main thread writes is
    waiting, not computing on the writer's CPU time; a lane none of whose threads has a series is
    split per process as above."""
    edges = b.edges_ns.astype(np.float64)
    width = np.diff(edges)
    index = {k: i for i, k in enumerate(b.lanes)}
    nth = np.maximum(np.asarray(b.threads, np.float64), 1.0)
    rest = b.outside.astype(np.float64) * width[None, :] * nth[:, None]       # thread-ns outside calls a bin
    density = rest / np.maximum(width, 1.0)[None, :]
    off = np.zeros_like(rest)
    idle: Dict[int, int] = {}
    done = _thread_off(off, edges, threads, chunks, pid_lane, index, t0_ns, idle) if threads and chunks else set()
    for pid, pts in series.items():
        li = index.get(pid_lane.get(int(pid), None))
        if li is None or len(pts) < 2 or li in done:
            continue
        arr = np.asarray([(t, c) for t, c, _ in pts], np.float64)
        t = arr[:, 0] * 1e9 - t0_ns
        cpu = np.maximum(np.diff(arr[:, 1]), 0.0) * 1e9
        # each interval's time outside calls, from the bins (exact: the density is constant in a bin)
        cum = np.concatenate(([0.0], np.cumsum(rest[li])))
        outside = np.diff(np.interp(t, edges, cum))
        factor = np.where(outside > 0, np.maximum(outside - cpu, 0.0) / np.where(outside > 0, outside, 1.0), 0.0)
        # spread over the bins: every piece between a bin edge and a sample time has one density and one factor
        cuts = np.unique(np.concatenate((edges, np.clip(t, edges[0], edges[-1]))))
        mid, length = 0.5 * (cuts[:-1] + cuts[1:]), np.diff(cuts)
        k = np.clip(np.searchsorted(edges, mid, "right") - 1, 0, len(width) - 1)
        j = np.searchsorted(t, mid, "right") - 1
        ok = (j >= 0) & (j < len(factor))
        off[li] += np.bincount(k[ok], weights=factor[j[ok]] * density[li, k[ok]] * length[ok], minlength=len(width))
    if not idle:
        share = np.minimum(off / (np.maximum(width, 1.0)[None, :] * nth[:, None]), b.outside).astype(np.float32)
        return Bins(b.edges_ns, b.lanes, b.threads, b.share, b.labels, b.alive, share, interval_s)
    # a lane's idle helper threads (asleep all their life, no call of a class drawn) are left out of its thread
    # time: counted, a rank whose main thread computes beside one would be drawn half waiting
    kept = np.array([max(1, int(n) - idle.get(i, 0)) for i, n in enumerate(b.threads)], np.float64)
    classes = np.minimum(b.share * (nth / kept)[:, None, None], 1.0).astype(np.float32)
    out = Bins(b.edges_ns, b.lanes, [int(n) for n in kept], classes, b.labels, b.alive, None, interval_s)
    share = np.minimum(off / (np.maximum(width, 1.0)[None, :] * kept[:, None]), out.outside).astype(np.float32)
    return Bins(b.edges_ns, b.lanes, out.threads, classes, b.labels, b.alive, share, interval_s)


IDLE_CPU = 0.01      # a thread on a CPU under this share of its life, with no call drawn: an idle helper


def _thread_off(off: np.ndarray, edges: np.ndarray, threads: Dict[Tuple[int, int], Sequence[Tuple[float, float]]],
                chunks: Sequence[Events], pid_lane: Dict[int, int], index: Dict[int, int], t0_ns: int,
                idle: Optional[Dict[int, int]] = None) -> Set[int]:
    """Adds to ``off`` (thread-ns per lane and bin) each thread's time off a CPU outside its calls: in
    each interval between two of its samples, its time outside its own calls (the calls the bins
    count, from its events: covered up to each bin edge and sample time, streamed chunk by chunk)
    less its own CPU time, never below 0, spread over the interval's pieces in proportion to the
    time outside calls in each. Only threads that made calls (the bins' threads) and have two
    samples; the lanes split so are returned. A thread with no call of a class the bins draw (only pipe
    reads, polls) and on a CPU under ``IDLE_CPU`` of its life is an idle helper (an MPI library's or a
    runtime's thread asleep): not added, counted in ``idle`` per lane."""
    keyed: Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for (pid, tid), pts in threads.items():
        lane = pid_lane.get(int(pid))
        if lane is None or lane not in index or len(pts) < 2:
            continue
        arr = np.asarray([(t, c) for t, c in pts], np.float64)
        t = arr[:, 0] * 1e9 - t0_ns
        cuts = np.unique(np.concatenate((edges, np.clip(t, edges[0], edges[-1]))))
        keyed[(int(pid), int(tid))] = (t, np.maximum(np.diff(arr[:, 1]), 0.0) * 1e9, cuts)
    if not keyed:
        return set()
    covered: Dict[Tuple[int, int], np.ndarray] = {}
    life: Dict[Tuple[int, int], List[float]] = {}
    for ev in chunks:
        if not len(ev):
            continue
        keep = (_CLASS_OF[ev.kind] >= 0) & (ev.dur > 0) & ~off_storage(ev)
        ends = ev.ts + np.maximum(ev.dur, 0)
        both = np.unique((ev.pid.astype(np.int64) << 32) | (ev.tid.astype(np.int64) & 0xFFFFFFFF))
        for pid, tid in {(int(x >> 32), int(x & 0xFFFFFFFF)) for x in both} & set(keyed):
            m = (ev.pid == pid) & (ev.tid == tid)
            span = life.setdefault((pid, tid), [float(ev.ts[m].min()), float(ends[m].max())])
            span[0], span[1] = min(span[0], float(ev.ts[m].min())), max(span[1], float(ends[m].max()))
            m &= keep
            if m.any():
                acc = _covered(ev.ts[m], ends[m], keyed[(pid, tid)][2])
                covered[(pid, tid)] = covered[(pid, tid)] + acc if (pid, tid) in covered else acc
    done: Set[int] = set()
    nb = len(edges) - 1
    for key, (t, cpu, cuts) in keyed.items():
        if key not in life:
            continue                                   # no event in the bins: not one of the lane's threads
        li = index[pid_lane[key[0]]]
        done.add(li)
        lo, hi = life[key]
        if key not in covered and idle is not None and float(np.sum(cpu)) <= IDLE_CPU * max(hi - lo, 1.0):
            idle[li] = idle.get(li, 0) + 1
            continue
        cov = covered.get(key, np.zeros(len(cuts)))
        alive = np.clip(np.minimum(cuts[1:], hi) - np.maximum(cuts[:-1], lo), 0.0, None)
        outside = np.clip(alive - np.diff(cov), 0.0, None)            # per piece between two cuts
        mid = 0.5 * (cuts[:-1] + cuts[1:])
        j = np.searchsorted(t, mid, "right") - 1                      # the sample interval of each piece
        ok = (j >= 0) & (j < len(cpu))
        per = np.bincount(j[ok], weights=outside[ok], minlength=len(cpu))
        factor = np.where(per > 0, np.maximum(per - cpu, 0.0) / np.where(per > 0, per, 1.0), 0.0)
        k = np.clip(np.searchsorted(edges, mid, "right") - 1, 0, nb - 1)
        off[li] += np.bincount(k[ok], weights=factor[j[ok]] * outside[ok], minlength=nb)
    return done


def histogram(chunks: Sequence[Events], edges: np.ndarray, mask_of) -> np.ndarray:
    """Per bin over every lane: the number of events ``mask_of(ev)`` selects, by start time."""
    out = np.zeros(len(edges) - 1, np.int64)
    for ev in chunks:
        m = mask_of(ev)
        if m.any():
            out += np.histogram(ev.ts[m], bins=edges)[0]
    return out


DOC_BINS = 600          # bins a lane in the run's document: the timeline's drawn columns (report/html_trace.py)


def bins_doc(b: Bins) -> Dict[str, object]:
    """The bins as the run keeps them (a finding's data, so that the stored run draws its timeline
    again): each share in 1/255ths, lane by lane, base64; the edges as start, end and count."""
    import base64
    q = np.rint(np.clip(b.share, 0.0, 1.0) * 255).astype(np.uint8)
    out = {"start_ns": int(b.edges_ns[0]), "end_ns": int(b.edges_ns[-1]), "nbins": b.nbins, "lanes": list(b.lanes),
           "threads": list(b.threads), "labels": list(b.labels), "classes": list(CLASSES),
           "share": base64.b64encode(q.tobytes()).decode("ascii")}
    if b.alive is not None:
        a = np.rint(np.clip(b.alive, 0.0, 1.0) * 255).astype(np.uint8)
        out["alive"] = base64.b64encode(a.tobytes()).decode("ascii")
    if b.off_cpu is not None:
        o = np.rint(np.clip(b.off_cpu, 0.0, 1.0) * 255).astype(np.uint8)
        out["off_cpu"] = base64.b64encode(o.tobytes()).decode("ascii")
        out["off_cpu_interval_s"] = b.off_cpu_interval_s
    return out


def bins_from_doc(d: Dict[str, object]) -> Bins:
    """``bins_doc``'s inverse (shares to 1/255). ValueError when it does not hold together."""
    import base64
    lanes, nbins = [int(x) for x in d["lanes"]], int(d["nbins"])
    if list(d.get("classes", CLASSES)) != list(CLASSES) or nbins < 1:
        raise ValueError("timeline bins of another layout")
    raw = np.frombuffer(base64.b64decode(str(d["share"]), validate=True), np.uint8)
    if raw.size != len(lanes) * len(CLASSES) * nbins:
        raise ValueError(f"timeline bins: {raw.size} shares for {len(lanes)} lanes x {nbins} bins")
    share = (raw.astype(np.float32) / 255.0).reshape(len(lanes), len(CLASSES), nbins)
    alive = None
    if d.get("alive") is not None:
        a = np.frombuffer(base64.b64decode(str(d["alive"]), validate=True), np.uint8)
        if a.size != len(lanes) * nbins:
            raise ValueError(f"timeline bins: {a.size} lifetimes for {len(lanes)} lanes x {nbins} bins")
        alive = (a.astype(np.float32) / 255.0).reshape(len(lanes), nbins)
    off = None
    if d.get("off_cpu") is not None:            # runs stored before the split have none: drawn as before
        o = np.frombuffer(base64.b64decode(str(d["off_cpu"]), validate=True), np.uint8)
        if o.size != len(lanes) * nbins:
            raise ValueError(f"timeline bins: {o.size} off-CPU shares for {len(lanes)} lanes x {nbins} bins")
        off = (o.astype(np.float32) / 255.0).reshape(len(lanes), nbins)
    edges = np.linspace(int(d["start_ns"]), int(d["end_ns"]), nbins + 1).astype(np.int64)
    iv = d.get("off_cpu_interval_s")
    return Bins(edges, lanes, [int(x) for x in d["threads"]], share, [str(x) for x in d["labels"]], alive, off,
                float(iv) if isinstance(iv, (int, float)) else None)
