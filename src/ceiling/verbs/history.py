"""ceiling history: runs recorded in the SQLite history, or one metric across them."""
from __future__ import annotations

import argparse
import json
from typing import List

from ..units import parse_count

NAME = "history"
HELP = "runs recorded in the SQLite history"
DESCRIPTION = "List recorded runs, or one metric across runs."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", help="SQLite history (default: ~/.local/share/ceiling/history.db)")
    p.add_argument("--host", help="only runs of this host")
    p.add_argument("--metric", metavar="NAME", help="one metric across runs, e.g. stream.triad")
    p.add_argument("--limit", type=str, default="20", metavar="N", help="at most N rows (default 20)")
    p.add_argument("--json", action="store_true", help="JSON on stdout")


def _as_json(o):
    if hasattr(o, "verb") and hasattr(o, "__dict__"):
        return {**o.__dict__, "verb": o.verb}      # a RunSummary: what made it, too
    return o.__dict__ if hasattr(o, "__dict__") else str(o)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..report import terminal
    from ..results.store import Store
    limit = parse_count(args.limit, what="--limit", low=1)
    store = Store(args.db, readonly=True)     # never created, upgraded or written by reading
    if args.metric:
        rows = store.metrics_history(args.metric, host=args.host)[-limit:]
    else:
        rows = store.list(host=args.host, limit=limit)
    if args.json:
        print(json.dumps(rows, indent=1, default=_as_json))
    else:
        print(terminal.render_history(rows, metric=args.metric))
    return 0
