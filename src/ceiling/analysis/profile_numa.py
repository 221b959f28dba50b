"""Remote memory: a process whose pages sit on other NUMA nodes than the CPUs its threads ran on.

From the sampler (probes/proc_sampler.py, where the node has more than one NUMA node): each
process's private memory per node (numa_maps' mappings without a file: probes/numa_maps.py, its
latest read) and each of its threads' CPU time per node. Two cases, each a finding naming the
process with the figures:

- **Elsewhere**: at least ``RAN_SHARE`` (90%) of the process's CPU time was on a set of nodes, and
  less than ``LOCAL_SHARE`` (50%) of its memory is on them: every access of its threads crosses
  the link between the sockets (memory bound with numactl to the wrong node, or the process moved
  after it allocated).
- **On one node, threads on several**: at least ``ONE_NODE`` (90%) of its memory is on one node and
  at least ``SPREAD`` (20%) of its CPU time on other nodes: the threads there read remotely
  (first touch by one thread, the Semtex case: a 22 KB memcpy that took 35 us on one rank and
  165 us on another).

A process with less than ``MIN_BYTES`` (64 MiB) of private memory, or less than ``MIN_CPU_S`` of
CPU time, says nothing either way. Threads that share their pages evenly (each touching its own
part first, OpenMP's static schedule) are not told apart from threads that each read all of it:
neither case above fires for memory spread like the threads. The cost of a remote access is this
node's measured latency factor (``latency.numa_factor``, `ceiling bench latency`) where the history
has it, else said to be unmeasured.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..results.model import WARN, Finding

MIN_BYTES = 64 << 20
MIN_CPU_S = 0.5
RAN_SHARE = 0.9
LOCAL_SHARE = 0.5
ONE_NODE = 0.9
SPREAD = 0.2

Row = Tuple[str, Optional[float], str, str, str]     # analysis/profile_ceilings.Row
Lookup = Callable[[str], Sequence[Row]]


def _cpu_by_node(sampled, pid: int) -> Dict[int, float]:
    out: Dict[int, float] = {}
    for (p, _), t in sampled.threads.items():
        if p == pid:
            for node, s in t.cpu_by_node.items():
                out[node] = out.get(node, 0.0) + s
    return out


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"


def _nodes(ns) -> str:
    ns = sorted(ns)
    return ("node " if len(ns) == 1 else "nodes ") + ", ".join(str(n) for n in ns)


def _cost(lookup: Optional[Lookup]) -> str:
    rows = [r for r in (lookup("latency.numa_factor") if lookup else []) if r[1] is not None]
    if not rows:
        return ("The cost of a remote access is not measured on this node: `ceiling bench latency` measures "
                "the remote/local latency factor.")
    r = max(rows, key=lambda r: r[3])
    return (f"A remote access costs up to {r[1]:.3g}x a local one here (latency.numa_factor, measured "
            f"{r[3][:10]}, run {r[4][:12]}).")


def remote_memory(sampled, lookup: Optional[Lookup] = None) -> List[Finding]:
    """The findings above for every process the sampler read; [] on one NUMA node."""
    if getattr(sampled, "numa_nodes", 0) < 2:
        return []
    found = []
    for pid, p in sorted(sampled.processes.items()):
        where = p.numa
        if where is None or where.total < MIN_BYTES:
            continue
        cpu = {n: s for n, s in _cpu_by_node(sampled, pid).items() if n >= 0}
        busy = sum(cpu.values())
        if busy < MIN_CPU_S:
            continue
        mem = where.total
        # the fewest nodes holding RAN_SHARE of its CPU time
        ran, acc = [], 0.0
        for n, s in sorted(cpu.items(), key=lambda kv: -kv[1]):
            if acc >= RAN_SHARE * busy:
                break
            ran.append(n)
            acc += s
        local = sum(where.by_node.get(n, 0) for n in ran) / mem
        top, top_bytes = max(where.by_node.items(), key=lambda kv: kv[1])
        elsewhere = busy - cpu.get(top, 0.0)
        cpu_said = ", ".join(f"node {n} {s / busy:.0%}" for n, s in sorted(cpu.items()))
        mem_said = ", ".join(f"node {n} {b / mem:.0%}" for n, b in sorted(where.by_node.items()))
        evidence = (f"{p.comm} (pid {pid}): {_gib(mem)} of private memory by node: {mem_said} "
                    f"(/proc/{pid}/numa_maps, read {where.reads} time(s), {where.read_s * 1e3:.3g} ms in all); "
                    f"its threads' CPU time by node: {cpu_said} ({busy:.3g} s)")
        data = {"pid": pid, "comm": p.comm, "memory_bytes_by_node": {str(n): b for n, b in where.by_node.items()},
                "cpu_s_by_node": {str(n): round(s, 6) for n, s in cpu.items()}, "numa_maps_reads": where.reads,
                "numa_maps_read_s": where.read_s}
        if local < LOCAL_SHARE:
            found.append(Finding(
                id="profile.numa.remote_memory", status=WARN,
                title=f"Remote memory: {1 - local:.0%} of {p.comm}'s memory is on other NUMA nodes than its threads",
                evidence=f"{evidence}. Its threads ran on {_nodes(ran)}.",
                why="Every access of its threads crosses the link between the sockets: higher latency, and "
                    "the link's bandwidth instead of the local memory's. " + _cost(lookup),
                fix="Bind the process and its memory to the same node (numactl --cpunodebind=N --membind=N, or "
                    "OMP_PLACES/OMP_PROC_BIND with first touch), or let it allocate after it is placed.",
                data={**data, "case": "elsewhere", "local_share": round(local, 4)}))
        elif top_bytes / mem >= ONE_NODE and elsewhere / busy >= SPREAD:
            found.append(Finding(
                id="profile.numa.remote_memory", status=WARN,
                title=f"Remote memory: {p.comm}'s memory is on node {top}, and {elsewhere / busy:.0%} of its CPU "
                      f"time ran on other nodes",
                evidence=f"{evidence}.",
                why="The threads on the other nodes read and write remote memory: one thread touched the pages "
                    "first (an initialisation loop, a memcpy into a fresh buffer) and the kernel placed them on "
                    "its node. " + _cost(lookup),
                fix="Initialise the data in parallel with the same schedule as the compute loops (first touch), "
                    "or interleave it (numactl --interleave=all) when every thread reads all of it.",
                data={**data, "case": "one_node", "node": top, "share_elsewhere": round(elsewhere / busy, 4)}))
    return found
