"""Everything the analysis layer concludes about a Run, computed once and stored.

A verb calls ``analyse`` after measuring and before delivering; the store, the
JSON document and every report then read ``Run.analysis`` and compute nothing.
A document from before the analysis was stored (schema 1) is analysed when it
is read back for showing (``ensure``).
"""
from __future__ import annotations

from ..results.analysis import Analysis
from ..results.model import Run
from . import coverage, roofline, summary


def analyse(run: Run) -> Analysis:
    """The verdict, how figures are shown (disturbed, unstable), the roofline (and a note where its
    measured bandwidths are out of order), and what each expected plot needs (why absent, cache
    capacities)."""
    rl = roofline.ceilings(run)
    return Analysis(verdict=summary.verdict(run), roofline=roofline.stored(rl),
                    notes=roofline.inversions(run, rl),
                    absent=coverage.absent(run), capacities=coverage.capacities(run),
                    figures=summary.figures(run))


def ensure(run: Run) -> Run:
    """``run`` with its analysis stored, computing it only when the run has none (older documents)."""
    if run.analysis.empty:
        run.analysis = analyse(run)
    return run
