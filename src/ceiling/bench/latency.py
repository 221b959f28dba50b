"""Load-to-use latency: a random pointer chase across working-set sizes, and
the NUMA latency matrix.

One thread, pinned to the first CPU of the plan, follows a single random
cycle through every 64-byte line of the working set (csrc/kernels/latency.c),
so each load waits for the one before and no prefetcher can run ahead: the
time per load is the latency of the level that holds the set. The kernel
checks that the chain is one cycle over all lines and that the timed chase
ended where its load count says, so a number here is only reported with that
check.

Working sets are backed by transparent huge pages when the kernel allows
(madvise): with 4 KiB pages a random chase over more than the TLB's reach
(a few MiB) adds a page walk to most loads, and the figure would be the page
walk's, not the cache's or DRAM's. Each result records whether huge pages
were obtained, and every figure states the page size it was measured with
(``pages``, ``page_bytes``): 2 MiB (the PMD size read from
/sys/kernel/mm/transparent_hugepage/hpage_pmd_size) when at least half of
the set was on huge pages (/proc/self/smaps), else the base page size. Tools
compare with different pages: Intel MLC with huge pages, lmbench's
``lat_mem_rd`` with malloc'd memory, 4 KiB pages unless THP is "always". So
the full bench measures each level's point again on base pages
(MADV_NOHUGEPAGE), and where the two differ by more than ``PAGES_DIFFER``
both are given (``latency.<level>.small_pages``); where they agree the
small-page figure is in the metric's context. Quick mode (``ceiling run
--quick``) measures on huge pages only, and says so: the DRAM chain costs
seconds to build, and a second one would double it.

The DRAM figure needs a set far larger than the last-level cache: under
random access a cache of C bytes still serves about C/S of a set of S bytes,
so at 4x the cache a quarter of the loads would hit it. The DRAM point is 32x
the largest last-level cache instance (so about 3% of loads hit it), 16x in
quick mode (about 6%, at half the cost: building and proving a chain of a GiB
takes seconds), and at least 4x the node's total last-level cache. Quick mode
caps it at 1 GiB: building a random chain costs about 5 s a GiB (10 s for the
1.9 GiB and 49 s for the 5.8 GiB a 480 MiB L3 asked for, on a 2-vCPU VM), and
`ceiling run --quick` must stay quick; a node with so large a cache then gets
a DRAM figure with a larger share of hits, said in its note. The estimated
share of hits is recorded with the figure.

Each cache level's figure is its plateau on the sweep: the lowest point
between twice the level below (whose hits are gone there) and half of the
level (``plateau_ranges``). A fixed point at half the capacity read DRAM-like
figures for a 32 MiB L3 in a VM, where 16 MiB exceeds the TLB's reach and
every miss walks the host's page tables too; when the half-capacity point is
well above the plateau, the metric's note says so, with both figures.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from .. import core
from ..errors import CoreError
from ..machine.model import Cache, Machine
from ..results.model import LOWER, Metric, Series, Stats
from ..results.measure import Context, Outcome
from ..sysfs import meminfo_bytes
from ..results.curves import numa_factor
from . import numa
from .base import per_iter_metric, single_numa_domain
from .latency_pages import (PAGES_DIFFER, page_sizes, pages_context, pages_differ, size_words,  # noqa: F401
                            thp_mode, thp_note)

KIB, MIB = 1 << 10, 1 << 20
NS = "ns"

STRIDE_BYTES = 64               # one pointer per cache line
SWEEP_START_BYTES = 16 * KIB
POINTS_PER_OCTAVE = 4
QUICK_POINTS_PER_OCTAVE = 1
LLC_FACTOR = 4                  # the sweep reaches at least 4x the node's total last-level cache
DRAM_LLC_INSTANCE_FACTOR = 32   # the DRAM point: 32x one last-level cache instance (~3% hits)
QUICK_DRAM_LLC_INSTANCE_FACTOR = 16   # quick mode (~6% hits)
QUICK_DRAM_MAX_BYTES = 1 << 30        # quick mode: at most this (about 5 s to build the chain)
DRAM_MIN_BYTES = 256 * MIB
UNKNOWN_LLC_BYTES = 32 * MIB    # assumed per instance when the caches are unknown
MEM_FRACTION = 0.25             # never chase more than this share of available memory
REP_S, QUICK_REP_S = 0.02, 0.005    # one timed repetition
REPS, QUICK_REPS = 5, 3
MIN_LOADS = 1 << 14             # fewer loads and the timer's own cost shows
GUESS_NS = 1.0                  # first guess of the latency, corrected from each point
SEED = 0x5EED

LEVELS = ("l1", "l2", "l3", "dram")


# -- sizes ---------------------------------------------------------------------

def _data_caches(machine: Machine) -> Dict[int, Cache]:
    """One data or unified cache per level (the largest instance when several)."""
    out: Dict[int, Cache] = {}
    for c in machine.caches:
        if c.type == "instruction" or not c.size_bytes:
            continue
        if c.level not in out or c.size_bytes > out[c.level].size_bytes:
            out[c.level] = c
    return out


def _lines(nbytes: int) -> int:
    """Whole lines, at least two (the kernel's minimum)."""
    return max(2 * STRIDE_BYTES, nbytes // STRIDE_BYTES * STRIDE_BYTES)


def dram_working_set(machine: Machine, size_bytes: Optional[int] = None,
                     mem_available: Optional[int] = None,
                     factor: int = DRAM_LLC_INSTANCE_FACTOR,
                     cap: Optional[int] = None) -> Tuple[int, Dict[str, Any]]:
    """Bytes of the DRAM latency point, and how they were chosen.

    max(``factor`` (32) x the largest last-level cache instance, 4 x the
    node's total last-level cache, 256 MiB), at most ``cap`` (quick mode) and a
    quarter of the available memory; ``size_bytes`` overrides the rule.
    """
    info: Dict[str, Any] = {}
    if size_bytes is not None:
        info["size_rule"] = "set by the user"
        return _lines(size_bytes), info
    inst = machine.last_level_cache_bytes()
    total = machine.total_llc_bytes()
    if inst is None or total is None:
        inst = total = UNKNOWN_LLC_BYTES
        info["llc_note"] = f"last-level cache unknown: {UNKNOWN_LLC_BYTES // MIB} MiB assumed"
    ws = max(factor * inst, LLC_FACTOR * total, DRAM_MIN_BYTES)
    info["size_rule"] = (f"max({factor} x last-level cache instance {inst} bytes, "
                         f"{LLC_FACTOR} x total last-level cache {total} bytes, {DRAM_MIN_BYTES // MIB} MiB)")
    info["llc_hit_fraction_estimate"] = round(inst / ws, 4)
    if cap is not None and ws > cap:
        ws = cap
        info["size_note"] = (f"capped to {cap // MIB} MiB in quick mode (building the chain takes about 5 s a GiB): "
                             f"about {min(1.0, inst / ws):.0%} of loads may still hit the last-level cache")
        info["llc_hit_fraction_estimate"] = round(min(1.0, inst / ws), 4)
    if mem_available is None:
        mem_available = meminfo_bytes("MemAvailable")
    if mem_available is not None and ws > MEM_FRACTION * mem_available:
        ws = int(MEM_FRACTION * mem_available)
        info["size_note"] = (f"capped to a quarter of the {mem_available} bytes of available memory: "
                             f"about {inst / ws:.0%} of loads may still hit the last-level cache")
        info["llc_hit_fraction_estimate"] = round(min(1.0, inst / ws), 4)
    return _lines(ws), info


def _dram_set(ctx: Context) -> Tuple[int, Dict[str, Any]]:
    """dram_working_set with this run's mode (quick: the smaller factor and the cap)."""
    if ctx.opts.quick:
        return dram_working_set(ctx.machine, ctx.opts.size_bytes, factor=QUICK_DRAM_LLC_INSTANCE_FACTOR,
                                cap=QUICK_DRAM_MAX_BYTES)
    return dram_working_set(ctx.machine, ctx.opts.size_bytes)


def level_working_sets(machine: Machine, dram_bytes: int) -> Dict[str, int]:
    """Working set well inside each level: half of L1d, of L2, of one L3 instance; DRAM as given."""
    caches = _data_caches(machine)
    out: Dict[str, int] = {}
    for level in (1, 2, 3):
        c = caches.get(level)
        if c is not None:
            out[f"l{level}"] = _lines(c.size_bytes // 2)
    out["dram"] = dram_bytes
    return out


def plateau_ranges(machine: Machine) -> Dict[str, Tuple[int, int]]:
    """Per cache level, the working sets that sit on its plateau: beyond twice the level
    below (so its hits are gone) and within half of this level (one thread's share, before
    conflicts and the TLB's reach show). The level's figure is the lowest point of its range."""
    caches = _data_caches(machine)
    out: Dict[str, Tuple[int, int]] = {}
    below = 0
    for level in (1, 2, 3):
        c = caches.get(level)
        if c is None:
            break
        out[f"l{level}"] = (2 * below, c.size_bytes // 2)
        below = c.size_bytes
    return out


def plateau_point(xs: List[int], ys: List[Optional[float]], lo: int, hi: int) -> Optional[int]:
    """The working set of the lowest latency in (lo, hi], None when the sweep has no point there."""
    pts = [(y, x) for x, y in zip(xs, ys) if y is not None and lo < x <= hi]
    return min(pts)[1] if pts else None


RISE = 1.3    # the half-capacity point this much above the plateau: the level is distorted, say so


def sweep_sizes(start: int, stop: int, per_octave: int) -> List[int]:
    """Geometric sizes from start to stop (both included), whole lines."""
    n = max(1, round(math.log2(stop / start) * per_octave)) if stop > start else 0
    sizes = {int(start * (stop / start) ** (i / n)) if n else start for i in range(n + 1)}
    return sorted({_lines(s) for s in sizes})


# -- measuring -----------------------------------------------------------------

class _Chaser:
    """Runs the chase with loads per repetition sized from the last latency seen.

    Latency only grows with the working set, so the previous point's latency
    keeps each repetition at least ``rep_s`` long without a calibration run
    (which would rebuild a chain of up to a GiB).
    """

    def __init__(self, reps: int, rep_s: float, flags: int):
        self.reps, self.rep_s, self.flags = reps, rep_s, flags
        self.k = core.find("chase")
        self.ns = GUESS_NS

    def run(self, size: int, cpu: Optional[int], mem_node: int = -1) -> core.RawResult:
        iters = max(MIN_LOADS, int(self.rep_s / (self.ns * 1e-9)))
        raw = core.run(self.k, ws_bytes=size, iters=iters, reps=self.reps, warmup=1, nthreads=1,
                       cpus=None if cpu is None else [cpu], flags=self.flags, stride=STRIDE_BYTES,
                       seed=SEED, mem_node=mem_node)
        best = best_ns(raw)
        if best is not None:
            self.ns = best
        return raw


def latencies_ns(raw: core.RawResult) -> Optional[List[float]]:
    """Nanoseconds per load of each repetition; None when the kernel's check failed."""
    if not raw.valid or raw.iters <= 0:
        return None
    vals = [t / raw.iters * 1e9 for t in raw.times_s if t > 0]
    return vals or None


def best_ns(raw: core.RawResult) -> Optional[float]:
    vals = latencies_ns(raw)
    return min(vals) if vals else None


def _cycles(ns: Optional[float], ghz: Optional[float]) -> Optional[float]:
    return None if ns is None or not ghz else ns * ghz


def _clock(machine: Machine) -> Tuple[Optional[float], Optional[str]]:
    ghz = machine.clocks.measured_single_ghz
    if ghz:
        return ghz, None
    why = (machine.unknowns.get("clocks.measured_single_ghz") or machine.unknowns.get("clocks.measured")
           or "the single-core clock was not measured")
    return None, f"cycles unknown: {why}"


def _first_cpu(ctx: Context) -> Optional[int]:
    if ctx.cpus:
        return ctx.cpus[0]
    if ctx.machine.affinity:
        return ctx.machine.affinity[0]
    return None


def _reps(ctx: Context, full: int, quick: int) -> int:
    if ctx.opts.reps:
        return ctx.opts.reps
    return quick if ctx.opts.quick else full


def _level_metric(name: str, raw: core.RawResult, level: str, ghz: Optional[float],
                  clock_note: Optional[str], cpu: Optional[int], thp_note: Optional[str],
                  sizes: Tuple[int, Optional[int]]) -> Metric:
    vals = latencies_ns(raw)
    ctx: Dict[str, Any] = {"level": level, "stride": STRIDE_BYTES, "cpu": cpu, "hugepages": raw.hugepages,
                           **pages_context(raw.hugepages, sizes),
                           "cycles": _cycles(min(vals) if vals else None, ghz)}
    if clock_note:
        ctx["cycles_note"] = clock_note
    if thp_note:
        ctx["hugepages_note"] = thp_note
    if vals is None:
        return Metric(name, None, NS, LOWER, valid=False,
                      note=f"validation failed: {raw.msg or 'chain check failed'}", context=ctx)
    return per_iter_metric(name, raw, **ctx)


def bench_latency(ctx: Context) -> Outcome:
    """Latency against working set (Series "latency.size"); "latency.l1/l2/l3/dram" in ns."""
    m = ctx.machine
    quick = ctx.opts.quick
    dram, info = _dram_set(ctx)
    levels = level_working_sets(m, dram)
    # The sweep's own top: 4x the total LLC at least (STREAM's rule); the DRAM
    # point is added beyond it.
    top = min(dram, max(LLC_FACTOR * (m.total_llc_bytes() or UNKNOWN_LLC_BYTES), SWEEP_START_BYTES))
    sizes = sweep_sizes(SWEEP_START_BYTES, top, QUICK_POINTS_PER_OCTAVE if quick else POINTS_PER_OCTAVE)
    sizes = sorted(set(sizes) | set(levels.values()))
    reps = _reps(ctx, REPS, QUICK_REPS)
    cpu = _first_cpu(ctx)
    ghz, clock_note = _clock(m)
    huge_note = thp_note()
    sizes_ = page_sizes()
    vm_note = None
    if m.virtualized:
        # The TLB holds guest-to-host translations at the smaller of the two
        # page sizes: a host on 4 KiB pages caps the reach whatever the guest
        # uses, and every miss is a two-dimensional walk.
        vm_note = (f"virtualized ({m.virtualized}): the host's page size also limits the TLB's reach, so "
                   "sets beyond it (8 MiB with 2048 entries of 4 KiB) may include a nested page walk")
    chaser = _Chaser(reps, QUICK_REP_S if quick else REP_S, core.F_HUGEPAGES)
    xs: List[float] = []
    ys: List[Optional[float]] = []
    no_huge: List[int] = []
    invalid: List[str] = []
    metrics: Dict[str, Metric] = {}
    raws: Dict[int, core.RawResult] = {}
    out = Outcome()
    ctx.progress.start("memory latency sweep", total=len(sizes))
    for ws in sizes:
        xs.append(ws)
        try:
            raw = chaser.run(ws, cpu)
        except CoreError as e:   # out of memory, a CPU we cannot pin to: this point only
            ys.append(None)
            invalid.append(f"{ws} bytes: {e}")
            ctx.progress.advance()
            continue
        ys.append(best_ns(raw))
        raws[ws] = raw
        if not raw.valid:
            invalid.append(f"{ws} bytes: {raw.msg}")
        if not raw.hugepages:
            no_huge.append(ws)
        ctx.progress.advance()
    ctx.progress.done()
    ranges = plateau_ranges(m)
    for level, nominal in levels.items():
        ws = nominal
        if level in ranges:
            ws = plateau_point(xs, ys, *ranges[level]) or nominal
        if ws not in raws:
            continue
        mt = _level_metric(f"latency.{level}", raws[ws], level, ghz, clock_note, cpu, huge_note, sizes_)
        mt.context["working_set_bytes"] = ws
        if level in ranges:
            lo, hi = ranges[level]
            mt.context["plateau"] = (f"the lowest point of the sweep between {lo} and {hi} bytes (beyond twice the "
                                     "level below, within half of this one)")
            y_ws, y_nom = ys[xs.index(ws)], ys[xs.index(nominal)] if nominal in xs else None
            if y_ws is not None and y_nom is not None and nominal != ws and y_nom > RISE * y_ws:
                mt.context["at_half_capacity_ns"] = y_nom
                mt.note = "; ".join(filter(None, [mt.note, (
                    f"the latency rises inside this level, from {y_ws:.3g} ns at {ws >> 10} KiB to {y_nom:.3g} ns "
                    f"at {nominal >> 10} KiB: the TLB's reach" + (" (in this VM the host's page size limits it)"
                                                                  if vm_note else "") +
                    "; the figure is the level's plateau")]))
        if vm_note and level in ("l3", "dram"):
            mt.context["vm_note"] = vm_note
        if level == "dram":
            mt.context.update(info)
            if vm_note and not raws[ws].hugepages:
                mt.note = "; ".join(filter(None, [mt.note, "in a VM without huge pages each TLB miss also walks the "
                                                  "host's page tables: part of this figure is that walk"]))
        metrics[level] = mt

    small: List[Metric] = []
    if quick:
        for mt in metrics.values():
            if mt.context.get("hugepages"):
                mt.context["small_pages"] = ("not measured in quick mode: ceiling bench latency measures each "
                                             "level on base pages too")
    else:
        small = _small_pages(ctx, metrics, ghz, clock_note, cpu, sizes_)

    context: Dict[str, Any] = {"kernel": "chase", "cpu": cpu, "stride": STRIDE_BYTES, "reps": reps,
                               "y_stat": f"best of {reps} repetitions", "levels": levels,
                               "pattern": "one random cycle through every line (Sattolo)",
                               "hugepages_requested": True, "hugepages_missing_bytes": no_huge,
                               "pages": (pages_context(True, sizes_)["pages"] + " where the kernel gave them; "
                                         f"{size_words(sizes_[0])} pages at the sizes in hugepages_missing_bytes"),
                               "clock_ghz": ghz}
    context.update({f"dram_{k}": v for k, v in info.items()})
    if huge_note:
        context["hugepages_note"] = huge_note
    if vm_note:
        context["vm_note"] = vm_note
    if invalid:
        context["invalid"] = invalid
    out.series.append(Series("latency.size", "xy", title="Load-to-use latency by working set",
                             x_label="working set", x_unit="bytes", y_label="latency", y_unit=NS,
                             x=xs, y=ys, context=context))
    out.metrics = [metrics[lv] for lv in LEVELS if lv in metrics] + small
    return out


def _small_pages(ctx: Context, metrics: Dict[str, Metric], ghz: Optional[float], clock_note: Optional[str],
                 cpu: Optional[int], sizes: Tuple[int, Optional[int]]) -> List[Metric]:
    """Each level's working set chased again on base pages (MADV_NOHUGEPAGE), where its figure
    was on huge pages: a metric of its own (``latency.<level>.small_pages``) where the two
    differ by more than PAGES_DIFFER, else the figure in the huge-page metric's context."""
    chaser = _Chaser(_reps(ctx, REPS, QUICK_REPS), REP_S, 0)
    todo = [(lv, mt) for lv, mt in metrics.items() if mt.context.get("hugepages") and mt.value]
    out: List[Metric] = []
    ctx.progress.start("memory latency on base pages", total=len(todo))
    for level, mt in todo:
        ws = mt.context["working_set_bytes"]
        chaser.ns = mt.value
        try:
            raw = chaser.run(ws, cpu)
        except CoreError as e:
            mt.context["small_pages"] = f"not measured: {e}"
            ctx.progress.advance()
            continue
        ctx.progress.advance()
        ns = best_ns(raw)
        if ns is None or raw.hugepages:
            mt.context["small_pages"] = ("not measured: " + (raw.msg or "the chain check failed") if ns is None else
                                         "not measured: the kernel gave huge pages despite MADV_NOHUGEPAGE")
            continue
        ratio = ns / mt.value
        mt.context["small_pages_ns"] = ns
        mt.context["small_pages_ratio"] = round(ratio, 4)
        if not pages_differ(mt.values, latencies_ns(raw) or []):
            mt.context["small_pages"] = (f"{ns:.3g} ns on {size_words(sizes[0])} pages: no different (within "
                                         f"{PAGES_DIFFER:.0%}, or the repetitions overlap)")
            continue
        sm = _level_metric(f"latency.{level}.small_pages", raw, level, ghz, clock_note, cpu, None, sizes)
        sm.context["working_set_bytes"] = ws
        sm.context["huge_pages_ns"] = mt.value
        sm.context["why"] = ("the same working set on base pages (MADV_NOHUGEPAGE), as lmbench's lat_mem_rd "
                             "measures in malloc'd memory; the TLB's misses and page walks are in this figure")
        for key in ("vm_note", *(k for k in mt.context if k.startswith(("size_", "llc_")))):
            if key in mt.context:
                sm.context[key] = mt.context[key]
        mt.context["small_pages"] = (f"{ns:.3g} ns on {size_words(sizes[0])} pages ({ratio:.2f}x): "
                                     f"latency.{level}.small_pages")
        out.append(sm)
    ctx.progress.done()
    return out


# -- NUMA ----------------------------------------------------------------------

def bench_numa_latency(ctx: Context) -> Outcome:
    """Latency from a CPU of each NUMA node to memory bound to each node: Series "latency.numa"."""
    m = ctx.machine
    skipped = single_numa_domain(m, "bench.numa_latency", "latency")
    if skipped is not None:
        return skipped
    dram, info = _dram_set(ctx)
    reps = _reps(ctx, REPS, QUICK_REPS)
    chaser = _Chaser(reps, QUICK_REP_S if ctx.opts.quick else REP_S, core.F_HUGEPAGES)
    chaser.ns = 100.0   # DRAM from the start
    no_huge: List[str] = []

    def cell(cpu_node, mem_node, cpus):
        size = dram
        if mem_node.mem_bytes:
            size = min(size, _lines(int(MEM_FRACTION * mem_node.mem_bytes)))
        raw = chaser.run(size, cpus[0], mem_node=mem_node.id)     # one thread: the row's first CPU
        if not raw.hugepages:
            no_huge.append(f"{cpu_node.id}->{mem_node.id}")
        return best_ns(raw), ("" if raw.valid else raw.msg)

    grid = numa.sweep(ctx, "NUMA latency", cell)
    rows = grid.rows
    row_cpu = {node: (cpus[0] if cpus else None) for node, cpus in grid.row_cpus.items()}

    context: Dict[str, Any] = {"kernel": "chase", "working_set_bytes": dram, "stride": STRIDE_BYTES,
                               "reps": reps, "cell_stat": f"best of {reps} repetitions",
                               "rows": "CPU node (one thread on row_cpu)", "columns": "memory node (mbind)",
                               "row_cpu": row_cpu, "hugepages_missing": no_huge,
                               "pages": (pages_context(True, page_sizes())["pages"] + " where the kernel gave "
                                         "them; base pages in the cells listed in hugepages_missing")}
    context.update(info)
    if grid.errors:
        context["errors"] = grid.errors
    labels = grid.labels
    out = Outcome(series=[Series("latency.numa", "matrix", title="Load latency, CPU node x memory node",
                                 x_label="memory node", y_label="CPU node", y_unit=NS, labels=labels,
                                 matrix=rows, context=context)])
    factor, where = numa_factor(rows)
    if factor is not None:
        where = {**where, "cpu_node": labels[where["cpu_node_index"]],
                 "memory_node": labels[where["memory_node_index"]]}
        out.metrics.append(Metric("latency.numa_factor", round(factor, 4), "x", LOWER,
                                  stats=Stats.of([factor], LOWER), values=[factor],
                                  context={"definition": "max over CPU nodes of remote latency / local latency",
                                           **where, "working_set_bytes": dram}))
    return out
