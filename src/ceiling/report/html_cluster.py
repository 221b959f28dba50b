"""The cluster section of the HTML report (a run of ``--cluster``): per headline
metric a ranked table of the nodes with a bar each (outliers marked), then the
configuration differences as a table, and how to open each node's own report
(its run in the history: ``ceiling show ID``). Long listings keep the first
and the last nodes, as the terminal does; the JSON has every node.
"""
from __future__ import annotations

from typing import List

from ..analysis.cluster import ranked, summary_line
from ..results.model import Run
from . import labels as L
from .html_plots import esc
from .terminal_cluster import HEAD, TAIL, cluster_fact, load_note


def _metric_table(u, run_ids, note: str = "") -> str:
    rows = ranked(u)
    marked = {o.get("node") for o in u.outliers if isinstance(o, dict)}
    top = max((v for _, v in rows), default=0.0) or 1.0
    n = len(rows)
    keep = list(range(n)) if n <= HEAD + TAIL + 1 else list(range(HEAD)) + list(range(n - TAIL, n))
    body = []
    for i in keep:
        node, v = rows[i]
        if i == HEAD and n > HEAD + TAIL + 1:
            body.append(f'<tr><td></td><td colspan="4" class="hint">... {n - HEAD - TAIL} nodes not shown '
                        "(every node is in the JSON document)</td></tr>")
        pct = f"{v / u.median:.1%}" if u.median else "-"
        bar = (f'<span class="bar" style="width:120px"><span style="width:{max(0.0, min(1.0, v / top)) * 100:.0f}%">'
               "</span></span>")
        cls = ' class="outlier"' if node in marked else ""
        rid = run_ids.get(node, "")
        show = f"<code>ceiling show {esc(rid[:12])}</code>" if rid else "not recorded"
        body.append(f"<tr{cls}><td>{i + 1}</td><td>{esc(node)}{' (outlier)' if cls else ''}</td>"
                    f"<td>{v:.4g} {esc(u.unit)}</td><td>{pct} {bar}</td><td>{show}</td></tr>")
    return (f"<h3>{esc(L.label(u.metric))} <small>{esc(u.metric)}</small></h3><p>{esc(summary_line(u))}</p>"
            + (f'<p><span class="badge warn">competing load</span> {esc(note)}</p>' if note else "")
            + "<table><thead><tr><th>rank</th><th>node</th><th>value</th><th>of the median</th>"
            f"<th>the node's own report</th></tr></thead><tbody>{''.join(body)}</tbody></table>")


def _config_table(run: Run) -> str:
    rows = []
    for f in run.findings:
        if not f.id.startswith("cluster.config."):
            continue
        d = f.data or {}
        others = "; ".join(f"{esc(str(v))}: {esc(', '.join(map(str, nodes[:20])))}"
                           + (f" and {len(nodes) - 20} more" if len(nodes) > 20 else "")
                           for v, nodes in (d.get("others") or {}).items())
        rows.append(f"<tr><td>{esc(f.id[len('cluster.config.'):])}</td><td>{esc(str(d.get('majority', '')))} "
                    f"({esc(str(d.get('majority_nodes', '')))} nodes)</td><td>{others}</td></tr>")
    if not rows:
        return "<h3>Configuration</h3><p>Every key compared is the same on every node.</p>"
    return ("<h3>Configuration differences</h3><table><thead><tr><th>key</th><th>majority</th>"
            f"<th>other values: nodes</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def cluster_section(run: Run) -> str:
    """The section, or "" for a run of one node."""
    if not run.nodes:
        return ""
    run_ids = {n.name: str((n.environment or {}).get("run_id") or "") for n in run.nodes}
    by_name = {u.metric: u for u in run.analysis.uniformity}
    parts: List[str] = [f"<p>{esc(cluster_fact(run))}</p>"]
    parts += [_metric_table(by_name[name], run_ids, load_note(run, name)) for name in L.HEADLINE if name in by_name]
    parts.append(_config_table(run))
    return f'<section id="cluster"><h2>Cluster</h2>{"".join(parts)}</section>'
