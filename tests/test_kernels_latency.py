"""The pointer-chase kernel and the latency bench: the chain's single-cycle
check, the end-of-chase check, parameter errors, huge-page reporting and the
bench's sizes and metrics, on small working sets. No timing is asserted:
latencies on a shared machine are noise.
"""
import ctypes
import os

import numpy as np
import pytest

from ceiling import core
from ceiling.bench import latency
from ceiling.results import curves
from ceiling.results.measure import Context, Options
from ceiling.errors import CoreError
from ceiling.machine.model import Cache, Clocks, Cpu, Machine, NumaNode
from ceiling.results.model import SKIPPED

CPUS = sorted(os.sched_getaffinity(0))
KIB, MIB = 1 << 10, 1 << 20


def chase():
    return core.find("chase")


def run(ws_bytes, stride=64, iters=1000, reps=2, warmup=1, **kw):
    kw.setdefault("cpus", [CPUS[0]])
    return core.run(chase(), ws_bytes=ws_bytes, iters=iters, reps=reps, warmup=warmup, stride=stride, **kw)


# -- the descriptor table ------------------------------------------------------

def test_chase_is_in_the_table():
    k = chase()
    assert (k.family, k.isa, k.supported) == ("latency", "scalar", True)
    assert k.bytes_per_iter == ctypes.sizeof(ctypes.c_void_p)
    assert k.flops_per_iter == 0


# -- the kernel ----------------------------------------------------------------

@pytest.mark.parametrize("size,stride", [(128, 64), (4 * KIB, 64), (64 * KIB + 192, 64), (1 * MIB, 64),
                                         (4 * KIB, 8), (64 * KIB, 128), (256 * KIB, 4096 + 64)])
@pytest.mark.parametrize("iters", [1, 15, 1001, 70_000])
def test_chase_valid_and_single_cycle(size, stride, iters):
    raw = run(size, stride=stride, iters=iters, reps=3)
    assert raw.valid, raw.msg
    assert raw.msg == ""
    assert raw.check == size // stride          # the lap came back after exactly n loads
    assert raw.iters == iters and raw.nthreads == 1
    assert len(raw.times_s) == 3 and all(t > 0 for t in raw.times_s)


@pytest.mark.parametrize("seed", [0, 1, 2**64 - 1])
def test_chase_any_seed(seed):
    raw = run(16 * KIB, iters=777, seed=seed)
    assert raw.valid and raw.check == 256


def test_default_stride_is_a_cache_line():
    raw = core.run(chase(), ws_bytes=64 * KIB, iters=100, reps=1, cpus=[CPUS[0]], stride=0)
    assert raw.valid and raw.check == 64 * KIB // 64


@pytest.mark.parametrize("kw,match", [
    (dict(ws_bytes=64 * KIB, stride=12), "multiple"),
    (dict(ws_bytes=64 * KIB, stride=4), "multiple"),
    (dict(ws_bytes=64, stride=64), "fewer than 2 lines"),
    (dict(ws_bytes=0, stride=64), "fewer than 2 lines"),
    (dict(ws_bytes=64 * KIB, iters=0), "iters"),
    # fields the chase does not read are refused, not ignored
    (dict(ws_bytes=64 * KIB, elements=1000), "elements = 1000 is not a parameter"),
    (dict(ws_bytes=64 * KIB, nthreads=2, cpus=None), "one thread"),
    (dict(ws_bytes=64 * KIB, flags=core.F_NT_STORES), "unknown flags 0x1"),
])
def test_chase_rejects_bad_parameters(kw, match):
    with pytest.raises(CoreError, match=match):
        run(**kw)


def test_chase_rejects_a_cpu_it_cannot_run_on():
    with pytest.raises(CoreError, match="pin"):
        core.run(chase(), ws_bytes=4 * KIB, iters=10, cpus=[1023])


def test_chase_rejects_a_numa_node_that_does_not_exist():
    with pytest.raises(CoreError, match="NUMA node"):
        run(4 * KIB, mem_node=1000)


def test_chase_binds_to_node_0():
    raw = run(4 * MIB, mem_node=0)
    assert raw.valid, raw.msg


@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs in this process's affinity: pinned to its only CPU, "
                    "the caller's mask is the same whether or not it is put back")
@pytest.mark.parametrize("fails", [False, True], ids=["ok", "fails_after_pinning"])
def test_chase_gives_the_caller_its_affinity_back(fails):
    # The chase runs on the calling thread, pinned; only latency.c puts its
    # mask back (core.run does not), on the error paths after the pin too:
    # the NUMA bind fails once the thread is pinned.
    before = os.sched_getaffinity(0)
    if fails:
        with pytest.raises(CoreError, match="NUMA node"):
            core.run(chase(), ws_bytes=4 * KIB, iters=10, cpus=[CPUS[-1]], mem_node=1000)
    else:
        raw = core.run(chase(), ws_bytes=4 * KIB, iters=10, cpus=[CPUS[-1]])
        assert raw.valid, raw.msg
    assert os.sched_getaffinity(0) == before


def test_huge_pages_reported_without_error():
    # Without the flag the allocator advises against huge pages (MADV_NOHUGEPAGE), so none back it.
    plain = run(8 * MIB)
    assert plain.valid and not plain.hugepages
    mode, src = latency.thp_mode()
    asked = run(8 * MIB, flags=core.F_HUGEPAGES)
    assert asked.valid, asked.msg
    if mode == "never":
        assert asked.hugepages is False
    elif mode in ("always", "madvise"):
        # With the flag ceil_alloc advises MADV_HUGEPAGE on a 2 MiB-aligned
        # range, which both policies honour, and hugepages says smaps shows at
        # least half of it on huge pages (what the latency bench relies on).
        assert asked.hugepages is True, f"THP policy {mode!r} ({src}) but the 8 MiB set is not on huge pages"
    else:
        pytest.skip(f"transparent huge page policy unknown: {src}")


# -- the cycle check, on chains built here -------------------------------------

def _cycle_length(chain, n, stride_words=1, order=None):
    fn = core._lib().ceil_chase_cycle_length
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return fn(chain.ctypes.data, n, 8 * stride_words, None if order is None else order.ctypes.data)


def _chain(nxt, stride_words=1):
    """A pointer chain in a NumPy buffer: line i points to line nxt[i]."""
    n = len(nxt)
    buf = np.zeros(n * stride_words, dtype=np.uint64)
    base = buf.ctypes.data
    for i, j in enumerate(nxt):
        buf[i * stride_words] = base + 8 * stride_words * j
    return buf


def test_cycle_check_accepts_one_cycle_and_reports_the_order():
    rng = np.random.default_rng(7)
    perm = rng.permutation(50)
    nxt = np.empty(50, dtype=np.int64)
    nxt[perm] = np.roll(perm, -1)                # one cycle in the order of perm
    start = int(np.where(perm == 0)[0][0])
    want_order = np.roll(perm, -start)
    order = np.zeros(50, dtype=np.uint32)
    assert _cycle_length(_chain(nxt, 2), 50, 2, order) == 50
    assert list(order) == list(want_order)


def test_cycle_check_catches_two_cycles():
    # (0 1 2)(3 4 5): a lap from line 0 is back after 3 loads, not 6.
    assert _cycle_length(_chain([1, 2, 0, 4, 5, 3]), 6) == 3


def test_cycle_check_catches_a_chain_that_never_returns():
    # 0 -> 1 -> 2 -> 1: a rho, line 0 is never seen again.
    assert _cycle_length(_chain([1, 2, 1]), 3) == -1


def test_cycle_check_catches_pointers_out_of_the_lines():
    buf = _chain([1, 2, 0])
    buf[1] = buf.ctypes.data + 8 * 3             # one past the last line
    assert _cycle_length(buf, 3) == -1
    buf = _chain([1, 2, 0], stride_words=2)
    buf[2] += 8                                  # inside the set, but not at a line's start
    assert _cycle_length(buf, 3, 2) == -1


# -- the bench -----------------------------------------------------------------

def fake_machine(ghz=3.0, nodes=1, llc=256 * KIB, instances=1):
    cpu = CPUS[0]
    m = Machine(hostname="fake", arch="x86_64", sockets=1, cores=1, threads=1,
                cpus=[Cpu(id=cpu, core=0, socket=0, node=0, smt=0, l2=0, l3=0)],
                nodes=[NumaNode(i, [cpu], 1 << 30, [10 if i == j else 20 for j in range(nodes)])
                       for i in range(nodes)],
                caches=[Cache(1, "data", 8 * KIB, 64, 1, 1), Cache(1, "instruction", 32 * KIB, 64, 1, 1),
                        Cache(2, "unified", 64 * KIB, 64, 1, 1), Cache(3, "unified", llc, 64, instances, 1)],
                affinity=[cpu])
    m.clocks = Clocks(measured_single_ghz=ghz)
    return m


def test_dram_working_set_rule():
    m = fake_machine(llc=32 * MIB)
    ws, info = latency.dram_working_set(m, mem_available=64 << 30)
    assert ws == 1 << 30                          # 32 x the 32 MiB instance
    assert info["llc_hit_fraction_estimate"] == pytest.approx(1 / 32, abs=1e-4)
    assert latency.dram_working_set(m, mem_available=64 << 30, factor=16)[0] == 512 * MIB
    m8 = fake_machine(llc=32 * MIB, instances=8)
    assert latency.dram_working_set(m8, mem_available=64 << 30)[0] == 1 << 30   # 32 x 32 MiB > 4 x 256 MiB
    m40 = fake_machine(llc=32 * MIB, instances=40)
    assert latency.dram_working_set(m40, mem_available=64 << 30)[0] == 4 * 40 * 32 * MIB
    small = fake_machine(llc=1 * MIB)
    assert latency.dram_working_set(small, mem_available=64 << 30)[0] == 256 * MIB
    capped, info = latency.dram_working_set(m, mem_available=1 << 30)
    assert capped == 256 * MIB and "capped" in info["size_note"]
    # quick mode's cap: a 480 MiB L3 asked for 7.5 GiB (about 5 s a GiB to build the chain)
    big = fake_machine(llc=480 * MIB)
    ws, info = latency.dram_working_set(big, mem_available=64 << 30, factor=16, cap=latency.QUICK_DRAM_MAX_BYTES)
    assert ws == 1 << 30 and "quick mode" in info["size_note"] and "47%" in info["size_note"]
    assert info["llc_hit_fraction_estimate"] == pytest.approx(480 / 1024, abs=1e-4)
    assert latency.dram_working_set(m, mem_available=64 << 30, factor=16, cap=1 << 30)[0] == 512 * MIB
    user, info = latency.dram_working_set(m, size_bytes=1000)
    assert user == 960 and info["size_rule"] == "set by the user"
    unknown = Machine()
    ws, info = latency.dram_working_set(unknown, mem_available=64 << 30)
    assert ws == 1 << 30 and "unknown" in info["llc_note"]


def test_level_working_sets_are_half_of_each_level():
    m = fake_machine()
    assert latency.level_working_sets(m, 4 * MIB) == {"l1": 4 * KIB, "l2": 32 * KIB, "l3": 128 * KIB,
                                                      "dram": 4 * MIB}


def test_each_level_is_read_on_its_plateau():
    m = fake_machine(llc=32 * MIB)
    m.caches[2] = Cache(2, "unified", 512 * KIB, 64, 1, 1)
    assert latency.plateau_ranges(m) == {"l1": (0, 4 * KIB), "l2": (16 * KIB, 256 * KIB),
                                         "l3": (1 * MIB, 16 * MIB)}
    # a VM's staircase: the L3 plateau at 18 ns, then the TLB's reach runs out inside the L3
    xs = [512 * KIB, 1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 64 * MIB]
    ys = [3.7, 19.0, 18.2, 18.5, 40.0, 234.0, 250.0]
    assert latency.plateau_point(xs, ys, 1 * MIB, 16 * MIB) == 2 * MIB
    assert latency.plateau_point(xs, [None] * 7, 1 * MIB, 16 * MIB) is None
    assert latency.plateau_point(xs, ys, 100 * MIB, 200 * MIB) is None


def test_sweep_sizes():
    s = latency.sweep_sizes(16 * KIB, 16 * MIB, 4)
    assert s[0] == 16 * KIB and s[-1] == 16 * MIB
    assert len(s) == 41 and s == sorted(s) and all(x % 64 == 0 for x in s)
    assert len(latency.sweep_sizes(16 * KIB, 16 * MIB, 1)) == 11


def test_thp_mode_reads_the_selected_policy(tmp_path):
    d = tmp_path / "sys/kernel/mm/transparent_hugepage"
    d.mkdir(parents=True)
    (d / "enabled").write_text("always [madvise] never\n")
    assert latency.thp_mode(str(tmp_path))[0] == "madvise"
    (d / "enabled").write_text("always madvise [never]\n")
    assert latency.thp_mode(str(tmp_path))[0] == "never"
    assert latency.thp_mode(str(tmp_path / "nowhere"))[0] is None


def _ctx(m, **opts):
    return Context(m, Options(quick=True, **opts), [CPUS[0]])


def test_bench_latency_sweep_and_level_metrics():
    m = fake_machine(ghz=3.0)
    out = latency.bench_latency(_ctx(m, size_bytes=1 * MIB, reps=2))
    (s,) = out.series
    assert s.name == "latency.size" and s.kind == "xy" and s.y_unit == "ns"
    assert s.x == sorted(s.x) and s.x[0] <= 16 * KIB and s.x[-1] == 1 * MIB
    assert all(y is not None and y > 0 for y in s.y)
    assert not s.context.get("invalid")
    assert [mt.name for mt in out.metrics] == ["latency.l1", "latency.l2", "latency.l3", "latency.dram"]
    # each level on its plateau: beyond twice the level below, within half of its own
    ranges = {"l1": (0, 4 * KIB), "l2": (16 * KIB, 32 * KIB), "l3": (128 * KIB, 128 * KIB), "dram": None}
    for mt in out.metrics:
        level = mt.name.split(".")[1]
        assert mt.valid and mt.unit == "ns" and mt.better == "lower"
        assert len(mt.values) == 2 and mt.value == min(mt.values)
        c = mt.context
        ws = c["working_set_bytes"]
        if ranges[level] is None:
            assert ws == 1 * MIB
        else:
            lo, hi = ranges[level]
            assert lo < ws <= hi or ws == hi, (level, ws)
        assert c["stride"] == 64 and c["cpu"] == CPUS[0]
        assert c["cycles"] == pytest.approx(mt.value * 3.0, rel=1e-12)
        assert isinstance(c["hugepages"], bool)
        assert s.y[s.x.index(ws)] == pytest.approx(mt.value)


def test_bench_latency_in_a_vm_notes_the_hosts_pages():
    m = fake_machine()
    m.virtualized = "KVM"
    out = latency.bench_latency(_ctx(m, size_bytes=256 * KIB, reps=1))
    assert "KVM" in out.series[0].context["vm_note"]
    notes = {mt.name: mt.context.get("vm_note") for mt in out.metrics}
    assert notes["latency.l1"] is None and "nested page walk" in notes["latency.dram"]


def test_bench_latency_without_a_measured_clock_says_why():
    m = fake_machine(ghz=None)
    m.unknowns["clocks.measured"] = "not measured: no core"
    out = latency.bench_latency(_ctx(m, size_bytes=256 * KIB, reps=1))
    for mt in out.metrics:
        assert mt.context["cycles"] is None
        assert "no core" in mt.context["cycles_note"]


def test_numa_latency_with_one_node_is_skipped():
    out = latency.bench_numa_latency(_ctx(fake_machine()))
    assert not out.metrics and not out.series
    (f,) = out.findings
    assert f.id == "bench.numa_latency" and f.status == SKIPPED and "one NUMA" in f.title


def test_numa_latency_matrix_degrades_on_a_node_that_cannot_be_bound():
    # Two nodes in the model, but this machine has no node 1 (or it refuses
    # the bind): those cells are None with the reason, the rest is measured.
    if os.path.exists("/sys/devices/system/node/node1"):
        pytest.skip("this machine really has a node 1")
    m = fake_machine(nodes=2)
    out = latency.bench_numa_latency(_ctx(m, size_bytes=256 * KIB, reps=1))
    (s,) = out.series
    assert s.name == "latency.numa" and s.kind == "matrix" and s.labels == ["0", "1"]
    assert s.matrix[0][0] is not None and s.matrix[1][0] is not None
    assert s.matrix[0][1] is None and s.matrix[1][1] is None
    assert len(s.context["errors"]) == 2
    assert not out.metrics          # no remote cell: no factor


def test_numa_factor():
    f, where = curves.numa_factor([[100.0, 150.0], [140.0, 90.0]])
    assert f == pytest.approx(140 / 90)
    assert (where["cpu_node_index"], where["memory_node_index"]) == (1, 0)
    assert curves.numa_factor([[100.0, None], [None, None]])[0] is None


def test_bench_latency_keeps_going_when_a_point_cannot_run():
    # A CPU the process cannot pin to: every point fails with its reason, and
    # the bench returns an empty-valued series rather than raising.
    m = fake_machine()
    out = latency.bench_latency(Context(m, Options(quick=True, size_bytes=64 * KIB, reps=1), [1023]))
    (s,) = out.series
    assert s.x and all(y is None for y in s.y)
    assert len(s.context["invalid"]) == len(s.x) and "pin" in s.context["invalid"][0]
    assert not out.metrics


def test_local_over_remote():
    assert curves.local_over_remote([[100.0, 50.0], [60.0, 90.0]]) == pytest.approx(95.0 / 55.0)
    assert curves.local_over_remote([[100.0, None], [None, None]]) is None


def test_a_level_distorted_inside_says_so_with_both_figures(monkeypatch):
    import dataclasses
    m = fake_machine(llc=32 * MIB)
    m.caches[2] = Cache(2, "unified", 512 * KIB, 64, 1, 1)
    m.virtualized = "KVM"
    real = latency._Chaser.run
    template = {}

    def staircase(self, size, cpu, mem_node=-1):
        if "raw" not in template:
            template["raw"] = real(self, 64 * KIB, cpu)
        ns = 1.2 if size <= 4 * KIB else 3.7 if size <= 256 * KIB else 18.0 if size <= 4 * MIB else \
            40.0 if size <= 8 * MIB else 234.0
        raw = template["raw"]
        return dataclasses.replace(raw, times_s=tuple(ns * 1e-9 * raw.iters for _ in raw.times_s))

    monkeypatch.setattr(latency._Chaser, "run", staircase)
    out = latency.bench_latency(_ctx(m, size_bytes=1 << 30, reps=1))
    l3 = next(mt for mt in out.metrics if mt.name == "latency.l3")
    assert l3.value == pytest.approx(18.0) and l3.context["working_set_bytes"] <= 4 * MIB
    assert l3.context["at_half_capacity_ns"] == pytest.approx(234.0)
    assert "rises inside this level, from 18 ns" in l3.note and "234 ns at 16384 KiB" in l3.note
    assert "host's page size" in l3.note


# -- the page size of every figure -------------------------------------------------

def test_page_sizes_and_their_words(tmp_path):
    d = tmp_path / "sys/kernel/mm/transparent_hugepage"
    d.mkdir(parents=True)
    (d / "hpage_pmd_size").write_text("2097152\n")
    base, huge = latency.page_sizes(str(tmp_path))
    assert base == os.sysconf("SC_PAGE_SIZE") and huge == 2 << 20
    assert latency.page_sizes(str(tmp_path / "nowhere"))[1] is None
    assert latency.pages_context(True, (4096, 2 << 20)) == {
        "pages": "2 MiB pages (transparent huge pages, madvise)", "page_bytes": 2 << 20}
    assert latency.pages_context(False, (4096, 2 << 20)) == {"pages": "4 KiB pages", "page_bytes": 4096}
    assert latency.pages_context(True, (4096, None))["page_bytes"] is None


def test_pages_differ_only_beyond_the_noise():
    assert latency.pages_differ([100.0, 101.0], [120.0, 121.0])
    assert not latency.pages_differ([100.0, 101.0], [103.0, 104.0])        # within 5 %
    assert not latency.pages_differ([100.0, 130.0], [120.0, 121.0])        # the repetitions overlap
    assert latency.pages_differ([120.0, 121.0], [100.0, 101.0])            # faster on base pages: said too
    assert not latency.pages_differ([], [1.0])


def test_quick_mode_states_the_pages_of_every_figure():
    out = latency.bench_latency(_ctx(fake_machine(), size_bytes=1 * MIB, reps=1))
    assert [mt.name for mt in out.metrics] == ["latency.l1", "latency.l2", "latency.l3", "latency.dram"]
    for mt in out.metrics:
        assert mt.context["pages"] and mt.context["page_bytes"] in (os.sysconf("SC_PAGE_SIZE"),
                                                                     latency.page_sizes()[1])
        assert ("huge" in mt.context["pages"]) == mt.context["hugepages"]
        if mt.context["hugepages"]:
            assert "not measured in quick mode" in mt.context["small_pages"]
    assert "pages" in out.series[0].context


def test_the_full_bench_gives_both_page_sizes_where_they_differ(monkeypatch):
    # Base pages slow DRAM by 10 % (lmbench's 172.7 ns against 158.9 ns on a Zen 5 guest) and
    # change nothing in L1: DRAM gets a figure of its own, L1 only a line in its context.
    import dataclasses
    m = fake_machine()
    real = latency._Chaser.run
    template = {}

    def staircase(self, size, cpu, mem_node=-1):
        if "raw" not in template:
            template["raw"] = real(self, 64 * KIB, cpu)
        ns = 1.2 if size <= 4 * KIB else 3.7 if size <= 32 * KIB else 20.0 if size <= 128 * KIB else 100.0
        if self.flags == 0 and size > 128 * KIB:
            ns *= 1.1
        raw = template["raw"]
        return dataclasses.replace(raw, times_s=tuple(ns * 1e-9 * raw.iters for _ in raw.times_s),
                                   hugepages=self.flags != 0)

    monkeypatch.setattr(latency._Chaser, "run", staircase)
    out = latency.bench_latency(Context(m, Options(quick=False, size_bytes=1 * MIB, reps=2), [CPUS[0]]))
    names = [mt.name for mt in out.metrics]
    assert names == ["latency.l1", "latency.l2", "latency.l3", "latency.dram", "latency.dram.small_pages"]
    ms = {mt.name: mt for mt in out.metrics}
    dram, small = ms["latency.dram"], ms["latency.dram.small_pages"]
    assert dram.value == pytest.approx(100.0) and small.value == pytest.approx(110.0)
    assert dram.context["page_bytes"] != small.context["page_bytes"] == os.sysconf("SC_PAGE_SIZE")
    assert small.context["working_set_bytes"] == dram.context["working_set_bytes"]
    assert small.context["huge_pages_ns"] == pytest.approx(100.0)
    assert "latency.dram.small_pages" in dram.context["small_pages"] and "1.10x" in dram.context["small_pages"]
    assert "no different" in ms["latency.l1"].context["small_pages"]
    from ceiling.report.labels import headline
    from ceiling.results.model import Run
    run = Run(tool_version="0", host="h", started="", command=[], metrics=out.metrics)
    labels = [text for text, _ in headline(run)]
    assert "DRAM latency (4 KiB pages)" in labels or os.sysconf("SC_PAGE_SIZE") != 4096
    assert any(text.startswith("DRAM latency (") and "4 KiB" not in text for text in labels)
