"""Side-by-side memory bandwidth: ceiling's kernels against the reference
stream.c and likwid-bench, with the same array size and thread count.

    PYTHONPATH=src python benchmarks/memory_vs_peers.py --stream PATH/TO/stream \
        [--likwid-bench likwid-bench] [--threads N] [--rounds 5] [--cache]

The stream.c binary is built beforehand by whoever runs this (this script
never builds it), for example
    gcc -O3 -march=native -fopenmp -DSTREAM_ARRAY_SIZE=16777216 -DNTIMES=20 stream.c -o stream
Its array size and NTIMES are read from its output; every tool then runs on
arrays of that size. Tools alternate within each round and the best round of
each is reported, so a burst of other load hurts every tool alike.

What is compared with what:
  - stream.c Copy/Triad (best of NTIMES-1 repetitions, STREAM byte counting)
    against ours, best repetition, the same way.
  - likwid-bench `stream*` kernels (STREAM's 3-array triad a = b + s*c; its
    `triad*` kernels are a 4-array variant and are not used) and `copy*`,
    with -W N:<bytes of all arrays>:<threads>. likwid reports one rate for
    all its iterations together, so ours is compared by its mean rate
    (all bytes over all repetitions' time) as well as its best.
  - like with like: our scalar variant with likwid `stream`/`copy`, AVX2 with
    `stream_avx_fma`/`copy_avx`, AVX-512 with `stream_avx512_fma`/
    `copy_avx512`; non-temporal stores with the `_mem` kernels.

Bytes are counted as STREAM counts them (copy 16, triad 24 per element):
with ordinary stores the write-allocate read of each destination line is
real traffic that no tool counts, so kernels with non-temporal stores
report up to 4/3 (triad) or 3/2 (copy) more for the same memory bus.

Pinning: ours runs thread i on the i-th CPU this process may use; stream.c
gets the same list through OMP_PLACES; likwid-bench uses its domain N
(compact, physical cores first).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

from ceiling import core

# ours (isa, nt) -> likwid-bench test names for (triad, copy)
LIKWID = {
    ("scalar", False): ("stream", "copy"),
    ("avx2", False): ("stream_avx_fma", "copy_avx"),
    ("avx512", False): ("stream_avx512_fma", "copy_avx512"),
    ("scalar", True): ("stream_mem_sse", "copy_mem_sse"),
    ("avx2", True): ("stream_mem_avx_fma", "copy_mem_avx"),
    ("avx512", True): ("stream_mem_avx512_fma", "copy_mem_avx512"),
}
LOAD_LIKWID = {"scalar": "load", "avx2": "load_avx", "avx512": "load_avx512"}


def parse_stream(text: str) -> Tuple[int, int, Dict[str, float]]:
    """(array elements, NTIMES, {"Copy": GB/s, ...}) from stream.c's output."""
    m = re.search(r"Array size = (\d+)", text)
    t = re.search(r"each kernel will be executed (\d+) times", text, re.I)
    if not m or "Solution Validates" not in text:
        raise SystemExit("stream.c output not understood, or it did not validate:\n" + text)
    rates = {k: float(v) / 1000.0 for k, v in re.findall(r"^(Copy|Scale|Add|Triad):\s+([\d.]+)", text, re.M)}
    return int(m.group(1)), int(t.group(1)) if t else 10, rates


def run_stream(path: str, cpus: List[int]) -> Tuple[int, int, Dict[str, float]]:
    env = dict(os.environ, OMP_NUM_THREADS=str(len(cpus)), OMP_PROC_BIND="close",
               OMP_PLACES=",".join(f"{{{c}}}" for c in cpus))
    out = subprocess.run([path], env=env, capture_output=True, text=True, check=True).stdout
    return parse_stream(out)


def run_likwid(path: str, test: str, total_bytes: int, threads: int, iters: int) -> Optional[float]:
    """GB/s likwid-bench reports for one run, or None if it could not run."""
    cmd = [path, "-t", test, "-W", f"N:{total_bytes}B:{threads}"]
    if iters:
        cmd += ["-i", str(iters)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"MByte/s:\s+([\d.]+)", p.stdout)
    return float(m.group(1)) / 1000.0 if p.returncode == 0 and m else None


def likwid_tests(path: str) -> set:
    p = subprocess.run([path, "-a"], capture_output=True, text=True)
    return {line.split(" - ")[0].strip() for line in p.stdout.splitlines() if " - " in line}


def run_ours(name: str, isa: str, elems: int, cpus: List[int], reps: int, flags: int,
             iters: int = 1) -> Tuple[float, float]:
    """(best, mean) GB/s of one of our kernels; raises if it did not validate."""
    k = core.find(name, isa)
    raw = core.run(k, elements=elems, iters=iters, reps=reps, warmup=1, nthreads=len(cpus), cpus=cpus,
                   flags=flags)
    if not raw.valid:
        raise SystemExit(f"{name} ({isa}) did not validate: {raw.msg}")
    work = raw.iters * k.bytes_per_iter * 1e-9
    return max(work / t for t in raw.times_s), len(raw.times_s) * work / sum(raw.times_s)


def keep(seen: Dict, key, value: Optional[float]) -> None:
    """Record one round's value; best and median over rounds are reported."""
    if value is not None:
        seen.setdefault(key, []).append(value)


def best_of(seen: Dict, key) -> Optional[float]:
    return max(seen[key]) if seen.get(key) else None


def median_of(seen: Dict, key) -> Optional[float]:
    vals = sorted(seen.get(key) or [])
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])


def table(rows: List[Tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


def ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.3f}" if a and b else "-"


def gbs(x: Optional[float]) -> str:
    return f"{x:.2f}" if x else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stream", help="path of a stream.c binary built with OpenMP")
    ap.add_argument("--elements", type=int, help="array elements when no stream.c binary is given")
    ap.add_argument("--likwid-bench", default=shutil.which("likwid-bench"),
                    help="likwid-bench binary (default: the one on PATH)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isa", action="append", help="our ISA variants to compare (default: all this CPU runs)")
    ap.add_argument("--cache", action="store_true",
                    help="also compare load and triad at working sets inside L1, L2 and L3 with likwid-bench")
    args = ap.parse_args(argv)

    cpus = sorted(os.sched_getaffinity(0))[:args.threads]
    if not args.stream and not args.elements:
        ap.error("give --stream (its array size is used) or --elements")
    isas = args.isa or [k.isa for k in core.variants("stream_triad") if k.isa in ("scalar", "avx2", "avx512")]
    lk = args.likwid_bench
    lk_tests = likwid_tests(lk) if lk else set()

    elems, ntimes = args.elements, 20
    if args.stream:
        elems, ntimes, _ = run_stream(args.stream, cpus)
    print(f"array: {elems} elements ({elems * 8 / 1e6:.1f} MB each), threads: {len(cpus)} on CPUs {cpus}, "
          f"{ntimes} repetitions, {args.rounds} rounds")

    best: Dict[Tuple[str, str], List[float]] = {}
    configs = [(isa, nt, hp) for isa in isas for nt in (False, True) for hp in (False, True)]
    for rnd in range(args.rounds):
        jobs = []
        if args.stream:
            jobs.append(("stream.c", None))
        for isa, nt, hp in configs:
            jobs.append(("ours", (isa, nt, hp)))
            if (isa, nt) in LIKWID and hp is False:
                jobs.append(("likwid", (isa, nt)))
        shift = rnd % len(jobs)
        for tool, cfg in jobs[shift:] + jobs[:shift]:
            if tool == "stream.c":
                _, _, r = run_stream(args.stream, cpus)
                keep(best, ("stream.c", "Triad"), r.get("Triad"))
                keep(best, ("stream.c", "Copy"), r.get("Copy"))
            elif tool == "ours":
                isa, nt, hp = cfg
                flags = (core.F_NT_STORES if nt else 0) | (core.F_HUGEPAGES if hp else 0)
                for kern, name in (("Triad", "stream_triad"), ("Copy", "stream_copy")):
                    b, m = run_ours(name, isa, elems, cpus, ntimes, flags)
                    keep(best, (f"ours {isa}{' nt' if nt else ''}{' thp' if hp else ''}", kern), b)
                    keep(best, (f"ours {isa}{' nt' if nt else ''}{' thp' if hp else ''} mean", kern), m)
            else:
                triad, copy = LIKWID[cfg]
                for kern, test, arrays in (("Triad", triad, 3), ("Copy", copy, 2)):
                    if test in lk_tests:
                        keep(best, (f"likwid {test}", kern),
                             run_likwid(lk, test, arrays * elems * 8, len(cpus), ntimes))
        print(f"round {rnd + 1} done", file=sys.stderr)

    rows = [("kernel", "ours", "best", "mean", "median", "peer", "best", "median",
             "best/peer", "mean/peer", "median/peer")]
    for kern in ("Triad", "Copy"):
        for isa, nt, hp in configs:
            tag = f"ours {isa}{' nt' if nt else ''}{' thp' if hp else ''}"
            b, m = best_of(best, (tag, kern)), best_of(best, (tag + " mean", kern))
            med = median_of(best, (tag, kern))
            peers = []
            if args.stream and not nt:
                peers.append("stream.c")
            if (isa, nt) in LIKWID:
                peers.append(f"likwid {LIKWID[(isa, nt)][0 if kern == 'Triad' else 1]}")
            for peer in peers or ["-"]:
                pb, pmed = best_of(best, (peer, kern)), median_of(best, (peer, kern))
                rows.append((kern, tag[5:], gbs(b), gbs(m), gbs(med), peer, gbs(pb), gbs(pmed),
                             ratio(b, pb), ratio(m, pb), ratio(med, pmed)))
    print("GB/s, STREAM byte counting. best: best repetition of the best round; mean: all bytes over all")
    print("repetitions' time, best round (likwid's way of reporting); median: median over rounds of each")
    print("round's best repetition.")
    print(table(rows))

    if args.cache:
        cache_table(lk, lk_tests, isas, cpus, args.rounds)
    return 0


def cache_table(lk: Optional[str], lk_tests: set, isas: List[str], cpus: List[int], rounds: int) -> None:
    """Load and triad at working sets well inside each cache level, against likwid-bench."""
    from ceiling import machine
    from ceiling.bench.memory import level_working_sets
    m = machine.detect("/", measure=False)
    levels = {k: v for k, v in level_working_sets(m, cpus).items() if k != "dram"}
    best: Dict[Tuple, List[float]] = {}
    for _ in range(rounds):
        for level, ws in levels.items():
            for isa in isas:
                for name, arrays, peer in (("load_sum", 1, LOAD_LIKWID.get(isa)),
                                           ("stream_triad", 3, LIKWID[(isa, False)][0])):
                    k = core.find(name, isa)
                    elems = ws // (8 * arrays)
                    # about 20 ms a repetition, measured from one short run
                    probe = core.run(k, elements=elems, iters=64, reps=1, nthreads=len(cpus), cpus=cpus,
                                     flags=core.F_HUGEPAGES)
                    iters = max(1, int(64 * 0.02 / probe.times_s[0]))
                    b, mean = run_ours(name, isa, elems, cpus, 10, core.F_HUGEPAGES, iters)
                    keep(best, (level, isa, name, "best"), b)
                    keep(best, (level, isa, name, "mean"), mean)
                    # likwid reports one rate over all its iterations: give it the
                    # work of our ten repetitions, so both are exposed to other load alike
                    if lk and peer in lk_tests:
                        keep(best, (level, isa, name, "likwid"),
                             run_likwid(lk, peer, elems * 8 * arrays, len(cpus), 10 * iters))
    rows = [("level", "working set", "kernel", "isa", "ours best", "ours mean", "likwid", "GB/s", "mean/likwid")]
    for level, ws in levels.items():
        for isa in isas:
            for name, arrays, peer in (("load_sum", 1, LOAD_LIKWID.get(isa)),
                                       ("stream_triad", 3, LIKWID[(isa, False)][0])):
                g = lambda s: best_of(best, (level, isa, name, s))  # noqa: E731
                rows.append((level, str(ws), name, isa, gbs(g("best")), gbs(g("mean")), peer or "-",
                             gbs(g("likwid")), ratio(g("mean"), g("likwid"))))
    print()
    print(table(rows))


if __name__ == "__main__":
    sys.exit(main())
