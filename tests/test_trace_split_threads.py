"""The time outside calls split per thread (issue 28): a helper thread asleep while the main thread
writes is waiting, not computing on the writer's CPU time, so a phase of nothing but I/O is said
serialized although the process has a second thread. Synthetic events and series, as the sampler
(probes/proc_sampler.Sampled.thread_series) and the interposer record them."""
import numpy as np

import trace_synth as T
from ceiling.analysis.trace_bins import lane_pids, split_off_cpu, timeline_bins
from ceiling.analysis.trace_patterns import serialized, trace_findings
from ceiling.results.events import IO_META, IO_READ, IO_WRITE

HELPER_CALL = 99


def _two_threads(helper_cpu_s=0.0):
    """Rank 0, pid 10, alive 0-3 s. Its main thread (tid 10) computes 0-1 s, writes 1-2 s (one
    call), computes 2-3 s; its helper thread (tid 11) reads a pipe for 1 ms at 0 and at 3 s (no
    storage: off_storage) and sleeps in between but for ``helper_cpu_s`` on a CPU over its first
    half second. CPU: the main thread all the time (a write into the page cache is system time)."""
    main = [T.calls(0, [0, 3 * T.S], T.MS, IO_META, T.OPEN), T.calls(0, [T.S], T.S, IO_WRITE, T.WRITE, 1 << 20)]
    helper = T.calls(0, [0, 3 * T.S], T.MS, IO_READ, HELPER_CALL, 64)
    helper["file"] = np.full(2, -1, np.int32)
    ev = T.events([dict(p, pid=np.full(len(p["ts"]), 10, np.int32)) for p in main + [helper]])
    ev.columns["tid"] = np.where(ev.call == HELPER_CALL, 11, 10).astype(ev.tid.dtype)
    samples = np.arange(0, 3.01, 0.1)
    threads = {(10, 10): [(float(t), float(t)) for t in samples],
               (10, 11): [(float(t), helper_cpu_s * min(t, 0.5) / 0.5) for t in samples]}
    series = {10: [(float(t), float(t), 2) for t in samples]}
    return ev, series, threads


def test_a_sleeping_helper_thread_is_waiting_not_computing():
    ev, series, threads = _two_threads(helper_cpu_s=0.1)      # on a CPU 3% of its life: not idle
    b = timeline_bins([ev], 30)
    assert b.threads == [2]
    # per process: the writer's CPU time inside its write is set against the helper's sleep, so the lane
    # computes about half its thread time through the write
    whole = split_off_cpu(b, series, lane_pids([ev]), 0, 0.1)
    assert whole.compute[0, 12:18].min() > 0.45
    # per thread: the helper's second is off a CPU, the writer in its write: nobody computes
    each = split_off_cpu(b, series, lane_pids([ev]), 0, 0.1, threads, [ev])
    assert each.threads == [2] and each.compute[0, 11:19].max() < 0.02, each.compute[0]
    assert each.waiting_off_cpu[0, 11:19].min() > 0.48 and each.of("io")[0, 11:19].min() > 0.48
    # outside the write the main thread computes: half the lane's thread time (the helper asleep)
    assert each.compute[0, 6:9].min() > 0.48 and each.compute[0, 21:29].min() > 0.48


def test_an_idle_helper_thread_is_left_out_of_its_lane():
    # on a CPU never and no call drawn (pipe reads): an MPI library's or a runtime's thread asleep all along;
    # counted, a rank computing beside it would be drawn half waiting
    ev, series, threads = _two_threads()
    each = split_off_cpu(timeline_bins([ev], 30), series, lane_pids([ev]), 0, 0.1, threads, [ev])
    assert each.threads == [1]
    assert each.of("io")[0, 11:19].min() > 0.95 and each.compute[0, 11:19].max() < 0.02
    assert each.compute[0, 1:9].min() > 0.95 and each.compute[0, 21:29].min() > 0.95
    assert each.waiting_off_cpu[0].max() < 0.02


def test_the_write_phase_is_serialized_only_when_split_per_thread():
    for helper in (0.0, 0.1):                               # the helper idle (left out), or asleep in the phase
        ev, series, threads = _two_threads(helper)
        pids = lane_pids([ev])
        plain = trace_findings([ev])
        assert not [f for f in plain if f.id == "trace.io.serialized"]
        by_process = trace_findings([ev], split=lambda b: split_off_cpu(b, series, pids, 0, 0.1))
        assert not [f for f in by_process if f.id == "trace.io.serialized"]
        found = trace_findings([ev], split=lambda b: split_off_cpu(b, series, pids, 0, 0.1, threads, [ev]))
        (f,) = [f for f in found if f.id == "trace.io.serialized"]
        assert 0.95 <= f.data["start_s"] <= 1.05 and 1.95 <= f.data["end_s"] <= 2.05, (helper, f.data)


def test_a_thread_without_a_series_stays_computing_and_one_sampled_asleep_waits():
    ev, series, threads = _two_threads()
    del threads[(10, 11)]                  # the helper ended before its first sample: not split, so not waiting
    b = split_off_cpu(timeline_bins([ev], 30), series, lane_pids([ev]), 0, 0.1, threads, [ev])
    assert b.waiting_off_cpu[0, 11:19].max() < 0.02 and b.compute[0, 11:19].min() > 0.45
    assert not serialized(b, np.zeros(b.nbins, bool))
