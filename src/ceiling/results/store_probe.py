"""The probe's windows in the history (store version 6, store_schema.py): one row per operation and
window of ``ceiling probe`` (analysis/slowdown.Window), the baseline a later probe reads back, and
the retention that bounds the table (``--retain``). results/store.py runs these inside its
transactions. Times are seconds since the epoch (UTC), latencies seconds.

The table is additive: the upgrade from 4 creates it empty and touches nothing else, and a reader of
an older file sees an empty one in its temp schema (``for_reader``), writing nothing to the file.
"""
from __future__ import annotations

import sqlite3
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

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


def baseline(db: sqlite3.Connection, host: str, directory: str, since: float) -> Dict[str, Tuple[float, int]]:
    """Per operation: the median of the window medians since ``since`` of this probe, and how many windows."""
    out: Dict[str, Tuple[float, int]] = {}
    rows = db.execute("SELECT op, median FROM probe_windows WHERE host = ? AND dir = ? AND start >= ? "
                      "AND median IS NOT NULL ORDER BY op, median", (host, directory, since)).fetchall()
    by: Dict[str, List[float]] = {}
    for op, med in rows:
        by.setdefault(op, []).append(med)
    for op, meds in by.items():
        k = len(meds)
        mid = meds[k // 2] if k % 2 else (meds[k // 2 - 1] + meds[k // 2]) / 2
        out[op] = (mid, k)
    return out


def windows(db: sqlite3.Connection, host: Optional[str] = None) -> List[tuple]:
    """Every stored window (of ``host``), oldest first, as COLUMNS."""
    where, args = ("WHERE host = ?", (host,)) if host else ("", ())
    return db.execute(f"SELECT {', '.join(COLUMNS)} FROM probe_windows {where} ORDER BY start, op", args).fetchall()
