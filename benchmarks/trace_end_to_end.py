"""What `ceiling trace` costs the program it records, end to end (issue 28): a program making
10^5 intercepted calls per second and an MPI barrier loop, each run alone, under `ceiling profile`
and under `ceiling trace`, the three ways interleaved in every round.

    .venv/bin/python benchmarks/trace_end_to_end.py [--rounds 7] [--only rate|barrier] \
        [--iterations 200000] [--period-us 10] [--barrier-iterations 1000000] [--barrier-warmup 1000] \
        [--lib PATH] [--ceiling CMD] [--cc cc] [--mpicc PATH] [--mpiexec PATH]

The programs, their checks and the way each is run are profile_overhead.py's (its docstring says
them: this script imports it): the rate program (profile_overhead_rate.c, one thread, a 1-byte
write to /dev/null then a block of computation calibrated once, before the first round, to
--period-us per iteration uninstrumented, so every run does the same work) and the barrier loop
(osu_barrier_like.c, 2 ranks under the venv's MPICH, the MPI mpi4py loads). The ways:

  - plain: the program alone;
  - profile: `ceiling profile --no-store --no-measure --save-json F -- PROGRAM`;
  - trace: `ceiling trace --no-store --no-measure --save-json F --trace T.pftrace -- PROGRAM`
    (every intercepted call an event; the Perfetto trace written after the program ends).

The order of the ways rotates from round to round. Compared: the program's own figure (the rate
program's elapsed time around its thread; the barrier loop's mean us per MPI_Barrier, averaged
over the ranks, as OSU's Avg Latency), which does not hold what the verb does before the program
starts and after it ends. Checked: every run exits 0 and did all its work (profile_overhead.py's
checks); a trace run's JSON has a `trace.recorded` finding with at least the program's calls as
events and nothing dropped.

Per way against plain: the added wall time per call (the difference of the medians over the
calls of one run; for the barrier, per MPI_Barrier) and in % of plain, each with the 95 %
percentile-bootstrap interval of the ratio of medians the project's `compare` uses
(analysis/significance.median_ratio_interval: 2,000 resamples, a fixed seed), and each round's
paired difference (min .. max). Beside it, what each trace stated as its own recording cost
(analysis/trace_cost.py: events x the per-event cost measured on this node + its write-out time),
median over rounds, to set the stated figure beside the measured one. Fewer than 5 rounds is a
trial, not a figure. Everything is written in a temporary directory, removed at the end.
"""
from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import profile_overhead as po  # noqa: E402  (the programs, their checks and how they are run)

WAYS = ("plain", "profile", "trace")
LABEL = {"plain": "plain", "profile": "ceiling profile", "trace": "ceiling trace"}


def rotated(rnd: int):
    k = rnd % len(WAYS)
    return WAYS[k:] + WAYS[:k]


def verb_cmd(s: po.Setup, way: str, rundir: Path, argv: List[str]):
    env = dict(po.base_env(), CEILING_INTERPOSE_LIB=str(s.lib))
    extra = ["--trace", str(rundir / "t.pftrace")] if way == "trace" else []
    return [*s.ceiling, way, "--no-store", "--no-measure", "--save-json", str(rundir / "profile.json"), *extra,
            "--", *argv], env


def trace_cost(what: str, rundir: Path, calls: int) -> dict:
    """The trace run's stated recording cost, after checking it recorded the program's calls whole."""
    doc = po.profile_doc(what, rundir / "profile.json")
    rec = [f for f in doc.get("findings", []) if f.get("id") == "trace.recorded"]
    if not rec or rec[0].get("status") != "ok":
        raise po.Failed(f"{what}: no trace written: {rec[0].get('title') if rec else 'no trace.recorded finding'}")
    data = rec[0]["data"]
    if data.get("events", 0) < calls or data.get("dropped"):
        raise po.Failed(f"{what}: the trace holds {data.get('events')} events ({data.get('dropped')} dropped) for "
                        f"{calls} calls")
    return dict(data.get("cost") or {}, wall_s=doc["application"]["wall_s"])


def rate_run(s: po.Setup, exe: Path, way: str, iterations: int, spin: int, checksum: Dict[int, str]):
    what = f"rate, {LABEL[way]}"
    rundir = s.rundir()
    argv = [str(exe), "run", "1", str(iterations), str(spin)]
    env = po.base_env()
    if way != "plain":
        argv, env = verb_cmd(s, way, rundir, argv)
    out, _ = po.execute(what, argv, env, s.timeout)
    f = po.fields(out)
    if f.get("failed") != "0" or f.get("calls") != str(iterations) or "elapsed_s" not in f:
        raise po.Failed(f"{what}: the program did not make its {iterations} writes: {out.strip()!r}")
    if checksum.setdefault(1, f["checksum"]) != f["checksum"]:
        raise po.Failed(f"{what}: checksum {f['checksum']}, other runs {checksum[1]}: not the same work")
    cost = None
    if way == "profile":
        po.profile_doc(what, rundir / "profile.json")
    elif way == "trace":
        cost = trace_cost(what, rundir, iterations)
    shutil.rmtree(rundir)
    return float(f["elapsed_s"]), cost


def barrier_run(s: po.Setup, exe: Path, way: str, mpiexec: str, iterations: int, warmup: int):
    what = f"barrier, {LABEL[way]}"
    rundir = s.rundir()
    argv = [mpiexec, "-n", str(po.RANKS), str(exe), str(iterations), str(warmup)]
    env = dict(po.base_env(), CEILING_BARRIER_RANKS=str(po.RANKS))
    if way != "plain":
        argv, venv = verb_cmd(s, way, rundir, argv)
        env.update(venv)
    out, _ = po.execute(what, argv, env, s.timeout + iterations * 1e-4)
    f = po.fields(out, "result")
    if (f.get("ranks") != str(po.RANKS) or f.get("failed") != "0" or f.get("done_min") != str(iterations)
            or f.get("done_max") != str(iterations) or "avg_us" not in f):
        raise po.Failed(f"{what}: the barrier loop did not complete {iterations} barriers on {po.RANKS} ranks: "
                        f"{out.strip().splitlines()[-1:]!r}")
    cost = None
    if way == "profile":
        po.profile_doc(what, rundir / "profile.json")
    elif way == "trace":
        cost = trace_cost(what, rundir, po.RANKS * iterations)
    shutil.rmtree(rundir)
    return float(f["avg_us"]), cost


def compare(plain: List[float], way: List[float], per_call: float, unit: str, scale: float) -> str:
    """One table row's figures: the added time per call by the medians with its interval, the same in %
    of plain, and the paired rounds' range. ``per_call``: calls per run (1 when the figure is per call);
    ``scale``: the figure's unit into ``unit``."""
    from ceiling.analysis.significance import median_ratio_interval
    mp = statistics.median(plain)
    iv = median_ratio_interval(plain, way)
    added = (statistics.median(way) - mp) / per_call * scale
    paired = [(w - p) / per_call * scale for p, w in zip(plain, way)]
    if iv is None:
        ci, pct = "no interval", f"{statistics.median(way) / mp - 1:+.2%}"
    else:
        ci = f"[{(iv.low - 1) * mp / per_call * scale:+.1f}, {(iv.high - 1) * mp / per_call * scale:+.1f}]"
        pct = f"{iv.ratio - 1:+.2%} [{iv.low - 1:+.2%}, {iv.high - 1:+.2%}]"
    return (f"{added:+.1f} {unit} {ci} | {pct} | {min(paired):+.1f} .. {max(paired):+.1f}")


def stated(costs: List[Optional[dict]], per_call: float) -> str:
    """What the traces said their recording cost, median over rounds: per call and in % of the run."""
    known = [c for c in costs if c and c.get("total_s") is not None]
    if not known:
        why = next((c.get("why") for c in costs if c), "no figure")
        return f"unknown ({why})"
    per = statistics.median(c["total_s"] / per_call * 1e9 for c in known)
    frac = statistics.median(c["fraction"] for c in known if c.get("fraction") is not None)
    ev = statistics.median(c["per_event_ns"] for c in known)
    tr = statistics.median(c["tracer_s"] for c in known)
    return (f"{per:.1f} ns per call, {frac:.2%} of the run (per event {ev:.1f} ns measured on this node, "
            f"write-outs {tr * 1e3:.3g} ms; median over {len(known)} traces)")


def rate(s: po.Setup, a: argparse.Namespace) -> List[str]:
    exe = s.tmp / "profile_overhead_rate"
    po.build(a.cc, "profile_overhead_rate.c", exe, ["-pthread"], po.base_env())
    cal = po.calibrate(exe, a.period_us)
    checksum: Dict[int, str] = {}
    data, costs = interleaved("rate", a.rounds,
                              lambda way: rate_run(s, exe, way, a.iterations, int(cal["spin"]), checksum))
    out = [f"### A program making 10^5 intercepted calls per second ({a.rounds} rounds)", "",
           f"{a.iterations} iterations of a 1-byte write to /dev/null and {int(cal['spin'])} steps of computation "
           f"({a.period_us:g} us per iteration uninstrumented, calibrated before the first round). Figure: the "
           f"program's own elapsed time; the plain median {statistics.median(data['plain']):.4f} s "
           f"({a.iterations / statistics.median(data['plain']):,.0f} calls/s).", "",
           "| way | elapsed s, median (min-max) | added per call, median [95% CI] | added % [95% CI] | "
           "paired rounds, ns per call |", "|---|---:|---:|---:|---:|"]
    out += rows(data, a.iterations, 1e9, 4)
    out += ["", f"Stated by the traces (each run's own figure): {stated(costs, a.iterations)}."]
    return out


def interleaved(what: str, rounds: int, run) -> Tuple[Dict[str, List[float]], List[Optional[dict]]]:
    """Each way's figures over ``rounds`` (the ways' order rotating each round), and the cost each
    trace stated: ``run(way)`` gives (figure, stated cost)."""
    data: Dict[str, List[float]] = {w: [] for w in WAYS}
    costs: List[Optional[dict]] = []
    for rnd in range(rounds):
        for way in rotated(rnd):
            print(f"{what}: round {rnd + 1}/{rounds}, {LABEL[way]} ...", file=sys.stderr, flush=True)
            figure, cost = run(way)
            data[way].append(figure)
            if way == "trace":
                costs.append(cost)
    return data, costs


def rows(data: Dict[str, List[float]], per: int, to_ns: float, digits: int) -> List[str]:
    """The table's row of each way: its median (min-max), and what it adds to the plain runs per call."""
    out = []
    for w in WAYS:
        med = statistics.median(data[w])
        row = "| - | - | - |" if w == "plain" else f"| {compare(data['plain'], data[w], per, 'ns', to_ns)} |"
        out.append(f"| {LABEL[w]} | {med:.{digits}f} ({min(data[w]):.{digits}f}-{max(data[w]):.{digits}f}) {row}")
    return out


def barrier(s: po.Setup, a: argparse.Namespace) -> List[str]:
    for tool in (a.mpicc, a.mpiexec):
        if not (shutil.which(tool) or Path(tool).is_file()):
            raise po.Failed(f"build failed: no {tool} (--mpicc/--mpiexec; the venv's come with the mpich wheel)")
    exe = s.tmp / "osu_barrier_like"
    po.build(a.mpicc, "osu_barrier_like.c", exe, [], po.base_env())
    data, costs = interleaved("barrier", a.rounds, lambda way: barrier_run(s, exe, way, a.mpiexec,
                                                                          a.barrier_iterations, a.barrier_warmup))
    out = [f"### A barrier loop like osu_barrier ({po.RANKS} ranks, {a.rounds} rounds)", "",
           f"{a.barrier_warmup} barriers of warm-up, then {a.barrier_iterations} timed; {a.mpicc} and {a.mpiexec} "
           f"({po.mpi_version(a.mpiexec)}). Figure: OSU's Avg Latency (each rank's mean us per MPI_Barrier, "
           "averaged over the ranks).", "",
           "| way | us per barrier, median (min-max) | added per barrier, median [95% CI] | added % [95% CI] | "
           "paired rounds, ns per barrier |", "|---|---:|---:|---:|---:|"]
    out += rows(data, 1, 1e3, 3)
    # the stated cost per barrier: every rank records one event per barrier, side by side
    out += ["", f"Stated by the traces (each run's own figure, per barrier of one rank): "
                f"{stated(costs, po.RANKS * (a.barrier_iterations + a.barrier_warmup))}."]
    return out


def main() -> int:
    from ceiling import core           # the installed ceiling: the sources have no built library
    from ceiling.probes.interpose_record import parse

    venv = ROOT / ".venv" / "bin"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", type=Path, default=core.interpose_library_path())
    ap.add_argument("--ceiling", default=str(venv / "ceiling") if (venv / "ceiling").exists() else "ceiling")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", choices=("rate", "barrier"))
    ap.add_argument("--iterations", type=int, default=200000)
    ap.add_argument("--period-us", type=float, default=10.0)
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--mpicc", default=str(venv / "mpicc"))
    ap.add_argument("--mpiexec", default=str(venv / "mpiexec"))
    ap.add_argument("--barrier-iterations", type=int, default=1000000,
                    help="timed barriers per run (default 1,000,000: 2 million events a traced run)")
    ap.add_argument("--barrier-warmup", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    if a.rounds < 1 or a.iterations < 1 or a.barrier_iterations < 1 or a.barrier_warmup < 0 or a.period_us <= 0:
        ap.error("--rounds, --iterations, --barrier-iterations and --period-us must be positive")
    if not a.lib.is_file():
        print(f"trace_end_to_end.py: build failed: no interposer at {a.lib}", file=sys.stderr)
        return 1
    ceiling = shlex.split(a.ceiling)
    report = po.header(a, a.lib, ceiling)
    report[0] = report[0].replace("ceiling profile overhead", "ceiling trace, end to end")
    try:
        with tempfile.TemporaryDirectory(prefix="ceiling-trace-e2e-") as d:
            s = po.Setup(a.lib.resolve(), ceiling, lambda text: [r.as_dict() for r in parse(text)], Path(d), a.timeout)
            if a.only in (None, "rate"):
                report += ["", *rate(s, a)]
            if a.only in (None, "barrier"):
                report += ["", *barrier(s, a)]
    except po.Failed as e:
        print(f"trace_end_to_end.py: {e}", file=sys.stderr)
        return 1
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
