"""The single-file HTML report (report/html.py), written atomically."""
from __future__ import annotations

import datetime as _dt
import os
import re
from pathlib import Path
from typing import Optional

from ...errors import PathError
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
        if self.path:                      # the user named it: theirs to replace
            path = Path(self.path)
            path.parent.mkdir(parents=True, exist_ok=True)
            html.write(run, str(path))
            return f"HTML report: {path}"
        path = default_path(run)           # reserved, empty, ours
        try:
            html.write(run, str(path))
        except BaseException:
            _drop_reservation(path)
            raise
        return f"HTML report: {path}"


MAX_SAME_NAME = 1000      # ceiling-HOST-DATE-2.html ... before giving up


def safe_name(text: str) -> str:
    """A file-name part from an outside string (a hostname): letters, digits, '.', '_', '-' only."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip(".")
    return name or "unknown-host"


def default_path(run: Run, when: Optional[_dt.datetime] = None) -> Path:
    """A new, empty file ceiling-HOST-DATE[-N].html, here or (here not writable) beside the
    history, created exclusively: a file the user did not name is never replaced, and two
    runs ending in the same second get two reports."""
    stamp = (when or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = f"ceiling-{safe_name(run.host.split('.')[0])}-{stamp}"
    here = Path.cwd()
    if not os.access(here, os.W_OK):
        from ...files.private import data_dir
        from ...results.store import default_db_path
        db = default_db_path()          # its directory checked as the history's (files/private.py)
        here = Path(data_dir(str(db.parent.parent), db.parent.name))
    for n in range(1, MAX_SAME_NAME + 1):
        path = here / (f"{base}.html" if n == 1 else f"{base}-{n}.html")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return path
        except FileExistsError:
            continue
        except OSError as e:
            raise PathError(f"cannot create the HTML report {path}: {e.strerror or e}") from None
    raise PathError(f"cannot create the HTML report: {MAX_SAME_NAME} files named {base}*.html exist in {here}")


def _drop_reservation(path: Path) -> None:
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass
