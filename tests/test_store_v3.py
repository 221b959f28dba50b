"""Store version 3 (issue 27 item 4): every metric with its repetitions, their summary, its context
key and its node's inventory hash; a history written by today's ceiling (version 2) upgraded once,
atomically, and every verb that reads the history working on it; queries of one metric over time
that are ranges of an index, never a scan (their query plans are read).

The version 2 history is tests/fixtures/history/store_v2.db, written by the store of commit f8461f5
(its README says what it holds); each test opens a copy."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import statistics
from pathlib import Path

import pytest

from ceiling import cli
from ceiling.errors import StoreError, UsageError
from ceiling.results import history_keys as keys
from ceiling.results import jsonio, store_schema
from ceiling.results.store import STORE_VERSION, Store
from ceiling.results.store_queries import contexts_sql, latest_sql, series_sql

import sample_runs

FIXTURE = Path(__file__).parent / "fixtures" / "history" / "store_v2.db"
GOLDEN = Path(__file__).parent / "golden"
ONE, TWO = "d79c15a4469b411bbf41d935d8e04ea0", "cd6403212cd54bce902e655c8def906c"    # bench memory, 1 and 2 threads
PROFILE = "c73889b4a84141cd9453915efd8de38e"
RUNS = (ONE, TWO, PROFILE, "6f1c2e9a4b8d4f0e9a7c3d5b1e2f4a6c", "9b3e7d1c2a4f4e6b8d0c1e3f5a7b9c2d",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "v1partial00000000000000000000000", "v2partial00000000000000000000000")


def _copy(tmp_path: Path) -> Path:
    p = tmp_path / "history.db"
    shutil.copyfile(FIXTURE, p)
    return p


def _raw(p: Path):
    """What the file holds, read with plain sqlite3: version, runs (id, doc), metrics rows as stored."""
    db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        runs = sorted(db.execute("SELECT run_id, host, started, finished, tool_version, partial, doc FROM runs"))
        metrics = sorted(db.execute("SELECT run_id, name, value, unit, better, efficiency, node FROM metrics"),
                         key=repr)
        columns = [r[1] for r in db.execute("PRAGMA table_info(metrics)")]
    finally:
        db.close()
    return version, runs, metrics, columns


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# -- the keys ------------------------------------------------------------------------------

def test_the_context_key_is_canonical_and_keeps_only_how_a_figure_was_measured():
    a = {"threads": 2, "placement": "compact", "isa": "avx512", "array_bytes": 149946368.0, "cpus": [0, 1],
         "reps": 5, "hugepages": True, "disturbed": "other processes used 1.7 CPUs"}
    b = {"isa": "avx512", "array_bytes": 149946368, "threads": 2, "placement": "compact", "cpus": [2, 3],
         "reps": 10, "hugepages": False}
    assert keys.context_key(a) == keys.context_key(b) == \
        '{"array_bytes":149946368,"isa":"avx512","placement":"compact","threads":2}'
    assert keys.context_key(dict(a, threads=1)) != keys.context_key(a)
    assert keys.context_key({}) == keys.context_key({"cycles": 4.5}) == "{}"
    assert keys.context_text(keys.context_key(a)) == "threads=2 placement=compact isa=avx512 array_bytes=149946368"
    assert keys.parse_context("threads=2, placement=compact nt_stores=false") == \
        {"threads": 2, "placement": "compact", "nt_stores": False}
    assert keys.matches(keys.context_key(a), {"threads": 2}) and not keys.matches(keys.context_key(a), {"threads": 1})
    for bad in ("threads", "=2", "colour=red", ""):
        with pytest.raises(UsageError):
            keys.parse_context(bad)


def test_the_inventory_hash_follows_the_configuration_not_the_job():
    machine = sample_runs.vm_run().machine
    h = keys.inventory_hash(keys.inventory(machine))
    assert len(h) == keys.HASH_DIGITS and int(h, 16) >= 0
    same = json.loads(json.dumps(machine))
    same["affinity"], same["cgroup"] = [1], {"cpuset": "1"}             # another allocation
    same["clocks"]["measured_all_ghz"] = 2.1                             # another measurement
    same["mem_total_bytes"] += 5 << 20                                   # firmware's few MiB
    same["isa"] = list(reversed(same["isa"]))
    assert keys.inventory_hash(keys.inventory(same)) == h
    for change in ({"mem_total_bytes": machine["mem_total_bytes"] // 2}, {"threads": 1}, {"stepping": 99},
                   {"isa": machine["isa"][:-1]}, {"system": {"bios_version": "2.0"}}):
        assert keys.inventory_hash(keys.inventory(dict(machine, **change))) != h, change
    compact = {k: machine[k] for k in ("hostname", "arch", "vendor", "model_name", "sockets", "cores")}
    assert keys.inventory(compact) is None and keys.inventory_hash(None) == ""


# -- the upgrade of a history written by today's ceiling -----------------------------------

def test_a_version_2_history_is_upgraded_with_everything_it_held(tmp_path):
    p = _copy(tmp_path)
    version, runs, metrics, _ = _raw(p)
    assert version == 2 and len(runs) == len(RUNS)
    with Store(p, check=True) as s:
        assert {r.run_id for r in s.list(limit=100)} == set(RUNS)
    version3, runs3, metrics3, columns = _raw(p)
    assert version3 == STORE_VERSION          # version 3, then 4 (the studies tables: tests/test_studies.py), 5
    assert runs3 == runs                                               # every document, byte for byte
    assert metrics3 == metrics                                         # every row it had, as it had it
    assert columns == list(store_schema.METRIC_COLUMNS)


def test_after_the_upgrade_the_1_and_2_thread_triads_are_told_apart(tmp_path):
    p = _copy(tmp_path)
    with Store(p) as s:
        docs = {rid: s.get(rid) for rid in (ONE, TWO)}
        points = s.series("stream.triad", host="vm")
        assert [pt.run_id for pt in points] == [ONE, TWO]
        for pt in points:
            m = docs[pt.run_id].metric("stream.triad")
            assert pt.n == m.stats.n == len(pt.reps) == 5 and list(pt.reps) == m.values
            assert pt.best == pt.value == m.value == max(pt.reps)
            assert pt.median == pytest.approx(statistics.median(pt.reps))
            assert pt.cv == pytest.approx(statistics.stdev(pt.reps) / statistics.fmean(pt.reps))
            assert keys.key_fields(pt.context)["threads"] == m.context["threads"]
        assert points[0].context != points[1].context
        assert points[0].inventory_hash == points[1].inventory_hash != ""    # one machine, two setups
        inv = s.inventory(points[0].inventory_hash)
        assert inv["model_name"] == docs[ONE].machine["model_name"] and inv["threads"] == 2
        one = keys.key_of({**keys.key_fields(points[0].context)})
        assert [pt.run_id for pt in s.series("stream.triad", host="vm", context=one)] == [ONE]
        assert dict(s.contexts("stream.triad", "vm")) == {points[0].context: 1, points[1].context: 1}
        # the cluster run: one row per node, each with its node's configuration
        nodes = s.series("stream.triad", context='{"threads":4}')
        assert [(pt.host, pt.value) for pt in nodes] == [("cn101", 81.5), ("cn102", 61.25)]
        assert all(pt.inventory_hash for pt in nodes)


def test_an_upgrade_stopped_part_way_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    p = _copy(tmp_path)
    before = _raw(p)
    real, calls = store_schema.write, []

    def write_then_stop(db, run, schema=""):
        calls.append(run.run_id)
        if len(calls) == 4:
            raise KeyboardInterrupt          # Ctrl-C half-way through the runs
        return real(db, run, schema)
    monkeypatch.setattr(store_schema, "write", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        Store(p)
    assert len(calls) == 4
    assert _raw(p) == before                  # version 2, the same tables, rows and documents
    monkeypatch.setattr(store_schema, "write", real)
    with Store(p) as s:                       # and the next open upgrades it whole
        assert len(s.series("stream.triad")) == 7
    assert _raw(p)[0] == STORE_VERSION


def test_a_run_whose_document_cannot_be_read_keeps_its_rows(tmp_path):
    p = _copy(tmp_path)
    db = sqlite3.connect(p)
    db.execute("UPDATE runs SET doc = '{\"schema_version\": 2, \"colour\": 1}' WHERE run_id = ?", (ONE,))
    db.commit()
    db.close()
    _, _, metrics, _ = _raw(p)
    with Store(p) as s:
        pt = s.series("stream.triad", host="vm")[0]
        assert (pt.run_id, pt.value, pt.context, pt.n, pt.reps) == (ONE, 3.023593777529006, "", None, ())
    assert _raw(p)[2] == metrics


def test_a_damaged_version_2_history_is_refused_by_every_verb_and_not_touched(tmp_path, capsys):
    p = _copy(tmp_path)
    data = bytearray(p.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)           # keep page 1 (the schema), ruin the rest
    p.write_bytes(bytes(data))
    before = _digest(p)
    with pytest.raises(StoreError, match="not upgraded from store version 2"):
        Store(p)
    for argv in (["check", "--only", "env"], ["history"], ["history", "--metric", "stream.triad"], ["show", ONE]):
        code = cli.main(argv + ["--db", str(p)])
        err = capsys.readouterr().err
        assert code == StoreError.exit_code, (argv, code, err)
        assert err.startswith("ceiling: ") and err.count("\n") == 1, err
    assert _digest(p) == before


# -- reading an older history writes nothing ------------------------------------------------

def test_a_reader_sees_a_version_2_history_as_version_3_without_writing(tmp_path):
    p = _copy(tmp_path)
    before = _digest(p)
    with Store(p, readonly=True) as s:
        latest = s.latest_metrics("stream.", "vm")       # read as the file is: a profile's question
        assert s._old == 2
        points = s.series("stream.triad", host="vm")     # the current tables, built in memory
        assert [keys.key_fields(pt.context)["threads"] for pt in points] == [1, 2]
        assert [pt.n for pt in points] == [5, 5]
        assert s.get(PROFILE).run_id == PROFILE
        plan = _plan(s, *series_sql("stream.triad", "vm", points[0].context))
        assert "metrics_series" in plan and "SCAN" not in plan
    assert _digest(p) == before and _raw(p)[0] == 2
    with Store(p) as s:                       # what the writer's upgrade gives is what the reader saw
        assert s.series("stream.triad", host="vm") == points
        assert s.latest_metrics("stream.", "vm") == latest and {r[4] for r in latest} == {TWO}


# -- the queries use the index ----------------------------------------------------------------

def _plan(s: Store, sql: str, args) -> str:
    s._ready()
    return " | ".join(r[-1] for r in s._db.execute("EXPLAIN QUERY PLAN " + sql, args))


@pytest.mark.parametrize("query", [
    series_sql("stream.triad", "vm", '{"threads":1}'),
    series_sql("stream.triad", "vm"),
    series_sql("stream.triad", None),
    series_sql("stream.triad", "vm", contexts=['{"threads":1}', '{"threads":2}']),
    contexts_sql("stream.triad", "vm"),
    latest_sql("stream.", "vm"),
], ids=["metric-host-context", "metric-host", "metric", "metric-host-contexts", "contexts", "latest"])
def test_one_metric_over_time_is_a_range_of_the_index(tmp_path, query):
    with Store(_copy(tmp_path)) as s:
        for i in range(30):                   # enough rows that a scan would be the planner's other choice
            run = sample_runs.vm_run()
            run.run_id, run.started = f"{i:032x}", f"2025-06-{1 + i % 28:02d}T00:00:00Z"
            s.save(run)
        s._db.execute("ANALYZE")
        plan = _plan(s, *query)
    assert "USING INDEX metrics_series" in plan or "USING COVERING INDEX metrics_series" in plan, plan
    assert "SCAN" not in plan, plan


# -- every verb that reads the history, on an upgraded one, with v1 and v2 documents saved into it --

def test_every_reading_verb_works_on_an_upgraded_history(tmp_path, capsys):
    p = _copy(tmp_path)
    with Store(p) as s:                       # upgraded, then v1 and v2 documents and a new run saved into it
        for name, rid in (("run_v1.json", "new1" * 8), ("run_v2.json", "new2" * 8)):
            run = jsonio.load(GOLDEN / name)
            run.run_id, run.started = rid, "2027-01-01T00:00:00Z"
            s.save(run)
        new = sample_runs.vm_run()
        new.run_id = "new3" * 8
        s.save(new)
    assert cli.main(["history", "--db", str(p)]) == 0
    listing = capsys.readouterr().out
    assert all(rid[:12] in listing for rid in RUNS + ("new1" * 8, "new2" * 8, "new3" * 8))
    assert cli.main(["history", "--db", str(p), "--json", "--limit", "100"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(RUNS) + 3
    assert cli.main(["history", "--db", str(p), "--metric", "stream.triad", "--host", "vm"]) == 0
    out = capsys.readouterr().out
    assert "threads=1" in out and "threads=2" in out and ONE in out and TWO in out
    assert cli.main(["history", "--db", str(p), "--metric", "stream.triad", "--context", "threads=1",
                     "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in rows] == [ONE] and rows[0]["n"] == 5 and len(rows[0]["reps"]) == 5
    assert cli.main(["history", "--db", str(p), "--metric", "stream.triad", "--context", "threads=4"]) == 0
    out = capsys.readouterr().out
    assert "cn101" in out and "new2new2" in out and "threads=4" in out.splitlines()[0]
    for rid in RUNS + ("new1" * 8, "new2" * 8, "new3" * 8):
        assert cli.main(["show", rid, "--db", str(p), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["run_id"] == rid
        html = tmp_path / f"{rid}.html"
        assert cli.main(["show", rid[:10], "--db", str(p), "--out", str(html)]) == 0, capsys.readouterr().err
        assert rid[:10] in capsys.readouterr().out or html.stat().st_size > 0
    with Store(p, readonly=True) as s:        # what `profile` compares a program's rates with
        latest = {name: rid for name, _, _, _, rid in s.latest_metrics("stream.", "vm")}
    assert latest == {"stream.copy": TWO, "stream.scale": TWO, "stream.add": TWO, "stream.triad": TWO}


def test_context_needs_a_metric_and_known_fields(tmp_path, capsys):
    p = _copy(tmp_path)
    assert cli.main(["history", "--db", str(p), "--context", "threads=1"]) == UsageError.exit_code
    assert cli.main(["history", "--db", str(p), "--metric", "stream.triad", "--context", "colour=red"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "not a context field" in err
    assert os.path.getsize(p) == FIXTURE.stat().st_size
