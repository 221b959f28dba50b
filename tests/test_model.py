"""`ceiling model`: E = W/P from stated work, the lecture's two examples, the peak's provenance
from the history, and bad input as one line with its exit code."""
from __future__ import annotations

import json

import pytest

from ceiling import cli
from ceiling.analysis import efficiency as E


def test_object_storage_over_100_gbe_is_8_percent():
    r = E.efficiency({"network": 100 * 2**20}, 0.1, {"network": (*E.parse_rate("100 GbE")[:1], "100 GbE")},
                     lambda prefix: [])
    row = r["rows"][0]
    assert row["efficiency"] == pytest.approx(100 * 2**20 / 0.1 / 12.5e9)      # 8.39 %
    assert round(row["efficiency"], 3) == 0.084 and r["bound"] == "network"


def test_summing_1e7_integers_at_memory_bandwidth_from_the_history():
    rows = [("stream.triad", 20.0, "GB/s", "2026-11-28T08:00:00", "a" * 32),
            ("stream.triad", 18.0, "GB/s", "2026-11-01T08:00:00", "b" * 32)]          # older: not taken
    r = E.efficiency({"memory": 8e7}, 0.004, {}, lambda prefix: rows if prefix == "stream.triad" else [], ops=1e7)
    row = r["rows"][0]
    assert row["efficiency"] == pytest.approx(1.0)
    assert "stream.triad = 20 GB/s, measured 2026-11-28" in row["peak_source"]
    assert r["per_op_s"] == pytest.approx(4e-10)
    assert any(ln.startswith("per unit of work: 0.4") for ln in E.lines(r))


def test_no_ceiling_known_says_how_to_measure_it():
    r = E.efficiency({"flops": 2.4e12}, 10.0, {}, lambda prefix: [])
    assert r["rows"][0]["efficiency"] is None and "ceiling bench compute" in r["rows"][0]["peak_source"]
    assert r["bound"] is None


@pytest.mark.parametrize("text, want", [("100 GbE", 12.5e9), ("100Gb/s", 12.5e9), ("12.5 GB/s", 12.5e9),
                                        ("3 Tflop/s", 3e12), ("fast", None)])
def test_parse_rate(text, want):
    got = E.parse_rate(text)
    assert (got and got[0]) == want


def test_cli(tmp_path, capsys):
    code = cli.main(["model", "--net-bytes", "100MiB", "--time", "0.1s", "--peak", "network=100GbE", "--json",
                     "--db", str(tmp_path / "h.db")])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert round(doc["rows"][0]["efficiency"], 3) == 0.084


@pytest.mark.parametrize("args, code, words", [
    (["--net-bytes", "1MiB"], 2, "--time"),
    (["--time", "1s"], 2, "give the work"),
    (["--time", "soon", "--flops", "1e9"], 2, "not a duration"),
    (["--time", "1s", "--flops", "-5"], 3, "larger than zero"),
    (["--time", "1s", "--flops", "1e9", "--peak", "gpu=1Tflop/s"], 2, "SUBSYSTEM=RATE"),
    (["--time", "1s", "--flops", "1e9", "--peak", "flops=100GbE"], 3, "not a rate for flops"),
])
def test_bad_input_is_one_line_and_its_code(args, code, words, capsys):
    assert cli.main(["model", *args]) == code
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("ceiling:")]
    assert len(err) == 1 and words in err[0]


def test_roofline_point_from_stated_work():
    peaks = {"flops": (1e12, "1Tflop/s"), "memory": (100e9, "100GB/s")}        # ridge at 10 flop/B
    r = E.efficiency({"flops": 2.4e12, "memory": 6e11}, 20.0, peaks, lambda prefix: [])
    rp = r["roofline"]
    assert rp["intensity"] == pytest.approx(4.0) and rp["ridge"] == pytest.approx(10.0)
    assert rp["bound"] == "memory" and rp["roof"] == pytest.approx(400e9)
    assert rp["of_roof"] == pytest.approx(2.4e12 / 20 / 400e9)                 # 30 %
    assert any(ln.startswith("roofline: intensity 4") and "memory roof" in ln for ln in E.lines(r))
    none = E.efficiency({"flops": 1e9, "memory": 1e9}, 1.0, {}, lambda prefix: [])["roofline"]
    assert "roof" not in none and "ceiling bench" in none["why_no_roof"]


def _html(tmp_path, capsys, *args):
    out = tmp_path / "model.html"
    assert cli.main(["model", *args, "--db", str(tmp_path / "h.db"), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    return printed, out.read_text(encoding="utf-8")


def test_html_page_has_the_workload_under_the_roof_it_is_bound_by(tmp_path, capsys):
    printed, page = _html(tmp_path, capsys, "--flops", "2.4e12", "--memory-bytes", "600GB", "--time", "20s",
                          "--peak", "flops=1Tflop/s", "--peak", "memory=100GB/s")
    assert "roofline: intensity 4" in printed                         # the terminal's lines are printed too
    assert 'data-line="workload 4.00 flop/B, 120 Gflop/s: 30% of the memory roof"' in page
    assert 'data-line="memory 100 GB/s"' in page and 'data-line="compute 1000 Gflop/s"' in page
    assert "memory-bound at its intensity, at 30.0% of the roof above it (400 Gflop/s)" in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")


@pytest.mark.parametrize("args, words", [
    (["--flops", "1e9", "--time", "1s", "--peak", "flops=1Tflop/s"], "needs both <code>--flops</code>"),
    (["--flops", "1e9", "--memory-bytes", "1GB", "--time", "1s"], "No roofline drawn: a peak is unknown"),
])
def test_html_page_without_a_point_says_what_would_give_it(tmp_path, capsys, args, words):
    _, page = _html(tmp_path, capsys, *args)
    assert words in page and "<svg" not in page


def test_html_to_a_path_that_cannot_be_written_is_one_line_after_the_result(tmp_path, capsys):
    code = cli.main(["model", "--flops", "1e9", "--time", "1s", "--db", str(tmp_path / "h.db"),
                     "--html", str(tmp_path / "no" / "such" / "dir" / "m.html")])
    out, err = capsys.readouterr()
    assert code == 4 and out.startswith("flops: W = ")
    assert [ln for ln in err.splitlines() if ln.startswith("ceiling:")] == [
        f"ceiling: cannot write the HTML report to {tmp_path}/no/such/dir/m.html: No such file or directory"]


def test_the_flops_peak_is_this_nodes_measured_flops_dp_node_from_the_history():
    # ceiling bench compute stores flops.dp.node (the widest ISA) and flops.dp.node.<isa>: the best of the newest
    rows = [("flops.dp.node", 95.0, "Gflop/s", "2026-11-20T10:00:00Z", "run-new"),
            ("flops.dp.node.avx2", 60.0, "Gflop/s", "2026-11-20T10:00:00Z", "run-new"),
            ("flops.dp.node", 120.0, "Gflop/s", "2026-10-01T10:00:00Z", "run-old")]
    r = E.efficiency({"flops": 9.5e9}, 1.0, {}, lambda prefix: [x for x in rows if x[0].startswith(prefix)])
    (row,) = r["rows"]
    assert row["peak"] == 95e9 and row["efficiency"] == pytest.approx(0.1) and "flops.dp.node" in row["peak_source"]


def test_work_names_the_unit_of_the_time_per_unit(capsys):
    assert cli.main(["model", "--memory-bytes", "80MB", "--time", "0.004s", "--peak", "memory=20GB/s", "--work",
                     "1e7 records"]) == 0
    assert "per unit of work: 0.400 ns (10000000 records)" in capsys.readouterr().out
    assert cli.main(["model", "--memory-bytes", "80MB", "--time", "1s", "--work", "many records"]) == 2
    assert cli.main(["model", "--memory-bytes", "80MB", "--time", "1s", "--work", "1e7 x", "--ops", "5"]) == 2
