"""What the trace's event channel adds per event, in ns: traced vs counted-only, per cheap call.

    .venv/bin/python benchmarks/trace_event_cost.py [--rounds 5] [--iterations 20000]

(the installed ceiling's interposer: the sources have no built library)

Compiles interpose_overhead.c (the profile's per-call benchmark: cheap POSIX and stdio calls, each the
best of 5 timed loops) and runs it preloaded with libceiling_interpose.so in two modes, round by round
in turn so that a burst of other load hurts both alike: counting (CEILING_INTERPOSE_OUT only) and traced
(CEILING_TRACE_DIR too: every call is one event in the thread's buffer, written out when full). The
event files of a round are removed after it. Per call: the median over rounds of traced - counting, and
the spread (min .. max of the rounds' differences). The goal (issue 28) is at most 100 ns per event.
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
MODES = ("counting", "traced")


def run(exe, iterations, mode, lib, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CEILING_", "LD_PRELOAD"))}
    d = Path(tempfile.mkdtemp(dir=tmp))
    env.update(LD_PRELOAD=str(lib), CEILING_INTERPOSE_OUT=str(d / "record.%p"))
    if mode == "traced":
        env["CEILING_TRACE_DIR"] = str(d)
    try:
        out = subprocess.run([exe, str(iterations)], env=env, capture_output=True, text=True, check=True,
                             timeout=300)
        events = sum(f.stat().st_size for f in d.glob("trace-*.bin"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {name: float(ns) for name, ns in (line.split() for line in out.stdout.splitlines())}, events


def main() -> int:
    from ceiling import core
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20000)
    a = ap.parse_args()
    lib = core.interpose_library_path()
    if not Path(lib).is_file():
        sys.exit(f"trace_event_cost: no interposer at {lib}: build ceiling (make .venv/.installed)")
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(Path(tmp) / "interpose_overhead")
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", exe, str(HERE / "interpose_overhead.c")], check=True)
        per = {m: [] for m in MODES}
        sizes = []
        for _ in range(a.rounds):
            for m in MODES:
                r, size = run(exe, a.iterations, m, lib, tmp)
                per[m].append(r)
                if m == "traced":
                    if not size:
                        sys.exit("trace_event_cost: the traced run wrote no events")
                    sizes.append(size)
    print(f"{'call':<22} {'counting ns':>12} {'traced ns':>10} {'added ns (median)':>18} {'spread':>16}")
    medians = []
    for name in per["counting"][0]:
        c = [r[name] for r in per["counting"]]
        t = [r[name] for r in per["traced"]]
        d = [y - x for x, y in zip(c, t)]
        medians.append(statistics.median(d))
        print(f"{name:<22} {statistics.median(c):>12.1f} {statistics.median(t):>10.1f} {statistics.median(d):>18.1f} "
              f"{min(d):>7.1f} .. {max(d):<6.1f}")
    print(f"median over calls of the added ns per event: {statistics.median(medians):.1f} "
          f"({a.rounds} rounds, {a.iterations} iterations; event files {statistics.median(sizes) / 1e6:.1f} MB a run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
