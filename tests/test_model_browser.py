"""`ceiling model --html`: the workload's point laid out by headless Chromium under the roof that bounds
it, and the compute roof above it. Skipped when no Chromium is installed (CEILING_CHROMIUM)."""
from __future__ import annotations

import pytest

from ceiling import cli
from test_report_browser import needs_chromium, probe_page, probe_script

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# each line of the plot by its label: its polyline's points and its markers' centres, in the page's pixels
PROBE = probe_script("""  var out = {};
  document.querySelectorAll('svg[data-series="model-roofline"] g[data-line]').forEach(function (g) {
    var pts = [];
    g.querySelectorAll('polyline').forEach(function (p) {
      for (var i = 0; i < p.points.numberOfItems; i++) {
        var q = p.points.getItem(i); pts.push([q.x, q.y]);
      }
    });
    var marks = [];
    g.querySelectorAll('circle, rect, polygon').forEach(function (m) {
      var b = m.getBBox(); marks.push([b.x + b.width / 2, b.y + b.height / 2]);
    });
    out[g.getAttribute('data-line')] = {line: pts, marks: marks};
  });
""", "{lines: out, width: document.documentElement.scrollWidth}")


def _y_at(line, x):
    (x0, y0), (x1, y1) = line[0], line[-1]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@needs_chromium
@pytest.mark.parametrize("flops, bound", [("2.4e12", "memory"), ("8e13", "compute")])
def test_the_workload_sits_under_the_roof_that_bounds_it(tmp_path, capsys, flops, bound):
    # 600 GB moved; 2.4e12 flop is 4 flop/B (memory-bound under a ridge at 10), 8e13 is 133 flop/B (compute)
    out = tmp_path / "m.html"
    assert cli.main(["model", "--flops", flops, "--memory-bytes", "600GB", "--time", "200s", "--db",
                     str(tmp_path / "h.db"), "--peak", "flops=1Tflop/s", "--peak", "memory=100GB/s",
                     "--html", str(out)]) == 0
    capsys.readouterr()
    probe = probe_page(tmp_path, out.read_text(encoding="utf-8"), PROBE)
    lines = probe["lines"]
    (point,) = [v["marks"][0] for k, v in lines.items() if k.startswith("workload ")]
    memory = next(v["line"] for k, v in lines.items() if k.startswith("memory "))
    compute = next(v["line"] for k, v in lines.items() if k.startswith("compute "))
    # SVG y grows downwards: under a roof is a larger y
    if bound == "memory":
        assert memory[0][0] <= point[0] <= memory[-1][0] and point[1] > _y_at(memory, point[0]), (point, memory)
    else:
        assert compute[0][0] <= point[0] <= compute[-1][0] and point[1] > compute[0][1], (point, compute)
    assert probe["width"] <= 1280
