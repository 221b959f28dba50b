"""A tiny plotting module that writes SVG strings: line plots with linear or
log axes, heat maps with a colour bar, and the roofline.

No dependencies and no JavaScript: the output is inlined in the HTML report
and must render offline, in print, and in any browser. Each plot is one
<svg> with a <title> (and a <desc>), axis labels with units, and a legend.
Colours are colour-blind safe: Okabe and Ito's palette for lines (with a
distinct marker shape per line as well), viridis for heat maps.

Any number may reach a plot from a stored run (0, negatives, 1e-320, 1e308):
a value no axis can place (``drawable``) is left out as a missing one is, and
a plot left with nothing raises NothingToPlot for the caller to say so.

Longer than 500 lines: the three plots share the scales, the tick labels, the
markers and the legend, and one file keeps that small library whole.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Callable, Dict, List, Optional, Sequence, Tuple

# Okabe & Ito (2008), "Color Universal Design", without its yellow (invisible on white).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
INK = "#1f1f1f"
MUTED = "#5f6368"
GRID = "#e6e6e6"
HOLE = "#bdbdbd"
HALO = ' paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"'  # label readable over lines

# viridis (van der Walt and Smith, matplotlib) at nine evenly spaced points.
_VIRIDIS = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725")

FONT = 11          # px, tick labels and legend
CHAR_W = 0.6       # average glyph width as a fraction of the font size (for layout only)
MARKERS = ("circle", "square", "triangle", "diamond")

Formatter = Callable[[float], str]

# What an axis can place. A float holds 1.8e308, so a linear axis over wider values, or a
# log axis over more than these exponents, would overflow (its span, its ticks, its
# coordinates). No measurement comes near; a damaged file may: such a value is left out
# of a plot, as a missing one is.
LINEAR_MAX = 1e300
LOG_EXPONENTS = {"log2": (-1000, 1000), "log10": (-300, 300)}


class NothingToPlot(ValueError):
    """No value of a plot can be drawn: the caller says so instead of drawing empty axes."""


def drawable(v: object, kind: str = "linear") -> bool:
    """Whether ``v`` is a number an axis of ``kind`` (linear, log2, log10) can place."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        f = float(v)
    except OverflowError:
        return False
    if not math.isfinite(f):
        return False
    if kind == "linear":
        return abs(f) <= LINEAR_MAX
    lo, hi = LOG_EXPONENTS[kind]
    base = 2.0 if kind == "log2" else 10.0
    return base ** lo <= f <= base ** hi


@dataclass
class Line:
    """One data line; None in ``y`` breaks it."""

    label: str
    x: Sequence[float]
    y: Sequence[Optional[float]]
    color: Optional[str] = None
    dash: bool = False
    markers: bool = True
    width: float = 2.0


@dataclass
class Mark:
    """A labelled point drawn over the data (an application on the roofline): a filled marker and
    its label, in a <g class="mark"> that carries the label and the data coordinates."""

    label: str
    x: float
    y: float
    color: str = INK
    shape: str = "diamond"


@dataclass
class Rule:
    """A reference line across the plot: ``axis="x"`` is vertical at x=at."""

    at: float
    label: str
    axis: str = "x"
    color: str = MUTED
    dash: bool = True


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def _f(v: float) -> str:
    """A coordinate: one decimal, no trailing ".0" (and never NaN or an infinity: 0)."""
    text = f"{v:.1f}" if math.isfinite(v) else "0"
    return text[:-2] if text.endswith(".0") else text


def text_width(text: str, size: float = FONT) -> float:
    return len(text) * size * CHAR_W


# -- numbers on axes ----------------------------------------------------------------

def tick_label(v: float) -> str:
    """Shortest honest label: 1, 2.5, 0.05, 1/16, 1e-06, 12000."""
    if v == 0:
        return "0"
    a = abs(v)
    if 1 / 2048 < a < 1:
        inv = 1 / a
        if abs(inv - round(inv)) < 1e-9 and round(inv) in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
            return ("-" if v < 0 else "") + f"1/{round(inv)}"
    if a >= 1e6 or a < 1e-3:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    text = f"{v:.6g}"
    return text


def _nice_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    if not (1e-300 < raw < 1e300):      # nothing to divide (or nothing a float can): one step
        return 1.0 if not 1e-300 < span < 1e300 else span
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


class Scale:
    """Maps data values to pixels on one axis; ``kind`` is linear, log2 or log10."""

    def __init__(self, lo: float, hi: float, kind: str, p0: float, p1: float):
        self.kind = kind
        self.p0, self.p1 = p0, p1
        self.lo, self.hi = self._extend(lo, hi)

    def _extend(self, lo: float, hi: float) -> Tuple[float, float]:
        if self.kind == "linear":
            lo, hi = max(lo, -LINEAR_MAX), min(hi, LINEAR_MAX)
            if not hi - lo > 1e-200 * max(1.0, abs(lo), abs(hi)):    # one value, or too close to tell
                pad = 0.1 * max(abs(lo), abs(hi))
                pad = pad if pad > 1e-200 else 1.0
                lo, hi = lo - pad, hi + pad
            step = _nice_step(hi - lo, 5)
            return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
        base = 2.0 if self.kind == "log2" else 10.0
        emin, emax = LOG_EXPONENTS[self.kind]
        lo = min(max(lo, base ** emin), base ** emax)
        hi = min(max(hi, lo), base ** emax)
        elo = max(emin, math.floor(math.log(lo, base) + 1e-9))
        ehi = min(emax, math.ceil(math.log(hi, base) - 1e-9))
        if ehi <= elo:
            elo, ehi = (elo, elo + 1) if elo < emax else (elo - 1, elo)
        return base ** elo, base ** ehi

    def _t(self, v: float) -> float:
        if self.kind == "linear":
            return (v - self.lo) / (self.hi - self.lo)
        v = max(v, self.lo * 1e-3)
        return (math.log(v) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))

    def __call__(self, v: float) -> float:
        try:
            t = self._t(v)
        except (ValueError, OverflowError):     # math.log of what no axis can place
            t = 0.0
        t = min(2.0, max(-1.0, t)) if math.isfinite(t) else 0.0    # a stray value stays near the plot
        return self.p0 + (self.p1 - self.p0) * t

    def ticks(self, max_ticks: int = 8) -> List[float]:
        if self.kind == "linear":
            step = _nice_step(self.hi - self.lo, 5)
            n = int(round((self.hi - self.lo) / step))
            return [self.lo + i * step for i in range(n + 1)]
        base = 2 if self.kind == "log2" else 10
        elo = round(math.log(self.lo, base))
        ehi = round(math.log(self.hi, base))
        exps = list(range(elo, ehi + 1))
        stride = max(1, math.ceil(len(exps) / max_ticks))
        if base == 2 and stride > 1:
            # Keep ticks on exponents divisible by the stride (1K, 4K, 16K ...), so labels read evenly.
            exps = [e for e in exps if e % stride == 0] or exps[::stride]
        else:
            exps = exps[::stride]
        ticks = [float(base) ** e for e in exps]
        if base == 10 and len(ticks) <= 3:
            ticks = sorted({t * m for t in ticks for m in (1, 2, 5) if self.lo <= t * m <= self.hi})
        return ticks


# -- drawing helpers ----------------------------------------------------------------

def _open(width: float, height: float, title: str, desc: str, uid: str,
          attrs: Optional[Dict[str, str]] = None) -> List[str]:
    extra = "".join(f' {k}="{esc(v)}"' for k, v in (attrs or {}).items())
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {_f(width)} {_f(height)}" '
            f'width="{_f(width)}" height="{_f(height)}" role="img" aria-labelledby="{uid}-t {uid}-d" '
            f'font-family="system-ui, -apple-system, \'Segoe UI\', Roboto, Helvetica, Arial, sans-serif" '
            f'font-size="{FONT}"{extra}>',
            f'<title id="{uid}-t">{esc(title)}</title>',
            f'<desc id="{uid}-d">{esc(desc or title)}</desc>',
            f'<text x="{_f(width / 2)}" y="18" text-anchor="middle" font-size="13" font-weight="600" '
            f'fill="{INK}">{esc(title)}</text>']


def _marker(shape: str, x: float, y: float, color: str, r: float = 3.2) -> str:
    common = f'fill="#fff" stroke="{color}" stroke-width="1.6"'
    if shape == "square":
        return f'<rect x="{_f(x - r)}" y="{_f(y - r)}" width="{_f(2 * r)}" height="{_f(2 * r)}" {common}/>'
    if shape == "triangle":
        pts = f"{_f(x)},{_f(y - r * 1.2)} {_f(x - r * 1.1)},{_f(y + r * 0.8)} {_f(x + r * 1.1)},{_f(y + r * 0.8)}"
        return f'<polygon points="{pts}" {common}/>'
    if shape == "diamond":
        pts = f"{_f(x)},{_f(y - r * 1.3)} {_f(x + r * 1.3)},{_f(y)} {_f(x)},{_f(y + r * 1.3)} {_f(x - r * 1.3)},{_f(y)}"
        return f'<polygon points="{pts}" {common}/>'
    return f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}" {common}/>'


def _legend_layout(entries: Sequence[str], avail: float) -> List[List[Tuple[int, float]]]:
    """Flow legend entries into rows: [[(entry index, x offset), ...], ...]."""
    rows: List[List[Tuple[int, float]]] = [[]]
    x = 0.0
    for i, label in enumerate(entries):
        w = 26 + text_width(label) + 14
        if rows[-1] and x + w > avail:
            rows.append([])
            x = 0.0
        rows[-1].append((i, x))
        x += w
    return rows if rows[0] else []


def _legend(items: Sequence[Tuple[str, str, bool, Optional[str]]], x0: float, y0: float,
            avail: float) -> Tuple[List[str], float]:
    """Legend rows at (x0, y0); items are (label, color, dashed, marker shape). Returns (svg, height)."""
    rows = _legend_layout([it[0] for it in items], avail)
    out = []
    for r, row in enumerate(rows):
        y = y0 + r * 17
        for i, dx in row:
            label, color, dash, shape = items[i]
            x = x0 + dx
            d = ' stroke-dasharray="5 3"' if dash else ""
            out.append(f'<line x1="{_f(x)}" y1="{_f(y)}" x2="{_f(x + 20)}" y2="{_f(y)}" stroke="{color}" '
                       f'stroke-width="2"{d}/>')
            if shape:
                out.append(_marker(shape, x + 10, y, color, 2.8))
            out.append(f'<text x="{_f(x + 26)}" y="{_f(y + 4)}" fill="{INK}">{esc(label)}</text>')
    return out, len(rows) * 17


# -- line plot --------------------------------------------------------------------

def line_plot(lines: Sequence[Line], *, title: str, x_label: str, y_label: str,
              x_scale: str = "linear", y_scale: str = "linear",
              x_format: Optional[Formatter] = None, y_format: Optional[Formatter] = None,
              rules: Sequence[Rule] = (), x_ticks: Optional[Sequence[float]] = None,
              y_from_zero: bool = True, width: float = 640,
              height: float = 380, uid: str = "plot", desc: str = "",
              attrs: Optional[Dict[str, str]] = None, marks: Sequence[Mark] = ()) -> str:
    """Lines on linear or log axes (``"linear" | "log2" | "log10"``), with reference rules and
    labelled ``marks`` over them. Each line's polyline carries its label (``data-line``).

    ``x_ticks`` forces the x tick positions (thread counts: only whole numbers).
    """
    x_format = x_format or tick_label
    y_format = y_format or tick_label

    def placed(x: object, y: object) -> bool:
        return drawable(x, x_scale) and drawable(y, y_scale)

    marks = [m for m in marks if placed(m.x, m.y)]
    xs = [float(x) for ln in lines for x, y in zip(ln.x, ln.y) if placed(x, y)] + [float(m.x) for m in marks]
    ys = [float(y) for ln in lines for x, y in zip(ln.x, ln.y) if placed(x, y)] + [float(m.y) for m in marks]
    if not xs or not ys:
        raise NothingToPlot(f"{title}: no data points to plot")
    rules = [r for r in rules if drawable(r.at, x_scale if r.axis == "x" else y_scale)]
    ys_all = ys + [float(r.at) for r in rules if r.axis == "y"]
    ylo, yhi = min(ys_all), max(ys_all)
    if y_scale == "linear" and y_from_zero:
        ylo = min(0.0, ylo)
    xlo, xhi = min(xs), max(xs)

    items = [(ln.label, ln.color or PALETTE[i % len(PALETTE)], ln.dash,
              MARKERS[i % len(MARKERS)] if ln.markers else None) for i, ln in enumerate(lines)]
    show_legend = len(lines) > 1 or any(ln.label for ln in lines)

    # Left margin from the widest y tick label, found on a provisional scale.
    prov = Scale(ylo, yhi, y_scale, 0, 1)
    ytw = max(text_width(y_format(t)) for t in prov.ticks())
    left = 30 + ytw + 10
    right, bottom = 20.0, 48.0
    legend_rows = len(_legend_layout([it[0] for it in items], width - left - right)) if show_legend else 0
    top = 32.0 + legend_rows * 17 + (6 if legend_rows else 0)
    px0, px1, py0, py1 = left, width - right, height - bottom, top
    sx = Scale(xlo, xhi, x_scale, px0, px1)
    sy = Scale(ylo, yhi, y_scale, py0, py1)

    out = _open(width, height, title, desc, uid, attrs)
    if show_legend:
        leg, _ = _legend(items, left, 32 + 6, width - left - right)
        out += leg
    # Grid and ticks.
    for t in sy.ticks():
        y = sy(t)
        out.append(f'<line x1="{_f(px0)}" y1="{_f(y)}" x2="{_f(px1)}" y2="{_f(y)}" stroke="{GRID}"/>')
        out.append(f'<text x="{_f(px0 - 6)}" y="{_f(y + 4)}" text-anchor="end" '
                   f'fill="{MUTED}">{esc(y_format(t))}</text>')
    xt = [t for t in x_ticks if sx.lo <= t <= sx.hi] if x_ticks else sx.ticks(max_ticks=max(3, int((px1 - px0) / 45)))
    for t in xt:
        x = sx(t)
        out.append(f'<line x1="{_f(x)}" y1="{_f(py0)}" x2="{_f(x)}" y2="{_f(py1)}" stroke="{GRID}"/>')
        out.append(f'<text x="{_f(x)}" y="{_f(py0 + 15)}" text-anchor="middle" '
                   f'fill="{MUTED}">{esc(x_format(t))}</text>')
    out.append(f'<rect x="{_f(px0)}" y="{_f(py1)}" width="{_f(px1 - px0)}" height="{_f(py0 - py1)}" '
               f'fill="none" stroke="#9e9e9e"/>')
    # Axis labels.
    out.append(f'<text x="{_f((px0 + px1) / 2)}" y="{_f(height - 10)}" text-anchor="middle" fill="{INK}">'
               f'{esc(x_label)}</text>')
    out.append(f'<text transform="translate(14 {_f((py0 + py1) / 2)}) rotate(-90)" text-anchor="middle" '
               f'fill="{INK}">{esc(y_label)}</text>')
    # Reference rules, under the data.
    for r in rules:
        d = ' stroke-dasharray="4 3"' if r.dash else ""
        if r.axis == "x":
            if not (sx.lo <= r.at <= sx.hi):
                continue
            x = sx(r.at)
            out.append(f'<line x1="{_f(x)}" y1="{_f(py0)}" x2="{_f(x)}" y2="{_f(py1)}" stroke="{r.color}"{d}/>')
            out.append(f'<text transform="translate({_f(x - 4)} {_f(py1 + 4)}) rotate(-90)" text-anchor="end" '
                       f'font-size="10" fill="{r.color}"{HALO}>{esc(r.label)}</text>')
        else:
            if not (sy.lo <= r.at <= sy.hi):
                continue
            y = sy(r.at)
            out.append(f'<line x1="{_f(px0)}" y1="{_f(y)}" x2="{_f(px1)}" y2="{_f(y)}" stroke="{r.color}"{d}/>')
            out.append(f'<text x="{_f(px1 - 4)}" y="{_f(y - 4)}" text-anchor="end" font-size="10" '
                       f'fill="{r.color}"{HALO}>{esc(r.label)}</text>')
    # Data.
    for ln, (label, color, dash, shape) in zip(lines, items):
        pts: List[List[Tuple[float, float]]] = [[]]
        for x, y in zip(ln.x, ln.y):
            if not placed(x, y):
                if pts[-1]:
                    pts.append([])
                continue
            pts[-1].append((sx(float(x)), sy(float(y))))
        d = ' stroke-dasharray="6 4"' if dash else ""
        out.append(f'<g data-line="{esc(label)}">')        # the line's parts, found by its label (tests, readers)
        for seg in pts:
            if len(seg) > 1:
                p = " ".join(f"{_f(a)},{_f(b)}" for a, b in seg)
                out.append(f'<polyline points="{p}" fill="none" stroke="{color}" stroke-width="{_f(ln.width)}" '
                           f'stroke-linejoin="round"{d} data-line="{esc(label)}"/>')
        if shape:
            for seg in pts:
                for a, b in seg:
                    out.append(_marker(shape, a, b, color))
        out.append("</g>")
    said: List[Tuple[float, float]] = []                 # labels placed: (x, y), so that none covers another
    for m in marks:
        a, b = sx(float(m.x)), sy(float(m.y))
        right = a < (px0 + px1) / 2                      # the label on the side with more room
        ty = b - 7
        while any(abs(ty - y) < 12 and abs(a - x) < 140 for x, y in said):
            ty += 12
        said.append((a, ty))
        out.append(f'<g class="mark" data-label="{esc(m.label)}" data-x="{m.x!r}" data-y="{m.y!r}">'
                   + _marker(m.shape, a, b, m.color, 5.0).replace('fill="#fff"', f'fill="{m.color}"')
                   + f'<text x="{_f(a + 9 if right else a - 9)}" y="{_f(ty)}" text-anchor='
                   f'"{"start" if right else "end"}" font-size="10" fill="{INK}"{HALO}>{esc(m.label)}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


# -- heat map ---------------------------------------------------------------------

def _hex(c: str) -> Tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def colormap(t: float) -> str:
    """viridis at t in [0, 1]."""
    t = min(1.0, max(0.0, t))
    pos = t * (len(_VIRIDIS) - 1)
    i = min(int(pos), len(_VIRIDIS) - 2)
    f = pos - i
    a, b = _hex(_VIRIDIS[i]), _hex(_VIRIDIS[i + 1])
    return "#" + "".join(f"{round(a[k] + (b[k] - a[k]) * f):02x}" for k in range(3))


def heatmap(matrix: Sequence[Sequence[Optional[float]]], labels: Sequence[str], *, title: str,
            unit: str, x_label: str, y_label: str, better: str = "lower",
            value_format: Optional[Callable[[float], str]] = None, groups: Sequence[int] = (),
            max_grid: float = 560, uid: str = "heat", desc: str = "",
            attrs: Optional[Dict[str, str]] = None, span: Optional[Tuple[float, float]] = None) -> str:
    """A square matrix as coloured cells, with a colour bar; None cells are hatched.

    Light means better (``better="lower"``: low values light), so the eye finds
    the fast pairs the same way in a latency and a bandwidth matrix. Cells are
    quantised to 64 colours and merged along rows into one path per colour, so
    a 256×256 matrix stays small. ``groups`` are indices where a new group
    (socket, NUMA node) begins; a line is drawn there. ``span``: a range the colours
    cover at least (a metric's outlier band around its median), so values that differ
    by less than what matters get nearly the same colour.
    """
    value_format = value_format or (lambda v: f"{v:.3g}")
    # A cell no colour scale can span (see LINEAR_MAX) is shown as a hole, as a missing one.
    matrix = [[float(v) if drawable(v) else None for v in r] for r in matrix]
    rows = len(matrix)
    cols = max((len(r) for r in matrix), default=0)
    n = max(rows, cols, len(labels))
    vals = [v for r in matrix for v in r if v is not None]
    if not n or not vals:
        raise NothingToPlot(f"{title}: no values to plot")
    vlo, vhi = min(vals), max(vals)
    if value_format(vlo) == value_format(vhi):
        vhi = vlo           # printed alike, so coloured alike: a spread in the last digits is not a contrast
    if span is not None and all(drawable(v) for v in span):
        vlo, vhi = min(vlo, float(min(span))), max(vhi, float(max(span)))
    cell = max(1, min(96, int(max_grid // n)))
    grid = cell * n
    lab_w = max(text_width(str(s), 10) for s in labels) if labels else 10
    left = 34 + lab_w
    top = 34.0
    bar_x = left + grid + 18
    right_w = 18 + 14 + 8 + max(text_width(value_format(v), 10) for v in (vlo, vhi)) + 28
    width = left + grid + right_w
    height = top + grid + 46

    def t_of(v: float) -> float:
        t = 0.5 if vhi == vlo else (v - vlo) / (vhi - vlo)
        return 1 - t if better == "lower" else t

    out = _open(width, height, title, desc, uid, attrs)
    out.append(f'<defs><pattern id="{uid}-hole" width="4" height="4" patternUnits="userSpaceOnUse" '
               f'patternTransform="rotate(45)"><rect width="4" height="4" fill="#f4f4f4"/>'
               f'<line x1="0" y1="0" x2="0" y2="4" stroke="{HOLE}" stroke-width="1.5"/></pattern>'
               f'<linearGradient id="{uid}-bar" x1="0" y1="1" x2="0" y2="0">'
               + "".join(f'<stop offset="{k / 8:.3f}" stop-color="{colormap(t_of(vlo + (vhi - vlo) * k / 8))}"/>'
                         for k in range(9))
               + "</linearGradient></defs>")
    out.append(f'<rect x="{_f(left)}" y="{_f(top)}" width="{grid}" height="{grid}" fill="url(#{uid}-hole)"/>')

    small = n <= 32
    annotate = n <= 16 and cell >= 26
    if small:
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                if v is None:
                    continue
                x, y = left + j * cell, top + i * cell
                a, b = (labels[i] if i < len(labels) else i), (labels[j] if j < len(labels) else j)
                tip = f"{a} → {b}: {value_format(v)} {unit}"
                out.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{cell}" height="{cell}" '
                           f'fill="{colormap(t_of(v))}"><title>{esc(tip)}</title></rect>')
                if annotate:
                    ink = INK if t_of(v) > 0.55 else "#fff"
                    out.append(f'<text x="{_f(x + cell / 2)}" y="{_f(y + cell / 2 + 4)}" text-anchor="middle" '
                               f'font-size="{10 if cell < 40 else 12}" fill="{ink}">{esc(value_format(v))}</text>')
    else:
        bins: Dict[int, List[str]] = {}
        levels = 64
        for i, row in enumerate(matrix):
            j = 0
            while j < len(row):
                v = row[j]
                if v is None:
                    j += 1
                    continue
                b = min(levels - 1, int(t_of(v) * levels))
                k = j + 1
                while k < len(row) and row[k] is not None and min(levels - 1, int(t_of(row[k]) * levels)) == b:
                    k += 1
                bins.setdefault(b, []).append(f"M{_f(left + j * cell)} "
                                              f"{_f(top + i * cell)}h{(k - j) * cell}v{cell}h-{(k - j) * cell}z")
                j = k
        for b in sorted(bins):
            out.append(f'<path fill="{colormap((b + 0.5) / levels)}" d="{"".join(bins[b])}"/>')

    for g in groups:
        if 0 < g < n:
            p = g * cell
            out.append(f'<line x1="{_f(left + p)}" y1="{_f(top)}" x2="{_f(left + p)}" y2="{_f(top + grid)}" '
                       f'stroke="#fff" stroke-width="1.5"/>')
            out.append(f'<line x1="{_f(left)}" y1="{_f(top + p)}" x2="{_f(left + grid)}" y2="{_f(top + p)}" '
                       f'stroke="#fff" stroke-width="1.5"/>')
    out.append(f'<rect x="{_f(left)}" y="{_f(top)}" width="{grid}" height="{grid}" fill="none" stroke="#9e9e9e"/>')

    # Tick labels: at most ~16 per axis, on a stride that divides evenly.
    stride = 1
    while n / stride > 16:
        stride *= 2
    for k in range(0, n, stride):
        name = labels[k] if k < len(labels) else str(k)
        c = k * cell + cell / 2
        out.append(f'<text x="{_f(left - 5)}" y="{_f(top + c + 3.5)}" text-anchor="end" font-size="10" '
                   f'fill="{MUTED}">{esc(name)}</text>')
        out.append(f'<text x="{_f(left + c)}" y="{_f(top + grid + 14)}" text-anchor="middle" font-size="10" '
                   f'fill="{MUTED}">{esc(name)}</text>')
    out.append(f'<text x="{_f(left + grid / 2)}" y="{_f(height - 8)}" text-anchor="middle" fill="{INK}">'
               f'{esc(x_label)}</text>')
    out.append(f'<text transform="translate(14 {_f(top + grid / 2)}) rotate(-90)" text-anchor="middle" '
               f'fill="{INK}">{esc(y_label)}</text>')

    # Colour bar: high values at the top.
    bar_h = min(grid, 240)
    out.append(f'<rect x="{_f(bar_x)}" y="{_f(top)}" width="14" height="{_f(bar_h)}" fill="url(#{uid}-bar)" '
               f'stroke="#9e9e9e"/>')
    bar_ticks = [vlo] if vhi == vlo else _bar_ticks(vlo, vhi)
    for v in bar_ticks:
        y = top + bar_h - (0 if vhi == vlo else (v - vlo) / (vhi - vlo)) * bar_h
        out.append(f'<line x1="{_f(bar_x + 14)}" y1="{_f(y)}" x2="{_f(bar_x + 18)}" y2="{_f(y)}" stroke="{MUTED}"/>')
        out.append(f'<text x="{_f(bar_x + 21)}" y="{_f(y + 3.5)}" font-size="10" fill="{MUTED}">'
                   f'{esc(value_format(v))}</text>')
    out.append(f'<text x="{_f(bar_x)}" y="{_f(top - 6)}" font-size="10" fill="{INK}">{esc(unit)}</text>')
    holes = sum(1 for i, r in enumerate(matrix) for j, v in enumerate(r) if v is None and i != j)
    if holes:
        y = top + bar_h + 14
        out.append(f'<rect x="{_f(bar_x)}" y="{_f(y)}" width="14" height="10" fill="url(#{uid}-hole)" '
                   'stroke="#9e9e9e"/>')
        out.append(f'<text x="{_f(bar_x + 19)}" y="{_f(y + 9)}" font-size="10" fill="{MUTED}">no value</text>')
    out.append("</svg>")
    return "\n".join(out)


def _bar_ticks(lo: float, hi: float) -> List[float]:
    """Round values inside [lo, hi], plus the two ends unless a round value is close to one."""
    step = _nice_step(hi - lo, 4)
    inner = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    gap = 0.12 * (hi - lo)
    ends = [v for v in (lo, hi) if all(abs(v - t) > gap for t in inner)]
    return sorted(set(inner + ends))


# -- roofline ---------------------------------------------------------------------

def roofline(compute: Sequence[Tuple[str, float, bool]], bandwidth: Sequence[Tuple[str, float, bool]], *,
             title: str = "Roofline", ridges: Sequence[Tuple[str, float, float]] = (),
             uid: str = "roofline", desc: str = "", width: float = 640, height: float = 420,
             attrs: Optional[Dict[str, str]] = None, points: Sequence[Tuple[str, float, float]] = ()) -> str:
    """Log-log roofline: compute roofs (label, Gflop/s, measured) and bandwidth
    roofs (label, GB/s, measured); measured roofs solid, theoretical dashed.

    ``ridges`` are points to mark: (label, flop/byte, Gflop/s); ``points`` the applications placed
    on it, each labelled: (label, flop/byte, Gflop/s), drawn as filled markers (``Mark``).
    """
    compute = [r for r in compute if drawable(r[1], "log10")]
    bandwidth = [r for r in bandwidth if drawable(r[1], "log10")]
    if not compute or not bandwidth:
        raise NothingToPlot("a roofline needs at least one compute and one bandwidth roof above zero")
    top_c = max(v for _, v, _ in compute)
    top_b = max(v for _, v, _ in bandwidth)
    # Knees in exponents of 2: a ratio of two extreme roofs would overflow a float.
    knees = [math.log2(c) - math.log2(b) for _, c, _ in compute for _, b, _ in bandwidth]
    lo_e, hi_e = LOG_EXPONENTS["log2"]
    points = [p for p in points if drawable(p[1], "log2") and drawable(p[2], "log10")]
    # the points marked (ridges, the applications placed) stay inside: a workload of 133 flop/B is drawn over the
    # compute roof, not off the plot
    at = [math.log2(p[1]) for p in points] + [math.log2(x) for _, x, _ in ridges if drawable(x, "log2")]
    xlo = 2.0 ** max(lo_e, min([-3, math.floor(min(knees) - 2)] + [math.floor(a - 1) for a in at]))
    xhi = 2.0 ** min(hi_e, max([6, math.ceil(max(knees) + 2)] + [math.ceil(a + 1) for a in at]))
    lines: List[Line] = []
    color = iter(PALETTE)
    for label, b, measured in bandwidth:
        knee = top_c / b
        lines.append(Line(label, [xlo, knee], [b * xlo, top_c], next(color, MUTED), not measured, False))
    for label, c, measured in compute:
        lines.append(Line(label, [c / top_b, xhi], [c, c], next(color, MUTED), not measured, False))
    for label, x, y in ridges:
        lines.append(Line(label, [x], [y], INK, False, True))
    marks = [Mark(label, x, y, INK, ("diamond", "square", "triangle", "circle")[k % 4])
             for k, (label, x, y) in enumerate(points)]
    return line_plot(lines, title=title, x_label="arithmetic intensity (flop/byte)",
                     y_label="performance (Gflop/s)", x_scale="log2", y_scale="log10",
                     y_from_zero=False, width=width, height=height, uid=uid, desc=desc, attrs=attrs, marks=marks)
