"""Thread scaling's verdicts (analysis/profile_scaling.py) on made-up runs, and the thread
counts tried and the runs themselves (experiments/scaling.py)."""
from __future__ import annotations

import os

import pytest

from ceiling.analysis.profile_scaling import classify, finding
from ceiling.experiments.scaling import thread_counts


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


# ---- the runs themselves: real processes, observed (observe/) ------------------------------------------------

SH = "/bin/sh"


def test_each_count_is_a_run_with_its_omp_num_threads_in_rotating_order(tmp_path):
    """Round 2 starts where round 1 left off; a failed run's status is kept (not its time), and the
    CPU time is wait4's for the program and what it waited for."""
    from ceiling.experiments.scaling import run_threads
    log = tmp_path / "log"
    script = (f'echo "$OMP_NUM_THREADS ${{LD_PRELOAD:-none}}" >> {log}; '
              'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; [ "$OMP_NUM_THREADS" != 2 ] || exit 3')
    res = run_threads([SH, "-c", script], SH, [1, 2], 2, env=dict(os.environ, LD_PRELOAD=""))
    assert log.read_text().split("\n")[:-1] == ["1 none", "2 none", "2 none", "1 none"]
    assert res["failed"] == {2: 3} and res["times"][2] == [] and len(res["times"][1]) == 2
    assert all(t > 0 for t in res["times"][1]) and all(c > 0 for c in res["cpu_s"][1])
    assert (res["interrupted"], res["stopped_by"], res["overdue"]) == (False, "", None) and res["cost_s"] > 0


def test_a_run_past_its_deadline_ends_the_scaling_runs_and_names_its_count():
    from ceiling.experiments.scaling import run_threads
    res = run_threads([SH, "-c", 'if [ "$OMP_NUM_THREADS" = 4 ]; then sleep 300; fi'], SH, [1, 4], 2,
                      deadline_s=0.5)
    assert res["overdue"] == 4 and len(res["times"][1]) == 1 and res["times"][4] == [] and not res["interrupted"]
    assert res["cost_s"] < 30
