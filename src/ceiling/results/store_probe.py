"""The probe's windows in the history (store version 6, store_schema.py): one row per operation and
window of ``ceiling probe`` (analysis/slowdown.Window), the baseline a later probe reads back, and
the retention that bounds the table (``--retain``), and the downsampling past ``--full`` (windows
merged into ``MERGED_S`` ones: ``downsample``). results/store.py runs these inside its transactions.
Times are seconds since the epoch (UTC), latencies seconds.

The baseline is the median of the windows' medians weighted by each window's length: for windows of
one length (a probe's own) that is the plain median of their medians; a merged window stands for the
windows it replaced. A merged window keeps, per operation: the span, the operations and errors summed,
as median the length-weighted median of its windows' medians (the statistic the baseline takes, so
the baseline over merged windows is the median of group medians: the same where a group's windows
lie on one side of the baseline, and within the group's spread otherwise), as p99 the largest of
theirs (an upper bound of the merged p99), the length-weighted median of their baselines, the kind of
most of them, and the factor as its median over that baseline.

The table is additive: the upgrade from 4 creates it empty and touches nothing else, and a reader of
an older file sees an empty one in its temp schema (``for_reader``), writing nothing to the file.
"""
from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

MERGED_S = 3600.0       # a merged window: an hour (the default window is 10 minutes)

TABLE = """
CREATE TABLE IF NOT EXISTS {schema}probe_windows (
    host          TEXT NOT NULL,  -- the node that probed
    dir           TEXT NOT NULL,  -- the probe directory (DIR/ceiling-probe-HOST), as given
    op            TEXT NOT NULL,  -- read, write, md.stat, md.read, md.delete, md.create
    start         REAL NOT NULL,  -- the window, seconds since the epoch
    end           REAL NOT NULL,
    n             INTEGER NOT NULL,   -- operations that succeeded in it
    errors        INTEGER NOT NULL,   -- operations that failed in it
    median        REAL,           -- seconds, NULL: none succeeded
    p99           REAL,
    baseline      REAL,           -- the baseline median the slowdown was taken against, NULL: none yet
    baseline_kind TEXT NOT NULL,  -- history | first hour | none
    slowdown      REAL            -- median / baseline
);
CREATE INDEX IF NOT EXISTS {schema}probe_windows_series ON probe_windows(host, dir, op, start)"""

COLUMNS = ("host", "dir", "op", "start", "end", "n", "errors", "median", "p99", "baseline", "baseline_kind",
           "slowdown")


def statements(schema: str = "") -> List[str]:
    return [s for s in TABLE.format(schema=schema).split(";") if s.strip()]


def for_reader(db: sqlite3.Connection) -> None:
    """An empty probe_windows in the temp schema of a read-only connection to a file before version 6."""
    for stmt in statements("temp."):
        db.execute(stmt)


def save(db: sqlite3.Connection, rows: Iterable[Sequence]) -> None:
    db.executemany(f"INSERT INTO probe_windows ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                   [tuple(r) for r in rows])


def prune(db: sqlite3.Connection, before: float) -> int:
    """Remove the windows that ended before ``before``; how many went."""
    return db.execute("DELETE FROM probe_windows WHERE end < ?", (before,)).rowcount


def weighted_median(pairs: Sequence[Tuple[float, float]]) -> Optional[float]:
    """The median of (value, weight) pairs: the value where half the weight lies below; midway between two
    values where the halves meet exactly (the plain median for equal weights). None without weight."""
    pairs = sorted((v, w) for v, w in pairs if w > 0)
    total = sum(w for _, w in pairs)
    if not pairs or total <= 0:
        return None
    acc = 0.0
    for i, (v, w) in enumerate(pairs):
        acc += w
        if abs(acc - total / 2) <= 1e-9 * total and i + 1 < len(pairs):
            return (v + pairs[i + 1][0]) / 2
        if acc > total / 2:
            return v
    return pairs[-1][0]


def baseline(db: sqlite3.Connection, host: str, directory: str, since: float) -> Dict[str, Tuple[float, int]]:
    """Per operation: the median of the window medians since ``since`` of this probe, each weighted by its
    window's length (module docstring), and how many windows."""
    out: Dict[str, Tuple[float, int]] = {}
    rows = db.execute("SELECT op, median, end - start FROM probe_windows WHERE host = ? AND dir = ? AND start >= ? "
                      "AND median IS NOT NULL", (host, directory, since)).fetchall()
    by: Dict[str, List[Tuple[float, float]]] = {}
    for op, med, length in rows:
        by.setdefault(op, []).append((med, max(length, 1e-9)))
    for op, pairs in by.items():
        out[op] = (weighted_median(pairs), len(pairs))
    return out


def downsample(db: sqlite3.Connection, host: str, directory: str, before: float) -> int:
    """This probe's windows shorter than MERGED_S that end by ``before`` (rounded down to a whole MERGED_S,
    so each span is taken whole) become one window per operation and span (module docstring); how many rows
    were replaced."""
    cut = (before // MERGED_S) * MERGED_S
    rows = db.execute(f"SELECT rowid, {', '.join(COLUMNS)} FROM probe_windows WHERE host = ? AND dir = ? "
                      "AND end <= ? AND end - start < ?", (host, directory, cut, MERGED_S - 1e-6)).fetchall()
    groups: Dict[Tuple[str, int], List[tuple]] = {}
    for r in rows:
        groups.setdefault((r[3], int(r[4] // MERGED_S)), []).append(r)
    merged, gone = [], []
    for (op, _), g in groups.items():
        if len(g) < 2:
            continue
        gone += [r[0] for r in g]
        length = [max(r[5] - r[4], 1e-9) for r in g]
        med = weighted_median([(r[8], w) for r, w in zip(g, length) if r[8] is not None])
        base = weighted_median([(r[10], w) for r, w in zip(g, length) if r[10] is not None])
        p99 = [r[9] for r in g if r[9] is not None]
        kind = Counter(r[11] for r in g).most_common(1)[0][0]
        merged.append((host, directory, op, min(r[4] for r in g), max(r[5] for r in g), sum(r[6] for r in g),
                       sum(r[7] for r in g), med, max(p99) if p99 else None, base, kind if base else "none",
                       med / base if med is not None and base else None))
    db.executemany("DELETE FROM probe_windows WHERE rowid = ?", [(i,) for i in gone])
    save(db, merged)
    return len(gone)


def windows(db: sqlite3.Connection, host: Optional[str] = None) -> List[tuple]:
    """Every stored window (of ``host``), oldest first, as COLUMNS."""
    where, args = ("WHERE host = ?", (host,)) if host else ("", ())
    return db.execute(f"SELECT {', '.join(COLUMNS)} FROM probe_windows {where} ORDER BY start, op", args).fetchall()
