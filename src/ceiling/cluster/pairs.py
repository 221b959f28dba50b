"""The pairwise network of a cluster run: latency and bandwidth between pairs of
nodes, every node in one pair per round and all pairs of a round at once (the
way NVIDIA ClusterKit tests a fabric), so that N nodes need rounds, not N²
sequential measurements.

Rounds follow the circle method of a round-robin tournament: rank 0 stays, the
others rotate one place per round; N - 1 rounds meet every pair exactly once
(an odd N gives one rank a bye each round). ``rounds`` caps them: each node
still meets that many different partners, enough to tell a node slow with
every partner (its NIC, its link, its load) from one slow pair (a link or a
switch between them).

Per pair: one-way latency at 8 B (IMB PingPong's loop, 1000 round trips per
block) and ping-pong bandwidth at 1 MiB (MB = 10^6 B, IMB's convention), the
median of three blocks, every block's data checked (csrc/mpi/netbench.c,
nb_pairs).
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

from ..errors import CeilingError

LAT_BYTES, LAT_REPS, LAT_WARMUP = 8, 1000, 100
BW_BYTES, BW_REPS, BW_WARMUP = 1 << 20, 20, 2
BLOCKS = 3
DEFAULT_ROUNDS = 32         # every pair up to 33 nodes; beyond, 32 partners per node


def schedule(n: int, rounds: Optional[int] = None) -> List[List[int]]:
    """Per round, each rank's partner (-1: a bye), by the circle method."""
    m = n + (n % 2)                       # an odd count gets a phantom rank: its partner sits out
    others = list(range(1, m))
    out = []
    for r in range(min(rounds if rounds is not None else DEFAULT_ROUNDS, m - 1)):
        ring = [0] + others[r:] + others[:r]
        partner = [-1] * n
        for i in range(m // 2):
            a, b = ring[i], ring[m - 1 - i]
            if a < n and b < n:
                partner[a], partner[b] = b, a
        out.append(partner)
    return out


def measure(nb, rank: int, plan: List[List[int]]) -> List[Dict[str, Any]]:
    """This rank's side of every round (collective: every rank calls it with the same plan)."""
    out = []
    for rnd, partners in enumerate(plan):
        p = partners[rank]
        lat = nb.pairs(p, LAT_BYTES, LAT_REPS, LAT_WARMUP, BLOCKS)
        bw = nb.pairs(p, BW_BYTES, BW_REPS, BW_WARMUP, BLOCKS)
        if p < 0:
            continue
        one_way_us = statistics.median(t / (2 * LAT_REPS) * 1e6 for t in lat.times_s)
        mbs = statistics.median(2 * BW_REPS * BW_BYTES / t / 1e6 for t in bw.times_s if t > 0) \
            if any(t > 0 for t in bw.times_s) else None
        out.append({"round": rnd, "partner": p, "latency_us": one_way_us, "bandwidth_mbs": mbs,
                    "valid": lat.valid and bw.valid, "msg": lat.msg or bw.msg})
    return out


def run_pairs(comm, rounds: Optional[int]) -> Dict[str, Any]:
    """Collective: build the timing loops, measure every round, bring every rank's pairs to
    rank 0. {"pairs": [per rank: its list]} on rank 0, {} elsewhere; {"skipped": why} on
    every rank when the loops cannot be built or loaded (no mpicc, a refused cache)."""
    from .build import build_per_node
    try:
        nb, _, _ = build_per_node(comm, leader=True)     # one rank per node: each is its node's leader
    except CeilingError as e:
        return {"skipped": str(e)}
    plan = schedule(comm.Get_size(), rounds)
    mine = measure(nb, comm.Get_rank(), plan)
    everyone = comm.gather(mine, root=0)
    if comm.Get_rank() != 0:
        return {}
    return {"pairs": everyone, "rounds": len(plan), "all_rounds": comm.Get_size() - 1 + comm.Get_size() % 2}
