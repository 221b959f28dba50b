"""The single-file HTML report (report/html.py), written atomically."""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Optional

from ...results.model import Run
from .. import html
from .base import Exporter
from .paths import check_writable


class HtmlFile(Exporter):
    what = "HTML report"
    failed = "not written"

    def __init__(self, path: Optional[str] = None, option: str = "--out"):
        self.path, self.option = path, option

    def prepare(self) -> None:
        check_writable(self.path, self.option)

    def export(self, run: Run) -> Optional[str]:
        path = Path(self.path) if self.path else default_path(run)
        path.parent.mkdir(parents=True, exist_ok=True)
        html.write(run, str(path))
        return f"HTML report: {path}"


def default_path(run: Run) -> Path:
    """ceiling-HOST-DATE.html here, or beside the history when here is not writable."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"ceiling-{run.host.split('.')[0]}-{stamp}.html"
    here = Path.cwd()
    if os.access(here, os.W_OK):
        return here / name
    from ...results.store import default_db_path
    return default_db_path().parent / name
