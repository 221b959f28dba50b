"""Bandwidth kernels (STREAM, load_sum) and the memory bench: correctness,
validation, partitioning and error handling on small arrays. No timing is
asserted: rates on a shared machine are noise.

The kernels' data is fixed (csrc/kernels/bw.h): v(i) = i mod 65521;
a = 1 + v, b = 2 + 2v, c = 0.25 + 0.5v before a STREAM kernel, and a = v for
load_sum. Every result is exact in double precision, so the kernels' check
values are compared with NumPy exactly.
"""
import os

import numpy as np
import pytest

from ceiling import core
from ceiling.bench import memory
from ceiling.results.measure import Context, Options
from ceiling.errors import BadValueError, CoreError
from ceiling.machine.model import Cache, Cpu, Machine, NumaNode
from ceiling.results.model import Peak

CPUS = sorted(os.sched_getaffinity(0))
THREADS = sorted({1, min(2, len(CPUS))})
PERIOD = 65521
STREAM = ("stream_copy", "stream_scale", "stream_add", "stream_triad")
NAMES = STREAM + ("load_sum",)
# bytes and flops per iteration, STREAM's counting
WORK = {"stream_copy": (16, 0), "stream_scale": (16, 1), "stream_add": (24, 1),
        "stream_triad": (24, 2), "load_sum": (8, 1)}


def bw_variants(supported=True):
    return [k for k in core.kernels() if k.family == "bandwidth" and k.supported == supported]


def ids(k):
    return f"{k.name}-{k.isa}"


def v(n):
    return (np.arange(n, dtype=np.int64) % PERIOD).astype(np.float64)


def written_sum(name, n):
    """Sum of the array a STREAM kernel writes, from its analytic value."""
    x = v(n)
    out = {"stream_copy": 1.0 + x, "stream_scale": 3.0 * (0.25 + 0.5 * x),
           "stream_add": (1.0 + x) + (2.0 + 2.0 * x), "stream_triad": (2.0 + 2.0 * x) + 3.0 * (0.25 + 0.5 * x)}
    return float(np.sum(out[name]))


def run(k, n, threads=1, **kw):
    kw.setdefault("iters", 2)
    kw.setdefault("reps", 2)
    kw.setdefault("warmup", 1)
    cpus = CPUS[:threads] if threads <= len(CPUS) else None
    return core.run(k, elements=n, nthreads=threads, cpus=cpus, **kw)


# -- the descriptor table ------------------------------------------------------

def test_every_isa_has_every_kernel_with_streams_byte_counts():
    rows = [k for k in core.kernels() if k.family == "bandwidth"]
    isas = {k.isa for k in rows}
    assert "scalar" in isas
    for isa in isas:
        got = {k.name: (k.bytes_per_iter, k.flops_per_iter) for k in rows if k.isa == isa}
        assert got == WORK, isa


def test_the_widest_supported_variant_is_found():
    k = core.find("stream_triad")
    assert k.supported and k == core.variants("stream_triad")[0]


# -- every variant validates ---------------------------------------------------

SIZES = (1, 7, 1000, 4096 + 3, 131072)   # 8 B .. 1 MiB per array


@pytest.mark.parametrize("k", bw_variants(), ids=ids)
@pytest.mark.parametrize("threads", THREADS)
def test_variant_is_valid_and_its_check_matches_numpy(k, threads):
    for n in SIZES:
        raw = run(k, n, threads)
        assert raw.valid, (n, raw.msg)
        assert raw.msg == ""
        assert raw.iters == 2 * n
        assert raw.nthreads == threads
        assert len(raw.times_s) == 2 and all(t > 0 for t in raw.times_s)
        want = float(np.sum(v(n))) if k.name == "load_sum" else written_sum(k.name, n)
        assert raw.check == want, (n, raw.check, want)


@pytest.mark.parametrize("k", [k for k in bw_variants() if k.name in STREAM], ids=ids)
def test_non_temporal_stores_are_valid(k):
    for n in (5, 4096 + 3, 131072 + 1):
        for threads in THREADS:
            raw = run(k, n, threads, flags=core.F_NT_STORES)
            assert raw.valid, (n, threads, raw.msg)
            assert raw.check == written_sum(k.name, n)


def thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "never"


@pytest.mark.parametrize("k", bw_variants(), ids=ids)
def test_huge_pages_are_reported_only_when_asked_and_present(k):
    plain = run(k, 300_000, 1, iters=1, reps=1)
    huge = run(k, 300_000, 1, iters=1, reps=1, flags=core.F_HUGEPAGES)
    assert plain.valid and huge.valid, (plain.msg, huge.msg)
    assert plain.hugepages is False
    if thp_mode() == "never":
        assert huge.hugepages is False


def test_load_sum_spans_the_period_and_equals_the_closed_form():
    """n beyond one period of the data, split over threads at odd boundaries."""
    n = 3 * PERIOD + 17
    q, r = divmod(n, PERIOD)
    closed = q * PERIOD * (PERIOD - 1) // 2 + r * (r - 1) // 2
    for k in [k for k in bw_variants() if k.name == "load_sum"]:
        for threads in THREADS:
            raw = run(k, n, threads, iters=3)
            assert raw.valid and raw.check == float(closed) == float(np.sum(v(n)))


@pytest.mark.parametrize("k", bw_variants(), ids=ids)
def test_partition_with_sizes_not_divisible_by_threads_or_vector_width(k):
    """More threads than CPUs too (unpinned): chunks of zero and odd lengths."""
    for threads in (1, 2, 3, 5):
        for n in (1, 2, 3, 9, 17, 33, 65, 127, 1001, 8 * 64 + 1):
            raw = core.run(k, elements=n, iters=1, reps=1, nthreads=threads)
            assert raw.valid, (threads, n, raw.msg)
            want = float(np.sum(v(n))) if k.name == "load_sum" else written_sum(k.name, n)
            assert raw.check == want


def test_memory_bound_to_node_zero_is_valid():
    node0 = sorted(int(d[4:]) for d in os.listdir("/sys/devices/system/node") if d.startswith("node")) \
        if os.path.isdir("/sys/devices/system/node") else [0]
    raw = run(core.find("stream_triad"), 4096, 1, mem_node=node0[0])
    assert raw.valid, raw.msg


def test_affinity_is_restored_after_a_pinned_run():
    before = os.sched_getaffinity(0)
    run(core.find("stream_copy"), 4096, len(THREADS))
    assert os.sched_getaffinity(0) == before


# -- bad parameters --------------------------------------------------------------

BAD = [
    ({"elements": 0}, "elements"),
    ({"elements": -5}, "elements"),
    ({"nthreads": 0}, "nthreads"),
    ({"iters": 0}, "iters"),
    ({"warmup": -1}, "warmup"),
    ({"flags": 0x100}, "flags"),
    ({"mem_node": 1000}, "NUMA node"),
    ({"cpus": [1 << 20]}, "pin"),
    # fields a bandwidth kernel does not read are refused, not ignored
    ({"ws_bytes": 4096}, "ws_bytes = 4096 is not a parameter"),
    ({"stride": 64}, "stride = 64 is not a parameter"),
]


@pytest.mark.parametrize("k", [core.find(n, "scalar") for n in ("stream_triad", "load_sum")], ids=ids)
@pytest.mark.parametrize("kw,words", BAD, ids=[w for _, w in BAD])
def test_bad_parameters_raise_core_error(k, kw, words):
    args = dict(elements=1000, iters=1, reps=1, nthreads=1)
    args.update(kw)
    with pytest.raises(CoreError, match=words):
        core.run(k, **args)


@pytest.mark.parametrize("k", bw_variants(supported=False), ids=ids)
def test_unsupported_isa_is_refused(k):
    with pytest.raises(CoreError, match="ISA"):
        core.run(k, elements=1000, iters=1, reps=1, nthreads=1)


# -- the bench module ------------------------------------------------------------

def fake_machine(l1=32 * 1024, l2=512 * 1024, l3=8 << 20, nodes=None):
    cpus = [Cpu(id=c, core=i, socket=0, node=0, smt=0, l2=i, l3=0) for i, c in enumerate(CPUS)]
    caches = [Cache(1, "data", l1, 64, len(CPUS), 1), Cache(1, "instruction", l1, 64, len(CPUS), 1),
              Cache(2, "unified", l2, 64, len(CPUS), 1), Cache(3, "unified", l3, 64, 1, len(CPUS))]
    return Machine(cpus=cpus, caches=caches, affinity=list(CPUS), threads=len(CPUS),
                   nodes=nodes or [NumaNode(0, list(CPUS), 1 << 30, [10])],
                   peaks={"membw.node": Peak(100.0, "GB/s", "test figure")})


def ctx_for(machine, **opts):
    return Context(machine, Options(**opts), CPUS[:max(THREADS)])


def test_stream_size_follows_streams_rule():
    m = fake_machine(l3=32 << 20)
    elems, info = memory.stream_array_elements(m, mem_available=1 << 40)
    assert elems == 4 * (32 << 20) // 8 and "4 x" in info["size_rule"]
    small, _ = memory.stream_array_elements(fake_machine(l3=1 << 20), mem_available=1 << 40)
    assert small == memory.STREAM_MIN_ELEMENTS
    capped, info = memory.stream_array_elements(m, mem_available=96 << 20)
    assert capped * 8 * 3 <= 48 << 20 and "capped" in info["size_note"]
    unknown, info = memory.stream_array_elements(Machine(), mem_available=1 << 40)
    assert unknown == 4 * memory.UNKNOWN_LLC_BYTES // 8 and "unknown" in info["llc_note"]
    user, info = memory.stream_array_elements(m, 8000, mem_available=1 << 40)
    assert user == 1000 and info["size_rule"] == "set by the user"
    # quick mode caps each array at 1 GiB: a 480 MiB L3 asked for 1.9 GiB arrays
    big = fake_machine(l3=480 << 20)
    quick, info = memory.stream_array_elements(big, mem_available=1 << 40, quick=True)
    assert quick == (1 << 30) // 8 and "6.4x" in info["size_note"]
    assert memory.stream_array_elements(m, mem_available=1 << 40, quick=True)[0] == elems
    with pytest.raises(BadValueError):
        memory.stream_array_elements(m, 4)
    with pytest.raises(BadValueError):
        memory.stream_array_elements(m, 1 << 40, mem_available=1 << 30)


def test_thread_counts_and_saturation():
    assert memory.thread_counts(1) == [1]
    assert memory.thread_counts(6) == [1, 2, 3, 4, 5, 6]
    big = memory.thread_counts(128)
    assert big[:8] == list(range(1, 9)) and big[-1] == 128 and big == sorted(set(big))
    assert len(big) < 20 and {12, 16, 32, 64, 96} <= set(big)
    assert memory.thread_counts(10) == list(range(1, 9)) + [10]
    assert memory.saturation([1, 2, 4, 8], [10.0, 19.0, 20.0, 19.5]) == 2
    assert memory.saturation([1, 2], [None, 5.0]) == 2
    assert memory.saturation([1], [None]) is None


def test_level_working_sets_are_inside_each_level():
    m = fake_machine()
    two = CPUS[:2]
    ws = memory.level_working_sets(m, two)
    n = len(two)
    assert ws["l1"] == 32 * 1024 * n // 2
    assert ws["l2"] == 512 * 1024 * n // 2
    assert ws["l3"] == (8 << 20) // 2
    assert ws["dram"] == max(4 * (8 << 20), memory.DRAM_MIN_BYTES)
    no_l3 = Machine(caches=[Cache(1, "data", 32768, 64, 4, 1), Cache(2, "unified", 1 << 20, 64, 1, 4)])
    ws = memory.level_working_sets(no_l3, [0, 1])
    assert "l3" not in ws and ws["l2"] == (1 << 20) // 2 and ws["l1"] == 32768


def test_sweep_sizes_are_geometric_and_include_the_levels():
    s = memory.sweep_sizes(16384, 16384 * 16, 2, extra=[100_000])
    assert s[0] == 16384 and s[-1] == 16384 * 16 and 100_000 // 64 * 64 in s
    assert len(s) == 2 * 4 + 1 + 1 and all(x % 64 == 0 for x in s)


def test_bench_stream_metrics_are_valid_with_context():
    ctx = ctx_for(fake_machine(l3=1 << 20), size_bytes=1 << 20, reps=2)     # 3 MiB of arrays, 1 MiB of L3
    out = memory.bench_stream(ctx)
    assert [m.name for m in out.metrics] == ["stream.copy", "stream.scale", "stream.add", "stream.triad"]
    for m in out.metrics:
        assert m.valid and m.unit == "GB/s" and m.value == m.stats.best > 0 and len(m.values) == 2
        assert m.stats.min <= m.stats.mean <= m.stats.max
        assert m.context["array_elements"] == (1 << 20) // 8 and m.context["total_bytes"] == 3 << 20
        assert m.context["threads"] == len(ctx.cpus) and m.context["nt_stores"] is False
        assert m.efficiency == pytest.approx(m.value / 100.0)
    assert "below STREAM's rule of 4x" in out.metrics[0].context["size_note"]
    nt = memory.bench_stream(ctx_for(fake_machine(l3=1 << 20), size_bytes=1 << 20, reps=1, nt_stores=True))
    assert all(m.valid and m.context["nt_stores"] for m in nt.metrics)


def test_a_working_set_inside_the_caches_is_kept_apart():
    """`bench memory --size 1MiB` on a node with 8 MiB of L3 measures the caches: its figures
    get their own names (the history never mixes them with memory's), no memory peak, and a
    warning (issue 10, item 7)."""
    out = memory.bench_stream(ctx_for(fake_machine(l3=8 << 20), size_bytes=1 << 20, reps=1))
    assert [m.name for m in out.metrics] == ["stream.copy.incache", "stream.scale.incache",
                                             "stream.add.incache", "stream.triad.incache"]
    assert all(m.efficiency is None and "not memory bandwidth" in m.note for m in out.metrics)
    (f,) = out.findings
    assert f.status == "warn" and "fit in the 8388608 bytes of last-level cache" in f.evidence
    (s,) = memory.bench_stream_threads(ctx_for(fake_machine(l3=8 << 20), size_bytes=1 << 20, reps=1)).series
    assert "in_cache" in s.context and "in the caches" in s.title


def test_bench_stream_threads_series():
    out = memory.bench_stream_threads(ctx_for(fake_machine(), size_bytes=1 << 20, reps=1))
    (s,) = out.series
    assert s.name == "stream.triad.threads" and s.x == [float(n) for n in memory.thread_counts(len(s.x))]
    assert all(y is not None and y > 0 for y in s.y)
    assert s.context["saturation_threads"] in s.x and "saturates" in s.context["note"]


def test_bench_cache_bandwidth_metrics_and_series(monkeypatch):
    monkeypatch.setattr(memory, "DRAM_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(memory, "SWEEP_QUICK_REP_S", 0.0002)
    m = fake_machine(l1=4096, l2=16384, l3=128 * 1024)
    out = memory.bench_cache_bandwidth(ctx_for(m, quick=True, reps=1))
    assert [x.name for x in out.metrics] == ["bandwidth.l1", "bandwidth.l2", "bandwidth.l3", "bandwidth.dram"]
    assert all(x.valid and x.value > 0 for x in out.metrics)
    assert out.metrics[-1].peak.value == 100.0 and out.metrics[0].peak is None
    load, triad = out.series
    assert (load.name, triad.name) == ("bandwidth.load.size", "bandwidth.triad.size")
    for s in (load, triad):
        assert s.x == sorted(s.x) and s.x[-1] >= 4 * 128 * 1024 - 64
        assert all(y is not None and y > 0 for y in s.y) and "invalid" not in s.context
    ws = [x.context["working_set_bytes"] for x in out.metrics]
    assert ws == sorted(ws) and all(w in load.x for w in ws)


def test_numa_bandwidth_skips_with_one_domain():
    out = memory.bench_numa_bandwidth(ctx_for(fake_machine()))
    (f,) = out.findings
    assert f.id == "bench.numa_bandwidth" and f.status == "skipped" and "one NUMA domain" in f.title
    assert not out.metrics and not out.series


def test_numa_bandwidth_matrix_degrades_per_cell():
    """Two nodes in the model, one in the kernel: the missing node's column is None, with why."""
    nodes = [NumaNode(0, CPUS[:1], 1 << 30, [10, 20]), NumaNode(999, CPUS[1:] or CPUS[:1], 1 << 30, [20, 10])]
    out = memory.bench_numa_bandwidth(ctx_for(fake_machine(nodes=nodes), size_bytes=1 << 20, reps=1))
    (s,) = out.series
    assert s.name == "stream.triad.numa" and s.kind == "matrix" and s.labels == ["0", "999"]
    assert s.matrix[0][0] is not None and s.matrix[0][0] > 0
    assert s.matrix[0][1] is None and s.matrix[1][1] is None
    assert any("999" in e for e in s.context["errors"])
