"""What the pairwise network of a cluster run says (cluster/pairs.py measured it):
node-to-node latency and bandwidth as matrices (a heat map each), their medians
as metrics, and the slow nodes told from the slow links.

A node is slow when its median over its partners is worse than the median of
all pairs by more than the threshold (20 % by default, --threshold): it is slow
with every partner, a node problem (its adapter, its cable, its load). A pair is
a slow link when it is worse than the threshold both against all pairs and
against each of its two nodes' own medians: neither node is slow elsewhere, so
the path between them is (a cable, a switch, a route).
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Tuple

from ..results.model import HIGHER, LOWER, WARN, Finding, Metric, Series
from ..results.base import Stats
from .cluster import SHOWN_NODES

THRESHOLD = 0.20
WHAT = {"latency_us": ("latency", "µs", LOWER, "one-way latency at 8 B (IMB PingPong)"),
        "bandwidth_mbs": ("bandwidth", "MB/s", HIGHER, "ping-pong bandwidth at 1 MiB (MB = 10^6 B)")}


def conclude(nodes: List[str], per_rank: List[List[Dict[str, Any]]], rounds: int, all_rounds: int,
             threshold: Optional[float] = None) -> Tuple[List[Series], List[Metric], List[Finding]]:
    """``nodes``: by rank; ``per_rank``: each rank's pairs (partner by rank)."""
    limit = threshold if threshold is not None else THRESHOLD
    n = len(nodes)
    series, metrics, findings = [], [], []
    bad = [f"{nodes[r]}-{nodes[p['partner']]}: {p['msg']}" for r, ps in enumerate(per_rank) for p in ps
           if not p["valid"]]
    for key, (word, unit, better, how) in WHAT.items():
        matrix: List[List[Optional[float]]] = [[None] * n for _ in range(n)]
        for r, ps in enumerate(per_rank):
            for p in ps:
                if p["valid"] and p.get(key) is not None:
                    matrix[r][p["partner"]] = float(p[key])
        pairs = {(a, b): matrix[a][b] for a in range(n) for b in range(a + 1, n) if matrix[a][b] is not None}
        if not pairs:
            continue
        sampled = f"{rounds} of {all_rounds} rounds, {len(pairs)} of {n * (n - 1) // 2} pairs" \
            if rounds < all_rounds else ""
        vals = list(pairs.values())
        st = Stats.of(vals, better)
        series.append(Series(f"cluster.pairs.{word}", "matrix", title=f"Node-to-node {word}", x_label="to node",
                             y_label="from node", y_unit=unit, labels=list(nodes), matrix=matrix,
                             context={"unit": unit, "better": better, "measured": how,
                                      # within the threshold of the median a pair is not slow: a
                                      # heat map colours that band alike (0.879 and 0.880 µs, too)
                                      "median": st.median, "threshold": limit,
                                      **({"sampled": sampled} if sampled else {})}))
        metrics.append(Metric(name=f"net.pairs.{word}", value=st.median, unit=unit, better=better, stats=st,
                              values=vals, valid=not bad, note="; ".join(bad[:3]),
                              context={"across": "node pairs, all at once per round", "pairs": len(vals),
                                       "measured": how, "y_stat": "median over the pairs",
                                       **({"sampled": sampled} if sampled else {})}))
        findings += _slow(nodes, matrix, pairs, st.median, better, limit, word, unit)
    return series, metrics, findings


def _worse(v: float, ref: float, better: str) -> float:
    """How much worse v is than ref, as a fraction of ref (negative: better)."""
    if not ref:
        return 0.0
    return (v - ref) / ref if better == LOWER else (ref - v) / ref


def _slow(nodes, matrix, pairs, med, better, limit, word, unit) -> List[Finding]:
    n = len(nodes)
    own = {}
    for i in range(n):
        vals = [matrix[i][j] if matrix[i][j] is not None else matrix[j][i] for j in range(n) if j != i]
        vals = [v for v in vals if v is not None]
        if vals:
            own[i] = statistics.median(vals)
    slow_nodes = sorted((i for i, v in own.items() if _worse(v, med, better) > limit),
                        key=lambda i: -_worse(own[i], med, better))
    out = []
    if slow_nodes:
        names = [nodes[i] for i in slow_nodes]
        first = slow_nodes[0]
        out.append(Finding(
            id=f"cluster.pairs.{word}.node", status=WARN,
            title=(f"{', '.join(names[:SHOWN_NODES])}{' and more' if len(names) > SHOWN_NODES else ''}: slow "
                   f"{word} with every partner ({nodes[first]} {own[first]:.4g} {unit} against {med:.4g} over "
                   f"all pairs)"),
            evidence="; ".join(f"{nodes[i]}: median {own[i]:.4g} {unit} over its partners" for i in slow_nodes[:20]),
            why="A node slow with every partner has the problem itself: its adapter, its link, its firmware "
                "or something else using it.",
            fix="Check the node's adapter (ibstat, its rate and errors: perfquery) and its load.",
            data={"nodes": {nodes[i]: own[i] for i in slow_nodes}, "median": med}))
    links = []
    for (a, b), v in pairs.items():
        if a in slow_nodes or b in slow_nodes:
            continue
        if _worse(v, med, better) > limit and all(_worse(v, own.get(x, v), better) > limit for x in (a, b)):
            links.append((a, b, v))
    if links:
        links.sort(key=lambda t: -_worse(t[2], med, better))
        shown = ", ".join(f"{nodes[a]}-{nodes[b]}" for a, b, _ in links[:SHOWN_NODES])
        out.append(Finding(
            id=f"cluster.pairs.{word}.link", status=WARN,
            title=(f"slow {word} between {shown}{' and more' if len(links) > SHOWN_NODES else ''}, while each of "
                   "these nodes is normal with its other partners: a link or switch problem"),
            evidence="; ".join(f"{nodes[a]}-{nodes[b]} {v:.4g} {unit} (median of all pairs {med:.4g})"
                               for a, b, v in links[:20]),
            why="Both nodes do well elsewhere, so the path between them is slower: a cable, a switch port, "
                "a congested or misrouted link.",
            fix="Look at the switch ports on that path (port counters, ibdiagnet) and the route between the two.",
            data={"links": [[nodes[a], nodes[b], v] for a, b, v in links], "median": med}))
    return out
