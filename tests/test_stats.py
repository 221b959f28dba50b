"""Robust statistics: modified z-scores, outliers, summaries and noise warnings (hand-computed)."""
import math

import numpy as np
import pytest

from ceiling.analysis import stats
from ceiling.results.model import HIGHER, LOWER, Stats


def test_modified_zscores_hand_computed():
    # median 3, |dev| = [2, 1, 0, 1, 97], MAD = 1
    z = stats.modified_zscores([1, 2, 3, 4, 100])
    assert z == pytest.approx([-1.349, -0.6745, 0.0, 0.6745, 65.4265])
    assert stats.outliers([1, 2, 3, 4, 100]) == [4]


def test_even_count_uses_the_mean_of_the_middle_pair():
    # median 2.5, |dev| = [1.5, 0.5, 0.5, 1.5], MAD = 1.0
    assert stats.modified_zscores([4, 1, 3, 2]) == pytest.approx([1.01175, -1.01175, 0.33725, -0.33725])


def test_input_order_is_kept():
    z = stats.modified_zscores([100, 1, 2, 3, 4])
    assert z[0] == pytest.approx(65.4265) and stats.outliers([100, 1, 2, 3, 4]) == [0]


def test_mad_zero_falls_back_to_mean_absolute_deviation():
    # median 10, MAD 0; MeanAD = 4/5 = 0.8; z(14) = 4 / (1.253314 * 0.8) = 3.98942
    vals = [10, 10, 10, 10, 14]
    assert stats.modified_zscores(vals) == pytest.approx([0, 0, 0, 0, 3.98942], abs=1e-5)
    assert stats.outliers(vals) == [4]
    assert stats.outliers(vals, threshold=4.0) == []


def test_identical_values_have_no_outliers():
    assert stats.modified_zscores([5.0] * 4) == [0.0] * 4
    assert stats.outliers([5.0] * 4) == []


def test_threshold_is_strict_and_two_sided():
    # median 0, MAD 1: z = 0.6745 * x; x = 3.5 / 0.6745 sits exactly on the threshold.
    edge = 3.5 / 0.6745
    vals = [-1, 0, 1, -edge * 1.01, edge * 0.99]
    assert stats.outliers(vals) == [3]


def test_zscores_match_numpy():
    rng = np.random.default_rng(42)
    x = rng.lognormal(3.0, 0.2, size=101)
    x[[5, 60]] *= 3.0
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    expect = 0.6745 * (x - med) / mad
    assert stats.modified_zscores(x) == pytest.approx(expect.tolist(), rel=1e-12)
    assert stats.outliers(x) == np.flatnonzero(np.abs(expect) > 3.5).tolist()
    assert {5, 60} <= set(stats.outliers(x))


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_bad_input_is_a_value_error(bad):
    with pytest.raises(ValueError):
        stats.modified_zscores(bad)
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_summarize_hand_computed():
    s = stats.summarize([10, 12, 11, 13], HIGHER)
    assert (s.n, s.best, s.median, s.mean, s.min, s.max) == (4, 13, 11.5, 11.5, 10, 13)
    assert s.stdev == pytest.approx(math.sqrt(5 / 3))
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 11.5)
    assert stats.summarize([10, 12, 11, 13], LOWER).best == 10
    x = np.array([3.1, 2.9, 3.3, 3.0, 3.05])
    s = stats.summarize(x)
    assert s.stdev == pytest.approx(np.std(x, ddof=1)) and s.median == pytest.approx(np.median(x))
    with pytest.raises(ValueError, match="better"):
        stats.summarize([1.0], "faster")


def test_clean_measurement_has_no_warnings():
    assert stats.noise_warnings(stats.summarize([100, 101, 100.5, 99.8, 100.2, 100.1])) == []
    assert stats.noise_warnings(None) == []


def test_too_few_repetitions():
    w = stats.noise_warnings(stats.summarize([100.0, 100.5, 100.2]))
    assert len(w) == 1 and "only 3 repetitions" in w[0] and "at least 5" in w[0]
    w = stats.noise_warnings(stats.summarize([100.0]))
    assert len(w) == 1 and "only 1 repetition:" in w[0]


def test_high_cv_warns_with_advice():
    s = stats.summarize([90, 110, 95, 105, 100, 92, 108], HIGHER)
    assert s.cv > 0.05
    w = stats.noise_warnings(s)
    assert any("coefficient of variation" in x and "idle node" in x for x in w)
    assert stats.noise_warnings(s, cv_warn=0.5, best_far=1, worst_far=1) == []


def test_best_far_from_median():
    # higher is better: best 125 is 25% above the median 100
    w = stats.noise_warnings(stats.summarize([100, 100, 100, 100, 100, 125], HIGHER), cv_warn=1)
    assert len(w) == 1 and "best repetition 125 is 25% above the median 100" in w[0]
    # lower is better (a latency): best 7.5 is 25% below the median 10
    w = stats.noise_warnings(stats.summarize([10, 10, 10, 10, 10, 7.5], LOWER), cv_warn=1)
    assert len(w) == 1 and "best repetition 7.5 is 25% below the median 10" in w[0]


def test_worst_far_from_median():
    w = stats.noise_warnings(stats.summarize([100, 100, 100, 100, 100, 70], HIGHER), cv_warn=1)
    assert len(w) == 1 and "worst repetition 70 is 30% below the median 100" in w[0] and "warm-up" in w[0]
    w = stats.noise_warnings(stats.summarize([10, 10, 10, 10, 10, 13], LOWER), cv_warn=1)
    assert len(w) == 1 and "worst repetition 13 is 30% above the median 10" in w[0]
    # within the limits: no warning
    assert stats.noise_warnings(stats.summarize([100, 100, 100, 100, 100, 85], HIGHER), cv_warn=1) == []


def test_stats_with_unknown_fields_do_not_crash():
    s = Stats(n=5, best=None, median=None, mean=None, min=None, max=None, stdev=None, cv=None)
    assert stats.noise_warnings(s) == []
