"""The probe's slowdown factor, as io-probing defines it: per operation and per window,
the window's median latency divided by the baseline's median (1 on a normal day), with
the window's p99 beside it. Pure functions: the probe (verbs/probe.py) gathers the
samples and prints, the history keeps the windows.

The baseline is the median over the last ``days`` of this probe's recorded windows (the
median of their medians: the history keeps windows, not samples), else, for a probe
with no history yet, the median of this run's own samples over its first hour, marked
so: a factor against a provisional baseline says how the file system moved since the
probe started, not how it compares with a normal day.

Several nodes' histories read together (``across_nodes``, ``ceiling probe --report``) tell the file
system slow for everyone from one node slow alone.
"""
from __future__ import annotations

import datetime
from array import array
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

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


TOGETHER = 0.75       # at least this share of the nodes with a factor above the threshold: the file system


def across_nodes(rows: Sequence[Sequence], threshold: float) -> Dict:
    """Several nodes' probe windows (results/store_probe.COLUMNS rows, from each node's own history) set on one
    time grid, and the spans where the file system was slow for all of them told from a node slow alone.

    The grid's step is the longest window among the rows (windows of other lengths fall in the step their
    start is in); per step, operation and node the largest factor of its windows there. A step in which at
    least two nodes have a factor is classed: ``together`` when two or more nodes, and at least TOGETHER of
    those with a factor, are above ``threshold`` (the file system: everyone feels it); ``alone`` when one
    node is above it and the others are not (that node: its client, its link, its load); ``some`` when
    several but fewer than TOGETHER are. Consecutive steps of one class and set of nodes make one span, with
    each operation's largest factor in it and the other nodes' range."""
    rows = [r for r in rows if r[11] is not None]
    out: Dict = {"threshold": threshold, "nodes": sorted({r[0] for r in rows}), "ops": sorted({r[2] for r in rows}),
                 "windows": len(rows), "per_node": [], "spans": []}
    if not rows:
        return out
    step = max(max(r[4] - r[3] for r in rows), 1.0)
    out.update({"from": min(r[3] for r in rows), "to": max(r[4] for r in rows), "step_s": step})
    cell: Dict[tuple, Dict[str, float]] = {}          # (step, op) -> host -> largest factor
    per: Dict[tuple, List[float]] = {}
    for host, _, op, start, end, *_, slow in rows:
        k = (int(start // step), op)
        cell.setdefault(k, {})
        cell[k][host] = max(cell[k].get(host, 0.0), slow)
        per.setdefault((host, op), []).append(slow)
    for (host, op), f in sorted(per.items()):
        out["per_node"].append({"node": host, "op": op, "windows": len(f), "median": float(np.median(f)),
                                "max": max(f), "above": sum(1 for x in f if x > threshold)})
    classed: Dict[int, Dict[tuple, Dict[str, float]]] = {}    # step -> (kind, hosts) -> op -> largest factor
    others: Dict[tuple, List[float]] = {}
    for (b, op), by in cell.items():
        if len(by) < 2:
            continue
        high = tuple(sorted(h for h, f in by.items() if f > threshold))
        if not high:
            continue
        kind = ("together" if len(high) >= 2 and len(high) >= TOGETHER * len(by) else
                "alone" if len(high) == 1 else "some")
        ops = classed.setdefault(b, {}).setdefault((kind, high), {})
        ops[op] = max(ops.get(op, 0.0), max(by[h] for h in high))
        others.setdefault((b, kind, high), []).extend(f for h, f in by.items() if h not in high)
    spans: List[Dict] = []
    for b in sorted(classed):
        for (kind, high), ops in sorted(classed[b].items()):
            rest = others.get((b, kind, high), [])
            last = next((s for s in spans if s["kind"] == kind and tuple(s["nodes"]) == high
                         and s["_last"] == b - 1), None)
            if last is None:
                last = {"kind": kind, "nodes": list(high), "start": b * step, "end": (b + 1) * step, "ops": {},
                        "others": [], "_last": b}
                spans.append(last)
            last["end"], last["_last"] = (b + 1) * step, b
            for op, f in ops.items():
                last["ops"][op] = max(last["ops"].get(op, 0.0), f)
            last["others"].extend(rest)
    for s in spans:
        rest = s.pop("others")
        s.pop("_last")
        s["others_range"] = [min(rest), max(rest)] if rest else None
    out["spans"] = sorted(spans, key=lambda s: (s["start"], s["kind"]))
    return out


def across_lines(res: Dict) -> List[str]:
    """``across_nodes``' result as lines a user can paste into a ticket."""
    def t(x: float) -> str:
        return datetime.datetime.fromtimestamp(x, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")

    if not res["windows"]:
        return ["ceiling probe --report: no probe windows with a slowdown factor in the histories read"]
    out = [f"ceiling probe --report: {len(res['nodes'])} node(s) ({', '.join(res['nodes'])}), {res['windows']} windows "
           f"from {t(res['from'])} to {t(res['to'])} UTC, on a {res['step_s']:g} s grid; a factor above "
           f"{res['threshold']:g} is slow", "",
           f"{'node':<16} {'operation':<10} {'windows':>8} {'median':>8} {'max':>8} {'slow':>6}"]
    for p in res["per_node"]:
        out.append(f"{p['node']:<16} {p['op']:<10} {p['windows']:>8} {p['median']:>7.2f}x {p['max']:>7.2f}x "
                   f"{p['above']:>6}")
    out.append("")
    if not res["spans"]:
        out.append("No window in which a node was slow while another had a factor for the same minutes.")
    words = {"together": "the file system: all slow together", "alone": "one node slow alone",
             "some": "some nodes slow, not most"}
    for s in res["spans"]:
        ops = ", ".join(f"{op} up to {f:.3g}x" for op, f in sorted(s["ops"].items()))
        rng = s["others_range"]
        rest = f"; the other nodes {rng[0]:.3g}-{rng[1]:.3g}x" if rng else ""
        out.append(f"{words[s['kind']]}: {', '.join(s['nodes'])} from {t(s['start'])} to {t(s['end'])} UTC: "
                   f"{ops}{rest}")
    return out
