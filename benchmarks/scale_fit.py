"""Time `ceiling scale`'s analysis (analysis/scaling_models.analyse: fits, model selection,
bootstrap intervals, honesty checks) on synthetic studies, and count how often the chosen model
has the true lead-order term on the synthetic laws of issue 30. Not a test: it times things.

    .venv/bin/python benchmarks/scale_fit.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ceiling.analysis import scaling_models as S

LAWS = {"amdahl s=0.05": (lambda p: 10.0 * (0.05 + 0.95 / p), (-1.0, 0)),
        "10/p + 0.05 p log2 p": (lambda p: 10.0 / p + 0.05 * p * np.log2(p), (1.0, 1))}


def study(law, ps, reps, seed, cv=0.02):
    rng = np.random.default_rng(seed)
    return {float(p): list(law(p) * (1 + cv * rng.standard_normal(reps))) for p in ps}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    law = LAWS["10/p + 0.05 p log2 p"][0]
    for n, reps in ((6, 3), (100, 1), (34, 3), (100, 3)):
        ps = [2 ** (k * 12 / max(n - 1, 1)) for k in range(n)]       # 1 to 4096, log-spaced
        data = study(law, ps, reps, 0)
        ts = []
        for _ in range(rounds):
            t = time.perf_counter()
            S.analyse(data, "threads", cpus=64)
            ts.append(time.perf_counter() - t)
        print(f"{n:4d} counts x {reps} runs: median {statistics.median(ts):.3f} s (min {min(ts):.3f}) over {rounds}")
    for name, (law, lead) in LAWS.items():
        hit = inside = 0
        for seed in range(10):
            a = S.analyse(study(law, [1, 2, 4, 8, 16, 32], 3, seed), "threads", cpus=64, seed=seed)
            hit += max(a["model"]["terms"], default=(0.0, 0)) == lead
            top = a["predictions"][1]
            truth = law(128) * (1 + 0.02 * np.random.default_rng(1000 + seed).standard_normal())
            inside += top["low"] <= truth <= top["high"]
        print(f"{name}: lead term {S.term_text(lead)} in {hit}/10 seeds, the time at 4x inside the 90 % "
              f"interval in {inside}/10")


if __name__ == "__main__":
    main()
