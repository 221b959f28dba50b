"""Side-by-side comparisons of ceiling's kernels with peer tools, in one run.

    python benchmarks/compare.py [--stream PATH] [--lat-mem-rd PATH] [--c2c PATH]

Runs each comparison script of this folder in turn (compute, memory, latency)
and prints their tables. Peers Debian ships (likwid-bench) are used when
installed; peers that must be built by hand are passed by path (see
benchmarks/README.md). A comparison whose peer is missing says so and is
skipped. These are not tests: they time things, on whatever machine runs them.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stream", help="reference stream.c binary (built with the array size it reports)")
    ap.add_argument("--lat-mem-rd", help="lmbench lat_mem_rd binary")
    ap.add_argument("--c2c", help="core-to-core-latency binary")
    ap.add_argument("--rounds", default="3", help="rounds per comparison (best of)")
    a = ap.parse_args()
    runs = [
        ["compute_vs_peers.py", "--rounds", a.rounds],
        ["memory_vs_peers.py", "--rounds", a.rounds] + (["--stream", a.stream] if a.stream else []),
        ["latency_vs_peers.py", "--rounds", a.rounds]
        + (["--lat-mem-rd", a.lat_mem_rd] if a.lat_mem_rd else []) + (["--c2c", a.c2c] if a.c2c else []),
    ]
    rc = 0
    for cmd in runs:
        print(f"\n=== {cmd[0]} ===", flush=True)
        r = subprocess.run([sys.executable, str(HERE / cmd[0]), *cmd[1:]])
        rc = rc or r.returncode
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
