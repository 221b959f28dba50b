"""SQLite history: save/get/list/history, concurrent writers, and files that are not ours."""
import hashlib
import json
import multiprocessing
import os
import sqlite3
from pathlib import Path

import pytest

from ceiling.errors import PathError, StoreError, UsageError
from ceiling.results import jsonio
from ceiling.results.model import LOWER, SCHEMA_VERSION, Metric, Run
from ceiling.results.store import STORE_VERSION, Store, default_db_path

GOLDEN = Path(__file__).parent / "golden"


def golden(name="run_v1.json") -> Run:
    return jsonio.load(GOLDEN / name)


def mkrun(host="n1", started="2025-01-01T00:00:00Z", triad=100.0, run_id="") -> Run:
    return Run(tool_version="0.1.0", host=host, started=started, command=["ceiling"], run_id=run_id,
               metrics=[Metric.measured("stream.triad", [triad, triad - 1], "GB/s"),
                        Metric.measured("latency.dram", [90.0], "ns", LOWER),
                        Metric.measured("clock.all", [3.0], "GHz")])


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_default_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "ceiling" / "history.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")          # invalid per the spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "ceiling" / "history.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "ceiling" / "history.db"


def test_default_store_creates_its_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with Store() as s:
        s.save(mkrun())
    assert (tmp_path / "xdg" / "ceiling" / "history.db").is_file()


@pytest.mark.parametrize("name", ["run_v2.json", "run_v2_partial.json"])
def test_save_and_get_round_trip(tmp_path, name):
    run = golden(name)
    run.run_id = run.run_id or "abcdef012345"
    with Store(tmp_path / "h.db") as s:
        rid = s.save(run)
        assert rid == run.run_id
        back = s.get(rid)
    assert back == run
    if name == "run_v2.json":
        # written as this ceiling writes it: run_v3.json is run_v2.json upgraded
        assert jsonio.dumps(back) == (GOLDEN / "run_v3.json").read_text(encoding="utf-8")


def test_a_v1_golden_run_is_stored_as_current(tmp_path):
    run = golden("run_v1.json")
    with Store(tmp_path / "h.db") as s:
        back = s.get(s.save(run))
    assert back == run and back.schema_version == SCHEMA_VERSION


def test_save_assigns_a_run_id(tmp_path):
    run = golden("run_v1_partial.json")
    assert run.run_id == ""
    with Store(tmp_path / "h.db") as s:
        rid = s.save(run)
        assert len(rid) == 32 and int(rid, 16) >= 0 and run.run_id == rid
        assert s.get(rid).partial is True


def test_get_by_prefix(tmp_path):
    with Store(tmp_path / "h.db") as s:
        s.save(mkrun(run_id="abcdef0011"))
        s.save(mkrun(run_id="abcdef0022"))
        s.save(mkrun(run_id="a_b%c*d?e0"))
        assert s.get("abcdef001").run_id == "abcdef0011"
        assert s.get("a_b%c*").run_id == "a_b%c*d?e0"      # wildcards in ids are literal
        with pytest.raises(UsageError, match="ambiguous"):
            s.get("abcdef")
        with pytest.raises(UsageError, match="at least 6"):
            s.get("abcde")
        with pytest.raises(UsageError, match="no run"):
            s.get("ffffffff")
        with pytest.raises(UsageError, match="no run"):
            s.get("a_bXc*")


def test_saving_again_replaces(tmp_path):
    run = mkrun()
    with Store(tmp_path / "h.db") as s:
        rid = s.save(run)
        run.partial = True
        run.metrics = run.metrics[:1]
        assert s.save(run) == rid
        rows = s.list()
        assert len(rows) == 1 and rows[0].partial and rows[0].n_metrics == 1
        assert len(s.metrics_history("latency.dram")) == 0


def test_list_newest_first_with_headlines(tmp_path):
    with Store(tmp_path / "h.db") as s:
        s.save(mkrun("a", "2025-01-01T00:00:00Z", 100.0, "r1" * 4))
        s.save(mkrun("b", "2025-01-03T00:00:00Z", 120.0, "r2" * 4))
        s.save(mkrun("a", "2025-01-02T00:00:00Z", 110.0, "r3" * 4))
        s.save(golden())
        rows = s.list()
        assert [r.run_id for r in rows] == [golden().run_id, "r2" * 4, "r3" * 4, "r1" * 4]
        assert rows[1].host == "b" and rows[1].n_metrics == 3 and rows[1].partial is False
        assert rows[1].headline == {"stream.triad": (120.0, "GB/s"), "latency.dram": (90.0, "ns")}
        g = rows[0]
        assert g.n_metrics == len(golden().metrics)
        assert g.headline["stream.triad"] == (318.4, "GB/s")
        assert set(g.headline) == {"flops.dp.node", "dgemm.node", "stream.triad", "latency.dram"}
        assert [r.run_id for r in s.list(host="a")] == ["r3" * 4, "r1" * 4]
        assert len(s.list(limit=2)) == 2
        assert s.list(host="nobody") == []


def test_metrics_history(tmp_path):
    with Store(tmp_path / "h.db") as s:
        s.save(mkrun("a", "2025-01-02T00:00:00Z", 110.0, "r2" * 4))
        s.save(mkrun("a", "2025-01-01T00:00:00Z", 100.0, "r1" * 4))
        s.save(mkrun("b", "2025-01-03T00:00:00Z", 120.0, "r3" * 4))
        part = golden("run_v1_partial.json")
        s.save(part)
        assert s.metrics_history("stream.triad", host="a") == [
            ("2025-01-01T00:00:00Z", "a", 100.0, "GB/s", "r1" * 4),
            ("2025-01-02T00:00:00Z", "a", 110.0, "GB/s", "r2" * 4)]
        assert [h[2] for h in s.metrics_history("stream.triad")] == [100.0, 110.0, 120.0, 318.4]
        assert s.metrics_history("stream.copy") == [(part.started, "cn042", None, "GB/s", part.run_id)]
        assert s.metrics_history("no.such.metric") == []


def test_non_finite_values_are_null(tmp_path):
    run = mkrun()
    run.metrics[0].value = float("nan")
    run.metrics[0].efficiency = float("inf")
    with Store(tmp_path / "h.db") as s:
        s.save(run)
        assert s.metrics_history("stream.triad")[0][2] is None
        assert s.get(run.run_id).metrics[0].value is None


def test_database_format(tmp_path):
    p = tmp_path / "h.db"
    Store(p).close()
    db = sqlite3.connect(p)
    assert db.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in ("runs", "metrics", "inventories")}
    assert cols == {"runs": ["run_id", "host", "started", "finished", "tool_version", "partial", "doc",
                             "inventory_hash"],
                    "metrics": ["run_id", "name", "value", "unit", "better", "efficiency", "node", "host", "started",
                                "context", "inventory_hash", "valid", "n", "best", "median", "mean", "min", "max",
                                "stdev", "cv", "reps"],
                    "inventories": ["hash", "inventory"]}
    db.close()


def test_a_run_of_several_nodes_has_a_row_per_node(tmp_path):
    run = golden("run_v2.json")                                      # host cn101, nodes cn101 and cn102
    with Store(tmp_path / "h.db") as s:
        s.save(run)
        s.save(mkrun("cn102", "2025-01-01T00:00:00Z", 70.0, "single"))
        assert s.metrics_history("stream.triad") == [
            ("2025-01-01T00:00:00Z", "cn102", 70.0, "GB/s", "single"),
            (run.started, "cn101", 81.5, "GB/s", run.run_id),
            (run.started, "cn102", 61.25, "GB/s", run.run_id)]
        assert [h[2] for h in s.metrics_history("stream.triad", host="cn102")] == [70.0, 61.25]
        # a job-wide metric (node "") is the host's
        assert [h[1] for h in s.metrics_history("net.latency.inter_node")] == ["cn101"]
        row = next(r for r in s.list() if r.run_id == run.run_id)
        assert row.n_metrics == len(run.metrics)
        assert row.headline["stream.triad"] == (81.5, "GB/s")          # the host's, not cn102's
        assert row.headline["flops.dp.node"] == (352.5, "Gflop/s")


# -- a database written by an older ceiling --------------------------------------------

# The tables of store version 1, as ceiling 0.1 created them.
_V1_SCHEMA = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, host TEXT NOT NULL, started TEXT NOT NULL, finished TEXT NOT NULL,
                   tool_version TEXT NOT NULL, partial INTEGER NOT NULL, doc TEXT NOT NULL);
CREATE INDEX runs_host_started ON runs(host, started);
CREATE TABLE metrics (run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, name TEXT NOT NULL,
                      value REAL, unit TEXT NOT NULL, better TEXT NOT NULL, efficiency REAL);
CREATE INDEX metrics_name ON metrics(name, run_id);
CREATE INDEX metrics_run ON metrics(run_id);
"""


def _v1_store(p, names=("run_v1.json", "run_v1_partial.json")):
    """A store version 1 file holding the v1 golden documents, as ceiling 0.1 saved them."""
    db = sqlite3.connect(p)
    db.executescript(_V1_SCHEMA)
    for i, name in enumerate(names):
        text = (GOLDEN / name).read_text(encoding="utf-8")
        doc = json.loads(text)
        rid = doc["run_id"] or f"v1run{i:04d}"
        db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (rid, doc["host"], doc["started"], doc["finished"], doc["tool_version"],
                    int(doc["partial"]), text))
        db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)",
                       [(rid, m["name"], m["value"], m["unit"], m["better"], m["efficiency"])
                        for m in doc["metrics"]])
    db.execute("PRAGMA user_version = 1")
    db.commit()
    assert db.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    db.close()


def test_a_version_1_store_is_upgraded_and_its_runs_read(tmp_path):
    p = tmp_path / "h.db"
    _v1_store(p)
    with Store(p) as s:
        # v1 documents come back migrated, equal to what the file loader gives
        assert s.get(golden().run_id) == golden()
        assert s.get("v1run0001") == golden("run_v1_partial.json")
        assert s.get("v1run0001").schema_version == SCHEMA_VERSION
        assert [(h[1], h[4]) for h in s.metrics_history("stream.triad")] == [
            ("cn042", golden().run_id), ("cn042", "v1run0001")]
        assert {r.run_id for r in s.list()} == {golden().run_id, "v1run0001"}
        s.save(golden("run_v2.json"))                                   # and new runs go in beside them
        assert len(s.metrics_history("stream.triad", host="cn102")) == 1
    db = sqlite3.connect(p)
    assert db.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    Store(tmp_path / "new.db").close()
    new = sqlite3.connect(tmp_path / "new.db")
    for table in ("runs", "metrics", "inventories"):               # the same tables as a new store's
        assert list(db.execute(f"PRAGMA table_info({table})")) == list(new.execute(f"PRAGMA table_info({table})"))
    new.close()
    assert {r[0] for r in db.execute("SELECT DISTINCT node FROM metrics m JOIN runs r USING (run_id) "
                                     "WHERE r.tool_version = '0.1.0'")} == {""}
    db.close()


def test_two_processes_upgrading_one_store_both_get_in(tmp_path):
    path = tmp_path / "h.db"
    _v1_store(path)
    assert _race(str(path), 3) == [0, 0]
    with Store(path) as s:
        assert len(s.list(limit=100)) == 2 + 6


def test_a_damaged_version_1_store_is_not_upgraded(tmp_path):
    p = tmp_path / "h.db"
    _v1_store(p)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["h.db"]     # no WAL: all in the main file
    data = bytearray(p.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)          # keep page 1 (the schema), ruin the rest
    p.write_bytes(bytes(data))
    before = digest(p)
    with pytest.raises(StoreError, match="damaged|not a ceiling database|malformed") as e:
        Store(p)
    assert "\n" not in str(e.value)
    assert digest(p) == before
    db = sqlite3.connect(p)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    db.close()


def test_empty_file_becomes_a_database(tmp_path):
    p = tmp_path / "h.db"
    p.touch()
    with Store(p) as s:
        s.save(mkrun())
        assert len(s.list()) == 1


def _writer(path, tag, n, barrier):
    barrier.wait()
    with Store(path) as s:
        for i in range(n):
            s.save(mkrun(host=tag, started=f"2025-01-01T00:00:{i:02d}Z", run_id=f"{tag}{i:04d}"))


def _race(path, rows):
    """Two processes open the database at once and save `rows` runs each; their exit codes."""
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(path, tag, rows, barrier)) for tag in ("p", "q")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    return [p.exitcode for p in procs]


def test_two_processes_save_at_once(tmp_path):
    # Both also race to create the new database: neither may fail or lose a row.
    path = str(tmp_path / "h.db")
    assert _race(path, 40) == [0, 0]
    with Store(path) as s:
        rows = s.list(limit=1000)
        assert len(rows) == 80
        assert {r.host for r in rows} == {"p", "q"}
        assert len(s.metrics_history("stream.triad")) == 80


def test_two_processes_creating_one_database_both_get_in(tmp_path):
    # The creation race alone, many times: both read the empty file, then both want the
    # write lock. SQLite answers one of them "locked" at once (about one race in four here
    # before Store retried); neither may fail.
    for k in range(12):
        path = str(tmp_path / f"h{k}.db")
        assert _race(path, 1) == [0, 0], f"race {k}"
        with Store(path) as s:
            assert len(s.list()) == 2


# -- files that are not ours: refused, never written ---------------------------------

def _not_sqlite(p):
    p.write_text("host,value\nn1,3.5\n")


def _corrupt_header_only(p):
    p.write_bytes(b"SQLite format 3\x00" + os.urandom(5000))


def _foreign(p):
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE moz_places (id INTEGER, url TEXT)")
    db.execute("INSERT INTO moz_places VALUES (1, 'x')")
    db.commit()
    db.close()


def _foreign_with_runs(p):
    db = sqlite3.connect(p)           # a "runs" table, but not ours (user_version 0)
    db.execute("CREATE TABLE runs (id INTEGER)")
    db.execute("CREATE TABLE metrics (id INTEGER)")
    db.commit()
    db.close()


def _newer(p):
    Store(p).close()
    db = sqlite3.connect(p)
    db.execute(f"PRAGMA user_version = {STORE_VERSION + 1}")
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()


@pytest.mark.parametrize("make,message", [
    (_not_sqlite, r"is not a ceiling database \(not an SQLite file\): not touched"),
    (_corrupt_header_only, r"is not a ceiling database \(.+\): not touched"),
    (_foreign, r"is not a ceiling database \(it holds moz_places, user_version 0\): not touched"),
    (_foreign_with_runs, r"is not a ceiling database"),
    (_newer, rf"written by a newer ceiling \(store version {STORE_VERSION + 1} > {STORE_VERSION}\)"),
], ids=["text", "corrupt", "foreign", "foreign_runs", "newer"])
def test_refused_files_are_not_touched(tmp_path, make, message):
    p = tmp_path / "h.db"
    make(p)
    before = digest(p)
    with pytest.raises(StoreError, match=message) as e:
        Store(p)
    assert "\n" not in str(e.value)
    assert digest(p) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["h.db"]      # no -wal/-shm left either


def test_corruption_inside_our_database_is_a_store_error(tmp_path):
    p = tmp_path / "h.db"
    with Store(p) as s:
        for i in range(20):
            s.save(golden("run_v1.json") if i == 0 else mkrun(run_id=f"run{i:04d}"))
    data = bytearray(p.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)          # keep page 1 (the schema), ruin the rest
    p.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="not a ceiling database|malformed"):
        with Store(p) as s:
            s.list()
            s.get("run0001")


@pytest.mark.parametrize("where", ["dir", "missing/h.db", "file/h.db"])
def test_bad_paths_are_path_errors(tmp_path, where):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(PathError) as e:
        Store(tmp_path / where)
    assert "\n" not in str(e.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir(mode=0o500)
    with pytest.raises(PathError):
        Store(d / "h.db")


def test_list_says_which_verb_made_each_run(tmp_path):
    with Store(tmp_path / "h.db") as s:
        for rid, cmd in (("v1" * 4, ["ceiling", "bench", "memory", "--quick", "compute"]),
                         ("v2" * 4, ["ceiling", "check", "--nhc"]), ("v3" * 4, ["ceiling"])):
            r = mkrun(run_id=rid)
            r.command = cmd
            s.save(r)
        verbs = {r.run_id: r.verb for r in s.list()}
    assert verbs == {"v1" * 4: "bench memory", "v2" * 4: "check", "v3" * 4: ""}
