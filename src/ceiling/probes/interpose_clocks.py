"""The trace's clocks: every node's CLOCK_MONOTONIC mapped onto world rank 0's.

The event files' times are each process's CLOCK_MONOTONIC (probes/interpose_events.py): one clock
for every process of one boot of one node (the header's ``boot``, a hash of the kernel's boot_id),
another origin and rate on every other node. In a wrapped launch (``mpirun -n N ceiling trace --
./app``) each rank measured its clock against rank 0's at MPI_Init and at MPI_Finalize, Score-P's
way (csrc/interpose/mpi_clock.c: the least round trip of 10 ping-pongs, the offset taken at its
midpoint, off by at most half that round trip), as SYNC events. Here each boot other than rank 0's
gets one map, from its ranks' best measurement of each kind (all its processes share one clock, so
the events of two ranks of one node keep their order): local time t becomes
``t + o_init + (o_fin - o_init) * (t - at_init) / (at_fin - at_init)`` (the offsets interpolated
linearly: the drift between the two), ``t + o`` (the better one) where only one was measured or
where the two cannot resolve the drift (its estimate no larger than its own uncertainty, the two
errors over the time between them: a short run's two measurements a few ms apart would make
microseconds of error into hundreds of ppm, and extrapolating that to the events before MPI_Init
and after MPI_Finalize would misplace them worse than no drift at all), and stays as it was
(said) where none was: an express launch (``ceiling trace -- mpirun``) never measures, since a rank
without the interposer would leave the others waiting in the sync. Processes of rank 0's boot are
on its clock already; their ranks are measured all the same, and those offsets, which are truly 0,
must lie within their stated error: ``Clocks`` says whether they did (the error claim checked on
every trace). Files from before the boot field (0) fall back to the host name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

PHASES = ("MPI_Init", "MPI_Finalize")           # a SYNC event's call
NO_RTT = 2 ** 64 - 1                             # mpi_clock.c: not measured
BootKey = Tuple[str, object]                     # ("boot", hash) or ("host", name)


def boot_key(boot: int, host: str) -> BootKey:
    """Which clock a process's times are on: its boot where the header has one, else its host."""
    return ("boot", int(boot)) if boot else ("host", host)


@dataclass(frozen=True)
class Sync:
    """One SYNC event: a rank's clock against rank 0's (interpose.h's fields, in ns)."""
    rank: int
    phase: int                 # 0: MPI_Init, 1: MPI_Finalize
    at_ns: int                 # this rank's CLOCK_MONOTONIC at the best round's midpoint
    offset_ns: int             # rank 0's clock minus this one's then
    rtt_ns: int                # that round's round trip: the offset is off by at most half of it (0 on rank 0)
    same_boot: int             # the interposer's word: 1 rank 0's boot, 0 another, -1 unknown
    cost_ns: int               # what the sync took on this rank (the tracer's own time)

    @property
    def error_ns(self) -> float:
        return self.rtt_ns / 2


def syncs_of(ev: np.ndarray, rank: int, ns_per_tick: float) -> List[Sync]:
    """The SYNC rows of one event file (EVENT dtype) as Syncs."""
    return [Sync(rank, int(e["call"]), int(e["offset"]), int(e["result"]), int(e["bytes"]), int(e["file"]),
                 int(round(float(e["dur"]) * ns_per_tick))) for e in ev]


@dataclass(frozen=True)
class ClockMap:
    """Local CLOCK_MONOTONIC ns -> rank 0's: ``t + offset_ns + slope * (t - at_ns)``."""
    offset_ns: int
    at_ns: int
    slope: float = 0.0         # the drift (rank 0's rate over this clock's, minus 1)
    unresolved_ppm: float = 0.0  # > 0: two measurements that could not tell the drift from this (ppm): slope 0

    def apply(self, t: np.ndarray) -> np.ndarray:
        """Absolute local ns (int64) to rank 0's, in integers where it matters: the slope's term is small."""
        t = np.asarray(t, np.int64)
        return t + np.int64(self.offset_ns) + np.round((t - np.int64(self.at_ns)) * self.slope).astype(np.int64)

    def one(self, t: int) -> int:
        return int(self.apply(np.array([t], np.int64))[0])


@dataclass
class Node:
    """One clock (a boot) of the trace: its hosts and ranks, and how it was aligned."""
    key: BootKey
    hosts: List[str] = field(default_factory=list)
    ranks: List[int] = field(default_factory=list)
    init: Optional[Sync] = None              # its best measurement at MPI_Init
    fin: Optional[Sync] = None               # and at MPI_Finalize
    map: Optional[ClockMap] = None           # None: rank 0's clock (reference) or not aligned
    reference: bool = False

    @property
    def aligned(self) -> bool:
        return self.reference or self.map is not None


@dataclass
class Clocks:
    """How the trace's clocks were put on one time line, for its page and its stored result."""
    nodes: List[Node] = field(default_factory=list)
    syncs: List[Sync] = field(default_factory=list)
    outside: List[Sync] = field(default_factory=list)    # rank 0's boot: offsets outside their stated error

    def map_of(self, key: BootKey) -> Optional[ClockMap]:
        for n in self.nodes:
            if n.key == key:
                return n.map
        return None

    @property
    def remote(self) -> List[Node]:
        return [n for n in self.nodes if not n.reference]

    def _figures(self) -> dict:
        remote = [n for n in self.remote if n.map is not None]
        offs = [s.offset_ns for n in remote for s in (n.init, n.fin) if s is not None]
        errs = [s.error_ns for n in remote for s in (n.init, n.fin) if s is not None]
        drift = [abs(n.map.slope) * 1e6 for n in remote if n.map.slope]
        blur = [n.map.unresolved_ppm for n in remote if n.map.unresolved_ppm]
        return {"offset_ns": [min(offs), max(offs)] if offs else None, "drift_ppm": max(drift) if drift else None,
                "drift_unresolved": len(blur), "drift_unresolved_ppm": max(blur) if blur else None,
                "error_ns": max(errs) if errs else None}

    def doc(self) -> dict:
        """What the run keeps (``trace.recorded``'s data["clocks"]): the nodes and the figures said."""
        cost = {PHASES[p]: max((s.cost_ns for s in self.syncs if s.phase == p), default=None) for p in (0, 1)}
        checked = [s for s in self._on_reference() if s.rank > 0]
        return {"nodes": len(self.nodes), "aligned": sum(1 for n in self.remote if n.map is not None),
                "not_aligned": [", ".join(n.hosts) or str(n.key[1]) for n in self.remote if n.map is None],
                "measured_ranks": sorted({s.rank for s in self.syncs}), **self._figures(),
                "sync_cost_ns": {k: v for k, v in cost.items() if v is not None},
                "one_clock_checks": len(checked), "one_clock_outside_error": len(self.outside),
                "said": self.said()}

    def _on_reference(self) -> List[Sync]:
        ref = {r for n in self.nodes if n.reference for r in n.ranks}
        return [s for s in self.syncs if s.rank in ref]

    def said(self) -> str:
        """One sentence for the trace's page."""
        if not self.nodes:
            return ""
        cost = self._cost_words()
        check = self._check_words()
        if len(self.nodes) == 1:
            return ("clocks: one clock (every process on one node)" + (f"; {check}" if check else "")
                    + (f"; {cost}" if cost else ""))
        remote = self.remote
        done = [n for n in remote if n.map is not None]
        words = []
        if done:
            both = all(n.init is not None and n.fin is not None for n in done)
            when = "at MPI_Init and MPI_Finalize" if both else "at MPI_Init or MPI_Finalize only (no drift measured)"
            d = self._figures()
            lo, hi = d["offset_ns"]
            w = (f"{len(done) + 1} nodes aligned to rank 0's {when}; offsets {_us(lo)} … {_us(hi)} µs")
            if d["drift_ppm"] is not None:
                w += f", drift up to {d['drift_ppm']:.2g} ppm"
            if d["drift_unresolved"]:
                w += (f", drift not resolved on {d['drift_unresolved']} node(s) (the two measurements too close "
                      f"together to tell it from ±{d['drift_unresolved_ppm']:.2g} ppm: a constant offset used)")
            w += f"; residual error ≤ {d['error_ns'] / 1e3:.3g} µs (half the best round trip)"
            words.append(w)
        left = [n for n in remote if n.map is None]
        if left:
            names = ", ".join(", ".join(n.hosts) or str(n.key[1]) for n in left[:8]) + (
                f" and {len(left) - 8} more" if len(left) > 8 else "")
            words.append(f"{len(left)} node(s) not aligned to rank 0's clock ({names}): no clock measurement "
                         "(only a wrapped launch, mpirun -n N ceiling trace -- ./app, measures; "
                         "ceiling trace -- mpirun does not), so their times are their own node's CLOCK_MONOTONIC, "
                         "whose origin differs between nodes")
        return "clocks: " + "; ".join(words) + (f"; {check}" if check else "") + (f"; {cost}" if cost else "")

    def _check_words(self) -> str:
        mine = [s for s in self._on_reference() if s.rank > 0]
        if not mine:
            return ""
        if self.outside:
            worst = max(self.outside, key=lambda s: abs(s.offset_ns) - s.error_ns)
            return (f"{len(self.outside)} of {len(mine)} measurement(s) of ranks on rank 0's node (one clock, "
                    f"offset truly 0) lie outside their stated error (rank {worst.rank}: {_us(worst.offset_ns)} µs, "
                    f"error ≤ {worst.error_ns / 1e3:.3g} µs): the residual error may be understated")
        top = max(abs(s.offset_ns) for s in mine)
        return (f"the {len(mine)} measurement(s) of ranks on rank 0's node (offset truly 0) gave at most "
                f"{top / 1e3:.3g} µs, within their stated error")

    def _cost_words(self) -> str:
        parts = []
        for p, name in enumerate(PHASES):
            c = [s.cost_ns for s in self.syncs if s.phase == p]
            if c:
                parts.append(f"{max(c) / 1e6:.3g} ms at {name}")
        if not parts:
            return ""
        return "the sync took " + " and ".join(parts) + " (the longest rank's; the tracer's own time)"


def _us(ns: float) -> str:
    return f"{ns / 1e3:+.3g}".replace("-", "−")


def best(syncs: Sequence[Sync], phase: int) -> Optional[Sync]:
    """The measurement of that kind with the least round trip (one clock: any rank's stands for the node's)."""
    got = [s for s in syncs if s.phase == phase and s.rtt_ns != NO_RTT]
    return min(got, key=lambda s: s.rtt_ns) if got else None


def clock_map(init: Optional[Sync], fin: Optional[Sync]) -> Optional[ClockMap]:
    """The map from a node's best measurements: interpolated between two where they resolve the drift,
    else constant (the better one), none without."""
    if init is not None and fin is not None and fin.at_ns > init.at_ns:
        span = fin.at_ns - init.at_ns
        slope = (fin.offset_ns - init.offset_ns) / span
        blur = (init.error_ns + fin.error_ns) / span        # the slope's own uncertainty
        if abs(slope) > blur:
            return ClockMap(init.offset_ns, init.at_ns, slope)
        one = min((init, fin), key=lambda s: s.rtt_ns)
        return ClockMap(one.offset_ns, one.at_ns, 0.0, max(blur * 1e6, 1e-12))
    one = init or fin
    return ClockMap(one.offset_ns, one.at_ns) if one is not None else None


def align(procs: Dict[BootKey, Tuple[List[str], List[int]]], syncs: Dict[BootKey, List[Sync]],
          reference: BootKey) -> Clocks:
    """Each clock's map onto ``reference``'s (rank 0's boot): ``procs`` gives each clock's hosts and ranks,
    ``syncs`` its ranks' SYNC measurements."""
    out = Clocks()
    for key in sorted(procs, key=lambda k: (k != reference, str(k[1]))):
        hosts, ranks = procs[key]
        mine = syncs.get(key, [])
        out.syncs += mine
        node = Node(key, sorted(set(hosts)), sorted({r for r in ranks if r >= 0}), best(mine, 0), best(mine, 1),
                    reference=key == reference)
        if node.reference:
            # one clock: the offset is truly 0, so a measurement must lie within its stated error (+1 ns: the
            # midpoint's integer halving)
            out.outside += [s for s in mine if s.rank > 0 and s.rtt_ns != NO_RTT
                            and abs(s.offset_ns) > s.rtt_ns / 2 + 1]
        else:
            node.map = clock_map(node.init, node.fin)
        out.nodes.append(node)
    return out


__all__ = ["Sync", "ClockMap", "Clocks", "Node", "align", "best", "clock_map", "boot_key", "syncs_of", "PHASES"]
