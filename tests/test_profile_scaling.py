"""Thread scaling's verdicts (analysis/profile_scaling.py) on made-up runs, and the thread
counts tried (probes/scaling.py)."""
from __future__ import annotations

import pytest

from ceiling.analysis.profile_scaling import classify, finding
from ceiling.probes.scaling import thread_counts


def runs(t1, tn, busy1, busyn, n=4, half=None):
    times = {1: [t1, t1 * 1.01], n: [tn, tn * 1.01]}
    cpu = {1: [t1 * busy1] * 2, n: [tn * busyn] * 2}
    if half:
        times[n // 2], cpu[n // 2] = [half, half], [half * 2, half * 2]
    return times, cpu


@pytest.mark.parametrize("t1, tn, busy1, busyn, kind", [
    (8.0, 2.1, 1.0, 3.9, "scales"),            # 3.8x on 4: 95 %
    (8.0, 5.0, 1.0, 3.8, "contention"),        # 1.6x while 3.8 CPUs were busy
    (8.0, 5.0, 1.0, 1.6, "serial"),            # 1.6x and the threads idle
    (8.0, 8.0, 1.0, 1.05, "ignored"),          # OMP_NUM_THREADS changed nothing
])
def test_each_scaling_kind(t1, tn, busy1, busyn, kind):
    v = classify(*runs(t1, tn, busy1, busyn, half=4.5))
    assert v["kind"] == kind, v
    f = finding(v)
    assert f.id == "profile.scaling" and f.status == ("ok" if kind in ("scales", "ignored") else "warn")
    if kind != "ignored":
        top = v["points"][-1]
        assert top["threads"] == 4 and top["speedup"] == pytest.approx(t1 / tn)
        assert [p["threads"] for p in v["points"]] == [1, 2, 4]


def test_the_serial_fraction_is_karp_flatts():
    v = classify(*runs(8.0, 5.0, 1.0, 1.6))
    s = 8.0 / 5.0
    assert v["points"][-1]["serial_fraction"] == pytest.approx((1 / s - 1 / 4) / (1 - 1 / 4))
    assert "serial fraction 50%" in finding(v).title


def test_runs_that_did_not_finish_give_no_verdict():
    assert classify({1: [], 4: [1.0]}, {1: [], 4: [1.0]})["kind"] is None


def test_spread_rounds_lower_the_confidence():
    times, cpu = runs(8.0, 2.1, 1.0, 3.9)
    assert classify(times, cpu)["confidence"] == "medium"
    times[4] = [2.1, 3.0]
    assert classify(times, cpu)["confidence"] == "low"


@pytest.mark.parametrize("cpus, counts", [(1, []), (2, [1, 2]), (3, [1, 3]), (16, [1, 8, 16])])
def test_thread_counts(cpus, counts):
    assert thread_counts(cpus) == counts
