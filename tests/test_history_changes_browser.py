"""The page of ``ceiling history --changes --html`` in a real browser: headless Chromium lays out each plot
with a size, each node's series drawn and each change and configuration change marked inside the plot.

Skipped when no Chromium is installed (set CEILING_CHROMIUM to point at one)."""

import pytest

from ceiling import cli
from test_history_changes import _history
from test_report_browser import needs_chromium, probe_page, probe_script

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PROBE = probe_script("""  var out = [];
  document.querySelectorAll('svg.plot').forEach(function (s) {
    var r = s.getBoundingClientRect(), frame = s.querySelector('rect[fill="none"]').getBoundingClientRect();
    var marks = [];
    s.querySelectorAll('line[stroke="#C2410C"], line[stroke="#7a7a7a"]').forEach(function (l) {
      var b = l.getBoundingClientRect();
      marks.push({colour: l.getAttribute('stroke'), inside: b.left >= frame.left - 1 && b.right <= frame.right + 1});
    });
    out.push({series: s.getAttribute('data-series'), w: r.width, h: r.height,
              lines: s.querySelectorAll('polyline').length, marks: marks});
  });
""", """{plots: out, width: document.documentElement.scrollWidth}""")


@needs_chromium
def test_each_series_that_changed_is_plotted_with_its_changes_marked(tmp_path, capsys):
    db = tmp_path / "history.db"
    _history(db)
    page = tmp_path / "changes.html"
    assert cli.main(["history", "--db", str(db), "--changes", "--html", str(page)]) == 0
    capsys.readouterr()
    probe = probe_page(tmp_path, page.read_text(), PROBE, "changes.html")
    plots = {p["series"]: p for p in probe["plots"]}
    assert set(plots) == {"stream.triad threads=8", "dgemm.node threads=8"}
    for name, p in plots.items():
        assert p["w"] > 400 and p["h"] > 200 and p["lines"] == 2, (name, p)     # both nodes, side by side
        assert all(m["inside"] for m in p["marks"]), (name, p)
    triad = [m["colour"] for m in plots["stream.triad threads=8"]["marks"]]
    assert triad.count("#C2410C") == 2 and triad.count("#7a7a7a") == 2           # a step and a BIOS change a node
    assert [m["colour"] for m in plots["dgemm.node threads=8"]["marks"]].count("#C2410C") == 1
    assert probe["width"] <= 1280
