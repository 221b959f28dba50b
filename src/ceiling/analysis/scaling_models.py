"""What a scaling study's times say (`ceiling scale`): pure functions over {resources p: [times]}.

Per point (strong scaling): the median over its repetitions, their spread ((max - min) / median),
the speedup S(p) = T(p0) p0 / T(p) against the smallest point p0 (p0 = 1: against one resource),
the parallel efficiency S / p and the Karp-Flatt serial fraction (1/S - 1/p) / (1 - 1/p) (the
same formula profile --experiments' thread scaling uses: analysis/profile_scaling.karp_flatt).
Weak scaling (the problem grows with p): the scaled efficiency T(p0) / T(p). A figure that is a
rate (higher is better: Mflups, GB/s) is turned into its inverse, the time per unit of work,
before any of this (``analyse(rate=True)``), so the same formulas hold for both.

Fits, each on every repetition (not only the medians):

- Amdahl (strong): T(p) = a + b / p, so the serial fraction s = a / (a + b); Gustafson (weak):
  scaled speedup p T(1) / T(p) = p - s (p - 1). Each with a 90 % interval from a bootstrap over
  the repetitions within each point (seeded: the same data give the same interval).
- A performance-model-normal-form model, as Extra-P selects one: c0 + sum of at most two terms c_k
  p^i log2(p)^j, i in EXPONENTS_I, j in EXPONENTS_J, scored by leave-one-point-out cross-validation
  (the symmetric relative error, Extra-P's SMAPE, predicting the left-out point's median; every
  candidate of a size at once, exactly, from one QR each). Among the candidates of a size the model
  taken is the least unusual (``complexity``) of those the lack-of-fit F test against the
  repetitions' pure error does not reject (else the lowest error): six points with 2 % noise cannot
  tell p·log2(p) from p^4/3, and the lowest error alone chose by chance. No term is added once the
  model explains the data to their noise, and one is added only when it lowers the cross-validated
  error by a factor GAIN with each coefficient at least SIGNIFICANT standard errors from zero: on
  noise the constant stays. Its prediction at 2x and 4x the largest point comes with a 90 % interval
  (the bootstrap's spread of the refitted model and the points' own repetition noise) and is marked
  an extrapolation.

Honesty checks (findings): too few points or repetitions; spread larger than the effect;
superlinear speedup (then no model: a cache step is not a law of p); a baseline that is not
one resource (or not the fastest run at the smallest count); oversubscription (more threads
or ranks than CPUs); other load during a point. Nothing here runs or times anything.
"""
from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..results.model import OK, WARN, Finding
from .stats import f_survival

EXPONENTS_I = (-1.0, -0.5, 0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 1.0, 4 / 3, 1.5, 2.0)
EXPONENTS_J = (0, 1, 2)
MAX_TERMS = 2
GAIN = (0.5, 0.25)      # a model with one term must halve the constant's cross-validated error, one with
                        # two must quarter the best one-term model's (630 pairs to choose from: a stricter bar)
SIGNIFICANT = 3.0       # ... with each coefficient this many standard errors from zero
CONSISTENT = 0.05      # a lack-of-fit p-value at least this: the model explains the data to their noise
MIN_POINTS = 3          # below: no fit at all
FEW_POINTS = 5          # below: the fit is said to rest on too few points
FEW_REPEATS = 3
BOOTSTRAP = 200
LEVEL = 0.90
Z90 = 1.6448536269514722     # the normal quantile of 0.95: a two-sided 90 % interval
SUPERLINEAR = 1.05      # efficiency above this, beyond the spread: superlinear
MISS = 0.5              # series_model: a model missing a measured point's median by more is not given


def karp_flatt(speedup: Optional[float], p: float) -> Optional[float]:
    """The Karp-Flatt experimentally determined serial fraction, None where undefined."""
    if not speedup or p <= 1:
        return None
    return (1 / speedup - 1 / p) / (1 - 1 / p)


def points(times: Dict[float, Sequence[float]], weak: bool = False) -> List[Dict[str, Any]]:
    """One dict per count with times, ascending: p, median_s, spread, times, speedup, efficiency,
    serial_fraction (strong) or scaled_efficiency (weak)."""
    med = {p: statistics.median(v) for p, v in times.items() if v}
    if not med:
        return []
    p0 = min(med)
    out = []
    for p in sorted(med):
        m = med[p]
        row: Dict[str, Any] = {"p": p, "median_s": m, "times": list(times[p]),
                               "spread": (max(times[p]) - min(times[p])) / m if m > 0 else None}
        if weak:
            row["scaled_efficiency"] = med[p0] / m if m > 0 else None
        else:
            s = med[p0] * p0 / m if m > 0 else None
            row.update(speedup=s, efficiency=s / p if s else None, serial_fraction=karp_flatt(s, p))
        out.append(row)
    return out


# -- the fits ------------------------------------------------------------------------------

Term = Tuple[float, int]            # (i, j): p^i log2(p)^j


def term_text(t: Term) -> str:
    i, j = t
    frac = {1 / 3: "1/3", 2 / 3: "2/3", 4 / 3: "4/3", -0.5: "-1/2", 0.5: "1/2", 0.25: "1/4", 0.75: "3/4", 1.5: "3/2"}
    pi = "" if i == 0 else "p" if i == 1 else f"p^{frac.get(i, f'{i:g}')}"
    lj = "" if j == 0 else "log2(p)" if j == 1 else f"log2(p)^{j}"
    return "·".join(x for x in (pi, lj) if x) or "1"


def _column(t: Term, p: np.ndarray) -> np.ndarray:
    i, j = t
    return p ** i * np.log2(p) ** j


def _terms(ps: Sequence[float]) -> List[Term]:
    """The candidate terms; log terms only where every p > 1 would not zero them all (p = 1 gives
    log2 = 0, which is fine: the constant carries it)."""
    return [(i, j) for i in EXPONENTS_I for j in EXPONENTS_J if not (i == 0 and j == 0)]


def _design(terms: Sequence[Term], p: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(p)] + [_column(t, p) for t in terms])


def _lstsq(terms: Sequence[Term], p: np.ndarray, y: np.ndarray):
    X = _design(terms, p)
    w = 1.0 / np.maximum(np.abs(y), 1e-300)            # relative errors: times span orders of magnitude
    c, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
    return c


def _se(terms: Sequence[Term], p: np.ndarray, y: np.ndarray, c: np.ndarray) -> np.ndarray:
    X = _design(terms, p)
    w = 1.0 / np.maximum(np.abs(y), 1e-300)
    Xw, r = X * w[:, None], (y - X @ c) * w
    dof = max(len(y) - len(c), 1)
    s2 = float(r @ r) / dof
    try:
        cov = s2 * np.linalg.inv(Xw.T @ Xw)
    except np.linalg.LinAlgError:
        return np.full(len(c), np.inf)
    return np.sqrt(np.maximum(np.diag(cov), 0.0))


def complexity(terms: Sequence[Term]) -> int:
    """How unusual a model's terms are, for choosing among models the data cannot tell apart: each
    log factor counts one, an exponent that is not a whole number counts its denominator less one
    (p^-1, p, p^2: 0; p^1/2: 1; p^4/3: 2; p·log2(p): 1; p^3/4·log2(p)^2: 5)."""
    return sum(j + Fraction(i).limit_denominator(12).denominator - 1 for i, j in terms)


def _groups(p: np.ndarray) -> List[np.ndarray]:
    return [np.flatnonzero(p == q) for q in np.unique(p)]


def _cv_errors(X: np.ndarray, p: np.ndarray, y: np.ndarray, groups: Sequence[np.ndarray]):
    """Leave one point (all its repetitions) out, for C candidate models at once: ``X`` holds their
    design matrices (C, rows, coefficients). Returns each one's squared symmetric relative error
    (|prediction - median| over their mean, as Extra-P's SMAPE) predicting each left-out point's
    median (C, points).

    Exact, without refitting per fold: for weighted least squares with hat matrix H = Q Q^T (Q from
    the QR of the weighted design), the residuals of the rows of point q fitted without them are
    (I - H_qq)^-1 r_q, r the full fit's residuals. A candidate whose left-out fit is not determined
    (too few other points, collinear columns, a point only it can see) gets an infinite error."""
    C, N, m = X.shape
    if len(groups) - 1 < m:                 # each fold fits on the other points: at least one per coefficient
        return np.full((C, len(groups)), np.inf)
    w = 1.0 / np.maximum(np.abs(y), 1e-300)             # relative errors: times span orders of magnitude
    Xw = X * w[None, :, None]
    Xw = Xw / np.maximum(np.abs(Xw).max(axis=1, keepdims=True), 1e-300)   # column scaling: H is unchanged
    yw = y * w
    Q, R = np.linalg.qr(Xw)
    d = np.abs(np.diagonal(R, axis1=1, axis2=2))
    bad = d.min(axis=1) <= 1e-10 * d.max(axis=1)
    r = yw[None, :] - np.einsum("cnm,cm->cn", Q, np.einsum("cnm,n->cm", Q, yw))
    errs = np.empty((C, len(groups)))
    for g, idx in enumerate(groups):
        Qg = Q[:, idx, :]
        M = np.eye(len(idx))[None] - Qg @ Qg.transpose(0, 2, 1)
        sing = np.linalg.svd(M, compute_uv=False)[:, -1] <= 1e-9
        M[sing] = np.eye(len(idx))
        e = np.linalg.solve(M, r[:, idx, None])[..., 0]
        pred = np.mean(y[idx][None, :] - e / w[idx][None, :], axis=1)
        med = float(np.median(y[idx]))
        # symmetric relative error (Extra-P's SMAPE), at most 2: an MPI call that takes 10 us at one rank
        # and 0.3 s at four would miss its first point by 10^4 under a plain relative error, in every
        # candidate alike, and that one fold would choose the model (the constant won)
        errs[:, g] = np.where(sing, np.inf, (np.abs(pred - med) / ((np.abs(pred) + abs(med)) / 2)) ** 2)
    errs[bad] = np.inf
    return errs


def lack_of_fit(X: np.ndarray, p: np.ndarray, y: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """For C candidate models (design matrices ``X``, (C, rows, coefficients)): the p-value of the
    lack-of-fit F test against the repetitions' pure error, in relative terms: small when the model
    misses the medians by more than the runs' own noise. NaN where it cannot be told (no repetitions,
    as many coefficients as points)."""
    C, N, m = X.shape
    w = np.empty(N)                     # each point's median as its scale (a run's own time would make y w = 1)
    for idx in groups:
        w[idx] = 1.0 / max(abs(float(np.median(y[idx]))), 1e-300)
    yw = y * w
    pure = sum(float(np.sum((yw[idx] - yw[idx].mean()) ** 2)) for idx in groups)
    d_pe, d_lof = N - len(groups), len(groups) - m
    out = np.full(C, np.nan)
    if d_pe <= 0 or d_lof <= 0 or not pure > 0:
        return out
    Xw = X * w[None, :, None]
    Xw = Xw / np.maximum(np.abs(Xw).max(axis=1, keepdims=True), 1e-300)
    Q, _ = np.linalg.qr(Xw)
    r = yw[None, :] - np.einsum("cnm,cm->cn", Q, np.einsum("cnm,n->cm", Q, yw))
    lof = np.maximum(np.sum(r * r, axis=1) - pure, 0.0)
    for c in range(C):
        out[c] = f_survival((lof[c] / d_lof) / (pure / d_pe), d_lof, d_pe)
    return out


def select(p: Sequence[float], y: Sequence[float]) -> Dict[str, Any]:
    """The PMNF model for times ``y`` at counts ``p`` (every repetition): {"terms": [(i, j)],
    "coefficients": [c0, c1, ...], "cv_error", "text"}.

    Each size (one term, two) scores all its candidates at once (``_cv_errors``) and takes the least
    unusual (``complexity``) of those the lack-of-fit test does not reject (the lowest error when it
    rejects them all or cannot be made): with six points and 2 % noise p·log2(p), p^4/3 and
    p^3/4·log2(p)^2 differ by less than the noise, and the lowest error alone picked among them by
    chance (the true p·log2(p) in 4 of 10 seeds; now 10 of 10, benchmarks/scale_fit.py)."""
    P, Y = np.asarray(p, float), np.asarray(y, float)
    groups = _groups(P)
    cols = {t: _column(t, P) for t in _terms(P)}
    ones = np.ones_like(P)
    best_terms: List[Term] = []
    best_err = float(_cv_errors(ones[None, :, None], P, Y, groups)[0].mean())
    for k in range(1, MAX_TERMS + 1):
        if lack_of_fit(_design(best_terms, P)[None], P, Y, groups)[0] >= CONSISTENT:
            break                           # the repetitions' own noise explains what is left
        combos = list(itertools.combinations(cols, k))
        X = np.stack([np.column_stack([ones] + [cols[t] for t in terms]) for terms in combos])
        errs = _cv_errors(X, P, Y, groups).mean(axis=1)
        b = int(np.argmin(errs))
        if not np.isfinite(errs[b]):
            break
        fits = np.flatnonzero(np.isfinite(errs) & (lack_of_fit(X, P, Y, groups) >= CONSISTENT))
        pick = min(fits, key=lambda c: (complexity(combos[c]), errs[c])) if len(fits) else b
        cand, cand_err = list(combos[pick]), float(errs[pick])
        if not cand_err < GAIN[k - 1] * best_err:
            break
        c = _lstsq(cand, P, Y)
        s = _se(cand, P, Y, c)
        if not all(abs(c[m]) >= SIGNIFICANT * s[m] for m in range(1, len(c))):
            break
        best_terms, best_err = cand, cand_err
    c = _lstsq(best_terms, P, Y)
    return {"terms": best_terms, "coefficients": [float(x) for x in c], "cv_error": best_err,
            "text": model_text(best_terms, c)}


def model_text(terms: Sequence[Term], c: Sequence[float]) -> str:
    parts = [f"{c[0]:.4g}"] + [f"{c[k + 1]:+.4g}·{term_text(t)}" for k, t in enumerate(terms)]
    return " ".join(parts)


def evaluate(model: Dict[str, Any], p: float) -> float:
    return float((_design(model["terms"], np.array([float(p)])) @ np.asarray(model["coefficients"]))[0])


def _resamples(times: Dict[float, Sequence[float]], rng: np.random.Generator, n: int = BOOTSTRAP):
    """``n`` bootstrap resamples at once, each point's repetitions drawn with replacement within the
    point: (P, Y) with Y of shape (n, rows), the rows in ``_flat``'s order."""
    P, Y = _flat(times)
    sizes = np.asarray([len(v) for v in times.values()])
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    idx = starts[None, :] + np.floor(rng.random((n, len(P))) * np.repeat(sizes, sizes)[None, :]).astype(int)
    return P, Y[idx]


def _boot_lstsq(terms: Sequence[Term], P: np.ndarray, Ys: np.ndarray) -> np.ndarray:
    """``_lstsq`` for each row of ``Ys`` (resamples at the same counts ``P``) at once: (n, coefficients)."""
    X = _design(terms, P)
    w = 1.0 / np.maximum(np.abs(Ys), 1e-300)
    Q, R = np.linalg.qr(X[None] * w[:, :, None])
    return np.linalg.solve(R, np.einsum("bnm,bn->bm", Q, Ys * w)[..., None])[..., 0]


def _flat(times: Dict[float, Sequence[float]]):
    ps = [p for p, v in times.items() for _ in v]
    ys = [t for v in times.values() for t in v]
    return np.asarray(ps, float), np.asarray(ys, float)


def predict(times: Dict[float, Sequence[float]], model: Dict[str, Any], at: Sequence[float],
            seed: int = 0) -> List[Dict[str, Any]]:
    """The model's time at each count of ``at`` with a 90 % prediction interval: the chosen terms
    refitted on bootstrap resamples of the repetitions, and the points' own noise (their pooled
    relative standard deviation) added to that spread. Each is an extrapolation beyond the data."""
    rng = np.random.default_rng(seed)
    terms = model["terms"]
    P, Ys = _resamples(times, rng)
    B = _boot_lstsq(terms, P, Ys) @ _design(terms, np.asarray(at, float)).T      # (resamples, len(at))
    rel = [statistics.stdev(v) / statistics.mean(v) for v in times.values() if len(v) > 1 and statistics.mean(v)]
    noise = math.sqrt(statistics.mean([r * r for r in rel])) if rel else 0.0
    out = []
    for k, q in enumerate(at):
        mid = evaluate(model, q)
        sd = math.sqrt(float(np.var(B[:, k])) + (noise * mid) ** 2)
        out.append({"p": float(q), "time_s": mid, "low": mid - Z90 * sd, "high": mid + Z90 * sd,
                    "level": LEVEL, "extrapolation": True})
    return out


def amdahl(times: Dict[float, Sequence[float]], seed: int = 0) -> Optional[Dict[str, Any]]:
    """Amdahl's serial fraction s from T(p) = a + b / p on every repetition, with its 90 % interval
    (bootstrap over repetitions); None with fewer than two counts."""
    if len([p for p, v in times.items() if v]) < 2:
        return None

    P, Y = _flat(times)
    a, b = _lstsq([(-1.0, 0)], P, Y)
    s = a / (a + b) if a + b else math.nan
    P, Ys = _resamples(times, np.random.default_rng(seed))
    c = _boot_lstsq([(-1.0, 0)], P, Ys)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = c[:, 0] / (c[:, 0] + c[:, 1])
    lo, hi = np.nanquantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"serial_fraction": float(s), "low": float(lo), "high": float(hi), "level": LEVEL,
            "max_speedup": 1 / s if s > 0 else None}


def gustafson(times: Dict[float, Sequence[float]], seed: int = 0) -> Optional[Dict[str, Any]]:
    """Gustafson's serial fraction s from the scaled speedup p T(p0) / T(p) = p - s (p - 1) (weak
    scaling), least squares through the origin in (p - 1), with its 90 % bootstrap interval."""
    if len([p for p, v in times.items() if v]) < 2:
        return None
    p0 = min(times)

    def fit(P, Y):
        t0 = float(np.median(Y[P == p0]))
        S = P * t0 / Y
        x = P - 1
        return float(np.sum((P - S) * x) / np.sum(x * x)) if np.sum(x * x) else math.nan
    P, Y = _flat(times)
    s = fit(P, Y)
    P, Ys = _resamples(times, np.random.default_rng(seed))
    boot = np.asarray([fit(P, y) for y in Ys])
    lo, hi = np.nanquantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"serial_fraction": s, "low": float(lo), "high": float(hi), "level": LEVEL}


# -- the honesty checks --------------------------------------------------------------------

def superlinear(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The points whose efficiency exceeds SUPERLINEAR beyond their spread (strong scaling)."""
    return [r for r in rows if r.get("efficiency") and r["p"] > rows[0]["p"]
            and r["efficiency"] > SUPERLINEAR * (1 + (r["spread"] or 0))]


def checks(times: Dict[float, Sequence[float]], rows: Sequence[Dict[str, Any]], resource: str, cpus: int,
           weak: bool = False, competing: Optional[Dict[float, List[str]]] = None,
           failed: Optional[Dict[float, List[int]]] = None) -> List[Finding]:
    """The honesty findings of a study (module docstring); ``competing``: per count, the competing
    load's lines seen during its repetitions; ``failed``: per count, the exit statuses of runs
    that failed."""
    out: List[Finding] = []
    n = len(rows)
    reps = min((len(r["times"]) for r in rows), default=0)
    if n < FEW_POINTS:
        out.append(Finding(
            id="scale.few_points", status=WARN, title=f"Only {n} point{'s' if n != 1 else ''}: too few for a model",
            evidence=f"{resource} {', '.join(format(r['p'], 'g') for r in rows)}",
            why="A model of p with a constant and one term has two coefficients; telling its terms apart and "
                "checking it by leaving a point out needs at least five points.",
            fix=f"Measure more {resource} counts (powers of two up to the node's CPUs and beyond, said so)."))
    if rows and reps < FEW_REPEATS:
        out.append(Finding(
            id="scale.few_repeats", status=WARN, title=f"Only {reps} repetition{'s' if reps != 1 else ''} at a point",
            evidence=", ".join(f"{r['p']:g}: {len(r['times'])}" for r in rows),
            why="A median and a spread need at least three runs; one run cannot tell noise from effect.",
            fix="--repeat 3 or more."))
    for a, b in zip(rows, rows[1:]):
        effect = abs(a["median_s"] - b["median_s"]) / max(a["median_s"], b["median_s"])
        spread = max(a["spread"] or 0, b["spread"] or 0)
        if spread > effect:
            out.append(Finding(
                id="scale.spread", status=WARN,
                title=f"From {a['p']:g} to {b['p']:g} {resource} the spread ({spread:.0%}) exceeds the change "
                      f"({effect:.0%})",
                evidence=f"medians {a['median_s']:.4g} s and {b['median_s']:.4g} s",
                why="The difference between the two points is inside the runs' own variation: it may be noise.",
                fix="More repetitions, a quieter node (ceiling check), or a longer run."))
    if not weak:
        for r in superlinear(rows):
            out.append(Finding(
                id="scale.superlinear", status=WARN,
                title=f"Superlinear speedup at {r['p']:g} {resource}: {r['speedup']:.2f}x "
                      f"({r['efficiency']:.0%} efficiency)",
                evidence=f"median {r['median_s']:.4g} s against {rows[0]['median_s']:.4g} s at {rows[0]['p']:g}",
                why="More than p times faster on p resources is not parallelism: most often the data now fit in "
                    "the caches the resources add up to (each core's L2, each socket's L3). No model of p is "
                    "fitted through it.",
                fix="Compare the working set with the caches (ceiling machine); scale from a size that does not "
                    "fit the caches of one resource."))
    if rows:
        first = rows[0]
        if first["p"] != 1:
            out.append(Finding(
                id="scale.baseline", status=WARN,
                title=f"The baseline is {first['p']:g} {resource}, not one",
                evidence=f"speedups are against {first['median_s']:.4g} s at {first['p']:g}",
                why="Speedup against a parallel run hides how the program does on one resource.",
                fix=f"Add 1 to the {resource} counts."))
    # nodes bring their own CPUs: a node count is never more than this node's CPUs can run
    over = [r["p"] for r in rows if r["p"] > cpus] if resource != "nodes" else []
    if over:
        out.append(Finding(
            id="scale.oversubscribed", status=WARN,
            title=f"Oversubscribed: {', '.join(f'{p:g}' for p in over)} {resource} on {cpus} CPU"
                  f"{'s' if cpus != 1 else ''}",
            evidence=f"this node lets ceiling use {cpus} CPUs",
            why="More threads or ranks than CPUs share the CPUs in turn: those points measure the scheduler, "
                "not the program's scaling.",
            fix=f"Keep {resource} at or below {cpus} here, or run the study on a larger node or under an allocation."))
    for p, lines in sorted((competing or {}).items()):
        if lines:
            out.append(Finding(
                id="scale.competing", status=WARN, title=f"Other load competed during the {p:g}-{resource} point",
                evidence="; ".join(lines[:3]),
                why="Another process used the CPUs while the point ran: its times are slower than the program's own.",
                fix="Run the study on an idle node (an exclusive allocation)."))
    for p, codes in sorted((failed or {}).items()):
        if codes:
            out.append(Finding(
                id="scale.failed", status=WARN,
                title=f"{len(codes)} run{'s' if len(codes) != 1 else ''} at {p:g} {resource} failed "
                      f"(exit status {', '.join(str(c) for c in codes)})",
                evidence="those runs' times are left out of the point", why="", fix="Run the command at that count "
                "by hand and read its error."))
    if not out:
        out.append(Finding(id="scale.honest", status=OK, title="The study's data support its figures",
                           evidence=f"{n} points, {reps}+ repetitions each"))
    return out


def analyse(times: Dict[float, Sequence[float]], resource: str, cpus: int, weak: bool = False,
            competing: Optional[Dict[float, List[str]]] = None, failed: Optional[Dict[float, List[int]]] = None,
            seed: int = 0, rate: bool = False, unit: str = "") -> Dict[str, Any]:
    """Everything above over one study: {"points", "amdahl" | "gustafson", "model", "predictions",
    "findings", "why_no_model", "rate", "unit"}.

    ``rate``: the figures are rates (higher is better: Mflups, GB/s), not times. Everything is
    then computed on their inverse, the time per unit of work, so speedup and efficiency read the
    same for both (a rate twice as high is a speedup of 2); each point also keeps the rates
    ("values", "median") and each prediction its rate ("value", "value_low", "value_high")."""
    given = {float(p): [float(t) for t in v] for p, v in times.items() if v}
    if rate:
        times = {p: [1 / t for t in v if t > 0] for p, v in given.items()}
        times = {p: v for p, v in times.items() if v}
    else:
        times = given
    rows = points(times, weak)
    if rate:
        for r in rows:
            r["values"] = [t for t in given[r["p"]] if t > 0]
            r["median"] = statistics.median(r["values"])
    out: Dict[str, Any] = {"points": rows, "weak": weak, "resource": resource, "rate": rate, "unit": unit}
    out["findings"] = checks(times, rows, resource, cpus, weak, competing, failed)
    out["amdahl" if not weak else "gustafson"] = (amdahl if not weak else gustafson)(times, seed) \
        if len(rows) >= 2 else None
    if len(rows) < MIN_POINTS:
        out["why_no_model"] = f"{len(rows)} point{'s' if len(rows) != 1 else ''}: a model needs {MIN_POINTS} or more"
    elif not weak and superlinear(rows):
        out["why_no_model"] = "superlinear speedup: a cache step, not a law of p"
        out["amdahl"] = None
    else:
        P, Y = _flat(times)
        model = select(P, Y)
        top = max(times)
        out["model"] = model
        out["predictions"] = predict(times, model, [2 * top, 4 * top], seed)
        if rate:
            for pr in out["predictions"]:
                pr.update(value=1 / pr["time_s"] if pr["time_s"] > 0 else None,
                          value_low=1 / pr["high"] if pr["high"] > 0 else None,
                          value_high=1 / pr["low"] if pr["low"] > 0 else None)
    return out


def series_model(times: Dict[float, Sequence[float]], seed: int = 0) -> Dict[str, Any]:
    """The PMNF model of one series of times (an MPI call's, a region's: analysis/scaling_calls.py)
    with its predictions at 2x and 4x the largest count: {"model", "predictions"}, or {"why_no_model"}
    for fewer than MIN_POINTS counts, a count where the median is not above zero (not called there),
    a run with no time at all (select weighs each time by its inverse: one 0 pins the model to 0), or
    a model that misses a count's own median by more than MISS (an MPI call of 30 us at 1 and 2 ranks
    and 0.24 s at 4 oversubscribed ones: every candidate misses some point, and the constant was
    chosen and extrapolated as 30 us at 16 ranks)."""
    counts = sorted(p for p, v in times.items() if v)
    if len(counts) < MIN_POINTS:
        return {"why_no_model": f"{len(counts)} count{'s' if len(counts) != 1 else ''} with a value: a model "
                                f"needs {MIN_POINTS} or more"}
    zero = [p for p in counts if not statistics.median(times[p]) > 0]
    if zero:
        return {"why_no_model": "no time at " + ", ".join(f"{p:g}" for p in zero) + ": not called there"}
    some = [p for p in counts if min(times[p]) <= 0]
    if some:
        return {"why_no_model": "a run with no time in it at " + ", ".join(f"{p:g}" for p in some)
                + ": the fit weighs each time by its inverse"}
    kept = {p: list(times[p]) for p in counts}
    P, Y = _flat(kept)
    model = select(P, Y)
    misses = {p: abs(evaluate(model, p) / statistics.median(kept[p]) - 1) for p in counts}
    worst = max(misses, key=misses.get)
    if misses[worst] > MISS:
        return {"why_no_model": f"the best model ({model['text']}) misses the median at {worst:g} by "
                                f"{misses[worst]:.0%}: the data follow no one law of this form (too few counts, "
                                "or a step such as oversubscription)"}
    return {"model": model, "predictions": predict(kept, model, [2 * counts[-1], 4 * counts[-1]], seed)}
