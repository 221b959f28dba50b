"""The queries of one metric over time in the history, and the value they return (results/store.py runs them).

Each is a range of the index ``metrics_series (name, host, context, started)``: a metric's name,
then the node it was measured on, then its context key, then time (store_schema.py). None scans
the table; tests/test_store_v3.py reads their query plans (EXPLAIN QUERY PLAN) to keep it so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple


@dataclass(frozen=True)
class Point:
    """One stored value of a metric: a figure with its repetitions, summary, context and configuration."""

    started: str                    # the run's start, ISO 8601 UTC
    host: str                       # the node it was measured on
    run_id: str
    value: Optional[float]          # the headline (Stats.best); None = not measured
    unit: str
    better: str
    context: str                    # the canonical context key; "" = not known (its document was unreadable)
    inventory_hash: str             # the node's configuration (Store.inventory); "" = not recorded
    valid: Optional[bool]           # the kernel's output matched its analytic value; None = not known
    n: Optional[int]                # repetitions; None = no summary stored
    best: Optional[float]
    median: Optional[float]
    mean: Optional[float]
    min: Optional[float]
    max: Optional[float]
    stdev: Optional[float]          # sample standard deviation, in unit
    cv: Optional[float]             # stdev / mean, a fraction
    reps: Tuple[Optional[float], ...] = ()   # every repetition, in unit

    @classmethod
    def of(cls, row: Sequence) -> "Point":
        *head, valid, n, best, median, mean, lo, hi, stdev, cv, reps = row
        try:
            values = json.loads(reps or "[]")
        except ValueError:
            values = []
        values = tuple(v if isinstance(v, (int, float)) else None for v in values) if isinstance(values, list) else ()
        return cls(*head, None if valid is None else bool(valid), n, best, median, mean, lo, hi, stdev, cv, values)


_POINT = ("started, host, run_id, value, unit, better, context, inventory_hash, valid, n, best, median, mean, "
          "min, max, stdev, cv, reps")


def series_sql(name: str, host: Optional[str], context: Optional[str] = None,
               contexts: Optional[Sequence[str]] = None) -> Tuple[str, list]:
    """The query of Store.series: (SQL, arguments)."""
    where, args = ["name = ?"], [name]
    if host is not None:
        where.append("host = ?")
        args.append(host)
    if context is not None:
        where.append("context = ?")
        args.append(context)
    elif contexts is not None:
        where.append(f"context IN ({', '.join('?' * len(contexts))})")
        args += list(contexts)
    return (f"SELECT {_POINT} FROM metrics WHERE {' AND '.join(where)} ORDER BY started, run_id, host, rowid",
            args)


def contexts_sql(name: str, host: Optional[str]) -> Tuple[str, list]:
    """The query of Store.contexts."""
    if host is None:
        return "SELECT context, count(*) FROM metrics WHERE name = ? GROUP BY context ORDER BY context", [name]
    return ("SELECT context, count(*) FROM metrics WHERE name = ? AND host = ? GROUP BY context ORDER BY context",
            [name, host])


def latest_sql(prefix: str, host: str) -> Tuple[str, list]:
    """The query of Store.latest_metrics: the names from ``prefix`` to ``prefix`` + U+10FFFF (the
    highest character: every name that starts with the prefix sorts inside), a range of the index."""
    return ("SELECT name, value, unit, started, run_id FROM metrics WHERE name >= ? AND name < ? "
            "AND substr(name, 1, ?) = ? AND host = ? AND value IS NOT NULL "
            "ORDER BY name, started DESC, run_id DESC", [prefix, prefix + "\U0010ffff", len(prefix), prefix, host])


def latest_old_sql(prefix: str, host: str) -> Tuple[str, list]:
    """Store.latest_metrics on a file of store version 1 or 2 read as it is: without the work of
    building the current tables (a profile asks this of a history it only reads)."""
    where = "CASE WHEN m.node = '' THEN r.host ELSE m.node END"
    return (f"SELECT m.name, m.value, m.unit, r.started, r.run_id FROM metrics m JOIN runs r "
            f"ON r.run_id = m.run_id WHERE m.name >= ? AND m.name < ? AND substr(m.name, 1, ?) = ? AND {where} = ? "
            f"AND m.value IS NOT NULL ORDER BY m.name, r.started DESC, r.run_id DESC",
            [prefix, prefix + "\U0010ffff", len(prefix), prefix, host])


def run_sql(run_id: str) -> Tuple[str, list]:
    """Every figure of one run with its name, in its order: a range of the index metrics_run."""
    return f"SELECT name, {_POINT} FROM metrics WHERE run_id = ? ORDER BY rowid", [run_id]


CHUNK = 500                    # run ids per IN (...): under SQLite's oldest limit of 999 arguments


def runs_sql(run_ids: Sequence[str]) -> Tuple[str, list]:
    """Every figure of these runs (at most CHUNK ids), each with its run id and name, in each run's order: one
    range of the index metrics_run per id, a set of runs read in one query instead of one query a run."""
    return (f"SELECT run_id, name, {_POINT} FROM metrics WHERE run_id IN ({', '.join('?' * len(run_ids))}) "
            "ORDER BY run_id, rowid", list(run_ids))


def inventories_sql(hashes: Sequence[str]) -> Tuple[str, list]:
    """The stored inventories of these hashes (at most CHUNK): their primary key."""
    return f"SELECT hash, inventory FROM inventories WHERE hash IN ({', '.join('?' * len(hashes))})", list(hashes)


def earlier_sql(name: str, host: str, context: str, before: str, limit: int) -> Tuple[str, list]:
    """The newest ``limit`` values of one series started before ``before``, newest first: a range of
    metrics_series read backwards from ``before``."""
    return (f"SELECT {_POINT} FROM metrics WHERE name = ? AND host = ? AND context = ? AND started < ? "
            "ORDER BY started DESC LIMIT ?", [name, host, context, before, int(limit)])


def window_sql(host: Optional[str], after: Optional[str], before: Optional[str],
               run_id: Optional[str] = None) -> Tuple[str, list]:
    """The runs of ``host`` started after ``after`` and before ``before`` (either may be None), oldest first:
    a range of the index runs_host_started; with ``run_id``, that run (its primary key)."""
    if run_id is not None:
        return "SELECT run_id, host, started FROM runs WHERE run_id = ?", [run_id]
    where, args = ["host = ?"], [host]
    if after is not None:
        where.append("started > ?")
        args.append(after)
    if before is not None:
        where.append("started < ?")
        args.append(before)
    return f"SELECT run_id, host, started FROM runs WHERE {' AND '.join(where)} ORDER BY started, run_id", args


def competing_sql(run_ids: Sequence[str]) -> Tuple[str, list]:
    """Store.competing: the competing-load findings (checks/load.py: load.competing, load.competing.steps) that
    warned or failed in these runs, read by SQLite's JSON1 from their documents (a damaged one reads as none)."""
    return ("SELECT r.run_id, json_extract(f.value, '$.status'), json_extract(f.value, '$.title') FROM runs r, "
            "json_each(CASE WHEN json_valid(r.doc) THEN r.doc ELSE '{}' END, '$.findings') f "
            f"WHERE r.run_id IN ({', '.join('?' * len(run_ids))}) AND substr(json_extract(f.value, '$.id'), 1, 14) = ? "
            "AND json_extract(f.value, '$.status') IN ('warn', 'fail')", [*run_ids, "load.competing"])
