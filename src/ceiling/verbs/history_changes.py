"""``ceiling history --changes`` and ``--ack``: the options read and checked, the store opened the
way each needs, the analysis (analysis/changes.py) run, its report printed.

A full look only reads (the store opened read-only, as every reading verb). ``--since`` records
its look in the history and ``--ack`` its acknowledgement, so both open the file for writing when
it is there and ours; ``--since`` on a file it may not write still looks, and says it kept nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import List, Optional, Tuple

from ..errors import BadValueError, PathError, UsageError
from ..units import parse_count


def _date(text: Optional[str], what: str, end: bool) -> Optional[str]:
    """A date as the text stored starts compare with; a day alone covers the whole day at ``end``."""
    if text is None:
        return None
    t = text.strip()
    try:
        datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith("Z") else t)
    except ValueError:
        raise UsageError(f"{what} {text!r}: not a date (YYYY-MM-DD or ISO 8601, e.g. 2026-11-28T06:00:00Z)") from None
    if end and len(t) == 10:
        return t + "T\U0010ffff"
    return t.replace(" ", "T")


def _fraction(text: Optional[str], what: str, default: float, low: float, high: float, scale: float = 1.0) -> float:
    if text is None:
        return default
    try:
        v = float(str(text).strip().rstrip("%")) / scale
    except ValueError:
        raise UsageError(f"{what} {text!r}: not a number") from None
    if not (math.isfinite(v) and low < v <= high):
        raise BadValueError(f"{what} {text}: must be above {low * scale:g} and at most {high * scale:g}")
    return v


def _acks(items: List[str]) -> List[Tuple[str, str]]:
    out = []
    for item in items:
        run, sep, metric = item.partition(":")
        if not sep or not run.strip() or not metric.strip():
            raise UsageError(f"--ack {item!r}: give RUN:METRIC, e.g. --ack 3f2a9c1e:stream.triad "
                             f"(the run after the change, as history --changes prints it)")
        out.append((run.strip(), metric.strip()))
    return out


def _options(args: argparse.Namespace):
    from ..analysis import changes as ch
    from ..analysis import changepoints as cp
    start, end = _date(args.start, "--from", False), _date(args.end, "--to", True)
    if start and end and start > end:
        raise BadValueError(f"--from {args.start} is after --to {args.end}: no run can be in between")
    if args.context is not None:
        raise UsageError("--context selects values of one metric for history --metric; --changes looks at "
                         "each context apart already")
    if args.metric and args.family:
        raise UsageError("give --metric or --family, not both")
    return ch.Options(alpha=_fraction(args.alpha, "--alpha", cp.ALPHA, 0.0, 0.5),
                      min_step=_fraction(args.min_step, "--min-step", cp.MIN_STEP, -1e-12, 0.99, 0.01),
                      baseline=parse_count(args.baseline, what="--baseline", low=2, high=10_000) or ch.BASELINE_RUNS,
                      start=start, end=end, points=bool(args.html))


def _check_filters(store, args: argparse.Namespace) -> None:
    """A host, metric or family the history has no value of is a typo more often than a question."""
    from ..results import store_changes as sc
    if args.host is not None:
        known = sc.hosts(store)
        if args.host not in known:
            raise UsageError(f"--host {args.host!r}: no value measured on it in {store.path} "
                             f"(nodes: {', '.join(known[:10]) or 'none'}{', ...' if len(known) > 10 else ''})")
    if args.metric is not None and not sc.series_keys(store, name=args.metric):
        raise UsageError(f"--metric {args.metric!r}: not in {store.path} (ceiling history --json lists the runs; "
                         f"a name is like stream.triad)")
    if args.family is not None and not sc.series_keys(store, prefix=args.family + "."):
        raise UsageError(f"--family {args.family!r}: no metric {args.family}.* in {store.path} "
                         f"(a family is the first part of a name: stream, dgemm, latency)")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _as_json(o):
    if dataclasses.is_dataclass(o):
        return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    if isinstance(o, set):
        return sorted(o)
    return str(o)


def _plain(v):
    """JSON has no infinity: a robust z over equal runs is written as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def changes(args: argparse.Namespace) -> int:
    from ..analysis import changes as ch
    from ..report.terminal_changes import render_changes
    from ..results.store import Store, default_db_path
    if args.since and not args.changes:
        raise UsageError("--since belongs to --changes: give --changes too")
    if args.since and (args.start or args.end):
        # --since's window is the history's own (the runs after the last look, each series from its last step),
        # and the look it records is what the next --since starts from: a look bounded by dates would record
        # runs it never examined as seen, or keep results computed on a cut series as the series'.
        raise UsageError("--since looks at what is new since the last look and records it; --from/--to bound "
                         "a full look, which records nothing: give one or the other")
    acks = _acks(args.ack)
    opts = _options(args) if args.changes else None
    path = Path(args.db) if args.db else default_db_path()
    if acks:
        if not path.exists():
            raise UsageError(f"no history at {path}: nothing to acknowledge")
        with Store(args.db) as store:
            for rid, metric in ch.ack(store, acks, _now()):
                print(f"acknowledged: {metric} at run {rid} (not reported again; history --changes --all shows it)")
        if not args.changes:
            return 0
    store = None
    if args.since and path.exists():
        try:
            store = Store(args.db)
        except PathError:
            store = None          # a file this user may not write: looked at, not recorded
    if store is None:
        store = Store(args.db, readonly=True)
    with store:
        _check_filters(store, args)
        if args.since:
            report = ch.since(store, opts, args.metric, args.family, args.host, when=_now())
        else:
            report = ch.full(store, opts, args.metric, args.family, args.host)
    new_only = bool(args.since)
    if args.html:
        from ..report.html_changes import write
        write(report, args.html, new_only=new_only, show_acked=args.all)
    if args.json:
        shown = report.changes(new_only=new_only, acked=args.all)
        doc = {"since": report.since, "through": report.through, "series": len(report.series),
               "examined": report.examined, "kept": report.kept, "skipped": report.skipped,
               "changes": shown,
               "baselines": [{"metric": s.metric, "host": s.host, "context": s.context,
                              **dataclasses.asdict(s.baseline)}
                             for s in report.series if s.baseline is not None and s.baseline.outside],
               "acknowledged_hidden": 0 if args.all else
               sum(1 for c in report.changes(new_only=new_only, acked=True) if c.acked),
               "notes": report.notes}
        print(json.dumps(_plain(json.loads(json.dumps(doc, default=_as_json))), indent=1, allow_nan=False))
    else:
        print(render_changes(report, new_only=new_only, show_acked=args.all))
    return 0
