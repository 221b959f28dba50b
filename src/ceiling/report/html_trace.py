"""The timeline section of the HTML report for ``ceiling trace``: one lane per rank (a process
outside MPI), coloured by what it does in each stretch (compute, MPI, I/O, metadata, waiting in
MPI, waiting off CPU outside calls: analysis/trace_bins.split_off_cpu), drawn from pre-binned
shares (analysis/trace_bins.Bins), the node's counter tracks underneath
and the findings' windows marked. Entry point: ``render_timeline(bins, counters, findings)``.

The page's size does not grow with the number of events: the bins are drawn at ``COLUMNS``
columns, each lane's column takes the colour of what took most of its time, and runs of one
colour are one rectangle; above ``MAX_LANES`` ranks, lanes are shown as blocks of consecutive
ranks (their mean shares) with the class shares' min / median / max over all ranks above them.
Plain SVG inside the page: no script, readable without JavaScript and in print.
"""
from __future__ import annotations

from html import escape as esc
from typing import List, Optional, Sequence

import numpy as np

from ..analysis.trace_bins import Bins
from ..analysis.trace_cost import cost_text
from ..results.events import Counters
from ..results.model import Finding, Run

MAX_LANES = 32
ABSENT = 0.05              # a column whose shares sum below this: the lane did not exist then (blank)
COLUMNS = 600              # drawn columns across the plot: about 1.5 px each at the report's width
WIDTH, LEFT, RIGHT = 1160, 112, 12
LANE_H, TRACK_H, BAND_H = 12, 44, 30
# Okabe-Ito colours (report/svg.py's palette): readable with colour blindness
DRAWN = (("compute", "computing", "#56B4E9"), ("mpi", "in MPI", "#CC79A7"), ("io", "in I/O", "#E69F00"),
         ("meta", "in metadata", "#D55E00"), ("wait", "waiting (MPI wait, collectives)", "#9E9E9E"),
         ("off", "waiting off CPU outside calls (sleep, a child, a pipe)", "#D4D4D4"))


def _columns(b: Bins) -> np.ndarray:
    """[lanes, 6 (DRAWN order), columns]: shares averaged over the bins of each drawn column."""
    stack = np.concatenate([b.compute[:, None, :], b.of("mpi")[:, None, :], b.of("io")[:, None, :],
                            b.of("meta")[:, None, :], b.of("wait")[:, None, :], b.waiting_off_cpu[:, None, :]],
                           axis=1)
    n = min(COLUMNS, b.nbins)
    cut = np.linspace(0, b.nbins, n + 1).astype(int)
    return np.add.reduceat(stack, cut[:-1], axis=2) / np.diff(cut)[None, None, :]


def _drawn(b: Bins):
    """DRAWN, less waiting off CPU where the bins were not split (a run stored before it)."""
    return DRAWN if b.off_cpu is not None else DRAWN[:-1]


def _what(b: Bins) -> str:
    """What the lanes are: ranks, processes (outside MPI), or both."""
    ranks = sum(1 for k in b.lanes if k >= 0)
    return "ranks" if ranks == len(b.lanes) else "processes" if not ranks else "ranks and processes"


def _groups(b: Bins) -> List[np.ndarray]:
    """Lane indices per drawn row: every lane, or blocks of consecutive ranks above MAX_LANES."""
    n = len(b.lanes)
    if n <= MAX_LANES:
        return [np.array([i]) for i in range(n)]
    return [a for a in np.array_split(np.arange(n), MAX_LANES) if len(a)]


def _row(cols: np.ndarray, y: float, h: float, x0: float, dx: float) -> str:
    """One lane: each column the colour of its largest share, runs merged into one rect; a column
    in which the lane hardly existed (a process not started yet, or ended) is left blank."""
    top = np.where(cols.sum(axis=0) < ABSENT, -1, np.argmax(cols, axis=0))
    cuts = np.flatnonzero(np.diff(top)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(top)]))
    return "".join(f'<rect x="{x0 + s * dx:.1f}" y="{y:.1f}" width="{(e - s) * dx:.1f}" height="{h:.1f}" '
                   f'fill="{DRAWN[int(top[s])][2]}"/>' for s, e in zip(starts, ends) if top[s] >= 0)


def _axis(b: Bins, y: float, x0: float, w: float) -> str:
    t0, t1 = b.edges_ns[0] / 1e9, b.edges_ns[-1] / 1e9
    span = max(t1 - t0, 1e-9)
    raw = span / 8
    step = 10 ** np.floor(np.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    out = [f'<line x1="{x0}" y1="{y}" x2="{x0 + w}" y2="{y}" stroke="#888"/>']
    t = np.ceil(t0 / step) * step
    while t <= t1 + 1e-12:
        x = x0 + (t - t0) / span * w
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#888"/>'
                   f'<text x="{x:.1f}" y="{y + 15}" font-size="11" text-anchor="middle" fill="#444">{t:.4g}</text>')
        t += step
    out.append(f'<text x="{x0 + w:.1f}" y="{y + 28}" font-size="11" text-anchor="end" fill="#444">'
               "time since the trace's start (s)</text>")
    return "".join(out)


def _band(vals: np.ndarray, y: float, h: float, x0: float, dx: float, color: str, label: str) -> str:
    """min / median / max over ranks of one class's share, as a band and a line."""
    lo, med, hi = np.min(vals, axis=0), np.median(vals, axis=0), np.max(vals, axis=0)
    xs = x0 + (np.arange(len(med)) + 0.5) * dx

    def pts(v):
        return " ".join(f"{x:.1f},{y + h - s * h:.1f}" for x, s in zip(xs, v))
    poly = pts(hi) + " " + " ".join(f"{x:.1f},{y + h - s * h:.1f}" for x, s in zip(xs[::-1], lo[::-1]))
    return (f'<rect x="{x0}" y="{y}" width="{dx * len(med):.1f}" height="{h}" fill="#f6f7f9"/>'
            f'<polygon points="{poly}" fill="{color}" fill-opacity="0.35"/>'
            f'<polyline points="{pts(med)}" fill="none" stroke="{color}" stroke-width="1.2"/>'
            f'<text x="{x0 - 6}" y="{y + h / 2 + 4:.1f}" font-size="11" text-anchor="end" fill="#444">{esc(label)}'
            "</text>")


def _track(track, b: Bins, y: float, x0: float, w: float) -> str:
    t0, t1 = b.edges_ns[0], b.edges_ns[-1]
    ts = np.asarray(track.ts, np.float64)
    v = np.asarray(track.value, np.float64)
    keep = (ts >= t0) & (ts <= t1) & np.isfinite(v)
    ts, v = ts[keep], v[keep]
    if len(ts) > 2 * COLUMNS:                           # many samples: the max per column keeps the peaks
        col = ((ts - t0) / (t1 - t0) * COLUMNS).astype(int).clip(0, COLUMNS - 1)
        idx = np.unique(col)
        v = np.array([v[col == c].max() for c in idx])
        ts = t0 + (idx + 0.5) / COLUMNS * (t1 - t0)
    top = float(v.max()) if len(v) and v.max() > 0 else 1.0
    pts = " ".join(f"{x0 + (t - t0) / (t1 - t0) * w:.1f},{y + TRACK_H - 4 - s / top * (TRACK_H - 8):.1f}"
                   for t, s in zip(ts, v))
    unit = track.unit
    shown = f"{top / 1e6:.4g} M{unit}" if top >= 1e6 else f"{top:.4g} {unit}"
    return (f'<rect x="{x0}" y="{y}" width="{w}" height="{TRACK_H - 2}" fill="#f6f7f9"/>'
            f'<polyline points="{pts}" fill="none" stroke="#0072B2" stroke-width="1.2"/>'
            f'<text x="{x0 + 4}" y="{y + 12}" font-size="11" fill="#333">{esc(track.name)}'
            f'{" (" + esc(track.device) + ")" if track.device and track.device not in track.name else ""}'
            f" - max {esc(shown)}</text>")


def render_timeline(bins: Bins, counters: Optional[Counters] = None, findings: Sequence[Finding] = (),
                    cost: Optional[dict] = None) -> str:
    """The section: an SVG time line, its legend, the findings' windows listed, and what recording
    cost (``cost``: analysis/trace_cost.recording_cost's, as the run keeps it; None: not kept)."""
    if not bins.lanes:
        return ('<section id="timeline"><h2>Timeline</h2><p>No events were recorded: nothing to draw.</p>'
                "</section>")
    x0, w = LEFT, WIDTH - LEFT - RIGHT
    cols = _columns(bins)
    dx = w / cols.shape[2]
    parts: List[str] = []
    y = 18.0                        # room above the lanes for the findings' numbers
    many = len(bins.lanes) > MAX_LANES
    if many:
        parts.append(f'<text x="4" y="{y + 10}" font-size="11" font-weight="600" fill="#333">'
                     f"share of the {len(bins.lanes)} {_what(bins)}' time: min-max band, median line</text>")
        y += 16
        for i, (_, words, color) in enumerate(_drawn(bins)):
            parts.append(_band(cols[:, i, :], y, BAND_H, x0, dx, color, words.split(" (")[0]))
            y += BAND_H + 3
        y += 8
    lanes_top = y
    lane_h = LANE_H if len(_groups(bins)) > 8 else 2 * LANE_H      # few lanes: taller, easier to read
    for g in _groups(bins):
        name = (bins.labels[g[0]] if len(g) == 1 else f"ranks {bins.lanes[g[0]]}-{bins.lanes[g[-1]]}"
                if bins.lanes[g[0]] >= 0 and bins.lanes[g[-1]] >= 0 else f"{bins.labels[g[0]]} +{len(g) - 1}")
        if len(g) == 1 and bins.threads[g[0]] > 1:
            name += f" ({bins.threads[g[0]]} thr)"
        parts.append(f'<g><title>{esc(name)}</title>{_row(cols[g].mean(axis=0), y, lane_h - 2, x0, dx)}</g>'
                     f'<text x="{x0 - 6}" y="{y + lane_h / 2 + 3:.1f}" font-size="10" text-anchor="end" fill="#444">'
                     f"{esc(name)}</text>")
        y += lane_h
    lanes_bottom = y
    t0, t1 = bins.edges_ns[0] / 1e9, bins.edges_ns[-1] / 1e9
    marks, listed = [], []
    for n, f in enumerate((f for f in findings if f.data.get("windows")), 1):
        for a, e in f.data["windows"]:
            xa = x0 + (max(a, t0) - t0) / (t1 - t0) * w
            xe = x0 + (min(e, t1) - t0) / (t1 - t0) * w
            marks.append(f'<rect x="{xa:.1f}" y="{lanes_top - 4:.1f}" width="{max(xe - xa, 1.5):.1f}" '
                         f'height="{lanes_bottom - lanes_top + 4:.1f}" fill="none" stroke="#C2410C" '
                         f'stroke-width="1.5"><title>{esc(f.title)}</title></rect>')
        a, e = f.data["windows"][0]
        xa = x0 + (max(a, t0) - t0) / (t1 - t0) * w
        marks.append(f'<text x="{xa + 2:.1f}" y="{lanes_top - 6:.1f}" font-size="11" font-weight="700" '
                     f'fill="#C2410C">{n}</text>')
        more = f" and {len(f.data['windows']) - 1} more" if len(f.data["windows"]) > 1 else ""
        listed.append(f"<li><strong>{n}.</strong> {esc(f.title)} <span class=\"hint\">({a:.4g}-{e:.4g} s{more}; "
                      f"{f.data.get('time_lost_s', 0):.3g} s lost)</span>{_rows(f)}</li>")
    parts += marks
    y += 6
    tracks = list(counters.tracks) if counters else []
    for tr in tracks:
        parts.append(_track(tr, bins, y, x0, w))
        y += TRACK_H
    parts.append(_axis(bins, y + 2, x0, w))
    height = y + 36
    svg = (f'<svg class="plot timeline" data-series="trace.timeline" role="img" viewBox="0 0 {WIDTH} {height:.0f}" '
           f'width="100%" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg" '
           f'font-family="system-ui,sans-serif"><title>Timeline of {len(bins.lanes)} lanes</title>'
           + "".join(parts) + "</svg>")
    legend = " ".join(f'<span style="display:inline-block;width:11px;height:11px;background:{c};'
                      f'vertical-align:middle;margin:0 4px 0 10px"></span>{esc(words)}' for _, words, c in _drawn(bins))
    how = (f"{len(bins.lanes)} {_what(bins)} in blocks of consecutive ones (their mean)" if many else
           f"{len(bins.lanes)} lane(s), one per rank or process")
    note = (f'<p class="hint">{how}; each stretch takes the colour of what took most of its time '
            f"({bins.nbins} bins of {bins.width_ns / 1e6:.3g} ms drawn as {cols.shape[2]} columns). "
            f"{_split_note(bins)} Red frames: the findings' windows.</p>"
            f'<p class="hint trace-cost">{esc(cost_text(cost))}.</p>')
    found = f"<ol class=\"windows\" style=\"list-style:none;padding:0\">{''.join(listed)}</ol>" if listed else ""
    return (f'<section id="timeline"><h2>Timeline</h2><p class="legend">{legend}</p>'
            f'<div class="scroll">{svg}</div>{note}{found}</section>')


def _rows(f: Finding) -> str:
    """A wait state's ranks and call sites, or an imbalanced phase's phases, each with its window
    (analysis/trace_waits.py's data), as a short list; "" for other findings."""
    d = f.data
    if d.get("sites"):
        items = [f"rank {r['rank']} {r['call']} on {r['comm']}" + (f", partner rank {r['peer']}" if r["peer"] >= 0
                                                                   else "")
                 + f": {r['time_lost_s']:.3g} s in {r['count']} call(s), {r['start_s']:.4g}-{r['end_s']:.4g} s"
                 for r in d["sites"][:8]]
    elif d.get("phases"):
        items = [f"{r['phase']}: {r['start_s']:.4g}-{r['end_s']:.4g} s, compute max/mean {r['imbalance']:.3g}, "
                 f"{r['time_lost_s']:.3g} s lost, rank {r['slowest_rank']} the slowest" for r in d["phases"][:8]]
    else:
        return ""
    return '<ul class="hint">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def _split_note(b: Bins) -> str:
    """How the time outside calls was told computing from waiting, or that it was not."""
    if b.off_cpu is None:
        return ("Time outside intercepted calls is drawn as computing: this run kept no per-process CPU samples "
                "to tell waiting from it.")
    every = f"every {b.off_cpu_interval_s:g} s" if b.off_cpu_interval_s else "at each sample"
    return (f"Outside intercepted calls, waiting (off CPU) is told from computing by the /proc sampler's CPU time "
            f"of each thread (of each process where it kept no thread's) {every}: no finer than that, and at least "
            f"the waiting drawn; a thread asleep all along with no call drawn (a library's helper) is left out of "
            f"its lane.")


def timeline_section(run: Run) -> str:
    """``ceiling trace``'s time line, drawn from the bins its run keeps (the finding
    trace.recorded), with the windows of the findings that have them; "" for any other run, and a
    line saying why where the bins cannot be read."""
    rec = next((f for f in run.findings if f.id == "trace.recorded" and (f.data or {}).get("timeline")), None)
    # a trace of the node's counters alone (a static program) has no lanes to draw: its page says why
    if rec is None:
        return ""
    from ..analysis.trace_bins import bins_from_doc
    try:
        bins = bins_from_doc(rec.data["timeline"])
    except (KeyError, TypeError, ValueError) as e:
        return f'<section id="timeline"><h2>Timeline</h2><p>The time line cannot be drawn: {esc(str(e))}.</p></section>'
    windowed = [f for f in run.findings if isinstance(f.data, dict) and f.data.get("windows")]
    return render_timeline(bins, Counters.from_doc(rec.data.get("counters") or []), windowed, rec.data.get("cost"))
