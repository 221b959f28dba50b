"""What ``ceiling history --changes`` reads from the history and keeps in it (store version 4).

Reading: the series (a metric's values on one node with one context key, store_queries.py) as
ranges of the index ``metrics_series``; the runs added after a moment through ``runs_started``.
Keeping (only where the file was opened for writing, Store.write): acknowledged changes
(``change_acks``: a run and a metric; a change whose first run after it is that run is not
reported again), each series' changes as last computed with the start of its newest run examined
(``change_series``; its result also remembers the series' acknowledged drift, whose first run moves
from look to look: analysis/changes.py acked_drift), and each look (``change_looks``: when, and
the newest run it examined): what ``--since`` starts from. A read-only open reads them and writes nothing.
"""
from __future__ import annotations

import json
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

# One stored value as the change detection reads it: (name, host, context, started, run_id,
# value, median, n, unit, better, inventory_hash, valid).
ROW = "name, host, context, started, run_id, value, median, n, unit, better, inventory_hash, valid"

Key = Tuple[str, str, str]      # (metric, host, context key)


def _where(name: Optional[str], prefix: Optional[str], host: Optional[str]) -> Tuple[str, list]:
    where, args = [], []
    if name is not None:
        where.append("name = ?")
        args.append(name)
    elif prefix is not None:       # a family: the names from prefix to prefix + U+10FFFF, a range of the index
        where.append("name >= ? AND name < ?")
        args += [prefix, prefix + "\U0010ffff"]
    if host is not None:
        where.append("host = ?")
        args.append(host)
    return (" WHERE " + " AND ".join(where)) if where else "", args


def series_keys(store, name: Optional[str] = None, prefix: Optional[str] = None,
                host: Optional[str] = None) -> List[Tuple[str, str, str, int, str, str]]:
    """(metric, host, context, values, first start, last start) of every series, by key."""
    where, args = _where(name, prefix, host)
    return store.rows(f"SELECT name, host, context, count(*), min(started), max(started) FROM metrics{where} "
                      f"GROUP BY name, host, context ORDER BY name, host, context", args)


def hosts(store) -> List[str]:
    return [r[0] for r in store.rows("SELECT DISTINCT host FROM metrics ORDER BY host")]


def points(store, key: Key, start: Optional[str] = None, end: Optional[str] = None) -> List[tuple]:
    """The rows of one series (ROW), oldest first, started from ``start`` to ``end`` inclusive."""
    where, args = "name = ? AND host = ? AND context = ?", list(key)
    if start is not None:
        where += " AND started >= ?"
        args.append(start)
    if end is not None:
        where += " AND started <= ?"
        args.append(end)
    return store.rows(f"SELECT {ROW} FROM metrics WHERE {where} ORDER BY started, run_id, rowid", args)


def newest(store, key: Key, k: int) -> List[tuple]:
    """The newest ``k`` rows of one series, oldest first."""
    rows = store.rows(f"SELECT {ROW} FROM metrics WHERE name = ? AND host = ? AND context = ? "
                      f"ORDER BY started DESC, run_id DESC LIMIT ?", [*key, int(k)])
    return rows[::-1]


def touched_since(store, since: str) -> Set[Key]:
    """The series with a value from a run started after ``since``: the new runs by the index
    runs_started, their rows by metrics_run (a join let SQLite walk every row of metrics instead)."""
    return {tuple(r) for r in store.rows(       # type: ignore[misc]
        "SELECT DISTINCT name, host, context FROM metrics WHERE run_id IN "
        "(SELECT run_id FROM runs WHERE started > ?)", [since])}


def acks(store) -> Set[Tuple[str, str]]:
    """(run_id, metric) of every acknowledged change."""
    return {(r[0], r[1]) for r in store.rows("SELECT run_id, metric FROM change_acks")}


def ack(store, pairs: Iterable[Tuple[str, str]], when: str) -> None:
    """Acknowledge each (run_id, metric); one already acknowledged keeps its first date."""
    rows = [(r, m, when) for r, m in pairs]
    store.write(lambda db: db.executemany(
        "INSERT OR IGNORE INTO change_acks (run_id, metric, acked) VALUES (?, ?, ?)", rows))


def last_look(store) -> Optional[str]:
    """The start of the newest run the last look examined; None before the first."""
    rows = store.rows("SELECT through FROM change_looks ORDER BY look DESC LIMIT 1")
    return rows[0][0] if rows else None


def cached(store, keys: Optional[Sequence[Key]] = None) -> Dict[Key, Tuple[str, str, dict]]:
    """key -> (through, open_from, result) as the last look kept them; a damaged result is left out."""
    out: Dict[Key, Tuple[str, str, dict]] = {}
    wanted = set(keys) if keys is not None else None
    for name, host, context, through, open_from, result in store.rows(
            "SELECT name, host, context, through, open_from, result FROM change_series"):
        key = (name, host, context)
        if wanted is not None and key not in wanted:
            continue
        try:
            doc = json.loads(result)
        except (TypeError, ValueError):
            continue
        if isinstance(doc, dict):
            out[key] = (through, open_from, doc)
    return out


def keep(store, entries: Dict[Key, Tuple[str, str, dict]], through: str, at: str) -> None:
    """Keep each series' result and record this look, in one transaction."""
    rows = [(*k, t, o, json.dumps(r, separators=(",", ":"), allow_nan=False)) for k, (t, o, r) in entries.items()]

    def work(db) -> None:
        db.executemany("INSERT OR REPLACE INTO change_series (name, host, context, through, open_from, result) "
                       "VALUES (?, ?, ?, ?, ?, ?)", rows)
        db.execute("INSERT INTO change_looks (at, through) VALUES (?, ?)", (at, through))
    store.write(work)
