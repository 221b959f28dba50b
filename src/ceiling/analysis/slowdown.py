"""The probe's slowdown factor, as io-probing defines it: per operation and per window,
the window's median latency divided by the baseline's median (1 on a normal day), with
the window's p99 beside it. Pure functions: the probe (verbs/probe.py) gathers the
samples and prints, the history keeps the windows.

The baseline is the median over the last ``days`` of this probe's recorded windows (the
median of their medians: the history keeps windows, not samples), else, for a probe
with no history yet, the median of this run's own samples over its first hour, marked
so: a factor against a provisional baseline says how the file system moved since the
probe started, not how it compares with a normal day.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np

FIRST_HOUR_S = 3600.0


@dataclass(frozen=True)
class Window:
    """One operation over one window."""

    op: str
    start: float                 # seconds since the epoch
    end: float
    n: int
    errors: int
    median_s: Optional[float]    # None: no operation succeeded in the window
    p99_s: Optional[float]
    baseline_s: Optional[float]
    baseline_kind: str           # "history" | "first hour" | "none"
    slowdown: Optional[float]

    def above(self, threshold: float) -> bool:
        return self.slowdown is not None and self.slowdown > threshold


def percentile(samples: Sequence[float], q: float) -> Optional[float]:
    """The q-th percentile (linear interpolation between order statistics, numpy's default); None when empty."""
    return float(np.percentile(np.asarray(samples, dtype=float), q)) if len(samples) else None


def window(op: str, start: float, end: float, samples: Sequence[float], errors: int,
           baseline_s: Optional[float], baseline_kind: str) -> Window:
    med = percentile(samples, 50)
    ratio = med / baseline_s if med is not None and baseline_s else None
    return Window(op, start, end, len(samples), errors, med, percentile(samples, 99),
                  baseline_s, baseline_kind if baseline_s else "none", ratio)


class Baseline:
    """Per operation: the history's median when there is one, else this run's first hour."""

    def __init__(self, history: Dict[str, float], first_hour_s: float = FIRST_HOUR_S):
        self.history = {k: v for k, v in history.items() if v and v > 0}
        self.first_hour_s = first_hour_s
        # the first hour's samples, 8 bytes each (an array, not a list of floats: 21,600 samples at one
        # iteration a second, 170 KiB instead of 700): what grows during a fresh probe's first hour, no longer
        self.early: Dict[str, "array[float]"] = {}
        self.t0: Optional[float] = None

    def add(self, t: float, op: str, sec: float) -> None:
        """A sample of this run at time t: part of the provisional baseline while in the first hour."""
        if self.t0 is None:
            self.t0 = t
        if op not in self.history and t - self.t0 < self.first_hour_s:
            self.early.setdefault(op, array("d")).append(sec)

    def of(self, op: str) -> "tuple[Optional[float], str]":
        if op in self.history:
            return self.history[op], "history"
        med = percentile(self.early.get(op, []), 50)
        return (med, "first hour") if med else (None, "none")
