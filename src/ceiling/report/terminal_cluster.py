"""The cluster part of a terminal report (a run of ``--cluster``): the nodeperf-
style listing of the headline metrics, node by node, best first, with each
node's value, its percentage of the median and its rank; then one line per
other metric; the outliers and configuration differences are findings and are
listed with the run's findings.

Long listings are cut: the first and the last nodes of each headline metric
(where the slow ones are) and a line saying how many are not shown; every value
is in the JSON document.
"""
from __future__ import annotations

import textwrap
from typing import List

from ..analysis.cluster import ranked, summary_line
from ..results.analysis import Uniformity
from ..results.model import Run
from . import labels as L

HEAD, TAIL = 5, 10          # nodes listed from the top and from the bottom of a long listing


def load_note(run: Run, metric: str) -> str:
    """What competing load did to the cluster's figure of ``metric`` (stored by the analysis), or ""."""
    m = run.metric(metric)
    ctx = m.context if m is not None else {}
    if ctx.get("disturbed"):
        return f"disturbed, no figure of the cluster: {ctx['disturbed']}"
    if ctx.get("left_out"):
        return f"left out of the median: {ctx['left_out']}"
    return ""


def _listing(u: Uniformity, width: int, note: str = "") -> List[str]:
    rows = ranked(u)
    marked = {o.get("node") for o in u.outliers if isinstance(o, dict)}
    n = len(rows)
    head = [*textwrap.wrap(f"{L.label(u.metric)} ({u.metric}): {summary_line(u)}", max(40, width),
                           initial_indent="  ", subsequent_indent="      "),
            *(textwrap.wrap(note, max(40, width), initial_indent="    ", subsequent_indent="      ") if note else []),
            f"    {'rank':>5}  {'node':<24} {'value':>12} {'% of median':>12}"]
    keep = list(range(n)) if n <= HEAD + TAIL + 1 else list(range(HEAD)) + list(range(n - TAIL, n))
    out = []
    for i in keep:
        node, v = rows[i]
        if i == HEAD and n > HEAD + TAIL + 1:
            out.append(f"    {'':>5}  ... {n - HEAD - TAIL} nodes not shown (all in the JSON)")
        pct = f"{v / u.median:.1%}" if isinstance(u.median, (int, float)) and u.median and u.median == u.median \
            else "-"
        flag = "  <- outlier" if node in marked else ""
        out.append(f"    {i + 1:>5}  {node[:24]:<24} {v:>12.4g} {pct:>12}{flag}")
    return head + out


def cluster_fact(run: Run) -> str:
    """The header's line: how many nodes, which, how launched; the machine lines below are rank 0's."""
    names = [n.name for n in run.nodes]
    job = run.job
    total = job.nodes if job else len(names)
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    text = f"{len(names)} nodes ({shown})" + (f" of the {total} launched" if total != len(names) else "")
    if job:
        text += f", one rank each; {job.launcher}" + (f"; {job.mpi_library}" if job.mpi_library else "")
    return text + f"; the lines below describe {run.host}, rank 0's node"


def cluster_section(run: Run, width: int = 100) -> str:
    """The listing, or "" for a run of one node."""
    uni = run.analysis.uniformity
    if not uni:
        return ""
    n = len(run.nodes) or 1
    job = run.job
    total = job.nodes if job else n
    lines = [f"Cluster: {n} of {total} nodes reported" if n != total else f"Cluster: {n} node{'s' * (n != 1)}"]
    by_name = {u.metric: u for u in uni}
    shown = [name for name in L.HEADLINE if name in by_name]
    for name in shown:
        lines.append("")
        lines += _listing(by_name[name], width, load_note(run, name))
    rest = [u for u in uni if u.metric not in shown]
    if rest:
        lines.append("")
        lines.append("  Other metrics (median, min, max, spread):")
        for u in rest:
            out = f" - {len(u.outliers)} outlier(s)" if u.outliers else ""
            lines += textwrap.wrap(f"{u.metric}: {summary_line(u)}{out}", max(40, width), initial_indent="    ",
                                   subsequent_indent="        ")
    return "\n".join(lines)


def nhc_lines(run: Run) -> str:
    """One NHC line per node a check failed on ("ERROR: ceiling: NODE: Health check failed: ..."),
    its first failure named; "OK" for the cluster when none failed."""
    failed: dict = {}
    for f in run.findings:
        if f.status == "fail" and f.id.startswith("cluster.check."):
            for node, title in (f.data.get("nodes") or {}).items():
                failed.setdefault(node, (f.id[len("cluster.check."):], title))
    if not failed:
        warns = sum(1 for f in run.findings if f.status == "warn")
        n = len(run.nodes)
        return f"OK: ceiling: {n} node{'s' * (n != 1)}, no check failed ({warns} warnings across the cluster)"
    return "\n".join(f"ERROR: ceiling: {node}: Health check failed: {cid}: {title}"
                     for node, (cid, title) in sorted(failed.items()))
