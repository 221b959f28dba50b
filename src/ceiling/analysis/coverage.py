"""What a run's plots need beyond the series themselves: why an expected series
is absent, and the cache capacities a working-set axis is read against.

Pure functions over a Run; analyse() stores their answers in Run.analysis so
that a report draws, and never works out, either.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List

from ..results.analysis import Absent, Capacity
from ..results.machine_view import MachineFacts
from ..results.model import SKIPPED, Run
from ..units import count

# The series a report expects, with the bench suite that measures each and its step
# label: a step that failed leaves a skipped Finding "bench.<label>" whose evidence says why.
EXPECTED = (
    ("stream.triad.threads", "memory", "stream-threads"),
    ("dgemm.threads", "dgemm", "dgemm"),
    ("bandwidth.load.size", "cache", "cache-bandwidth"),
    ("bandwidth.triad.size", "cache", "cache-bandwidth"),
    ("latency.size", "latency", "latency"),
    ("c2c.matrix", "cores", "core-to-core"),
    ("latency.numa", "latency", "numa-latency"),
    ("stream.triad.numa", "memory", "numa-bandwidth"),
)


def why_absent(run: Run, name: str, suite: str, step: str = "") -> str:
    """Why the series ``name`` (measured by ``suite``, step ``step``) is not in the run."""
    facts = MachineFacts(run.machine)
    family = name.split(".", 1)[0]
    if name.endswith(".numa") and len(facts.numa_nodes) <= 1 and facts:
        return "one NUMA domain, so there is no remote memory to compare"
    if name == "c2c.matrix" and facts and facts.threads < 2:
        return "needs at least two CPUs"
    skipped = [f for f in run.findings if f.status == SKIPPED]
    exact = [f for f in skipped if step and f.id.replace("_", "-") == f"bench.{step}"]
    loose = [f for f in skipped if name in f.id or family in f.id.split(".") or suite in f.id.split(".")]
    for f in exact + loose:
        return f"{f.title}" + (f" ({f.evidence})" if f.evidence else "")
    if run.partial:
        return "the run stopped before this measurement" + (f" ({run.partial_reason})" if run.partial_reason else "")
    return f"not part of this run (measured by: ceiling bench {suite})"


def absent(run: Run) -> List[Absent]:
    """Each expected series the run lacks, with why."""
    have = {s.name for s in run.series}
    return [Absent(name, why_absent(run, name, suite, step)) for name, suite, step in EXPECTED if name not in have]


def usable_capacity(machine: Any, threads: int) -> List[Dict[str, Any]]:
    """The cache capacity ``threads`` compactly placed threads can use, per data or unified level:
    [{"level", "type", "bytes", "instances"}], ``instances`` the cache instances they span."""
    out = []
    for c in MachineFacts(machine).caches():
        inst = max(1, count(c.get("instances")) or 1)
        per = max(1, count(c.get("cpus_per_instance")) or 1)
        used = 1 if threads <= 1 else min(inst, math.ceil(threads / per))
        size = count(c.get("size_bytes"))
        if size is None or not 0 < size * used < 2 ** 64:
            continue        # a damaged record (no cache holds 16 EiB): no capacity to draw
        out.append({"level": count(c.get("level")), "type": str(c.get("type", "")), "bytes": size * used,
                    "instances": used})
    return out


def capacities(run: Run) -> List[Capacity]:
    """For each series on a working-set axis, the cache capacities its threads could use."""
    out = []
    for s in run.series:
        if s.kind == "xy" and s.x_unit in ("B", "bytes") and s.x_label == "working set":
            out += [Capacity(s.name, c["level"], c["type"], c["bytes"], c["instances"])
                    for c in usable_capacity(run.machine, count(s.context.get("threads")) or 1)]
    return out
