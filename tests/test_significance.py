"""analysis/significance.py: the bootstrap interval on the ratio of medians, the noise thresholds,
and the verdict, on synthetic repetitions (deterministic: the bootstrap's seed is fixed)."""
from __future__ import annotations

import random

from ceiling.analysis import significance as sig
from ceiling.results.model import HIGHER, LOWER


def _reps(center: float, cv: float, n: int, seed: int):
    r = random.Random(seed)
    return [r.gauss(center, center * cv) for _ in range(n)]


def test_interval_is_deterministic_and_covers_the_ratio():
    a, b = _reps(100, 0.02, 10, 1), _reps(90, 0.02, 10, 2)
    one = sig.median_ratio_interval(a, b)
    assert one == sig.median_ratio_interval(a, b)
    assert one.resamples == sig.RESAMPLES
    assert one.low <= one.ratio <= one.high
    assert one.high < 1.0                      # a 10 % drop at 2 % noise is outside no change


def test_three_against_three_can_be_significant():
    # a rank test of 3 against 3 never reaches p < 0.05; separated sets must still be told apart
    j = sig.judge([100, 101, 99], [80, 81, 79], HIGHER, "stream.triad")
    assert j.verdict == sig.WORSE
    assert abs(j.change - (-0.2)) < 1e-9
    assert j.low <= j.change <= j.high < 0


def test_lower_is_better_direction():
    j = sig.judge([50, 51, 49, 50], [60, 61, 59, 60], LOWER, "latency.dram")
    assert j.verdict == sig.WORSE and j.change < 0      # latency up 20 %: worse
    j = sig.judge([60, 61, 59, 60], [50, 51, 49, 50], LOWER, "latency.dram")
    assert j.verdict == sig.BETTER and j.change > 0


def test_one_reading_of_direction_and_family_serves_compare_and_changes():
    """compare's directed() and history --changes' words come from one reading of ``better``; a family's metrics
    are those named with its prefix (history --changes --family), the family family() gives."""
    for better in (HIGHER, LOWER, ""):
        for ratio in (0.9, 1.0, 1.1):
            d = sig.directed(ratio, better)
            assert sig.direction(ratio - 1.0, better) == ("same" if d == 0 else "better" if d > 0 else "worse")
    assert sig.direction(-0.1, LOWER) == "better" and sig.direction(-0.1, "") == "worse"
    assert sig.in_family("stream.triad", "stream") and sig.family("stream.triad") == "stream"
    assert not sig.in_family("streamx.triad", "stream") and sig.family_prefix("dgemm") == "dgemm."


def test_pure_noise_is_no_significant_change():
    hits = 0
    for seed in range(100):
        a, b = _reps(100, 0.02, 5, seed), _reps(100, 0.02, 5, 1000 + seed)
        hits += sig.judge(a, b, HIGHER, "stream.triad").verdict != sig.SAME
    assert hits == 0          # a 10 % family threshold is far beyond 2 % noise


def test_small_change_within_family_threshold_is_noise_even_when_interval_excludes_one():
    a, b = [100.0, 100.1, 99.9, 100.0], [97.0, 97.1, 96.9, 97.0]       # 3 % lower, tight
    j = sig.judge(a, b, HIGHER, "stream.triad")
    assert j.high < 0 and not j.beyond_threshold
    assert j.verdict == sig.SAME and "threshold" in j.basis


def test_family_thresholds_are_cluster_modes():
    from ceiling.analysis.cluster import THRESHOLDS
    assert sig.family_threshold("dgemm.node") == THRESHOLDS["dgemm"]
    assert sig.family_threshold("stream.triad") == THRESHOLDS["stream"]
    assert sig.family_threshold("nosuch.metric") == sig.DEFAULT_THRESHOLD


def test_no_repetitions_is_unknown_not_no_change():
    j = sig.judge([], [], HIGHER, "stream.triad", a_value=100.0, b_value=100.0)
    assert j.verdict == sig.UNKNOWN and j.change == 0.0
    j = sig.judge([100.0], [50.0, 51.0], HIGHER, "stream.triad", a_value=100.0, b_value=51.0)
    assert j.verdict == sig.UNKNOWN and j.beyond_threshold


def test_history_replaces_family_threshold():
    hist = _reps(100, 0.005, 20, 7)          # 0.5 % run-to-run spread
    th = sig.noise_threshold("stream.triad", hist)
    assert th.source == "history" and th.runs == 20 and th.fraction < 0.05
    assert sig.noise_threshold("stream.triad", hist[:9]).source == "family"
    # a 4 % drop: noise by the family's 10 %, significant against this history
    a, b = _reps(100, 0.003, 5, 3), _reps(96, 0.003, 5, 4)
    assert sig.judge(a, b, HIGHER, "stream.triad").verdict == sig.SAME
    assert sig.judge(a, b, HIGHER, "stream.triad", history=hist).verdict == sig.WORSE


def test_history_judges_runs_without_repetitions():
    hist = _reps(100, 0.005, 20, 7)
    j = sig.judge([], [], HIGHER, "stream.triad", a_value=100.0, b_value=90.0, history=hist)
    assert j.verdict == sig.WORSE and "no repetitions" in j.basis
    j = sig.judge([], [], HIGHER, "stream.triad", a_value=100.0, b_value=99.9, history=hist)
    assert j.verdict == sig.SAME


def test_noisy_history_holds_back_a_change_the_repetitions_call():
    hist = _reps(100, 0.08, 30, 9)           # the runs differ by 8 % from run to run
    a, b = _reps(100, 0.002, 5, 3), _reps(85, 0.002, 5, 4)
    j = sig.judge(a, b, HIGHER, "stream.triad", history=hist)
    assert j.verdict == sig.SAME and j.threshold.source == "history"


def test_planted_steps_found():
    found = 0
    for seed in range(50):
        a, b = _reps(100, 0.02, 10, seed), _reps(85, 0.02, 10, 500 + seed)
        found += sig.judge(a, b, HIGHER, "stream.triad").verdict == sig.WORSE
    assert found >= 48


def test_fast_resampled_medians_are_numpys_medians_of_the_same_draws():
    """The order-statistic medians behind the interval are np.median of the same resamples, bit for bit
    (odd and even counts, ties, more than 256 values), so the interval is the one the plain bootstrap gives."""
    import numpy as np
    rng = np.random.default_rng(7)
    for n in (2, 3, 4, 5, 94, 120, 300):
        v = rng.normal(300.0, 3.0, n).round(1)          # rounded: ties
        idx = rng.integers(0, n, (500, n))
        assert np.array_equal(sig._resampled_medians(v, idx), np.median(v[idx], axis=1)), n


def test_interval_is_the_plain_percentile_bootstrap_with_the_fixed_seed():
    import numpy as np
    rr = random.Random(3)
    a = [300 * rr.gauss(1, 0.01) for _ in range(120)]
    b = [291 * rr.gauss(1, 0.01) for _ in range(94)]
    rng = np.random.default_rng(sig.SEED)
    va, vb = np.asarray(a), np.asarray(b)
    ma = np.median(va[rng.integers(0, len(va), (sig.RESAMPLES, len(va)))], axis=1)
    mb = np.median(vb[rng.integers(0, len(vb), (sig.RESAMPLES, len(vb)))], axis=1)
    low, high = np.percentile(mb / ma, [2.5, 97.5])
    iv = sig.median_ratio_interval(a, b)
    assert iv is not None and (iv.low, iv.high, iv.resamples) == (float(low), float(high), sig.RESAMPLES)
