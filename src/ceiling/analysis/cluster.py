"""Across the nodes of a cluster run: how each metric varies, which nodes stand
out, and which nodes are configured differently (nodeperf's listing, Intel
Cluster Checker's uniformity and the ``nhc-genconf`` + ``dshbak -c`` diff, in
one pass).

Rank 0 of a cluster job feeds one ``NodeDigest`` per node to ``Cluster.add`` as
the digests arrive and keeps only what the conclusions need: per metric one
(node, value) pair per node, per configuration key the nodes of each value, and
per check the nodes it warned or failed on. Time and memory are linear in the
nodes (benchmarks/cluster_analysis.py: 10,000 nodes).

A node is an outlier of a metric when it is worse than the metric's median
over the nodes (of two nodes: than the other one) by more than the family's threshold (``THRESHOLDS``: what an
administrator accepts, DGEMM within 5 %, STREAM within 10 %; ``--threshold``
sets one for all). Its robust z-score (Iglewicz and Hoaglin's modified z,
0.6745 (x - median) / MAD) says how unusual that is among these nodes, and its
own warnings and failures are its evidence (throttling, a DIMM missing, a
governor, competing load).
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..results.analysis import Uniformity
from ..results.base import Stats
from ..results.model import FAIL, HIGHER, OK, WARN, Finding, Metric, Peak, Run
from ..units import pct_sig

# Worse than the median by more than this fraction makes a node an outlier, by the metric's first word.
THRESHOLDS = {"clock": 0.05, "flops": 0.05, "dgemm": 0.05, "stream": 0.10, "bandwidth": 0.10,
              "latency": 0.10, "c2c": 0.20, "storage": 0.20, "net": 0.20}
DEFAULT_THRESHOLD = 0.10
MAD_Z = 0.6745                  # the modified z-score's constant (Iglewicz and Hoaglin, 1993)
SHOWN_NODES = 5                 # node names in a finding's title; every one is in its data
PROBLEMS = (WARN, FAIL)
PEAK_AGREE = 0.01               # nodes' peaks this close are one peak (a measured clock's last digits)


@dataclass
class NodeDigest:
    """What rank 0 keeps of one node's run: small, whatever the run held."""

    name: str
    metrics: Dict[str, Dict[str, Any]] = field(default_factory=dict)   # name -> value, unit, better, peak
    problems: List[Tuple[str, str, str]] = field(default_factory=list)  # (finding id, status, title)
    inventory: Dict[str, str] = field(default_factory=dict)            # machine/inventory.py's keys
    partial: str = ""                                                  # why the node's run is partial

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "metrics": self.metrics, "problems": [list(p) for p in self.problems],
                "inventory": self.inventory, "partial": self.partial}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "NodeDigest":
        """A digest another rank sent; ValueError for one not of this shape (``Cluster.add``
        then trusts it)."""
        try:
            metrics = {str(k): {"value": m["value"], "unit": str(m.get("unit", "")),
                                "better": str(m.get("better", HIGHER)),
                                "peak": [float(m["peak"][0]), str(m["peak"][1]), str(m["peak"][2])]
                                if m.get("peak") else None,
                                **({"disturbed": str(m["disturbed"])} if m.get("disturbed") else {}),
                                **({"env_caps": [{str(a): b if isinstance(b, (int, float)) else str(b)
                                                  for a, b in dict(c).items()} for c in m["env_caps"]]}
                                   if m.get("env_caps") else {})}
                       for k, m in dict(d.get("metrics") or {}).items()}
            return cls(str(d["name"]), metrics,
                       [(str(a), str(b), str(c)) for a, b, c in d.get("problems") or []],
                       {str(k): str(v) for k, v in dict(d.get("inventory") or {}).items()},
                       str(d.get("partial") or ""))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise ValueError(f"not a node's digest ({type(e).__name__}: {e})") from None


def digest(run: Run, name: str, inventory: Dict[str, str]) -> NodeDigest:
    """The digest of one node's run: its valid figures, its warnings and failures."""
    metrics = {}
    for m in run.metrics:
        if m.valid and m.value is not None:
            peak = m.peak
            metrics[m.name] = {"value": m.value, "unit": m.unit, "better": m.better,
                               "peak": [peak.value, peak.unit, peak.provenance] if peak and peak.known else None}
            if m.context.get("disturbed"):      # its step met competing load on that node
                metrics[m.name]["disturbed"] = str(m.context["disturbed"])
            caps = m.context.get("env_caps")
            if isinstance(caps, list) and caps:    # an environment variable lowered it on that node
                metrics[m.name]["env_caps"] = [c for c in caps if isinstance(c, dict)]
    problems = [(f.id, f.status, f.title) for f in run.findings if f.status in PROBLEMS]
    return NodeDigest(name, metrics, problems, dict(inventory), run.partial_reason if run.partial else "")


def threshold_of(metric: str, override: Optional[float] = None) -> float:
    return override if override is not None else THRESHOLDS.get(metric.split(".", 1)[0], DEFAULT_THRESHOLD)


def _names(nodes: List[str]) -> str:
    more = len(nodes) - SHOWN_NODES
    return ", ".join(nodes[:SHOWN_NODES]) + (f" and {more} more" if more > 0 else "")


class Cluster:
    """The nodes' digests, added one at a time; the conclusions, asked for at the end."""

    def __init__(self, threshold: Optional[float] = None):
        self.threshold = threshold
        self.nodes: List[str] = []
        self.values: Dict[str, List[Tuple[str, float]]] = defaultdict(list)
        self.kind: Dict[str, Tuple[str, str]] = {}                    # metric -> (unit, better)
        self.peaks: Dict[str, set] = defaultdict(set)                 # metric -> {(value, unit, provenance)}
        self.config: Dict[str, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
        self.checks: Dict[Tuple[str, str], List[Tuple[str, str]]] = defaultdict(list)
        self.problems_of: Dict[str, List[str]] = {}                   # node -> "id (status)" of its problems
        self.partial: Dict[str, str] = {}
        self.disturbed: Dict[str, Dict[str, str]] = defaultdict(dict)   # metric -> node -> the load's evidence
        # metric -> node -> the variables that lowered it
        self.env_caps: Dict[str, Dict[str, list]] = defaultdict(dict)

    def add(self, d: NodeDigest) -> None:
        self.nodes.append(d.name)
        for name, m in d.metrics.items():
            v = m.get("value")
            if not isinstance(v, (int, float)) or v != v:
                continue
            self.values[name].append((d.name, float(v)))
            if m.get("disturbed"):
                self.disturbed[name][d.name] = str(m["disturbed"])
            if m.get("env_caps"):
                self.env_caps[name][d.name] = list(m["env_caps"])
            self.kind.setdefault(name, (str(m.get("unit", "")), str(m.get("better", HIGHER))))
            p = m.get("peak")
            self.peaks[name].add(tuple(p) if p else None)
        for key, value in d.inventory.items():
            self.config[key][value].append(d.name)
        for fid, status, title in d.problems:
            self.checks[(fid, status)].append((d.name, title))
        if d.problems:
            self.problems_of[d.name] = [f"{fid} {status}: {title}" for fid, status, title in d.problems]
        if d.partial:
            self.partial[d.name] = d.partial

    # -- per metric ---------------------------------------------------------------

    def uniformity(self) -> List[Uniformity]:
        out = []
        for name, pairs in self.values.items():
            unit, better = self.kind[name]
            vals = [v for _, v in pairs]
            med = statistics.median(vals)
            mad = statistics.median(abs(v - med) for v in vals)
            limit = threshold_of(name, self.threshold)
            # Two nodes have no majority: the slower is measured against the faster one, not against
            # a median halfway between them, and the finding says which cannot be told from figures.
            ref, than = med, "median"
            if len(pairs) == 2:
                ref_node, ref = max(pairs, key=lambda p: p[1] if better == HIGHER else -p[1])
                than = ref_node
            outliers = []
            for node, v in pairs:
                worse = (ref - v if better == HIGHER else v - ref) / ref if ref else 0.0
                if worse > limit:
                    z = MAD_Z * (v - med) / mad if mad and len(pairs) > 2 else None
                    outliers.append({"node": node, "value": v, "z": z, "worse": worse, "than": than,
                                     "evidence": self.problems_of.get(node, [])})
            outliers.sort(key=lambda o: -o["worse"])
            out.append(Uniformity(metric=name, unit=unit, better=better, values=dict(pairs), median=med,
                                  min=min(vals), max=max(vals), spread=(max(vals) - min(vals)) / med if med else None,
                                  mad=mad, outliers=outliers))
        return sorted(out, key=lambda u: u.metric)

    def metrics(self) -> List[Metric]:
        """One metric per name: the median over the nodes, every node's value in ``values``.

        Nodes whose figure met competing load are left out of the median; where every node's
        did, the median is theirs and the metric is marked ``disturbed``, as a node's own is
        (no verdict rests on it, no summary shows it as the cluster's)."""
        out = []
        for name, pairs in sorted(self.values.items()):
            unit, better = self.kind[name]
            vals = [v for _, v in pairs]
            st = Stats.of(vals, better)
            busy = self.disturbed.get(name, {})
            quiet = [v for node, v in pairs if node not in busy]
            value = statistics.median(quiet) if quiet else st.median
            context: Dict[str, Any] = {"across": "nodes", "nodes": len(vals), "y_stat": "median over the nodes",
                                       "values_are": "one per node, in the order the nodes reported"}
            if busy:
                nodes = sorted(busy)
                said = f"{len(nodes)} of {len(vals)} nodes met competing load ({_names(nodes)}: {busy[nodes[0]]})"
                if quiet:
                    context["y_stat"] = f"median over the {len(quiet)} nodes that did not meet competing load"
                    context["left_out"] = said
                else:
                    context["disturbed"] = said
            capped = self.env_caps.get(name, {})
            if capped:      # the environment, not the nodes: no cluster verdict rests on it (summary.env_caps)
                first = sorted(capped)[0]
                context["env_caps"] = [dict(c, nodes=sorted(capped)) for c in capped[first]]
            peak, note = self._peak(name)
            out.append(Metric(name=name, value=value, unit=unit, better=better, stats=st, values=vals, peak=peak,
                              efficiency=value / peak.value if peak and peak.value else None, note=note,
                              context=context))
        return out

    def _peak(self, name: str) -> Tuple[Optional[Peak], str]:
        """The nodes' common peak: theirs when they agree within PEAK_AGREE (peaks from a measured
        clock differ in the last digits), else none, and a note."""
        peaks = self.peaks[name]
        if not peaks or None in peaks:
            return None, ("" if peaks == {None} else "some nodes know no peak: efficiency per node is in each "
                          "node's run")
        vals = sorted(p[0] for p in peaks)
        units = {p[1] for p in peaks}
        if len(units) == 1 and vals[-1] <= vals[0] * (1 + PEAK_AGREE):
            mid = sorted(peaks)[len(peaks) // 2]
            prov = mid[2] if len(peaks) == 1 else (f"{mid[2]} (this node's; the {len(peaks)} nodes' peaks agree "
                                                   f"within {vals[-1] / vals[0] - 1:.1%})")
            return Peak(mid[0], mid[1], prov), ""
        return None, (f"the nodes' peaks differ ({vals[0]:.4g} to {vals[-1]:.4g}): efficiency per node is in each "
                      "node's run")

    # -- findings -----------------------------------------------------------------

    def findings(self, uniformity: Optional[List[Uniformity]] = None) -> List[Finding]:
        n = len(self.nodes)
        out = [self._outlier(u, n) for u in (uniformity if uniformity is not None else self.uniformity())
               if u.outliers]
        out += self._config_findings(n)
        out += [self._check(fid, status, hits, n) for (fid, status), hits in sorted(self.checks.items())]
        if self.partial:
            names = sorted(self.partial)
            out.append(Finding(id="cluster.partial", status=WARN,
                               title=f"{len(names)} of {n} nodes stopped before the end: {_names(names)}",
                               evidence="; ".join(f"{k}: {self.partial[k]}" for k in names[:20]),
                               data={"nodes": self.partial}))
        return out

    def _outlier(self, u: Uniformity, n: int) -> Finding:
        limit = threshold_of(u.metric, self.threshold)
        worst = u.outliers[0]
        names = [o["node"] for o in u.outliers]
        direction = "below" if u.better == HIGHER else "above"
        if worst["than"] == "median":
            # A threshold is said with its own digits (--threshold 0.1: "0.1%", not "0%"), the
            # figure against it with enough to tell them apart.
            title = (f"{u.metric}: {_names(names)} {'is' if len(names) == 1 else 'are'} more than "
                     f"{pct_sig(limit)} {direction} the median of {n} nodes ({worst['node']}: "
                     f"{worst['value']:.4g} vs {u.median:.4g} {u.unit}, {pct_sig(worst['worse'], 3)} worse)")
        else:
            other = u.values[worst["than"]]
            title = (f"{u.metric}: {worst['node']} is {pct_sig(worst['worse'], 3)} {direction} {worst['than']} "
                     f"({worst['value']:.4g} vs {other:.4g} {u.unit}; threshold {pct_sig(limit)}); with two nodes the "
                     "figures alone cannot tell which one is off, so read each node's own findings")
        ev = []
        for o in u.outliers[:20]:
            z = f", robust z {o['z']:.1f}" if o["z"] is not None else ""
            own = f"; its own findings: {' | '.join(o['evidence'][:3])}" if o["evidence"] else "; no finding of its own"
            ev.append(f"{o['node']} {o['value']:.4g} {u.unit} ({o['worse']:.1%} worse than "
                      f"{'the median' if o['than'] == 'median' else o['than']}{z}){own}")
        return Finding(id=f"cluster.outlier.{u.metric}", status=WARN, title=title, evidence="; ".join(ev),
                       why="Nodes of one cluster should measure alike; a slow node sets the pace of every "
                           "tightly coupled job placed on it.",
                       fix="Look at the node's own findings first (throttling, memory, governor, competing "
                           "load); drain it until the figure is back within the threshold.",
                       data={"metric": u.metric, "median": u.median, "threshold": limit, "outliers": u.outliers})

    def _config_findings(self, n: int) -> List[Finding]:
        from ..machine.inventory import TITLES
        out = []
        for key, by_value in self.config.items():
            if len(by_value) < 2:
                continue
            ranked = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            majority, others = ranked[0], ranked[1:]
            odd = [node for _, nodes in others for node in nodes]
            words = TITLES.get(key, key)
            title = (f"{words} differs on {len(odd)} of {n} nodes: {_names(odd)} "
                     f"({'; '.join(f'{v!s}' for v, _ in others[:3])}) where {len(majority[1])} have {majority[0]}")
            out.append(Finding(id=f"cluster.config.{key}", status=WARN, title=title,
                               evidence="; ".join(f"{v}: {len(nodes)} node(s) ({_names(nodes)})"
                                                  for v, nodes in ranked),
                               why="Nodes configured differently perform differently, and a job spread over them "
                                   "runs at the pace of the slowest.",
                               fix="Make the odd nodes like the majority (or the majority like them), then measure "
                                   "again.",
                               data={"key": key, "majority": majority[0], "majority_nodes": len(majority[1]),
                                     "others": {v: nodes for v, nodes in others}}))
        return out

    def _check(self, fid: str, status: str, hits: List[Tuple[str, str]], n: int) -> Finding:
        names = [node for node, _ in hits]
        where = "every node" if len(names) == n else f"{len(names)} of {n} nodes"
        return Finding(id=f"cluster.check.{fid}", status=status,
                       title=f"{hits[0][1]} ({where}: {_names(names)})",
                       evidence="; ".join(f"{node}: {title}" for node, title in hits[:20]),
                       data={"check": fid, "nodes": {node: title for node, title in hits}})


def _figure(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _g(v: Any) -> str:
    return f"{v:.4g}" if _figure(v) else "-"


def ranked(u: Uniformity) -> List[Tuple[str, float]]:
    """(node, value) best first; a node without a figure (a stored run's null) is left out."""
    pairs = [(n, v) for n, v in (u.values or {}).items() if _figure(v)]
    return sorted(pairs, key=lambda kv: -kv[1] if u.better == HIGHER else kv[1])


def summary_line(u: Uniformity) -> str:
    """'median 95.1 Gflop/s, min 80.2 (n07), max 97.0 (n02), spread 17%'."""
    rows = sorted(ranked(u), key=lambda kv: kv[1])
    lo = f" ({rows[0][0]})" if rows else ""
    hi = f" ({rows[-1][0]})" if rows else ""
    spread = f", spread {u.spread:.1%}" if _figure(u.spread) else ""
    return f"median {_g(u.median)} {u.unit}, min {_g(u.min)}{lo}, max {_g(u.max)}{hi}{spread}"


def status_of(findings: Iterable[Finding]) -> str:
    """The worst status among findings (the cluster's verdict for --nhc)."""
    order = {OK: 0, WARN: 1, FAIL: 2}
    return max((f.status for f in findings), key=lambda s: order.get(s, 0), default=OK)
