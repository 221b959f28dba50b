"""What libceiling_interpose.so adds to a cheap POSIX or stdio call, in ns per call.

    PYTHONPATH=src python benchmarks/interpose_overhead.py [--lib PATH] [--rounds 5] [--iterations 40000]

Compiles interpose_overhead.c with cc into a temporary directory and runs it
in three ways, round by round in turn, so a burst of other load hurts all
alike: plain; preloaded but not counting (no CEILING_INTERPOSE_OUT: the
wrappers only pass through); preloaded and counting (the record written to
the temporary directory). Each run prints the best of 5 loops per call; per
call and mode the best round is kept, and the added ns are that minus the
plain best. The medians over rounds are printed beside it. The goal (issue:
`ceiling profile`) is at most 50 ns added per intercepted call.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("plain", "passthrough", "counting")


def run(exe, iterations, mode, lib, tmp):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    if mode != "plain":
        env["LD_PRELOAD"] = str(lib)
    if mode == "counting":
        env["CEILING_INTERPOSE_OUT"] = str(Path(tmp) / "record.%p")
    out = subprocess.run([exe, str(iterations)], env=env, capture_output=True, text=True, check=True, timeout=120)
    return {name: float(ns) for name, ns in (line.split() for line in out.stdout.splitlines())}


def main() -> int:
    sys.path.insert(0, str(HERE.parent / "src"))
    from ceiling import core

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", type=Path, default=core.interpose_library_path(),
                    help="the interposer (default: CEILING_INTERPOSE_LIB, else the installed one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=40000, help="calls per timed loop")
    args = ap.parse_args()
    if not args.lib.is_file():
        ap.error(f"no interposer at {args.lib}")
    cc = shutil.which("cc")
    if cc is None:
        ap.error("no cc on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(Path(tmp) / "interpose_overhead")
        subprocess.run([cc, "-O2", "-o", exe, str(HERE / "interpose_overhead.c")], check=True)
        rounds = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for m in MODES:
                rounds[m].append(run(exe, args.iterations, m, args.lib, tmp))
        records = list(Path(tmp).glob("record.*"))
        if len(records) != args.rounds:
            print(f"expected {args.rounds} records from the counting runs, found {len(records)}", file=sys.stderr)
            return 1
    calls = list(rounds["plain"][0])
    print(f"{args.rounds} rounds of {args.iterations} calls per loop; ns per call, best round (median)")
    print(f"{'call':20s} {'plain':>15s} {'passthrough':>15s} {'counting':>15s} {'added':>8s} {'added':>8s}")
    print(f"{'':20s} {'':>15s} {'':>15s} {'':>15s} {'pass':>8s} {'count':>8s}")
    for c in calls:
        best = {m: min(r[c] for r in rounds[m]) for m in MODES}
        med = {m: statistics.median(r[c] for r in rounds[m]) for m in MODES}
        cells = " ".join(f"{best[m]:7.1f} ({med[m]:5.1f})" for m in MODES)
        print(f"{c:20s} {cells} {best['passthrough'] - best['plain']:8.1f} {best['counting'] - best['plain']:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
