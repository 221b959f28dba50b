"""ceiling compare A B: what changed between two runs (or two nodes, or two sets of runs), metric by metric,
whether it is significant, and what changed in the configuration beside it (analysis/compare.py)."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..errors import REGRESSION_EXIT, PathError, UsageError

NAME = "compare"
HELP = "what changed between two runs, and whether it is significant"
DESCRIPTION = ("Compare two runs (ids from 'ceiling history', or JSON files), two nodes of a cluster run "
               "(RUN:NODE, or --run RUN with two node names), or the runs of one host before and after a date "
               "(--host X --before DATE --after DATE).")
EPILOG = (f"Exit status {REGRESSION_EXIT} with --fail-on worse:P% when a significant regression of at least P% "
          "is found; 2 for a bad argument or an unknown run; 5 for a damaged run file or history.")

_FAIL_ON = re.compile(r"^worse:(\d+(?:\.\d+)?)%?$")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("sides", nargs="*", metavar="A B",
                   help="run id (or a unique prefix of 6+ characters), a .json file, RUN:NODE, or with --run a node")
    p.add_argument("--db", metavar="PATH", help="SQLite history (default: ~/.local/share/ceiling/history.db)")
    p.add_argument("--run", metavar="RUN", help="A and B are node names of this cluster run (id or .json file)")
    p.add_argument("--host", help="compare this host's runs before --before with its runs after --after")
    p.add_argument("--before", metavar="DATE", help="with --host: side A is the runs started before DATE (UTC)")
    p.add_argument("--after", metavar="DATE", help="with --host: side B is the runs started after DATE (UTC)")
    p.add_argument("--fail-on", metavar="worse:P%", help="exit non-zero when a significant regression of at least "
                   "P%% is found, e.g. worse:5%%")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.add_argument("--out", metavar="FILE.html", help="write an HTML report of the comparison here")


def parse_fail_on(text: Optional[str]) -> Optional[float]:
    """``worse:5%`` -> 0.05; UsageError for anything else."""
    if text is None:
        return None
    m = _FAIL_ON.match(text.strip())
    if not m or not 0 < float(m.group(1)) < 100:
        raise UsageError(f"--fail-on {text!r}: give worse:P% with 0 < P < 100, e.g. --fail-on worse:5%")
    return float(m.group(1)) / 100.0


def parse_date(text: str, what: str) -> str:
    """A date or date-time (ISO 8601, UTC) as the history's started text sorts it."""
    try:
        d = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{what} {text!r}: not a date; give YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] (UTC)") from None
    if d.tzinfo is not None:
        from datetime import timezone
        d = d.astimezone(timezone.utc).replace(tzinfo=None)
    return d.isoformat(timespec="seconds")        # a date alone: its midnight


def _is_file(text: str) -> bool:
    return text.endswith(".json") or "/" in text or Path(text).exists()


def _load_run(text: str, store):
    """A whole Run: from a JSON file, or from the history by id."""
    from ..results import jsonio
    if _is_file(text):
        from .show import is_run_file
        if not Path(text).is_file():
            raise PathError(f"{text}: " + ("not a regular file" if Path(text).exists() else "no such file"))
        is_run_file(text)
        return jsonio.load(text)
    return store.get(text)


def _stored_sides(rows, store) -> list:
    """Stored runs as sides, from their rows (no document parsed: figures, inventory and findings by index), given
    as (run_id, host, started): each table read in a few queries for the whole set, not a few queries a run."""
    from ..analysis.compare import Side, add_figure, figure_of_row, flat_config
    ids = [rid for rid, _, _ in rows]
    points = store.runs_points(ids)
    disturbed: Dict[str, List[str]] = {}
    for rid, status, title in store.competing(ids):
        disturbed.setdefault(rid, []).append(f"{status}: {title}")
    out, hashes_of = [], []
    for rid, host, started in rows:
        side = Side(rid[:12], host, started, [rid])
        hashes = set()
        for name, p in points[rid]:
            if p.host != host:
                continue               # another node's figure of a cluster run: name it as RUN:NODE
            add_figure(side, figure_of_row(name, p.unit, p.better, p.context, p.value, list(p.reps), host))
            hashes.add(p.inventory_hash)
        hashes.discard("")
        side.disturbed = disturbed.get(rid, [])
        out.append(side)
        hashes_of.append(hashes.pop() if len(hashes) == 1 else None)
    inventories = store.inventories(sorted({h for h in hashes_of if h is not None}))
    for side, h in zip(out, hashes_of):
        if h is not None:
            side.config = flat_config(inventories[h])
    return out


def _stored_side(text: str, store):
    """A stored run as a side, by its id (or a unique prefix)."""
    return _stored_sides(store.window(None, run_id=store.resolve(text)), store)[0]


def _side(text: str, store, run_arg: Optional[str]):
    from ..analysis.compare import side_of_run
    if run_arg is not None:
        return side_of_run(_load_run(run_arg, store), node=text, label=f"{text} ({run_arg})")
    if Path(text).exists():
        return side_of_run(_load_run(text, store), label=text)
    run, colon, node = text.rpartition(":")
    if colon and run and node:
        return side_of_run(_load_run(run, store), node=node, label=text)
    if _is_file(text):
        _load_run(text, store)           # no such file: its one line
    return _stored_side(text, store)


def _host_sides(args, store):
    from ..analysis.compare import merge_runs
    if not (args.before and args.after):
        raise UsageError("--host compares two sets of runs: give --before DATE (side A) and --after DATE (side B)")
    before, after = parse_date(args.before, "--before"), parse_date(args.after, "--after")
    out = []
    for label, rows in ((f"{args.host} before {before}", store.window(args.host, before=before)),
                        (f"{args.host} after {after}", store.window(args.host, after=after))):
        if not rows:
            raise UsageError(f"no run of host {args.host!r} {label.split(' ', 1)[1]} in {store.path}")
        out.append(merge_runs(label + f" ({len(rows)} run{'s' if len(rows) != 1 else ''})",
                              _stored_sides(rows, store)))
    return out[0], out[1]


def sides(args: argparse.Namespace, store) -> Tuple:
    if args.host is not None:
        if args.sides or args.run:
            raise UsageError("--host compares sets of runs by date: give no A B and no --run with it")
        return _host_sides(args, store)
    if args.before or args.after:
        raise UsageError("--before and --after select runs of one host: give --host X too")
    if len(args.sides) != 2:
        raise UsageError(f"give two runs to compare, A and B (got {len(args.sides)}), or --host X --before DATE "
                         "--after DATE")
    return _side(args.sides[0], store, args.run), _side(args.sides[1], store, args.run)


class _LazyStore:
    """The history, opened when first needed: comparing two JSON files needs it only for the earlier runs, and
    a default history this ceiling cannot read (damaged, or written by a newer ceiling) then costs the
    run-to-run spread, said in a note, not the comparison. A store a side is read from, or one named with --db,
    must open."""

    def __init__(self, path: Optional[str]):
        self.path_arg, self._store, self.error = path, None, None

    def opened(self):
        if self._store is None:
            from ..results.store import Store
            self._store = Store(self.path_arg, readonly=True)      # never created, upgraded or written
        return self._store

    def __getattr__(self, name: str):
        return getattr(self.opened(), name)

    def for_history(self):
        """The store for the earlier runs, or None (with ``error`` set) when the default one cannot be read."""
        from ..errors import StoreError
        try:
            return self.opened()
        except (StoreError, PathError) as e:
            if self.path_arg is not None:
                raise
            self.error = str(e)
            return None


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..analysis.compare import HISTORY_RUNS, compare
    from ..report.terminal_compare import as_dict, render
    at_least = parse_fail_on(args.fail_on)
    if args.out:
        from ..report.exporters.paths import check_writable
        check_writable(args.out, "--out")
    store = _LazyStore(args.db)
    a, b = sides(args, store)
    hist_store = store.for_history()

    disturbed: Dict[str, bool] = {}

    def history(name: str, host: str, context: str, before: str):
        """The earlier runs of one series, less those disturbed by competing load (their spread is not the
        node's): each run's findings are read once, for all series."""
        points = hist_store.earlier(name, host, context, before, HISTORY_RUNS)
        new = [p.run_id for p in points if p.run_id not in disturbed]
        if new:
            hit = {rid for rid, _, _ in hist_store.competing(new)}
            disturbed.update({rid: rid in hit for rid in new})
        return [(p.value, p.median) for p in points if not disturbed[p.run_id]]

    result = compare(a, b, history if hist_store is not None else None)
    if store.error:
        result.notes.append(f"no earlier runs read (the history could not be: {store.error}): the family thresholds "
                            "judge every change")
    if args.out:
        from ..report.html_compare import write
        write(result, args.out)
    if args.json:
        print(json.dumps(as_dict(result, at_least), indent=1))
    else:
        from . import common
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        print(render(result, width=common.width(), color=color, fail_on=at_least))
    if at_least is not None and result.regressions(at_least):
        return REGRESSION_EXIT
    return 0
