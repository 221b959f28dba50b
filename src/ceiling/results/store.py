"""History of runs in one SQLite file, so ``ceiling history`` and ``compare`` can look back.

Each run is kept whole, as its JSON document (``runs.doc``); the ``metrics``
table repeats the headline figures so that "stream.triad on this host over
time" is one indexed query rather than a scan of every document. A document
is read back through jsonio, so runs stored by an older ceiling come back
migrated to the current schema_version.

The default file's directory is checked first (files/private.data_dir): a
``ceiling`` another user planted in an $XDG_DATA_HOME others can write is
refused, never followed. A path that is a device or a FIFO is refused too.

The file is shared by every ceiling on the machine, possibly at the same
moment (two ``srun`` steps on one node): WAL journaling and a busy timeout let
concurrent writers queue instead of failing. A file that is not ours is never
written to: it is checked before the first write, and refused with a
StoreError naming what was found. An older database of ours is upgraded in
place when opened (one transaction, after an integrity check: a damaged one
is refused, not upgraded). A verb that will record a run opens the store
with ``check=True`` before it measures: a damaged history is then refused
(exit 5) and left byte for byte as it was, and one that cannot be written
(a read-only file or mount) is refused there too (exit 4), not after the
measurements.

Reading verbs (``history``, ``show``) open it with ``readonly=True``: SQLite's
``mode=ro``, nothing created, upgraded or written, so they work on a history
another user owns or on a read-only mount. WAL needs a ``-shm`` file beside
the database; where none exists and none can be made (a read-only mount, a
directory of another user), the file is opened ``immutable``: no writer of
ours can be changing it there. A missing file reads as an empty history.

The tables, their versions and the rows a run becomes are in store_schema.py;
what each figure is filed under (its context key, its node's inventory hash)
in history_keys.py. The queries of one metric over time (``series``,
``metrics_history``, ``latest_metrics``, ``contexts``) are ranges of the index
metrics_series, never a scan of the table (tests/test_store_v3.py reads
their query plans). A reader of an older store builds the current tables in
its own temporary schema the first time a query needs them
(store_schema.read_old); ``get``, ``list`` and ``latest_metrics`` read such
a file as it is (a version 1 file through a view that adds ``node``).

A study (model.Study, store version 4) is one ``studies`` row that groups its members, each
stored as a normal run (so ``history --metric`` sees every member's figures): ``save_study``
writes the members and the study in one transaction, ``get_study`` reads it back with every
member run that is still in the history, ``list_studies`` lists them, and ``find`` tells
whether an id names a run or a study (``ceiling show``). A reader of a file before version 4
sees no study, through empty temporary tables.

Longer than 500 lines: one connection's whole life (opened by the rules for writers and for
readers, upgraded, one transaction per write) and every read on it belong to the class that owns
the connection; the tables, the rows and the queries are already apart (store_schema.py,
store_queries.py, store_studies.py).
"""
from __future__ import annotations

import os
import json
import random
import sqlite3
import stat
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import PathError, StoreError, UsageError
from ..files.private import data_dir
from . import jsonio
from .model import Member, Run, Study
from .store_queries import (CHUNK, Point, competing_sql, contexts_sql, earlier_sql, inventories_sql, latest_old_sql,
                            latest_sql, run_sql, runs_sql, series_sql, window_sql)
from . import store_monitor, store_probe
from . import store_studies as studies
from .store_schema import (SCHEMA, STORE_VERSION, changes_for_reader, read_old, save_run, statements,
                           studies_for_reader, upgrade)
from .store_studies import StudySummary

BUSY_TIMEOUT_MS = 30_000
MIN_PREFIX = 6

# Metrics shown for each run by ``list``: the figures a user compares first.
HEADLINE = ("flops.dp.node", "dgemm.node", "stream.triad", "bandwidth.dram", "latency.dram")

_SQLITE_MAGIC = b"SQLite format 3\x00"

def default_db_path() -> Path:
    """``$XDG_DATA_HOME/ceiling/history.db``, else ``~/.local/share/ceiling/history.db``."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "ceiling" / "history.db"


@dataclass(frozen=True)
class RunSummary:
    """One line of ``ceiling history``."""

    run_id: str
    host: str
    started: str
    finished: str
    tool_version: str
    partial: bool
    n_metrics: int
    headline: Dict[str, Tuple[Optional[float], str]] = field(default_factory=dict)  # name -> (value, unit)
    command: List[str] = field(default_factory=list)      # the command line that made it
    nodes: int = 0                                        # nodes of a cluster run; 0 for one node's run
    study: str = ""                                       # the study it is a member of; "" = none

    @property
    def verb(self) -> str:
        """What made the run: "run", "check", "bench memory", from its command line; a
        cluster's own run says so ("run --cluster, 16 nodes"), each node's run is plain."""
        words = []
        for w in self.command[1:]:
            if not isinstance(w, str) or w.startswith("-"):
                break
            words.append(w)
        return " ".join(words) + (f" --cluster, {self.nodes} nodes" if self.nodes else "")


# The command line of a run, read from its document by SQLite (JSON1, built in since 3.38)
# without parsing the whole document in Python; a damaged one reads as none.
_COMMAND = "CASE WHEN json_valid(doc) THEN json_extract(doc, '$.command') END"
_NODES = "CASE WHEN json_valid(doc) THEN json_array_length(doc, '$.nodes') END"

# The store version from which the metrics rows are current (a reader of an older file rebuilds them).
_METRICS_CURRENT = 3


def _command(text: Optional[str]) -> List[str]:
    try:
        words = json.loads(text) if text else []
    except ValueError:
        return []
    return [w for w in words if isinstance(w, str)] if isinstance(words, list) else []


class Store:
    """The history database. Use as a context manager, or call ``close``."""

    def __init__(self, path: Union[str, "os.PathLike[str]", None] = None, check: bool = False,
                 readonly: bool = False):
        """``check``: verify the file is intact (SQLite's quick_check) and can be written
        before anything is written to it, as a verb that will record a run does before
        measuring; a damaged or read-only file is refused, never written to.
        ``readonly``: for reading only (module docstring); ``save`` then refuses."""
        self._check_intact = check
        self.readonly = readonly
        self._old = 0            # a read-only file's older store version, until _ready has read it
        default = path is None
        self.path = Path(default_db_path() if default else path)
        if default:          # never a ceiling/ another user planted (files/private.py)
            data_dir(str(self.path.parent.parent), self.path.parent.name, create=not readonly)
        if readonly:
            self._db = self._connect_readonly()
            return
        self._check_path(create_parent=default)
        try:
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000,
                                       isolation_level=None)   # explicit BEGIN/COMMIT below
        except sqlite3.Error as e:
            raise self._error(e) from None
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise

    # -- opening -----------------------------------------------------------------

    def _check_path(self, create_parent: bool) -> None:
        p = self.path
        if p.is_dir():
            raise PathError(f"cannot use {p} as a results database: it is a directory")
        try:
            mode = os.stat(p).st_mode          # a link is followed: its target must be a file too
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            # a database is pages SQLite reads back, with files beside it (-wal, -shm): never
            # a device or a FIFO (opening one to read its header would wait for a writer)
            what = ("a FIFO" if stat.S_ISFIFO(mode) else "a block device" if stat.S_ISBLK(mode) else
                    "a character device" if stat.S_ISCHR(mode) else "not a file")
            raise PathError(f"cannot use {p} as a results database: it is {what}; name a regular file")
        if p.exists():
            try:
                with open(p, "rb") as f:
                    head = f.read(len(_SQLITE_MAGIC))
            except OSError as e:
                raise PathError(f"cannot read {p}: {e.strerror or e}") from None
            # An empty file is what `touch` leaves: nothing to lose, SQLite makes it a database.
            if head and head != _SQLITE_MAGIC:
                raise StoreError(f"{p} is not a ceiling database (not an SQLite file): not touched")
            return
        parent = p.parent
        if create_parent and not parent.exists():
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise PathError(f"cannot create {parent}: {e.strerror or e}") from None
        if not parent.exists():
            raise PathError(f"cannot create {p}: directory {parent} does not exist")
        if not parent.is_dir():
            raise PathError(f"cannot create {p}: {parent} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PathError(f"cannot create {p}: {parent} is not writable")

    def _connect_readonly(self) -> sqlite3.Connection:
        p = self.path
        if p.is_dir():
            raise PathError(f"cannot read {p} as a results database: it is a directory")
        if not p.exists():
            db = sqlite3.connect(":memory:", isolation_level=None)    # no history yet: an empty one
            db.executescript(SCHEMA)
            return db
        self._check_path(create_parent=False)          # an SQLite file, readable
        base = "file:" + urllib.parse.quote(str(p.resolve())) + "?mode=ro"
        last: Optional[sqlite3.Error] = None
        for uri in (base, base + "&immutable=1"):
            try:
                db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            except sqlite3.Error as e:
                last = e
                continue
            try:
                db.execute("BEGIN")
                try:
                    version, tables = self._read_header(db)
                finally:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
            except sqlite3.OperationalError as e:
                db.close()
                last = e
                continue                                # no -shm to be had: immutable
            except sqlite3.Error as e:
                db.close()
                raise self._error(e) from None
            try:
                self._verify(version, tables)
                # read through temp tables built when first needed: _ready
                self._old = version if version < _METRICS_CURRENT else 0
                if version == 1:           # list() and latest_metrics() read it as it is, with a node column
                    db.execute("CREATE TEMP VIEW metrics AS SELECT *, '' AS node FROM main.metrics")
                if version < 4:            # no study was stored in it: empty tables, in temp
                    studies_for_reader(db)
                if version < 5:            # no look at its changes was recorded in it: empty tables, in temp
                    changes_for_reader(db)
                if version < 6:            # no probe window either
                    store_probe.for_reader(db)
                if version < 7:            # nor a monitor's sample
                    store_monitor.for_reader(db)
            except BaseException:
                db.close()
                raise
            return db
        assert last is not None
        raise self._error(last) from None

    def _open(self) -> None:
        """_open_once, again while another process holds a lock, up to the busy timeout.

        busy_timeout alone does not cover the creation race: two processes that both
        read the empty file and then both ask for the write lock (WAL switch, schema)
        would wait on each other, and SQLite answers one of them "locked" at once
        rather than let both wait forever. That one steps back and starts over."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self._open_once()
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise self._error(e) from None
            except sqlite3.Error as e:
                raise self._error(e) from None
            try:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            time.sleep(random.uniform(0.005, 0.05))

    def _open_once(self) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Reads only, before anything is written: whose file is this? One read
        # transaction, so that a creator committing in between is seen whole or not at all.
        db.execute("BEGIN")
        try:
            version, tables = self._read_header()
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")       # nothing was written; ends the snapshot
        self._verify(version, tables)
        if tables and self._check_intact:
            self._intact("no run recorded")
        # Changing the journal mode writes the header: only now that the file is known to be ours.
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA foreign_keys = ON")
        if not tables or version < STORE_VERSION:
            db.execute("BEGIN IMMEDIATE")
            try:
                # Re-read under the write lock: another process may have created or
                # upgraded it meanwhile.
                version, tables = self._read_header()
                self._verify(version, tables)
                if not tables:
                    for stmt in statements(SCHEMA):
                        db.execute(stmt)
                    db.execute(f"PRAGMA user_version = {STORE_VERSION}")
                elif version < STORE_VERSION:
                    self._upgrade(version)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        if self._check_intact:
            # SQLite opens a file it may not write read-only without a word, and a save
            # after the measurements would fail: a write that changes nothing, now
            # (BEGIN IMMEDIATE alone succeeds on such a connection).
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM runs WHERE 0")
            finally:
                db.execute("ROLLBACK")

    def _upgrade(self, version: int) -> None:
        """Bring a store of ``version`` up to STORE_VERSION (inside the caller's write transaction)."""
        # The first write to an old file: make sure it is whole before changing it.
        self._intact(f"not upgraded from store version {version}")
        upgrade(self._db, version, str(self.path))

    def _intact(self, what: str) -> None:
        """Refuse a damaged file before writing to it. quick_check reads every page once,
        linear in the file: 60-90 ms for a history of 1,000 two-socket runs (173 MB, warm
        page cache) on the 2-vCPU VM this was written on, against 1 ms to open without it."""
        problems = [r[0] for r in self._db.execute("PRAGMA quick_check(1)")]
        if problems != ["ok"]:
            first = " ".join(" ".join(problems).split())       # one line: the CLI prints it as is
            raise StoreError(f"{self.path} is damaged ({first}): {what}, not touched")

    def _read_header(self, db: Optional[sqlite3.Connection] = None) -> Tuple[int, set]:
        db = db or self._db
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return version, tables

    def _verify(self, version: int, tables: set) -> None:
        if not tables and version == 0:
            return                                   # new, empty database
        if "runs" not in tables or "metrics" not in tables or version == 0:
            found = ", ".join(sorted(tables)) or "no tables"
            raise StoreError(f"{self.path} is not a ceiling database (it holds {found}, "
                             f"user_version {version}): not touched")
        if version > STORE_VERSION:
            raise StoreError(f"{self.path} was written by a newer ceiling "
                             f"(store version {version} > {STORE_VERSION}); upgrade ceiling")

    def _error(self, e: sqlite3.Error) -> Exception:
        msg = str(e)
        if isinstance(e, sqlite3.OperationalError) and (
                "unable to open" in msg or "readonly" in msg or "read-only" in msg):
            return PathError(f"cannot {'read' if self.readonly else 'write'} {self.path}: {msg}")
        if isinstance(e, sqlite3.OperationalError) and "locked" in msg:
            return StoreError(f"{self.path} is locked by another process for more than "
                              f"{BUSY_TIMEOUT_MS // 1000} s: {msg}")
        if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
            return StoreError(f"{self.path} is not a ceiling database ({msg}): not touched")
        return StoreError(f"{self.path}: {msg}")

    # -- public ------------------------------------------------------------------

    def limit_cache(self, kib: int) -> None:
        """Cap SQLite's page cache of this connection at ``kib`` KiB (its default is 2 MiB): a daemon
        that only appends (monitor) needs the table's and indexes' last pages, and its resident
        memory then stops growing within minutes instead of over hours."""
        self._db.execute(f"PRAGMA cache_size = -{int(kib)}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def save(self, run: Run) -> str:
        """Store ``run`` (replacing an earlier save of the same run_id) and return its run_id.

        A run without a run_id gets a new uuid4 hex one, set on ``run`` itself.
        """
        if self.readonly:
            raise PathError(f"{self.path} was opened for reading only: run not saved")
        if not run.run_id:
            run.run_id = uuid.uuid4().hex
        doc = jsonio.dumps(run)
        self._in_transaction("BEGIN IMMEDIATE", lambda db: save_run(db, run, doc))
        return run.run_id

    def save_study(self, study: Study) -> str:
        """Store ``study`` (replacing an earlier save of the same study_id) and return its study_id:
        each member held whole saved as a run (``save``), then the study with its members by run_id,
        in one transaction. A member stored apart (no run, its run_id) is referenced as it is."""
        if self.readonly:
            raise PathError(f"{self.path} was opened for reading only: study not saved")
        if not study.study_id:
            study.study_id = uuid.uuid4().hex
        runs = []
        for i, m in enumerate(study.members):
            if m.run is None and not m.run_id:
                raise ValueError(f"member {i} of study {study.study_id} has neither a run nor a run id")
            if m.run is not None:
                m.run.run_id = m.run.run_id or m.run_id or uuid.uuid4().hex
                m.run_id = m.run.run_id
                runs.append((m.run, jsonio.dumps(m.run)))
        doc = jsonio.dumps_study(replace(study, members=[Member(m.value, m.run_id, None) for m in study.members]))

        def save(db: sqlite3.Connection) -> None:
            for run, text in runs:
                save_run(db, run, text)
            studies.save(db, study, doc)
        self._in_transaction("BEGIN IMMEDIATE", save)
        return study.study_id

    def save_probe(self, rows: Sequence[Sequence], retain_before: Optional[float] = None,
                   downsample_before: Optional[float] = None) -> int:
        """Store probe windows (store_probe.COLUMNS each), drop those that ended before ``retain_before``
        and merge the rows' probe's windows that ended before ``downsample_before`` into hourly ones
        (store_probe.downsample), in one transaction; how many were dropped."""
        if self.readonly:
            raise PathError(f"{self.path} was opened for reading only: probe windows not saved")
        gone = [0]

        def work(db: sqlite3.Connection) -> None:
            store_probe.save(db, rows)
            if retain_before is not None:
                gone[0] = store_probe.prune(db, retain_before)
            if downsample_before is not None:
                for host, directory in sorted({(r[0], r[1]) for r in rows}):
                    store_probe.downsample(db, host, directory, downsample_before)
        self._in_transaction("BEGIN IMMEDIATE", work)
        return gone[0]

    def probe_baseline(self, host: str, directory: str, since: float) -> Dict[str, Tuple[float, int]]:
        """Per operation: (median of this probe's window medians since ``since``, windows)."""
        try:
            return store_probe.baseline(self._db, host, directory, since)
        except sqlite3.Error as e:
            raise self._error(e) from None

    def probe_windows(self, host: Optional[str] = None) -> List[tuple]:
        try:
            return store_probe.windows(self._db, host)
        except sqlite3.Error as e:
            raise self._error(e) from None

    def save_monitor(self, host: str, samples: Sequence[Sequence], jobs: Sequence[Sequence],
                     retain_before: Optional[float] = None, downsample_before: Optional[float] = None) -> None:
        """Store the monitor's samples and jobs (store_monitor.SAMPLE_COLUMNS, JOB_COLUMNS), drop what is
        older than ``retain_before`` and make this host's samples older than ``downsample_before`` one mean
        per minute, in one transaction."""
        if self.readonly:
            raise PathError(f"{self.path} was opened for reading only: monitor samples not saved")

        def work(db: sqlite3.Connection) -> None:
            store_monitor.save(db, samples, jobs)
            if retain_before is not None:
                store_monitor.prune(db, retain_before)
            if downsample_before is not None:
                store_monitor.downsample(db, host, downsample_before)
        self._in_transaction("BEGIN IMMEDIATE", work)

    def monitor_samples(self, host: Optional[str] = None, job: Optional[str] = None,
                        since: Optional[float] = None, until: Optional[float] = None) -> List[tuple]:
        try:
            return store_monitor.samples(self._db, host, job, since, until)
        except sqlite3.Error as e:
            raise self._error(e) from None

    def monitor_jobs(self, host: Optional[str] = None) -> List[tuple]:
        try:
            return store_monitor.jobs(self._db, host)
        except sqlite3.Error as e:
            raise self._error(e) from None

    def _in_transaction(self, begin: str, work) -> None:
        """``work(db)`` inside one transaction: committed whole, or rolled back on any
        exception (Ctrl-C included); SQLite's errors become the store's one-line errors."""
        db = self._db
        try:
            db.execute(begin)
            try:
                work(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise self._error(e) from None

    def resolve(self, run_id: str) -> str:
        """The full run_id for ``run_id`` or a unique prefix of at least 6 characters.

        Raises UsageError when nothing or more than one run matches.
        """
        ids = self._matches("runs", "run_id", run_id)
        if not ids:
            raise UsageError(f"no run {run_id!r} in {self.path}" + self._short(run_id))
        if len(ids) > 1:
            raise UsageError(f"run id prefix {run_id!r} is ambiguous in {self.path}; give more characters")
        return ids[0]

    def find(self, some_id: str) -> Tuple[str, str]:
        """("run" or "study", its full id) for a run id or a study id, or a unique prefix of either
        (``ceiling show``). UsageError when nothing or more than one matches."""
        found = [("run", i) for i in self._matches("runs", "run_id", some_id)]
        found += [("study", i) for i in self._matches("studies", "study_id", some_id)]
        if not found:
            raise UsageError(f"no run or study {some_id!r} in {self.path}" + self._short(some_id))
        if len(found) > 1:
            raise UsageError(f"id prefix {some_id!r} is ambiguous in {self.path} (it begins "
                             f"{' and '.join(sorted({w for w, _ in found}))} ids); give more characters")
        return found[0]

    def _short(self, some_id: str) -> str:
        return f" (a prefix needs at least {MIN_PREFIX} characters)" if len(some_id) < MIN_PREFIX else ""

    def _matches(self, table: str, column: str, some_id: str) -> List[str]:
        """The ids of ``table`` equal to ``some_id``, else (for 6+ characters) beginning with it; two at most."""
        try:
            if self._db.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (some_id,)).fetchone():
                return [some_id]
            if len(some_id) < MIN_PREFIX:
                return []
            # GLOB, not LIKE: '_' and '%' are common in ids a user might type; escape GLOB's own.
            pattern = "".join(f"[{c}]" if c in "*?[]" else c for c in some_id) + "*"
            return [r[0] for r in self._db.execute(
                f"SELECT {column} FROM {table} WHERE {column} GLOB ? LIMIT 2", (pattern,))]
        except sqlite3.Error as e:
            raise self._error(e) from None

    def get(self, run_id: str) -> Run:
        """The stored run with this id (or unique prefix of at least 6 characters)."""
        full = self.resolve(run_id)
        try:
            doc = self._db.execute("SELECT doc FROM runs WHERE run_id = ?", (full,)).fetchone()[0]
        except sqlite3.Error as e:
            raise self._error(e) from None
        return jsonio.loads(doc, source=f"run {full} in {self.path}")

    def get_study(self, study_id: str) -> Study:
        """The stored study with this id (or unique prefix of 6+ characters), each member's run read
        back from the history (a member no longer there keeps its run_id, without a run)."""
        ids = self._matches("studies", "study_id", study_id)
        if len(ids) != 1:
            raise UsageError(f"no study {study_id!r} in {self.path}" + self._short(study_id) if not ids else
                             f"study id prefix {study_id!r} is ambiguous in {self.path}; give more characters")
        try:
            doc = self._db.execute("SELECT doc FROM studies WHERE study_id = ?", (ids[0],)).fetchone()[0]
        except sqlite3.Error as e:
            raise self._error(e) from None
        study = jsonio.loads_study(doc, source=f"study {ids[0]} in {self.path}")
        for m in study.members:
            if m.run is None and m.run_id and self._matches("runs", "run_id", m.run_id) == [m.run_id]:
                m.run = self.get(m.run_id)
        return study

    def list_studies(self, host: Optional[str] = None, limit: int = 20) -> List[StudySummary]:
        """The newest ``limit`` studies (started on ``host`` when given), newest first."""
        try:
            return studies.summaries(self._db, host, limit)
        except sqlite3.Error as e:
            raise self._error(e) from None

    def list(self, host: Optional[str] = None, limit: int = 20) -> List[RunSummary]:
        """The newest ``limit`` runs (of ``host`` when given), newest first."""
        where, args = ("WHERE host = ?", [host]) if host is not None else ("", [])
        try:
            runs = self._db.execute(
                f"SELECT run_id, host, started, finished, tool_version, partial, "
                f"(SELECT count(*) FROM metrics m WHERE m.run_id = r.run_id), {_COMMAND}, {_NODES}, {studies.OF_RUN} "
                f"FROM runs r {where} ORDER BY started DESC, run_id LIMIT ?", args + [int(limit)]).fetchall()
            heads: Dict[str, Dict[str, Tuple[Optional[float], str]]] = {r[0]: {} for r in runs}
            if runs:
                # A run of several nodes has one row per node: the host's figure heads the line.
                q = (f"SELECT m.run_id, m.name, m.value, m.unit FROM metrics m JOIN runs r "
                     f"ON r.run_id = m.run_id WHERE "
                     f"m.run_id IN ({','.join('?' * len(runs))}) AND m.name IN ({','.join('?' * len(HEADLINE))}) "
                     f"ORDER BY m.node NOT IN ('', r.host), m.node")
                for rid, name, value, unit in self._db.execute(q, [r[0] for r in runs] + list(HEADLINE)):
                    heads[rid].setdefault(name, (value, unit))
        except sqlite3.Error as e:
            raise self._error(e) from None
        return [RunSummary(rid, h, s, f, v, bool(p), n,
                           {k: heads[rid][k] for k in HEADLINE if k in heads[rid]}, _command(c), int(k or 0),
                           study or "")
                for rid, h, s, f, v, p, n, c, k, study in runs]

    # -- one metric over time: ranges of the index metrics_series (name, host, context, started) --
    def _ready(self) -> None:
        """A read-only file of an older store version: build the current tables, once, in this
        connection's temp schema (store_schema.read_old), in one read transaction."""
        if not self._old:
            return
        self._in_transaction("BEGIN", lambda db: read_old(db, self._old, str(self.path)))
        self._old = 0

    def _query(self, sql: str, args: Sequence, current: bool = True) -> List[tuple]:
        """Rows of ``sql``; ``current``: it reads the current tables (an older file's are built first)."""
        if current:
            self._ready()
        try:
            return [tuple(r) for r in self._db.execute(sql, list(args))]
        except sqlite3.Error as e:
            raise self._error(e) from None

    def rows(self, sql: str, args: Sequence = ()) -> List[tuple]:
        """Rows of a query of the current tables (store_changes.py's), read-only files included."""
        return self._query(sql, args)

    def write(self, work) -> None:
        """``work(connection)`` in one write transaction (store_changes.py); refused when read-only."""
        if self.readonly:
            raise PathError(f"{self.path} was opened for reading only: nothing written")
        self._in_transaction("BEGIN IMMEDIATE", work)

    def series(self, name: str, host: Optional[str] = None, context: Optional[str] = None,
               contexts: Optional[Sequence[str]] = None) -> List[Point]:
        """Every stored value of metric ``name``, oldest first, with its repetitions and their summary:
        on ``host`` (the node it was measured on) when given, with the context key ``context``
        (history_keys.context_key) or any of ``contexts`` when given."""
        return [Point.of(r) for r in self._query(*series_sql(name, host, context, contexts))]

    def run_points(self, run_id: str) -> List[Tuple[str, Point]]:
        """(metric name, its Point) of every figure of the run ``run_id`` (a full id: ``resolve``), in order."""
        return [(r[0], Point.of(r[1:])) for r in self._query(*run_sql(run_id))]

    def runs_points(self, run_ids: Sequence[str]) -> Dict[str, List[Tuple[str, Point]]]:
        """``run_points`` of several runs (full ids) at once, CHUNK ids a query: run id -> its figures."""
        out: Dict[str, List[Tuple[str, Point]]] = {rid: [] for rid in run_ids}
        for i in range(0, len(run_ids), CHUNK):
            for r in self._query(*runs_sql(run_ids[i:i + CHUNK])):
                out[r[0]].append((r[1], Point.of(r[2:])))
        return out

    def inventories(self, hashes: Sequence[str]) -> Dict[str, Optional[Dict[str, Any]]]:
        """``inventory`` of several hashes at once: hash -> the inventory, None where there is none."""
        out: Dict[str, Optional[Dict[str, Any]]] = {h: None for h in hashes}
        for i in range(0, len(hashes), CHUNK):
            for h, text in self._query(*inventories_sql(hashes[i:i + CHUNK])):
                try:
                    out[h] = json.loads(text)
                except ValueError:
                    pass
        return out

    def earlier(self, name: str, host: str, context: str, before: str, limit: int) -> List[Point]:
        """The newest ``limit`` values of ``name`` on ``host`` with ``context`` started before ``before``."""
        return [Point.of(r) for r in self._query(*earlier_sql(name, host, context, before, limit))]

    def window(self, host: str, after: Optional[str] = None, before: Optional[str] = None,
               run_id: Optional[str] = None) -> List[Tuple[str, str, str]]:
        """(run_id, host, started) of the runs of ``host`` between ``after`` and ``before``, or of ``run_id``."""
        return self._query(*window_sql(host, after, before, run_id), current=False)

    def competing(self, run_ids: Sequence[str]) -> List[Tuple[str, str, str]]:
        """(run_id, status, title) of each competing-load warning or failure of these runs (they were disturbed)."""
        run_ids = list(run_ids)
        return [r for i in range(0, len(run_ids), CHUNK)
                for r in self._query(*competing_sql(run_ids[i:i + CHUNK]), current=False)]

    def contexts(self, name: str, host: Optional[str] = None) -> List[Tuple[str, int]]:
        """The context keys metric ``name`` was stored with (on ``host`` when given), each with its count."""
        return self._query(*contexts_sql(name, host))

    def inventory(self, inventory_hash: str) -> Optional[Dict[str, Any]]:
        """The inventory stored under this hash (history_keys.inventory), None when there is none."""
        rows = self._query("SELECT inventory FROM inventories WHERE hash = ?", [inventory_hash])
        try:
            return json.loads(rows[0][0]) if rows else None
        except ValueError:
            return None

    def metrics_history(self, name: str, host: Optional[str] = None
                        ) -> List[Tuple[str, str, Optional[float], str, str]]:
        """Every stored value of metric ``name``: (started, host, value, unit, run_id), oldest first.

        ``host`` is the node the value was measured on: the run's host, or for a
        run of several nodes the metric's node (one row per node).
        """
        return [(p.started, p.host, p.value, p.unit, p.run_id) for p in self.series(name, host)]

    def latest_metrics(self, prefix: str, host: str) -> List[Tuple[str, Optional[float], str, str, str]]:
        """The newest stored value of every metric whose name starts with ``prefix``, measured
        on ``host``: (name, value, unit, started, run_id), by name. What a profile compares the
        program's rates with (this node's measured ceilings)."""
        out: Dict[str, Tuple[str, Optional[float], str, str, str]] = {}
        # an older file read as it is (no host, no started in metrics): a join, still by the name index
        old = bool(self._old)
        for row in self._query(*(latest_old_sql if old else latest_sql)(prefix, host), current=not old):
            out.setdefault(row[0], row)
        return list(out.values())
