"""ceiling show: a recorded run (from the history or a JSON file) rendered again."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List

from ..errors import PathError, UsageError
from ..results.model import Study
from . import common

NAME = "show"
HELP = "render a recorded run or study (id from history, or a JSON file)"
DESCRIPTION = ("Print a stored run or study or a saved JSON file, or write its HTML report. A study (several runs "
               "shown as one) is a table of its members by what varies.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="run or study id (or a unique prefix of 6+ characters) or a .json file")
    p.add_argument("--db", metavar="PATH", help="SQLite history to read from")
    p.add_argument("--out", metavar="FILE.html", help="write the HTML report here")
    p.add_argument("--json", action="store_true", help="print the JSON document")


def is_run_file(path: str) -> None:
    """UsageError for a file that is no run's JSON at all (a database, a text file): the
    argument is wrong, not a run damaged. A JSON object that is not a valid run stays
    jsonio's StoreError (exit 5), as a damaged run file."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise PathError(f"{path}: cannot be read: {e.strerror or e}") from None
    if head.startswith(b"SQLite format 3\0"):
        raise UsageError(f"{path} is a SQLite database, not a run's JSON: 'ceiling history --db {path}' lists "
                         f"its runs, 'ceiling show ID --db {path}' shows one")
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        raise UsageError(f"{path} is not a run's JSON file (it does not begin with '{{'): give a run id from "
                         "'ceiling history', or a file written by --save-json or --json")


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..analysis.analyse import ensure
    from ..report import html, terminal
    from ..report.exporters.paths import check_writable
    from ..results import jsonio
    if args.out:
        check_writable(args.out, "--out")
    if args.run.endswith(".json") or "/" in args.run or Path(args.run).exists():   # a run id has no "/"
        if not Path(args.run).is_file():
            raise PathError(f"{args.run}: " + ("not a regular file" if Path(args.run).exists() else "no such file"))
        is_run_file(args.run)
        run = jsonio.load_document(args.run)
    else:
        from ..results.store import Store
        store = Store(args.db, readonly=True)
        kind, full = store.find(args.run)
        run = store.get_study(full) if kind == "study" else store.get(full)
    if isinstance(run, Study):
        return _show_study(run, args)
    ensure(run)      # a run recorded before the analysis was stored (schema 1) is analysed once, here
    if args.out:
        html.write(run, args.out)
    if args.json:
        sys.stdout.write(jsonio.dumps(run))
        return 0
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if run.application is not None and run.application.profile is not None:
        # `ceiling profile`'s run: its bound is in the program's breakdown, not in a verdict on
        # the node's metrics (there is none), so it is shown as `ceiling profile` showed it
        from ..report.terminal_profile import render
        print(render(run, color=color, width=common.width()))
        return 0
    print(terminal.render(run, color=color, width=common.width()))
    print(terminal.summary(run))
    return 0


def _show_study(study: Study, args: argparse.Namespace) -> int:
    """A study: its page (--out), its document with every member run whole (--json), else its table."""
    from ..analysis.analyse import ensure
    from ..report import html_study, terminal_study
    from ..results import jsonio
    for run in study.runs():
        ensure(run)      # a member recorded before the analysis was stored, as a run shown alone
    if args.out:
        html_study.write(study, args.out)
    if args.json:
        sys.stdout.write(jsonio.dumps_study(study))
        return 0
    print(terminal_study.render(study, width=common.width()))
    return 0
