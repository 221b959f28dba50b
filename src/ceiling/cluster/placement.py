"""Where ranks go: the placements of rank pairs a network measurement can
have in this allocation, and a CPU for each rank of a collective.

Each rank's facts (gather.rank_facts: node, host, the CPUs it may use) and
each node's topology (``topology_of``: cpu -> socket, core, L3, SMT index)
are gathered; rank 0 then picks, among what this allocation offers, two
ranks and one CPU for each of them per placement: "same_l3" (two cores
under one L3 instance), "same_socket" (one socket, different L3 instances,
or L3 unknown), "cross_socket" and "cross_node". Never two SMT siblings of
one core. A placement that cannot be had is reported with the reason (one
socket, one node, one rank per node ...). The planning is pure functions
over the gathered facts; ``Pinned`` applies a plan's CPU to a rank for a
while (sched_setaffinity), every rank learning whether all pins held.

``bound_cpus``: the CPUs a rank's own threads may be pinned to when the
launcher bound the ranks of a node to disjoint CPU sets (the storage bench).
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..machine.model import Machine
from ..results.placements import PLACEMENTS

PLAN_RANKS_MAX = 64           # ranks of a node considered when pairing


def topology_of(m: Machine) -> Dict[str, Any]:
    """What pairing needs of a node: cpu -> (socket, core, l3), sockets, whether L3s are known."""
    cpus = {c.id: (c.socket, c.core, c.l3, c.smt) for c in m.cpus if c.online}
    return {"cpus": cpus, "sockets": m.sockets or len({v[0] for v in cpus.values()}) or 1,
            "l3_known": bool(cpus) and all(v[2] is not None for v in cpus.values()),
            "host": socket.gethostname()}


def unknown_topology(cpus: Sequence[int], why: str) -> Dict[str, Any]:
    """A node whose topology could not be read: each CPU its own core, sockets and L3s unknown."""
    return {"cpus": {c: (0, c, None, 0) for c in cpus}, "sockets": 1, "l3_known": False,
            "host": socket.gethostname(), "note": why}


@dataclass
class Placement:
    label: str
    ranks: Tuple[int, int]
    cpus: Tuple[int, int]
    nodes: Tuple[str, str]
    note: str = ""


def _cores(topo: Dict[str, Any], allowed: Sequence[int]) -> List[Tuple[int, Tuple]]:
    """One CPU per core of ``allowed`` (the lowest SMT index, then the lowest id), with its facts."""
    info = topo["cpus"]
    best: Dict[Tuple[int, int], Tuple[int, Tuple]] = {}
    for c in sorted(allowed):
        f = info.get(c)
        if f is None:
            continue
        key = (f[0], f[1])
        if key not in best or (f[3], c) < (best[key][1][3], best[key][0]):
            best[key] = (c, f)
    return sorted(best.values())


def _pick(label: str, topo: Dict[str, Any], a_cpus: Sequence[int],
          b_cpus: Sequence[int]) -> Optional[Tuple[int, int, str]]:
    """CPUs (ca, cb, note) on one node that give ``label``, different cores, or None."""
    ca_list, cb_list = _cores(topo, a_cpus), _cores(topo, b_cpus)
    l3_known = topo.get("l3_known", False)
    for ca, fa in ca_list:
        for cb, fb in cb_list:
            if ca == cb or (fa[0], fa[1]) == (fb[0], fb[1]):
                continue
            same_socket = fa[0] == fb[0]
            if label == "cross_socket" and not same_socket:
                return ca, cb, ""
            if label == "same_l3" and l3_known and same_socket and fa[2] == fb[2]:
                return ca, cb, ""
            if label == "same_socket" and same_socket:
                if not l3_known:
                    return ca, cb, "L3 instances unknown on this node: the two cores may share one"
                if fa[2] != fb[2]:
                    return ca, cb, ""
    return None


def _first_cpu(topo: Dict[str, Any], allowed: Sequence[int]) -> int:
    cores = _cores(topo, allowed)
    return cores[0][0] if cores else min(allowed)


def _why_not(label: str, by_node: Dict[str, List[int]], topos: Dict[str, Dict[str, Any]]) -> str:
    multi = [n for n, rs in by_node.items() if len(rs) >= 2]
    if label == "cross_node":
        node = next(iter(by_node))
        return f"all {sum(len(r) for r in by_node.values())} ranks run on one node ({node})"
    if not multi:
        return "every node has one rank: no two ranks share a node (start at least 2 ranks per node)"
    unread = [f"{n}: {topos[n]['note']}" for n in multi if topos[n].get("note")]
    if len(unread) == len(multi):
        return "; ".join(unread)
    if label == "cross_socket":
        if all(topos[n]["sockets"] <= 1 for n in multi):
            return "one socket per node"
        return "the ranks may only use CPUs of one socket (affinity or cgroup)"
    if label == "same_l3":
        if not any(topos[n]["l3_known"] for n in multi):
            return "L3 instances unknown (no cache topology in /sys)"
        return "no two ranks of a node may use two different cores under one L3 instance"
    # same_socket
    known = [n for n in multi if topos[n]["l3_known"]]
    if known and all(len({f[2] for f in topos[n]["cpus"].values() if f[0] == s}) <= 1
                     for n in known for s in {f[0] for f in topos[n]["cpus"].values()}):
        return "each socket has one L3 instance shared by all its cores"
    return "no two ranks of a node may use cores under different L3 instances of one socket"


def plan_placements(facts: List[Dict[str, Any]], topos: Dict[str, Dict[str, Any]]
                    ) -> Tuple[List[Placement], Dict[str, str]]:
    """The placements this allocation offers (in PLACEMENTS order) and why the others are not."""
    by_node: Dict[str, List[int]] = {}
    for f in sorted(facts, key=lambda f: f["rank"]):
        by_node.setdefault(f["node"], []).append(f["rank"])
    cpus = {f["rank"]: f["cpus"] for f in facts}
    found: Dict[str, Placement] = {}
    for label in PLACEMENTS[:3]:
        for node, ranks in by_node.items():
            if len(ranks) < 2 or label in found:
                continue
            rs = ranks[:PLAN_RANKS_MAX]
            for i, ra in enumerate(rs):
                for rb in rs[i + 1:]:
                    got = _pick(label, topos[node], cpus[ra], cpus[rb])
                    if got:
                        found[label] = Placement(label, (ra, rb), (got[0], got[1]), (node, node), got[2])
                        break
                if label in found:
                    break
    nodes = list(by_node)
    if len(nodes) >= 2:
        ra, rb = by_node[nodes[0]][0], by_node[nodes[1]][0]
        note = ""
        if topos[nodes[0]].get("host") == topos[nodes[1]].get("host"):
            note = (f"nodes {nodes[0]} and {nodes[1]} are one host ({topos[nodes[0]].get('host')}; node names "
                    "from CEILING_NODE_NAME): no network link is crossed")
        ca = _first_cpu(topos[nodes[0]], cpus[ra])
        avoid: Sequence[int] = ()
        if note:   # one host: keep the two ranks off one CPU (and off one core where possible)
            fa = topos[nodes[0]]["cpus"].get(ca)
            avoid = [c for c, f in topos[nodes[1]]["cpus"].items()
                     if c == ca or (fa is not None and (f[0], f[1]) == (fa[0], fa[1]))]
        cb = _first_cpu(topos[nodes[1]], [c for c in cpus[rb] if c not in avoid] or
                        [c for c in cpus[rb] if c != ca] or cpus[rb])
        found["cross_node"] = Placement("cross_node", (ra, rb), (ca, cb), (nodes[0], nodes[1]), note)
    missing = {lb: _why_not(lb, by_node, topos) for lb in PLACEMENTS if lb not in found}
    return [found[lb] for lb in PLACEMENTS if lb in found], missing


def coll_order(facts: List[Dict[str, Any]]) -> List[int]:
    """Ranks one per node in turn (rank 0 first), so that k ranks span min(k, nodes) nodes."""
    by_node: Dict[str, List[int]] = {}
    for f in sorted(facts, key=lambda f: f["rank"]):
        by_node.setdefault(f["node"], []).append(f["rank"])
    out: List[int] = []
    depth = max(len(v) for v in by_node.values())
    for i in range(depth):
        out += [rs[i] for rs in by_node.values() if i < len(rs)]
    return out


def coll_pinning(facts: List[Dict[str, Any]], topos: Dict[str, Dict[str, Any]]) -> Tuple[Dict[int, Optional[int]],
                                                                                         List[str]]:
    """One CPU per rank, a core of its own where the node has enough; None = left unpinned."""
    out: Dict[int, Optional[int]] = {}
    notes: List[str] = []
    used_core: Dict[str, set] = {}
    used_cpu: Dict[str, set] = {}
    for f in sorted(facts, key=lambda f: f["rank"]):
        node, topo = f["node"], topos[f["node"]]
        host = topo.get("host", node)      # fake nodes on one host share its CPUs
        uc, ucpu = used_core.setdefault(host, set()), used_cpu.setdefault(host, set())
        choice = None
        for c, fc in _cores(topo, f["cpus"]):
            if (fc[0], fc[1]) not in uc and c not in ucpu:
                choice = c
                break
        if choice is None:
            free = [c for c in sorted(f["cpus"]) if c not in ucpu]
            choice = free[0] if free else None
        if choice is None:
            notes.append(f"rank {f['rank']} on {node}: every CPU it may use is taken by another rank; not pinned")
        else:
            ucpu.add(choice)
            fc = topo["cpus"].get(choice)
            if fc is not None:
                uc.add((fc[0], fc[1]))
        out[f["rank"]] = choice
    return out, notes


def bound_cpus(facts: List[Dict[str, Any]], rank: int, threads: int) -> Tuple[Optional[List[int]], str]:
    """This rank's CPUs for its ``threads`` when the ranks of its node were bound to disjoint CPU sets."""
    me = facts[rank]
    mine = set(me["cpus"])
    others = [set(f["cpus"]) for r, f in enumerate(facts) if f["node"] == me["node"] and r != rank]
    if any(mine & o for o in others):
        return None, ("ranks of a node share CPUs (the launcher did not bind them): threads left to the "
                      "scheduler")
    if len(mine) < threads:
        return None, (f"{threads} threads per rank on {len(mine)} CPUs: threads left to the scheduler")
    return sorted(mine)[:threads], "each rank's threads pinned inside the CPUs the launcher bound it to"


class Pinned:
    """Pin this rank to one CPU for a while; every rank learns whether all pins held."""

    def __init__(self, comm, cpu: Optional[int]):
        self.comm, self.cpu, self.old = comm, cpu, None

    def __enter__(self) -> Optional[str]:
        err = None
        if self.cpu is not None:
            try:
                self.old = os.sched_getaffinity(0)
                os.sched_setaffinity(0, {self.cpu})
            except OSError as e:
                err = f"rank {self.comm.Get_rank()}: cannot pin to CPU {self.cpu}: {e.strerror}"
                self.old = None
        errs = [e for e in self.comm.allgather(err) if e]
        return "; ".join(errs) or None

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            try:
                os.sched_setaffinity(0, self.old)
            except OSError:
                pass
