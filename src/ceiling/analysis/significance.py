"""Is a change between two measurements real? The statistics shared by ``ceiling compare`` and
``ceiling history --changes``: pure functions over numbers, nothing here reads the history or prints.

API (every function deterministic: the bootstrap draws from a fixed seed):

``median_ratio_interval(a, b, resamples=RESAMPLES, level=LEVEL, seed=SEED) -> Optional[Interval]``
    The percentile bootstrap interval of median(b) / median(a) from the repetitions each run kept,
    each side resampled with replacement on its own, ``resamples`` times. None when a side has fewer
    than MIN_REPS finite repetitions or a median of 0 (no interval can be had: significance unknown).
    A rank test cannot serve here: 3 against 3 repetitions can never reach p < 0.05 with
    Mann-Whitney, whatever the gap, while the bootstrap interval of 3 against 3 excludes 1 when the
    two sets do not overlap.

``directed(ratio, better) -> float``
    The change as a fraction of A's value, signed so that positive is better: ratio - 1 for a metric
    where higher is better, 1 - ratio where lower is (latency). -0.05: 5 % worse. ``direction(change,
    better)`` says a change signed as the value moved in words ("better", "worse", "same"), and
    ``higher_is_better(better)`` is the one reading of a metric's direction both use (anything but
    "lower" is higher).

``family(metric) -> str`` and ``family_threshold(metric) -> float``
    A metric's family is the first word of its name (``stream.triad`` -> ``stream``; ``family_prefix``
    and ``in_family`` select a family's metrics by the prefix ``stream.``); its threshold
    the fraction below which a change is noise by default: the thresholds cluster mode accepts
    between nodes (analysis/cluster.py THRESHOLDS: DGEMM and flops 5 %, STREAM 10 %, storage 20 %;
    10 % for a family it does not list).

``run_to_run_spread(values) -> Optional[float]``
    The run-to-run spread of a metric over earlier runs (one value per run, same host and context),
    robust: 1.4826 * MAD / median, a fraction comparable to a coefficient of variation. None with
    fewer than MIN_HISTORY values (repetitions inside one run understate the spread between runs;
    with too few runs the family's threshold stands).

``noise_threshold(metric, history=()) -> Threshold``
    The noise threshold to judge a change of ``metric`` by: HISTORY_Z * sqrt(2) * the history's
    run-to-run spread once there are MIN_HISTORY earlier runs (the difference of two runs has sqrt(2)
    times the spread of one), else the family's. ``Threshold.source`` says which.

``judge(a, b, better, metric, a_value=None, b_value=None, history=()) -> Judgement``
    The whole verdict on one metric: ``a`` and ``b`` the repetitions (possibly empty), ``a_value``
    and ``b_value`` the headline figures used when a side has no repetitions, ``history`` the earlier
    runs' values of the same metric and context on B's host. Verdicts:

    - ``WORSE`` / ``BETTER``: significant. With repetitions on both sides, the bootstrap interval
      excludes no change and the change is beyond the noise threshold; where the history is long
      enough, B is also beyond HISTORY_Z run-to-run spreads from the history's median.
      Without repetitions on a side, a history long enough judges alone (``basis`` says so).
    - ``SAME``: no significant change (within noise, or the interval includes no change).
    - ``UNKNOWN``: significance unknown: a side has no repetitions and the history is too short;
      the change is still given, and ``beyond_threshold`` says whether it exceeds the noise
      threshold. Never reported as "no change".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from ..results.model import LOWER
from .cluster import DEFAULT_THRESHOLD, THRESHOLDS

RESAMPLES = 2000          # bootstrap resamples per interval (said in every output)
LEVEL = 0.95              # two-sided confidence of the interval
SEED = 20261128           # fixed: the same runs give the same interval, run after run
MIN_REPS = 2              # fewer repetitions on a side: no interval
MIN_HISTORY = 10          # earlier runs before the history's spread replaces the family's threshold
HISTORY_Z = 3.0           # run-to-run standard deviations (robust) a significant change must exceed
MAD_SIGMA = 1.4826        # MAD * this estimates a normal standard deviation

WORSE, BETTER, SAME, UNKNOWN = "worse", "better", "no significant change", "significance unknown"


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval on the ratio of medians, B over A."""

    ratio: float          # median(b) / median(a)
    low: float            # the interval's bounds on the ratio
    high: float
    resamples: int
    level: float


@dataclass(frozen=True)
class Threshold:
    fraction: float       # a change smaller than this (either way) is noise
    source: str           # "family" (cluster mode's threshold) or "history" (the run-to-run spread)
    spread: Optional[float] = None   # the history's run-to-run spread, when it is the source
    runs: int = 0                    # the earlier runs it was taken from


@dataclass(frozen=True)
class Judgement:
    verdict: str                      # WORSE, BETTER, SAME or UNKNOWN
    change: Optional[float]           # directed(): fraction of A, positive = better; None = not computable
    low: Optional[float]              # the interval on ``change`` (directed, low <= high); None = none
    high: Optional[float]
    threshold: Threshold
    basis: str                        # what the verdict rests on, in words
    beyond_threshold: bool            # |change| >= the threshold
    resamples: int = 0                # of the bootstrap; 0 = none drawn
    history_z: Optional[float] = None  # B's distance from the history's median, in run-to-run spreads


def _finite(xs: Sequence[Optional[float]]) -> list:
    return [float(x) for x in xs if x is not None and isinstance(x, (int, float)) and math.isfinite(x)]


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _resampled_medians(values, idx):
    """``np.median(values[idx], axis=1)``, the same numbers, several times faster (5x for 120 values x 2000
    resamples, where np.median's partition of floats dominated ``ceiling compare`` of two sets of runs). The
    values are sorted once; each resample's median is an order statistic of its draws' ranks in that order
    (the map from rank to value does not decrease, so order statistics carry over, ties included), and the
    ranks, small integers, sort by numpy's radix sort."""
    import numpy as np
    n = len(values)
    order = np.argsort(values, kind="stable")
    ranks = np.empty(n, dtype=np.uint8 if n <= 256 else np.uint16 if n <= 65536 else np.intp)
    ranks[order] = np.arange(n)
    ranked = np.sort(ranks[idx], axis=1, kind="stable")       # stable on 8 or 16 bits: radix sort
    s = values[order]
    return 0.5 * (s[ranked[:, (n - 1) // 2]] + s[ranked[:, n // 2]])     # odd n: 0.5 * 2x is x exactly


def median_ratio_interval(a: Sequence[Optional[float]], b: Sequence[Optional[float]], resamples: int = RESAMPLES,
                          level: float = LEVEL, seed: int = SEED) -> Optional[Interval]:
    """Percentile bootstrap interval of median(b) / median(a) (module docstring)."""
    import numpy as np
    xa, xb = _finite(a), _finite(b)
    if len(xa) < MIN_REPS or len(xb) < MIN_REPS:
        return None
    ma, mb = _median(xa), _median(xb)
    if ma == 0:
        return None
    rng = np.random.default_rng(seed)
    va, vb = np.asarray(xa), np.asarray(xb)
    med_a = _resampled_medians(va, rng.integers(0, len(va), (resamples, len(va))))
    med_b = _resampled_medians(vb, rng.integers(0, len(vb), (resamples, len(vb))))
    ok = med_a != 0
    ratios = med_b[ok] / med_a[ok]
    if not len(ratios):
        return None
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return Interval(mb / ma, float(low), float(high), resamples, level)


def higher_is_better(better: str) -> bool:
    """A metric's ``better`` read as a direction: anything but LOWER is higher (a direction not recorded reads
    as most metrics': a rate)."""
    return better != LOWER


def directed(ratio: float, better: str) -> float:
    """The change as a fraction of A, positive = better (module docstring)."""
    return ratio - 1.0 if higher_is_better(better) else 1.0 - ratio


def direction(change: float, better: str) -> str:
    """``change`` (a fraction, signed as the value moved) in words: "better", "worse", or "same" when 0."""
    if change == 0:
        return "same"
    return "better" if (change > 0) == higher_is_better(better) else "worse"


def family(metric: str) -> str:
    return metric.split(".", 1)[0]


def family_prefix(name: str) -> str:
    """What the names of family ``name``'s metrics start with (``stream`` -> ``stream.``): the range of names
    a query of one family reads."""
    return name + "."


def in_family(metric: str, name: str) -> bool:
    """``metric`` belongs to family ``name`` (``family(metric) == name`` for a name with a dot)."""
    return metric.startswith(family_prefix(name))


def family_threshold(metric: str) -> float:
    return THRESHOLDS.get(family(metric), DEFAULT_THRESHOLD)


def run_to_run_spread(values: Sequence[Optional[float]]) -> Optional[float]:
    """Robust relative spread of one value per earlier run; None with fewer than MIN_HISTORY."""
    xs = _finite(values)
    if len(xs) < MIN_HISTORY:
        return None
    med = _median(xs)
    if med == 0:
        return None
    return MAD_SIGMA * _median([abs(x - med) for x in xs]) / abs(med)


def noise_threshold(metric: str, history: Sequence[Optional[float]] = ()) -> Threshold:
    """The threshold a change of ``metric`` must exceed (module docstring)."""
    spread = run_to_run_spread(history)
    if spread is None:
        return Threshold(family_threshold(metric), "family")
    return Threshold(HISTORY_Z * math.sqrt(2.0) * spread, "history", spread, len(_finite(history)))


def _history_z(value: Optional[float], history: Sequence[Optional[float]], spread: Optional[float]
               ) -> Optional[float]:
    xs = _finite(history)
    if value is None or spread is None or not xs:
        return None
    med = _median(xs)
    scale = spread * abs(med)
    if scale == 0:
        return math.inf if value != med else 0.0
    return (value - med) / scale


def judge(a: Sequence[Optional[float]], b: Sequence[Optional[float]], better: str, metric: str,
          a_value: Optional[float] = None, b_value: Optional[float] = None,
          history: Sequence[Optional[float]] = (), resamples: int = RESAMPLES, seed: int = SEED) -> Judgement:
    """The verdict on one metric from A to B (module docstring)."""
    th = noise_threshold(metric, history)
    iv = median_ratio_interval(a, b, resamples=resamples, seed=seed)
    if iv is not None:
        ratio = iv.ratio
        ends = sorted((directed(iv.low, better), directed(iv.high, better)))
        low, high = ends[0], ends[1]
        b_level = _median(_finite(b))
    else:
        low = high = None
        av, bv = (a_value, b_value)
        if av is None or bv is None or not math.isfinite(av) or not math.isfinite(bv) or av == 0:
            return Judgement(UNKNOWN, None, None, None, th, "no figure on one side to compare", False)
        ratio = bv / av
        b_level = bv
    change = directed(ratio, better)
    beyond = abs(change) >= th.fraction
    z = _history_z(b_level, history, th.spread)
    # B's distance from the history, in the metric's own direction: negative = worse than usual
    z_dir = None if z is None else (z if higher_is_better(better) else -z)
    history_says = None if z_dir is None else abs(z_dir) >= HISTORY_Z and (z_dir < 0) == (change < 0)
    sign = WORSE if change < 0 else BETTER
    limit = f"{th.fraction:.1%} (" + (f"{HISTORY_Z:g} x sqrt(2) x the run-to-run spread of {th.runs} earlier runs)"
                                      if th.source == "history" else f"the {family(metric)} family's threshold)")
    if iv is not None:
        excludes = not (iv.low <= 1.0 <= iv.high)
        where = f"the {iv.level:.0%} interval of the ratio of medians"
        if not excludes:
            return Judgement(SAME, change, low, high, th, f"{where} includes no change", beyond, iv.resamples, z)
        if not beyond:
            return Judgement(SAME, change, low, high, th, f"within the noise threshold {limit}", beyond,
                             iv.resamples, z)
        if history_says is False:
            return Judgement(SAME, change, low, high, th,
                             f"within {HISTORY_Z:g} run-to-run spreads of the {th.runs} earlier runs", beyond,
                             iv.resamples, z)
        return Judgement(sign, change, low, high, th, f"{where} excludes no change; beyond {limit}", beyond,
                         iv.resamples, z)
    if history_says is None:
        return Judgement(UNKNOWN, change, None, None, th, "no repetitions on one side and fewer than "
                         f"{MIN_HISTORY} earlier runs: nothing to judge the change by", beyond)
    if not beyond or not history_says:
        return Judgement(SAME, change, None, None, th, f"no repetitions; within {limit}", beyond, 0, z)
    return Judgement(sign, change, None, None, th, f"no repetitions; beyond {limit}", beyond, 0, z)
