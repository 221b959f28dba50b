"""The /proc sampler's per-process series (probes/proc_sampler.Sampled.series), which the trace's
time line splits the time outside calls with: cumulative CPU from the process's start, and bounded."""
import os

import pytest

from ceiling.probes import proc_sampler
from ceiling.probes.proc_sampler import ProcSampler


def test_a_sample_of_a_live_process_starts_its_series_at_zero_cpu():
    s = ProcSampler(os.getpid(), 0.1)
    s.sample()
    s.sample()
    pts = s.out.series[os.getpid()]
    assert len(pts) == 3 and pts[0][1] == 0.0 and pts[0][0] <= pts[1][0] <= pts[2][0]
    assert 0 < pts[1][1] <= pts[2][1] and pts[2][2] >= 1       # this process has used CPU, on 1+ threads


def test_a_long_series_is_thinned_keeping_its_start_and_its_latest_point(monkeypatch):
    monkeypatch.setattr(proc_sampler, "SERIES_POINTS", 64)
    s = ProcSampler(12345, 0.1)
    for i in range(1000):
        s._cpu_sum[12345] = i * 0.01
        s._series(12345, 100.0 + i, 1)
    pts = s.out.series[12345]
    assert len(pts) <= 65 and pts[-1] == (100.0 + 999, 9.99, 1) and pts[0][1] == 0.0
    assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(pts, pts[1:]))


def test_a_live_process_has_its_threads_and_usage_series():
    s = ProcSampler(os.getpid(), 0.1)
    s.sample()
    s.sample()
    me = os.getpid()
    assert len(s.out.thread_series[(me, me)]) == 3 and s.out.thread_series[(me, me)][0][1] == 0.0
    use = s.out.usage[me]
    assert len(use) == 2 and all(r is not None and r > 1 << 20 for _, r, _, _ in use)      # RSS, bytes


def test_process_tracks_give_cpus_rss_and_io_rates_per_process_and_summed():
    out = proc_sampler.Sampled(interval_s=0.5)
    # two processes sampled at 10.0, 10.5, 11.0 s: pid 1 uses one CPU then half of one, pid 2 a quarter; pid 1
    # writes 1 MB in the second interval; pid 3 is not the trace's
    out.series = {1: [(9.8, 0.0, 1), (10.0, 0.1, 1), (10.5, 0.6, 1), (11.0, 0.85, 1)],
                  2: [(10.0, 0.0, 1), (10.5, 0.125, 1), (11.0, 0.25, 1)], 3: [(10.0, 0.0, 1), (11.0, 1.0, 1)]}
    out.usage = {1: [(10.0, 4096, 0, 0), (10.5, 8192, 0, 0), (11.0, 8192, 0, 1_000_000)],
                 2: [(10.0, 1000, None, None), (10.5, 1000, None, None), (11.0, 1000, None, None)]}
    per, total = proc_sampler.process_tracks(out, 10_000_000_000, pids={1, 2})
    by = {(t.pid, t.name): t for t in per}
    assert set(by) == {(1, "cpu"), (1, "rss"), (1, "write bytes/s"), (2, "cpu"), (2, "rss")}   # no I/O read: left out
    assert list(by[(1, "cpu")].ts) == [0, 500_000_000, 1_000_000_000]
    assert by[(1, "cpu")].value == pytest.approx([0.5, 1.0, 0.5]) and by[(1, "cpu")].unit == "CPUs"
    assert by[(1, "write bytes/s")].value == pytest.approx([0.0, 2e6]) and by[(1, "rss")].unit == "B"
    assert all(t.scope == "process" for t in per)
    tot = {t.name: t for t in total}
    assert set(tot) == {"program cpu", "program rss", "program write bytes/s"}
    assert tot["program cpu"].value == pytest.approx([0.5, 1.25, 0.75])
    assert list(tot["program rss"].value) == [5096, 9192, 9192]
