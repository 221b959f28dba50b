"""The bench suites a verb can run, and the steps each is made of.

A step is (label, fn) with fn(ctx) -> Outcome; the label names the step in
progress lines, in the skipped finding "bench.<label>" when it cannot run, and
in analysis.coverage's table of expected series.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

from ..errors import UsageError

ORDER = ("compute", "dgemm", "memory", "cache", "latency", "cores")
EXTRA = ("storage",)      # writes to disk: only when asked for, never in "all" or ceiling run
NO_CLOCK = ("storage",)   # suites whose figures owe nothing to the CPU clock: it is not measured for them


def table() -> Dict[str, List[Tuple[str, Callable]]]:
    from ..bench import compute, cores, latency, memory, storage
    return {
        "compute": [("flops", compute.bench_flops)],
        "dgemm": [("dgemm", compute.bench_dgemm)],
        "memory": [("stream", memory.bench_stream), ("stream-threads", memory.bench_stream_threads),
                   ("numa-bandwidth", memory.bench_numa_bandwidth)],
        "cache": [("cache-bandwidth", memory.bench_cache_bandwidth)],
        "latency": [("latency", latency.bench_latency), ("numa-latency", latency.bench_numa_latency)],
        "cores": [("core-to-core", cores.bench_c2c)],
        "storage": [("storage", storage.bench_storage)],
    }


def preflights() -> Dict[str, Callable]:
    """step label -> the checks of its options that need no measurement (raise a
    CeilingError): run for every chosen step before anything is measured."""
    from ..bench import memory, storage
    return {"stream": memory.preflight, "stream-threads": memory.preflight, "storage": storage.preflight}


def steps(names: List[str], quick: bool) -> List[Tuple[str, Callable]]:
    """The steps of the named suites ("all" = the node's own, compute to cores), in suite order."""
    wanted = names or ["all"]
    for n in wanted:
        if n != "all" and n not in ORDER + EXTRA:
            raise UsageError(f"unknown suite {n!r} (one of: all, {', '.join(ORDER + EXTRA)}, network)")
    chosen = (list(ORDER) if "all" in wanted else [n for n in ORDER if n in wanted]) + [n for n in EXTRA if n in wanted]
    t = table()
    return [step for n in chosen for step in t[n]]
