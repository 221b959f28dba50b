"""Core-to-core latency: how long a cache line takes to travel between two CPUs.

For each pair of CPUs, two threads pinned on them bounce one cache line
(csrc/kernels/c2c.c, the design of nviennot/core-to-core-latency's default
bench: compare-and-swap on one shared counter); the one-way latency is the
time of a round trip halved. Pairs are classified by what the two CPUs share
(machine.cpus): the same core ("smt"), an L2 ("l2"), an L3 instance ("l3"),
only the socket ("socket"), or nothing ("cross_socket"). Each metric
"c2c.<level>" is measured in rounds spread over time (5, quick 3; each
pair's repetitions split between them, ROUND_GAP_S apart): per round, the
median over the level's pairs of each pair's median; the metric's values are
the rounds' figures, its value their median, so one disturbed pair or moment
does not move it and the spread between rounds is reported (CV). In a VM whose
host moves virtual CPUs the rounds fall into two groups (28 and 137 ns on one
guest): when the slowest round is more than RATIO_WARN (placement.stability's
threshold) above the fastest, both modes are reported (``modes``), and the
run's placement.stability finding is made to agree (verbs/session.py).

Every pair is measured up to 32 CPUs; above that, every SMT sibling pair and
a fixed, seeded sample of each other level, so that a 256-CPU node takes
seconds, not an hour, and two runs measure the same pairs.
"""
from __future__ import annotations

import random
import statistics
import time
from itertools import combinations
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import core
from ..errors import CoreError
from ..machine.model import Machine
from ..results.model import LOWER, SKIPPED, Finding, Metric, Series, Stats
from ..probes.c2c import ROUND_TRIPS, WARMUP, classify_pair, measure_pair, one_way_ns
from ..results.measure import Context, Outcome

NS = "ns"
LEVELS = ("smt", "l2", "l3", "socket", "cross_socket")
ALL_PAIRS_MAX_CPUS = 32
SAMPLE_PER_LEVEL = 24          # pairs of each non-SMT level on big nodes
SAMPLE_SEED = 20240607
REPS, QUICK_REPS = 30, 10
ROUNDS, QUICK_ROUNDS = 5, 3    # each pair measured in this many rounds, spread over time
ROUND_GAP_S = 0.1              # between two rounds
RATIO_WARN = 1.5               # slowest / fastest round above this: two modes (checks/placement.py's figure)

Pair = Tuple[int, int]


def allowed_cpus(machine: Machine, fallback: Sequence[int] = ()) -> List[int]:
    """CPUs this process may run on that are online, in id order."""
    online = {c.id for c in machine.cpus if c.online} if machine.cpus else None
    ids = machine.affinity or list(fallback) or sorted(online or ())
    return sorted({i for i in ids if online is None or i in online})


def sample_pairs(machine: Machine, cpus: Sequence[int], *, all_max: int = ALL_PAIRS_MAX_CPUS,
                 per_level: int = SAMPLE_PER_LEVEL, seed: int = SAMPLE_SEED) -> List[Pair]:
    """Pairs to measure: all of them up to ``all_max`` CPUs; above, every SMT pair plus a
    seeded sample of ``per_level`` pairs of each other sharing level. Deterministic."""
    cpus = sorted(set(cpus))
    pairs = list(combinations(cpus, 2))
    if len(cpus) <= all_max:
        return pairs
    by_level: Dict[Optional[str], List[Pair]] = {}
    for a, b in pairs:
        by_level.setdefault(classify_pair(machine, a, b), []).append((a, b))
    chosen = list(by_level.get("smt", []))
    rng = random.Random(seed)
    for level in LEVELS[1:] + (None,):
        cands = by_level.get(level, [])
        chosen += cands if len(cands) <= per_level else rng.sample(cands, per_level)
    return sorted(chosen)


def bench_c2c(ctx: Context) -> Outcome:
    """One-way core-to-core latency per pair (Series "c2c.matrix") and per sharing level ("c2c.<level>")."""
    m = ctx.machine
    cpus = allowed_cpus(m, ctx.cpus)
    if len(cpus) < 2:
        return Outcome(findings=[Finding(
            id="bench.c2c", status=SKIPPED,
            title="core-to-core latency: fewer than two CPUs allowed",
            evidence=f"CPUs this process may use: {cpus}",
            why="A cache line needs two CPUs to travel between.",
            fix="Run with more CPUs in the affinity mask (taskset, cgroup cpuset, srun --cpus-per-task).")])
    pairs = sample_pairs(m, cpus)
    reps = ctx.opts.reps or (QUICK_REPS if ctx.opts.quick else REPS)
    rounds = max(1, min(QUICK_ROUNDS if ctx.opts.quick else ROUNDS, reps))
    per_round = [reps // rounds + (1 if i < reps % rounds else 0) for i in range(rounds)]
    k = core.find("c2c_pingpong")
    index = {c: i for i, c in enumerate(cpus)}
    matrix: List[List[Optional[float]]] = [[None] * len(cpus) for _ in cpus]
    # level -> round -> [(pair, median, min, max)]
    per_level: Dict[str, List[List[Tuple[Pair, float, float, float]]]] = {}
    all_vals: Dict[Pair, List[float]] = {}
    errors: List[str] = []
    unclassified: List[Pair] = []
    failed: set = set()
    ctx.progress.start("core-to-core latency", total=len(pairs) * rounds)
    for r, n in enumerate(per_round):
        if r:
            time.sleep(ROUND_GAP_S)
        for a, b in pairs:
            if (a, b) in failed:
                ctx.progress.advance()
                continue
            try:
                raw = measure_pair(k, a, b, n)
                vals = one_way_ns(raw)
                if vals is None:
                    errors.append(f"CPUs {a},{b}: {raw.msg or 'check failed'}")
            except CoreError as e:
                vals = None
                errors.append(f"CPUs {a},{b}: {e}")
            if not vals:
                failed.add((a, b))
            else:
                all_vals.setdefault((a, b), []).extend(vals)
                level = classify_pair(m, a, b)
                if level is None:
                    if r == 0:
                        unclassified.append((a, b))
                else:
                    rows = per_level.setdefault(level, [[] for _ in per_round])
                    rows[r].append(((a, b), statistics.median(vals), min(vals), max(vals)))
            ctx.progress.advance()
    ctx.progress.done()
    for (a, b), vals in all_vals.items():
        matrix[index[a]][index[b]] = matrix[index[b]][index[a]] = statistics.median(vals)

    sampled = len(pairs) < len(cpus) * (len(cpus) - 1) // 2
    common: Dict[str, Any] = {"kernel": k.name, "design": "CAS on one shared counter (core-to-core-latency bench 1)",
                              "round_trips_per_rep": ROUND_TRIPS, "reps_per_pair": reps, "warmup": WARMUP,
                              "one_way": "round-trip time / 2",
                              "pair_stat": f"median of each round's repetitions ({reps} in all)",
                              "pairs_sampled": sampled}
    out = Outcome()
    levels_seen = [lv for lv in LEVELS if lv in per_level]
    for level in levels_seen:
        by_round = [rows for rows in per_level[level] if rows]
        figures = [statistics.median(row[1] for row in rows) for rows in by_round]
        st = Stats.of(figures, LOWER)
        rows = [row for rows in by_round for row in rows]
        mt = Metric(
            f"c2c.{level}", st.median, NS, LOWER, stats=st, values=figures,
            context={**common, "level": level, "rounds": len(figures), "round_gap_s": ROUND_GAP_S,
                     "value_stat": "median over rounds of each round's median over pairs of per-pair medians",
                     "pairs": sorted({tuple(row[0]) for row in rows}), "pair_count": len(by_round[0]),
                     "levels_sampled": levels_seen, "min": min(row[2] for row in rows),
                     "max": max(row[3] for row in rows)})
        mt.context["pairs"] = [list(p) for p in mt.context["pairs"]]
        modes = two_modes(figures)
        if modes is not None:
            (lo, n_lo), (hi, n_hi) = modes
            mt.context["modes"] = [{"ns": lo, "rounds": n_lo}, {"ns": hi, "rounds": n_hi}]
            mt.note = (f"two modes: {lo:.0f} ns in {n_lo} round{'s' if n_lo > 1 else ''} and {hi:.0f} ns in "
                       f"{n_hi}: the placement changed while measuring (the host moves virtual CPUs, or "
                       "other load); the figure is the median of the rounds")
        out.metrics.append(mt)
    context: Dict[str, Any] = {**common, "cpus": cpus, "pairs_measured": len(pairs),
                               "cell_stat": f"median of {reps} repetitions over {rounds} rounds, one-way",
                               "levels_sampled": levels_seen}
    if errors:
        context["errors"] = errors
    if unclassified:
        context["unclassified_pairs"] = [list(p) for p in unclassified]
    out.series.append(Series("c2c.matrix", "matrix", title="Core-to-core latency (one-way)",
                             x_label="CPU", y_label="CPU", y_unit=NS, labels=[str(c) for c in cpus],
                             matrix=matrix, context=context))
    if not per_level:
        out.findings.append(Finding(
            id="bench.c2c", status="fail", title="core-to-core latency: no pair could be measured",
            evidence="; ".join(errors[:5]),
            why="Without a valid measurement there is no core-to-core figure."))
    return out


def two_modes(figures: Sequence[float], ratio: float = RATIO_WARN) -> Optional[Tuple[Tuple[float, int],
                                                                                     Tuple[float, int]]]:
    """((low median, rounds), (high median, rounds)) when the rounds fall into two groups more than
    ``ratio`` apart (split at the widest gap between sorted figures); None when they agree."""
    vals = sorted(v for v in figures if v and v > 0)
    if len(vals) < 2 or vals[-1] <= ratio * vals[0]:
        return None
    gap = max(range(1, len(vals)), key=lambda i: vals[i] / vals[i - 1])
    low, high = vals[:gap], vals[gap:]
    return (statistics.median(low), len(low)), (statistics.median(high), len(high))
