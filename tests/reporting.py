"""Reports over runs analysed as a verb analyses them before delivering.

Reports render what Run.analysis records and compute nothing; a test that
builds or changes a Run by hand analyses it afresh here before rendering.
"""
from __future__ import annotations

from ceiling.analysis.analyse import analyse
from ceiling.report import html, terminal
from ceiling.results.model import Run


def analysed(run: Run) -> Run:
    run.analysis = analyse(run)
    return run


def render_html(run: Run) -> str:
    return html.render(analysed(run))


def write_html(run: Run, path) -> None:
    html.write(analysed(run), path)


def render_text(run: Run, **kw) -> str:
    return terminal.render(analysed(run), **kw)


def summary_text(run: Run, **kw) -> str:
    return terminal.summary(analysed(run), **kw)
