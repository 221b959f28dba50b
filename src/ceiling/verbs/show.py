"""ceiling show: a recorded run (from the history or a JSON file) rendered again."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List

from ..errors import PathError
from . import common

NAME = "show"
HELP = "render a recorded run (id from history, or a JSON file)"
DESCRIPTION = "Print a stored run or a saved JSON file, or write its HTML report."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="run id (or a unique prefix of 6+ characters) or a .json file")
    p.add_argument("--db", metavar="PATH", help="SQLite history to read from")
    p.add_argument("--out", metavar="FILE.html", help="write the HTML report here")
    p.add_argument("--json", action="store_true", help="print the JSON document")


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..analysis.analyse import ensure
    from ..report import html, terminal
    from ..report.exporters.paths import check_writable
    from ..results import jsonio
    if args.out:
        check_writable(args.out, "--out")
    if args.run.endswith(".json") or Path(args.run).is_file():
        if not Path(args.run).is_file():
            raise PathError(f"{args.run}: no such file")
        run = jsonio.load(args.run)
    else:
        from ..results.store import Store
        run = Store(args.db, readonly=True).get(args.run)
    ensure(run)      # a run recorded before the analysis was stored (schema 1) is analysed once, here
    if args.out:
        html.write(run, args.out)
    if args.json:
        sys.stdout.write(jsonio.dumps(run))
    else:
        print(terminal.render(run, color=sys.stdout.isatty() and "NO_COLOR" not in os.environ,
                              width=common.width()))
        print(terminal.summary(run))
    return 0
