"""analysis.summary: which subsystem is furthest below its peak (as data); report.labels: the words for it."""
import pytest

from ceiling.analysis import summary
from ceiling.report import labels
from ceiling.results.model import LOWER, Metric, Peak, Run, Stats

import sample_runs


def _run(*metrics, machine=None):
    return Run(tool_version="0", host="h", started="", command=[], metrics=list(metrics), machine=machine or {})


def _below(run):
    """The metric furthest below peak, and the sentence the reports print for the stored verdict."""
    m = summary.furthest_below_peak(run)
    if m is None:
        return None, None
    run.analysis.verdict = summary.verdict(run)
    return m, labels.verdict_text(run).removeprefix("Furthest below peak - ")


def _verdict_text(run):
    run.analysis.verdict = summary.verdict(run)
    return labels.verdict_text(run)


def test_sentence_matches_the_agreed_wording():
    peak = Peak(62.4, "GB/s", "4 channels × 1950 MT/s × 8 B")
    triad = Metric.measured("stream.triad", [38.1, 37.0], "GB/s", peak=peak)
    m, text = _below(_run(triad))
    assert m is triad
    assert text == ("Memory bandwidth: STREAM triad 38.1 GB/s is 61% of the 62.4 GB/s peak "
                    "(4 channels × 1950 MT/s × 8 B)")


def test_lowest_efficiency_wins():
    flops = Metric.measured("flops.dp.node", [90.0], "Gflop/s", peak=Peak(100.0, "Gflop/s", "f"))
    triad = Metric.measured("stream.triad", [50.0], "GB/s", peak=Peak(100.0, "GB/s", "b"))
    dgemm = Metric.measured("dgemm.node", [70.0], "Gflop/s", peak=Peak(100.0, "Gflop/s", "f"))
    m, text = _below(_run(flops, triad, dgemm))
    assert m.name == "stream.triad" and text.startswith("Memory bandwidth: STREAM triad 50.0 GB/s is 50%")
    triad.efficiency = 0.95
    m, text = _below(_run(flops, triad, dgemm))
    assert m.name == "dgemm.node" and text.startswith("Compute: DGEMM")


def test_variants_invalid_and_stream_copy_stand_aside():
    peak = Peak(100.0, "GB/s", "b")
    triad = Metric.measured("stream.triad", [80.0], "GB/s", peak=peak)
    copy = Metric.measured("stream.copy", [60.0], "GB/s", peak=peak)          # write-allocate, reads lower
    scalar = Metric.measured("flops.dp.node.scalar", [10.0], "Gflop/s", peak=Peak(100.0, "Gflop/s", "f"))
    broken = Metric.measured("dgemm.node", [5.0], "Gflop/s", peak=Peak(100.0, "Gflop/s", "f"))
    broken.valid = False
    m, _ = _below(_run(triad, copy, scalar, broken))
    assert m is triad
    # Without a triad efficiency, copy speaks for memory bandwidth.
    m, _ = _below(_run(copy, scalar, broken))
    assert m is copy


def test_sample_runs_name_the_right_subsystem():
    m, text = _below(sample_runs.vm_run())
    assert m.name == "dgemm.node" and text.startswith("Compute: DGEMM (all cores) 88.9 Gflop/s is 87%")
    m, text = _below(sample_runs.epyc_run())
    assert m.name == "stream.triad"
    assert "290 GB/s is 71% of the 409.6 GB/s peak (2 sockets × 8 channels × 3200 MT/s × 8 B)" in text


def test_unknown_peaks_say_why():
    run = sample_runs.bare_run()
    assert summary.furthest_below_peak(run) is None
    unknown = dict(summary.unknown_peaks(run))
    assert set(unknown) == {"flops.dp.node", "stream.triad"}       # latency has no peak by nature
    assert "0xd4f is not in the CPU families data file" in unknown["flops.dp.node"]
    text = _verdict_text(run)
    assert "every peak is unknown" in text and "dmidecode needs root" in text


def test_unknown_reason_falls_back_to_the_machine_peak():
    triad = Metric.measured("stream.triad", [10.0], "GB/s")          # the bench attached no Peak
    machine = {"peaks": {"membw.node": {"value": None, "unit": "GB/s", "provenance": "no DIMM data"}}}
    assert summary.unknown_peaks(_run(triad, machine=machine)) == [("stream.triad", "no DIMM data")]
    assert _verdict_text(_run()) == "Nothing was measured in this run."
    assert summary.verdict(_run()).kind == "nothing_measured"


def test_headline_order_and_fallback():
    words = [label for label, _ in labels.headline(sample_runs.sampled_run())]
    assert words[:5] == ["Clock (one core busy)", "Clock (all cores busy)", "DP flops (all cores)",
                          "DGEMM (all cores)", "STREAM triad"]
    assert words[-4:] == ["Core-to-core, SMT siblings", "Core-to-core, shared L3",
                           "Core-to-core, same socket", "Core-to-core, across sockets"]
    core = Metric.measured("flops.dp.core", [50.0], "Gflop/s")
    lat = Metric.measured("latency.dram", [90.0], "ns", LOWER)
    assert labels.headline(_run(lat, core)) == [("DP flops (one core)", core), ("DRAM latency", lat)]


@pytest.mark.parametrize("name,sub", [("stream.triad", "Memory bandwidth"), ("bandwidth.l2", "Cache bandwidth"),
                                      ("bandwidth.dram", "Memory bandwidth"), ("c2c.l3", "Core-to-core latency"),
                                      ("flops.sp.node.avx512", "Compute"), ("clock.all", "Clock")])
def test_subsystem_names(name, sub):
    assert labels.subsystem(name) == sub


def test_variant_label():
    assert labels.label("flops.dp.node.avx2") == "DP flops (all cores) (AVX2)"
    assert labels.label("something.new") == "something.new"


def test_problems_group_the_same_cause():
    from ceiling.results.model import Finding
    load = [Finding(f"load.competing.{s}", "warn", f"{s}: other processes were busy", why="steals cycles",
                    fix="run on an idle node") for s in ("flops", "stream", "dgemm")]
    thp = Finding("mem.thp", "fail", "THP disabled", why="TLB misses", fix="echo madvise > ...")
    bare = Finding("x.y", "warn", "something odd")
    run = Run(tool_version="0", host="h", started="", command=[], findings=load + [bare, thp])
    got = [(f.id, n) for f, n in summary.problems(run)]
    assert got == [("mem.thp", 0), ("load.competing.flops", 2), ("x.y", 0)]


def test_network_and_storage_runs_lead_with_their_own_figures_and_no_flop_peaks():
    from ceiling.report import terminal
    machine = {"peaks": {"flops.dp.node": {"value": 100.0, "unit": "Gflop/s", "provenance": "2 cores"},
                         "membw.node": {"value": None, "unit": "GB/s", "provenance": "DIMMs unknown"}}}
    net = _run(Metric.measured("net.pingpong.latency.same_l3", [1.2, 1.3], "µs", LOWER),
               Metric.measured("net.pingpong.bandwidth.same_l3", [10000.0], "MB/s",
                               context={"plateau_size_bytes": 1 << 20}),
               Metric.measured("net.allreduce.8B", [0.4], "µs", LOWER, context={"k_ranks": 4}),
               machine=machine)
    assert [t for t, _ in labels.headline(net)] == [
        "MPI latency (same L3)", "MPI ping-pong bandwidth (same L3) at 1 MiB", "MPI Allreduce 8 B, 4 ranks"]
    assert labels.shown_peaks(net) == []
    text = terminal.render(net, width=100)
    assert "Theoretical peaks" not in text and "flops.dp.node" not in text
    store = _run(Metric.measured("storage.seq.write.fpp", [400.0], "MiB/s"),
                 Metric.measured("storage.iops.randread", [40000.0], "IOPS"), machine=machine)
    assert [t for t, _ in labels.headline(store)] == ["Sequential write (a file per thread)", "Random 4 KiB reads"]
    flops = _run(Metric.measured("flops.dp.node", [90.0], "Gflop/s"), machine=machine)
    assert [k for k, _ in labels.shown_peaks(flops)] == ["flops.dp.node"]
    assert [k for k, _ in labels.shown_peaks(_run(machine=machine))] == ["flops.dp.node", "membw.node"]


def _capped_dgemm(value=41.7, eff_run=0.30):
    """DGEMM as the bench records it under OPENBLAS_CORETYPE=Haswell on an AVX-512 node."""
    m = Metric.measured("dgemm.node", [value], "Gflop/s", peak=Peak(278.0, "Gflop/s", "f"),
                        context={"isa_node": "avx512", "isa_run": "avx2", "efficiency_isa_run": eff_run,
                                 "env_caps": [{"cause": "env", "variable": "OPENBLAS_CORETYPE", "value": "Haswell",
                                               "library": "openblas", "effect": "isa", "isa_run": "avx2",
                                               "isa_node": "avx512", "dgemm": "capped"}]})
    return m


def test_a_figure_the_environment_lowered_is_no_verdict_about_the_node():
    dgemm = _capped_dgemm()
    triad = Metric.measured("stream.triad", [80.0], "GB/s", peak=Peak(100.0, "GB/s", "b"))
    run = _run(dgemm, triad)
    v = summary.verdict(run)
    assert v.kind == "below_peak" and v.metric == "stream.triad"
    assert "OPENBLAS_CORETYPE=Haswell" in v.evidence and "not the node" in v.evidence
    text = _verdict_text(run)
    assert text.startswith("Furthest below peak - Memory bandwidth: STREAM triad")
    assert ("; lower still: dgemm.node is set by the environment, not the node: OPENBLAS_CORETYPE=Haswell has "
            "OpenBLAS run its AVX2 code on this AVX-512 CPU (15% of the node's peak, 30% of the AVX2 peak the "
            "library runs); unset OPENBLAS_CORETYPE and rerun") in text
    # Above the verdict it is not mentioned; without env_caps (the library's own default) it is the verdict.
    triad.efficiency = 0.10
    v = summary.verdict(_run(dgemm, triad))
    assert v.metric == "stream.triad" and v.evidence == ""
    dgemm.context.pop("env_caps")
    triad.efficiency = 0.80
    v = summary.verdict(_run(dgemm, triad))
    assert v.kind == "below_peak" and v.metric == "dgemm.node" and v.evidence == ""


def test_alone_it_gives_no_verdict_and_names_the_variable():
    run = _run(_capped_dgemm())
    v = summary.verdict(run)
    assert v.kind == "no_verdict" and v.metric == "dgemm.node"
    text = _verdict_text(run)
    assert "Furthest below peak" not in text
    assert text.startswith("No verdict: dgemm.node would be furthest below its peak, but it is set by the "
                           "environment, not the node: OPENBLAS_CORETYPE=Haswell")


# -- figures a summary does not show as they stand (issue 34) -------------------------------

def _latency(name, ns, **context):
    m = Metric.measured(name, ns, "ns", better=LOWER)
    m.context.update(context)
    return m


def test_a_disturbed_figure_is_stored_as_disturbed_with_no_value_of_the_node():
    l1 = _latency("latency.l1", [2.02, 2.10, 2.05], disturbed="other processes used 1.00 CPUs")
    quiet = _latency("latency.l2", [3.25, 3.26, 3.25])
    (fig,) = summary.figures(_run(l1, quiet))
    assert (fig.metric, fig.state, fig.shown, fig.measured, fig.unit) == ("latency.l1", "disturbed", None, 2.02, "ns")
    assert "other processes used 1.00 CPUs" in fig.evidence and "--retry-disturbed" in fig.evidence
    assert l1.value == 2.02               # the metric itself is left as measured


def test_a_best_of_with_a_large_spread_shows_the_median_and_keeps_the_best():
    creates = Metric.measured("storage.md.create", [63915, 3683, 3500, 3900, 3600], "op/s")
    (fig,) = summary.figures(_run(creates))
    assert fig.state == "unstable" and fig.shown == 3683 and fig.measured == 63915 == creates.value
    assert fig.cv > 1.0 and "17.35x the median" in fig.evidence
    # best 1.25x the median alone (CV under 10%) is unstable too; for a latency, the best is the lowest
    lat = _latency("latency.dram", [100.0, 125.0, 125.0, 126.0, 124.0, 125.0, 125.0, 125.0, 125.0])
    assert lat.stats.cv < 0.10
    (fig,) = summary.figures(_run(lat))
    assert fig.shown == 125.0 and fig.measured == 100.0


def test_figures_leave_steady_metrics_and_medians_alone():
    steady = Metric.measured("stream.triad", [38.1, 37.9, 38.0], "GB/s", peak=Peak(62.4, "GB/s", "b"))
    one = Metric.measured("dgemm.node", [50.0], "Gflop/s")
    median = Metric(name="c2c.l3", value=40.0, unit="ns", better=LOWER, stats=Stats.of([20.0, 40.0, 60.0], LOWER))
    assert summary.figures(_run(steady, one, median)) == []


def test_an_unstable_figure_s_efficiency_is_its_median_s():
    peak = Peak(100.0, "Gflop/s", "f")
    dgemm = Metric.measured("dgemm.node", [90.0, 50.0, 52.0, 48.0, 51.0], "Gflop/s", peak=peak)
    (fig,) = summary.figures(_run(dgemm))
    assert fig.efficiency == pytest.approx(0.51) and dgemm.efficiency == pytest.approx(0.90)
    # the verdict quotes the median too, and says why
    text = _verdict_text(_run(dgemm))
    assert text.startswith("Furthest below peak - Compute: DGEMM (all cores) 51.0 Gflop/s is 51% of the 100 Gflop/s "
                           "peak (f)")
    assert text.endswith("; unstable: the median of its repetitions; the best was 90 Gflop/s")
