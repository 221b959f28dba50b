"""The trace's anti-pattern findings on synthetic traces with one planted pattern each: each found
with the right window, nothing else flagged, and nothing on a clean program."""
import numpy as np
import pytest

import trace_synth as T
from ceiling.analysis.trace_bins import CLASSES, timeline_bins
from ceiling.analysis.trace_patterns import StorageCeilings, trace_findings
from ceiling.results.events import Counters


def _ids(fs):
    return sorted(f.id for f in fs)


def _window_near(f, start, end, tol):
    assert abs(f.data["start_s"] - start) <= tol, f.data
    assert abs(f.data["end_s"] - end) <= tol, f.data


def test_clean_program_has_no_finding():
    assert trace_findings([T.clean()]) == []


@pytest.mark.parametrize("nranks", [2, 4])
def test_single_writer_with_its_window(nranks):
    fs = trace_findings([T.single_writer(nranks)])
    assert _ids(fs) == ["trace.io.single_writer"]
    f = fs[0]
    _window_near(f, 4.0, 6.0, 0.02)
    assert f.data["rank"] == 0 and f.data["refines"] == "profile.io.single_writer"
    # the others wait the whole window: (nranks - 1) x 2 s
    assert f.data["time_lost_s"] == pytest.approx(2.0 * (nranks - 1), rel=0.02)


def test_fluctuating_writes_told_from_another_job_by_the_device():
    own = trace_findings([T.fluctuating()], T.disk_track(40e6), StorageCeilings(write_mbs=2000.0, source="test"))
    assert _ids(own) == ["trace.io.fluctuating_writes"]
    f = own[0]
    _window_near(f, 2.0, 2.46, 0.012)
    assert f.data["slow_calls"] == 20 and f.data["calls"] == 200
    assert f.data["p99_ns"] / f.data["p50_ns"] == pytest.approx(10)
    assert f.data["time_lost_s"] == pytest.approx(20 * 9e-3)
    assert f.data["cause"] == "the page cache's write-back"
    assert "2000 MB/s" in f.fix
    other = trace_findings([T.fluctuating()], T.disk_track(40e6, 500e6))
    assert [g.data["cause"] for g in other] == ["another job"]
    unknown = trace_findings([T.fluctuating()])
    assert unknown[0].data["cause"].startswith("unknown")


def test_fluctuating_writes_while_tasks_waited_for_a_cpu_are_said_to_be_maybe_preempted():
    """Under load a write is slow because its thread waited for a CPU, and the device's figures
    (no more than the program's own data) would blame the page cache's write-back."""
    disk = T.disk_track(40e6)
    busy = trace_findings([T.fluctuating()], Counters(disk.tracks + [T.cpu_wait_track(0.8, 0.02)], 0.1))
    assert [f.data["cause"] for f in busy] == ["waiting for a CPU"]
    assert "waited for a CPU 80% of the time around the slow calls (PSI cpu some; 2% otherwise)" in busy[0].why
    quiet = trace_findings([T.fluctuating()], Counters(disk.tracks + [T.cpu_wait_track(0.05, 0.02)], 0.1))
    assert [f.data["cause"] for f in quiet] == ["the page cache's write-back"]
    other = trace_findings([T.fluctuating()],
                           Counters(T.disk_track(40e6, 500e6).tracks + [T.cpu_wait_track(0.8)], 0.1))
    assert [f.data["cause"] for f in other] == ["another job"] and "waited for a CPU 80%" in other[0].evidence


def test_a_rate_is_read_over_the_interval_that_holds_a_short_call():
    from ceiling.analysis.trace_patterns import _mean_in
    t = T.cpu_wait_track(0.5, 0.1, slow=(2.0, 2.1))         # the interval (2.0, 2.1] s only
    inside, outside = _mean_in(t, [(2_030_000_000, 2_033_000_000)])    # a 3 ms call in it, no reading inside
    assert inside == pytest.approx(0.5) and outside == pytest.approx(0.1)


def test_uniform_writes_are_not_fluctuating():
    ev = T.fluctuating()
    ev.columns["dur"][:] = 1_000_000
    assert trace_findings([ev]) == []


def test_serialized_io_phase_with_its_share():
    fs = trace_findings([T.serialized()])
    assert _ids(fs) == ["trace.io.serialized"]
    _window_near(fs[0], 3.0, 5.0, 0.02)
    assert fs[0].data["share"] == pytest.approx(2.0 / 9.001, abs=0.01)


def test_open_close_storm_against_the_metadata_rate():
    fs = trace_findings([T.open_close_storm()], ceilings=StorageCeilings(meta_ops=40_000.0))
    assert _ids(fs) == ["trace.io.metadata_storm"]
    _window_near(fs[0], 7.0, 8.0, 0.02)
    assert fs[0].data["calls"] == 80_000
    assert "200% of it" in fs[0].evidence


def test_bins_are_the_same_whole_or_in_chunks():
    ev = T.big(nranks=40, steps=10)
    half = len(ev) // 2
    whole = timeline_bins([ev], 500)
    split = timeline_bins([ev.select(np.arange(len(ev)) < half), ev.select(np.arange(len(ev)) >= half)], 500,
                          span=(0, ev.end_ns))
    assert whole.lanes == split.lanes == list(range(40))
    np.testing.assert_allclose(whole.share, split.share, atol=1e-5)
    # rank 0's checkpoint writes: 0.5 s of I/O from 5 s
    io = whole.of("io")[0]
    mid = (whole.edges_ns[:-1] >= 5.05e9) & (whole.edges_ns[1:] <= 5.45e9)
    assert io[mid].min() > 0.99
    assert len(CLASSES) == whole.share.shape[1]


def test_one_cold_read_in_a_long_run_is_not_fluctuating():
    # python's start-up reads: 21 reads of one size at 4 us, one at 80 us (a cold cache), in a 10 s
    # run: p99 20x the median and the slow one half of these calls' time, but 76 us of 10 s lost
    ts = 1 * T.S + np.arange(21) * 300 * T.MS
    dur = np.full(21, 4_000)
    dur[7] = 80_000
    ev = T.events([T.calls(0, ts, dur, T.IO_READ, T.WRITE + 1, 4096),
                   T.calls(0, [10 * T.S - T.MS], T.MS, T.MPI_COLL, T.BARRIER)])
    assert [f.id for f in trace_findings([ev])] == []
    # the slow one at 200 ms: 2 % of the run lost, said
    dur[7] = 200 * T.MS
    ev = T.events([T.calls(0, ts, dur, T.IO_READ, T.WRITE + 1, 4096),
                   T.calls(0, [10 * T.S - T.MS], T.MS, T.MPI_COLL, T.BARRIER)])
    assert [f.id for f in trace_findings([ev])] == ["trace.io.fluctuating_reads"]


def _launched(ev, helpers=True):
    """The events as under mpiexec: a launcher process (a lane of its own, alive the whole run, in poll
    outside every intercepted call) and, where ``helpers``, an MPI library's helper thread in each rank,
    asleep from MPI_Init to MPI_Finalize (one call at each end)."""
    end = ev.end_ns
    parts = [T.calls(-1, [0, end - T.MS], 100_000, T.IO_META, T.OPEN)]     # pid 999: the launcher
    ranks = sorted(set(ev.rank.tolist()) - {-1})
    if helpers:
        parts += [T.calls(r, [50 * T.MS, end - 2 * T.MS], 100_000, T.IO_META, T.OPEN + 7) for r in ranks]
    more = T.events(parts)
    helper = more.call == T.OPEN + 7
    more.columns["tid"] = np.where(helper, more.pid.astype(np.int64) + 50_000, more.tid).astype(more.tid.dtype)
    cols = {k: np.concatenate([ev.columns[k], more.columns[k]]) for k in ev.columns}
    out = T.Events(0, 0, cols)
    out.sort()
    return out


def test_single_writer_under_a_launcher_with_helper_threads():
    # the launcher's lane, in no MPI call, was the median "other rank", and each rank's sleeping helper
    # thread halved its shares: rank 0 in I/O half the time, rank 1 in MPI half: not said before
    fs = trace_findings([_launched(T.single_writer(2))])
    assert _ids(fs) == ["trace.io.single_writer"]
    _window_near(fs[0], 4.0, 6.0, 0.02)
    assert fs[0].data["rank"] == 0 and fs[0].data["time_lost_s"] == pytest.approx(2.0, rel=0.02)
    assert "the other 1 ranks" in fs[0].evidence


def test_serialized_phase_under_a_launcher():
    # the launcher, outside every intercepted call, was taken to compute through the phase
    fs = trace_findings([_launched(T.serialized(), helpers=False)])
    assert _ids(fs) == ["trace.io.serialized"]
    _window_near(fs[0], 3.0, 5.0, 0.02)
    assert fs[0].data["time_lost_s"] == pytest.approx(4 * 2.0, rel=0.02)       # the 4 ranks, not the launcher


def test_fluctuating_slow_calls_are_not_said_again_as_a_serialized_phase():
    # one process: 4 ms of compute, then a 1 MiB write of 1 ms; every tenth takes 40 ms. Each slow call
    # is, for its bins, I/O with no one computing: said once, as the fluctuating writes
    dur = np.full(100, T.MS)
    dur[9::10] = 40 * T.MS
    ts = np.cumsum(4 * T.MS + np.concatenate(([0], dur[:-1])))
    ev = T.events([T.calls(0, ts, dur, T.IO_WRITE, T.WRITE, 1 << 20),
                   T.calls(0, [int(ts[-1] + 50 * T.MS)], T.MS, T.MPI_COLL, T.BARRIER)])
    fs = trace_findings([ev])
    assert _ids(fs) == ["trace.io.fluctuating_writes"]
    assert fs[0].data["slow_calls"] == 10


def test_an_open_close_storm_with_long_calls_in_it_is_one_storm_and_no_serialized_phase():
    # 3 s; from 1 s to 2 s back-to-back metadata calls of 40 us (nothing computes between them), every
    # 100th a 6 ms one, in which no call starts: the storm was cut at each, and its bins, with no one
    # computing, said again as a serialized phase
    dur = np.full(11_000, 40_000)
    dur[99::100] = 6 * T.MS
    ts = T.S + np.concatenate(([0], np.cumsum(dur[:-1])))
    ev = T.events([T.calls(0, ts, dur, T.IO_META, T.OPEN), T.calls(0, [3 * T.S - T.MS], T.MS, T.MPI_COLL, T.BARRIER)])
    fs = trace_findings([ev])
    assert _ids(fs) == ["trace.io.metadata_storm"]
    f = fs[0]
    assert len(f.data["windows"]) == 1 and f.data["calls"] == 11_000
    _window_near(f, 1.0, ts[-1] / T.S + dur[-1] / T.S, 0.01)
