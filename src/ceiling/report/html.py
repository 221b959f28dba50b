"""The single-file HTML report: header facts, summary, plots, metrics, findings.

One self-contained file: inline CSS (html_style.py), inline SVG (html_plots.py,
svg.py), no script, no external font, image or stylesheet, so it opens
offline, survives being mailed, and prints. Every piece of text from the run
goes through html.escape. The page renders what the Run records, the analysis
included; it computes nothing.
"""
from __future__ import annotations

import os
from typing import List, Optional

from ..analysis.summary import problems as _problems
from ..files import output
from ..results.model import FAIL, OK, SKIPPED, WARN, Figure, Finding, Metric, Run
from . import _format as F
from . import labels as L
from .html_cluster import cluster_section
from .html_profile import application_section, bound_lead
from .html_plots import Plot, esc, plots, uid as _uid
from .html_style import CSS

STATUS_ORDER = (FAIL, WARN, OK, SKIPPED)


# -- page sections ------------------------------------------------------------------

def _eff_html(m: Metric, width: int = 64) -> str:
    eff = F.figure(m.efficiency)
    if eff is None:
        return ""
    w = max(0.0, min(1.0, eff)) * 100
    return f'<span class="bar" style="width:{width}px"><span style="width:{w:.0f}%"></span></span>'


def _header(run: Run) -> str:
    who = f"cluster of {len(run.nodes)} nodes, rank 0 on {run.host}" if run.nodes else (run.host or "unknown host")
    parts = [f'<header><h1>ceiling report <span class="host">{esc(who)}</span></h1>',
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
    mpi = F.mpi_text(run)
    if mpi:
        parts.append(f'<p class="strip">MPI: {esc(mpi)}</p>')
    parts[-1] += "</header>"
    if run.partial:
        reason = (run.partial_reason or "It stopped before the end").rstrip()
        if not reason.endswith((".", "!", "?")):
            reason += "."
        parts.append(f'<p class="banner"><strong>Partial run:</strong> {esc(reason)} '
                     "What was measured is shown.</p>")
    return "\n".join(parts)


def _plain_card(label: str, m: Metric) -> str:
    """A headline figure shown as it stands."""
    value, unit = F.quantity(m.value, m.unit)
    eff = _eff(m, m.efficiency)
    bad = "" if m.valid else ' <span class="badge fail">invalid</span>'
    if m.context.get("disturbed"):       # a document from before the analysis stored figures
        bad += (f' <span class="badge warn" title="{esc(m.context["disturbed"])}">'
                "others were busy</span>")
    return (f'<div class="card"><div class="label">{esc(label)}{bad}</div>'
            f'<div class="value">{esc(value)}<span class="unit">{esc(unit)}</span></div>{eff}</div>')


def _card(label: str, m: Metric, fig: Figure) -> str:
    """A headline figure the analysis says is not the node's value as it stands: disturbed
    (no value; the measured figure struck through beside it) or unstable (the median)."""
    bad = "" if m.valid else ' <span class="badge fail">invalid</span>'
    bad += f' <span class="badge warn" title="{esc(fig.evidence)}">{esc(fig.state)}</span>'
    if fig.shown is None:
        body = (f'<div class="value disturbed">{esc(F.DASH)}</div>'
                f'<div class="eff" title="{esc(fig.evidence)}"><s>{esc(F.with_unit(fig.measured, fig.unit))}</s> '
                "measured while other processes were busy: not the node's value</div>")
    else:
        value, unit = F.quantity(fig.shown, m.unit)
        cv = f", CV {F.pct(fig.cv)}" if F.figure(fig.cv) is not None else ""
        body = (f'<div class="value">{esc(value)}<span class="unit">{esc(unit)}</span></div>{_eff(m, fig.efficiency)}'
                f'<div class="eff" title="{esc(fig.evidence)}">median; best {esc(F.with_unit(fig.measured, fig.unit))}'
                f"{esc(cv)}</div>")
    return f'<div class="card"><div class="label">{esc(label)}{bad}</div>{body}</div>'


def _eff(m: Metric, eff) -> str:
    if F.figure(eff) is not None and m.peak is not None and m.peak.known:
        w = max(0.0, min(1.0, eff)) * 100
        return (f'<div class="meter"><span style="width:{w:.0f}%"></span></div>'
                f'<div class="eff">{esc(F.pct(eff))} of '
                f'{esc(F.with_unit(m.peak.value, m.peak.unit or m.unit, 4))} peak</div>')
    if m.peak is not None and not m.peak.known:
        return f'<div class="eff" title="{esc(m.peak.provenance)}">peak unknown</div>'
    return ""


def _summary_section(run: Run) -> str:
    cards = []
    for label, m in L.headline(run):
        fig = run.analysis.figure(m.name, m.node)
        cards.append(_card(label, m, fig) if fig is not None else _plain_card(label, m))
    counts = ", ".join(f"{sum(1 for f in run.findings if f.status == s)} {s}" for s in STATUS_ORDER
                       if any(f.status == s for f in run.findings)) or "none"
    text = L.verdict_text(run)
    lead = L.verdict_lead(text)
    verdict = bound_lead(run) or (f"<strong>{esc(lead[0])}:</strong> {esc(lead[1])}" if lead else esc(text))
    problems = "".join(f'<li><span class="badge {f.status}">{esc(f.status)}</span> {esc(f.title)}'
                       + (f' <span class="more">and {more} more like it</span>' if more else "") + "</li>"
                       for f, more in _problems(run))
    measured_with = F.mpi_text(run, short=True)
    with_mpi = (f'<p class="counts">MPI figures measured with {esc(measured_with)}</p>'
                if measured_with and any(m.name.startswith("net.") for _, m in L.headline(run)) else "")
    return ('<section id="summary"><h2>Summary</h2>'
            f'<p class="verdict">{verdict}</p>'
            + (f'<div class="cards">{"".join(cards)}</div>' if cards else
               "" if run.application else "<p>No headline metric was measured.</p>")
            + with_mpi + f'<p class="counts">Findings: {esc(counts)} (<a href="#findings">details</a>)</p>'
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
    for key, raw in L.shown_peaks(run):
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
    cycles = F.figure(m.context.get("cycles"))
    if cycles is not None:
        notes.append(f"{cycles:.3g} cycles")
    notes += F.page_notes(m)
    if m.context.get("isa"):
        notes.append(f"ISA {m.context['isa']}")
    note = F.row_note(m)
    if note:
        notes.append(note)
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
            peak = sc(m.peak.value, 4) if (m.peak.unit or m.unit) == m.unit else F.with_unit(m.peak.value, m.peak.unit,
                                                                                             4)
        else:
            peak = "unknown"
        eff = (f"{_eff_html(m, 48)} {esc(F.pct(m.efficiency))}" if m.efficiency is not None
               else ("unknown" if m.peak is not None and not m.peak.known else F.DASH))
        threads = m.context.get("threads")
        cls = ' class="invalid"' if not m.valid else ""
        spread = (F.pct(st.cv) + ("!" if F.high_spread(m) else "")) if st and st.n > 1 else F.DASH
        rows.append(
            f"<tr{cls}><td><code>{esc(m.name)}</code></td><td class='n'>{esc(sc(m.value))}</td><td>{esc(unit)}</td>"
            f"<td class='n'>{esc(peak)}</td><td class='eff'>{eff}</td>"
            f"<td class='n'>{esc(sc(st.median) if st else F.DASH)}</td>"
            f"<td class='n'>{esc(f'{sc(st.min)} – {sc(st.max)}' if st else F.DASH)}</td>"
            f"<td class='n'>{esc(spread)}</td>"
            f"<td class='n'>{esc(st.n if st else (len(m.values) or F.DASH))}</td>"
            f"<td class='n'>{esc(threads if threads is not None else F.DASH)}</td>"
            f"<td class='note'>{'<br>'.join(esc(n) for n in _metric_notes(m))}</td></tr>")
    return ('<section id="metrics"><h2>Metrics</h2><p class="hint">Value is the best repetition '
            "(STREAM's convention); of peak = value / theoretical peak; CV = standard deviation / mean.</p>"
            f'<div class="scroll"><table class="metrics"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>" + "".join(f'<p class="hint">{esc(n)}</p>'
                                       for n in F.run_notes(run.metrics) + list(run.analysis.notes))
            + "</section>")


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


def render(run: Run) -> str:
    """The whole report as one self-contained HTML document."""
    title = f"ceiling report - {run.host or 'unknown host'}"
    figures = plots(run)
    # A profiled program's report lists no node benchmark as "not measured": none was meant to be; it
    # shows the plots drawn (the roofline with the program on it), and a stored roofline it cannot draw, said
    if run.application:
        figures = [p for p in figures if p.svg is not None or (p.name == "roofline" and run.analysis.roofline)]
    shown = _plots_section(figures) if figures else ""
    body = "\n".join([
        _header(run), _summary_section(run), application_section(run), cluster_section(run), shown,
        _metrics_section(run),
        _findings_section(run), _machine_section(run), _run_section(run),
        f'<footer>Generated by ceiling {esc(run.tool_version)}. A self-contained file: it loads nothing '
        "from the network.</footer>",
    ])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta name=\"generator\" content=\"ceiling {esc(run.tool_version)}\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n"
            "</body>\n</html>\n")


def write(run: Run, path: "os.PathLike[str] | str") -> None:
    """Write the report to ``path`` by files/output.py's rules: a file atomically (a temporary
    file beside it, then a rename), a device or FIFO written through, a disk or a directory
    refused. Raises PathError (one line); an existing report is left intact on failure.
    """
    output.write(path, render(run), "the HTML report to ")
