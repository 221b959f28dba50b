"""The monitor's time series in the history (store version 7, store_schema.py): one
``monitor_samples`` row per figure and sample of ``ceiling monitor`` (the node's: job '', a job's:
its key), and one ``monitor_jobs`` row per job seen (Slurm's or ``monitor -- CMD``'s), with the
retention that bounds them (``--retain``) and the downsampling of old samples: rows older than
``--full`` (a day by default) become one mean per minute (``step`` 60), so a year of a node at 10 s
is about 1/6 of its full size. Times are seconds since the epoch (UTC).

The tables are additive: the upgrade from 6 creates them empty and touches nothing else; a reader
of an older file sees empty ones in its temp schema (``for_reader``).
"""
from __future__ import annotations

import sqlite3
from typing import Iterable, List, Optional, Sequence

DOWNSAMPLED_S = 60          # old samples become one mean per minute

TABLE = """
CREATE TABLE IF NOT EXISTS {schema}monitor_samples (
    host   TEXT NOT NULL,     -- the node sampled
    job    TEXT NOT NULL,     -- '' = the node, else monitor_jobs.job
    metric TEXT NOT NULL,     -- probes/node_sampler.py, probes/jobs.py name each (cpu.user, disk.sda.read_Bps, ...)
    t      REAL NOT NULL,     -- the end of the span the value covers, seconds since the epoch
    step   REAL NOT NULL,     -- the span, seconds (the interval, 60 once downsampled)
    value  REAL NOT NULL      -- the figure's unit: fractions, bytes, bytes/s, operations/s, CPUs
);
CREATE INDEX IF NOT EXISTS {schema}monitor_samples_series ON monitor_samples(host, job, metric, t);
CREATE TABLE IF NOT EXISTS {schema}monitor_jobs (
    host    TEXT NOT NULL,
    job     TEXT NOT NULL,    -- the job's key: its id and its cgroup's identity (a reused id is another job)
    job_id  TEXT NOT NULL,    -- Slurm's job id, cmd-PID for monitor -- CMD
    kind    TEXT NOT NULL,    -- slurm-v2, slurm-v1, command
    uid     INTEGER,
    user    TEXT NOT NULL,
    cpus    TEXT NOT NULL,    -- its CPU list ('0-3,8'), '' unknown
    first   REAL NOT NULL,    -- first and last seen, seconds since the epoch
    last    REAL NOT NULL,
    command TEXT NOT NULL DEFAULT '',   -- monitor -- CMD's command line
    status  INTEGER,                    -- its exit status (128 + signal when killed), NULL: not known
    PRIMARY KEY (host, job)
)"""

SAMPLE_COLUMNS = ("host", "job", "metric", "t", "step", "value")
JOB_COLUMNS = ("host", "job", "job_id", "kind", "uid", "user", "cpus", "first", "last", "command", "status")


def statements(schema: str = "") -> List[str]:
    return [s for s in TABLE.format(schema=schema).split(";") if s.strip()]


def for_reader(db: sqlite3.Connection) -> None:
    """Empty monitor tables in the temp schema of a read-only connection to a file before version 7."""
    for stmt in statements("temp."):
        db.execute(stmt)


def save(db: sqlite3.Connection, samples: Iterable[Sequence], jobs: Iterable[Sequence]) -> None:
    db.executemany(f"INSERT INTO monitor_samples ({', '.join(SAMPLE_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?)",
                   [tuple(r) for r in samples])
    # a job seen again: its last sighting (and status) move, its first stays
    db.executemany(f"INSERT INTO monitor_jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' * len(JOB_COLUMNS))}) "
                   "ON CONFLICT (host, job) DO UPDATE SET last = excluded.last, "
                   "status = coalesce(excluded.status, status), cpus = excluded.cpus",
                   [tuple(r) for r in jobs])


def prune(db: sqlite3.Connection, before: float) -> int:
    """Remove samples (and jobs last seen) before ``before``; how many samples went."""
    n = db.execute("DELETE FROM monitor_samples WHERE t < ?", (before,)).rowcount
    db.execute("DELETE FROM monitor_jobs WHERE last < ?", (before,))
    return n


def downsample(db: sqlite3.Connection, host: str, before: float) -> int:
    """This host's samples finer than a minute that end before ``before`` (rounded down to a minute, so
    each minute is taken whole) become one mean per minute; how many rows were replaced."""
    cut = (before // DOWNSAMPLED_S) * DOWNSAMPLED_S
    db.execute("INSERT INTO monitor_samples (host, job, metric, t, step, value) "
               f"SELECT host, job, metric, (CAST((t - 1e-6) / {DOWNSAMPLED_S} AS INTEGER) + 1) * {DOWNSAMPLED_S}, "
               f"{DOWNSAMPLED_S}, avg(value) FROM monitor_samples WHERE host = ? AND step < {DOWNSAMPLED_S} "
               f"AND t <= ? GROUP BY job, metric, CAST((t - 1e-6) / {DOWNSAMPLED_S} AS INTEGER)", (host, cut))
    return db.execute(f"DELETE FROM monitor_samples WHERE host = ? AND step < {DOWNSAMPLED_S} AND t <= ?",
                      (host, cut)).rowcount


def samples(db: sqlite3.Connection, host: Optional[str] = None, job: Optional[str] = None,
            since: Optional[float] = None, until: Optional[float] = None) -> List[tuple]:
    """Stored samples (of ``host``, of ``job``: '' the node's; ending from ``since`` to ``until``), oldest
    first, as SAMPLE_COLUMNS."""
    where, args = [], []
    for cond, v in (("host = ?", host), ("job = ?", job), ("t >= ?", since), ("t <= ?", until)):
        if v is not None:
            where.append(cond)
            args.append(v)
    w = ("WHERE " + " AND ".join(where)) if where else ""
    return db.execute(f"SELECT {', '.join(SAMPLE_COLUMNS)} FROM monitor_samples {w} ORDER BY t, job, metric",
                      args).fetchall()


def jobs(db: sqlite3.Connection, host: Optional[str] = None) -> List[tuple]:
    where, args = ("WHERE host = ?", (host,)) if host else ("", ())
    return db.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM monitor_jobs {where} ORDER BY first", args).fetchall()
