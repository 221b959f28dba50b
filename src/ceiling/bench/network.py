"""Network ceilings over MPI: ping-pong latency and bandwidth, streaming
bandwidth and message rate by placement, and collectives over rank counts.

Run under a launcher, ``mpirun -n N ceiling bench network`` (N >= 2) or
``srun -n N ceiling bench network``. Every rank calls ``bench_network``;
only world rank 0 returns the results (the others return an empty Outcome
and should print nothing). The timing loops are C (csrc/mpi/netbench.c),
compiled against the MPI library mpi4py loaded (cluster/build.py), so the
times are the library's and the fabric's, not Python's. Longer than 500 lines:
a tenth of it is this description of the method, kept with the code it describes.

Placements. Each rank reports its node (``CEILING_NODE_NAME`` when set, so
ranks on one machine can stand in for several nodes; else the host name),
the CPUs it may use and its node's topology. Rank 0 then picks, among what
this allocation offers, two ranks and one CPU for each of them per
placement: "same_l3" (two cores under one L3 instance), "same_socket" (one
socket, different L3 instances, or L3 unknown), "cross_socket" and
"cross_node". Never two SMT siblings of one core. Each of the two ranks
pins itself to its CPU (sched_setaffinity) for the measurement and restores
its mask after; a placement that cannot be had is reported as skipped, with
the reason (one socket, one node, one rank per node ...). The facts are
gathered by cluster/gather.py, the plan made by cluster/placement.py.

Ping-pong follows IMB-MPI1 PingPong: sizes 0, 1, 2, 4 ... 4 MiB (``--size``
sets the largest); repetitions per timed block min(1000, max(1, 40 MiB /
size)), 1000 at 0 B (IMB_settings.h: MSGSPERSAMPLE, OVERALL_VOL); warm-up
of a tenth of that, at least min(10, reps) round trips (IMB_warm_up.c);
one-way time = round trip / 2 in µs; MB/s = bytes / one-way time with
MB = 10^6 bytes (IMB_output.c). Each size is measured in several timed
blocks (5, quick 3, ``--reps`` sets it) so that best, median and spread
exist. Streaming bandwidth follows osu_bw / osu_bibw (window of 64
non-blocking messages, 4-byte acknowledgement, MB = 10^6) with OSU's loop
counts (100 windows up to 8 KiB, 20 above) capped so that one block moves
at most 64 MiB per direction (at least one window); message rate is osu_bw's
messages per second at 8 B (osu_mbw_mr with one pair).

Summary per placement (ping-pong): latency = the mean of the one-way times
of the sizes 0, 1, 2, 4 and 8 B, per block, value = the best block;
bandwidth plateau = the size with the highest median MB/s, value = its best
block; n½ = the smallest size whose median reaches half of the plateau's
median; a drop of the largest size's median more than 10% below the
plateau is flagged (a protocol switch, or the message leaving the caches).
The same plateau rule holds for the streaming figures. For a cross-node
pair the plateau is set against the link's peak: the InfiniBand port rate
(/sys/class/infiniband/*/ports/*/rate, data rate after line encoding) or
the Ethernet speed (/sys/class/net/*/speed) of the one interface that can
carry it, else unknown with the reason (machine/network.py). The plateau,
n½, drop and latency rules are results/curves.py's.

Collectives (Barrier, Bcast from rank 0, Allreduce of doubles with
MPI_SUM, Alltoall with the size per pair of ranks) follow IMB: each call
timed alone and followed by a barrier (Barrier itself: back to back, the
loop timed whole), sizes 8 B ... 1 MiB, repetitions as for ping-pong; per
rank the mean time per call, then t_min / t_max / t_avg over ranks; the
headline is t_avg, best block. They run over k = 2, 4, 8 ... and all ranks,
the ranks taken one per node in turn (so k ranks span min(k, nodes)
nodes), each pinned to its own core where the node has enough.

Every message is checked: a pattern per size, block and sender, verified on
receipt for the first (untimed) and last (timed) exchange of every block;
Allreduce's sums and Alltoall's blocks likewise. A failed check makes the
metric invalid (exit 9).
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..cluster import watchdog
from ..cluster.build import build_per_node
from ..cluster.comm import world
from ..cluster.gather import rank_facts, topologies
from ..cluster.installations import mpi_facts
from ..cluster.launch import launcher_in_use
from ..cluster.netbench import NB_F_CORRUPT, NB_F_STALE
from ..cluster.placement import Pinned, Placement, coll_order, coll_pinning, plan_placements
from ..cluster.stop import DeferredStop, everywhere
from ..errors import BadValueError, UsageError
from ..machine.network import link_peak
from ..results.curves import Curve, large_drop, latency_values, n_half, plateau
from ..results.measure import Context, Interrupted, NullProgress, Options, Outcome
from ..results.model import HIGHER, LOWER, OK, WARN, SKIPPED, Finding, Metric, Peak, Series
from ..results.placements import PLACEMENT_TITLES
from ..sysfs import format_cpulist
from .base import judge

US, MBS, MSGS = "µs", "MB/s", "msg/s"
KIB, MIB = 1 << 10, 1 << 20


# IMB-MPI1 (IMB_settings.h, IMB_warm_up.c)
MSGSPERSAMPLE = 1000
OVERALL_VOL = 40 * MIB
WARMUP_PERCENT = 10
MIN_WARMUP_ITERS = 10
# OSU (osu_pt2pt.h)
WINDOW = 64
LARGE_MESSAGE_SIZE = 8192
BW_LOOP_SMALL, BW_SKIP_SMALL = 100, 10
BW_LOOP_LARGE, BW_SKIP_LARGE = 20, 2
STREAM_VOL = 64 * MIB         # ceiling's cap on bytes per timed block and direction
MSGRATE_SIZE = 8

DEFAULT_MAX_BYTES = 4 * MIB
MAX_BYTES = 1 << 30
BLOCKS, QUICK_BLOCKS = 5, 3
COLL_SIZES = (8, 64, 512, 4 * KIB, 32 * KIB, 256 * KIB, 1 * MIB)
QUICK_COLL_SIZES = (8, 4 * KIB, 1 * MIB)
COLL_OPS = ("bcast", "allreduce", "alltoall")
OVERSUBSCRIBED_ITERS = 10     # per block, when ranks outnumber a node's CPUs
CONTEXT_RANKS_MAX = 64        # ranks whose CPUs are listed in each metric's context

CORRUPT_FOR_TESTS = False     # tests set this to spoil one byte of each verified exchange
STALE_FOR_TESTS = False       # ... or to send ping-pong's block 0 without its stamp


# -- sizes and repetitions -------------------------------------------------------

def pingpong_sizes(max_bytes: int, quick: bool) -> List[int]:
    """0 and powers of two up to max_bytes (quick: powers of four), max_bytes always included."""
    step = 4 if quick else 2
    out, s = [0], 1
    while s <= max_bytes:
        out.append(s)
        s *= step
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def stream_sizes(max_bytes: int, quick: bool) -> List[int]:
    """Powers of two from 1 B (quick: powers of eight), max_bytes always included."""
    out = [s for s in pingpong_sizes(max_bytes, False)[1:] if not quick or (s & (s - 1) == 0 and
                                                                             (s.bit_length() - 1) % 3 == 0)]
    if not out or out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def coll_sizes(max_bytes: int, quick: bool) -> List[int]:
    sizes = QUICK_COLL_SIZES if quick else COLL_SIZES
    return sorted({min(s, max(8, max_bytes // 8 * 8)) for s in sizes})


def imb_reps(size: int) -> int:
    """IMB's repetitions: MSGSPERSAMPLE at 0 B, else min(MSGSPERSAMPLE, max(1, OVERALL_VOL / size))."""
    return MSGSPERSAMPLE if size <= 0 else max(1, min(MSGSPERSAMPLE, OVERALL_VOL // size))


def imb_warmup(reps: int) -> int:
    """IMB's warm-up: a tenth of the repetitions, at least min(10, reps)."""
    w = reps // WARMUP_PERCENT
    return w if w >= MIN_WARMUP_ITERS else min(MIN_WARMUP_ITERS, reps)


def osu_iters(size: int, window: int = WINDOW) -> Tuple[int, int]:
    """(timed windows, warm-up windows) of osu_bw, capped to STREAM_VOL bytes per block."""
    loop, skip = (BW_LOOP_SMALL, BW_SKIP_SMALL) if size <= LARGE_MESSAGE_SIZE else (BW_LOOP_LARGE, BW_SKIP_LARGE)
    loop = max(1, min(loop, STREAM_VOL // max(1, window * size)))
    return loop, max(1, min(skip, loop))


def rank_counts(n: int, quick: bool) -> List[int]:
    """2, 4, 8 ... below n, and n (quick: n only)."""
    if quick:
        return [n]
    out, k = [], 2
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def size_label(n: int) -> str:
    for unit, f in (("MiB", MIB), ("KiB", KIB)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return f"{n}B"


# -- the bench -------------------------------------------------------------------

def preflight(comm=None, opts: Optional[Options] = None):
    """MPI.COMM_WORLD with at least 2 ranks and, with ``opts``, a --size the bench takes; or the
    one-line error (MPIUnavailableError, UsageError, BadValueError), the same on every rank."""
    comm = comm if comm is not None else world()
    if comm.Get_size() < 2:
        raise everywhere(UsageError("ceiling bench network needs at least 2 MPI ranks: "
                                    "mpirun -n 2 ceiling bench network"))
    if opts is not None:
        try:
            max_bytes(opts)
        except BadValueError as e:
            raise everywhere(e) from None
    return comm


def max_bytes(opts: Options) -> int:
    """The largest message: --size, or the default."""
    n = opts.size_bytes
    if n is None:
        return DEFAULT_MAX_BYTES
    if n > MAX_BYTES:
        raise BadValueError(f"--size {n}: the largest message is {MAX_BYTES // MIB} MiB at most")
    return n


def _us(seconds: Sequence[float]) -> List[float]:
    return [x * 1e6 for x in seconds]


class _Run:
    """The state of one bench_network call on one rank."""

    def __init__(self, ctx: Context, comm):
        self.ctx, self.comm = ctx, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.quick = ctx.opts.quick
        self.blocks = ctx.opts.reps or (QUICK_BLOCKS if self.quick else BLOCKS)
        self.max_bytes = max_bytes(ctx.opts)
        self.flags = (NB_F_CORRUPT if CORRUPT_FOR_TESTS else 0) | (NB_F_STALE if STALE_FOR_TESTS else 0)
        self.progress = ctx.progress if self.rank == 0 else NullProgress()
        self.out = Outcome()
        self.common: Dict[str, Any] = {}
        self.stop = DeferredStop(comm)
        self.pair: Optional[Tuple[Placement, Dict[str, Curve]]] = None
        self.per: Dict[Tuple[str, int], Dict[int, Tuple[List[float], List[float], List[float], int]]] = {}
        self.invalid: Dict[Tuple[str, int, int], List[str]] = {}

    # -- setup ------------------------------------------------------------------
    def gather(self) -> None:
        ranks = rank_facts(self.comm)
        self.facts: List[Dict[str, Any]] = ranks.facts
        self.leader = ranks.leader
        self.topos: Dict[str, Dict[str, Any]] = topologies(self.comm, ranks, self.ctx.machine)
        self.nb, self.lib, self.mpicc = build_per_node(self.comm, self.leader)
        plan = None
        if self.rank == 0:
            placements, missing = plan_placements(self.facts, self.topos)
            pins, pin_notes = coll_pinning(self.facts, self.topos)
            plan = (placements, missing, pins, pin_notes, coll_order(self.facts))
        self.placements, self.missing, self.pins, self.pin_notes, self.order = self.comm.bcast(plan, root=0)
        nodes = list(dict.fromkeys(f["node"] for f in self.facts))
        self.common = {
            "ranks": self.size, "nodes": nodes,
            "ranks_per_node": {n: sum(1 for f in self.facts if f["node"] == n) for n in nodes},
            "hosts": sorted({f["host"] for f in self.facts}),
            "cpus_per_rank": {f["rank"]: format_cpulist(f["cpus"]) for f in self.facts[:CONTEXT_RANKS_MAX]},
            "mpi_library": self.lib.description, "mpi_version_string": self.lib.first_line,
            "mpi_family": f"{self.lib.family} {self.lib.family_version}",
            "mpi_device": self.lib.device or f"not named by {self.lib.family}'s version string",
            "mpi_standard": self.lib.standard, "mpi_library_path": self.lib.path,
            "mpi_thread_level": self.lib.thread_level,
            "launcher": launcher_in_use(), "mpicc": self.mpicc.path, "timing_loops": self.nb.path,
            "blocks": self.blocks, "mb": "MB = 10^6 bytes (IMB, OSU)",
        }
        if self.rank == 0:
            mpi = mpi_facts(self.lib)
            self.common["mpi_transport"] = mpi["transport"]
            finding = other_mpi_finding(mpi)
            if finding is not None:
                self.out.findings.append(finding)
        if self.lib.thread_level == "multiple":
            self.common["thread_note"] = ("MPI was initialised with MPI_THREAD_MULTIPLE (mpi4py imported before "
                                          "ceiling): some libraries lock every call, so small messages and "
                                          "collectives may be slower than IMB or OSU measure")

    # -- point to point ---------------------------------------------------------
    def measure_pair(self, p: Placement) -> Tuple[Dict[str, Curve], Optional[str]]:
        """Ping-pong and streaming over the sizes, the two ranks pinned; (curves, pinning error)."""
        a, b = p.ranks
        cpu = p.cpus[0] if self.rank == a else p.cpus[1] if self.rank == b else None
        res = {"latency": Curve(), "pingpong": Curve(), "bw": Curve(), "bibw": Curve(), "msgrate": Curve()}
        self.pair = (p, res)        # what an interrupted run still reports
        pp_sizes = pingpong_sizes(self.max_bytes, self.quick)
        st_sizes = stream_sizes(self.max_bytes, self.quick)
        with Pinned(self.comm, cpu) as pin_err, watchdog.phase(f"network, {PLACEMENT_TITLES[p.label]}"):
            if pin_err:
                return res, pin_err
            self.progress.start(f"network {PLACEMENT_TITLES[p.label]}", total=len(pp_sizes) + 2 * len(st_sizes))
            for s in pp_sizes:
                reps = imb_reps(s)
                raw = self.nb.pingpong(a, b, s, reps, imb_warmup(reps), self.blocks, self.flags)
                one_way = [t / (2 * reps) * 1e6 for t in raw.times_s]
                self._add(res["latency"], s, one_way, raw)
                if s > 0:
                    self._add(res["pingpong"], s, [s / t for t in one_way if t > 0], raw, record_invalid=False)
                self.progress.advance()
                self.stop.agree()
            for bidir in (False, True):
                key = "bibw" if bidir else "bw"
                for s in st_sizes:
                    iters, warm = osu_iters(s)
                    raw = self.nb.stream(a, b, s, WINDOW, iters, warm, self.blocks, bidir, self.flags)
                    moved = s * WINDOW * iters * (2 if bidir else 1)
                    self._add(res[key], s, [moved / t / 1e6 for t in raw.times_s if t > 0], raw)
                    if not bidir:
                        self._add(res["msgrate"], s, [WINDOW * iters / t for t in raw.times_s if t > 0], raw,
                                  record_invalid=False)
                    self.progress.advance()
                    self.stop.agree()
            self.progress.done()
        return res, None

    @staticmethod
    def _add(curve: Curve, s: int, vals: List[float], raw, record_invalid: bool = True) -> None:
        curve.sizes.append(s)
        curve.per_block[s] = vals
        if not raw.valid and record_invalid:
            curve.invalid.append(raw.msg or f"{s} B: data check failed")

    def pair_outcome(self, p: Placement, res: Dict[str, Curve]) -> Outcome:
        out = Outcome()
        label = p.label
        ctx = {**self.common, "placement": label, "placement_title": PLACEMENT_TITLES[label],
               "pair_ranks": list(p.ranks), "pair_cpus": list(p.cpus), "pair_nodes": list(p.nodes),
               "pinned": "each rank pinned to its CPU with sched_setaffinity"}
        if p.note:
            ctx["placement_note"] = p.note
        peak = None
        if label == "cross_node":
            peak = (Peak(None, MBS, f"unknown: {p.note}") if p.note else link_peak())
        lat = res["latency"]
        vals, used = latency_values(lat)
        if vals:
            m = Metric.measured(f"net.pingpong.latency.{label}", vals, US, LOWER, context={
                **ctx, "rule": f"mean of the one-way times of {', '.join(f'{s} B' for s in used)} per block; "
                               "value = best block (IMB PingPong: round trip / 2)",
                "latency_0B_us": statistics.median(lat.per_block[0]) if lat.per_block.get(0) else None,
                "reps_per_block": {s: imb_reps(s) for s in used}})
            out.metrics.append(self._note(m, lat.invalid))
        for key, name, series_title, kind in (
                ("pingpong", "net.pingpong.bandwidth", "Ping-pong bandwidth", "IMB PingPong: bytes / one-way time"),
                ("bw", "net.bw", "Streaming bandwidth", f"osu_bw: window of {WINDOW}, bytes / time"),
                ("bibw", "net.bibw", "Bidirectional bandwidth", f"osu_bibw: window of {WINDOW} each way, "
                                                                "bytes both ways / time")):
            curve = res[key]
            size, med = plateau(curve)
            if size is None:
                continue
            pk = peak
            if pk is not None and key == "bibw":
                pk = Peak(2 * pk.value, MBS, f"2 x ({pk.provenance}), both directions") if pk.known else pk
            info = {**ctx, "method": kind, "plateau_size_bytes": size, "plateau_median": med,
                    "rule": "plateau = the size with the highest median MB/s; value = its best block",
                    "n_half_bytes": n_half(curve, med),
                    "largest_size_bytes": curve.sizes[-1], "largest_size_median": curve.median(curve.sizes[-1])}
            m = Metric.measured(f"{name}.{label}", curve.per_block[size], MBS, HIGHER, peak=pk, context=info)
            drop = large_drop(curve, med)
            if drop is not None:
                m.note = (f"bandwidth at {size_label(curve.sizes[-1])} is {drop:.0%} of the plateau at "
                          f"{size_label(size)}: a protocol switch or the message leaving the caches")
                out.findings.append(Finding(
                    id=f"net.drop.{key}.{label}", status=WARN,
                    title=f"{series_title} ({PLACEMENT_TITLES[label]}) drops {1 - drop:.0%} at the largest sizes",
                    evidence=f"median {curve.median(curve.sizes[-1]):.0f} MB/s at {size_label(curve.sizes[-1])} vs "
                             f"{med:.0f} MB/s at {size_label(size)}",
                    why="Large messages switch protocol (eager to rendezvous, a copy through shared memory or "
                        "a registration cache) or stop fitting in the caches; applications sending such "
                        "messages see the lower figure.",
                    fix="Compare with the MPI's tuning for large messages (e.g. UCX_RNDV_THRESH, "
                        "MPIR_CVAR_CH4_SHM_*, single-copy CMA/XPMEM/KNEM availability)."))
            out.metrics.append(self._note(m, curve.invalid if key != "pingpong" else lat.invalid))
            xs = [s for s in curve.sizes if s > 0]
            out.series.append(Series(f"{name}.{label}", "xy", title=f"{series_title}, {PLACEMENT_TITLES[label]}",
                                     x_label="message size", x_unit="bytes", y_label="bandwidth", y_unit=MBS,
                                     x=xs, y=[curve.median(s) for s in xs],
                                     context={**info, "y_stat": f"median of {self.blocks} blocks"}))
        if lat.sizes:
            xs = [s for s in lat.sizes if s > 0]
            out.series.append(Series(f"net.pingpong.latency.{label}", "xy",
                                     title=f"Ping-pong latency, {PLACEMENT_TITLES[label]}", x_label="message size",
                                     x_unit="bytes", y_label="one-way time", y_unit=US, x=xs,
                                     y=[lat.median(s) for s in xs],
                                     context={**ctx, "y_stat": f"median of {self.blocks} blocks",
                                              "latency_0B_us": lat.median(0) if lat.per_block.get(0) else None}))
        mr = res["msgrate"]
        small = [s for s in mr.sizes if s <= MSGRATE_SIZE and mr.per_block.get(s)]
        if small:
            s = max(small)
            m = Metric.measured(f"net.msgrate.{label}", mr.per_block[s], MSGS, HIGHER, context={
                **ctx, "message_bytes": s, "method": f"osu_bw / osu_mbw_mr (one pair): window of {WINDOW} "
                                                     "messages, messages / time", "windows": osu_iters(s)[0]})
            out.metrics.append(self._note(m, res["bw"].invalid))
        return out

    @staticmethod
    def _note(m: Metric, invalid: List[str]) -> Metric:
        return judge(m, not invalid, "data check failed: " + "; ".join(invalid[:3]))

    # -- collectives -------------------------------------------------------------
    def measure_collectives(self) -> Optional[Finding]:
        """Fill self.per and self.invalid; a finding when the ranks could not be pinned."""
        ks = rank_counts(self.size, self.quick)
        sizes = coll_sizes(self.max_bytes, self.quick)
        cap = OVERSUBSCRIBED_ITERS if self.pin_notes else None
        per, invalid = self.per, self.invalid
        with Pinned(self.comm, self.pins.get(self.rank)) as pin_err, watchdog.phase("network collectives"):
            if pin_err:
                return Finding(id="net.collectives", status=SKIPPED,
                               title="collectives: ranks could not be pinned", evidence=pin_err)
            self.progress.start("network collectives", total=len(ks) * (1 + len(COLL_OPS) * len(sizes)))
            for k in ks:
                members = self.order[:k]
                color = 0 if self.rank in members else -1
                key = members.index(self.rank) if self.rank in members else self.rank
                for op in ("barrier",) + COLL_OPS:
                    for s in ([0] if op == "barrier" else sizes):
                        iters = imb_reps(s)
                        if cap:
                            iters = min(iters, cap)
                        raw = self.nb.coll(op, color, key, s, iters, imb_warmup(iters), self.blocks, self.flags)
                        per.setdefault((op, k), {})[s] = (_us(raw.tmin_s), _us(raw.tmax_s), _us(raw.tavg_s), iters)
                        if not raw.valid:
                            invalid[(op, k, s)] = [raw.msg or f"{op} {s} B over {k} ranks: check failed"]
                        self.progress.advance()
                        self.stop.agree()
            self.progress.done()
        return None

    def collectives_outcome(self) -> Outcome:
        """Rank 0's metrics and series of what measure_collectives measured (all or part)."""
        out = Outcome()
        per, invalid = self.per, self.invalid
        ks = rank_counts(self.size, self.quick)
        oversub = bool(self.pin_notes)
        n = self.size
        base = {**self.common, "method": "IMB: each call timed alone, a barrier after each; per rank the mean "
                                         "time per call; t_min / t_max / t_avg over ranks",
                "value_stat": "t_avg, best block", "rank_order": self.order,
                "pinning": {r: c for r, c in self.pins.items()}}
        if self.pin_notes:
            base["oversubscribed"] = self.pin_notes
            base["iters_note"] = f"ranks outnumber CPUs: at most {OVERSUBSCRIBED_ITERS} calls per block"
        for (op, k), by_size in per.items():
            members = self.order[:k]
            nodes = sorted({f["node"] for f in self.facts if f["rank"] in members})
            for s, (tmin, tmax, tavg, iters) in by_size.items():
                if k != n:
                    continue
                name = f"net.{op}" if op == "barrier" else f"net.{op}.{size_label(s)}"
                m = Metric.measured(name, tavg, US, LOWER, context={
                    **base, "operation": op, "bytes": s, "k_ranks": k, "k_nodes": len(nodes),
                    "iters_per_block": iters, "t_min_us": min(tmin), "t_max_us": max(tmax),
                    "t_min_per_block_us": tmin, "t_max_per_block_us": tmax,
                    "size_meaning": {"barrier": "none", "bcast": "bytes broadcast",
                                     "allreduce": "bytes of doubles reduced (MPI_SUM)",
                                     "alltoall": "bytes per pair of ranks"}[op]})
                if oversub:
                    m.note = "ranks outnumber CPUs: times include waiting for a CPU"
                out.metrics.append(self._note(m, invalid.get((op, k, s), [])))
            if op != "barrier":
                xs = sorted(by_size)
                out.series.append(Series(f"net.{op}.k{k}", "xy", title=f"{op.capitalize()} over {k} ranks",
                                         x_label="message size", x_unit="bytes", y_label="t_avg", y_unit=US,
                                         x=xs, y=[statistics.median(by_size[s][2]) for s in xs],
                                         context={**base, "k_ranks": k, "k_nodes": len(nodes),
                                                  "y_stat": f"median of {self.blocks} blocks of t_avg"}))
        bar = [(k, statistics.median(per[("barrier", k)][0][2])) for k in ks if ("barrier", k) in per]
        if bar:
            out.series.append(Series("net.barrier.ranks", "xy", title="Barrier by rank count",
                                     x_label="ranks", y_label="t_avg", y_unit=US, x=[k for k, _ in bar],
                                     y=[v for _, v in bar], context={**base, "y_stat": "median of blocks of t_avg"}))
        return out

    # -- all --------------------------------------------------------------------
    def so_far(self) -> Outcome:
        """Rank 0's outcome of what was measured until now (a stop, a rank that stopped answering)."""
        out = Outcome().extend(self.out)
        if self.pair is not None:
            out.extend(self.pair_outcome(*self.pair))
        return out.extend(self.collectives_outcome())

    def run(self) -> Outcome:
        try:
            with self.stop, watchdog.holding(self.so_far):
                with watchdog.phase("network set-up (the ranks' facts, the timing loops)", watchdog.SETUP_S):
                    self.gather()
                self.stop.agree()
                if self.rank == 0:
                    for label, why in self.missing.items():
                        self.out.findings.append(Finding(
                            id=f"net.placement.{label}", status=SKIPPED,
                            title=f"network {PLACEMENT_TITLES[label]}: not measured", evidence=why,
                            why="Each placement needs two ranks this allocation can put there."))
                for p in self.placements:
                    res, pin_err = self.measure_pair(p)
                    self.pair = None
                    if pin_err:
                        if self.rank == 0:
                            self.out.findings.append(Finding(
                                id=f"net.placement.{p.label}", status=SKIPPED,
                                title=f"network {PLACEMENT_TITLES[p.label]}: not measured", evidence=pin_err))
                        continue
                    if self.rank == 0:
                        self.out.extend(self.pair_outcome(p, res))
                skipped = self.measure_collectives()
        except KeyboardInterrupt as e:
            if self.rank == 0:       # every rank stopped at the same point: report what was measured
                raise Interrupted(self.so_far(), *e.args) from None
            raise
        if self.rank != 0:
            return Outcome()
        if skipped is not None:
            self.out.findings.append(skipped)
        self.out.extend(self.collectives_outcome())
        return self.out


def other_mpi_finding(mpi: Dict[str, Any]) -> Optional[Finding]:
    """The other MPI installations of this node, each with the command that measures it; None
    when none was found. A warning when the measured library is the PyPI wheel (applications are
    rarely built with it), else ok."""
    others = mpi.get("others") or []
    if not others:
        return None
    wheel = mpi.get("origin") == "the PyPI wheel"
    names = "; ".join(f"{o['family']} {o['version']} ({o['found']}, {o['mpicc']})" for o in others)
    return Finding(
        id="net.mpi.others", status=WARN if wheel else OK,
        title=f"Measured with {mpi['library']}; this node also has {others[0]['family']} {others[0]['version']}"
              + (f" and {len(others) - 1} more" if len(others) > 1 else ""),
        evidence=f"measured: {mpi['library']} ({mpi['path'] or 'file not found'}); also here: {names}",
        why="These figures are the latency and bandwidth of the library that was measured. An application "
            "built with another MPI of this node (its modules, the distribution's packages) goes through "
            "that library, its device and its transport, and can see different figures.",
        fix="; ".join(o["command"] for o in others) +
            " (builds mpi4py against that MPI once, in a cached environment, and runs its launcher)",
        data={"measured": mpi["library"], "others": others})


def bench_network(ctx: Context) -> Outcome:
    """MPI ping-pong, streaming bandwidth and message rate per placement, and collectives.

    Collective over MPI_COMM_WORLD: every rank calls it. World rank 0
    returns the metrics ("net.pingpong.latency.<placement>",
    "net.pingpong.bandwidth.<placement>", "net.bw.*", "net.bibw.*",
    "net.msgrate.*", "net.barrier", "net.allreduce.8B" ...), series and
    findings; every other rank returns an empty Outcome. Without mpi4py or an
    MPI library: MPIUnavailableError (exit 10); with one rank: UsageError.
    """
    comm = preflight()
    return _Run(ctx, comm).run()
