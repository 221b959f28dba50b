"""Measured curves and matrices, and the figures a bench states from them.

Per-size curves of a message-size sweep (network), and CPU-node x
memory-node matrices (NUMA bandwidth and latency).

Measurement-side statistics: the network bench (bench/network.py) needs
these numbers while it measures, to name the plateau, n½ and a drop at the
largest sizes in its metrics and findings, so they live at the bottom of the
layering, where a bench and any later analysis can both use them.

The rules (IMB- and OSU-style curves of one value per timed block):
plateau = the size with the highest median bandwidth (its best block is the
metric); n½ = the smallest size whose median reaches half of the plateau's
median; a drop = the largest size's median more than DROP below the
plateau's; latency = per block, the mean one-way time of LATENCY_SIZES. For a NUMA
matrix (rows: CPU nodes, columns: memory nodes, the diagonal local):
the NUMA factor = the worst remote cell over the local cell of its row;
local over remote = mean of the diagonal over mean of the rest.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

LATENCY_SIZES = (0, 1, 2, 4, 8)
DROP = 0.10


@dataclass
class Curve:
    """Per-size results of one pair measurement: one value per timed block."""

    sizes: List[int] = field(default_factory=list)
    per_block: Dict[int, List[float]] = field(default_factory=dict)   # size -> values in the curve's unit
    invalid: List[str] = field(default_factory=list)

    def median(self, s: int) -> float:
        return statistics.median(self.per_block[s])


def plateau(curve: Curve) -> Tuple[Optional[int], Optional[float]]:
    """(size, median) of the size with the highest median bandwidth."""
    pts = [(curve.median(s), s) for s in curve.sizes if s > 0 and curve.per_block.get(s)]
    if not pts:
        return None, None
    med, size = max(pts)
    return size, med


def n_half(curve: Curve, plateau_median: float) -> Optional[int]:
    """The smallest size whose median bandwidth reaches half of the plateau's."""
    for s in curve.sizes:
        if s > 0 and curve.per_block.get(s) and curve.median(s) >= 0.5 * plateau_median:
            return s
    return None


def large_drop(curve: Curve, plateau_median: float) -> Optional[float]:
    """The largest size's median as a fraction of the plateau, when it is more than DROP below it."""
    top = max((s for s in curve.sizes if curve.per_block.get(s)), default=None)
    if top is None or not plateau_median:
        return None
    frac = curve.median(top) / plateau_median
    return frac if frac < 1.0 - DROP else None


def latency_values(lat: Curve) -> Tuple[List[float], List[int]]:
    """Per block: the mean one-way time of the LATENCY_SIZES measured."""
    sizes = [s for s in LATENCY_SIZES if lat.per_block.get(s)]
    if not sizes:
        return [], []
    nblocks = min(len(lat.per_block[s]) for s in sizes)
    return [statistics.fmean(lat.per_block[s][i] for s in sizes) for i in range(nblocks)], sizes


# -- NUMA matrices --------------------------------------------------------------------

def numa_factor(matrix: Sequence[Sequence[Optional[float]]]) -> Tuple[Optional[float], Dict[str, Any]]:
    """Worst remote latency over the local latency of the same CPU node, and where it is."""
    best: Optional[float] = None
    where: Dict[str, Any] = {}
    for i, row in enumerate(matrix):
        local = row[i] if i < len(row) else None
        if not local:
            continue
        for j, v in enumerate(row):
            if j != i and v is not None and (best is None or v / local > best):
                best = v / local
                where = {"cpu_node_index": i, "memory_node_index": j, "local_ns": local, "remote_ns": v}
    return best, where


def local_over_remote(matrix: Sequence[Sequence[Optional[float]]]) -> Optional[float]:
    """Mean of the diagonal (local) over the mean of the other cells (remote); None without both."""
    local = [matrix[i][i] for i in range(len(matrix)) if i < len(matrix[i]) and matrix[i][i] is not None]
    remote = [v for i, r in enumerate(matrix) for j, v in enumerate(r) if i != j and v is not None]
    if not (local and remote):
        return None
    return (sum(local) / len(local)) / (sum(remote) / len(remote))
