"""Statistics of repeated measurements: summary, robust outliers, noise warnings.

Pure functions over lists of numbers and ``results.model.Stats``; nothing here
measures or prints.

Outliers use the modified z-score of Boris Iglewicz and David Hoaglin (1993),
"Volume 16: How to Detect and Handle Outliers", The ASQC Basic References in
Quality Control: Statistical Techniques, Edward F. Mykytka, Ph.D., Editor:

    M_i = 0.6745 * (x_i - median) / MAD,   MAD = median(|x_i - median|)

and a value is an outlier when |M_i| > 3.5 (hyperfine's
``outlier_detection.rs`` does the same). 0.6745 is the 0.75 quantile of the
standard normal, so M_i is comparable to an ordinary z-score for normal data,
while one wild repetition cannot inflate the scale it is judged by. When more
than half the values are equal the MAD is 0; then the mean absolute deviation
from the median is used, M_i = (x_i - median) / (1.253314 * MeanAD), the usual
fallback (1.253314 = sqrt(pi/2) makes MeanAD consistent with a standard
deviation); when that is 0 too, every value is the median and every score is 0.

Noise warnings follow pyperf's ``format_checks``: each says what is wrong and
what to do about it.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence

from ..results.model import CV_WARN, HIGHER, LOWER, Stats

OUTLIER_THRESHOLD = 3.5
BEST_FAR = 0.10       # best repetition this far (fraction) from the median: headline is rare
WORST_FAR = 0.20      # worst repetition this far from the median: some repetitions were disturbed
MIN_REPS = 5          # fewer repetitions than this: the spread cannot be judged

_Z = 0.6745
_MEANAD_SCALE = 1.253314


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def _floats(values: Sequence[float]) -> List[float]:
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values")
    bad = [v for v in xs if not math.isfinite(v)]
    if bad:
        raise ValueError(f"non-finite value {bad[0]} among the repetitions")
    return xs


def modified_zscores(values: Sequence[float]) -> List[float]:
    """Iglewicz-Hoaglin modified z-score of each value, in the input order."""
    xs = _floats(values)
    med = _median(xs)
    dev = [abs(x - med) for x in xs]
    mad = _median(dev)
    if mad > 0:
        return [_Z * (x - med) / mad for x in xs]
    mean_ad = math.fsum(dev) / len(dev)
    if mean_ad > 0:
        return [(x - med) / (_MEANAD_SCALE * mean_ad) for x in xs]
    return [0.0] * len(xs)


def outliers(values: Sequence[float], threshold: float = OUTLIER_THRESHOLD) -> List[int]:
    """Indices of the values whose |modified z-score| exceeds ``threshold`` (3.5 by default)."""
    return [i for i, z in enumerate(modified_zscores(values)) if abs(z) > threshold]


def summarize(values: Sequence[float], better: str = HIGHER) -> Stats:
    """Stats of the repetitions; raises ValueError for no values or a NaN/inf among them."""
    if better not in (HIGHER, LOWER):
        raise ValueError(f"better must be {HIGHER!r} or {LOWER!r}, not {better!r}")
    return Stats.of(_floats(values), better)


def noise_warnings(stats: Optional[Stats], cv_warn: float = CV_WARN, best_far: float = BEST_FAR,
                   worst_far: float = WORST_FAR, min_reps: int = MIN_REPS) -> List[str]:
    """Warnings about a measurement's reliability, each with advice; [] when it looks clean."""
    if stats is None:
        return []
    out: List[str] = []
    if stats.n < min_reps:
        out.append(f"only {stats.n} repetition{'s' if stats.n != 1 else ''}: the spread cannot be "
                   f"judged; repeat at least {min_reps} times (--reps)")
    if stats.n < 2:
        return out
    if stats.cv is not None and stats.cv > cv_warn:
        out.append(f"spread {stats.cv:.1%} (coefficient of variation) is above {cv_warn:.0%}: other "
                   f"load, clock changes or unpinned threads disturb the measurement; run on an idle "
                   f"node with threads pinned, and use more repetitions")
    med = stats.median
    if med is None or med == 0 or None in (stats.best, stats.min, stats.max):
        return out
    higher = stats.best == stats.max and stats.best != stats.min
    worst = stats.min if higher else stats.max
    best_off = abs(stats.best - med) / abs(med)
    worst_off = abs(worst - med) / abs(med)
    if best_off > best_far:
        out.append(f"best repetition {stats.best:.4g} is {best_off:.0%} "
                   f"{'above' if stats.best > med else 'below'} the median {med:.4g}: the headline "
                   f"figure was reached only rarely; check for competing load and frequency "
                   f"scaling, and compare with the median before trusting it")
    if worst_off > worst_far:
        out.append(f"worst repetition {worst:.4g} is {worst_off:.0%} "
                   f"{'below' if worst < med else 'above'} the median {med:.4g}: some repetitions "
                   f"were interrupted (other processes, page faults, thread migration); add warm-up "
                   f"or run on an idle node")
    return out


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return h


def f_survival(f: float, d1: float, d2: float) -> float:
    """P(F > f) for Fisher's F with (d1, d2) degrees of freedom: the regularized incomplete beta
    I_x(d2/2, d1/2) at x = d2 / (d2 + d1 f)."""
    if not f > 0:
        return 1.0
    if not math.isfinite(f):
        return 0.0
    a, b, x = d2 / 2, d1 / 2, d2 / (d2 + d1 * f)
    lead = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return min(1.0, max(0.0, lead * _betacf(a, b, x) / a))
    return min(1.0, max(0.0, 1 - lead * _betacf(b, a, 1 - x) / b))
