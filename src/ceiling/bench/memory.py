"""Memory ceilings: STREAM on arrays far larger than the caches, triad
against thread count, a working-set sweep across the cache levels, and the
NUMA bandwidth matrix.

Bytes are counted as STREAM counts them: the bytes named in the source per
iteration (copy 16, scale 16, add 24, triad 24; load 8), decimal GB/s. With
ordinary stores the hardware also reads each destination line before writing
it (write-allocate), traffic STREAM does not count; non-temporal stores
(``--nt-stores``) avoid it, which is why they report more.

Arrays are first-touched by the thread that uses them, which is pinned to its
CPU of the placement plan (csrc/kernels/bw_scalar.c). Each kernel checks its
own output against the analytic values (stream.c's rule, relative error
below 1e-13), so a number here is only ever reported with that check.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import core
from ..errors import BadValueError
from ..machine.model import Cache, Machine
from ..results.model import WARN, Finding, Peak, Series
from ..results.measure import Context, Outcome
from ..sysfs import meminfo_bytes
from ..results.curves import local_over_remote
from . import numa
from .base import rate_metric, single_numa_domain

GBS = "GB/s"
KIB, MIB = 1 << 10, 1 << 20

STREAM_KERNELS = (("copy", "stream_copy"), ("scale", "stream_scale"), ("add", "stream_add"),
                  ("triad", "stream_triad"))
STREAM_ARRAYS = 3
STREAM_REPS = 10               # stream.c's NTIMES
STREAM_QUICK_REPS = 5
STREAM_MIN_ELEMENTS = 10_000_000   # stream.c's default array size: a floor for tiny caches
LLC_FACTOR = 4                 # STREAM's rule: each array >= 4x the last-level caches
UNKNOWN_LLC_BYTES = 256 * MIB  # assumed when the caches are unknown: larger than any LLC shipped
MEM_FRACTION = 0.5             # never use more than this share of available memory
DRAM_MIN_BYTES = 64 * MIB      # the sweep's DRAM point is never smaller than this

SWEEP_START_BYTES = 16 * KIB
SWEEP_MIN_PER_THREAD = 2 * KIB     # below this, barriers and loop start-up dominate
SWEEP_POINTS_PER_OCTAVE = 4
SWEEP_QUICK_POINTS_PER_OCTAVE = 2
SWEEP_REP_S = 0.01             # one timed repetition: long against barriers and the timer
SWEEP_QUICK_REP_S = 0.003
SWEEP_REPS, SWEEP_QUICK_REPS = 5, 3
GUESS_GBS_PER_THREAD = 50.0    # first calibration guess; corrected from the first point on

THREAD_REPS, THREAD_QUICK_REPS = 5, 3
SATURATION = 0.9               # "saturates" = first thread count within 10% of the best

# Transparent huge pages (madvise) for every working set: the sweep should
# show the caches, not the 4 KiB-page TLB reach, and large-array bandwidth is
# what a tuned application gets. Results record whether the kernel got them.
FLAGS = core.F_HUGEPAGES
QUICK_ARRAY_MAX_BYTES = 1 << 30    # quick mode: at most this per STREAM array


# -- sizes ---------------------------------------------------------------------

def stream_array_elements(machine: Machine, size_bytes: Optional[int] = None,
                          mem_available: Optional[int] = None, quick: bool = False) -> Tuple[int, Dict[str, Any]]:
    """Elements per STREAM array, and how the size was chosen.

    Each array is at least 4x the node's total last-level cache (STREAM's
    rule) and at least stream.c's default of 10 M elements; ``size_bytes``
    (bytes per array) overrides both. Three arrays never take more than half
    of the available memory. Quick mode caps each array at 1 GiB (a 480 MiB
    L3 asked for 1.9 GiB arrays, 15 s of `ceiling run --quick` on a 2-vCPU VM):
    the three together still pass the cache by more than 6x, so a pass finds
    nothing of the one before in it.
    """
    if mem_available is None:
        mem_available = meminfo_bytes("MemAvailable")
    info: Dict[str, Any] = {}
    if size_bytes is not None:
        if size_bytes < 8:
            raise BadValueError(f"--size {size_bytes} bytes: below one STREAM array element (8 bytes)")
        if mem_available is not None and STREAM_ARRAYS * size_bytes > mem_available:
            raise BadValueError(f"3 arrays of {size_bytes} bytes do not fit in the {mem_available} bytes "
                                "of memory available")
        info["size_rule"] = "set by the user"
        return size_bytes // 8, info
    llc = machine.total_llc_bytes()
    if llc is None:
        llc = UNKNOWN_LLC_BYTES
        info["llc_note"] = (f"last-level cache size unknown: assumed {UNKNOWN_LLC_BYTES // MIB} MiB, "
                            "so arrays may be larger than needed")
    elems = max(LLC_FACTOR * llc // 8, STREAM_MIN_ELEMENTS)
    info["size_rule"] = (f"max({LLC_FACTOR} x last-level cache {llc} bytes, "
                         f"{STREAM_MIN_ELEMENTS} elements) per array")
    if quick and elems > QUICK_ARRAY_MAX_BYTES // 8:
        elems = QUICK_ARRAY_MAX_BYTES // 8
        info["size_note"] = (f"capped to {QUICK_ARRAY_MAX_BYTES // MIB} MiB per array in quick mode: the three "
                             f"are {STREAM_ARRAYS * QUICK_ARRAY_MAX_BYTES / llc:.1f}x the last-level cache, "
                             f"short of STREAM's 4x per array")
    if mem_available is not None:
        cap = int(MEM_FRACTION * mem_available) // (STREAM_ARRAYS * 8)
        if elems > cap:
            elems = cap
            info["size_note"] = (f"capped to fit half of the {mem_available} bytes of available memory: "
                                 "arrays may not exceed the caches by 4x")
    return int(elems), info


def preflight(ctx: Context) -> None:
    """The size checks of every STREAM step, before anything is measured (BadValueError)."""
    stream_array_elements(ctx.machine, ctx.opts.size_bytes, quick=ctx.opts.quick)


def in_cache(machine: Machine, elems: int) -> Optional[str]:
    """Why a STREAM figure at ``elems`` per array is the caches' bandwidth, not memory's:
    the three arrays fit in the last-level caches together. None when they do not, or
    when the caches are unknown."""
    llc = machine.total_llc_bytes()
    total = STREAM_ARRAYS * elems * 8
    if llc is None or total > llc:
        return None
    return (f"the 3 arrays ({total} bytes) fit in the {llc} bytes of last-level cache: this is cache "
            f"bandwidth, not memory's (STREAM's rule: each array at least {LLC_FACTOR}x the caches)")


def _below_rule(machine: Machine, elems: int) -> Optional[str]:
    llc = machine.total_llc_bytes()
    if llc is None or elems * 8 >= LLC_FACTOR * llc:
        return None
    return (f"each array ({elems * 8} bytes) is below STREAM's rule of {LLC_FACTOR}x the {llc} bytes of "
            "last-level cache: caches inflate the figure")


def _reps(ctx: Context, full: int, quick: int) -> int:
    if ctx.opts.reps:
        return ctx.opts.reps
    return quick if ctx.opts.quick else full


def _flags(ctx: Context) -> int:
    return FLAGS | (core.F_NT_STORES if ctx.opts.nt_stores else 0)


def _membw_peak(machine: Machine, key: str = "membw.node") -> Peak:
    peak = machine.peaks.get(key)
    if peak is None:
        return Peak(None, GBS, f"unknown: the machine model has no {key} peak")
    return peak


def _best_gbs(raw: core.RawResult) -> Optional[float]:
    rates = [raw.iters * raw.kernel.bytes_per_iter / t * 1e-9 for t in raw.times_s if t > 0]
    return max(rates) if rates and raw.valid else None


def _stream_context(ctx: Context, elems: int, info: Dict[str, Any], cpus: Sequence[int],
                    k: core.Kernel) -> Dict[str, Any]:
    out = {"array_elements": elems, "array_bytes": elems * 8,
           "total_bytes": STREAM_ARRAYS * elems * 8, "threads": len(cpus), "cpus": list(cpus),
           "placement": ctx.opts.placement, "nt_stores": bool(ctx.opts.nt_stores), "isa": k.isa,
           "byte_counting": "STREAM: bytes named in the source; write-allocate reads not counted"}
    out.update(info)
    return out


# -- STREAM --------------------------------------------------------------------

def bench_stream(ctx: Context) -> Outcome:
    """STREAM copy, scale, add and triad on every CPU of the plan: "stream.copy" .. "stream.triad"."""
    elems, info = stream_array_elements(ctx.machine, ctx.opts.size_bytes, quick=ctx.opts.quick)
    reps = _reps(ctx, STREAM_REPS, STREAM_QUICK_REPS)
    peak = _membw_peak(ctx.machine)
    out = Outcome()
    # A working set inside the caches is recorded under its own names (stream.triad.incache):
    # the history and the report never mix it with memory bandwidth.
    cached = in_cache(ctx.machine, elems)
    suffix = ""
    if cached:
        suffix, peak = ".incache", Peak(None, GBS, f"none: {cached}")
        out.findings.append(Finding(
            id="bench.stream.incache", status=WARN, title="STREAM: the working set fits in the caches",
            evidence=f"--size {elems * 8} bytes per array: {cached}",
            why="A figure measured inside the caches says nothing about memory bandwidth.",
            fix=f"Leave --size out (ceiling sizes the arrays at {LLC_FACTOR}x the caches), or give at least "
                f"{LLC_FACTOR}x the last-level cache per array; the figures are kept as stream.*.incache."))
    else:
        below = _below_rule(ctx.machine, elems) if info.get("size_rule") == "set by the user" else None
        if below:
            info = {**info, "size_note": below}
    ctx.progress.start("STREAM", total=len(STREAM_KERNELS))
    for short, kname in STREAM_KERNELS:
        k = core.find(kname, ctx.opts.isa)
        raw = core.run(k, elements=elems, iters=1, reps=reps, warmup=1, nthreads=ctx.nthreads,
                       cpus=ctx.cpus, flags=_flags(ctx))
        m = rate_metric(f"stream.{short}{suffix}", raw, peak=peak, **_stream_context(ctx, elems, info, ctx.cpus, k))
        if cached:
            m.note = "; ".join(filter(None, [m.note, "in the caches: not memory bandwidth"]))
        out.metrics.append(m)
        ctx.progress.advance()
    ctx.progress.done()
    return out


def thread_counts(n: int) -> List[int]:
    """1..8, then about three points per doubling, and always n itself."""
    counts = list(range(1, min(n, 8) + 1))
    c = 8
    while c < n:
        for step in (c + c // 2, 2 * c):
            if step < n:
                counts.append(step)
        c *= 2
    if n not in counts:
        counts.append(n)
    return counts


def saturation(xs: Sequence[int], ys: Sequence[Optional[float]], fraction: float = SATURATION) -> Optional[int]:
    """The smallest x whose y reaches ``fraction`` of the largest y."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if not pts:
        return None
    top = max(y for _, y in pts)
    return min(x for x, y in pts if y >= fraction * top)


def bench_stream_threads(ctx: Context) -> Outcome:
    """STREAM triad on the first 1..N CPUs of the plan: Series "stream.triad.threads"."""
    elems, info = stream_array_elements(ctx.machine, ctx.opts.size_bytes, quick=ctx.opts.quick)
    reps = _reps(ctx, THREAD_REPS, THREAD_QUICK_REPS)
    k = core.find("stream_triad", ctx.opts.isa)
    counts = thread_counts(ctx.nthreads)
    xs: List[float] = []
    ys: List[Optional[float]] = []
    invalid: List[str] = []
    ctx.progress.start("STREAM triad by threads", total=len(counts))
    for n in counts:
        raw = core.run(k, elements=elems, iters=1, reps=reps, warmup=1, nthreads=n, cpus=ctx.cpus[:n],
                       flags=_flags(ctx))
        xs.append(n)
        ys.append(_best_gbs(raw))
        if not raw.valid:
            invalid.append(f"{n} threads: {raw.msg}")
        ctx.progress.advance()
    ctx.progress.done()
    sat = saturation(xs, ys)
    context = _stream_context(ctx, elems, info, ctx.cpus, k)
    cached = in_cache(ctx.machine, elems)
    if cached:
        context["in_cache"] = cached
    context.update({"reps": reps, "y_stat": f"best of {reps} repetitions", "saturation_threads": sat,
                    "saturation_fraction": SATURATION})
    if sat is not None:
        top = max(y for y in ys if y is not None)
        context["max_gbs"] = top
        context["note"] = (f"bandwidth saturates at {sat} thread{'s' if sat != 1 else ''} "
                           f"(>= {SATURATION:.0%} of the best, {top:.1f} GB/s)")
    if invalid:
        context["invalid"] = invalid
    series = Series("stream.triad.threads", "xy",
                    title="STREAM triad by thread count" + (" (in the caches)" if cached else ""),
                    x_label="threads", x_unit="", y_label="bandwidth", y_unit=GBS, x=xs, y=ys,
                    context=context)
    return Outcome(series=[series])


# -- cache levels --------------------------------------------------------------

def _data_caches(machine: Machine) -> Dict[int, Cache]:
    """One data or unified cache per level (the largest instance when several)."""
    out: Dict[int, Cache] = {}
    for c in machine.caches:
        if c.type == "instruction":
            continue
        if c.level not in out or c.size_bytes > out[c.level].size_bytes:
            out[c.level] = c
    return out


def instances_used(machine: Machine, cache: Cache, cpus: Sequence[int]) -> int:
    """How many instances of ``cache`` the CPUs of the plan sit behind."""
    keys = {1: lambda c: (c.socket, c.core), 2: lambda c: c.l2, 3: lambda c: c.l3}.get(cache.level)
    infos = [machine.cpu(c) for c in cpus]
    if keys is not None and infos and all(i is not None and keys(i) is not None for i in infos):
        used = len({keys(i) for i in infos})
    else:
        used = math.ceil(len(cpus) / max(1, cache.cpus_per_instance))
    return max(1, min(used, cache.instances or used))


def level_working_sets(machine: Machine, cpus: Sequence[int]) -> Dict[str, int]:
    """Total working-set bytes (all threads together) well inside each level.

    Half of each cache the threads use: for L1 and L2 that is half of each
    thread's share, for L3 half of the L3 instances they sit behind. DRAM is
    4x the node's total last-level cache (STREAM's rule).
    """
    caches = _data_caches(machine)
    out: Dict[str, int] = {}
    for level in (1, 2, 3):
        c = caches.get(level)
        if c is not None and c.size_bytes:
            out[f"l{level}"] = c.size_bytes * instances_used(machine, c, cpus) // 2 // 64 * 64
    llc = machine.total_llc_bytes() or UNKNOWN_LLC_BYTES
    out["dram"] = max(LLC_FACTOR * llc, DRAM_MIN_BYTES)
    return out


def sweep_sizes(start: int, stop: int, per_octave: int, extra: Sequence[int] = ()) -> List[int]:
    """Geometric working-set sizes from start to stop (both included), 64-byte multiples."""
    n = max(1, round(math.log2(stop / start) * per_octave)) if stop > start else 0
    sizes = {int(start * (stop / start) ** (i / n)) if n else start for i in range(n + 1)}
    sizes.update(extra)
    return sorted({max(64, s // 64 * 64) for s in sizes})


class _Calibrator:
    """Passes per repetition so that one repetition lasts about ``rep_s``.

    The rate of the previous working set predicts the next one, and a
    repetition that came out far too short is rerun with the measured rate,
    so each point costs about its timed repetitions and no more.
    """

    def __init__(self, rep_s: float, nthreads: int):
        self.rep_s = rep_s
        self.rate_bps = GUESS_GBS_PER_THREAD * 1e9 * nthreads

    def run(self, k: core.Kernel, elems: int, reps: int, cpus: Sequence[int], flags: int) -> core.RawResult:
        pass_bytes = elems * k.bytes_per_iter
        for _ in range(3):
            iters = max(1, round(self.rep_s * self.rate_bps / pass_bytes))
            raw = core.run(k, elements=elems, iters=iters, reps=reps, warmup=1, nthreads=len(cpus),
                           cpus=list(cpus), flags=flags)
            t = min(raw.times_s)
            if t > 0:
                self.rate_bps = raw.iters * k.bytes_per_iter / t
            if iters == 1 or t >= self.rep_s / 3:
                break
        return raw


def bench_cache_bandwidth(ctx: Context) -> Outcome:
    """Load and triad bandwidth against working-set size; "bandwidth.l1/l2/l3/dram" (load only)."""
    m = ctx.machine
    levels = level_working_sets(m, ctx.cpus)
    mem = meminfo_bytes("MemAvailable")
    notes: Dict[str, Any] = {}
    if mem is not None and levels["dram"] > MEM_FRACTION * mem:   # x is the whole working set
        levels["dram"] = int(MEM_FRACTION * mem) // 64 * 64
        notes["dram_note"] = f"largest working set capped to half of the {mem} bytes of available memory"
    quick = ctx.opts.quick
    reps = _reps(ctx, SWEEP_REPS, SWEEP_QUICK_REPS)
    start = max(SWEEP_START_BYTES, SWEEP_MIN_PER_THREAD * ctx.nthreads)
    sizes = sweep_sizes(start, levels["dram"],
                        SWEEP_QUICK_POINTS_PER_OCTAVE if quick else SWEEP_POINTS_PER_OCTAVE,
                        extra=list(levels.values()))
    flags = FLAGS
    out = Outcome()
    per_level = {v: name for name, v in levels.items()}
    ctx.progress.start("cache bandwidth sweep", total=2 * len(sizes))
    for kname, arrays, series_name, title in (
            ("load_sum", 1, "bandwidth.load.size", "Load bandwidth by working set"),
            ("stream_triad", STREAM_ARRAYS, "bandwidth.triad.size", "Triad bandwidth by working set")):
        k = core.find(kname, ctx.opts.isa)
        cal = _Calibrator(SWEEP_QUICK_REP_S if quick else SWEEP_REP_S, ctx.nthreads)
        xs: List[float] = []
        ys: List[Optional[float]] = []
        invalid: List[str] = []
        for ws in sizes:
            elems = max(1, ws // (8 * arrays))
            raw = cal.run(k, elems, reps, ctx.cpus, flags)
            xs.append(elems * 8 * arrays)
            ys.append(_best_gbs(raw))
            if not raw.valid:
                invalid.append(f"{ws} bytes: {raw.msg}")
            level = per_level.get(ws)
            if kname == "load_sum" and level is not None:
                out.metrics.append(rate_metric(
                    f"bandwidth.{level}", raw,
                    peak=_membw_peak(m) if level == "dram" else None,
                    working_set_bytes=elems * 8, per_thread_bytes=elems * 8 // ctx.nthreads,
                    threads=ctx.nthreads, cpus=list(ctx.cpus), placement=ctx.opts.placement,
                    level=level, passes=raw.iters // elems))
            ctx.progress.advance()
        context: Dict[str, Any] = {"kernel": kname, "isa": k.isa, "threads": ctx.nthreads,
                                   "cpus": list(ctx.cpus), "placement": ctx.opts.placement,
                                   "reps": reps, "y_stat": f"best of {reps} repetitions",
                                   "levels": levels, "hugepages_requested": bool(flags & core.F_HUGEPAGES),
                                   "x_note": "working set of all threads together", **notes}
        if invalid:
            context["invalid"] = invalid
        out.series.append(Series(series_name, "xy", title=title, x_label="working set", x_unit="bytes",
                                 y_label="bandwidth", y_unit=GBS, x=xs, y=ys, context=context))
    ctx.progress.done()
    # Metrics in level order (l1, l2, l3, dram), whatever the sweep order was.
    order = {f"bandwidth.{name}": i for i, name in enumerate(levels)}
    out.metrics.sort(key=lambda mt: order.get(mt.name, 99))
    return out


# -- NUMA ----------------------------------------------------------------------

def bench_numa_bandwidth(ctx: Context) -> Outcome:
    """STREAM triad from each NUMA node's CPUs to each node's memory: Series "stream.triad.numa"."""
    m = ctx.machine
    nodes = sorted(m.nodes, key=lambda n: n.id)
    skipped = single_numa_domain(m, "bench.numa_bandwidth", "bandwidth")
    if skipped is not None:
        return skipped
    elems, info = stream_array_elements(m, ctx.opts.size_bytes, quick=ctx.opts.quick)
    # mbind's MPOL_BIND does not spill over: the arrays must fit in the smallest node.
    node_mem = [n.mem_bytes for n in nodes if n.mem_bytes]
    if node_mem and elems * 8 * STREAM_ARRAYS > MEM_FRACTION * min(node_mem):
        elems = int(MEM_FRACTION * min(node_mem)) // (8 * STREAM_ARRAYS)
        info["size_note"] = f"capped to half of the smallest NUMA node's {min(node_mem)} bytes"
    reps = _reps(ctx, THREAD_REPS, THREAD_QUICK_REPS)
    k = core.find("stream_triad", ctx.opts.isa)

    def cell(cpu_node, mem_node, cpus):
        raw = core.run(k, elements=elems, iters=1, reps=reps, warmup=1, nthreads=len(cpus),
                       cpus=cpus, flags=_flags(ctx), mem_node=mem_node.id)
        return _best_gbs(raw), ("" if raw.valid else raw.msg)

    grid = numa.sweep(ctx, "NUMA bandwidth", cell)
    rows = grid.rows
    context = _stream_context(ctx, elems, info, ctx.cpus, k)
    context.update({"reps": reps, "cell_stat": f"best of {reps} repetitions",
                    "rows": "CPU node (threads on its CPUs)", "columns": "memory node (mbind)",
                    "row_cpus": grid.row_cpus})
    ratio = local_over_remote(rows)
    if ratio is not None:
        context["local_over_remote"] = ratio
    if grid.errors:
        context["errors"] = grid.errors
    series = Series("stream.triad.numa", "matrix", title="STREAM triad, CPU node x memory node",
                    x_label="memory node", y_label="CPU node", y_unit=GBS,
                    labels=grid.labels, matrix=rows, context=context)
    return Outcome(series=[series])
