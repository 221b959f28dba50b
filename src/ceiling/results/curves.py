"""Per-size curves of a message-size sweep and the figures taken from them.

Measurement-side statistics: the network bench (bench/network.py) needs
these numbers while it measures, to name the plateau, n½ and a drop at the
largest sizes in its metrics and findings, so they live at the bottom of the
layering, where a bench and any later analysis can both use them.

The rules (IMB- and OSU-style curves of one value per timed block):
plateau = the size with the highest median bandwidth (its best block is the
metric); n½ = the smallest size whose median reaches half of the plateau's
median; a drop = the largest size's median more than DROP below the
plateau's; latency = per block, the mean one-way time of LATENCY_SIZES.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

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
