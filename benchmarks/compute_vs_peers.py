"""Peak flop/s and DGEMM: ceiling's kernels beside likwid-bench and plain numpy, in one run.

    python benchmarks/compute_vs_peers.py [--likwid-bench PATH] [--rounds N] [--threads 1,2]
        [--seconds S] [--no-dgemm] [--dgemm-n N]

Peak FMA: ceiling's peak_fma_dp/sp against likwid-bench's peakflops_avx_fma,
peakflops_sp_avx_fma (and the _avx512_ ones where the CPU runs AVX-512), same
ISA, same thread count, threads on the first CPUs of this process's affinity.
DGEMM: numpy.matmul timed plainly against ceiling's bench_dgemm path at the
same n and BLAS thread count. Each side runs --rounds times, interleaved,
best kept. The table gives ratios ours/peer, the clock measured with the
clock_add kernel, flop/cycle per core reached, and the theoretical peak when
ceiling's machine model can compute one.

likwid-bench is looked up as --likwid-bench, then $LIKWID_BENCH, then PATH.
Needs the C core (CEILING_CORE_LIB names a development build). Not a test: it
times things, on whatever machine runs it.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402

from ceiling import core  # noqa: E402
from ceiling.bench import compute  # noqa: E402

# (precision, ceiling ISA, likwid-bench test)
# Seconds of one timed run on each side (ours: one repetition after a warm-up).
RUN_S = 0.25

FMA_PAIRS = [
    ("dp", "avx2", "peakflops_avx_fma"),
    ("sp", "avx2", "peakflops_sp_avx_fma"),
    ("dp", "avx512", "peakflops_avx512_fma"),
    ("sp", "avx512", "peakflops_sp_avx512_fma"),
]


def machine_model():
    """ceiling's machine model with its measured clock, or None when not available."""
    try:
        from ceiling import machine
        return machine.detect("/", measure=True)
    except (ImportError, AttributeError) as e:
        print(f"(no machine model: {e}; theoretical peaks not shown)")
        return None


def theoretical_peak(m, precision, cores, isa):
    if m is None:
        return None, "no machine model"
    from ceiling.machine.peaks import flop_peak
    p = flop_peak(m, precision=precision, cores=cores, isa=isa)
    return p.value, p.provenance


def likwid_run(exe, test, threads, iters):
    """(Gflop/s, seconds) of one likwid-bench run, or (None, message) on failure."""
    size_kb = 16 * threads   # -W splits it among the threads: 16 kB each stays in L1
    cmd = [exe, "-t", test, "-W", f"N:{size_kb}kB:{threads}", "-i", str(iters)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    mf = re.search(r"MFlops/s:\s+([0-9.]+)", r.stdout)
    tm = re.search(r"Time:\s+([0-9.eE+-]+)", r.stdout)
    if r.returncode != 0 or not mf or not tm:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        return None, f"{' '.join(cmd)} -> rc {r.returncode}: {' | '.join(tail)}"
    return float(mf.group(1)) / 1000.0, float(tm.group(1))


def likwid_iters(exe, test, threads, seconds):
    """likwid-bench iterations for a run of about ``seconds`` (its -s rounds to whole seconds)."""
    iters = 1000
    for _ in range(6):
        g, t = likwid_run(exe, test, threads, iters)
        if g is None:
            return None, t
        if t >= seconds / 4:
            return max(1, int(iters * seconds / t)), ""
        iters *= 8
    return iters, ""


def ours_gflops(kernel, threads, cpus, iters, reps=1):
    raw = core.run(kernel, iters=iters, reps=reps, warmup=1, nthreads=threads, cpus=cpus[:threads])
    if not raw.valid:
        raise SystemExit(f"{kernel.name} ({kernel.isa}) did not validate: {raw.msg}")
    return max(raw.iters * kernel.flops_per_iter / t * 1e-9 for t in raw.times_s)


def clock_ghz(cpus, threads):
    from ceiling.machine import clocks
    return clocks.measure_clock(cpus[:threads], single_cpus=cpus[:1])["measured_all_ghz"]


def numpy_matmul_gflops(n, threads, reps, limits):
    """numpy.matmul as a user calls it (new output array each time)."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n))
    with limits(limits=threads, user_api="blas"):
        np.matmul(a, b)
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            np.matmul(a, b)
            best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best * 1e-9


def fmt(v, spec=".1f"):
    return "n/a" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--likwid-bench", default=os.environ.get("LIKWID_BENCH") or shutil.which("likwid-bench"),
                    help="likwid-bench binary (default: $LIKWID_BENCH, then PATH)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per comparison, best kept")
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: 1 and all)")
    ap.add_argument("--seconds", type=float, default=RUN_S,
                    help="length of one timed run on each side; short runs dodge other load better")
    ap.add_argument("--no-dgemm", action="store_true", help="peak FMA only")
    ap.add_argument("--dgemm-n", type=int, default=None, help="matrix order (default: a multiply >= 0.2 s)")
    a = ap.parse_args()

    cpus = sorted(os.sched_getaffinity(0))
    threads = [int(t) for t in a.threads.split(",")] if a.threads else sorted({1, len(cpus)})
    m = machine_model()

    print(f"\nPeak FMA flop/s (Gflop/s; {a.rounds} interleaved rounds of one ~{a.seconds} s run each side, best kept;")
    print("clock measured with clock_add in the same rounds, flop/cyc = ours / clock / threads)")
    hdr = (f"{'kernel':<22}{'thr':>4}{'ours':>9}{'likwid':>9}{'ours/peer':>10}{'GHz':>7}{'flop/cyc':>9}"
           f"{'peak':>9}{'ours/peak':>10}")
    print(hdr)
    print("-" * len(hdr))
    notes = []
    for prec, isa, test in FMA_PAIRS:
        if not core.isa_supported(isa):
            notes.append(f"{isa}: this CPU does not run it; {test} and peak_fma_{prec} ({isa}) skipped")
            continue
        k = core.find(f"peak_fma_{prec}", isa)
        iters = compute.calibrate_iters(k, cpus[:1], a.seconds / 2)
        for t in threads:
            ours, peer, ghz, why = 0.0, None, 0.0, ""
            l_iters = None
            if a.likwid_bench:
                l_iters, why = likwid_iters(a.likwid_bench, test, t, a.seconds)
            else:
                why = "likwid-bench not found"
            for _ in range(a.rounds):
                ghz = max(ghz, clock_ghz(cpus, t))
                ours = max(ours, ours_gflops(k, t, cpus, iters))
                if l_iters:
                    g, why = likwid_run(a.likwid_bench, test, t, l_iters)
                    if g is not None:
                        peer = max(peer or 0.0, g)
            if peer is None:
                notes.append(f"{test} x{t}: {why}")
            peak, prov = theoretical_peak(m, prec, t, isa)
            ratio = ours / peer if peer else None
            eff = ours / peak if peak else None
            print(f"{'peak_fma_' + prec + ' ' + isa:<22}{t:>4}{ours:>9.1f}{fmt(peer):>9}{fmt(ratio, '.3f'):>10}"
                  f"{ghz:>7.2f}{ours / (ghz * t):>9.2f}{fmt(peak):>9}{fmt(eff, '.1%'):>10}")
            if peak is not None:
                notes.append(f"peak {prec} {isa} x{t}: {prov}")

    print("\nDGEMM (Gflop/s, best of rounds; same BLAS, same n, same thread count)")
    blas, limits, _ = compute._blas_info()
    print(f"  BLAS: {blas}")
    if a.no_dgemm:
        print("  skipped (--no-dgemm)")
    elif limits is None:
        print("  threadpoolctl cannot control the BLAS: DGEMM comparison skipped")
    else:
        n = a.dgemm_n or compute.choose_dgemm_n(max(threads), compute.DGEMM_MIN_TIME_S, limits)
        hdr = f"{'n':>7}{'thr':>4}{'ours':>9}{'numpy':>9}{'ours/peer':>10}{'peak':>9}{'ours/peak':>10}{'residual':>11}"
        print(hdr)
        print("-" * len(hdr))
        for t in threads:
            ours, peer, err, bound = 0.0, 0.0, None, None
            for _ in range(a.rounds):
                vals, err, bound = compute.dgemm_run(n, t, reps=3, limits=limits)
                ours = max(ours, max(vals))
                peer = max(peer, numpy_matmul_gflops(n, t, 3, limits))
            peak, _ = theoretical_peak(m, "dp", t, None)
            eff = ours / peak if peak else None
            print(f"{n:>7}{t:>4}{ours:>9.1f}{peer:>9.1f}{ours / peer:>10.3f}{fmt(peak):>9}{fmt(eff, '.1%'):>10}"
                  f"{err:>11.1e}" + ("" if err <= bound else "  INVALID"))
    if notes:
        print("\nNotes:")
        for n_ in notes:
            print(f"  {n_}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
