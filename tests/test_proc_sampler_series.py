"""The /proc sampler's per-process series (probes/proc_sampler.Sampled.series), which the trace's
time line splits the time outside calls with: cumulative CPU from the process's start, and bounded."""
import os

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
