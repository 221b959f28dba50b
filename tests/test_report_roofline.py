"""analysis.roofline: roofs and ridge points from a known input."""
import pytest

from ceiling.analysis.roofline import ceilings
from ceiling.results.model import Metric, Peak, Run

import sample_runs


def _run(metrics, machine=None):
    return Run(tool_version="0", host="h", started="", command=[], metrics=metrics, machine=machine or {})


def _known():
    return _run([
        Metric.measured("flops.dp.node", [1000.0, 990.0], "Gflop/s", peak=Peak(1200.0, "Gflop/s",
                                                                               "cores × GHz × flop")),
        Metric.measured("bandwidth.l1", [4000.0], "GB/s"),
        Metric.measured("bandwidth.l2", [2000.0], "GB/s"),
        Metric.measured("bandwidth.l3", [800.0], "GB/s"),
        Metric.measured("stream.triad", [100.0, 98.0], "GB/s", peak=Peak(125.0, "GB/s", "channels × MT/s × 8 B")),
    ])


def test_roofs_and_ridges_for_a_known_input():
    rl = ceilings(_known())
    assert [(r.name, r.value, r.measured) for r in rl.compute] == [
        ("flops.dp.node", 1000.0, True), ("peak:flops.dp.node", 1200.0, False)]
    assert [(r.name, r.value) for r in rl.bandwidth] == [
        ("bandwidth.l1", 4000.0), ("bandwidth.l2", 2000.0), ("bandwidth.l3", 800.0),
        ("stream.triad", 100.0), ("peak:membw.node", 125.0)]
    assert rl.ridge("flops.dp.node", "stream.triad") == pytest.approx(10.0)
    assert rl.ridge("flops.dp.node", "bandwidth.l1") == pytest.approx(0.25)
    assert rl.ridge("peak:flops.dp.node", "peak:membw.node") == pytest.approx(9.6)
    assert len(rl.ridges) == 2 * 5
    assert rl.attainable(1.0) == pytest.approx(100.0)          # DRAM-bound below the ridge
    assert rl.attainable(64.0) == pytest.approx(1000.0)        # compute-bound above it
    assert rl.attainable(0.1, bandwidth="bandwidth.l1") == pytest.approx(400.0)
    assert rl.roof("peak:membw.node").source == "channels × MT/s × 8 B"
    assert rl.roof("flops.dp.node").source == "measured, best of 2"
    assert rl.missing == () and not rl.empty


def test_units_are_converted_and_bad_ones_refused():
    rl = ceilings(_run([Metric.measured("flops.dp.node", [2.0], "Tflop/s"),
                        Metric.measured("stream.triad", [500.0], "MB/s"),
                        Metric.measured("bandwidth.l1", [1.0], "furlongs")]))
    assert rl.roof("flops.dp.node").value == pytest.approx(2000.0)
    assert rl.roof("stream.triad").value == pytest.approx(0.5)
    assert rl.roof("bandwidth.l1") is None
    assert any("furlongs" in m for m in rl.missing)


def test_invalid_metrics_are_not_roofs_and_machine_peaks_fill_in():
    flops = Metric.measured("flops.dp.node", [1000.0], "Gflop/s")
    flops.valid = False
    machine = {"peaks": {"flops.dp.node": {"value": 1500.0, "unit": "Gflop/s", "provenance": "p"},
                         "membw.node": {"value": None, "unit": "GB/s", "provenance": "dmidecode needs root"}}}
    rl = ceilings(_run([flops, Metric.measured("stream.triad", [100.0], "GB/s")], machine))
    assert [r.name for r in rl.compute] == ["peak:flops.dp.node"]
    assert rl.ridge("peak:flops.dp.node", "stream.triad") == pytest.approx(15.0)
    assert "flops.dp.node: failed validation, not used" in rl.missing
    assert any("dmidecode needs root" in m for m in rl.missing)


def test_empty_when_nothing_to_draw():
    rl = ceilings(_run([]))
    assert rl.empty and rl.attainable(1.0) is None
    assert "flops.dp.node: not measured" in rl.missing and "stream.triad: not measured" in rl.missing


def test_sample_run_ridge():
    rl = ceilings(sample_runs.epyc_run())
    assert rl.ridge("flops.dp.node", "stream.triad") == pytest.approx(5570.0 / 290.0)
    assert rl.ridge("peak:flops.dp.node", "peak:membw.node") == pytest.approx(128 * 2.8 * 16 / 409.6)


def test_stored_roofline_keeps_every_roof_and_its_lookups():
    from ceiling.analysis.roofline import from_stored, stored
    rl = ceilings(_known())
    rec = stored(rl)
    assert {r.kind for r in rec.roofs} == {"compute", "bandwidth"}
    back = from_stored(rec)
    assert back == rl
    assert back.ridge("flops.dp.node", "stream.triad") == pytest.approx(10.0)


def _inverted():
    """The emulated cluster's figures: L1 measured at 96 GB/s below L3's 107."""
    l1 = Metric.measured("bandwidth.l1", [96.0], "GB/s")
    l1.context.update({"threads": 1, "working_set_bytes": 24 * 1024, "per_thread_bytes": 24 * 1024})
    return _run([Metric.measured("flops.dp.node", [50.0], "Gflop/s"), l1,
                 Metric.measured("bandwidth.l2", [150.0], "GB/s"),
                 Metric.measured("bandwidth.l3", [107.0], "GB/s"),
                 Metric.measured("stream.triad", [20.0], "GB/s")])


def test_a_measured_inversion_of_the_hierarchy_is_a_note_of_the_analysis():
    """L1 below L3 (and below L2) is no hardware: the analysis says which levels and why the
    lower figure is likely the measurement's, and stores it; both reports show it."""
    from ceiling.analysis.analyse import analyse
    from ceiling.analysis.roofline import inversions
    from ceiling.report import html_plots, terminal
    run = _inverted()
    run.analysis = analyse(run)
    (note,) = run.analysis.notes
    assert "hierarchy: L1 96.0 GB/s is below L2 150 GB/s and L3 107 GB/s. A level nearer" in note
    assert "L3 107 GB/s is below" not in note and "likely a limit of its measurement" in note
    assert "(bandwidth.l1: 1 thread, a working set of 24 KiB, 24 KiB per thread)" in note
    assert note in " ".join(terminal.render(run, width=2000).split())
    (plot,) = [p for p in html_plots.plots(run) if p.name == "roofline"]
    assert note in plot.caption
    assert inversions(_known(), ceilings(_known())) == []
    # within the spread called noise (5 %), levels measured alike are not an inversion
    close = _run([Metric.measured("bandwidth.l2", [100.0], "GB/s"), Metric.measured("bandwidth.l3", [104.0], "GB/s")])
    assert inversions(close, ceilings(close)) == []
