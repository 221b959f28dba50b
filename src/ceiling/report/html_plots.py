"""The plots of the HTML report: each series as inline SVG (report/svg.py), lines
of one kind grouped on shared axes, heat maps, and the roofline.

Everything drawn comes from the Run as recorded: the series, and what the
analysis stored about them (why a series is absent, the cache capacities of a
working-set axis, the roofline). A series that is absent is not drawn as empty
axes: its place gets one line, "not measured: <reason>".
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis import roofline as _roofline
from ..results.model import LOWER, Run, Series
from ..results.placements import PLACEMENT_TITLES
from . import _format as F
from . import svg as S

# Known plots, in report order (the series analysis.coverage expects), with their headings.
PLOTS = (
    ("stream.triad.threads", "STREAM triad vs threads"),
    ("dgemm.threads", "DGEMM vs threads"),
    ("bandwidth.load.size", "Load bandwidth vs working set"),
    ("bandwidth.triad.size", "Triad bandwidth vs working set"),
    ("latency.size", "Latency vs working set"),
    ("c2c.matrix", "Core-to-core latency"),
    ("latency.numa", "Memory latency by NUMA node"),
    ("stream.triad.numa", "STREAM triad by NUMA node"),
)

# Series drawn together as the lines of one plot, so that placements, rank counts or write and
# read are compared on the same axes: (pattern on the series name, the plot's heading, the
# line's label; both formatted with the pattern's groups, {title} the placement's name).
# Unmatched series get a plot each.
GROUPS = (
    (r"net\.pingpong\.latency\.(?P<p>.+)", "MPI ping-pong latency by placement (IMB PingPong)", "{title}"),
    (r"net\.pingpong\.bandwidth\.(?P<p>.+)", "MPI ping-pong bandwidth by placement (IMB PingPong)", "{title}"),
    (r"net\.(?P<k>bw|bibw)\.(?P<p>.+)", "MPI streaming bandwidth by placement (osu_bw, osu_bibw)", "{k} {title}"),
    (r"net\.(?P<op>bcast|allreduce|alltoall)\.k(?P<k>\d+)", "MPI {op} by message size", "{k} ranks"),
    (r"storage\.seq\.(?P<d>write|read)\.xfer", "Sequential bandwidth by transfer size", "{d}"),
)

_TIME_UNITS = ("ns", "µs", "us", "ms", "s", "cycles")


def esc(text: object) -> str:
    return escape(str(text), quote=True)


@dataclass
class Plot:
    name: str                 # series name, or "roofline"
    heading: str
    svg: Optional[str]        # None: not drawn, ``missing`` says why
    caption: str = ""
    missing: str = ""
    wide: bool = False


# -- xy plots ---------------------------------------------------------------------

def _positive(xs: Sequence[Optional[float]]) -> List[float]:
    return [float(v) for v in xs if v is not None and v > 0]


def _cache_rules(run: Run, name: str) -> Tuple[List[S.Rule], List[str]]:
    """Vertical lines at the cache capacities the analysis recorded for this series."""
    rules, words = [], []
    for c in run.analysis.capacities_of(name):
        text = f"{F.cache_name({'level': c.level, 'type': c.type})} {F.size(c.bytes)}" + (
            f" (×{c.instances})" if c.instances > 1 else "")
        rules.append(S.Rule(c.bytes, text, "x", S.MUTED, True))
        words.append(text)
    return rules, words


def _peak_rule(run: Run, metric: str, machine_key: str) -> Tuple[List[S.Rule], str]:
    m = run.metric(metric)
    known = m is not None and m.peak is not None and m.peak.known
    p = m.peak if known else F.MachineFacts(run.machine).peak(machine_key)
    if p is None or not p.known:
        why = p.provenance if p is not None else "not recorded"
        return [], f"Theoretical peak unknown: {why}."
    text = f"peak {F.with_unit(p.value, p.unit, sig=4)}"
    if not S.drawable(p.value) or p.value <= 0:
        return [], f"Theoretical {text} is not drawn: not a rate above zero ({p.provenance})."
    return [S.Rule(p.value, text, "y", S.PALETTE[1], True)], f"Dashed line: theoretical {text} ({p.provenance})."


def _axis_label(label: str, unit: str, fallback: str) -> str:
    label = label or fallback
    return f"{label} ({unit})" if unit else label


def _xy_plot(run: Run, s: Series, heading: str, group: Sequence[Tuple[str, Series]] = ()) -> Plot:
    """One series, or with ``group`` [(label, series), ...] (``s`` the first) several as lines."""
    members = list(group) or [("", s)]
    lines = []
    for label, one in members:
        pts = [(x, F.figure(y)) for x, y in zip(one.x, one.y) if S.drawable(x)]
        if [y for _, y in pts if y is not None]:
            lines.append(S.Line(label, [float(x) for x, _ in pts], [y for _, y in pts]))
    xs = [x for ln in lines for x in ln.x]
    ys = [y for ln in lines for y in ln.y]
    present = _positive(ys)
    if not lines:
        return Plot(s.name, heading, None, missing="the series has no data points")
    is_bytes = s.x_unit in ("B", "bytes")
    is_threads = s.name.endswith(".threads") or s.x_label == "threads"
    x_scale, x_fmt, x_ticks = "linear", S.tick_label, None
    if is_bytes and min(xs) > 0:
        x_scale, x_fmt = "log2", F.size_tick
    elif is_threads and min(xs) > 0 and max(xs) / min(xs) >= 8:
        x_scale = "log2"
    elif is_threads and len(set(xs)) <= 16:
        x_ticks = sorted(set(xs))      # a thread count is a whole number
    y_scale = "linear"
    if present and len(present) == len([y for y in ys if y is not None]) and max(present) / min(present) > 20:
        y_scale = "log10"
    rules: List[S.Rule] = []
    notes: List[str] = []
    # working-set axes only: cache capacities mean nothing on message or I/O sizes
    if run.analysis.capacities_of(s.name):
        threads = F.count(s.context.get("threads")) or 1
        r, words = _cache_rules(run, s.name)
        rules += r
        if words:
            scope = ("per cache instance (one thread)" if threads <= 1
                     else f"usable by {threads} threads placed compactly")
            notes.append(f"Dashed vertical lines: cache capacity {scope}: {', '.join(words)}.")
    if s.name == "stream.triad.threads":
        r, text = _peak_rule(run, "stream.triad", "membw.node")
        rules += r
        notes.append(text)
    elif s.name == "dgemm.threads":
        r, text = _peak_rule(run, "dgemm.node", "flops.dp.node")
        rules += r
        notes.append(text)
    for key in ("placement", "pattern"):
        if s.context.get(key) and not group:      # in a group, the legend names each line's
            notes.insert(0, f"{key.capitalize()}: {s.context[key]}.")
    for key in ("x_note", "note"):        # what the bench says about its own axis or result
        if s.context.get(key):
            notes.append(str(s.context[key]).rstrip(".") + ".")
    if x_scale != "linear" or y_scale != "linear":
        notes.append("Log scale" + (" on both axes." if x_scale != "linear" and y_scale != "linear"
                                   else (" on x." if x_scale != "linear" else " on y.")))
    x_unit = "" if is_bytes else s.x_unit
    names = " ".join(one.name for _, one in members)
    try:
        svg = S.line_plot(lines, title=heading,
                          x_label=_axis_label(s.x_label, x_unit, "x") + (" (bytes)" if is_bytes else ""),
                          y_label=_axis_label(s.y_label, s.y_unit, "y"), x_scale=x_scale, y_scale=y_scale,
                          x_format=x_fmt, x_ticks=x_ticks, rules=rules, uid=uid(s.name),
                          desc=" ".join(notes) or heading, attrs={"data-series": names})
    except S.NothingToPlot:
        return Plot(s.name, heading, None, missing="no data point of the series can be drawn")
    return Plot(s.name, heading, svg, " ".join(notes))


# -- matrices -----------------------------------------------------------------------

def _groups(run: Run, labels: Sequence[str]) -> List[int]:
    """Indices where the socket of the labelled CPU changes."""
    sockets = {cpu: F.count(socket) for cpu, socket in F.MachineFacts(run.machine).socket_of().items()}
    if len(set(sockets.values())) < 2:
        return []
    return [i for i in range(1, len(labels)) if sockets.get(labels[i]) != sockets.get(labels[i - 1])]


def _matrix_plot(run: Run, s: Series, heading: str) -> Plot:
    vals = [v for r in s.matrix for v in r if v is not None]
    if not vals:
        return Plot(s.name, heading, None, missing="the matrix has no values")
    unit = s.context.get("unit") or s.y_unit or s.x_unit or ""
    better = s.context.get("better") or (LOWER if unit in _TIME_UNITS else "higher")
    n = max(len(s.matrix), len(s.labels))
    labels = list(s.labels) or [str(i) for i in range(n)]
    is_c2c = s.name.startswith("c2c")
    groups = _groups(run, labels) if is_c2c else []
    holes = sum(1 for i, r in enumerate(s.matrix) for j, v in enumerate(r) if v is None and i != j)
    total = sum(len(r) for r in s.matrix) - min(len(s.matrix), n)
    notes = [("Lighter is faster." if better == LOWER else "Lighter is higher (better).")
             + f" Range {F.num(min(vals))} to {F.num(max(vals))} {unit}."]
    if is_c2c:
        notes.insert(0, "One-way latency from the row CPU to the column CPU.")
    if groups:
        notes.append("White lines: socket boundaries.")
    if all(i >= len(r) or r[i] is None for i, r in enumerate(s.matrix)) and is_c2c:
        notes.append("The diagonal (a CPU with itself) is not a pair.")
    median, limit = F.figure(s.context.get("median")), F.figure(s.context.get("threshold"))
    span = None
    if median is not None and limit is not None and median > 0 and 0 < limit < 1:
        span = (median * (1 - limit), median * (1 + limit))
        notes.append(f"Colours span at least the median {F.num(median)} {unit} ± {F.pct_sig(limit)} "
                     "(the outlier threshold): pairs within it look alike.")
    if holes:
        sampled = s.context.get("sampled")
        notes.append(f"Hatched: {holes} of {total} pairs have no value"
                     + (f" (sampled: {sampled})." if sampled else "."))
    try:
        svg = S.heatmap(s.matrix, labels, title=heading, unit=unit,
                        x_label=s.x_label or ("to CPU" if is_c2c else "column"),
                        y_label=s.y_label or ("from CPU" if is_c2c else "row"), better=better, groups=groups,
                        uid=uid(s.name), desc=" ".join(notes), attrs={"data-series": s.name}, span=span)
    except S.NothingToPlot:
        return Plot(s.name, heading, None, missing="no value of the matrix can be drawn")
    return Plot(s.name, heading, svg, " ".join(notes), wide=n > 24)


# -- roofline -----------------------------------------------------------------------

def _roofline_plot(run: Run) -> Plot:
    if run.analysis.roofline is None:
        return Plot("roofline", "Roofline (DP)", None, missing="no roofline was recorded for this run")
    return roofline_plot(run.analysis.roofline, [n for n in run.analysis.notes
                                                 if n.startswith(_roofline.INVERSION_NOTE)])


def roofline_plot(rec, notes_after: Sequence[str] = ()) -> Plot:
    """A stored roofline (results.analysis.Roofline) as its plot: the roofs, the ridge, the points
    placed on it (an application, a scaling study's counts) labelled."""
    heading = "Roofline (DP)"
    rl = _roofline.from_stored(rec)
    # A stored roof of 0 or below (a damaged file) has no place on log axes: it is named, not drawn.
    bad = [r for r in rl.compute + rl.bandwidth if not S.drawable(r.value, "log10")]
    if bad:
        rl = _roofline.Roofline(tuple(r for r in rl.compute if r not in bad),
                                tuple(r for r in rl.bandwidth if r not in bad),
                                tuple(x for x in rl.ridges if S.drawable(x.intensity, "log2")),
                                rl.missing + tuple(f"{r.label}: {F.num(r.value)} is no rate a log scale can show"
                                                   for r in bad))
    if rl.empty:
        need = "; ".join(rl.missing) or "no compute or bandwidth roof"
        return Plot("roofline", heading, None, missing=f"needs flops.dp.node and a bandwidth metric ({need})")
    compute = [(f"{r.label} {F.with_unit(r.value, 'Gflop/s', 4)}", r.value, r.measured) for r in rl.compute]
    bandwidth = [(f"{r.label} {F.with_unit(r.value, 'GB/s', 4)}", r.value, r.measured) for r in rl.bandwidth]
    ridges = []
    notes = ["Solid: measured; dashed: theoretical."]
    c = next((r for r in rl.compute if r.measured), rl.compute[0])
    b = rl.roof("stream.triad") or rl.bandwidth[-1]
    x = rl.ridge(c.name, b.name)
    if x is not None and S.drawable(x, "log2"):
        ridges.append((f"ridge {F.num(x)} flop/byte", x, c.value))
        notes.append(f"Ridge point {F.num(x)} flop/byte ({c.label} / {b.label}): a kernel with less "
                     "arithmetic intensity is bound by that bandwidth.")
    if rl.missing:
        notes.append("Not drawn: " + "; ".join(rl.missing) + ".")
    notes += list(notes_after)
    points = [(p.label, p.intensity, p.value) for p in rec.points]
    if points:
        notes.append("Filled markers: " + "; ".join(f"{p.label}, {F.num(p.value)} Gflop/s at {F.num(p.intensity)} "
                                                    f"flop/byte ({p.source})" for p in rec.points) + ".")
    try:
        svg = S.roofline(compute, bandwidth, title=heading, ridges=ridges, uid="roofline",
                         desc=" ".join(notes), attrs={"data-series": "roofline"}, points=points)
    except S.NothingToPlot as e:
        return Plot("roofline", heading, None, missing=str(e))
    return Plot("roofline", heading, svg, " ".join(notes))


def uid(name: str) -> str:
    return "p-" + "".join(ch if ch.isalnum() else "-" for ch in name)


def plots(run: Run) -> List[Plot]:
    """Every plot the report shows, known ones first, then any other series, then the roofline."""
    out = []
    by_name = {s.name: s for s in run.series}
    known = {name for name, _ in PLOTS}
    for name, heading in PLOTS:
        s = by_name.get(name)
        if s is None:
            why = run.analysis.absent_reason(name) or "not part of this run"
            out.append(Plot(name, heading, None, missing=why))
            continue
        out.append(_plot(run, s, s.title or heading))
    # the other series in run order; a group's plot stands where its first series was
    slots: List[Tuple[str, List[Tuple[str, Series]]]] = []     # (heading, [(line label, series)])
    where: Dict[str, int] = {}
    for s in run.series:
        if s.name in known:
            continue
        hit = next((g for g in GROUPS if re.fullmatch(g[0], s.name)), None) if s.kind == "xy" else None
        if hit is None:
            slots.append((s.title or s.name, [("", s)]))
            continue
        parts = re.fullmatch(hit[0], s.name).groupdict()
        parts["title"] = PLACEMENT_TITLES.get(parts.get("p", ""), parts.get("p", ""))
        head = hit[1].format(**parts)
        if head not in where:
            where[head] = len(slots)
            slots.append((head, []))
        slots[where[head]][1].append((hit[2].format(**parts), s))
    for head, members in slots:
        first = members[0][1]
        out.append(_xy_plot(run, first, head, members) if members[0][0] else _plot(run, first, head))
    out.append(_roofline_plot(run))
    return out


def _plot(run: Run, s: Series, heading: str) -> Plot:
    if s.kind == "matrix":
        return _matrix_plot(run, s, heading)
    return _xy_plot(run, s, heading)


