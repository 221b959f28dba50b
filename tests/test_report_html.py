"""report.html and report.svg: one plot per present series, escaping,
"not measured" lines, self-containment, atomic writes."""
import os
import re
import xml.etree.ElementTree as ET

import pytest

from ceiling.errors import PathError
from ceiling.report import html, html_plots, svg
from ceiling.results.model import Finding, Metric, Run, Series

import sample_runs
from reporting import render_html, write_html

SVG_NS = "{http://www.w3.org/2000/svg}"


def _svgs(page):
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


def _series_attr(block):
    return re.search(r'data-series="([^"]*)"', block).group(1)


@pytest.mark.parametrize("which", ["vm", "epyc", "sampled"])
def test_one_svg_per_present_series_plus_roofline(which):
    run = sample_runs.ALL[which]()
    page = render_html(run)
    blocks = _svgs(page)
    names = [_series_attr(b) for b in blocks]
    assert sorted(names) == sorted([s.name for s in run.series] + ["roofline"])
    assert page.count("<svg") == len(blocks)


@pytest.mark.parametrize("which", sorted(sample_runs.ALL))
def test_every_svg_is_well_formed_with_title_and_labelled_axes(which):
    for block in _svgs(render_html(sample_runs.ALL[which]())):
        root = ET.fromstring(block)                      # well-formed XML, or this raises
        assert root.tag == SVG_NS + "svg"
        assert root[0].tag == SVG_NS + "title" and root[0].text.strip()
        assert float(root.get("width")) > 0 and float(root.get("height")) > 0
        texts = " ".join(t.text or "" for t in root.iter(SVG_NS + "text"))
        assert re.search(r"\((ns|GB/s|Gflop/s|bytes|flop/byte)\)", texts) or root.get("data-series").endswith(
            (".matrix", ".numa")), texts


def test_axis_units_and_cache_marks():
    page = render_html(sample_runs.epyc_run())
    lat = next(b for b in _svgs(page) if 'data-series="latency.size"' in b)
    assert "latency (ns)" in lat and "working set (bytes)" in lat
    for mark in ("L1d 32 KiB", "L2 512 KiB", "L3 32 MiB"):
        assert mark in lat
    for tick in (">4K<", ">1M<", ">1G<"):
        assert tick in lat
    bw = next(b for b in _svgs(page) if 'data-series="bandwidth.load.size"' in b)
    assert "L2 64 MiB (×128)" in bw                      # what 128 threads can use
    triad = next(b for b in _svgs(page) if 'data-series="stream.triad.threads"' in b)
    assert "peak 409.6 GB/s" in triad
    c2c = next(b for b in _svgs(page) if 'data-series="c2c.matrix"' in b)
    assert ">ns<" in c2c and "from CPU" in c2c and "to CPU" in c2c


def test_missing_series_say_not_measured_and_draw_no_axes():
    page = render_html(sample_runs.vm_run())
    assert "Memory latency by NUMA node</strong> - not measured: one NUMA domain" in page
    assert 'data-series="latency.numa"' not in page
    bare = sample_runs.bare_run()
    page = render_html(bare)
    assert [_series_attr(b) for b in _svgs(page)] == ["roofline"]          # flops and triad were measured
    assert page.count("not measured:") == len(html_plots.PLOTS)
    assert "the run stopped before this measurement (interrupted (SIGINT) during bench memory)" in page
    bare.metrics = [m for m in bare.metrics if m.name != "stream.triad"]
    page = render_html(bare)
    assert "<svg" not in page
    assert "Roofline (DP)</strong> - not measured: needs flops.dp.node and a bandwidth metric" in page


def test_missing_reason_from_a_skipped_finding_and_for_a_full_run():
    run = sample_runs.epyc_run()
    run.series = [s for s in run.series if s.name != "c2c.matrix"]
    assert "not part of this run (measured by: ceiling bench cores)" in render_html(run)
    run.findings.append(Finding("bench.core-to-core", "skipped", "core-to-core: not measured",
                                evidence="only 1 CPU in the affinity mask"))
    assert "not measured: core-to-core: not measured (only 1 CPU in the affinity mask)" in render_html(run)


def test_empty_series_are_omitted_with_a_reason():
    run = sample_runs.vm_run()
    run.series.append(Series("latency.numa", "matrix", labels=["0", "1"], matrix=[[None, None], [None, None]]))
    run.series.append(Series("custom.xy", "xy", x=[1, 2], y=[None, None]))
    page = render_html(run)
    assert "the matrix has no values" in page and "the series has no data points" in page
    assert 'data-series="custom.xy"' not in page


def test_malicious_text_is_escaped():
    evil = '<script>alert("pwned")</script>&<img src=x onerror=alert(1)>'
    run = sample_runs.vm_run()
    run.host = evil
    run.machine["hostname"] = evil
    run.machine["model_name"] = evil
    run.command = ["ceiling", evil]
    run.environment["OMP_PLACES"] = evil
    run.findings.append(Finding("x.y", "warn", evil, evidence=evil, why=evil, fix=evil))
    m = Metric.measured(evil, [1.0], "GB/s")
    m.note = evil
    run.metrics.append(m)
    run.series.append(Series("evil.matrix", "matrix", title=evil, x_label=evil, y_label=evil,
                             labels=[evil, "b"], matrix=[[None, 1.0], [2.0, None]], context={"unit": evil}))
    run.series.append(Series("evil.xy", "xy", title=evil, x_label=evil, y_label=evil, x_unit=evil, y_unit=evil,
                             x=[1, 2], y=[3.0, 4.0]))
    page = render_html(run)
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;&amp;&lt;img" in page
    for block in _svgs(page):
        ET.fromstring(block)


def test_self_contained_and_deterministic():
    run = sample_runs.epyc_run()
    page = render_html(run)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?(https?:|//)|@import|<script|<link""",
                         page, flags=re.I)
    assert sorted(set(re.findall(r'href="([^"]*)"', page))) == ["#findings", "#machine"]
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    assert render_html(run) == page


def test_summary_table_and_findings_content():
    page = render_html(sample_runs.vm_run())
    assert ("<strong>Furthest below peak:</strong> Compute: DGEMM (all cores) 88.9 Gflop/s is 87% of the "
            "102.7 Gflop/s peak") in page
    assert '<li><span class="badge fail">fail</span> Transparent huge pages are disabled</li>' in page
    assert "peak unknown: memory channels and DIMM speed unknown" in page
    assert page.index("Fail (1)") < page.index("Warn (2)") < page.index("Ok (1)") < page.index("Skipped (1)")
    assert "<code>echo madvise &gt; /sys/kernel/mm/transparent_hugepage/enabled</code>" in page
    assert "needs root" in page
    assert "<code>dgemm.node</code></td><td class='n'>88.9</td>" in page
    bare = render_html(sample_runs.bare_run())
    assert "Partial run:</strong> interrupted (SIGINT) during bench memory. What" in bare
    assert "every peak is unknown" in bare


def test_large_matrix_stays_small():
    page = render_html(sample_runs.sampled_run())
    c2c = next(b for b in _svgs(page) if 'data-series="c2c.matrix"' in b)
    assert len(c2c) < 600_000
    assert "no value" in c2c                                     # the holes have a legend
    assert "Hatched: " in page and "sampled: 20% of pairs" in page
    dense = next(b for b in _svgs(render_html(sample_runs.epyc_run())) if 'data-series="c2c.matrix"' in b)
    assert "no value" not in dense                               # every pair measured


def test_write_is_atomic_and_errors_are_one_line(tmp_path):
    run = sample_runs.vm_run()
    out = tmp_path / "report.html"
    out.write_text("old report")
    write_html(run, out)
    assert out.read_text(encoding="utf-8") == render_html(run)
    assert os.listdir(tmp_path) == ["report.html"]
    with pytest.raises(PathError) as e:
        write_html(run, tmp_path / "no" / "such" / "dir" / "r.html")
    assert "\n" not in str(e.value) and "cannot write the HTML report" in str(e.value)
    with pytest.raises(PathError, match="is a directory"):
        write_html(run, tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PathError):
        write_html(run, blocker / "r.html")
    assert sorted(os.listdir(tmp_path)) == ["file", "report.html"]        # no temporary file left behind


def test_svg_scales_and_ticks():
    s = svg.Scale(4096, 2 ** 30, "log2", 0, 100)
    assert s.lo == 4096 and s.hi == 2 ** 30 and s(4096) == 0 and s(2 ** 30) == 100
    assert [int(t) for t in s.ticks(10)] == [2 ** e for e in range(12, 31, 2)]
    lin = svg.Scale(0, 23.6, "linear", 0, 1)
    assert lin.hi == 25 and lin.ticks() == [0, 5, 10, 15, 20, 25]
    dec = svg.Scale(1.15, 96.4, "log10", 0, 1)
    assert dec.lo == 1 and dec.hi == 100 and dec.ticks() == [1, 2, 5, 10, 20, 50, 100]
    assert svg.Scale(1.15, 108, "log10", 0, 1).ticks() == [1, 10, 100, 1000]
    assert [svg.tick_label(v) for v in (0.0625, 0.5, 1, 2.5, 12000.0, 1e-6)] == ["1/16", "1/2", "1", "2.5", "12000",
                                                                                 "1e-6"]
    assert svg.colormap(0) == "#440154" and svg.colormap(1) == "#fde725"


def test_svg_refuses_empty_input():
    with pytest.raises(ValueError):
        svg.line_plot([svg.Line("a", [1, 2], [None, None])], title="t", x_label="x", y_label="y")
    with pytest.raises(ValueError):
        svg.heatmap([[None]], ["0"], title="t", unit="ns", x_label="x", y_label="y")
    with pytest.raises(ValueError):
        svg.roofline([], [("dram", 100.0, True)])


def test_heatmap_light_means_better():
    lat = svg.heatmap([[1.0, 9.0]], ["a", "b"], title="t", unit="ns", x_label="x", y_label="y", better="lower")
    bw = svg.heatmap([[1.0, 9.0]], ["a", "b"], title="t", unit="GB/s", x_label="x", y_label="y", better="higher")
    fills = lambda s: re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"><title>', s)
    assert fills(lat) == ["#fde725", "#440154"] and fills(bw) == ["#440154", "#fde725"]


def test_heatmap_values_printed_alike_are_coloured_alike():
    """Two nodes' pair measured 0.9321 and 0.9324 µs: one colour, one tick, not the scale's two ends."""
    out = svg.heatmap([[None, 0.9321], [0.9324, None]], ["n1", "n2"], title="t", unit="µs", x_label="x",
                      y_label="y")
    fills = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"><title>', out)
    assert len(fills) == 2 and fills[0] == fills[1] == svg.colormap(0.5)
    assert out.count(">0.932</text>") == 3          # the two cells and one colour-bar tick


def _rgb(colour):
    return [int(colour[k:k + 2], 16) for k in (1, 3, 5)]


def test_node_to_node_colours_span_the_outlier_threshold_around_the_median():
    """Four nodes whose pairs measured 0.879 and 0.880 µs: the heat map spanned its whole
    colour range between them. Its colours now span at least the median ± the threshold
    (20 %, what makes a pair slow), so they look alike; a slow node still stands out."""
    from ceiling.analysis.pairs import conclude

    def per_rank(lat, n=4):
        return [[{"round": 0, "partner": b, "latency_us": lat(a, b), "bandwidth_mbs": 10000.0, "valid": True,
                  "msg": ""} for b in range(n) if b != a] for a in range(n)]

    def cells(run):
        (plot,) = [p for p in html_plots.plots(run) if p.name == "cluster.pairs.latency"]
        return plot, re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"><title>', plot.svg)

    nodes = ["n0", "n1", "n2", "n3"]
    series, _, _ = conclude(nodes, per_rank(lambda a, b: 0.879 if (a + b) % 2 else 0.880), 3, 3)
    lat = next(s for s in series if s.name == "cluster.pairs.latency")
    assert lat.context["threshold"] == 0.2 and lat.context["median"] == 0.879
    plot, fills = cells(Run("0", "h", "2026-11-27T00:00:00", ["ceiling", "run"], series=[lat]))
    assert len(fills) == 12
    mid = _rgb(svg.colormap(0.5))
    assert all(abs(c - m) <= 2 for f in fills for c, m in zip(_rgb(f), mid)), fills
    assert "± 20% (the outlier threshold)" in plot.caption
    series, _, _ = conclude(nodes + ["n4"], per_rank(lambda a, b: 2.6 if 4 in (a, b) else 0.88, 5), 5, 5)
    _, fills = cells(Run("0", "h", "2026-11-27T00:00:00", ["ceiling", "run"],
                         series=[s for s in series if s.name == "cluster.pairs.latency"]))
    assert fills.count(svg.colormap(0.0)) == 8                   # the slow node's pairs, both ways: darkest


def test_same_report_from_json_and_from_a_machine_object():
    import json
    run = sample_runs.epyc_run()
    again = Run.from_dict(json.loads(json.dumps(run.to_dict())))
    assert render_html(again) == render_html(run)
    vm = sample_runs.vm_run()
    vm.machine = sample_runs._vm_machine()            # a Machine, not its dictionary
    assert render_html(vm) == render_html(sample_runs.vm_run())


def test_placements_rank_counts_and_directions_share_one_plot():
    """Ping-pong curves of every placement on one pair of axes (the intra-/inter-socket/inter-node
    comparison), collectives one plot per operation with a line per rank count, storage write and
    read together; a series matching no group keeps its own plot."""
    run = sample_runs.vm_run()
    sizes = [1, 64, 4096, 1 << 20]
    for label, base in (("same_l3", 0.3), ("cross_socket", 0.6), ("cross_node", 1.5)):
        run.series.append(Series(f"net.pingpong.latency.{label}", "xy", x=sizes,
                                 y=[base * (1 + s / 4096) for s in sizes],
                                 x_label="message size", x_unit="bytes", y_label="one-way time", y_unit="µs"))
    for k in (2, 4):
        run.series.append(Series(f"net.allreduce.k{k}", "xy", x=sizes, y=[k * 0.2 * (1 + s / 1024) for s in sizes],
                                 x_label="message size", x_unit="bytes", y_label="t_avg", y_unit="µs"))
    run.series.append(Series("net.bcast.k2", "xy", x=sizes, y=[0.3, 0.4, 1.0, 80.0], x_unit="bytes", y_unit="µs"))
    for d in ("write", "read"):
        run.series.append(Series(f"storage.seq.{d}.xfer", "xy", x=[4096, 1 << 20], y=[100.0, 900.0],
                                 x_label="transfer", x_unit="bytes", y_label="bandwidth", y_unit="MiB/s"))
    run.series.append(Series("net.barrier.ranks", "xy", x=[2, 4], y=[0.5, 1.1], x_label="ranks", y_unit="µs"))
    blocks = {_series_attr(b): b for b in _svgs(render_html(run))}
    lat = blocks["net.pingpong.latency.same_l3 net.pingpong.latency.cross_socket net.pingpong.latency.cross_node"]
    assert "MPI ping-pong latency by placement" in lat
    for label in ("same L3", "across sockets", "across nodes"):
        assert f">{label}<" in lat                         # a legend entry per placement, by its name
    assert lat.count("<polyline") == 3
    ar = blocks["net.allreduce.k2 net.allreduce.k4"]
    assert "MPI allreduce by message size" in ar and ">2 ranks<" in ar and ">4 ranks<" in ar
    assert "MPI bcast by message size" in blocks["net.bcast.k2"]
    io = blocks["storage.seq.write.xfer storage.seq.read.xfer"]
    assert ">write<" in io and ">read<" in io
    assert "net.barrier.ranks" in blocks                    # no group: a plot of its own
    assert not any(name.startswith("net.pingpong.latency.") and " " not in name for name in blocks)


def test_reports_render_the_stored_analysis_and_compute_nothing():
    from ceiling.report import terminal
    from ceiling.results.analysis import Verdict
    from reporting import analysed
    run = analysed(sample_runs.vm_run())
    run.analysis.verdict = Verdict(kind="no_verdict", evidence="CPUs were busy (a test's own words)")
    from ceiling.results.analysis import Absent
    run.analysis.absent = [Absent("latency.numa", "a reason only the stored analysis knows")]
    run.analysis.roofline = None
    page = html.render(run)
    assert "No verdict: CPUs were busy (a test&#x27;s own words)" in page
    assert "a reason only the stored analysis knows" in page
    assert 'data-series="roofline"' not in page and "no roofline was recorded for this run" in page
    assert "No verdict: CPUs were busy" in terminal.render(run)
    assert "No verdict: CPUs were busy" in terminal.summary(run)
