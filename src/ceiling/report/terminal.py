"""The terminal report: header facts, peaks, a metrics table and findings,
plus a one-screen summary.

Output is meant to be pasted into a ticket or an e-mail: with color=False it
is plain text (ASCII plus "×" and "µ"), no box-drawing, wrapped to ``width``.
Colour is ANSI and only decorates text that is already complete without it.
"""
from __future__ import annotations

import functools
import re
import textwrap
from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis.summary import problems as _problems
from ..results.model import FAIL, OK, SKIPPED, WARN, Finding, Metric, Run
from . import _format as F
from . import labels as L
from .terminal_history import render_history  # noqa: F401 - `ceiling history` renders through here

STATUS_ORDER = (FAIL, WARN, OK, SKIPPED)

_ANSI = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
_STATUS_COLOR = {FAIL: "red", WARN: "yellow", OK: "green", SKIPPED: "dim"}


class _Style:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles or not text:
            return text
        codes = ";".join(_ANSI[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


_GLUE = re.compile(r"(\d) (?=\S)")


def _printable_run(fn):
    """Render a copy of the run whose every string is printable (report._format.printable):
    the terminal shows what came from outside, it never obeys it."""
    @functools.wraps(fn)
    def wrapper(run: Run, *a, **kw):
        if F.may_need_printable(run):
            run = Run.from_dict(F.printable_value(run.to_dict()))
        return fn(run, *a, **kw)
    return wrapper


def _wrap(text: str, width: int, indent: str, first: Optional[str] = None) -> List[str]:
    """Wrap with a hanging indent; ``first`` replaces the indent on line one.

    A number stays on the line of the word after it ("3.24 GHz", "2 cores").
    """
    first = indent if first is None else first
    w = max(width, len(first) + 20)
    glued = _GLUE.sub("\\1\0", text)
    lines = textwrap.wrap(glued, w, initial_indent=first, subsequent_indent=indent,
                          break_long_words=False, break_on_hyphens=False) or [first.rstrip()]
    return [line.replace("\0", " ") for line in lines]


# -- header ---------------------------------------------------------------------

def _facts(run: Run) -> List[Tuple[str, str]]:
    m = F.as_dict(run.machine)
    facts = [("Command", " ".join(run.command) or "-")]
    if m:
        facts += [
            ("CPU", F.cpu_model(m)),
            ("Topology", f"{F.topology(m)}, {F.numa_text(m)}"),
            ("Clocks", "; ".join(F.clocks(m))),
            ("ISA", F.isa_text(m)),
            ("Caches", F.caches_text(m)),
            ("Memory", F.memory(m)),
            ("Affinity", F.affinity_text(m)),
            ("Limits", F.limits_text(m)),
        ]
        if m.get("virtualized"):
            v = str(m["virtualized"])
            facts.append(("Virtual", "running in a virtual machine (hypervisor unknown)" if v.startswith("unknown")
                          else f"running in a {v} virtual machine"))
    else:
        facts.append(("Machine", "not recorded in this run"))
    if run.nodes:
        from .terminal_cluster import cluster_fact
        facts.insert(1, ("Cluster", cluster_fact(run)))
    env = run.environment or {}
    threads = env.get("threads")
    if threads:
        facts.append(("Threads", f"{threads}" + (f", {env['placement']} placement" if env.get("placement") else "")))
    mpi = F.mpi_text(run)
    if mpi:
        facts.append(("MPI", mpi))
    omp = [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith(("OMP_", "GOMP_", "KMP_")) and v is not None]
    if omp:
        facts.append(("OpenMP", " ".join(omp)))
    return facts


def header(run: Run, *, color: bool = False, width: int = 100) -> str:
    """Host, tool, time and the machine facts, one labelled line each (wrapped)."""
    st = _Style(color)
    title = f"ceiling {run.tool_version} - {run.host or 'unknown host'} - {F.when(run.started)}"
    lines = [st(x, "bold") for x in _wrap(title, width, "  ", "")]
    if run.partial:
        lines += [st(line, "yellow", "bold") for line in
                  _wrap("PARTIAL RUN: " + (run.partial_reason or "stopped before the end"), width, "  ")]
    for key, value in _facts(run):
        lines += _wrap(value, width, " " * 12, f"  {key:<10}")
    return "\n".join(lines)


def peaks(run: Run, *, color: bool = False, width: int = 100) -> str:
    """The machine's theoretical peaks with their provenance, or why each is unknown."""
    st = _Style(color)
    items = L.shown_peaks(run)
    if not items:
        return ""
    lines = [st("Theoretical peaks", "bold")]
    keyw = max(len(k) for k, _ in items)
    for key, raw in items:
        p = F.peak_from(raw)
        if p is None:
            continue
        value = F.with_unit(p.value, p.unit, sig=4) if p.known else "unknown"
        head = f"  {key:<{keyw}}  {value:>14}  "
        lines += _wrap(p.provenance or "-", width, " " * len(head), head)
    return "\n".join(lines)


# -- metrics table ----------------------------------------------------------------

def _eff_cell(m: Metric) -> str:
    if m.efficiency is not None:
        return F.pct(m.efficiency)
    if m.peak is not None and not m.peak.known:
        return "unknown"
    return F.DASH


def _row(m: Metric) -> Dict[str, str]:
    factor, unit = F.time_scale(m.value, m.unit)

    def scaled(v: Optional[float], sig: int = 3) -> str:
        return F.num(None if v is None else v * factor, sig)

    if m.peak is None:
        peak = F.DASH
    elif m.peak.known:
        peak = scaled(m.peak.value if (m.peak.unit or m.unit) == m.unit else None, 4)
    else:
        peak = "unknown"
    st = m.stats
    threads = m.context.get("threads")
    value = scaled(m.value)
    if not m.valid:
        value += "!"
    return {
        "metric": m.name, "value": value, "unit": unit, "peak": peak, "eff": _eff_cell(m),
        "median": scaled(st.median) if st else F.DASH,
        "CV": (F.pct(st.cv) + ("!" if F.high_spread(m) else "")) if st and st.n > 1 else F.DASH,
        "reps": str(st.n) if st else str(len(m.values) or F.DASH),
        "threads": str(threads) if threads is not None else F.DASH,
    }


def _notes(m: Metric, said: Dict[str, str]) -> List[str]:
    """Notes under a row; ``said`` maps a reason already printed to the metric it was printed for."""
    notes = []
    if not m.valid:
        notes.append("INVALID: the kernel's output did not match its analytic value; the number is not trusted")
    if m.peak is not None and not m.peak.known:
        why = m.peak.provenance or "no reason recorded"
        if why in said:
            notes.append(f"peak unknown: same reason as {said[why]}")
        else:
            said[why] = m.name
            notes.append(f"peak unknown: {why}")
    cycles = F.figure(m.context.get("cycles"))
    if cycles is not None:
        notes.append(f"{cycles:.3g} cycles")
    notes += F.page_notes(m)
    note = F.row_note(m)
    if note:
        notes.append(note)
    return notes


# (key, header, right-aligned, drop order: lowest goes first when the line is too wide)
_COLUMNS = (("metric", "metric", False, 9), ("value", "value", True, 9), ("unit", "unit", False, 9),
            ("peak", "peak", True, 6), ("eff", "of peak", True, 8), ("median", "median", True, 4),
            ("CV", "CV", True, 3), ("reps", "reps", True, 1), ("threads", "threads", True, 2))


def metrics_table(run: Run, *, color: bool = False, width: int = 100) -> str:
    """One row per metric (value = best of the repetitions), notes wrapped below it."""
    st = _Style(color)
    if not run.metrics:
        return st("Metrics", "bold") + "\n  nothing was measured in this run"
    rows = [(m, _row(m)) for m in run.metrics]
    cols = list(_COLUMNS)

    def widths():
        return {k: max(len(h), *(len(r[k]) for _, r in rows)) for k, h, _, _ in cols}

    w = widths()
    while sum(w.values()) + 2 * (len(cols) - 1) + 2 > width and len(cols) > 4:
        cols.remove(min((c for c in cols), key=lambda c: c[3]))
        w = widths()

    def line(cells: Dict[str, str]) -> str:
        out = []
        for k, _, right, _ in cols:
            out.append(cells[k].rjust(w[k]) if right else cells[k].ljust(w[k]))
        return ("  " + "  ".join(out)).rstrip()

    lines = [st("Metrics", "bold")]
    lines += [st(x, "dim") for x in
              _wrap("value = median over the nodes (each node's own run has its repetitions); of peak = "
                    "value / theoretical peak; CV = stdev / mean across the nodes; reps = nodes" if run.nodes else
                    "value = best repetition; of peak = value / theoretical peak; CV = stdev / mean",
                    width, "  ")]
    lines.append(st(line({k: h for k, h, _, _ in cols}), "dim"))
    said: Dict[str, str] = {}
    for m, r in rows:
        text = line(r)
        lines.append(st(text, "red") if not m.valid else text)
        for note in _notes(m, said):
            lines += [st(x, "dim") for x in _wrap(note, width, "        ", "      ")]
    marked = any(k == "CV" for k, _, _, _ in cols)      # a narrow table drops the CV column, and its "!"
    for note in F.run_notes(run.metrics, marked=marked) + list(run.analysis.notes):
        lines += [st(x, "yellow") for x in _wrap(note, width, "    ", "  ")]
    return "\n".join(lines)


# -- findings -------------------------------------------------------------------

def _counts(findings: Sequence[Finding]) -> str:
    parts = [f"{sum(1 for f in findings if f.status == s)} {s}" for s in STATUS_ORDER
             if any(f.status == s for f in findings)]
    return ", ".join(parts) or "none"


def findings(run: Run, *, color: bool = False, width: int = 100) -> str:
    """Findings grouped by status (fail, warn, ok, skipped), each with evidence, why and fix."""
    st = _Style(color)
    lines = [st("Findings", "bold") + f"  ({_counts(run.findings)})"]
    for status in STATUS_ORDER:
        group = [f for f in run.findings if f.status == status]
        if not group:
            continue
        lines.append("")
        lines.append("  " + st(status.upper(), _STATUS_COLOR[status], "bold"))
        for f in group:
            lines += _wrap(f"{f.id} - {f.title}", width, "      ", "    ")
            for key in ("evidence", "why", "fix"):
                text = getattr(f, key)
                if not text:
                    continue
                if key == "fix" and f.needs_root:
                    text += " (needs root)"
                lines += _wrap(text, width, " " * 16, f"      {key + ':':<10}")
    others = [f for f in run.findings if f.status not in STATUS_ORDER]
    for f in others:
        lines += _wrap(f"[{f.status}] {f.id} - {f.title}", width, "      ", "    ")
    return "\n".join(lines)


@_printable_run
def render_checks(run: Run, *, color: bool = False, width: int = 100, verbose: bool = False) -> str:
    """``ceiling check``: findings grouped by area in report order, problems with
    their evidence, why and fix; ok and skipped in one line (all details with verbose)."""
    st = _Style(color)
    width = max(int(width), 60)
    areas = L.AREA_TITLES
    order = {a: i for i, a in enumerate(areas)}
    by_area: Dict[str, List[Finding]] = {}
    for f in run.findings:
        by_area.setdefault(f.id.split(".", 1)[0], []).append(f)
    head = f"ceiling check: {run.host or 'unknown host'}"
    m = F.as_dict(run.machine)
    if m.get("model_name"):
        head += f" - {m['model_name']}, {F.topology(m)}"
    lines = [st(x, "bold") for x in _wrap(head, width, "  ", "")]
    if run.partial:
        lines.append(st("PARTIAL: " + (run.partial_reason or "stopped before the end"), "yellow"))
    for area in sorted(by_area, key=lambda a: (order.get(a, len(order)), a)):
        lines.append("")
        lines.append(st(areas.get(area, area), "bold"))
        for f in by_area[area]:
            tag = f"{f.status.upper() if f.status in (FAIL, WARN) else f.status:<7}"
            wrapped = _wrap(f"{f.id}  {f.title}", width, " " * 11, f"  {tag}  ")
            wrapped[0] = wrapped[0].replace(tag, st(tag, _STATUS_COLOR.get(f.status, "dim")), 1)
            lines += wrapped
            detail = verbose or f.status in (FAIL, WARN)
            for key in ("evidence", "why", "fix"):
                text = getattr(f, key)
                if not text or not (detail or (key == "evidence" and f.status == SKIPPED)):
                    continue
                if key == "fix" and f.needs_root:
                    text += " (needs root)"
                lines += [st(x, "dim") if f.status == SKIPPED else x
                          for x in _wrap(text, width, " " * 22, f"           {key + ':':<10} ")]
    lines.append("")
    lines.append(f"Findings: {_counts(run.findings)}.  'ceiling check --explain ID' tells more about one check.")
    return "\n".join(lines) + "\n"


@_printable_run
def nhc_line(run: Run) -> str:
    """One line in the style of LBNL NHC, for a Slurm HealthCheckProgram log (a cluster run:
    one line per failing node, for a drain script)."""
    if run.nodes:
        from .terminal_cluster import nhc_lines
        return nhc_lines(run)
    fails = [f for f in run.findings if f.status == FAIL]
    warns = [f for f in run.findings if f.status == WARN]
    if fails or warns:
        first = (fails or warns)[0]
        more = len(fails) + len(warns) - 1
        # NHC's wording for an error; a warning does not fail the health check (check --nhc exits 0).
        text = (f"ERROR: ceiling: Health check failed: {first.id}: {first.title}" if fails
                else f"WARNING: ceiling: {first.id}: {first.title}")
        return text + (f" (and {more} more: {len(fails)} fail, {len(warns)} warn)" if more else "")
    return f"OK: ceiling: {_counts(run.findings)}"


# -- the whole report and the summary --------------------------------------------

@_printable_run
def render(run: Run, *, color: bool = False, width: int = 100) -> str:
    """The full report: header, summary line, peaks, metrics, findings."""
    width = max(int(width), 60)
    from .terminal_cluster import cluster_section
    parts = [header(run, color=color, width=width)]
    parts.append("\n".join(_wrap(L.verdict_text(run), width, "  ")))
    for part in (peaks(run, color=color, width=width), cluster_section(run, width),
                 metrics_table(run, color=color, width=width), findings(run, color=color, width=width)):
        if part:
            parts.append(part)
    return "\n\n".join(parts) + "\n"


@_printable_run
def summary(run: Run, *, color: bool = False, width: int = 80) -> str:
    """One screen: machine in a line, headline numbers, the verdict, the problems."""
    st = _Style(color)
    width = max(int(width), 60)
    m = F.as_dict(run.machine)
    who = f"{run.host or 'unknown host'}"
    if m.get("model_name"):
        who += f" - {m['model_name']}, {F.topology(m)}"
    lines = [st(x, "bold") for x in _wrap(f"ceiling summary: {who}", width, "  ", "")]
    if run.partial:
        lines.append(st("PARTIAL RUN: " + (run.partial_reason or "stopped before the end"), "yellow"))
    heads = L.headline(run)
    if heads:
        lw = max(len(label) for label, _ in heads)
        shown = [run.analysis.figure(met.name, met.node) for _, met in heads]
        cells = [(F.DASH, "") if fig is not None and fig.shown is None else
                 F.quantity(fig.shown if fig is not None else met.value, met.unit)
                 for (_, met), fig in zip(heads, shown)]
        vw = max(len(v) for v, _ in cells)
        uw = max(len(u) for _, u in cells)
        for (label, met), (value, unit), fig in zip(heads, cells, shown):
            text = f"  {label:<{lw}}  {value:>{vw}} {unit:<{uw}}"
            eff = met.efficiency if fig is None else fig.efficiency
            if fig is not None and fig.shown is None:
                text += (f"  disturbed: {F.with_unit(fig.measured, fig.unit)} measured while other processes "
                         "were busy, not the node's value")
            elif F.figure(eff) is not None and met.peak is not None and met.peak.known:
                full = f"  {F.pct(eff):>4} of {F.with_unit(met.peak.value, met.peak.unit or met.unit, sig=4)} peak"
                # On a narrow terminal the percentage alone; the peak is in the verdict and the full report.
                text += full if len(text + full) <= width else f"  {F.pct(eff):>4} of peak"
            elif met.peak is not None and not met.peak.known:
                text += "  peak unknown"
            if fig is not None and fig.shown is not None:
                text += f"  unstable: median shown; best {F.with_unit(fig.measured, fig.unit)}" + (
                    f", CV {F.pct(fig.cv)}" if F.figure(fig.cv) is not None else "")
            if not met.valid:
                text += "  INVALID"
            if fig is None and met.context.get("disturbed"):
                text += "  (others were busy)"      # a document from before the analysis stored figures
            flagged = fig is not None or met.context.get("disturbed")
            lines.append(st(text.rstrip(), "yellow") if flagged else text.rstrip())
        measured_with = F.mpi_text(run, short=True)
        if measured_with and any(met.name.startswith("net.") for _, met in heads):
            lines += _wrap(f"MPI figures measured with {measured_with}", width, "    ", "  ")
    else:
        lines.append("  no headline metric was measured")
    lines.append("")
    lines += _wrap(L.verdict_text(run), width, "  ")
    problems = _problems(run)
    lines.append("")
    lines.append(f"Findings: {_counts(run.findings)}")
    for f, more in problems[:8]:
        tag = f"{f.status.upper():<6}"
        text = f.title + (f" (and {more} more like it)" if more else "") + (f" - fix: {f.fix}" if f.fix else "")
        wrapped = _wrap(text, width, "          ", f"  {tag}  ")
        # Colour after wrapping: escape codes would count as width in textwrap.
        wrapped[0] = wrapped[0].replace(tag, st(tag, _STATUS_COLOR[f.status]), 1)
        lines += wrapped
    if len(problems) > 8:
        lines.append(f"  ... and {len(problems) - 8} more (see the full report)")
    return "\n".join(lines) + "\n"


# -- other verbs: ceiling machine, ceiling history --------------------------------

@_printable_run
def render_machine(run: Run, *, color: bool = False, width: int = 100) -> str:
    """``ceiling machine``: the header facts, the peaks, and what could not be read and why."""
    width = max(int(width), 60)
    st = _Style(color)
    parts = [header(run, color=color, width=width)]
    p = peaks(run, color=color, width=width)
    if p:
        parts.append(p)
    unknowns = sorted((F.as_dict(run.machine).get("unknowns") or {}).items())
    if unknowns:
        lines = [st("Not known", "bold")]
        keyw = min(max(len(k) for k, _ in unknowns), 28)
        for key, why in unknowns:
            lines += _wrap(str(why), width, " " * (keyw + 4), f"  {key:<{keyw}}  ")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
