"""What ranks learn of each other, gathered once: every rank's node, host,
process id and the CPUs it may use (``rank_facts``), each node's topology
read by its first rank (``topologies``), and any rank's object brought to
rank 0 (``gather_to_root``).

The node is launch.node_name() ($CEILING_NODE_NAME, else the host name), so
ranks of one host can stand in for several nodes; the host is always the
real one, for what is shared per host (CPUs, processes).
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .launch import node_name
from .placement import topology_of, unknown_topology


@dataclass
class Ranks:
    """Every rank's facts, by rank: {"rank", "node", "host", "pid", "cpus", "named"} each; and which one this is."""

    rank: int
    facts: List[Dict[str, Any]]

    @property
    def me(self) -> Dict[str, Any]:
        return self.facts[self.rank]

    @property
    def node(self) -> str:
        return self.me["node"]

    @property
    def nodes(self) -> List[str]:
        """Every rank's node, by rank."""
        return [f["node"] for f in self.facts]

    @property
    def local_rank(self) -> int:
        """This rank's index among the ranks of its node."""
        return [f["rank"] for f in self.facts if f["node"] == self.node].index(self.rank)

    @property
    def leader(self) -> bool:
        """The first rank of its node: the one that does a node's work once."""
        return self.local_rank == 0

    def pids_on_this_host(self) -> List[int]:
        """Process ids of the ranks that run on this rank's host."""
        return sorted(f["pid"] for f in self.facts if f["host"] == self.me["host"])


def rank_facts(comm) -> Ranks:
    """Collective: every rank's facts, on every rank ("named": the node's name is
    $CEILING_NODE_NAME's, not the host's)."""
    me = {"rank": comm.Get_rank(), "node": node_name(), "host": socket.gethostname(), "pid": os.getpid(),
          "cpus": sorted(os.sched_getaffinity(0)), "named": bool(os.environ.get("CEILING_NODE_NAME"))}
    return Ranks(me["rank"], comm.allgather(me))


def pids_on_this_host(comm) -> List[int]:
    """Process ids of the ranks that run on this host (collective: every rank calls it).

    For the competing-load check around an MPI bench: the other ranks are
    ceiling's own processes, not other load."""
    return rank_facts(comm).pids_on_this_host()


def topologies(comm, ranks: Ranks, machine: Any = None) -> Dict[str, Dict[str, Any]]:
    """Collective: node -> its topology (placement.topology_of), read by the node's first rank
    from ``machine`` (when it has CPUs) or from /sys; a topology that cannot be read is
    placement.unknown_topology with the reason."""
    topo = None
    if ranks.leader:
        m = machine if machine is not None and machine.cpus else None
        try:
            if m is None:
                from .. import machine as machine_mod
                m = machine_mod.detect("/", measure=False)
            topo = topology_of(m)
        except Exception as e:   # noqa: BLE001 - every rank must reach the allgather below
            topo = unknown_topology(ranks.me["cpus"], f"topology not read: {e}")
    got = comm.allgather((ranks.node, topo) if ranks.leader else None)
    return {n: t for n, t in (x for x in got if x)}


def gather_to_root(comm, obj: Any, root: int = 0) -> Optional[List[Any]]:
    """Collective: every rank's ``obj``, by rank, at ``root``; None on the other ranks.

    The one way results travel to the rank that reports (a rank's latency
    samples today; each node's outcome in cluster mode), so that how they
    travel (all at once now, streamed when thousands of nodes would not fit
    in rank 0's memory) is decided in one place."""
    return comm.gather(obj, root=root)
