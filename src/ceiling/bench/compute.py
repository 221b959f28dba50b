"""Compute ceilings: peak flop/s from register-resident FMA chains, the clock
the cores actually reach, and DGEMM through the BLAS numpy uses.

Peak kernels run on one core (``ctx.cpus[0]``) and on every CPU of the
placement plan, in double and single precision, for the widest ISA this CPU
runs ("flops.dp.node") and, unless quick, for each narrower one
("flops.dp.node.avx2"). Each is compared with the theoretical peak of the same
ISA and core count from ``machine.peaks.flop_peak``. Loop counts are
calibrated by doubling until one repetition lasts long enough (pyperf's way),
so the same code suits a laptop and a 128-core node.
"""
from __future__ import annotations

import math
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import core
from ..machine import blas
from ..machine.model import Machine
from ..machine.peaks import flop_peak, widest_isa
from ..results.model import HIGHER, Metric, Peak, Series
from ..results.measure import Context, Outcome
from ..sysfs import meminfo_bytes
from .base import rate_metric

GFLOPS = "Gflop/s"
PRECISIONS = ("dp", "sp")

# One timed repetition should last at least this long: long against timer
# resolution and thread start-up, short enough to dodge periodic noise.
FLOPS_MIN_TIME_S = 0.1
DGEMM_MIN_TIME_S = 0.2
DGEMM_QUICK_MIN_TIME_S = 0.1
DGEMM_MAX_N = 16384           # 6 GiB for A, B and C
SWEEP_MAX_REPS = 3


def _reps(ctx: Context) -> int:
    if ctx.opts.reps:
        return ctx.opts.reps
    return 3 if ctx.opts.quick else 5


def calibrate_iters(kernel: core.Kernel, cpus: Sequence[int], min_time_s: float,
                    start: int = 64, limit: int = 1 << 40) -> int:
    """Loop trips per thread so that one repetition on ``cpus`` lasts >= min_time_s.

    Doubles from ``start`` (pyperf's calibration): cheap, because the runs
    before the last add up to less than the last one.
    """
    iters = max(1, start)
    cpus = list(cpus)
    while iters < limit:
        raw = core.run(kernel, iters=iters, reps=1, warmup=0, nthreads=len(cpus), cpus=cpus)
        if raw.times_s[0] >= min_time_s:
            break
        iters *= 2
    return iters


def _cores_of(machine: Machine, cpus: Sequence[int]) -> int:
    """Physical cores among ``cpus`` (SMT siblings share one core's FMA pipes)."""
    seen = set()
    for c in cpus:
        info = machine.cpu(c)
        seen.add((info.socket, info.core) if info is not None else ("cpu", c))
    return len(seen)


# Above this, value / peak is not plausible: the peak's inputs are wrong.
EFFICIENCY_IMPLAUSIBLE = 1.05


def _check_peak(m: Metric) -> Metric:
    if m.efficiency is not None and m.efficiency > EFFICIENCY_IMPLAUSIBLE:
        why = (f"measured {m.efficiency:.0%} of the theoretical peak: the peak's inputs are wrong, most often "
               "a clock measured while other processes shared the cores")
        m.note = "; ".join(filter(None, [m.note, why]))
    return m


def flops_metric_name(precision: str, scope: str, isa: str, widest: str) -> str:
    """"flops.dp.node" for the widest ISA, "flops.dp.node.avx2" for the others."""
    base = f"flops.{precision}.{scope}"
    return base if isa == widest else f"{base}.{isa}"


def bench_flops(ctx: Context) -> Outcome:
    """Peak DP and SP flop/s on one core and on all of ``ctx.cpus``, per ISA variant."""
    out = Outcome()
    reps = _reps(ctx)
    one = [ctx.cpus[0]]
    node_cores = _cores_of(ctx.machine, ctx.cpus)
    for prec in PRECISIONS:
        name = f"peak_fma_{prec}"
        variants = core.variants(name)
        if not variants:
            continue
        widest = variants[0].isa
        if ctx.opts.isa:
            variants = [core.find(name, ctx.opts.isa)]
        elif ctx.opts.quick:
            variants = variants[:1]
        for k in variants:
            ctx.progress.start(f"peak flop/s {prec.upper()} {k.isa}")
            iters = calibrate_iters(k, one, FLOPS_MIN_TIME_S)
            raw1 = core.run(k, iters=iters, reps=reps, warmup=1, nthreads=1, cpus=one)
            out.metrics.append(_check_peak(rate_metric(
                flops_metric_name(prec, "core", k.isa, widest), raw1, per="flops", unit=GFLOPS,
                peak=flop_peak(ctx.machine, precision=prec, cores=1, isa=k.isa), cpus=one, cores=1,
                placement=ctx.opts.placement)))
            # With one CPU the node run would repeat the core run: reuse it.
            rawn = raw1 if len(ctx.cpus) == 1 else core.run(
                k, iters=iters, reps=reps, warmup=1, nthreads=len(ctx.cpus), cpus=ctx.cpus)
            out.metrics.append(_check_peak(rate_metric(
                flops_metric_name(prec, "node", k.isa, widest), rawn, per="flops", unit=GFLOPS,
                peak=flop_peak(ctx.machine, precision=prec, cores=node_cores, isa=k.isa), cpus=list(ctx.cpus),
                cores=node_cores, placement=ctx.opts.placement)))
            ctx.progress.done()
    return out


# -- clock ---------------------------------------------------------------------

def clock_metrics(machine: Machine) -> Outcome:
    """"clock.single" and "clock.all" from the machine model's own measurement.

    The clock is measured once, by machine.clocks.measure_clock (a dependent
    1-cycle add chain: adds per second per thread is the clock, with no
    counters, root or cpufreq needed; in a VM it is the real clock), because
    every peak is computed from it; this only turns its repetitions into
    Metrics.
    """
    c = machine.clocks
    out = Outcome()
    context = {"method": c.measured_method, "reported_ghz": c.base_ghz or c.max_ghz or c.current_ghz,
               "reported_source": c.base_source or c.max_source or c.current_source}
    if c.measured_single_values_ghz:
        out.metrics.append(Metric.measured("clock.single", c.measured_single_values_ghz, "GHz", HIGHER,
                                           context={**context, "threads": 1,
                                                    "per_cpu_ghz": dict(c.measured_per_cpu_ghz)}))
    if c.measured_all_values_ghz:
        out.metrics.append(Metric.measured("clock.all", c.measured_all_values_ghz, "GHz", HIGHER,
                                           context={**context, "threads": len(machine.affinity) or machine.threads}))
    return out


# -- DGEMM ---------------------------------------------------------------------

def _blas_info() -> Tuple[Dict[str, Any], Any, blas.Blas]:
    """What BLAS numpy calls, a context manager factory limiting its threads, and threadpoolctl's view."""
    info, why = blas.snapshot()
    lib = blas.Blas.of(info, why)
    if why:
        return {"name": "unknown", "why": why}, None, lib
    if not lib.api:
        return {"name": "unknown", "why": lib.why}, None, lib
    from threadpoolctl import threadpool_limits
    return ({"name": lib.api, "version": lib.version or None, "threading_layer": lib.threading_layer or None,
             "architecture": lib.architecture or None, "library": os.path.basename(lib.filepath)},
            threadpool_limits, lib)


def isa_context(machine: Machine, lib: blas.Blas, caps: Sequence[blas.Cap], best: Optional[float],
                cores: int, efficiency: Optional[float]) -> Tuple[Dict[str, Any], str]:
    """What DGEMM's context says about the ISA the library runs, and the note for the report.

    The ISA is the library's own word where it gives one (OpenBLAS's core type), else a variable's
    that sets it (MKL_ENABLE_INSTRUCTIONS, ...). Where it is narrower than the node's widest, the
    figure is also rated against that ISA's peak: "15% of the node's AVX-512 peak, 45% of the AVX2
    peak the library runs". ``env_caps`` holds the variables that lower the figure (no verdict about
    the node rests on a metric that has them).
    """
    isa_caps = [c for c in caps if c.effect == "isa" and c.dgemm in (blas.RAN_WITH, blas.CAPPED)]
    node = widest_isa(machine)
    run = lib.isa_run() or next((c.isa_run for c in isa_caps if c.isa_run), None)
    ctx: Dict[str, Any] = {"isa_node": node}
    if run:
        ctx["isa_run"] = run
    capped = [c for c in caps if c.dgemm == blas.CAPPED]
    if capped:
        ctx["env_caps"] = [c.data() for c in capped]
    if not run or run == node or run not in blas.ISA_RANK or node not in blas.ISA_RANK:
        return ctx, ""
    why = next((f"{c.variable}={c.value}" for c in isa_caps if c.effect == "isa"), "")
    said = (f"OpenBLAS core type {lib.architecture}" if lib.api == "openblas" and lib.architecture else "")
    said = ", ".join(filter(None, [said, f"set by {why}" if why else ""]))
    title, node_title = blas.ISA_TITLE[run], blas.ISA_TITLE[node]
    if run in blas.MODELLED_PEAK:
        p = flop_peak(machine, precision="dp", cores=cores, isa=run)
    else:
        p = Peak(None, GFLOPS, f"unknown: ceiling models FMA peaks only; {title} code has no FMA at "
                               f"{node_title} width")
    ctx["peak_isa_run"] = p.to_dict()
    eff = best / p.value if p.known and best is not None and p.value else None
    ctx["efficiency_isa_run"] = eff
    node_part = (f"{efficiency:.0%} of the node's {node_title} peak" if efficiency is not None
                 else f"the node's {node_title} peak unknown")
    run_part = (f"{eff:.0%} of the {title} peak the library runs" if eff is not None
                else f"the {title} peak the library runs is {p.provenance}")
    return ctx, f"{node_part}, {run_part}" + (f" ({said})" if said else "")


class _Threads:
    """Limit the BLAS thread pool for a block (no-op when it cannot be controlled)."""

    def __init__(self, limits, n: int):
        self._cm = limits(limits=n, user_api="blas") if limits is not None else None

    def __enter__(self):
        if self._cm is not None:
            self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        if self._cm is not None:
            self._cm.__exit__(*exc)
        return False


def dgemm_residual(a, b, c, seed: int = 7) -> Tuple[float, float]:
    """(error, bound) of C = A @ B checked on a random vector, componentwise.

    error = max_i |C x - A (B x)|_i / (|A| (|B| |x|))_i; any summation order
    (blocked, FMA) keeps it under about 4 gamma_n = 2 n eps (Higham, Accuracy
    and Stability, 3.5), so a larger error is a wrong product, not rounding.
    """
    import numpy as np
    n = a.shape[1]
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, c.shape[1])
    diff = np.abs(c @ x - a @ (b @ x))
    scale = np.abs(a) @ (np.abs(b) @ np.abs(x))
    tiny = np.finfo(np.float64).tiny
    err = float(np.max(diff / np.maximum(scale, tiny)))
    return err, 2.0 * n * float(np.finfo(np.float64).eps)


def _mem_cap_n() -> int:
    """Largest n whose three matrices fit in a quarter of the memory available now
    (MemAvailable, which counts reclaimable page cache; MemFree would not)."""
    avail = meminfo_bytes("MemAvailable")
    if avail is None:
        return DGEMM_MAX_N
    return max(256, min(DGEMM_MAX_N, int(math.sqrt(avail / 4 / 24)) // 256 * 256))


def _matrices(n: int, seed: int = 1):
    import numpy as np
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, (n, n))
    b = rng.uniform(-1.0, 1.0, (n, n))
    return a, b, np.empty((n, n))


def _time_matmul(a, b, c, reps: int, warmup: int) -> List[float]:
    import numpy as np
    for _ in range(warmup):
        np.matmul(a, b, out=c)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t0)
    return times


def choose_dgemm_n(threads: int, min_time_s: float, limits=None, start: int = 1024,
                   cap: Optional[int] = None) -> int:
    """Smallest n (a multiple of 256) whose multiply lasts >= min_time_s on ``threads``."""
    cap = cap or _mem_cap_n()
    n = min(start, cap)
    with _Threads(limits, threads):
        for _ in range(4):
            a, b, c = _matrices(n)
            t = min(_time_matmul(a, b, c, reps=2, warmup=1))
            if t >= min_time_s or n >= cap:
                return n
            # Rate grows with n, so this estimate errs large: the next try usually passes.
            n = min(cap, int(math.ceil(n * (min_time_s / t) ** (1 / 3) * 1.05 / 256)) * 256)
    return n


def dgemm_run(n: int, threads: int, reps: int, warmup: int = 1, limits=None) -> Tuple[List[float], float, float]:
    """Gflop/s of each timed C = A @ B (2 n^3 flops) and the residual (error, bound)."""
    a, b, c = _matrices(n)
    with _Threads(limits, threads):
        times = _time_matmul(a, b, c, reps, warmup)
    err, bound = dgemm_residual(a, b, c)
    return [2.0 * n ** 3 / t * 1e-9 for t in times if t > 0], err, bound


def bench_dgemm(ctx: Context) -> Outcome:
    """DGEMM Gflop/s on ctx.nthreads BLAS threads ("dgemm.node"), and unless quick by thread count."""
    out = Outcome()
    blas_ctx, limits, lib = _blas_info()
    nt = ctx.nthreads
    reps = _reps(ctx)
    node_cores = _cores_of(ctx.machine, ctx.cpus)
    ctx.progress.start("DGEMM")
    n = choose_dgemm_n(nt, DGEMM_QUICK_MIN_TIME_S if ctx.opts.quick else DGEMM_MIN_TIME_S, limits)
    vals, err, bound = dgemm_run(n, nt, reps, limits=limits)
    context = {"n": n, "threads": nt, "blas": blas_ctx, "residual": err, "residual_bound": bound,
               "placement": "BLAS threads, not pinned by ceiling", "cores": node_cores}
    m = Metric.measured("dgemm.node", vals, GFLOPS, HIGHER, peak=flop_peak(ctx.machine, precision="dp",
                                                                           cores=node_cores, isa=None),
                        context=context)
    caps = blas.env_caps(os.environ, lib, ctx.machine)
    isa_ctx, isa_note = isa_context(ctx.machine, lib, caps, m.value, node_cores, m.efficiency)
    m.context.update(isa_ctx)
    notes = [isa_note] if isa_note else []
    if err > bound:
        m.valid = False
        notes.append(f"validation failed: residual {err:.2e} exceeds the rounding bound {bound:.2e}")
    if limits is None:
        notes.append(f"BLAS thread count not controllable ({blas_ctx.get('why')}): the library chose it")
    m.note = "; ".join(notes)
    out.metrics.append(_check_peak(m))
    ctx.progress.done()
    if not ctx.opts.quick and nt > 1:
        out.series.append(_dgemm_sweep(ctx, n, nt, min(reps, SWEEP_MAX_REPS), limits, blas_ctx, vals, m.valid))
    return out


def sweep_points(nt: int) -> List[int]:
    """1..nt, or powers of two and nt when that would be more than 16 points."""
    if nt <= 16:
        return list(range(1, nt + 1))
    pts, t = [], 1
    while t < nt:
        pts.append(t)
        t *= 2
    return pts + [nt]


def _dgemm_sweep(ctx: Context, n: int, nt: int, reps: int, limits, blas, node_vals,
                 node_valid: bool) -> Series:
    """Like nodeperf: the same multiply on 1..nt threads. When one thread would
    take too long at the node's n, n shrinks so that work per thread stays the
    node's (recorded per point)."""
    xs, ys, ns, valid = [], [], [], []
    t_node = 2.0 * n ** 3 / (max(node_vals) * 1e9)
    for t in sweep_points(nt):
        ctx.progress.start(f"DGEMM {t} thread{'s' if t > 1 else ''}")
        nn = n
        if t_node * nt / t > 2.0:
            nn = max(256, int(round(n * (t / nt) ** (1 / 3) / 64)) * 64)
        if t == nt:
            vals, ok = node_vals, node_valid
        else:
            vals, err, bound = dgemm_run(nn, t, reps, limits=limits)
            ok = err <= bound
        xs.append(t)
        # A product that failed its residual check has no trustworthy rate.
        ys.append(max(vals) if ok else None)
        ns.append(nn)
        valid.append(ok)
        ctx.progress.done()
    return Series("dgemm.threads", "xy", title="DGEMM by thread count", x_label="threads", x_unit="",
                  y_label="DGEMM", y_unit=GFLOPS, x=xs, y=ys,
                  context={"n": ns, "valid": valid, "blas": blas,
                           "placement": "BLAS threads, not pinned by ceiling"})
