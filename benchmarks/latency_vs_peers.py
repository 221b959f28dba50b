"""Side-by-side latency: ceiling's pointer chase against lmbench's lat_mem_rd,
and its core-to-core ping-pong against nviennot's core-to-core-latency.

    PYTHONPATH=src python benchmarks/latency_vs_peers.py --lat-mem-rd PATH --c2c PATH \
        [--sizes-kib 16,256,16384,262144,1048576] [--cpu N] [--pair A,B] [--rounds 3]

The peers are built beforehand by whoever runs this (this script never builds
them); their paths come from the options or from $LAT_MEM_RD and $C2C_LATENCY.
A peer that is not given is skipped. Tools alternate within each round and the
best round of each is reported, so a burst of other load hurts both alike.

What is compared with what:
  - lat_mem_rd -P 1 -t -N REPS MAX_MB 64, pinned to --cpu. `-t` is its random
    mode ("thrash": pages in random order, a different page on every load);
    its default is a sequential stride walk that the prefetchers follow, which
    is not a latency. It reports the minimum over its repetitions, in ns per
    load, for every range from 512 B up to MAX_MB; the rows at our sizes are
    read from that one sweep. It allocates with malloc, so on a kernel whose
    transparent huge pages are "madvise" or "never" it runs on 4 KiB pages,
    and beyond the TLB's reach (a few MiB) each load also pays a page walk.
    Like with like is therefore ours on 4 KiB pages (flags 0, which advises
    the kernel against huge pages), best repetition. Ours on huge pages,
    the figure `ceiling bench latency` reports, is printed beside it.
    lmbench's timing calibration is slow and unstable on a busy machine;
    unless they are already set, ENOUGH=20000 (us per timing interval, the
    middle of the 5-100 ms it would choose), TIMING_O=0 and LOOP_O=0 are
    passed to it, which only affect how long it runs and an overhead of well
    under 0.1% at these interval lengths.
  - core-to-core-latency ROUND_TRIPS SAMPLES --cores A,B --bench 1 --csv:
    CAS on one shared cache line, one-way = round trip / 2, the mean over
    samples. Ours is the same design (csrc/kernels/c2c.c) with the same round
    trips and repetitions; its mean over repetitions is compared (its median,
    what `ceiling bench cores` reports, is printed beside it).

The verdict uses the median over rounds of each round's ratio (ours / peer,
measured minutes apart at most), which follows the machine's slow swings in
load better than comparing each tool's best round; the best rounds are
printed too.

Targets: DRAM latency within 5% of lmbench's, core-to-core within 10%.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

from ceiling import core

KIB, MIB = 1 << 10, 1 << 20
STRIDE = 64
DRAM_TARGET, C2C_TARGET = 0.05, 0.10
LMBENCH_ENV = {"ENOUGH": "20000", "TIMING_O": "0", "LOOP_O": "0"}


# -- lmbench lat_mem_rd ----------------------------------------------------------

def parse_lat_mem_rd(text: str) -> Dict[int, float]:
    """{range in bytes: ns per load} from lat_mem_rd's output ("size_MB ns" lines)."""
    out: Dict[int, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        try:
            mb, ns = float(parts[0]), float(parts[1])
        except ValueError:
            continue
        out[int(round(mb * MIB))] = ns
    return out


def run_lat_mem_rd(path: str, max_bytes: int, cpu: int, reps: int) -> Dict[int, float]:
    env = dict(os.environ)
    for k, v in LMBENCH_ENV.items():
        env.setdefault(k, v)
    max_mb = max(1, -(-max_bytes // MIB))
    cmd = [path, "-P", "1", "-t", "-N", str(reps), str(max_mb), str(STRIDE)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    res = parse_lat_mem_rd(r.stderr + "\n" + r.stdout)
    if not res:
        raise SystemExit(f"lat_mem_rd output not understood:\n{r.stderr[-2000:]}")
    return res


def nearest(res: Dict[int, float], size: int) -> Tuple[int, float]:
    key = min(res, key=lambda k: abs(k - size))
    return key, res[key]


# -- ours: the chase ------------------------------------------------------------

def run_chase(size: int, cpu: int, huge: bool, reps: int, guess_ns: float) -> Tuple[float, bool]:
    """(best ns per load, huge pages obtained); repetitions of about lat_mem_rd's ENOUGH."""
    k = core.find("chase")
    iters = max(1 << 14, int(0.02 / (guess_ns * 1e-9)))
    raw = core.run(k, ws_bytes=size, iters=iters, reps=reps, warmup=1, cpus=[cpu], stride=STRIDE,
                   flags=core.F_HUGEPAGES if huge else 0)
    if not raw.valid:
        raise SystemExit(f"chase at {size} bytes did not validate: {raw.msg}")
    return min(raw.times_s) / raw.iters * 1e9, raw.hugepages


# -- core-to-core -----------------------------------------------------------------

def run_c2c_peer(path: str, a: int, b: int, round_trips: int, samples: int) -> float:
    """Mean one-way latency (ns) core-to-core-latency reports for the pair."""
    cmd = [path, str(round_trips), str(samples), "--cores", f"{a},{b}", "--bench", "1", "--csv"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    vals = [float(x) for line in r.stdout.splitlines() for x in line.split(",") if x.strip()]
    if len(vals) != 1:
        raise SystemExit(f"core-to-core-latency CSV not understood:\n{r.stdout}")
    return vals[0]


def run_c2c_ours(a: int, b: int, round_trips: int, samples: int) -> Tuple[float, float, float]:
    """(mean, median, min) one-way latency in ns over the repetitions."""
    k = core.find("c2c_pingpong")
    raw = core.run(k, iters=round_trips, reps=samples, warmup=1, nthreads=2, cpus=[a, b])
    if not raw.valid:
        raise SystemExit(f"c2c_pingpong did not validate: {raw.msg}")
    vals = [t / (2 * raw.iters) * 1e9 for t in raw.times_s]
    return statistics.fmean(vals), statistics.median(vals), min(vals)


# -- table ------------------------------------------------------------------------

def size_label(b: int) -> str:
    return f"{b // MIB} MiB" if b >= MIB else f"{b // KIB} KiB"


def verdict(ratio: Optional[float], target: Optional[float]) -> str:
    if ratio is None or target is None:
        return ""
    return "ok" if abs(ratio - 1) <= target else f"outside ±{target:.0%}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lat-mem-rd", default=os.environ.get("LAT_MEM_RD"), help="lmbench lat_mem_rd binary")
    ap.add_argument("--c2c", default=os.environ.get("C2C_LATENCY"), help="core-to-core-latency binary")
    ap.add_argument("--sizes-kib", default="16,256,16384,262144,1048576",
                    help="working sets to compare, KiB (the largest is lat_mem_rd's sweep limit)")
    ap.add_argument("--dram-kib", default="262144,1048576", help="sizes held to the DRAM target")
    ap.add_argument("--cpu", type=int, default=None, help="CPU for the chase (default: first allowed)")
    ap.add_argument("--pair", default=None, help="CPU pair A,B for core-to-core (default: first two allowed)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per measurement")
    ap.add_argument("--round-trips", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=300, help="core-to-core repetitions (its default: 300)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, tools alternating")
    a = ap.parse_args()

    allowed = sorted(os.sched_getaffinity(0))
    cpu = a.cpu if a.cpu is not None else allowed[0]
    sizes = sorted(int(s) * KIB for s in a.sizes_kib.split(","))
    dram = {int(s) * KIB for s in a.dram_kib.split(",")}
    rows: List[Tuple[str, str, Optional[float], Optional[float], str, str]] = []

    if a.lat_mem_rd:
        lm: Dict[int, List[float]] = {s: [] for s in sizes}
        ours4k: Dict[int, List[float]] = {s: [] for s in sizes}
        ourshp: Dict[int, List[Tuple[float, bool]]] = {s: [] for s in sizes}
        for rnd in range(a.rounds):
            print(f"round {rnd + 1}/{a.rounds}: lat_mem_rd -t up to {size_label(sizes[-1])} ...", file=sys.stderr,
                  flush=True)
            res = run_lat_mem_rd(a.lat_mem_rd, sizes[-1], cpu, a.reps)
            print(f"round {rnd + 1}/{a.rounds}: ours ...", file=sys.stderr, flush=True)
            guess = 1.0
            for s in sizes:
                lm[s].append(nearest(res, s)[1])
                ns, _ = run_chase(s, cpu, False, a.reps, guess)
                ours4k[s].append(ns)
                ourshp[s].append(run_chase(s, cpu, True, a.reps, guess))
                guess = min(ns, ourshp[s][-1][0])
        for s in sizes:
            per_round = [o / p for o, p in zip(ours4k[s], lm[s])]
            print(f"{size_label(s)}: per-round ours/peer {' '.join(f'{r:.3f}' for r in per_round)} "
                  f"(peer {' '.join(f'{p:.1f}' for p in lm[s])} ns; ours {' '.join(f'{o:.1f}' for o in ours4k[s])} ns)",
                  file=sys.stderr)
            ratio = statistics.median(per_round)
            rows.append((f"chase {size_label(s)}, 4 KiB pages", "lmbench lat_mem_rd -t", min(lm[s]),
                         min(ours4k[s]), f"{ratio:.3f}", verdict(ratio, DRAM_TARGET if s in dram else None)))
            got = all(g for _, g in ourshp[s])
            rows.append((f"  same, huge pages ({'obtained' if got else 'NOT always obtained'})", "", None,
                         min(v for v, _ in ourshp[s]), "", ""))
    else:
        print("lat_mem_rd not given (--lat-mem-rd or $LAT_MEM_RD): memory latency comparison skipped",
              file=sys.stderr)

    if a.c2c:
        if a.pair:
            pa, pb = (int(x) for x in a.pair.split(","))
        elif len(allowed) >= 2:
            pa, pb = allowed[0], allowed[1]
        else:
            pa = pb = None
        if pa is None:
            print("core-to-core: fewer than two CPUs allowed, skipped", file=sys.stderr)
        else:
            peers: List[float] = []
            ours: List[Tuple[float, float, float]] = []
            for rnd in range(a.rounds):
                print(f"round {rnd + 1}/{a.rounds}: core-to-core {pa},{pb} ...", file=sys.stderr, flush=True)
                peers.append(run_c2c_peer(a.c2c, pa, pb, a.round_trips, a.samples))
                ours.append(run_c2c_ours(pa, pb, a.round_trips, a.samples))
            ratio = statistics.median(o[0] / p for o, p in zip(ours, peers))
            rows.append((f"c2c {pa}<->{pb} one-way, mean", "core-to-core-latency", min(peers),
                         min(o[0] for o in ours), f"{ratio:.3f}", verdict(ratio, C2C_TARGET)))
            rows.append(("  same, median / min of ours", "", None, min(o[1] for o in ours),
                         f"min {min(o[2] for o in ours):.1f}", ""))
    else:
        print("core-to-core-latency not given (--c2c or $C2C_LATENCY): comparison skipped", file=sys.stderr)

    if rows:
        print(f"{'measurement':<40} {'peer':<24} {'peer ns':>9} {'ours ns':>9} {'ours/peer':>10}  verdict")
        for name, peer_name, pv, ov, ratio, v in rows:
            print(f"{name:<40} {peer_name:<24} {'' if pv is None else f'{pv:.2f}':>9} "
                  f"{'' if ov is None else f'{ov:.2f}':>9} {ratio:>10}  {v}")
        print(f"(CPU {cpu} for the chase; ns columns: best of {a.rounds} round(s); ours/peer: median over "
              f"rounds of each round's ratio; lat_mem_rd reports its minimum over {a.reps} repetitions, "
              f"ours the best of {a.reps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
