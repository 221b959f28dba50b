"""Cross-check `ceiling scale --extrap FILE` with Extra-P (TU Darmstadt's performance modeller, PyPI `extrap`):
does Extra-P read our export, and which models does it choose on the same data? Not a test, and no timings.

    .venv/bin/python benchmarks/extrap_crosscheck.py [--seeds 10] [--venv /tmp/extrap-venv]
    .venv/bin/python benchmarks/extrap_crosscheck.py --file F     # F from `ceiling scale [--profile] --extrap F`

(`PYTHONPATH=src` in front uses the working tree's ceiling rather than the venv's installed copy.)

Synthetic studies (default): p = 1, 2, 4, ..., 32, 3 repetitions, 2 % multiplicative noise, seeds 0.. for four
laws: Amdahl 10 (0.05 + 0.95/p), communication 2 + 0.05 p log2 p, a constant (pure noise) and 1 + 0.5 p^1/2.
Each is analysed (analysis/scaling_models.analyse), written with report/extrap.text to a temporary file and
given to Extra-P. Printed per study: our model and Extra-P's, whether each has the law's lead-order term (the
largest p-dependent term, p^i log2(p)^j with the largest (i, j); the constant where the law has none), and each
model's time at 4x the largest count against the law's. With --file: Extra-P's model for every REGION and METRIC
of the file beside ours (scaling_models.select on the same DATA, every repetition).

Extra-P runs twice per file: with its defaults (`extrap --text F`, rows "Extra-P"), whose search space has no
negative exponent (it cannot say 1/p), and with `--options allow_negative_exponents=True` (rows "Extra-P neg"),
which adds them but, as Extra-P 4.2.5 does when any count is <= 1, then drops every log2 term (its UserWarning
says so). Extra-P's basic modeller takes one term beside the constant, by leave-one-point-out SMAPE over the
points' means; ours up to two (scaling_models.select's docstring).

Extra-P pins numpy 1.x and PySide6, so it never goes into the project's venv: it runs from a venv of its own
(--venv, default /tmp/extrap-venv), created here with `pip install extrap` when missing and reused after
(about 650 MB with PySide6; if that install fails, `--no-deps` plus what its command line imports).
"""
from __future__ import annotations

import argparse
import math
import re
import statistics
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ceiling.analysis import scaling_models as S
from ceiling.report import extrap as X

PS = (1, 2, 4, 8, 16, 32)
REPS = 3
NOISE = 0.02
LAWS = {   # name: (law, its lead-order term (i, j))
    "amdahl 10(0.05+0.95/p)": (lambda p: 10.0 * (0.05 + 0.95 / p), (-1.0, 0)),
    "comm 2+0.05·p·log2(p)": (lambda p: 2.0 + 0.05 * p * math.log2(p), (1.0, 1)),
    "constant 3": (lambda p: 3.0, (0.0, 0)),
    "1+0.5·p^1/2": (lambda p: 1.0 + 0.5 * p ** 0.5, (0.5, 0)),
}
CONFIGS = {"Extra-P": [], "Extra-P neg": ["--options", "allow_negative_exponents=True"]}
CLI_DEPS = ["numpy<2", "scipy", "matplotlib~=3.6", "tqdm", "pycubexr!=2.0.0,<3,>=1.2.3", "marshmallow~=3.7",
            "packaging"]     # what `extrap --text` imports (4.2.5), for the --no-deps fallback
FMT = "{callpath}\t{metric}\t{model}"

Term = Tuple[float, float]
Model = List[Tuple[float, Term]]      # [(coefficient, (i, j))], the constant as (0, 0)


# -- Extra-P in its own venv ----------------------------------------------------------------------------------

def ensure_extrap(venv: Path, spec: str) -> Path:
    exe = venv / "bin" / "extrap"
    if exe.exists():
        return exe
    print(f"Extra-P is not at {exe}: creating a venv of its own at {venv} and installing `{spec}` from PyPI "
          "(numpy 1.x and PySide6, about 650 MB: never the project's venv) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if subprocess.run(pip + [spec]).returncode != 0:
        print("the full install failed: trying --no-deps and the command line's own dependencies",
              file=sys.stderr, flush=True)
        subprocess.run(pip + ["--no-deps", spec], check=True)
        subprocess.run(pip + CLI_DEPS, check=True)
    if not exe.exists():
        sys.exit(f"extrap_crosscheck: no {exe} after installing {spec}")
    return exe


def run_extrap(exe: Path, path: Path, extra: Sequence[str]):
    """Extra-P's model per (region, metric) of the text file at ``path``: (models, error or None, warnings)."""
    cmd = [str(exe), "--text", str(path), "--disable-progress", "--print", FMT, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    warns = sorted(set(re.findall(r"Warning: (.*)", r.stderr)))
    if r.returncode != 0:
        last = [ln for ln in r.stderr.strip().splitlines() if ln.strip()][-1:] or [f"exit {r.returncode}"]
        return {}, last[0].strip(), warns
    models = {}
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            models[(parts[0], parts[1])] = parts[2].strip()
    return models, None, warns


def parse_model(text: str, param: str) -> Model:
    """Extra-P's plain model text ("c0 + c1 * p^(1/2) * log2(p)^(1)") as [(coefficient, (i, j))]."""
    pw = re.compile(re.escape(param) + r"\^\(([-0-9./]+)\)")
    lg = re.compile(r"log2\(" + re.escape(param) + r"\)\^\(([-0-9./]+)\)")
    out: Model = []
    for part in text.split(" + "):
        factors = part.split(" * ")
        i = j = Fraction(0)
        for f in factors[1:]:
            m, n = pw.fullmatch(f), lg.fullmatch(f)
            if m:
                i += Fraction(m.group(1))
            elif n:
                j += Fraction(n.group(1))
            else:
                raise ValueError(f"unexpected factor {f!r} in Extra-P's model {text!r}")
        out.append((float(factors[0]), (float(i), float(j))))
    return out


# -- models as [(c, (i, j))] --------------------------------------------------------------------------------

def ours(model: Dict) -> Model:
    c = model["coefficients"]
    return [(c[0], (0.0, 0.0))] + [(c[k + 1], (float(i), float(j))) for k, (i, j) in enumerate(model["terms"])]


def value(m: Model, p: float) -> float:
    return sum(c * p ** i * math.log2(p) ** j for c, (i, j) in m)


def lead(m: Model) -> Term:
    terms = [t for c, t in m if c != 0 and t != (0.0, 0.0)]
    return max(terms, default=(0.0, 0.0))


def same(a: Term, b: Term) -> bool:
    return abs(a[0] - b[0]) < 1e-9 and abs(a[1] - b[1]) < 1e-9


def term_text(t: Term) -> str:
    i, j = (Fraction(x).limit_denominator(12) for x in t)
    pi = "" if i == 0 else "p" if i == 1 else f"p^{i}"
    lj = "" if j == 0 else "log2(p)" if j == 1 else f"log2(p)^{j}"
    return "·".join(x for x in (pi, lj) if x) or "1"


def show(m: Optional[Model]) -> str:
    if m is None:
        return "-"
    parts = [f"{c:.4g}" if t == (0.0, 0.0) else f"{c:+.4g}·{term_text(t)}" for c, t in m]
    return " ".join(parts)


# -- the text format, read as Extra-P reads it ------------------------------------------------------------

def read_text(path: Path):
    """(parameters, points, {(region, metric): [[repetitions] per point]}): METRIC and REGION hold until the
    next one; whitespace runs inside a name become one space, as in Extra-P's reader."""
    params: List[str] = []
    points: List[float] = []
    data: Dict[Tuple[str, str], List[List[float]]] = {}
    region, metric = "", ""
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, _, rest = re.sub(r"\s+", " ", line).partition(" ")
        rest = rest.strip()
        if key == "PARAMETER":
            params += rest.split(" ")
        elif key == "POINTS":
            points = [float(v) for v in rest.split(" ")]
        elif key == "REGION":
            region = rest
        elif key == "METRIC":
            metric = rest
        elif key == "DATA":
            data.setdefault((region, metric), []).append([float(v) for v in rest.split(" ")] if rest else [])
    return params, points, data


# -- the two modes ----------------------------------------------------------------------------------------

def study(law, seed: int) -> Dict[float, List[float]]:
    rng = np.random.default_rng(seed)
    return {float(p): [law(p) * (1 + NOISE * z) for z in rng.standard_normal(REPS)] for p in PS}


def pct(pred: Optional[float], truth: float) -> str:
    return "-" if pred is None else f"{pred:.4g} ({100 * (pred - truth) / truth:+.1f} %)"


def synthetic(exe: Path, seeds: int, tmp: Path) -> None:
    at = 4 * max(PS)
    files = read_ok = 0
    hits = {k: 0 for k in ["ceiling", *CONFIGS]}
    agree = {k: 0 for k in CONFIGS}
    errs: Dict[Tuple[str, str], List[float]] = {}
    warnings = set()
    w = 34
    for name, (law, true_lead) in LAWS.items():
        truth = law(at)
        print(f"\n== {name}: true lead term {term_text(true_lead)}, {at} threads: {truth:.4g}")
        print(f"  {'seed':>4}  {'tool':<11} {'model':<{w}} {'lead?':<5} at {at} (vs the law)")
        law_hits = {k: 0 for k in hits}
        for seed in range(seeds):
            res = S.analyse(study(law, seed), "threads", cpus=64, seed=seed)
            path = tmp / f"law{list(LAWS).index(name)}-seed{seed}.txt"
            path.write_text(X.text(res))
            files += 1
            rows = {"ceiling": ours(res["model"]) if "model" in res else None}
            ok = True
            for cfg, extra in CONFIGS.items():
                models, err, warns = run_extrap(exe, path, extra)
                warnings.update(f"{cfg}: {x}" for x in warns)
                if err or ("main", "time") not in models:
                    ok = False
                    print(f"  {seed:>4}  {cfg:<11} Extra-P failed: {err or 'no model for main/time'}")
                    rows[cfg] = None
                    continue
                rows[cfg] = parse_model(models[("main", "time")], res["resource"])
            read_ok += ok
            for k, m in rows.items():
                hit = m is not None and same(lead(m), true_lead)
                hits[k] += hit
                law_hits[k] += hit
                if m is not None:
                    pred = value(m, at)
                    errs.setdefault((name, k), []).append(abs(pred - truth) / truth)
                if k in agree and m is not None and rows["ceiling"] is not None:
                    agree[k] += same(lead(m), lead(rows["ceiling"]))
                text = show(m) if m is not None else res.get("why_no_model", "Extra-P failed")
                print(f"  {seed:>4}  {k:<11} {text:<{w}} {'yes' if hit else 'no':<5} "
                      f"{pct(value(m, at) if m else None, truth)}")
        print("  lead term: " + ", ".join(f"{k} {v}/{seeds}" for k, v in law_hits.items())
              + "; median |error| at 4x: "
              + ", ".join(f"{k} {100 * statistics.median(errs[(name, k)]):.1f} %"
                          for k in law_hits if errs.get((name, k))))
    for x in sorted(warnings):
        print(f"warning from {x}")
    n = files
    print(f"\nsummary: Extra-P read {read_ok}/{n} files without error (both settings); true lead term: "
          + ", ".join(f"{k} {v}/{n}" for k, v in hits.items())
          + "; same lead term as ours: " + ", ".join(f"{k} {v}/{n}" for k, v in agree.items()))


def one_file(exe: Path, path: Path) -> None:
    params, points, data = read_text(path)
    param = params[0] if params else "p"
    results = {cfg: run_extrap(exe, path, extra) for cfg, extra in CONFIGS.items()}
    at = 4 * max(points) if points else float("nan")
    print(f"{path}: PARAMETER {' '.join(params)}, POINTS {' '.join(f'{p:g}' for p in points)}, "
          f"{len(data)} region/metric pairs; predictions at {at:g}")
    for cfg, (_, err, warns) in results.items():
        for x in warns:
            print(f"warning from {cfg}: {x}")
        if err:
            print(f"{cfg} could not read it: {err}")
    agree = {k: 0 for k in CONFIGS}
    w = 40
    for (region, metric), rows in data.items():
        print(f"\n{region} / {metric}")
        mine: Optional[Model] = None
        if len(params) != 1:
            why = f"{len(params)} parameters: ours fits one"
        elif len(rows) != len(points) or not all(rows):
            why = f"{len(rows)} DATA lines for {len(points)} points"
        elif len(points) < S.MIN_POINTS:
            why = f"{len(points)} points: a model needs {S.MIN_POINTS} or more"
        elif any(not statistics.median(r) > 0 for r in rows):    # as analysis/scaling_calls.model_of
            why = "no model: a median of 0 at " + ", ".join(f"{p:g}" for p, r in zip(points, rows)
                                                          if not statistics.median(r) > 0)
        else:
            P = [p for p, r in zip(points, rows) for _ in r]
            Y = [y for r in rows for y in r]
            with np.errstate(all="ignore"):
                mine = ours(S.select(P, Y))
            zeros = [f"{p:g}" for p, r in zip(points, rows) if min(r) <= 0]
            if zeros:      # select weighs each value by 1/|value|: one zero repetition pins the fit to 0
                print(f"  (a repetition <= 0 at {', '.join(zeros)}: ours weighs values by 1/|value|)")
            why = ""
        pred = f"{value(mine, at):.4g}" if mine else ""
        print(f"  {'ceiling':<11} {show(mine) if mine else why:<{w}} lead {term_text(lead(mine)) if mine else '-':<14}"
              f" {pred}")
        for cfg, (models, err, _) in results.items():
            got = models.get((region, metric))
            if got is None:
                print(f"  {cfg:<11} {'no model' + (': ' + err if err else ''):<{w}}")
                continue
            m = parse_model(got, param)
            if mine is not None:
                agree[cfg] += same(lead(m), lead(mine))
            print(f"  {cfg:<11} {show(m):<{w}} lead {term_text(lead(m)):<14} {value(m, at):.4g}")
    n = len(data)
    print(f"\nsummary: Extra-P read {sum(not e for _, e, _ in results.values())}/{len(results)} runs of the file "
          f"without error; same lead term as ours: " + ", ".join(f"{k} {v}/{n}" for k, v in agree.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, help="run Extra-P on this export instead of the synthetic studies")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--venv", type=Path, default=Path("/tmp/extrap-venv"), help="Extra-P's own venv")
    ap.add_argument("--spec", default="extrap", help="what pip installs into it (e.g. extrap==4.2.5)")
    a = ap.parse_args()
    exe = ensure_extrap(a.venv, a.spec)
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip()
    shown = FMT.replace("\t", r"\t")
    print(f"{version} ({exe}); invocation: extrap --text F --disable-progress --print $'{shown}' "
          "[--options allow_negative_exponents=True]")
    if a.file:
        one_file(exe, a.file)
        return
    with tempfile.TemporaryDirectory(prefix="ceiling-extrap-") as tmp:
        synthetic(exe, a.seeds, Path(tmp))


if __name__ == "__main__":
    main()
