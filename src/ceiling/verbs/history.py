"""ceiling history: runs recorded in the SQLite history, or one metric across them, each value with
its repetitions, their summary, its context and its node's configuration (results/store.py); with
--changes, the steps and drifts of every series and what changed on the node then
(analysis/changes.py); --ack RUN:METRIC acknowledges a known change."""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import List

from ..errors import UsageError
from ..units import parse_count

_ALPHA, _MIN_STEP, _BASELINE = 0.01, 0.01, 10     # analysis/changepoints.py, changes.py (not imported at start)

NAME = "history"
HELP = "runs recorded in the SQLite history"
DESCRIPTION = "List recorded runs (a study's members marked with its id), the studies, or one metric across runs."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", help="SQLite history (default: ~/.local/share/ceiling/history.db)")
    p.add_argument("--host", help="only runs of this host (with --metric: values measured on this node)")
    p.add_argument("--metric", metavar="NAME", help="one metric across runs, e.g. stream.triad")
    p.add_argument("--context", metavar="K=V,...",
                   help="with --metric: only values measured so, e.g. threads=1,placement=compact")
    p.add_argument("--studies", action="store_true",
                   help="list the studies (several runs shown as one: ceiling bench --repeat N) instead of the runs")
    p.add_argument("--limit", type=str, default="20", metavar="N", help="at most N rows (default 20)")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    g = p.add_argument_group("changes")
    g.add_argument("--changes", action="store_true",
                   help="steps and drifts in every series (a metric on one node with one context), each with the "
                        "configuration fields that changed then")
    g.add_argument("--since", action="store_true",
                   help="with --changes: only what is new since the last --since look (recorded in the history)")
    g.add_argument("--family", metavar="NAME", help="with --changes: only metrics of this family, e.g. stream, dgemm")
    g.add_argument("--from", dest="start", metavar="DATE", help="with --changes: runs started on or after DATE "
                   "(YYYY-MM-DD or ISO 8601)")
    g.add_argument("--to", dest="end", metavar="DATE", help="with --changes: runs started on or before DATE")
    g.add_argument("--alpha", metavar="P", default=None,
                   help=f"with --changes: significance level per series (default {_ALPHA})")
    g.add_argument("--min-step", metavar="PCT", default=None,
                   help=f"with --changes: smallest step or drift reported, in %% (default {100 * _MIN_STEP:g})")
    g.add_argument("--baseline", metavar="N", default=None,
                   help=f"with --changes: the newest run against the N before it (default {_BASELINE})")
    g.add_argument("--all", action="store_true", help="with --changes: acknowledged changes too")
    g.add_argument("--html", metavar="PATH", help="with --changes: an HTML page plotting each series that changed")
    g.add_argument("--ack", metavar="RUN:METRIC", action="append", default=[],
                   help="acknowledge a change (the first run after it, the metric): not reported again")


def _as_json(o):
    if dataclasses.is_dataclass(o) and hasattr(o, "reps"):      # a Point: its context as an object too
        from ..results.history_keys import key_fields
        return {**dataclasses.asdict(o), "context_fields": key_fields(o.context)}
    if hasattr(o, "verb") and hasattr(o, "__dict__"):
        return {**o.__dict__, "verb": o.verb}      # a RunSummary: what made it, too
    return o.__dict__ if hasattr(o, "__dict__") else str(o)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    if args.ack or args.changes:
        from .history_changes import changes
        return changes(args)
    for opt in ("since", "family", "start", "end", "alpha", "min_step", "baseline", "all", "html"):
        if getattr(args, opt) not in (None, False):
            flag = {"start": "from", "end": "to"}.get(opt, opt).replace("_", "-")
            raise UsageError(f"--{flag} belongs to --changes: give --changes too")
    from ..report import terminal
    from ..results.history_keys import matches, parse_context
    from ..results.store import Store
    limit = parse_count(args.limit, what="--limit", low=1)
    wanted = None
    if args.context is not None:
        if not args.metric:
            raise UsageError("--context selects values of one metric: give --metric NAME too")
        wanted = parse_context(args.context)
    if args.studies and args.metric:
        raise UsageError("--studies lists studies; --metric one metric across runs (a study's members are runs "
                         "too): give one of them")
    store = Store(args.db, readonly=True)     # never created, upgraded or written by reading
    if args.metric:
        keys = None
        if wanted is not None:      # the stored keys that have these fields: each one a range of the index
            keys = [k for k, _ in store.contexts(args.metric, host=args.host) if matches(k, wanted)]
        rows = store.series(args.metric, host=args.host, contexts=keys)[-limit:] if keys != [] else []
    elif args.studies:
        rows = store.list_studies(host=args.host, limit=limit)
    else:
        rows = store.list(host=args.host, limit=limit)
    if args.json:
        print(json.dumps(rows, indent=1, default=_as_json))
    elif args.studies:
        from ..report.terminal_history import render_studies
        print(render_studies(rows))
    else:
        print(terminal.render_history(rows, metric=args.metric))
    return 0
