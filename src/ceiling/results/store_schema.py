"""The history's tables, their versions, and the rows a run becomes; results/store.py opens,
upgrades and queries the file with them.

Store versions (``PRAGMA user_version``):
  1 - runs and metrics tables.
  2 - metrics.node: the node a metric was measured on ('' = the run's host).
  3 - what a comparison needs. Each metrics row also holds its repetitions (``reps``, a JSON array
      in the metric's unit) and their summary (``n``, ``best``, ``median``, ``mean``, ``min``,
      ``max``, ``stdev``, ``cv``: the Metric's Stats, NULL where it has none), whether the kernel's
      output was valid, its context key (history_keys.py), the node it was measured on resolved
      (``host``: the metric's node, else the run's host) and its run's start (``started``), so that
      "this metric on this host over time, with this context" is one range of the index
      ``metrics_series (name, host, context, started)``, which replaces ``metrics_name``. The
      inventory hash of the node a row was measured on (``metrics.inventory_hash``) and of the
      run's host (``runs.inventory_hash``); each inventory once, as canonical JSON
      (``inventories``), so that two configurations can be told apart field by field.
  4 - studies (model.Study): one ``studies`` row per study, its document with each member by
      run_id only, and one ``study_members`` row per member (its position, run_id and value of
      the varying parameter); each member is stored as a normal run, in ``runs`` and ``metrics``.
      The upgrade from 3 adds the two empty tables and touches nothing else.
  5 - what ``history --changes`` keeps (store_changes.py): acknowledged changes (``change_acks``),
      each series' change points as last computed (``change_series``) and each look at them
      (``change_looks``), so that ``--since`` examines only the runs added since. New tables only:
      the upgrade from 4 creates them and an index of the runs by start (``runs_started``: the runs
      added since a look), nothing else is touched.
  6 - the probe's windows (``probe_windows``, store_probe.py: one row per operation and window of
      ``ceiling probe``). The upgrade from 5 adds the empty table and its index, nothing else.
  7 - the monitor's time series (``monitor_samples``, ``monitor_jobs``, store_monitor.py: one row per
      figure and sample of ``ceiling monitor``, one per job seen). The upgrade from 6 adds the empty
      tables and their index, nothing else.

The upgrade from 2 to 3 reads every stored document (through jsonio: a document of any version)
and writes its rows again as ``save`` writes a new run's. A run whose document cannot be read keeps
its rows as they were, with ``host`` and ``started`` filled and context "" (not known). Upgrades
run inside the caller's write transaction, after an integrity check (store.py): an error, a full
disk or a Ctrl-C part way leaves the file at its old version, unchanged.

A reader of an older file writes nothing: it sees the current tables through temporary ones built
from the file (``read_old``; the studies tables of a file before version 4 empty ones,
``studies_for_reader``), in the connection's own temp schema, searched before the file's.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple, Union

from ..errors import StoreError
from . import history_keys as keys
from . import jsonio
from .base import plain
from . import store_monitor, store_probe
from .model import Run

STORE_VERSION = 7

_RUNS = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    started      TEXT NOT NULL,   -- ISO 8601 UTC, sorts as text
    finished     TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    partial      INTEGER NOT NULL,
    doc          TEXT NOT NULL,   -- the whole Run as JSON (results/jsonio.py)
    inventory_hash TEXT NOT NULL DEFAULT ''   -- the host's inventory (inventories.hash), '' = none recorded
)"""

_INVENTORIES = """
CREATE TABLE IF NOT EXISTS {schema}inventories (
    hash      TEXT PRIMARY KEY,   -- history_keys.inventory_hash
    inventory TEXT NOT NULL       -- its canonical JSON
)"""

# The columns of metrics: ALTER TABLE ... ADD COLUMN appends, so new columns come last.
_METRICS = """
CREATE TABLE IF NOT EXISTS {schema}metrics (
    run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      REAL,              -- NULL: not measured
    unit       TEXT NOT NULL,
    better     TEXT NOT NULL,
    efficiency REAL,              -- NULL: peak unknown
    node       TEXT NOT NULL DEFAULT ''   -- Metric.node: '' = the run's host
    {v3}
)"""
_METRICS_V3 = (
    ("host", "TEXT NOT NULL DEFAULT ''"),          # the node measured on: node, else the run's host
    ("started", "TEXT NOT NULL DEFAULT ''"),       # the run's start, here so that one index covers time
    ("context", "TEXT NOT NULL DEFAULT ''"),       # history_keys.context_key; '' = not known
    ("inventory_hash", "TEXT NOT NULL DEFAULT ''"),  # of the node measured on; '' = not recorded
    ("valid", "INTEGER"),                          # Metric.valid (1/0); NULL = not known
    ("n", "INTEGER"),                              # Stats.n: repetitions; NULL = no stats
    ("best", "REAL"), ("median", "REAL"), ("mean", "REAL"), ("min", "REAL"), ("max", "REAL"),
    ("stdev", "REAL"), ("cv", "REAL"),             # Stats, in the metric's unit (cv a fraction)
    ("reps", "TEXT NOT NULL DEFAULT '[]'"),        # Metric.values: every repetition, JSON, in unit
)
METRIC_COLUMNS: Tuple[str, ...] = ("run_id", "name", "value", "unit", "better", "efficiency", "node",
                                   *(c for c, _ in _METRICS_V3))

_STUDIES = """
CREATE TABLE IF NOT EXISTS {schema}studies (
    study_id     TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,   -- Study.kind: scaling, series, comparison, repetition
    parameter    TEXT NOT NULL,   -- what varies
    host         TEXT NOT NULL,
    started      TEXT NOT NULL,   -- ISO 8601 UTC, sorts as text
    finished     TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    partial      INTEGER NOT NULL,
    doc          TEXT NOT NULL    -- the Study as JSON (jsonio.dumps_study), each member by run_id only
);
CREATE TABLE IF NOT EXISTS {schema}study_members (
    study_id TEXT NOT NULL REFERENCES studies(study_id) ON DELETE CASCADE,
    position INTEGER NOT NULL,    -- 0, 1, ... in the order the members were made
    run_id   TEXT NOT NULL,       -- runs.run_id (no foreign key: a study outlives a member removed)
    value    TEXT NOT NULL,       -- Member.value as JSON
    PRIMARY KEY (study_id, position)
);
CREATE INDEX IF NOT EXISTS {schema}studies_started ON studies(started);
CREATE INDEX IF NOT EXISTS {schema}study_members_run ON study_members(run_id)"""

_INDICES = """
CREATE INDEX IF NOT EXISTS {schema}metrics_series ON metrics(name, host, context, started);
CREATE INDEX IF NOT EXISTS {schema}metrics_run ON metrics(run_id)"""

# Store version 5 (store_changes.py says what each holds).
_CHANGES = """
CREATE TABLE IF NOT EXISTS {schema}change_acks (
    run_id   TEXT NOT NULL,        -- the first run after the change (runs.run_id)
    metric   TEXT NOT NULL,        -- the metric's name
    acked    TEXT NOT NULL,        -- when, ISO 8601 UTC
    PRIMARY KEY (run_id, metric));
CREATE TABLE IF NOT EXISTS {schema}change_series (
    name      TEXT NOT NULL,
    host      TEXT NOT NULL,
    context   TEXT NOT NULL,
    through   TEXT NOT NULL,       -- the start of the newest run examined
    open_from TEXT NOT NULL,       -- the start of the first run after its last step: new runs are examined with these
    result    TEXT NOT NULL,       -- JSON: the series' changes (analysis/changes.py)
    PRIMARY KEY (name, host, context));
CREATE TABLE IF NOT EXISTS {schema}change_looks (
    look     INTEGER PRIMARY KEY,
    at       TEXT NOT NULL,        -- when, ISO 8601 UTC
    through  TEXT NOT NULL);       -- the start of the newest run it examined
CREATE INDEX IF NOT EXISTS {schema}runs_started ON runs(started)"""

SCHEMA = ";\n".join([
    _RUNS, "CREATE INDEX IF NOT EXISTS runs_host_started ON runs(host, started)",
    _INVENTORIES.format(schema=""),
    _METRICS.format(schema="", v3="".join(f",\n    {c} {t}" for c, t in _METRICS_V3)),
    _INDICES.format(schema=""),
    _STUDIES.format(schema=""),
    _CHANGES.format(schema=""),
    store_probe.TABLE.format(schema=""),
    store_monitor.TABLE.format(schema="")])


def statements(script: str) -> List[str]:
    return [s for s in script.split(";") if s.strip()]


@dataclass
class Rows:
    """What a run becomes in the history besides its document."""

    inventory_hash: str = ""                                  # the run's host's
    inventories: Dict[str, str] = field(default_factory=dict)  # hash -> canonical JSON
    metrics: List[Tuple] = field(default_factory=list)        # in METRIC_COLUMNS order


def rows_of(run: Run) -> Rows:
    """The rows of ``run``: one per metric, in the run's order, and the inventories of its nodes."""
    out = Rows()
    by_node: Dict[str, str] = {}

    def node_hash(name: str) -> str:
        if name not in by_node:
            machine = run.machine if name == run.host else next(
                (n.machine for n in run.nodes if n.name == name), None)
            inv = keys.inventory(machine)
            h = keys.inventory_hash(inv)
            if h:
                out.inventories[h] = keys.inventory_json(inv)
            by_node[name] = h
        return by_node[name]

    out.inventory_hash = node_hash(run.host)
    for m in run.metrics:
        host = m.node or run.host
        st = m.stats
        summary = ((st.n, _finite(st.best), _finite(st.median), _finite(st.mean), _finite(st.min),
                    _finite(st.max), _finite(st.stdev), _finite(st.cv)) if st is not None else (None,) * 8)
        reps = json.dumps([_finite(v) for v in m.values], separators=(",", ":"), allow_nan=False)
        out.metrics.append((run.run_id, m.name, _finite(m.value), m.unit, m.better, _finite(m.efficiency),
                            m.node, host, run.started, keys.context_key(m.context), node_hash(host),
                            int(bool(m.valid)), *summary, reps))
    return out


def _finite(x) -> Optional[float]:
    return plain(x) if x is not None else None


def write(db: sqlite3.Connection, run: Run, schema: str = "") -> Rows:
    """Insert the rows of ``run`` (its runs row already there) into ``schema``'s metrics and
    inventories; what was written."""
    r = rows_of(run)
    db.executemany(f"INSERT OR IGNORE INTO {schema}inventories (hash, inventory) VALUES (?, ?)",
                   sorted(r.inventories.items()))
    db.executemany(f"INSERT INTO {schema}metrics ({', '.join(METRIC_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(METRIC_COLUMNS))})", r.metrics)
    return r


def save_run(db: sqlite3.Connection, run: Run, doc: str) -> None:
    """Write ``run`` (its document ``doc``) and its rows, replacing an earlier save of its run_id."""
    db.execute("DELETE FROM metrics WHERE run_id = ?", (run.run_id,))
    db.execute("INSERT OR REPLACE INTO runs (run_id, host, started, finished, tool_version, "
               "partial, doc) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (run.run_id, run.host, run.started, run.finished, run.tool_version, int(run.partial), doc))
    db.execute("UPDATE runs SET inventory_hash = ? WHERE run_id = ?", (write(db, run).inventory_hash, run.run_id))


# -- upgrading a file, reading an older one --------------------------------------------------

def _documents(db: sqlite3.Connection, where: str):
    """(run_id, host, started, the Run or None when its document cannot be read), one run at a time."""
    ids = [r[0] for r in db.execute("SELECT run_id FROM main.runs ORDER BY rowid")]
    for rid in ids:
        host, started, doc = db.execute("SELECT host, started, doc FROM main.runs WHERE run_id = ?",
                                        (rid,)).fetchone()
        try:
            run: Optional[Run] = jsonio.loads(doc, source=f"run {rid} in {where}")
        except StoreError:
            run = None
        if run is not None and run.run_id != rid:       # a document of another id: its rows are this id's
            run.run_id = rid
        yield rid, host, started, run


def _to_3(db: sqlite3.Connection, where: str) -> None:
    """Store version 2 -> 3, in place (module docstring)."""
    db.execute("ALTER TABLE runs ADD COLUMN inventory_hash TEXT NOT NULL DEFAULT ''")
    db.execute(_INVENTORIES.format(schema=""))
    for col, decl in _METRICS_V3:
        db.execute(f"ALTER TABLE metrics ADD COLUMN {col} {decl}")
    db.execute("DROP INDEX IF EXISTS metrics_name")
    for rid, host, started, run in _documents(db, where):
        if run is None:
            db.execute("UPDATE metrics SET host = CASE WHEN node = '' THEN ? ELSE node END, started = ? "
                       "WHERE run_id = ?", (host, started, rid))
            continue
        db.execute("DELETE FROM metrics WHERE run_id = ?", (rid,))
        db.execute("UPDATE runs SET inventory_hash = ? WHERE run_id = ?", (write(db, run).inventory_hash, rid))
    for stmt in statements(_INDICES.format(schema="")):
        db.execute(stmt)


# store version n -> what turns an n database into an n + 1 one: SQL, or a function of the connection
# and the file's name (for messages).
Step = Union[str, Callable[[sqlite3.Connection, str], None]]
UPGRADES: Dict[int, Tuple[Step, ...]] = {
    1: ("ALTER TABLE metrics ADD COLUMN node TEXT NOT NULL DEFAULT ''",),
    2: (_to_3,),
    3: tuple(statements(_STUDIES.format(schema=""))),
    4: tuple(statements(_CHANGES.format(schema=""))),
    5: tuple(store_probe.statements()),
    6: tuple(store_monitor.statements()),
}


def upgrade(db: sqlite3.Connection, version: int, where: str) -> None:
    """Bring a file of ``version`` up to STORE_VERSION (inside the caller's write transaction)."""
    for v in range(version, STORE_VERSION):
        for step in UPGRADES[v]:
            if callable(step):
                step(db, where)
            else:
                db.execute(step)
    db.execute(f"PRAGMA user_version = {STORE_VERSION}")


def read_old(db: sqlite3.Connection, version: int, where: str) -> None:
    """Let a read-only connection to a file of an older ``version`` see the current tables, writing
    nothing to the file: temporary metrics and inventories built from its documents, and a temporary
    view of its runs with their inventory hashes."""
    node = "node" if version >= 2 else "''"
    db.execute("DROP VIEW IF EXISTS temp.metrics")           # a version 1 file's view, replaced by the table
    db.execute(_METRICS.format(schema="temp.", v3="".join(f",\n    {c} {t}" for c, t in _METRICS_V3))
               .replace(" REFERENCES runs(run_id) ON DELETE CASCADE", ""))
    db.execute(_INVENTORIES.format(schema="temp."))
    db.execute("CREATE TEMP TABLE run_inventory (run_id TEXT PRIMARY KEY, inventory_hash TEXT NOT NULL)")
    for rid, host, started, run in _documents(db, where):
        if run is None:
            db.execute(f"INSERT INTO temp.metrics (run_id, name, value, unit, better, efficiency, node, host, "
                       f"started) SELECT run_id, name, value, unit, better, efficiency, {node}, "
                       f"CASE WHEN {node} = '' THEN ? ELSE {node} END, ? FROM main.metrics WHERE run_id = ? "
                       f"ORDER BY rowid", (host, started, rid))
            continue
        db.execute("INSERT INTO temp.run_inventory VALUES (?, ?)", (rid, write(db, run, "temp.").inventory_hash))
    db.execute("CREATE TEMP VIEW runs AS SELECT r.run_id, r.host, r.started, r.finished, r.tool_version, "
               "r.partial, r.doc, coalesce(i.inventory_hash, '') AS inventory_hash FROM main.runs r "
               "LEFT JOIN temp.run_inventory i USING (run_id)")
    for stmt in statements(_INDICES.format(schema="temp.")):
        db.execute(stmt)


def changes_for_reader(db: sqlite3.Connection) -> None:
    """Let a read-only connection to a file before store version 5 see empty tables of what
    ``history --changes`` keeps (no look was recorded in it), writing nothing to the file."""
    for stmt in statements(_CHANGES.format(schema="temp.")):
        if "CREATE INDEX" not in stmt:          # an index of the file's runs cannot be made in temp
            db.execute(stmt)


def studies_for_reader(db: sqlite3.Connection) -> None:
    """Let a read-only connection to a file before store version 4 see empty studies tables (it has
    none: no study was ever stored in it), writing nothing to the file."""
    for stmt in statements(_STUDIES.format(schema="temp.")):
        db.execute(stmt.replace(" REFERENCES studies(study_id) ON DELETE CASCADE", ""))
