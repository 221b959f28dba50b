"""The single-file HTML report: header facts, summary, plots, metrics, findings.

One self-contained file: inline CSS, inline SVG (report/svg.py), no script,
no external font, image or stylesheet, so it opens offline, survives being
mailed, and prints. Every piece of text from the run goes through
html.escape. A series that is absent is not drawn as empty axes: the plot's
place gets one line, "not measured: <reason>".
"""
from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass
from html import escape
from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis import roofline as _roofline
from ..analysis import summary as _summary
from ..results.placements import PLACEMENT_TITLES
from ..errors import PathError
from ..results.model import FAIL, LOWER, OK, SKIPPED, WARN, Finding, Metric, Run, Series
from . import _format as F
from . import svg as S

STATUS_ORDER = (FAIL, WARN, OK, SKIPPED)

# Known plots, in report order: (series, heading, the bench suite that measures it, its step
# label: a step that failed leaves a skipped Finding "bench.<label>" whose evidence says why).
PLOTS = (
    ("stream.triad.threads", "STREAM triad vs threads", "memory", "stream-threads"),
    ("dgemm.threads", "DGEMM vs threads", "dgemm", "dgemm"),
    ("bandwidth.load.size", "Load bandwidth vs working set", "cache", "cache-bandwidth"),
    ("bandwidth.triad.size", "Triad bandwidth vs working set", "cache", "cache-bandwidth"),
    ("latency.size", "Latency vs working set", "latency", "latency"),
    ("c2c.matrix", "Core-to-core latency", "cores", "core-to-core"),
    ("latency.numa", "Memory latency by NUMA node", "latency", "numa-latency"),
    ("stream.triad.numa", "STREAM triad by NUMA node", "memory", "numa-bandwidth"),
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


# -- reasons for an absent plot -------------------------------------------------------

def _missing_reason(run: Run, name: str, suite: str, step: str = "") -> str:
    m = F.as_dict(run.machine)
    family = name.split(".", 1)[0]
    if name.endswith(".numa") and len(m.get("nodes") or []) <= 1 and m:
        return "one NUMA domain, so there is no remote memory to compare"
    if name == "c2c.matrix" and m and (m.get("threads") or 0) < 2:
        return "needs at least two CPUs"
    skipped = [f for f in run.findings if f.status == SKIPPED]
    exact = [f for f in skipped if step and f.id.replace("_", "-") == f"bench.{step}"]
    loose = [f for f in skipped if name in f.id or family in f.id.split(".") or suite in f.id.split(".")]
    for f in exact + loose:
        return f"{f.title}" + (f" ({f.evidence})" if f.evidence else "")
    if run.partial:
        return "the run stopped before this measurement" + (f" ({run.partial_reason})" if run.partial_reason else "")
    return f"not part of this run (measured by: ceiling bench {suite})"


# -- xy plots ---------------------------------------------------------------------

def _positive(xs: Sequence[Optional[float]]) -> List[float]:
    return [float(v) for v in xs if v is not None and v > 0]


def _cache_rules(run: Run, threads: int) -> Tuple[List[S.Rule], List[str]]:
    """Vertical lines at the cache capacity ``threads`` compactly placed threads can use."""
    rules, words = [], []
    for c in F.caches(run.machine):
        inst = max(1, int(c.get("instances") or 1))
        per = max(1, int(c.get("cpus_per_instance") or 1))
        used = 1 if threads <= 1 else min(inst, math.ceil(threads / per))
        cap = c["size_bytes"] * used
        text = f"{F.cache_name(c)} {F.size(cap)}" + (f" (×{used})" if used > 1 else "")
        rules.append(S.Rule(cap, text, "x", S.MUTED, True))
        words.append(text)
    return rules, words


def _peak_rule(run: Run, metric: str, machine_key: str) -> Tuple[List[S.Rule], str]:
    m = run.metric(metric)
    p = m.peak if m is not None and m.peak is not None and m.peak.known else F.machine_peak(run.machine, machine_key)
    if p is None or not p.known:
        why = p.provenance if p is not None else "not recorded"
        return [], f"Theoretical peak unknown: {why}."
    text = f"peak {F.with_unit(p.value, p.unit, sig=4)}"
    return [S.Rule(p.value, text, "y", S.PALETTE[1], True)], f"Dashed line: theoretical {text} ({p.provenance})."


def _axis_label(label: str, unit: str, fallback: str) -> str:
    label = label or fallback
    return f"{label} ({unit})" if unit else label


def _xy_plot(run: Run, s: Series, heading: str, group: Sequence[Tuple[str, Series]] = ()) -> Plot:
    """One series, or with ``group`` [(label, series), ...] (``s`` the first) several as lines."""
    members = list(group) or [("", s)]
    lines = []
    for label, one in members:
        pts = [(float(x), y) for x, y in zip(one.x, one.y) if x is not None]
        if [y for _, y in pts if y is not None]:
            lines.append(S.Line(label, [x for x, _ in pts], [y for _, y in pts]))
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
    if is_bytes and s.x_label == "working set":   # cache capacities mean nothing on message or I/O sizes
        threads = int(s.context.get("threads") or 1)
        r, words = _cache_rules(run, threads)
        rules += r
        if words:
            scope = "per cache instance (one thread)" if threads <= 1 else f"usable by {threads} threads placed compactly"
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
    svg = S.line_plot(lines, title=heading,
                      x_label=_axis_label(s.x_label, x_unit, "x") + (" (bytes)" if is_bytes else ""),
                      y_label=_axis_label(s.y_label, s.y_unit, "y"), x_scale=x_scale, y_scale=y_scale,
                      x_format=x_fmt, x_ticks=x_ticks, rules=rules, uid=_uid(s.name), desc=" ".join(notes) or heading,
                      attrs={"data-series": names})
    return Plot(s.name, heading, svg, " ".join(notes))


# -- matrices -----------------------------------------------------------------------

def _groups(run: Run, labels: Sequence[str]) -> List[int]:
    """Indices where the socket of the labelled CPU changes."""
    sockets = {}
    for c in F.as_dict(run.machine).get("cpus") or []:
        c = F.as_dict(c)
        sockets[str(c.get("id"))] = c.get("socket")
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
    if holes:
        sampled = s.context.get("sampled")
        notes.append(f"Hatched: {holes} of {total} pairs have no value"
                     + (f" (sampled: {sampled})." if sampled else "."))
    svg = S.heatmap(s.matrix, labels, title=heading, unit=unit,
                    x_label=s.x_label or ("to CPU" if is_c2c else "column"),
                    y_label=s.y_label or ("from CPU" if is_c2c else "row"), better=better, groups=groups,
                    uid=_uid(s.name), desc=" ".join(notes), attrs={"data-series": s.name})
    return Plot(s.name, heading, svg, " ".join(notes), wide=n > 24)


# -- roofline -----------------------------------------------------------------------

def _roofline_plot(run: Run) -> Plot:
    heading = "Roofline (DP)"
    rl = _roofline.ceilings(run)
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
    if x is not None:
        ridges.append((f"ridge {F.num(x)} flop/byte", x, c.value))
        notes.append(f"Ridge point {F.num(x)} flop/byte ({c.label} / {b.label}): a kernel with less "
                     "arithmetic intensity is bound by that bandwidth.")
    if rl.missing:
        notes.append("Not drawn: " + "; ".join(rl.missing) + ".")
    svg = S.roofline(compute, bandwidth, title=heading, ridges=ridges, uid="roofline",
                     desc=" ".join(notes), attrs={"data-series": "roofline"})
    return Plot("roofline", heading, svg, " ".join(notes))


def _uid(name: str) -> str:
    return "p-" + "".join(ch if ch.isalnum() else "-" for ch in name)


def plots(run: Run) -> List[Plot]:
    """Every plot the report shows, known ones first, then any other series, then the roofline."""
    out = []
    by_name = {s.name: s for s in run.series}
    known = {name for name, _, _, _ in PLOTS}
    for name, heading, suite, step in PLOTS:
        s = by_name.get(name)
        if s is None:
            out.append(Plot(name, heading, None, missing=_missing_reason(run, name, suite, step)))
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


# -- page sections ------------------------------------------------------------------

def _eff_html(m: Metric, width: int = 64) -> str:
    if m.efficiency is None:
        return ""
    w = max(0.0, min(1.0, m.efficiency)) * 100
    return f'<span class="bar" style="width:{width}px"><span style="width:{w:.0f}%"></span></span>'


def _header(run: Run) -> str:
    parts = [f'<header><h1>ceiling report <span class="host">{esc(run.host or "unknown host")}</span></h1>',
             f'<p class="sub">{esc(F.when(run.started))} · ceiling {esc(run.tool_version)}'
             + (f' · run {esc(run.run_id)}' if run.run_id else "")
             + f' · <code>{esc(" ".join(run.command))}</code></p>']
    m = F.as_dict(run.machine)
    if m:
        total = m.get("mem_total_bytes")
        facts = [F.cpu_model(m), f"{F.topology(m)}, {F.numa_text(m)}",
                 f"{F.size(total)} memory" if total else "memory size unknown"]
        c = F.as_dict(m.get("clocks"))
        if c.get("measured_all_ghz"):
            facts.append(f"{F.num(c['measured_all_ghz'])} GHz measured, all cores busy")
        if m.get("virtualized"):
            facts.append(f"{m['virtualized']} virtual machine")
        parts.append(f'<p class="strip">{" · ".join(esc(x) for x in facts)} (<a href="#machine">machine</a>)</p>')
    parts[-1] += "</header>"
    if run.partial:
        reason = (run.partial_reason or "It stopped before the end").rstrip()
        if not reason.endswith((".", "!", "?")):
            reason += "."
        parts.append(f'<p class="banner"><strong>Partial run:</strong> {esc(reason)} '
                     "What was measured is shown.</p>")
    return "\n".join(parts)


def _summary_section(run: Run) -> str:
    cards = []
    for label, m in _summary.headline(run):
        value, unit = F.quantity(m.value, m.unit)
        if m.efficiency is not None and m.peak is not None and m.peak.known:
            w = max(0.0, min(1.0, m.efficiency)) * 100
            eff = (f'<div class="meter"><span style="width:{w:.0f}%"></span></div>'
                   f'<div class="eff">{esc(F.pct(m.efficiency))} of '
                   f'{esc(F.with_unit(m.peak.value, m.peak.unit or m.unit, 4))} peak</div>')
        elif m.peak is not None and not m.peak.known:
            eff = f'<div class="eff" title="{esc(m.peak.provenance)}">peak unknown</div>'
        else:
            eff = ""
        bad = "" if m.valid else ' <span class="badge fail">invalid</span>'
        cards.append(f'<div class="card"><div class="label">{esc(label)}{bad}</div>'
                     f'<div class="value">{esc(value)}<span class="unit">{esc(unit)}</span></div>{eff}</div>')
    counts = ", ".join(f"{sum(1 for f in run.findings if f.status == s)} {s}" for s in STATUS_ORDER
                       if any(f.status == s for f in run.findings)) or "none"
    verdict = esc(_summary.verdict(run))
    lead = "Furthest below peak - "
    if verdict.startswith(lead):
        verdict = f"<strong>Furthest below peak:</strong> {verdict[len(lead):]}"
    problems = "".join(f'<li><span class="badge {f.status}">{esc(f.status)}</span> {esc(f.title)}'
                       + (f' <span class="more">and {more} more like it</span>' if more else "") + "</li>"
                       for f, more in _summary.problems(run))
    return ('<section id="summary"><h2>Summary</h2>'
            f'<p class="verdict">{verdict}</p>'
            + (f'<div class="cards">{"".join(cards)}</div>' if cards else "<p>No headline metric was measured.</p>")
            + f'<p class="counts">Findings: {esc(counts)} (<a href="#findings">details</a>)</p>'
            + (f'<ul class="problems">{problems}</ul>' if problems else "") + "</section>")


def _machine_section(run: Run) -> str:
    m = F.as_dict(run.machine)
    if not m:
        return '<section id="machine"><h2>Machine</h2><p>Not recorded in this run.</p></section>'
    facts = [("Host", m.get("hostname") or run.host), ("CPU", F.cpu_model(m)),
             ("Topology", f"{F.topology(m)}, {F.numa_text(m)}"), ("Clocks", "; ".join(F.clocks(m))),
             ("ISA", F.isa_text(m, limit=24)), ("Caches", F.caches_text(m)), ("Memory", F.memory(m))]
    if m.get("virtualized"):
        facts.append(("Virtual machine", m["virtualized"]))
    aff = m.get("affinity") or []
    if aff and m.get("threads") and len(aff) != m.get("threads"):
        facts.append(("Affinity", f"{len(aff)} of {m['threads']} CPUs"))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    rows = []
    for key, raw in sorted((m.get("peaks") or {}).items()):
        p = F.peak_from(raw)
        if p is None:
            continue
        value = F.with_unit(p.value, p.unit, 4) if p.known else "unknown"
        rows.append(f'<tr><td><code>{esc(key)}</code></td><td class="n">{esc(value)}</td>'
                    f'<td class="note">{esc(p.provenance)}</td></tr>')
    peaks = ""
    if rows:
        peaks = ('<h3>Theoretical peaks</h3><table class="peaks"><thead><tr><th>peak</th><th class="n">value</th>'
                 f'<th>provenance</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return f'<section id="machine"><h2>Machine</h2><dl class="facts">{dl}</dl>{peaks}</section>'


def _plots_section(items: List[Plot]) -> str:
    figs, missing = [], []
    for p in items:
        if p.svg is None:
            missing.append(f"<li><strong>{esc(p.heading)}</strong> - not measured: {esc(p.missing)}</li>")
            continue
        cls = ' class="wide"' if p.wide else ""
        figs.append(f'<figure{cls} id="fig-{esc(_uid(p.name))}">{p.svg}'
                    f'<figcaption>{esc(p.caption)}</figcaption></figure>')
    body = f'<div class="plots">{"".join(figs)}</div>' if figs else ""
    if missing:
        body += f'<ul class="missing">{"".join(missing)}</ul>'
    return f'<section id="plots"><h2>Plots</h2>{body}</section>'


def _metric_notes(m: Metric) -> List[str]:
    notes = []
    if not m.valid:
        notes.append("INVALID: the kernel's output did not match its analytic value; the number is not trusted.")
    if m.peak is not None:
        notes.append(("peak: " if m.peak.known else "peak unknown: ") + (m.peak.provenance or "no reason recorded"))
    if m.context.get("cycles") is not None:
        notes.append(f"{float(m.context['cycles']):.3g} cycles")
    if m.context.get("isa"):
        notes.append(f"ISA {m.context['isa']}")
    if m.note:
        notes.append(m.note)
    return notes


def _metrics_section(run: Run) -> str:
    if not run.metrics:
        return '<section id="metrics"><h2>Metrics</h2><p>Nothing was measured in this run.</p></section>'
    head = ("<tr><th>metric</th><th class='n'>value</th><th>unit</th><th class='n'>peak</th>"
            "<th>of peak</th><th class='n'>median</th><th class='n'>min – max</th><th class='n'>CV</th>"
            "<th class='n'>reps</th><th class='n'>threads</th><th>notes</th></tr>")
    rows = []
    for m in run.metrics:
        factor, unit = F.time_scale(m.value, m.unit)

        def sc(v: Optional[float], sig: int = 3) -> str:
            return F.num(None if v is None else v * factor, sig)

        st = m.stats
        if m.peak is None:
            peak = F.DASH
        elif m.peak.known:
            peak = sc(m.peak.value, 4) if (m.peak.unit or m.unit) == m.unit else F.with_unit(m.peak.value, m.peak.unit, 4)
        else:
            peak = "unknown"
        eff = (f"{_eff_html(m, 48)} {esc(F.pct(m.efficiency))}" if m.efficiency is not None
               else ("unknown" if m.peak is not None and not m.peak.known else F.DASH))
        threads = m.context.get("threads")
        cls = ' class="invalid"' if not m.valid else ""
        rows.append(
            f"<tr{cls}><td><code>{esc(m.name)}</code></td><td class='n'>{esc(sc(m.value))}</td><td>{esc(unit)}</td>"
            f"<td class='n'>{esc(peak)}</td><td class='eff'>{eff}</td>"
            f"<td class='n'>{esc(sc(st.median) if st else F.DASH)}</td>"
            f"<td class='n'>{esc(f'{sc(st.min)} – {sc(st.max)}' if st else F.DASH)}</td>"
            f"<td class='n'>{esc(F.pct(st.cv) if st and st.n > 1 else F.DASH)}</td>"
            f"<td class='n'>{esc(st.n if st else (len(m.values) or F.DASH))}</td>"
            f"<td class='n'>{esc(threads if threads is not None else F.DASH)}</td>"
            f"<td class='note'>{'<br>'.join(esc(n) for n in _metric_notes(m))}</td></tr>")
    return ('<section id="metrics"><h2>Metrics</h2><p class="hint">Value is the best repetition '
            "(STREAM's convention); of peak = value / theoretical peak; CV = standard deviation / mean.</p>"
            f'<div class="scroll"><table class="metrics"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            "</table></div></section>")


def _finding_html(f: Finding) -> str:
    dl = []
    for key in ("evidence", "why", "fix"):
        text = getattr(f, key)
        if text:
            val = f"<code>{esc(text)}</code>" if key == "fix" and _looks_like_command(text) else esc(text)
            dl.append(f"<dt>{key}</dt><dd>{val}</dd>")
    root = ' <span class="root">needs root</span>' if f.needs_root else ""
    status = f.status if f.status in STATUS_ORDER else "skipped"
    return (f'<div class="finding {esc(status)}"><div class="ftitle"><span class="badge {esc(status)}">'
            f'{esc(f.status)}</span> {esc(f.title)} <code class="fid">{esc(f.id)}</code>{root}</div>'
            + (f'<dl>{"".join(dl)}</dl>' if dl else "") + "</div>")


def _looks_like_command(text: str) -> bool:
    return text.split(" ", 1)[0] in ("echo", "sysctl", "cpupower", "tuned-adm", "systemctl", "numactl",
                                     "export", "ulimit", "modprobe", "mount")


def _findings_section(run: Run) -> str:
    if not run.findings:
        return '<section id="findings"><h2>Findings</h2><p>No checks were run.</p></section>'
    parts = ['<section id="findings"><h2>Findings</h2>']
    for status in STATUS_ORDER:
        group = [f for f in run.findings if f.status == status]
        if group:
            parts.append(f"<h3>{esc(status.capitalize())} ({len(group)})</h3>")
            parts += [_finding_html(f) for f in group]
    other = [f for f in run.findings if f.status not in STATUS_ORDER]
    if other:
        parts.append("<h3>Other</h3>")
        parts += [_finding_html(f) for f in other]
    parts.append("</section>")
    return "".join(parts)


def _run_section(run: Run) -> str:
    facts = [("Tool", f"ceiling {run.tool_version} (result schema {run.schema_version})"),
             ("Command", " ".join(run.command)), ("Started", run.started or "-"),
             ("Finished", run.finished or ("-" if not run.partial else "did not finish"))]
    if run.run_id:
        facts.append(("Run id", run.run_id))
    env = [(k, v) for k, v in sorted((run.environment or {}).items()) if v not in (None, "", [], {})]
    for k, v in env:
        if isinstance(v, (list, tuple)) and len(v) > 16:
            v = f"{len(v)} items: {', '.join(map(str, v[:16]))}, ..."
        facts.append((k, v))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    return f'<section id="run"><h2>Run</h2><dl class="facts">{dl}</dl></section>'


CSS = """
:root{--ink:#1f1f1f;--muted:#5f6368;--line:#e3e5e8;--panel:#f6f7f9;--accent:#0072B2;
--fail:#C2410C;--warn:#E69F00;--ok:#00785A;--skip:#7a7a7a}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
-webkit-print-color-adjust:exact;print-color-adjust:exact}
main{max-width:1240px;margin:0 auto;padding:28px 32px 40px}
h1{font-size:24px;font-weight:650;margin:0 0 2px;letter-spacing:-.01em}
h1 .host{color:var(--accent)}
h2{font-size:17px;font-weight:650;margin:34px 0 12px;padding-bottom:6px;border-bottom:2px solid var(--line)}
h3{font-size:14px;margin:18px 0 6px}
a{color:var(--accent)}
.sub,.hint,.counts{color:var(--muted);margin:4px 0}
.strip{margin:6px 0 0}
ul.problems{list-style:none;padding:0;margin:4px 0 0}
ul.problems li{margin:3px 0} .more{color:var(--muted)}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
.banner{border-left:4px solid var(--warn);background:#fff7e0;padding:10px 14px;margin:16px 0 0}
.verdict{font-size:15px;background:var(--panel);border-left:4px solid var(--accent);padding:12px 16px;margin:0 0 14px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:9px 12px;break-inside:avoid}
.card .label{color:var(--muted);font-size:12.5px}
.card .value{font-size:21px;font-weight:600;font-variant-numeric:tabular-nums;line-height:1.3}
.card .unit{font-size:13px;font-weight:400;color:var(--muted);margin-left:4px}
.card .eff{font-size:12px;color:var(--muted)}
.meter{height:5px;background:#e6e8eb;border-radius:3px;overflow:hidden;margin:4px 0 2px}
.meter>span{display:block;height:100%;background:var(--accent)}
.bar{display:inline-block;height:6px;background:#e6e8eb;border-radius:3px;vertical-align:middle;overflow:hidden}
.bar>span{display:block;height:100%;background:var(--accent)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 20px;margin:0}
dl.facts dt{color:var(--muted)} dl.facts dd{margin:0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;font-weight:600;color:var(--muted);border-bottom:2px solid var(--line);white-space:nowrap}
.n{text-align:right;white-space:nowrap}
td.eff{white-space:nowrap}
td.note{color:var(--muted);font-size:12px;min-width:260px}
tbody tr:nth-child(even){background:#fafbfc}
tr.invalid td{color:var(--fail)}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:12px 12px 10px;break-inside:avoid;page-break-inside:avoid}
figure.wide{grid-column:1/-1}
figure svg{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{color:var(--muted);font-size:12px;margin-top:6px}
ul.missing{color:var(--muted);padding-left:20px;margin:12px 0 0}
.badge{display:inline-block;min-width:58px;text-align:center;padding:1px 7px;border-radius:9px;font-size:10.5px;
font-weight:700;letter-spacing:.05em;text-transform:uppercase;color:#fff;vertical-align:1px}
.badge.fail{background:var(--fail)} .badge.warn{background:var(--warn);color:#1f1f1f}
.badge.ok{background:var(--ok)} .badge.skipped{background:var(--skip)}
.finding{border:1px solid var(--line);border-left:4px solid var(--skip);border-radius:4px;padding:8px 14px;margin:8px 0;break-inside:avoid}
.finding.fail{border-left-color:var(--fail)} .finding.warn{border-left-color:var(--warn)} .finding.ok{border-left-color:var(--ok)}
.ftitle{font-weight:600} .fid{color:var(--muted);font-weight:400;margin-left:6px}
.root{font-size:11px;font-weight:600;color:var(--fail);border:1px solid var(--fail);border-radius:3px;padding:0 4px;margin-left:6px}
.finding dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0 2px}
.finding dt{color:var(--muted)} .finding dd{margin:0}
footer{margin-top:36px;padding-top:10px;border-top:1px solid var(--line);color:var(--muted);font-size:12px}
@media (max-width:720px){main{padding:16px}.plots{grid-template-columns:1fr}}
@media print{@page{size:A4;margin:12mm}main{max-width:none;padding:0}body{font-size:10.5px}
h2{break-after:avoid}.plots{grid-template-columns:1fr}figure svg{max-height:120mm;width:auto}
.scroll{overflow:visible}td.note{min-width:0}a{color:inherit;text-decoration:none}}
"""


def render(run: Run) -> str:
    """The whole report as one self-contained HTML document."""
    title = f"ceiling report - {run.host or 'unknown host'}"
    body = "\n".join([
        _header(run), _summary_section(run), _plots_section(plots(run)), _metrics_section(run),
        _findings_section(run), _machine_section(run), _run_section(run),
        f'<footer>Generated by ceiling {esc(run.tool_version)}. A self-contained file: it loads nothing '
        "from the network.</footer>",
    ])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta name=\"generator\" content=\"ceiling {esc(run.tool_version)}\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n"
            "</body>\n</html>\n")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write(run: Run, path: "os.PathLike[str] | str") -> None:
    """Write the report to ``path`` atomically: a temporary file beside it, then os.replace.

    Raises PathError (one line) when the directory or file cannot be written;
    the temporary file is removed then, and an existing report is left intact.
    """
    text = render(run)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise PathError(f"cannot write the HTML report to {path}: it is a directory")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ceiling-", suffix=".html.tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; a report is meant to be shared like any file the user writes.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise PathError(f"cannot write the HTML report to {path}: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
