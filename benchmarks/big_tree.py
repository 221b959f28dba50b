"""`ceiling machine` and `ceiling check` on synthetic nodes of many CPUs: seconds and
peak memory, as a user runs them (`--root DIR`, a new process each time).

No peer: the target is the issue's (11, item 6): under a few seconds and bounded
memory at 10,000 CPUs, both for a realistic node and for a flat tree where every
CPU list names all CPUs (the worst case for the parsers). The trees are written
under --dir (about 1.5 GB each at 10,000 CPUs: 300,000 small files) and kept for
the next run.

    PYTHONPATH=src .venv/bin/python benchmarks/big_tree.py [--cpus 10000] [--rounds 3] [--dir /tmp/ceiling-big]
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from big_tree import make_tree  # noqa: E402


def one(argv):
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ceiling", *argv], capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss    # the largest child so far
    if r.returncode not in (0, 1, 2):
        raise SystemExit(f"ceiling {' '.join(argv)}: exit {r.returncode}: {r.stderr[-500:]}")
    return wall, rss_kib


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/ceiling-big")
    a = ap.parse_args()
    print(f"{'tree':<10} {'verb':<8} {'median s':>9} {'min s':>7} {'max s':>7} {'max RSS MiB':>12}")
    for kind, flat in (("realistic", False), ("flat", True)):
        root = Path(a.dir) / f"{kind}-{a.cpus}"
        if not (root / "proc" / "cpuinfo").exists():
            print(f"writing {root} ...", file=sys.stderr, flush=True)
            make_tree(root, a.cpus, all_share=flat)
        for verb, argv in (("machine", ["machine", "--no-measure", "--root", str(root), "--json"]),
                           ("check", ["check", "--root", str(root), "--no-store", "--json"])):
            walls = []
            for _ in range(a.rounds):
                w, rss = one(argv)
                walls.append(w)
            print(f"{kind:<10} {verb:<8} {statistics.median(walls):9.2f} {min(walls):7.2f} {max(walls):7.2f} "
                  f"{rss / 1024:12.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
