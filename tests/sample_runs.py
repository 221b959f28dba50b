"""Realistic Run objects for report and analysis tests; nothing here measures.

- ``vm_run()``: a 2-vCPU AMD Zen 3 KVM guest (like the CI machine): no cpufreq,
  one NUMA domain, memory channels unknown, so the STREAM peak is unknown;
  DGEMM is the metric furthest below its peak.
- ``epyc_run()``: a 2-socket AMD EPYC 7763 node, 128 cores (SMT off), NPS4
  (8 NUMA nodes), every peak known, every series present, and a 128×128
  core-to-core matrix with every pair measured (the diagonal, a CPU with
  itself, is not a pair and is None); STREAM triad is furthest below peak.
- ``sampled_run()``: the same node with SMT on (256 CPUs) and a sampled
  256×256 core-to-core matrix with None holes.
- ``bare_run()``: an Arm login node whose peaks are all unknown, no series,
  interrupted (partial).
- ``multinode_run()``: tests/golden/run_v2.json, a two-node MPI job (cn101,
  cn102) with a traced application and a stored analysis (verdict, roofline,
  bounds, uniformity); not in ALL, whose runs are one node each.

Values are made up but physically consistent (rates below their peaks,
latencies ordered by level), and seeded so every call returns the same run.
"""
from __future__ import annotations

import dataclasses

import random
from typing import List, Optional

from ceiling.machine.model import Cache, Clocks, Cpu, Machine, NumaNode
from ceiling.results.model import (FAIL, HIGHER, LOWER, OK, SKIPPED, WARN, Finding, Metric,
                                   Peak, Run, Series)

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def _values(best: float, n: int, spread: float, better: str, rng: random.Random) -> List[float]:
    """n repetitions whose best is exactly ``best``, the others up to ``spread`` worse."""
    worse = [best * (1 - rng.uniform(0, spread)) if better == HIGHER else best * (1 + rng.uniform(0, spread))
             for _ in range(n - 1)]
    return [best] + worse


def _m(rng, name, best, unit, better=HIGHER, peak=None, n=10, spread=0.02, note="", **context):
    m = Metric.measured(name, _values(best, n, spread, better, rng), unit, better, peak=peak,
                        context=context)
    m.note = note
    return m


def _staircase(sizes, levels, rng, noise=0.01):
    """y for each working-set size: smooth steps between (capacity, value) levels."""
    ys = []
    for s in sizes:
        y = levels[-1][1]
        for i, (cap, val) in enumerate(levels[:-1]):
            if s <= cap:
                y = val
                break
            nxt_cap, nxt_val = levels[i + 1]
            if s <= 2 * cap:       # the transition: half in, half out of this level
                f = (s - cap) / cap
                y = val + (nxt_val - val) * f
                break
        ys.append(y * (1 + rng.uniform(-noise, noise)))
    return ys


# -- a 2-vCPU Zen 3 KVM guest ----------------------------------------------------

def _vm_machine() -> Machine:
    all_ghz = 3.21
    dp_core = Peak(all_ghz * 16, "Gflop/s",
                   "1 core × 3.21 GHz (measured, all cores busy) × 16 DP flop/cycle (2 × 256-bit FMA pipes)")
    dp_node = Peak(2 * all_ghz * 16, "Gflop/s",
                   "2 cores × 3.21 GHz (measured, all cores busy) × 16 DP flop/cycle (2 × 256-bit FMA pipes)")
    no_dimms = "memory channels and DIMM speed unknown: dmidecode needs root, and a KVM guest shows no DIMMs"
    return Machine(
        hostname="ci-runner-7", arch="x86_64", vendor="AuthenticAMD",
        model_name="AMD EPYC 7763 64-Core Processor", family=25, model=1, stepping=1,
        microarch="zen3", virtualized="KVM", sockets=1, cores=2, threads=2, smt=1,
        cpus=[Cpu(i, i, 0, 0, 0, i, 0) for i in range(2)],
        nodes=[NumaNode(0, [0, 1], 24 * GiB, [10])],
        caches=[Cache(1, "data", 32 * KiB, 64, 2, 1), Cache(1, "instruction", 32 * KiB, 64, 2, 1),
                Cache(2, "unified", 512 * KiB, 64, 2, 1), Cache(3, "unified", 32 * MiB, 64, 1, 2)],
        isa=["sse2", "sse4_2", "avx", "avx2", "fma", "bmi2"], vector_bits=256, fma_units=2,
        fma_width_bits=256,
        clocks=Clocks(measured_single_ghz=3.24, measured_all_ghz=all_ghz,
                      measured_method="dependent add chain, 1 add/cycle"),
        mem_total_bytes=24 * GiB, affinity=[0, 1],
        peaks={"flops.dp.core": dp_core, "flops.dp.node": dp_node,
               "flops.sp.core": Peak(dp_core.value * 2, "Gflop/s", dp_core.provenance.replace("16 DP", "32 SP")),
               "flops.sp.node": Peak(dp_node.value * 2, "Gflop/s", dp_node.provenance.replace("16 DP", "32 SP")),
               "membw.node": Peak(None, "GB/s", no_dimms)},
        unknowns={"clocks.base_ghz": "no cpufreq in this VM", "clocks.max_ghz": "no cpufreq in this VM",
                  "memory_channels": no_dimms, "memory_mts": no_dimms},
        sources={"caches": "/sys/devices/system/cpu/cpu*/cache"},
    )


def vm_run() -> Run:
    rng = random.Random(7)
    mach = _vm_machine()
    pk = mach.peaks
    sse2 = Peak(2 * 3.21 * 8, "Gflop/s",
                "2 cores × 3.21 GHz (measured, all cores busy) × 8 DP flop/cycle (2 × 128-bit FMA pipes)")
    scalar = Peak(2 * 3.21 * 4, "Gflop/s",
                  "2 cores × 3.21 GHz (measured, all cores busy) × 4 DP flop/cycle (2 scalar FMA pipes)")
    unknown_bw = pk["membw.node"]
    metrics = [
        _m(rng, "clock.single", 3.24, "GHz", n=5, spread=0.005, threads=1),
        _m(rng, "clock.all", 3.21, "GHz", n=5, spread=0.005, threads=2),
        _m(rng, "flops.dp.core", 50.9, "Gflop/s", peak=pk["flops.dp.core"], threads=1, isa="avx2"),
        _m(rng, "flops.sp.core", 101.5, "Gflop/s", peak=pk["flops.sp.core"], threads=1, isa="avx2"),
        _m(rng, "flops.dp.node", 100.8, "Gflop/s", peak=pk["flops.dp.node"], threads=2, isa="avx2"),
        _m(rng, "flops.dp.node.sse2", 50.2, "Gflop/s", peak=sse2, threads=2, isa="sse2"),
        _m(rng, "flops.dp.node.scalar", 19.9, "Gflop/s", peak=scalar, threads=2, isa="scalar"),
        _m(rng, "flops.sp.node", 201.0, "Gflop/s", peak=pk["flops.sp.node"], threads=2, isa="avx2"),
        _m(rng, "dgemm.node", 88.9, "Gflop/s", peak=pk["flops.dp.node"], n=5, threads=2, n_matrix=4096),
        _m(rng, "stream.copy", 21.3, "GB/s", peak=unknown_bw, threads=2, array_bytes=256 * MiB),
        _m(rng, "stream.scale", 21.0, "GB/s", peak=unknown_bw, threads=2, array_bytes=256 * MiB),
        _m(rng, "stream.add", 23.4, "GB/s", peak=unknown_bw, threads=2, array_bytes=256 * MiB),
        _m(rng, "stream.triad", 23.6, "GB/s", peak=unknown_bw, spread=0.12, threads=2,
           array_bytes=256 * MiB),
        _m(rng, "bandwidth.l1", 409.0, "GB/s", threads=2, size_bytes=16 * KiB),
        _m(rng, "bandwidth.l2", 196.0, "GB/s", threads=2, size_bytes=256 * KiB),
        _m(rng, "bandwidth.l3", 121.0, "GB/s", threads=2, size_bytes=8 * MiB),
        _m(rng, "bandwidth.dram", 25.1, "GB/s", threads=2, size_bytes=1 * GiB),
        _m(rng, "latency.l1", 1.24, "ns", LOWER, threads=1, cycles=4.0, size_bytes=16 * KiB),
        _m(rng, "latency.l2", 3.71, "ns", LOWER, threads=1, cycles=12.0, size_bytes=256 * KiB),
        _m(rng, "latency.l3", 14.2, "ns", LOWER, threads=1, cycles=46.0, size_bytes=8 * MiB),
        _m(rng, "latency.dram", 96.4, "ns", LOWER, threads=1, cycles=312.0, size_bytes=1 * GiB),
        _m(rng, "c2c.l3", 42.5, "ns", LOWER, threads=2, cpus=[0, 1]),
    ]
    triad = next(m for m in metrics if m.name == "stream.triad")
    # a spread above CV_WARN, with the note runs stored before 2026-11 carried on the metric itself
    triad.stats = dataclasses.replace(triad.stats, cv=0.061)
    triad.note = "spread 6% (CV) is high: other load or frequency changes; rerun on an idle node"
    sizes = [2 ** k for k in range(12, 31)]
    series = [
        Series("stream.triad.threads", "xy", "STREAM triad vs threads", "threads", "", "bandwidth", "GB/s",
               x=[1, 2], y=[19.8, 23.6], context={"placement": "compact"}),
        Series("dgemm.threads", "xy", "DGEMM vs threads", "threads", "", "rate", "Gflop/s",
               x=[1, 2], y=[45.1, 88.9]),
        Series("bandwidth.load.size", "xy", "Load bandwidth vs working set", "working set", "B",
               "bandwidth", "GB/s", x=sizes,
               y=_staircase(sizes, [(64 * KiB, 409.0), (1 * MiB, 196.0), (32 * MiB, 121.0), (0, 25.1)], rng),
               context={"threads": 2}),
        Series("bandwidth.triad.size", "xy", "Triad bandwidth vs working set", "working set", "B",
               "bandwidth", "GB/s", x=sizes,
               y=_staircase(sizes, [(64 * KiB, 266.0), (1 * MiB, 151.0), (32 * MiB, 88.0), (0, 23.6)], rng),
               context={"threads": 2}),
        Series("latency.size", "xy", "Load-to-use latency vs working set", "working set", "B",
               "latency", "ns", x=sizes,
               y=_staircase(sizes, [(32 * KiB, 1.24), (512 * KiB, 3.71), (32 * MiB, 14.2), (0, 96.4)], rng),
               context={"threads": 1, "pattern": "random pointer chase"}),
        Series("c2c.matrix", "matrix", "Core-to-core latency", "to CPU", "", "from CPU", "ns",
               labels=["0", "1"], matrix=[[None, 42.5], [43.1, None]], context={"unit": "ns"}),
    ]
    findings = [
        Finding("cpu.isa", OK, "AVX2 and FMA are available", evidence="cpuid: avx2 fma; no avx512f"),
        Finding("cpu.governor", SKIPPED, "CPU frequency governor not checked",
                evidence="/sys/devices/system/cpu/cpu0/cpufreq does not exist",
                why="A VM has no cpufreq interface; the host decides the clock."),
        Finding("node.virtualized", WARN, "Running in a KVM virtual machine",
                evidence="cpuid hypervisor bit set; vendor KVMKVMKVM",
                why="vCPUs may share physical cores with other guests; timings vary and peaks are per vCPU.",
                fix="Benchmark on bare metal for figures that describe the hardware."),
        Finding("load.competing", WARN, "Other processes used CPU time during the run",
                evidence="0.9 CPUs busy outside ceiling on average (from /proc/stat before and after)",
                why="Competing load steals cycles and memory bandwidth, lowering every rate.",
                fix="Rerun on an idle node, or inside an exclusive job allocation."),
        Finding("mem.thp", FAIL, "Transparent huge pages are disabled",
                evidence="/sys/kernel/mm/transparent_hugepage/enabled: always madvise [never]",
                why="4 KiB pages make large arrays miss the TLB, costing memory bandwidth and latency.",
                fix="echo madvise > /sys/kernel/mm/transparent_hugepage/enabled", needs_root=True),
    ]
    return Run(tool_version="0.1.0", host=mach.hostname, started="2024-05-02T09:14:03Z",
               finished="2024-05-02T09:15:41Z", command=["ceiling", "run", "--quick"],
               run_id="3f2a9c1e", machine=mach.to_dict(),
               environment={"OMP_NUM_THREADS": None, "threads": 2, "placement": "compact", "affinity": [0, 1]},
               metrics=metrics, findings=findings, series=series)


# -- a 2-socket EPYC 7763 node -----------------------------------------------------

def _epyc_machine(smt: bool) -> Machine:
    cores, per_node, per_ccx = 128, 16, 8
    threads = cores * (2 if smt else 1)
    cpus = []
    for i in range(threads):
        core = i % cores
        cpus.append(Cpu(i, core, core // 64, core // per_node, i // cores, core, core // per_ccx))
    nodes = []
    for n in range(8):
        ids = [c.id for c in cpus if c.node == n]
        dist = [10 if m == n else (12 if m // 4 == n // 4 else 32) for m in range(8)]
        nodes.append(NumaNode(n, ids, 64 * GiB, dist))
    all_ghz, single_ghz = 2.80, 3.49
    t = 2 if smt else 1
    return Machine(
        hostname="cn0421.hpc.example.org", arch="x86_64", vendor="AuthenticAMD",
        model_name="AMD EPYC 7763 64-Core Processor", family=25, model=1, stepping=1, microarch="zen3",
        sockets=2, cores=cores, threads=threads, smt=t, cpus=cpus, nodes=nodes,
        caches=[Cache(1, "data", 32 * KiB, 64, 128, t), Cache(1, "instruction", 32 * KiB, 64, 128, t),
                Cache(2, "unified", 512 * KiB, 64, 128, t), Cache(3, "unified", 32 * MiB, 64, 16, 8 * t)],
        isa=["sse2", "sse4_2", "avx", "avx2", "fma", "bmi2", "sha_ni", "vaes", "vpclmulqdq"],
        vector_bits=256, fma_units=2, fma_width_bits=256,
        clocks=Clocks(base_ghz=2.45, base_source="cpufreq base_frequency",
                      max_ghz=3.53, max_source="cpufreq cpuinfo_max_freq",
                      current_ghz=2.45, current_source="cpufreq scaling_cur_freq",
                      measured_single_ghz=single_ghz, measured_all_ghz=all_ghz,
                      measured_method="dependent add chain, 1 add/cycle"),
        mem_total_bytes=512 * GiB, memory_channels=8, memory_mts=3200,
        dimms=[{"locator": f"P{s}_DIMM_{c}", "size_gib": 32, "speed_mts": 3200}
               for s in range(2) for c in "ABCDEFGH"],
        affinity=list(range(threads)),
        peaks={
            "flops.dp.core": Peak(single_ghz * 16, "Gflop/s",
                                  "1 core × 3.49 GHz (measured, one core busy) × 16 DP flop/cycle (2 × 256-bit FMA "
                                  "pipes)"),
            "flops.sp.core": Peak(single_ghz * 32, "Gflop/s",
                                  "1 core × 3.49 GHz (measured, one core busy) × 32 SP flop/cycle (2 × 256-bit FMA "
                                  "pipes)"),
            "flops.dp.node": Peak(cores * all_ghz * 16, "Gflop/s",
                                  "128 cores × 2.80 GHz (measured, all cores busy) × 16 DP flop/cycle (2 × 256-bit FMA "
                                  "pipes)"),
            "flops.sp.node": Peak(cores * all_ghz * 32, "Gflop/s",
                                  "128 cores × 2.80 GHz (measured, all cores busy) × 32 SP flop/cycle (2 × 256-bit FMA "
                                  "pipes)"),
            "flops.dp.domain": Peak(16 * all_ghz * 16, "Gflop/s",
                                    "16 cores × 2.80 GHz (measured, all cores busy) × 16 DP flop/cycle"),
            "membw.domain": Peak(51.2, "GB/s", "2 channels × 3200 MT/s × 8 B"),
            "membw.node": Peak(409.6, "GB/s", "2 sockets × 8 channels × 3200 MT/s × 8 B"),
        },
        sources={"memory_mts": "dmidecode -t 17 (Configured Memory Speed)"},
    )


def _c2c_value(a, b, rng) -> float:
    """One-way latency between two Cpu records of the EPYC machine."""
    if a.core == b.core:
        base = 7.5
    elif a.l3 == b.l3:
        base = 22.0
    elif a.socket == b.socket:
        base = 88.0 + 6.0 * abs(a.node - b.node)
    else:
        base = 182.0
    return round(base * (1 + rng.uniform(-0.06, 0.06)), 1)


def _epyc_metrics(rng, mach: Machine, smt: bool) -> List[Metric]:
    pk = mach.peaks
    threads = mach.threads
    metrics = [
        _m(rng, "clock.single", 3.49, "GHz", n=5, spread=0.005, threads=1),
        _m(rng, "clock.all", 2.80, "GHz", n=5, spread=0.005, threads=threads),
        _m(rng, "flops.dp.core", 55.1, "Gflop/s", peak=pk["flops.dp.core"], threads=1, isa="avx2"),
        _m(rng, "flops.dp.node", 5570.0, "Gflop/s", peak=pk["flops.dp.node"], threads=threads, isa="avx2"),
        _m(rng, "flops.sp.node", 11130.0, "Gflop/s", peak=pk["flops.sp.node"], threads=threads, isa="avx2"),
        _m(rng, "dgemm.node", 4420.0, "Gflop/s", peak=pk["flops.dp.node"], n=5, threads=threads,
           n_matrix=16384),
        _m(rng, "stream.copy", 270.0, "GB/s", peak=pk["membw.node"], threads=128, array_bytes=4 * GiB),
        _m(rng, "stream.scale", 268.0, "GB/s", peak=pk["membw.node"], threads=128, array_bytes=4 * GiB),
        _m(rng, "stream.add", 291.0, "GB/s", peak=pk["membw.node"], threads=128, array_bytes=4 * GiB),
        _m(rng, "stream.triad", 290.0, "GB/s", peak=pk["membw.node"], threads=128, array_bytes=4 * GiB),
        _m(rng, "bandwidth.l1", 21500.0, "GB/s", threads=128, size_bytes=16 * KiB),
        _m(rng, "bandwidth.l2", 6900.0, "GB/s", threads=128, size_bytes=256 * KiB),
        _m(rng, "bandwidth.l3", 3600.0, "GB/s", threads=128, size_bytes=2 * MiB),
        _m(rng, "bandwidth.dram", 352.0, "GB/s", threads=128, size_bytes=4 * GiB),
        _m(rng, "latency.l1", 1.15, "ns", LOWER, threads=1, cycles=4.0, size_bytes=16 * KiB),
        _m(rng, "latency.l2", 3.72, "ns", LOWER, threads=1, cycles=13.0, size_bytes=256 * KiB),
        _m(rng, "latency.l3", 12.3, "ns", LOWER, threads=1, cycles=43.0, size_bytes=8 * MiB),
        _m(rng, "latency.dram", 108.0, "ns", LOWER, threads=1, cycles=377.0, size_bytes=1 * GiB),
        _m(rng, "latency.numa_factor", 1.86, "×", LOWER, threads=1),
        _m(rng, "c2c.l3", 22.1, "ns", LOWER, threads=2),
        _m(rng, "c2c.socket", 94.0, "ns", LOWER, threads=2),
        _m(rng, "c2c.cross_socket", 183.0, "ns", LOWER, threads=2),
    ]
    if smt:
        metrics.append(_m(rng, "c2c.smt", 7.6, "ns", LOWER, threads=2))
    return metrics


def _epyc_series(rng, mach: Machine, matrix: List[List[Optional[float]]]) -> List[Series]:
    sizes = [2 ** k for k in range(12, 33)]
    thr = [1, 2, 4, 8, 16, 32, 64, 128]
    triad = [22.4, 44.1, 86.0, 150.2, 205.0, 262.0, 281.0, 290.0]
    dgemm = [51.0, 101.5, 201.0, 398.0, 770.0, 1490.0, 2710.0, 4420.0]
    node_lat = [[108.0 if r == c else (121.0 if r // 4 == c // 4 else 201.0) for c in range(8)] for r in range(8)]
    node_bw = [[41.5 if r == c else (36.0 if r // 4 == c // 4 else 19.2) for c in range(8)] for r in range(8)]
    labels = [str(c.id) for c in mach.cpus]
    return [
        Series("stream.triad.threads", "xy", "STREAM triad vs threads", "threads", "", "bandwidth", "GB/s",
               x=thr, y=triad, context={"placement": "scatter"}),
        Series("dgemm.threads", "xy", "DGEMM vs threads", "threads", "", "rate", "Gflop/s", x=thr, y=dgemm),
        Series("bandwidth.load.size", "xy", "Load bandwidth vs working set", "working set", "B",
               "bandwidth", "GB/s", x=sizes,
               y=_staircase(sizes, [(4 * MiB, 21500.0), (64 * MiB, 6900.0), (512 * MiB, 3600.0), (0, 352.0)], rng),
               context={"threads": 128}),
        Series("bandwidth.triad.size", "xy", "Triad bandwidth vs working set", "working set", "B",
               "bandwidth", "GB/s", x=sizes,
               y=_staircase(sizes, [(4 * MiB, 9800.0), (64 * MiB, 4100.0), (512 * MiB, 2300.0), (0, 290.0)], rng),
               context={"threads": 128}),
        Series("latency.size", "xy", "Load-to-use latency vs working set", "working set", "B",
               "latency", "ns", x=sizes,
               y=_staircase(sizes, [(32 * KiB, 1.15), (512 * KiB, 3.72), (32 * MiB, 12.3), (0, 108.0)], rng),
               context={"threads": 1}),
        Series("latency.numa", "matrix", "Memory latency by NUMA node", "memory node", "", "CPU node", "ns",
               labels=[str(n) for n in range(8)], matrix=node_lat, context={"unit": "ns"}),
        Series("stream.triad.numa", "matrix", "STREAM triad by NUMA node", "memory node", "", "CPU node",
               "GB/s", labels=[str(n) for n in range(8)], matrix=node_bw, context={"unit": "GB/s"}),
        Series("c2c.matrix", "matrix", "Core-to-core latency", "to CPU", "", "from CPU", "ns",
               labels=labels, matrix=matrix, context={"unit": "ns"}),
    ]


def _epyc_findings() -> List[Finding]:
    return [
        Finding("cpu.governor", OK, "CPU frequency governor is performance",
                evidence="scaling_governor: performance on 128 of 128 CPUs"),
        Finding("cpu.boost", OK, "Turbo boost is enabled", evidence="/sys/devices/system/cpu/cpufreq/boost: 1"),
        Finding("mem.population", OK, "All 16 memory channels are populated, one DIMM each",
                evidence="dmidecode -t 17: 16 × 32 GiB DDR4-3200"),
        Finding("numa.balancing", WARN, "Automatic NUMA balancing is on",
                evidence="/proc/sys/kernel/numa_balancing: 1",
                why="The kernel migrates pages while a job runs, which costs bandwidth and adds jitter.",
                fix="sysctl kernel.numa_balancing=0", needs_root=True),
        Finding("mem.swap", SKIPPED, "Swap activity not checked",
                evidence="vmstat counters unreadable in this container"),
    ]


def epyc_run() -> Run:
    rng = random.Random(42)
    mach = _epyc_machine(smt=False)
    cpus = mach.cpus
    matrix = [[None if a.id == b.id else _c2c_value(a, b, rng) for b in cpus] for a in cpus]
    return Run(tool_version="0.1.0", host=mach.hostname, started="2024-05-03T22:01:12Z",
               finished="2024-05-03T22:19:40Z", command=["ceiling", "run", "--out", "cn0421.html"],
               run_id="a41c07d2", machine=mach.to_dict(),
               environment={"OMP_NUM_THREADS": "128", "OMP_PROC_BIND": "close", "OMP_PLACES": "cores",
                            "threads": 128, "placement": "compact"},
               metrics=_epyc_metrics(rng, mach, smt=False), findings=_epyc_findings(),
               series=_epyc_series(rng, mach, matrix))


def sampled_run() -> Run:
    rng = random.Random(5)
    mach = _epyc_machine(smt=True)
    cpus = mach.cpus
    matrix: List[List[Optional[float]]] = []
    for a in cpus:
        row = []
        for b in cpus:
            measured = a.id != b.id and (a.core == b.core or rng.random() < 0.2)
            row.append(_c2c_value(a, b, rng) if measured else None)
        matrix.append(row)
    run = Run(tool_version="0.1.0", host="cn0422.hpc.example.org", started="2024-05-04T08:00:00Z",
              finished="2024-05-04T08:21:09Z", command=["ceiling", "bench", "cores"], run_id="b77e0f13",
              machine=mach.to_dict(), metrics=_epyc_metrics(rng, mach, smt=True),
              findings=_epyc_findings(), series=_epyc_series(rng, mach, matrix))
    run.series[-1].context["sampled"] = "20% of pairs, all SMT siblings"
    return run


# -- an Arm login node where nothing is known --------------------------------------

def bare_run() -> Run:
    rng = random.Random(3)
    why_flops = "FMA pipes per core unknown: CPU part 0xd4f is not in the CPU families data file"
    why_bw = "memory channels and DIMM speed unknown: dmidecode needs root"
    mach = Machine(hostname="login01", arch="aarch64", vendor="ARM", model_name="", part="0xd4f",
                   implementer="0x41", sockets=1, cores=4, threads=4, smt=1,
                   cpus=[Cpu(i, i, 0, 0, 0) for i in range(4)],
                   isa=["neon", "sve", "sve2"], sve_vector_bits=128,
                   peaks={"flops.dp.node": Peak(None, "Gflop/s", why_flops),
                          "membw.node": Peak(None, "GB/s", why_bw)},
                   unknowns={"caches": "/sys/devices/system/cpu/cpu0/cache is absent",
                             "clocks.base_ghz": "no cpufreq", "clocks.max_ghz": "no cpufreq"})
    metrics = [
        _m(rng, "flops.dp.node", 61.0, "Gflop/s", peak=Peak(None, "Gflop/s", why_flops), threads=4, isa="sve"),
        _m(rng, "stream.triad", 38.1, "GB/s", peak=Peak(None, "GB/s", why_bw), threads=4),
        _m(rng, "latency.dram", 121.0, "ns", LOWER, threads=1),
    ]
    return Run(tool_version="0.1.0", host="login01", started="2024-05-05T10:00:00Z",
               command=["ceiling", "bench", "memory"], machine=mach.to_dict(), metrics=metrics,
               findings=[], series=[], partial=True,
               partial_reason="interrupted (SIGINT) during bench memory")


ALL = {"vm": vm_run, "epyc": epyc_run, "sampled": sampled_run, "bare": bare_run}


def multinode_run() -> Run:
    """The golden schema-2 document: two nodes, a job, an application, a stored analysis."""
    from pathlib import Path

    from ceiling.results import jsonio
    return jsonio.load(Path(__file__).parent / "golden" / "run_v2.json")
