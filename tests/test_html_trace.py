"""The trace's timeline section: bounded in size whatever the number of events, lanes summarised
above 32 ranks, findings' windows marked, and laid out by headless Chromium (256 ranks)."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import trace_synth as T
from ceiling.analysis.trace_bins import lane_pids, split_off_cpu, timeline_bins
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


def _sleeper(t0_ns=0):
    """A process (pid 5, one thread) alive 0-2 s: an open at 0, a 0.5 s write at 1.5 s, an open at 2 s;
    the sampler's series as it records it (monotonic s, CPU s so far, threads): no CPU over the
    first second, all of the second second's time outside the write on a CPU."""
    c = T.calls(-1, [0, 2 * T.S], T.MS, T.IO_META, T.OPEN)
    w = T.calls(-1, [int(1.5 * T.S)], T.S // 2, T.IO_WRITE, T.WRITE, 4096)
    ev = T.events([dict(c, pid=np.full(2, 5, np.int32)), dict(w, pid=np.full(1, 5, np.int32))])
    base = t0_ns / 1e9
    series = {5: [(base + 0.0, 0.0, 1), (base + 0.5, 0.0, 1), (base + 1.0, 0.001, 1), (base + 1.5, 0.501, 1),
                  (base + 2.0, 0.501, 1)],
              999: [(base, 0.0, 1), (base + 2.0, 2.0, 1)]}          # a process with no events: no lane
    return ev, series


def test_time_outside_calls_is_split_into_computing_and_waiting_by_the_samples():
    ev, series = _sleeper()
    b = timeline_bins([ev], 20)
    assert b.off_cpu is None and b.compute[0, :10].min() > 0.95          # unsplit: all of it computing
    s = split_off_cpu(b, series, lane_pids([ev]), ev.t0_ns, 0.5)
    # the first second: off CPU (the 1 ms of CPU is taken off it: at least the waiting drawn)
    assert s.off_cpu[0, :10].min() > 0.99 * s.outside[0, :10].min() and s.compute[0, :10].max() < 0.01
    assert abs(s.off_cpu[0, :10].sum() * s.width_ns / 1e9 - 0.998) < 0.003
    # 1-1.5 s: on a CPU; 1.5-2 s: in the write (I/O, neither)
    assert s.off_cpu[0, 10:15].max() < 0.01 and s.compute[0, 10:15].min() > 0.95
    assert s.off_cpu[0, 15:].max() < 0.01 and s.of("io")[0, 15:].min() > 0.95
    # drawn: the first half in the off-CPU colour, the second in computing's and I/O's
    svg = render_timeline(s)
    row = svg.split(">pid 5</text>")[0].rsplit("<g><title>", 1)[1]
    assert re.findall(r'<rect[^>]*fill="(#[0-9A-F]+)"', row) == ["#D4D4D4", "#56B4E9", "#E69F00"]
    assert "waiting off CPU outside calls" in svg and "every 0.5 s" in svg


def test_a_series_on_another_clock_origin_lands_on_the_same_bins():
    # the events' t0 on CLOCK_MONOTONIC: the samples are placed by it
    ev, series = _sleeper(t0_ns=7 * T.S)
    ev.t0_ns = 7 * T.S
    s = split_off_cpu(timeline_bins([ev], 20), series, lane_pids([ev]), ev.t0_ns)
    assert s.off_cpu[0, :10].min() > 0.95 and s.off_cpu[0, 10:].max() < 0.01


def test_a_wait_state_is_framed_and_listed_with_its_ranks_and_windows():
    from ceiling.analysis.trace_waits import wait_findings
    from ceiling.results.events import MPI_COLL, MPI_P2P, Events
    from ceiling.probes.interpose_names import names
    calls = names().calls
    ids = {c.fn: i for i, c in enumerate(calls)}
    ms = 1_000_000
    rows = [dict(rank=r, pid=10 + r, tid=10 + r, kind=MPI_COLL, call=ids["MPI_Barrier"], ts=t * ms, dur=(601 - t) * ms,
                 comm=0) for r, t in ((0, 100), (1, 600))]
    rows += [dict(rank=r, pid=10 + r, tid=10 + r, kind=MPI_P2P, call=ids["MPI_Finalize"], ts=1000 * ms, dur=0)
             for r in (0, 1)]
    from ceiling.results.events import Comm
    ev = Events.from_rows(rows, calls=calls, comms=[Comm("MPI_COMM_WORLD")])
    fs = wait_findings([ev])
    html = render_timeline(timeline_bins([ev]), None, fs)
    assert [f.id for f in fs] == ["trace.mpi.barrier"]
    assert html.count('stroke="#C2410C"') == 1
    assert "(0.1-0.6 s; 0.5 s lost)" in html
    assert "rank 0 MPI_Barrier on MPI_COMM_WORLD: 0.5 s in 1 call(s), 0.1-0.6 s" in html
