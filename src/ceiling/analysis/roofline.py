"""The roofline of a node from its measured metrics (Williams, Waterman and
Patterson, "Roofline: an insightful visual performance model", CACM 2009).

Compute roofs are horizontal (Gflop/s); bandwidth roofs are diagonal
(GB/s × flop/byte). The measured roofs come from flops.dp.node, bandwidth.l1/
l2/l3 and stream.triad (DRAM); the theoretical ones from the peaks those
metrics, or the machine, carry. A ridge point is the arithmetic intensity
(flop/byte) where a bandwidth roof meets a compute roof: a kernel below it is
bandwidth-bound on that level, above it compute-bound.

Measured bandwidths should fall from L1 to DRAM. Where a level nearer the cores
measured clearly less than one behind it (by more than CV_WARN, the spread
called noise), ``inversions`` says so in a note of the analysis: the lower figure
is a limit of its measurement, not of the hardware, and the plot draws it as
measured.

``ceilings`` computes it once; ``stored`` turns it into the Run's record
(results.analysis.Roofline) and ``from_stored`` gives a stored one back its
look-ups (roof, ridge, attainable), so a report draws what was recorded.
``of_node`` makes the same roofline from this node's newest figures in the
history (a profiled program's run measures none), each roof named with its run
and date; ``place`` puts a point (an application's intensity and flop rate) on
it: the roof that bounds it, its share of that roof and the next roof above.
"""
from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..results import analysis as stored_analysis
from ..results.base import CV_WARN
from ..results.machine_view import MachineFacts
from ..results.model import HIGHER, Metric, Peak, Run
from ..units import count, figure, num, size

_GFLOPS = {"Gflop/s": 1.0, "Tflop/s": 1e3, "Mflop/s": 1e-3}
_GBS = {"GB/s": 1.0, "TB/s": 1e3, "MB/s": 1e-3}

# (metric, label of the measured roof), bandwidth roofs from the fastest level down.
_BANDWIDTH = (("bandwidth.l1", "L1 load, measured"),
              ("bandwidth.l2", "L2 load, measured"),
              ("bandwidth.l3", "L3 load, measured"),
              ("stream.triad", "DRAM (STREAM triad), measured"))


@dataclass(frozen=True)
class Roof:
    name: str        # the metric it comes from, or "peak:<Machine.peaks key>" for a theoretical roof
    label: str       # words for a legend
    value: float     # Gflop/s for a compute roof, GB/s for a bandwidth roof
    measured: bool   # False: a theoretical peak
    source: str      # "measured, best of N" or the peak's provenance


@dataclass(frozen=True)
class Ridge:
    compute: str         # Roof.name of the compute roof
    bandwidth: str       # Roof.name of the bandwidth roof
    intensity: float     # flop/byte where the two roofs meet


@dataclass(frozen=True)
class Roofline:
    compute: Tuple[Roof, ...]
    bandwidth: Tuple[Roof, ...]
    ridges: Tuple[Ridge, ...]
    missing: Tuple[str, ...]      # one line per roof that could not be drawn, with the reason

    @property
    def empty(self) -> bool:
        """True when there is not one compute and one bandwidth roof to draw."""
        return not (self.compute and self.bandwidth)

    def roof(self, name: str) -> Optional[Roof]:
        for r in self.compute + self.bandwidth:
            if r.name == name:
                return r
        return None

    def ridge(self, compute: str, bandwidth: str) -> Optional[float]:
        """flop/byte where the named roofs meet; None when either is absent."""
        for r in self.ridges:
            if r.compute == compute and r.bandwidth == bandwidth:
                return r.intensity
        return None

    def attainable(self, intensity: float, compute: Optional[str] = None,
                   bandwidth: Optional[str] = None) -> Optional[float]:
        """min(compute, bandwidth × intensity) in Gflop/s, for the named roofs
        (default: the lowest measured compute roof and the DRAM roof)."""
        c = self.roof(compute) if compute else _first(self.compute, measured=True)
        b = self.roof(bandwidth) if bandwidth else (self.roof("stream.triad") or _first(self.bandwidth))
        if c is None or b is None:
            return None
        return min(c.value, b.value * intensity)


def _first(roofs: Tuple[Roof, ...], measured: Optional[bool] = None) -> Optional[Roof]:
    for r in roofs:
        if measured is None or r.measured == measured:
            return r
    return roofs[0] if roofs else None


def _measured(run: Run, name: str, units: Dict[str, float], missing: List[str]) -> Optional[float]:
    m = run.metric(name)
    if m is None or m.value is None:
        missing.append(f"{name}: not measured")
        return None
    if not m.valid:
        missing.append(f"{name}: failed validation, not used")
        return None
    if m.unit not in units:
        missing.append(f"{name}: unit {m.unit!r} is not a rate this roofline knows")
        return None
    v = _rate(m.value, units[m.unit])
    if v is None:
        missing.append(f"{name}: {num(m.value)} {m.unit} is not a rate above zero")
    return v


def _rate(value: object, scale: float) -> Optional[float]:
    """``value`` × ``scale`` when it is a finite rate above zero (a roof on log axes); else None.

    A run read back from a file may hold 0, a negative or an absurd figure (the schema
    allows any number): such a roof would make a ridge of infinity or a log of zero.
    """
    v = figure(value)
    if v is None:
        return None
    v *= scale
    return v if 1e-300 < v < 1e300 else None


def _peak(m: Optional[Metric], run: Run, key: str) -> Peak:
    """The metric's own peak when known, else the machine's, else an unknown one."""
    if m is not None and m.peak is not None and m.peak.known:
        return m.peak
    mp = MachineFacts(run.machine).peak(key)
    if mp is not None:
        return mp
    if m is not None and m.peak is not None:
        return m.peak
    return Peak(None, "", "not in the machine's peaks")


def _source(m: Metric) -> str:
    n = m.stats.n if m.stats is not None else len(m.values)
    return f"measured, best of {n}" if n else "measured"


def ceilings(run: Run) -> Roofline:
    """Compute roofs, bandwidth roofs and their ridge points from a run's metrics."""
    missing: List[str] = []
    compute: List[Roof] = []
    bandwidth: List[Roof] = []

    flops = run.metric("flops.dp.node")
    v = _measured(run, "flops.dp.node", _GFLOPS, missing)
    if v is not None:
        compute.append(Roof("flops.dp.node", "DP flops, measured", v, True, _source(flops)))
    p = _peak(flops, run, "flops.dp.node")
    v = _rate(p.value, _GFLOPS[p.unit]) if p.known and p.unit in _GFLOPS else None
    if v is not None:
        compute.append(Roof("peak:flops.dp.node", "DP peak, theoretical", v, False, p.provenance))
    elif p.known:
        missing.append(f"theoretical DP peak: {num(p.value)} {p.unit} is not a rate above zero ({p.provenance})")
    else:
        missing.append(f"theoretical DP peak: {p.provenance or 'unknown'}")

    for name, text in _BANDWIDTH:
        v = _measured(run, name, _GBS, missing)
        if v is not None:
            bandwidth.append(Roof(name, text, v, True, _source(run.metric(name))))
    p = _peak(run.metric("stream.triad"), run, "membw.node")
    v = _rate(p.value, _GBS[p.unit]) if p.known and p.unit in _GBS else None
    if v is not None:
        bandwidth.append(Roof("peak:membw.node", "DRAM peak, theoretical", v, False, p.provenance))
    elif p.known:
        missing.append(f"theoretical memory bandwidth: {num(p.value)} {p.unit} is not a rate above zero "
                       f"({p.provenance})")
    else:
        missing.append(f"theoretical memory bandwidth: {p.provenance or 'unknown'}")

    ridges = tuple(Ridge(c.name, b.name, c.value / b.value)
                   for c in compute for b in bandwidth if figure(c.value / b.value))
    return Roofline(tuple(compute), tuple(bandwidth), ridges, tuple(missing))


# Short names of the measured bandwidth roofs, for the inversion note (nearest the cores first).
_LEVEL = {"bandwidth.l1": "L1", "bandwidth.l2": "L2", "bandwidth.l3": "L3", "stream.triad": "DRAM (STREAM triad)"}
INVERSION_NOTE = "Roofline: measured bandwidths invert the memory hierarchy"


def _how(m: Optional[Metric]) -> str:
    """The threads and working set a bandwidth was measured with, where the metric says."""
    if m is None:
        return ""
    threads = count(m.context.get("threads"))
    per = figure(m.context.get("per_thread_bytes"))
    whole = figure(m.context.get("working_set_bytes"))
    parts = ([f"{threads} thread{'s' if threads != 1 else ''}"] if threads is not None else []) + \
        ([f"a working set of {size(whole)}" + (f", {size(per)} per thread" if per is not None else "")]
         if whole is not None else [])
    return f"{m.name}: {', '.join(parts)}" if parts else ""


def inversions(run: Run, rl: Roofline) -> List[str]:
    """A note for the analysis when a measured level nearer the cores is clearly below one
    behind it (L1 under L3): which levels, by how much, and why the lower figure is more
    likely the measurement's limit than the hardware's. Empty when the levels fall in order."""
    roofs = [r for r in rl.bandwidth if r.measured and r.name in _LEVEL]
    pairs = [(a, b) for i, a in enumerate(roofs) for b in roofs[i + 1:] if a.value < b.value * (1 - CV_WARN)]
    if not pairs:
        return []
    low = list(dict.fromkeys(a.name for a, _ in pairs))
    said = "; ".join(f"{_LEVEL[a]} {num(rl.roof(a).value)} GB/s is below "
                     + " and ".join(f"{_LEVEL[b.name]} {num(b.value)} GB/s" for x, b in pairs if x.name == a)
                     for a in low)
    how = "; ".join(filter(None, (_how(run.metric(n)) for n in dict.fromkeys(low + [b.name for _, b in pairs]))))
    return [f"{INVERSION_NOTE}: {said}. A level nearer the cores cannot deliver less than one behind it, so "
            f"the lower figure ({', '.join(low)}) is likely a limit of its measurement, not of the hardware: too "
            "few threads to load that level, a working set so small that each pass's fixed cost (a call and "
            "a reduction) weighs on its time, or other load while it ran"
            + (f" ({how})" if how else "") + ". The roofline draws the figures as measured."]


def stored(rl: Roofline, points: Sequence[stored_analysis.RooflinePoint] = ()) -> stored_analysis.Roofline:
    """The record kept in Run.analysis: every roof with its kind and unit, the ridges, what is missing,
    and the ``points`` placed on it (an application's)."""
    roofs = ([stored_analysis.Roof(r.name, r.label, "compute", r.value, "Gflop/s", r.measured, r.source)
              for r in rl.compute]
             + [stored_analysis.Roof(r.name, r.label, "bandwidth", r.value, "GB/s", r.measured, r.source)
                for r in rl.bandwidth])
    ridges = [stored_analysis.Ridge(r.compute, r.bandwidth, r.intensity) for r in rl.ridges]
    return stored_analysis.Roofline(roofs=roofs, ridges=ridges, missing=list(rl.missing), points=list(points))


def from_stored(rec: stored_analysis.Roofline) -> Roofline:
    """A stored roofline with its look-ups again."""
    def roof(r) -> Roof:
        return Roof(r.name, r.label, r.value, r.measured, r.source)
    return Roofline(tuple(roof(r) for r in rec.roofs if r.kind == "compute"),
                    tuple(roof(r) for r in rec.roofs if r.kind == "bandwidth"),
                    tuple(Ridge(r.compute, r.bandwidth, r.intensity) for r in rec.ridges),
                    tuple(rec.missing))


# -- this node's roofline from the history, and a point placed on it --------------

Row = Tuple[str, Optional[float], str, str, str]     # name, value, unit, started, run_id (store.latest_metrics)
# what measures each roof, for a roof that is missing
MEASURE = {"flops.dp.node": "ceiling bench compute", "stream.triad": "ceiling bench memory",
           "bandwidth.l1": "ceiling bench memory", "bandwidth.l2": "ceiling bench memory",
           "bandwidth.l3": "ceiling bench memory"}


def of_node(machine: Dict[str, Any], lookup: Callable[[str], Sequence[Row]],
            measure: Optional[Callable[[str], Tuple[Optional[Row], str]]] = None) -> Roofline:
    """The roofline of this node from the newest figure of each roof its history holds (``lookup``:
    prefix -> rows), the theoretical roofs from ``machine`` (Run.machine); each measured roof's
    source names its run and date. ``measure``: asked for stream.triad when the history lacks it
    (a profile's quick measurement), its words then the source."""
    rows: Dict[str, Row] = {}
    for name in ("flops.dp.node", "bandwidth.l", "stream.triad"):
        for r in lookup(name):
            if r[0] in MEASURE and r[1] is not None:
                rows.setdefault(r[0], r)
    said: Dict[str, str] = {n: f"this node's history: {n} = {r[1]:.4g} {r[2]}, measured {r[3][:10]} "
                               f"(run {r[4][:12]})" for n, r in rows.items()}
    if "stream.triad" not in rows and measure is not None:
        row, how = measure("stream.triad")
        if row is not None and row[1] is not None:
            rows["stream.triad"], said["stream.triad"] = row, f"measured now: {how}"
    metrics = [Metric.measured(n, [r[1]], r[2], HIGHER) for n, r in rows.items()]
    rl = ceilings(Run(tool_version="", host="", started="", command=[], machine=machine, metrics=metrics))
    missing = tuple(f"{m}; {MEASURE[m.split(':')[0]]} measures it" if m.split(":")[0] in MEASURE else m
                    for m in rl.missing)
    return Roofline(tuple(_replace(r, source=said.get(r.name, r.source)) for r in rl.compute),
                    tuple(_replace(r, source=said.get(r.name, r.source)) for r in rl.bandwidth), rl.ridges, missing)


def _at(r: Roof, intensity: float, compute: bool) -> float:
    return r.value if compute else r.value * intensity


def place(rl: Roofline, intensity: float, gflops: float) -> Dict[str, Any]:
    """A point (``intensity`` flop/byte, ``gflops`` Gflop/s) against the measured roofs: the one
    that bounds it (the lower of the measured DP flop roof and the DRAM roof at its intensity),
    its share of that roof (``of_roof``) and the distance to it (1 - share), the ridge, and the
    next roof above at that intensity (the lowest roof, measured or theoretical, above the bound:
    a cache level's bandwidth, the compute roof or a peak; a bandwidth roof counts where it lies
    under the highest compute roof, as the plot draws it); ``missing`` instead, with what
    measures each, when a measured roof it needs is not there."""
    out: Dict[str, Any] = {"intensity": intensity, "gflops": gflops}
    c = _first(rl.compute, measured=True)
    c = c if c is not None and c.measured else None
    b = rl.roof("stream.triad")
    need = ([] if c else ["the measured DP flop roof (flops.dp.node; ceiling bench compute measures it)"]) + \
        ([] if b else ["the measured DRAM roof (stream.triad; ceiling bench memory measures it)"])
    if need:
        out["missing"] = need
        return out
    top = max(r.value for r in rl.compute)
    memory = b.value * intensity < c.value
    bound = b if memory else c
    roof = _at(bound, intensity, not memory)
    out.update(bound=bound.name, bound_label=bound.label, bound_kind="memory" if memory else "compute",
               roof_gflops=roof, of_roof=gflops / roof, distance=1 - gflops / roof, ridge=c.value / b.value,
               bound_source=bound.source)
    cands = [(r.value, r) for r in rl.compute] + \
        [(r.value * intensity, r) for r in rl.bandwidth if r.value * intensity <= top]
    above = sorted(((v, r) for v, r in cands if v > roof * (1 + 1e-9)), key=lambda x: x[0])
    if above:
        v, r = above[0]
        out["next"] = {"name": r.name, "label": r.label, "gflops": v, "measured": r.measured,
                       "above": v / roof - 1}
    return out
