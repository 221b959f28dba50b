"""Compute kernels (peak FMA chains, clock) and the compute bench: correctness,
validation and iteration accounting on small sizes. No timing is asserted."""
import ctypes
import os
import platform

import numpy as np
import pytest

from ceiling import core
from ceiling.bench import compute
from ceiling.results.measure import Context, Options
from ceiling.errors import CoreError
from ceiling.machine.model import Cpu, Machine
from ceiling.results.model import Peak

CPUS = sorted(os.sched_getaffinity(0))
THREADS = sorted({1, min(2, len(CPUS))})
ARCH = platform.machine()

# How each variant is built (csrc/kernels/flops_*.c): accumulators, chain
# steps per accumulator per loop trip, and DP lanes per accumulator (SP has
# twice as many, except scalar; SVE counts 128-bit granules). flops_per_iter
# must equal 2 x lanes x accs x steps, and the chain's final value its steps.
SHAPE = {
    "scalar": (12, 2, 1) if ARCH == "x86_64" else (24, 1, 1),
    "avx2": (12, 2, 4),
    "avx512": (24, 1, 8),
    "neon": (24, 1, 2),
    "sve": (24, 1, 2),
}


def flops_variants(supported=True):
    return [k for k in core.kernels()
            if k.family == "flops" and k.supported == supported]


def lanes(k):
    acc, steps, dp_lanes = SHAPE[k.isa]
    return dp_lanes * (2 if k.name.endswith("_sp") and k.isa != "scalar" else 1)


# -- the descriptor table ------------------------------------------------------

def test_every_isa_has_both_precisions():
    names = {(k.name, k.isa) for k in core.kernels() if k.family == "flops"}
    for isa in {i for _, i in names}:
        assert ("peak_fma_dp", isa) in names and ("peak_fma_sp", isa) in names
    assert ("peak_fma_dp", "scalar") in names


@pytest.mark.parametrize("k", [k for k in core.kernels() if k.family == "flops"],
                         ids=lambda k: f"{k.name}-{k.isa}")
def test_flops_per_iter_matches_the_chain(k):
    acc, steps, _ = SHAPE[k.isa]
    assert k.flops_per_iter == 2 * lanes(k) * acc * steps
    assert k.bytes_per_iter == 0


# -- peak FMA kernels ----------------------------------------------------------

@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("k", flops_variants(), ids=lambda k: f"{k.name}-{k.isa}")
def test_peak_fma_validates_and_counts(k, threads):
    _, steps, _ = SHAPE[k.isa]
    for iters in (1, 37, 1000):
        r = core.run(k, iters=iters, reps=2, warmup=1, nthreads=threads, cpus=CPUS[:threads])
        assert r.valid, r.msg
        assert r.msg == ""
        assert r.nthreads == threads
        if k.isa == "sve":
            # counted in 128-bit granules: x VL/128, a power of two from 1 to 16
            assert r.iters // (iters * threads) in (1, 2, 4, 8, 16)
            assert r.iters % (iters * threads) == 0
        else:
            assert r.iters == iters * threads
        assert r.check == iters * steps            # lane 0 starts at 0 and steps by exactly 1
        assert len(r.times_s) == 2 and all(t > 0 for t in r.times_s)


@pytest.mark.parametrize("k", [k for k in flops_variants() if k.name == "peak_fma_sp"], ids=lambda k: k.isa)
def test_single_precision_chain_saturates_at_2_to_24(k):
    # Past 2^24 a float's x + 1 rounds back to x: the closed form is min(k + n, 2^24),
    # and the kernel must still validate (and report the saturated value).
    _, steps, _ = SHAPE[k.isa]
    iters = 2 ** 24 // steps + 5
    r = core.run(k, iters=iters, reps=1, nthreads=1, cpus=CPUS[:1])
    assert r.valid, r.msg
    assert r.check == 2 ** 24


@pytest.mark.parametrize("dtype,p", [(np.float32, 24), (np.float64, 53)])
def test_closed_form_against_numpy(dtype, p):
    # The closed form the C driver checks against: element k after n steps of
    # x = x*1 + 1 is min(k + n, 2^p). Checked here with NumPy's own rounding,
    # right at the saturation point where it is least obvious.
    start = dtype(2 ** p) - dtype(6) + np.arange(8, dtype=dtype)   # 2^p - 6 ... 2^p, 2^p + 1 rounds to 2^p
    x = start.copy()
    one = dtype(1)
    for n in range(1, 12):
        x = x * one + one
        expected = np.minimum(start.astype(np.float64) + n, 2.0 ** p)
        assert np.array_equal(x.astype(np.float64), expected), n


def test_unsupported_isa_is_refused_not_run():
    missing = flops_variants(supported=False)
    if not missing:
        pytest.skip("this CPU runs every compiled variant")
    for k in missing:
        with pytest.raises(CoreError, match="ISA"):
            core.run(k, iters=10, reps=1)
        with pytest.raises(CoreError):
            core.find(k.name, k.isa)


def test_bad_parameters_are_refused():
    k = core.find("peak_fma_dp")
    with pytest.raises(CoreError, match="invalid"):
        core.run(k, iters=0, reps=1)
    with pytest.raises(CoreError, match="invalid"):
        core.run(k, iters=10, reps=1, warmup=-1)
    with pytest.raises(CoreError, match="pin"):
        core.run(k, iters=10, reps=1, nthreads=1, cpus=[1 << 20])


# -- the driver's validation really fails ---------------------------------------

class _Chain(ctypes.Structure):
    _fields_ = [("isa", ctypes.c_char_p), ("sp", ctypes.c_int), ("accs", ctypes.c_int),
                ("lanes", ctypes.c_int), ("steps_per_trip", ctypes.c_int),
                ("lanes_now", ctypes.c_void_p),
                ("body", ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p))]


def _drive(body, *, sp=0, iters=5, nthreads=1):
    """Run the real C driver (ceil_flops_drive) on a chain body written in Python."""
    lib = core._lib()
    fn = lib.ceil_flops_drive
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(core._Params), ctypes.POINTER(core._Result), ctypes.POINTER(_Chain)]
    cb = _Chain._fields_[-1][1](body)
    chain = _Chain(b"scalar", sp, 3, 2, 4, None, cb)
    times = (ctypes.c_double * 2)()
    p = core._Params(iters=iters, reps=2, warmup=1, nthreads=nthreads, mem_node=-1)
    r = core._Result()
    r.times = ctypes.cast(times, ctypes.POINTER(ctypes.c_double))
    rc = fn(ctypes.byref(p), ctypes.byref(r), ctypes.byref(chain))
    return rc, r


def _body(sp, bump):
    ctype = ctypes.c_float if sp else ctypes.c_double

    def body(trips, state):
        xs = ctypes.cast(state, ctypes.POINTER(ctype))
        for k in range(6):   # accs 3 x lanes 2
            xs[k] = min(xs[k] + trips * 4 + bump(k), 2.0 ** (24 if sp else 53))
    return body


@pytest.mark.parametrize("sp", [0, 1])
def test_driver_accepts_a_correct_chain(sp):
    rc, r = _drive(_body(sp, lambda k: 0), sp=sp)
    assert rc == 0 and r.valid == 1, r.msg
    assert r.iters == 5 and r.check == 20


@pytest.mark.parametrize("sp", [0, 1])
def test_driver_rejects_a_chain_one_step_short(sp):
    rc, r = _drive(_body(sp, lambda k: -1 if k == 5 else 0), sp=sp)
    assert rc == 0
    assert r.valid == 0
    assert b"lane 5" in r.msg and b"expected 25" in r.msg


# -- clock ---------------------------------------------------------------------

@pytest.mark.parametrize("threads", THREADS)
def test_clock_add_validates_and_counts(threads):
    k = core.find("clock_add")
    assert (k.family, k.isa) == ("clock", "scalar")
    for iters in (1, 99, 100, 101, 12345):
        r = core.run(k, iters=iters, reps=2, warmup=1, nthreads=threads, cpus=CPUS[:threads])
        assert r.valid, r.msg
        assert r.iters == iters * threads
        assert r.check == iters


def test_clock_metrics_from_the_machine_measurement():
    from ceiling.machine import clocks
    from ceiling.machine.model import Clocks
    res = clocks.measure_clock(CPUS, reps=3, target_s=1e-4)
    m = Machine(cpus=[Cpu(id=c, core=c, socket=0, node=0, smt=0) for c in CPUS], affinity=list(CPUS),
                clocks=Clocks(measured_single_values_ghz=res["single_values_ghz"],
                              measured_all_values_ghz=res["all_values_ghz"], measured_method=res["measured_method"]))
    out = compute.clock_metrics(m)
    single, every = out.metrics
    assert (single.name, single.unit, every.name) == ("clock.single", "GHz", "clock.all")
    assert len(single.values) == 3 and single.value == max(res["single_values_ghz"]) > 0
    assert single.context["threads"] == 1 and every.context["threads"] == len(CPUS)
    assert compute.clock_metrics(Machine()).metrics == []


# -- DGEMM ---------------------------------------------------------------------

def test_dgemm_small_validates():
    vals, err, bound = compute.dgemm_run(96, 1, reps=2, warmup=0)
    assert len(vals) == 2
    assert err <= bound


def test_dgemm_residual_catches_a_wrong_product():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (64, 64)), rng.uniform(-1, 1, (64, 64))
    c = a @ b
    err, bound = compute.dgemm_residual(a, b, c)
    assert err <= bound
    c[10, 20] += 1e-9 * np.abs(c).max()
    err, bound = compute.dgemm_residual(a, b, c)
    assert err > bound


def test_sweep_points():
    assert compute.sweep_points(1) == [1]
    assert compute.sweep_points(4) == [1, 2, 3, 4]
    assert compute.sweep_points(48) == [1, 2, 4, 8, 16, 32, 48]
    assert compute.sweep_points(64) == [1, 2, 4, 8, 16, 32, 64]


# -- the bench on a fake machine ------------------------------------------------

def _ctx(**opts):
    cpus = CPUS[:2]
    m = Machine(arch=ARCH, cpus=[Cpu(id=c, core=c, socket=0, node=0, smt=0) for c in CPUS],
                cores=len(CPUS), threads=len(CPUS))
    return Context(machine=m, opts=Options(**opts), cpus=cpus)


@pytest.fixture
def fast(monkeypatch):
    """Tiny calibration targets and a fixed fake peak, so the bench runs in well under a second."""
    calls = []

    def fake_peak(machine, *, precision, cores, isa):
        calls.append((precision, cores, isa))
        return Peak(1000.0 * cores, "Gflop/s", f"fake {precision} {cores} {isa}")

    monkeypatch.setattr(compute, "FLOPS_MIN_TIME_S", 1e-4)
    monkeypatch.setattr(compute, "DGEMM_MIN_TIME_S", 1e-3)
    monkeypatch.setattr(compute, "DGEMM_QUICK_MIN_TIME_S", 1e-3)
    monkeypatch.setattr(compute, "flop_peak", fake_peak)
    return calls


def test_bench_flops_metric_names(fast):
    ctx = _ctx(reps=2)
    out = compute.bench_flops(ctx)
    variants = core.variants("peak_fma_dp")
    widest = variants[0].isa
    want = set()
    for prec in ("dp", "sp"):
        for k in variants:
            suffix = "" if k.isa == widest else f".{k.isa}"
            want |= {f"flops.{prec}.core{suffix}", f"flops.{prec}.node{suffix}"}
    names = [m.name for m in out.metrics]
    assert sorted(names) == sorted(want)
    for m in out.metrics:
        assert m.valid and m.unit == "Gflop/s" and len(m.values) == 2, m.name
        scope = m.name.split(".")[2]
        assert m.context["threads"] == (1 if scope == "core" else len(ctx.cpus))
        assert m.context["cores"] == (1 if scope == "core" else len(ctx.cpus))
        assert m.context["isa"] == (m.name.split(".")[3] if m.name.count(".") == 3 else widest)
        assert m.peak.value == 1000.0 * m.context["cores"]
        assert m.efficiency == pytest.approx(m.value / m.peak.value)
    assert {isa for _, _, isa in fast} == {k.isa for k in variants}


def test_bench_flops_quick_and_forced_isa(fast):
    names = {m.name for m in compute.bench_flops(_ctx(quick=True, reps=1)).metrics}
    assert names == {"flops.dp.core", "flops.dp.node", "flops.sp.core", "flops.sp.node"}
    names = {m.name for m in compute.bench_flops(_ctx(isa="scalar", reps=1)).metrics}
    suffix = "" if core.variants("peak_fma_dp")[0].isa == "scalar" else ".scalar"
    assert names == {f"flops.{p}.{s}{suffix}" for p in ("dp", "sp") for s in ("core", "node")}


def test_smt_siblings_count_as_one_core():
    m = Machine(cpus=[Cpu(id=0, core=0, socket=0, node=0, smt=0), Cpu(id=1, core=0, socket=0, node=0, smt=1),
                      Cpu(id=2, core=1, socket=0, node=0, smt=0)])
    assert compute._cores_of(m, [0, 1, 2]) == 2
    assert compute._cores_of(m, [0, 2]) == 2


def test_bench_dgemm_quick(fast):
    out = compute.bench_dgemm(_ctx(quick=True, reps=2))
    (m,) = out.metrics
    assert m.name == "dgemm.node" and m.valid and m.unit == "Gflop/s"
    assert m.context["residual"] <= m.context["residual_bound"]
    assert m.context["threads"] == len(CPUS[:2])
    assert m.context["n"] % 256 == 0
    assert m.context["blas"]["name"] != "unknown"
    assert m.peak.value == 1000.0 * len(CPUS[:2])
    assert out.series == []


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs for a sweep")
def test_bench_dgemm_sweep(fast):
    out = compute.bench_dgemm(_ctx(reps=1))
    (s,) = out.series
    assert s.name == "dgemm.threads" and s.kind == "xy"
    assert s.x == [1, 2] and all(y > 0 for y in s.y)
    assert s.y[-1] == out.metrics[0].value


def test_blas_is_seen_in_a_fresh_process():
    # threadpoolctl only sees libraries already loaded: the bench must load numpy's BLAS first.
    import subprocess
    import sys
    code = "from ceiling.bench import compute; print(compute._blas_info()[0]['name'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() not in ("", "unknown")


def test_efficiency_above_peak_is_flagged():
    from ceiling.results.model import Metric
    m = compute._check_peak(Metric.measured("flops.dp.core", [60.0], "Gflop/s",
                                            peak=Peak(40.0, "Gflop/s", "fake")))
    assert "theoretical peak" in m.note
    m = compute._check_peak(Metric.measured("flops.dp.core", [39.0], "Gflop/s",
                                            peak=Peak(40.0, "Gflop/s", "fake")))
    assert m.note == ""


def thread_masks():
    """The affinity of every thread of this process, by thread id (one that exits meanwhile is left out)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = os.sched_getaffinity(int(tid))
        except OSError:
            pass
    return out


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs in this process's affinity: pinned to its only CPU, "
                    "a thread's mask is the same whether or not it is put back")
@pytest.mark.parametrize("name", ["peak_fma_dp", "clock_add"])
@pytest.mark.parametrize("cpus", ["both", "worker_refused", "caller_refused"])
def test_pinning_does_not_outlive_the_run(name, cpus):
    # The calling thread is OpenMP thread 0: pinning it and not putting its
    # affinity back would leave the whole process (and BLAS threads it starts
    # later) on one CPU; a pool thread left pinned would run the next unpinned
    # kernel's share on that one CPU. Only the C core restores them (core.run
    # does not), so this fails if ceil_pin_member's restore is lost, on the
    # error path too (one thread pinned, the other refused CPU 1023).
    k = core.find(name)
    core.run(k, iters=10, reps=1, nthreads=2)   # OpenMP's pool exists, unpinned, from here on
    before, threads = os.sched_getaffinity(0), thread_masks()
    assert len(threads) >= 2
    if cpus == "both":
        raw = core.run(k, iters=10, reps=1, nthreads=2, cpus=[CPUS[-1], CPUS[0]])
        assert raw.valid and raw.nthreads == 2, raw.msg
    else:
        placement = [CPUS[-1], 1023] if cpus == "worker_refused" else [1023, CPUS[0]]
        with pytest.raises(CoreError, match="CPU 1023"):
            core.run(k, iters=10, reps=1, nthreads=2, cpus=placement)
    assert os.sched_getaffinity(0) == before
    for tid, mask in thread_masks().items():   # a thread new to this run started with the caller's mask
        assert mask == threads.get(tid, before), f"thread {tid} left on CPUs {sorted(mask)}"


def test_clock_kernel_gives_each_repetitions_thread_cpu_time():
    from ceiling import core as C
    k = C.find("clock_add", "scalar")
    raw = C.run(k, iters=200_000, reps=4, warmup=1, nthreads=len(CPUS), cpus=CPUS, flags=C.F_THREAD_CPU)
    assert raw.valid and len(raw.times_s) == len(raw.cpu_s) == 4
    # a thread's own CPU time is within its window: never above the wall time of the repetition
    assert all(0 < c <= w * 1.01 + 1e-4 for w, c in zip(raw.times_s, raw.cpu_s)), (raw.times_s, raw.cpu_s)
    assert C.run(k, iters=1000, reps=2, nthreads=1, cpus=CPUS[:1]).cpu_s == ()


class _FakeCore:
    """A clock kernel whose threads ran 1e9 adds in 0.25 s of their own CPU time, in windows
    of 0.5 s: they waited for a CPU half the time (another process shared it)."""
    F_THREAD_CPU = 0x4

    def __init__(self, cpu_s):
        self.cpu_s = cpu_s

    def run(self, k, **kw):
        from ceiling.core import RawResult
        assert kw["flags"] & self.F_THREAD_CPU
        n = kw["reps"]
        return RawResult(k, (0.5,) * n, int(1e9) * kw["nthreads"], 0.0, True, False, kw["nthreads"], "",
                         tuple(self.cpu_s[:n]))


def test_the_clock_is_taken_over_the_threads_own_cpu_time_and_waiting_marks_it():
    from ceiling.machine import clocks
    ghz, vals, waited = clocks._ghz(_FakeCore([0.25] * 3), None, [0, 1], 10, 3)
    assert ghz == pytest.approx(4.0) and vals == pytest.approx([4.0] * 3)     # not 2.0 (over wall time)
    assert waited == pytest.approx(0.5)
    said = clocks._disturbed({"CPU 0 alone": 0.0, "all CPUs": waited})
    assert "all CPUs: the threads waited for a CPU 50% of the time" in said and "CPU 0" not in said
    assert clocks._disturbed({"CPU 0 alone": 0.01, "all CPUs": None}) == ""
    # a core that could not read thread CPU time: the wall time, and no claim about waiting
    ghz, _, waited = clocks._ghz(_FakeCore([-1.0] * 3), None, [0], 10, 3)
    assert ghz == pytest.approx(2.0) and waited is None
