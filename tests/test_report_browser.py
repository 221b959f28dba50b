"""The HTML report in a real browser: headless Chromium lays out every plot
with a non-zero size, and a screenshot of the page is not blank.

Skipped when no Chromium is installed (set CEILING_CHROMIUM to point at one).
"""
import html as htmllib
import json
import os
import re
import shutil
import struct
import subprocess

import pytest


import sample_runs
from reporting import render_html, write_html

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def probe_script(collect: str, result: str) -> str:
    """A script added to the page under test only: the JavaScript COLLECT gathers what it measures and the
    JavaScript expression RESULT is left as JSON in a <pre id="probe">, which probe_page reads."""
    return ("<script>\n(function () {\n" + collect + "  var pre = document.createElement('pre');\n"
            "  pre.id = 'probe';\n  pre.textContent = JSON.stringify(" + result + ");\n"
            "  document.body.appendChild(pre);\n})();\n</script>")


# A probe added to the page under test only: the report itself carries no script.
PROBE = probe_script("""  var out = [];
  document.querySelectorAll('svg.plot').forEach(function (s) {
    var r = s.getBoundingClientRect(), b = s.getBBox();
    out.push({series: s.getAttribute('data-series'), w: r.width, h: r.height, bw: b.width, bh: b.height,
              marks: s.querySelectorAll('polyline, path, rect, circle, polygon').length});
  });
""", """{plots: out, width: document.documentElement.scrollWidth,
                                    height: document.documentElement.scrollHeight}""")


def _chromium():
    for name in (os.environ.get("CEILING_CHROMIUM"), "chromium", "chromium-browser", "google-chrome",
                 "google-chrome-stable"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


CHROMIUM = _chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not found (set CEILING_CHROMIUM)")


def _run_chromium(tmp_path, url, *args):
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}", *args, url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def probe_page(tmp_path, page: str, probe: str = PROBE, name: str = "probed.html",
               window: str = "1280,2000") -> dict:
    """PAGE with PROBE added before </body>, written to TMP_PATH/NAME and laid out by headless Chromium in a
    window of WINDOW; the JSON the probe left in its <pre id="probe">."""
    path = tmp_path / name
    path.write_text(page.replace("</body>", probe + "\n</body>"), encoding="utf-8")
    dom = _run_chromium(tmp_path, path.as_uri(), f"--window-size={window}", "--dump-dom")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert found, "the probe did not run: " + dom[-500:]
    return json.loads(htmllib.unescape(found.group(1)))


@needs_chromium
@pytest.mark.parametrize("which", ["vm", "epyc"])
def test_every_plot_is_laid_out_with_a_size(tmp_path, which):
    run = sample_runs.ALL[which]()
    probe = probe_page(tmp_path, render_html(run), name="report.html")
    plots = {p["series"]: p for p in probe["plots"]}
    assert set(plots) == {s.name for s in run.series} | {"roofline"}
    for name, p in plots.items():
        assert p["w"] > 150 and p["h"] > 100, (name, p)        # laid out on the page
        assert p["bw"] > 100 and p["bh"] > 80, (name, p)       # its content has extent
        assert p["marks"] >= 3, (name, p)
    assert probe["width"] <= 1280                                # nothing forces a horizontal scroll


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@needs_chromium
def test_screenshot_is_not_blank(tmp_path):
    path = tmp_path / "report.html"
    write_html(sample_runs.epyc_run(), path)
    shot = tmp_path / "shot.png"
    _run_chromium(tmp_path, path.as_uri(), "--window-size=1280,1800", f"--screenshot={shot}")
    assert _png_size(shot) == (1280, 1800)
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    empty = tmp_path / "empty.png"
    _run_chromium(tmp_path, blank.as_uri(), "--window-size=1280,1800", f"--screenshot={empty}")
    # A page of text and plots compresses far worse than a white page of the same size.
    assert shot.stat().st_size > 8 * empty.stat().st_size


# A probe for the study page: where each member's row and its cells are laid out.
STUDY_PROBE = probe_script("""  var rows = [];
  document.querySelectorAll('table.members tr[data-member]').forEach(function (tr) {
    var r = tr.getBoundingClientRect(), cells = [];
    tr.querySelectorAll('td').forEach(function (td) { cells.push(td.textContent.trim()); });
    rows.push({member: tr.getAttribute('data-member'), w: r.width, h: r.height, top: r.top, cells: cells});
  });
""", """{rows: rows, width: document.documentElement.scrollWidth}""")


@needs_chromium
def test_a_study_page_lays_out_a_row_per_member(tmp_path):
    from pathlib import Path
    from ceiling.report import html_study
    from ceiling.results import jsonio
    study = jsonio.load_document(Path(__file__).parent / "golden" / "study_v1.json")
    probe = probe_page(tmp_path, html_study.render(study), STUDY_PROBE, "study.html", "1280,1200")
    assert [r["member"] for r in probe["rows"]] == [str(i) for i in range(len(study.members))]
    tops = [r["top"] for r in probe["rows"]]
    assert tops == sorted(tops) and len(set(tops)) == len(tops)          # one under the other, in order
    for r, m in zip(probe["rows"], study.members):
        assert r["w"] > 600 and 10 < r["h"] < 80, r                      # laid out across the page, one line
        assert r["cells"][0] == str(m.value) and r["cells"][1] == m.run_id[:12]
    assert probe["width"] <= 1280
