"""The trace's timeline section: bounded in size whatever the number of events, lanes summarised
above 32 ranks, findings' windows marked, and laid out by headless Chromium (256 ranks)."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import trace_synth as T
from ceiling.analysis.trace_bins import timeline_bins
from ceiling.analysis.trace_patterns import trace_findings
from ceiling.report.html_style import CSS
from ceiling.report.html_trace import LEFT, RIGHT, WIDTH, render_timeline
from ceiling.results.events import Counters, Track

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)


def _counters():
    ts = np.arange(201) * 100_000_000
    return Counters([Track("disk sda write bytes/s", "B/s", "node", ts, np.abs(np.sin(ts / 9e8)) * 3e8,
                           device="sda")], 0.1)


def _section(ev):
    fs = trace_findings([ev], _counters())
    return render_timeline(timeline_bins([ev]), _counters(), fs), fs


def test_256_ranks_summarised_and_windows_marked():
    html, fs = _section(T.big())
    assert [f.id for f in fs] == ["trace.io.single_writer"]
    assert "ranks 0-7" in html and "rank 5<" not in html           # 32 blocks of 8, not 256 lanes
    assert html.count("<polygon") == 5                             # min-max band per class
    assert html.count('stroke="#C2410C"') == 3                     # the three checkpoint windows
    assert "disk sda write bytes/s" in html
    assert "<script" not in html


def test_few_ranks_one_lane_each():
    html, _ = _section(T.single_writer(4))
    assert all(f">rank {r}</text>" in html for r in range(4))
    assert "<polygon" not in html


def test_page_size_does_not_grow_with_events():
    small, _ = _section(T.big(steps=10))
    large, _ = _section(T.big(steps=160))                          # 16x the events, 10^6 of them
    # at most one rect per drawn column and row: 32 rows x 600 columns, whatever the events
    assert large.count("<rect") <= 32 * 600 + 100
    assert len(large) < 2_000_000 and len(small) < 2_000_000


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not found")
def test_chromium_lays_out_the_timeline(tmp_path):
    html, _ = _section(T.big())
    probe = ("<script>var s=document.querySelector('svg.timeline').getBoundingClientRect();"
             "var p=document.createElement('pre');p.id='probe';p.textContent=s.width+' '+s.height+' '"
             "+document.documentElement.scrollWidth;document.body.appendChild(p);</script>")
    page = tmp_path / "t.html"
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{CSS}</style></head><body><main>"
                    f"{html}</main>{probe}</body></html>", encoding="utf-8")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'prof'}", "--window-size=1280,1200", "--dump-dom", page.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    w, h, scroll = map(float, re.search(r'<pre id="probe">([^<]*)</pre>', dom).group(1).split())
    assert w > 1000 and h > 400 and scroll <= 1280


def test_processes_outside_mpi_are_drawn_only_while_they_exist():
    # a shell and three short children: before the bins knew each lane's life, every child was drawn
    # computing over the whole run
    parts = [dict(T.calls(-1, [0, 9 * T.S], T.MS, T.IO_META, T.OPEN), pid=np.full(2, 0, np.int32))]
    for i in range(3):
        c = T.calls(-1, [(2 + 2 * i) * T.S, (3 + 2 * i) * T.S], 10 * T.MS, T.IO_WRITE, T.WRITE, 4096)
        parts.append(dict(c, pid=np.full(2, i + 1, np.int32)))
    b = timeline_bins([T.events(parts)], 100)
    assert b.alive is not None and b.alive[1, 10] == 0 and b.alive[1, 25] == 1 and b.alive[1, 40] == 0
    assert b.compute[1, 10] == 0 and b.compute[1, 25] > 0.9
    svg = render_timeline(b)
    # the child's lane: one stretch of about a tenth of the plot, not the whole width
    row = svg.split(">pid 1</text>")[0].rsplit("<g><title>", 1)[1]
    widths = [float(w) for w in re.findall(r'width="([0-9.]+)"', row)]
    assert widths and sum(widths) < 0.2 * (WIDTH - LEFT - RIGHT), widths
