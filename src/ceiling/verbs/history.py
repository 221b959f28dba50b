"""ceiling history: runs recorded in the SQLite history, or one metric across them, each value with
its repetitions, their summary, its context and its node's configuration (results/store.py)."""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import List

from ..errors import UsageError
from ..units import parse_count

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


def _as_json(o):
    if dataclasses.is_dataclass(o) and hasattr(o, "reps"):      # a Point: its context as an object too
        from ..results.history_keys import key_fields
        return {**dataclasses.asdict(o), "context_fields": key_fields(o.context)}
    if hasattr(o, "verb") and hasattr(o, "__dict__"):
        return {**o.__dict__, "verb": o.verb}      # a RunSummary: what made it, too
    return o.__dict__ if hasattr(o, "__dict__") else str(o)


def main(args: argparse.Namespace, argv: List[str]) -> int:
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
