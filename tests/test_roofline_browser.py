"""The program on the roofline, in headless Chromium: ``ceiling profile --out`` draws the node's roofs
with the program's point (stated with ceiling_work) as a labelled marker, and ``ceiling scale --out``
one per count; each marker is laid out with a size and sits under the roof that bounds it (the DRAM
roof at its intensity, found by the polyline's label). The program sleeps 0.3 s and states 1e8
flops over 1.2e9 bytes, so its rate is at most 0.33 Gflop/s at 1/12 flop/B, under the fixture's
DRAM roof there (23.6 GB/s x 1/12 = 1.97 Gflop/s) on any machine. Skipped without Chromium."""
from __future__ import annotations

import socket
import sys

import pytest

import sample_runs
from ceiling import cli
from ceiling.results.store import Store
from test_interpose import NEEDS_LIB
from test_report_browser import needs_chromium, probe_page, probe_script

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROG = "import time, ceiling.region as r\ntime.sleep(0.3)\nr.work(1e8, 1.2e9)\n"

# every roofline plot's marks (label, the marker's centre and size in the plot's units) and lines
# (label, points), and where the marks are on the page
PROBE = probe_script("""  var out = [];
  document.querySelectorAll('svg[data-series="roofline"]').forEach(function (s) {
    var marks = [], lines = [];
    s.querySelectorAll('g.mark').forEach(function (g) {
      var shape = g.querySelector('circle, rect, polygon'), b = shape.getBBox(), r = g.getBoundingClientRect();
      marks.push({label: g.getAttribute('data-label'), cx: b.x + b.width / 2, cy: b.y + b.height / 2,
                  w: b.width, h: b.height, pw: r.width, ph: r.height,
                  text: g.querySelector('text').textContent});
    });
    s.querySelectorAll('polyline[data-line]').forEach(function (p) {
      lines.push({label: p.getAttribute('data-line'), points: p.getAttribute('points')});
    });
    out.push({marks: marks, lines: lines});
  });
""", "out")


@pytest.fixture
def history(tmp_path):
    run = sample_runs.vm_run()
    run.host = socket.gethostname()
    s = Store(str(tmp_path / "history.db"))
    s.save(run)
    s.close()
    return tmp_path / "history.db"


def _roof_y(line: dict, x: float) -> float:
    """The polyline's y at x, in the plot's units (linear between its points, as drawn)."""
    pts = [tuple(map(float, p.split(","))) for p in line["points"].split()]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    raise AssertionError(f"{line['label']} does not reach x={x}: {pts}")


def _under_the_dram_roof(plot: dict, labels) -> None:
    dram = next(ln for ln in plot["lines"] if ln["label"].startswith("DRAM (STREAM triad), measured"))
    marks = {m["label"]: m for m in plot["marks"]}
    assert sorted(marks) == sorted(labels), marks
    for m in marks.values():
        assert m["w"] > 0 and m["h"] > 0 and m["pw"] > 0 and m["ph"] > 0, m     # laid out, with a size
        assert m["text"] == m["label"]
        assert m["cy"] > _roof_y(dram, m["cx"]) + m["h"] / 2, (m, dram)          # below the roof (y grows down)


@needs_chromium
@NEEDS_LIB
def test_the_profiled_programs_point_sits_under_its_roof(tmp_path, history, capsys):
    out = tmp_path / "p.html"
    assert cli.main(["profile", "--no-store", "--no-measure", "--db", str(history), "--out", str(out), "--",
                     sys.executable, "-c", PROG]) == 0
    capsys.readouterr()
    (plot,) = probe_page(tmp_path, out.read_text(encoding="utf-8"), PROBE, "profile.html")
    _under_the_dram_roof(plot, ["application (ceiling_work)"])


@needs_chromium
@NEEDS_LIB
def test_each_count_of_a_scaling_study_sits_under_its_roof(tmp_path, history, capsys):
    out = tmp_path / "s.html"
    assert cli.main(["scale", "--no-store", "--db", str(history), "--threads", "1,2", "--repeat", "1", "--profile",
                     "--out", str(out), "--", sys.executable, "-c", PROG]) == 0
    capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    assert '<section id="roofline">' in page
    (plot,) = probe_page(tmp_path, page, PROBE, "study.html")
    _under_the_dram_roof(plot, ["1 threads", "2 threads"])
