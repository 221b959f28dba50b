"""Change points and drifts in one series of run-to-run values: pure functions of numbers, no history.

**Steps** are found by E-Divisive means (Matteson & James, "A nonparametric approach for multiple
change point analysis of multivariate data", JASA 2014; the method of Apache Otava/Hunter and
MongoDB's signal-processing-algorithms) with the exponent alpha = 2, where the energy divergence of
the two sides of a split reduces to their weighted squared difference of means,
``Q(t) = t (n - t) / n * (mean(x[:t]) - mean(x[t:]))**2``: every split of a segment is scored in
O(n) from cumulative sums. Binary segmentation: the best split of each segment is tested by a
permutation test (the same maximum over splits computed on shuffled copies of the segment, so the
p-value accounts for having searched every split); the most significant one is kept when its
p-value is at most alpha / k, k being the number of segments looked at in that round (Bonferroni:
the chance that noise alone adds a step stays at most alpha for the whole series), and the search
goes on in the pieces until nothing passes. A segment shorter than ``2 * min_size`` runs is not
split: a step needs ``min_size`` runs after it to be told from one disturbed run (the newest run
against the rolling baseline says sooner, changes.py).

**Drifts**: the Mann-Kendall test (normal approximation with the tie correction; Hipel & McLeod,
"Time series modelling of water resources", 1994, section 23.3) says whether the values trend, and
the Theil-Sen slope (median of the pairwise slopes) how fast. A series whose trend is significant
and which still trends on both sides of the first (strongest) step found (Mann-Kendall pooled over
the two sides: a staircase drawn on a trend, where after a real step each side is flat) is one
drift, not a staircase of steps; so are two or more steps all one way that a straight line fits as
well (a lower or equal BIC); otherwise its steps stand and the last segment alone is tested for
a drift.

Sizes are relative (after / before - 1, from the segments' medians); which way is better is the
caller's (Metric.better). Permutations come from a seeded generator: the same series gives the
same answer every time (changes.py seeds it with the series' key).

Shared with ``ceiling compare`` (analysis/significance.py, when it lands): mann_kendall and
theil_sen are plain statistics either verb may use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

ALPHA = 0.01            # family-wise level for one series (steps), and for its drift test
MIN_SIZE = 3            # runs on each side of a step
MIN_STEP = 0.01         # steps and drifts smaller than 1 % of the level are not reported
_BATCH = 200            # permutations drawn at a time; stops early once the test cannot pass
_MK_BLOCK = 1024        # rows of the pairwise-sign matrix computed at a time (memory: _MK_BLOCK * n)
_TS_PAIRS = 400_000     # Theil-Sen: at most this many pairwise slopes (a seeded sample beyond)


@dataclass(frozen=True)
class Step:
    """A step: the level of the series changed between run ``index - 1`` and run ``index``."""

    index: int            # the first run after the change, in the series
    p_value: float        # permutation p-value of the split, within its segment
    alpha: float          # the level it passed (ALPHA / segments looked at)
    before: float         # median of the segment before, in the series' unit
    after: float          # median of the segment after
    change: float         # after / before - 1 (a fraction; sign = direction of the values)


@dataclass(frozen=True)
class Drift:
    """A steady trend over runs ``start`` .. ``end`` (inclusive)."""

    start: int
    end: int
    level: float          # the fitted level at ``start``, in the series' unit
    slope: float          # Theil-Sen slope per run, as a fraction of ``level``
    change: float         # fitted level at ``end`` / at ``start`` - 1
    p_value: float        # Mann-Kendall, two-sided
    z: float              # Mann-Kendall's standardised S


@dataclass(frozen=True)
class Changes:
    """What one series holds: its steps (oldest first) or a drift, and the level of each test."""

    steps: Tuple[Step, ...] = ()
    drift: Optional[Drift] = None
    n: int = 0


def split_scores(y: np.ndarray, min_size: int = MIN_SIZE) -> np.ndarray:
    """Q(t) for t = min_size .. n - min_size over the last axis (module docstring); ``y`` (..., n)."""
    n = y.shape[-1]
    c = np.cumsum(y, axis=-1)
    t = np.arange(min_size, n - min_size + 1)
    left = c[..., t - 1] / t
    right = (c[..., -1:] - c[..., t - 1]) / (n - t)
    return t * (n - t) / n * (left - right) ** 2


def best_split(y: np.ndarray, alpha: float, rng: np.random.Generator,
               min_size: int = MIN_SIZE) -> Tuple[int, float]:
    """(t, p): the best split of ``y`` (the first index of its right side) and its permutation
    p-value; the permutations stop as soon as p can no longer reach ``alpha``."""
    y = np.asarray(y, dtype=float)
    y = y - y.mean()
    q = split_scores(y, min_size)
    t = int(np.argmax(q)) + min_size
    observed = float(q.max())
    if observed <= 0.0:
        return t, 1.0
    # enough permutations that a p-value of alpha can be told (at least 10 of them beyond it)
    total = max(199, int(math.ceil(10.0 / alpha)) - 1)
    limit = alpha * (total + 1) - 1          # more exceedances than this: p > alpha whatever follows
    exceed, done = 0, 0
    while done < total:
        b = min(_BATCH if done else _BATCH // 4, total - done)     # most splits of noise are told in 50
        perm = rng.permuted(np.broadcast_to(y, (b, y.size)), axis=1)
        exceed += int(np.count_nonzero(split_scores(perm, min_size).max(axis=1) >= observed * (1 - 1e-12)))
        done += b
        if exceed > limit:
            break
    return t, (exceed + 1) / (done + 1)


def find_steps(x: Sequence[float], alpha: float = ALPHA, min_size: int = MIN_SIZE,
               seed: int = 0) -> List[Tuple[int, float, float]]:
    """Binary segmentation (module docstring): [(index, p, level passed)], in the order found."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    found: List[Tuple[int, float, float]] = []
    tested = {}
    while True:
        bounds = [0] + sorted(i for i, _, _ in found) + [x.size]
        segments = [(a, b) for a, b in zip(bounds, bounds[1:]) if b - a >= 2 * min_size]
        if not segments:
            break
        level = alpha / (len(bounds) - 1)
        best = None
        for a, b in segments:
            if (a, b) not in tested:
                tested[(a, b)] = best_split(x[a:b], level, rng, min_size)
            t, p = tested[(a, b)]
            if best is None or p < best[1]:
                best = (a + t, p)
        if best is None or best[1] > level:
            break
        found.append((best[0], best[1], level))
    return found


def mann_kendall(x: Sequence[float]) -> Tuple[float, float]:
    """(z, two-sided p) of the Mann-Kendall trend test, ties corrected."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n < 4:
        return 0.0, 1.0
    s = 0
    for i in range(0, n, _MK_BLOCK):
        rows = x[i:i + _MK_BLOCK, None]
        # only pairs j > i: row r of the block is x[i + r], so the columns from i + r + 1 on
        s += int(np.triu(np.sign(x[None, :] - rows), k=i + 1).sum())
    _, counts = np.unique(x, return_counts=True)
    ties = float(np.sum(counts * (counts - 1.0) * (2.0 * counts + 5.0)))
    var = (n * (n - 1.0) * (2.0 * n + 5.0) - ties) / 18.0
    if var <= 0 or s == 0:
        return 0.0, 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var)
    return z, math.erfc(abs(z) / math.sqrt(2.0))


def theil_sen(x: Sequence[float], seed: int = 0) -> Tuple[float, float]:
    """(slope per index, intercept at index 0): the median pairwise slope, the median residual."""
    x = np.asarray(x, dtype=float)
    n = x.size
    if n < 2:
        return 0.0, float(x[0]) if n else 0.0
    i, j = np.triu_indices(n, 1)
    if i.size > _TS_PAIRS:
        pick = np.random.default_rng(seed).choice(i.size, _TS_PAIRS, replace=False)
        i, j = i[pick], j[pick]
    slope = float(np.median((x[j] - x[i]) / (j - i)))
    return slope, float(np.median(x - slope * np.arange(n)))


def _within(x: np.ndarray, bounds: Sequence[int]) -> Tuple[float, float]:
    """(z, p) of Mann-Kendall pooled over the segments between ``bounds``: their S summed, their
    variances summed (independent segments); ties are left uncorrected (continuous values)."""
    s, var = 0.0, 0.0
    for a, b in zip(bounds, bounds[1:]):
        m = b - a
        if m < 3:
            continue
        y = x[a:b]
        s += float(np.sum(np.sign(y[None, :] - y[:, None])[np.triu_indices(m, 1)]))
        var += m * (m - 1.0) * (2.0 * m + 5.0) / 18.0
    if var <= 0 or s == 0:
        return 0.0, 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var)
    return z, math.erfc(abs(z) / math.sqrt(2.0))


def _staircase(x: np.ndarray, bounds: Sequence[int], seed: int) -> bool:
    """Two or more steps, all one way, that a straight line fits as well (BIC of the residuals:
    the line has 3 parameters, k steps 2k + 2)."""
    levels = [float(np.mean(x[a:b])) for a, b in zip(bounds, bounds[1:])]
    ups = {b > a for a, b in zip(levels, levels[1:])}
    if len(levels) < 3 or len(ups) != 1:
        return False
    n = x.size
    slope, b = theil_sen(x, seed)
    rss_line = float(np.sum((x - b - slope * np.arange(n)) ** 2))
    rss_steps = float(sum(np.sum((x[a:c] - m) ** 2) for (a, c), m in zip(zip(bounds, bounds[1:]), levels)))
    k = len(levels) - 1

    def bic(rss: float, params: int) -> float:
        return n * math.log(max(rss, 1e-300) / n) + params * math.log(n)
    return bic(rss_line, 3) <= bic(rss_steps, 2 * k + 2)


def _drift(x: np.ndarray, offset: int, alpha: float, min_step: float, seed: int,
           mk: Optional[Tuple[float, float]] = None) -> Optional[Drift]:
    if x.size < 2 * MIN_SIZE + 2:
        return None
    z, p = mk or mann_kendall(x)
    if p > alpha:
        return None
    slope, b = theil_sen(x, seed)
    start, end = b, b + slope * (x.size - 1)
    if start == 0 or not math.isfinite(start):
        return None
    change = end / start - 1.0
    if abs(change) < min_step:
        return None
    return Drift(offset, offset + x.size - 1, start, slope / start, change, p, z)


def analyse(values: Sequence[float], alpha: float = ALPHA, min_step: float = MIN_STEP,
            min_size: int = MIN_SIZE, seed: int = 0) -> Changes:
    """The steps and drift of one series, oldest value first (module docstring)."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2 * min_size:
        return Changes(n=n)
    found = find_steps(x, alpha, min_size, seed)
    first = [0, found[0][0], n] if found else [0, n]
    found.sort()
    bounds = [0] + [i for i, _, _ in found] + [n]
    # A drift found by binary segmentation looks like a staircase: the values then still trend
    # on both sides of its first (strongest) step, where after a real step they are flat.
    mk = mann_kendall(x)
    if mk[1] <= alpha and (not found or _within(x, first)[1] <= alpha or _staircase(x, bounds, seed)):
        d = _drift(x, 0, alpha, min_step, seed, mk)
        if d is not None or not found:
            return Changes((), d, n)
    steps = []
    for k, (i, pv, level) in enumerate(found):
        before = float(np.median(x[bounds[k]:i]))
        after = float(np.median(x[i:bounds[k + 2]]))
        change = after / before - 1.0 if before else math.inf
        if abs(change) >= min_step:
            steps.append(Step(i, pv, level, before, after, change))
    last = bounds[-2]
    return Changes(tuple(steps), _drift(x[last:], last, alpha, min_step, seed) if found else None, n)


def baseline(values: Sequence[float], runs: int) -> Optional[Tuple[float, float, float]]:
    """The newest value against the ``runs`` before it: (their median, the change from it as a
    fraction, z: the distance from their mean in prediction standard deviations,
    ``s * sqrt(1 + 1 / runs)`` with ``s`` their sample standard deviation; for normal noise z
    follows Student's t with ``runs - 1`` degrees of freedom: beyond 5 with 10 runs, a chance of
    7e-4). None when there are fewer than ``runs`` earlier values; z is inf when those runs are
    all equal and the newest differs. The sample deviation, not a robust one: the median absolute
    deviation of 10 runs is too unsteady (it flagged several of 500 series of pure noise per look),
    and an outlier among the runs before only makes the test more cautious."""
    x = np.asarray(values, dtype=float)
    if runs < 2 or x.size < runs + 1:
        return None
    base = x[-runs - 1:-1]
    med = float(np.median(base))
    sd = float(np.std(base, ddof=1)) * math.sqrt(1.0 + 1.0 / runs)
    d = float(x[-1]) - float(base.mean())
    z = d / sd if sd > 0 else (0.0 if d == 0 else math.copysign(math.inf, d))
    change = float(x[-1]) - med
    return med, (change / med if med else math.inf), z
