"""`ceiling compare A B` (issue 33): significance from the repetitions, runs without repetitions, differing
contexts and units, old histories, damaged rows, competing load, configuration, --fail-on and bad input."""
from __future__ import annotations

import copy
import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import sample_runs
from ceiling import cli
from ceiling.errors import REGRESSION_EXIT
from ceiling.results import jsonio
from ceiling.results.model import WARN, Finding, Metric, Stats
from ceiling.results.store import Store

FIXTURE_V2 = Path(__file__).resolve().parent / "fixtures" / "history" / "store_v2.db"
GOLDEN = Path(__file__).resolve().parent / "golden"


def _scaled(m: Metric, factor: float) -> None:
    m.values = [v * factor for v in m.values]
    m.value = m.value * factor if m.value is not None else None
    if m.stats is not None:
        m.stats = Stats.of(m.values, m.better)


def _run(rid: str, started: str, scale=None, reps: bool = True, findings=(), bios: str = ""):
    run = copy.deepcopy(sample_runs.vm_run())
    run.run_id, run.started = rid, started
    for m in run.metrics:
        _scaled(m, (scale or {}).get(m.name, 1.0))
        if not reps:
            m.values, m.stats = [], None
    # the sample's own competing-load finding is left out: a test adds one where it wants one
    run.findings = [f for f in run.findings if not f.id.startswith("load.competing")] + list(findings)
    if bios:
        run.machine = dict(run.machine, system=dict(run.machine.get("system") or {}, bios_version=bios))
    return run


def _db(tmp_path, *runs) -> str:
    path = tmp_path / "h.db"
    with Store(path) as s:
        for r in runs:
            s.save(r)
    return str(path)


def _json(capsys, *argv) -> dict:
    rc = cli.main(["compare", *argv, "--json"])
    assert rc in (0, REGRESSION_EXIT)
    return json.loads(capsys.readouterr().out)


def _by_name(doc: dict, name: str) -> dict:
    return next(c for c in doc["changes"] if c["metric"] == name)


COMPETING = Finding(id="load.competing", status=WARN, title="Competing load: other processes used 1.2 CPUs",
                    evidence="python3 (pid 7): 1.2 CPUs")


def test_a_planted_regression_is_significant_and_first(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"),
             _run("b" * 32, "2026-01-02T00:00:00Z", {"stream.triad": 0.7, "latency.dram": 1.3}, findings=[COMPETING]))
    doc = _json(capsys, "aaaaaa", "bbbbbb", "--db", db)
    first = doc["changes"][:2]
    assert {c["metric"] for c in first} == {"stream.triad", "latency.dram"}
    assert all(c["verdict"] == "worse" for c in first)
    tri = _by_name(doc, "stream.triad")
    assert tri["change"] == pytest.approx(-0.3, abs=1e-9)      # ratio of medians, scaled by 0.7
    lo, hi = tri["interval"]
    assert lo <= tri["change"] <= hi < 0
    assert _by_name(doc, "latency.dram")["change"] == pytest.approx(-0.3, abs=1e-9)    # lower is better
    same = [c for c in doc["changes"] if c["metric"] not in ("stream.triad", "latency.dram")]
    assert same and all(c["verdict"] == "no significant change" for c in same)
    assert doc["bootstrap"]["resamples"] == 2000
    assert doc["b"]["disturbed"] and "Competing load" in doc["b"]["disturbed"][0] and not doc["a"]["disturbed"]
    # deterministic: the same runs give the same output
    assert _json(capsys, "aaaaaa", "bbbbbb", "--db", db) == doc


def test_terminal_table_says_regressions_first_and_the_disturbed_run(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"),
             _run("b" * 32, "2026-01-02T00:00:00Z", {"stream.triad": 0.7}, findings=[COMPETING]))
    assert cli.main(["compare", "a" * 32, "b" * 32, "--db", db]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.strip().startswith(("WORSE", "better", "same", "unknown"))]
    assert rows[0].split()[:2] == ["WORSE", "stream.triad"]
    assert "B was disturbed" in out and "2000 resamples" in out


def test_fail_on_exit_codes(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"),
             _run("b" * 32, "2026-01-02T00:00:00Z", {"dgemm.node": 0.9}))
    assert cli.main(["compare", "a" * 32, "b" * 32, "--db", db, "--fail-on", "worse:5%"]) == REGRESSION_EXIT
    assert cli.main(["compare", "a" * 32, "b" * 32, "--db", db, "--fail-on", "worse:15%"]) == 0
    assert cli.main(["compare", "b" * 32, "a" * 32, "--db", db, "--fail-on", "worse:5%"]) == 0   # an improvement
    capsys.readouterr()


@pytest.mark.parametrize("argv, code, words", [
    (["aaaaaa", "bbbbbb", "--fail-on", "worse"], 2, "--fail-on"),
    (["aaaaaa", "bbbbbb", "--fail-on", "better:5%"], 2, "--fail-on"),
    (["aaaaaa", "bbbbbb", "--fail-on", "worse:0%"], 2, "--fail-on"),
    (["aaaaaa", "cccccc"], 2, "no run 'cccccc'"),
    (["aaaaaa"], 2, "give two runs"),
    (["--host", "vm", "--before", "yesterday", "--after", "2026-01-01"], 2, "not a date"),
    (["--host", "vm", "--before", "2026-01-01"], 2, "--after"),
    (["aaaaaa", "bbbbbb", "--before", "2026-01-01"], 2, "--host"),
])
def test_bad_input_is_one_line_and_a_distinct_code(tmp_path, capsys, argv, code, words):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"), _run("b" * 32, "2026-01-02T00:00:00Z"))
    assert cli.main(["compare", *argv, "--db", db]) == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_damaged_run_file_is_exit_5(tmp_path, capsys):
    good = tmp_path / "a.json"
    good.write_text(jsonio.dumps(_run("a" * 32, "2026-01-01T00:00:00Z")))
    bad = tmp_path / "b.json"
    bad.write_text('{"schema_version": 3, "metrics": [')
    assert cli.main(["compare", str(good), str(bad), "--db", str(tmp_path / "none.db")]) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert cli.main(["compare", str(good), str(tmp_path / "missing.json")]) == 4
    assert "no such file" in capsys.readouterr().err


def test_runs_without_repetitions_are_of_unknown_significance(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z", reps=False),
             _run("b" * 32, "2026-01-02T00:00:00Z", {"stream.triad": 0.7}, reps=False))
    doc = _json(capsys, "aaaaaa", "bbbbbb", "--db", db)
    assert {c["verdict"] for c in doc["changes"]} == {"significance unknown"}
    tri = _by_name(doc, "stream.triad")
    assert tri["change"] == pytest.approx(-0.3) and tri["beyond_threshold"] and tri["interval"] is None
    assert _by_name(doc, "dgemm.node")["change"] == pytest.approx(0.0)    # not said to be "no change"


def test_differing_contexts_and_units_are_listed_not_compared(tmp_path, capsys):
    a = _run("a" * 32, "2026-01-01T00:00:00Z")
    b = _run("b" * 32, "2026-01-02T00:00:00Z")
    b.metric("stream.triad").context["threads"] = 1               # measured otherwise
    b.metric("latency.l1").unit = "cycles"                         # another unit
    a.metrics = [m for m in a.metrics if m.name != "c2c.l3"]       # only in B
    doc = _json(capsys, "aaaaaa", "bbbbbb", "--db", _db(tmp_path, a, b))
    names = {c["metric"] for c in doc["changes"]}
    assert not names & {"stream.triad", "latency.l1", "c2c.l3"}
    why = {(n["metric"], n["why"]) for n in doc["not_compared"]}
    assert ("stream.triad", "contexts differ") in why and ("latency.l1", "units differ") in why
    assert ("c2c.l3", "only in B") in why
    tri = [n for n in doc["not_compared"] if n["metric"] == "stream.triad"]
    assert {"threads=2" in n["a"] for n in tri} == {True, False}    # each side's own context said


def test_configuration_differences_are_said(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z", bios="1.2.3"),
             _run("b" * 32, "2026-01-02T00:00:00Z", bios="1.4.0"))
    doc = _json(capsys, "aaaaaa", "bbbbbb", "--db", db)
    assert {"field": "system.bios_version", "a": "1.2.3", "b": "1.4.0"} in doc["configuration_differs"]
    assert cli.main(["compare", "aaaaaa", "bbbbbb", "--db", db]) == 0
    assert "system.bios_version" in capsys.readouterr().out


def test_the_history_spread_replaces_the_family_threshold(tmp_path, capsys):
    # twelve earlier runs whose copy varies by about 0.3 %: a 5 % drop is then beyond the noise,
    # where the stream family's 10 % would call it none
    earlier = [_run(f"{i:02d}" + "e" * 30, f"2025-12-{i + 1:02d}T00:00:00Z", {"stream.copy": 1 + 0.003 * (i % 3 - 1)})
               for i in range(12)]
    runs = [*earlier, _run("a" * 32, "2026-01-01T00:00:00Z"),
            _run("b" * 32, "2026-01-02T00:00:00Z", {"stream.copy": 0.95})]
    cp = _by_name(_json(capsys, "aaaaaa", "bbbbbb", "--db", _db(tmp_path, *runs)), "stream.copy")
    assert cp["threshold"]["source"] == "history" and cp["threshold"]["earlier_runs"] == 12
    assert cp["verdict"] == "worse"
    (tmp_path / "alone").mkdir()
    alone = _by_name(_json(capsys, "aaaaaa", "bbbbbb", "--db", _db(tmp_path / "alone", *runs[-2:])), "stream.copy")
    assert alone["threshold"]["source"] == "family" and alone["verdict"] == "no significant change"


def test_sets_of_runs_by_date(tmp_path, capsys):
    before = [_run(f"{i:02d}" + "a" * 30, f"2026-01-0{i + 1}T00:00:00Z") for i in range(3)]
    after = [_run(f"{i:02d}" + "b" * 30, f"2026-02-0{i + 1}T00:00:00Z", {"stream.triad": 0.8}) for i in range(3)]
    db = _db(tmp_path, *before, *after)
    doc = _json(capsys, "--host", before[0].host, "--before", "2026-01-15", "--after", "2026-01-20", "--db", db)
    assert len(doc["a"]["runs"]) == 3 and len(doc["b"]["runs"]) == 3
    tri = _by_name(doc, "stream.triad")
    assert tri["a"]["n"] == 3 and tri["verdict"] == "worse"          # the runs are the repetitions


def test_a_set_is_read_in_chunks_of_runs_as_run_by_run(tmp_path, capsys, monkeypatch):
    """Sets of runs are read a chunk of run ids a query (store.runs_points, inventories, competing): chunks of 2
    over 3 runs a side give what each run read on its own gives, its competing load and configuration included."""
    from ceiling.results import store as store_mod
    before = [_run(f"{i:02d}" + "a" * 30, f"2026-01-0{i + 1}T00:00:00Z", findings=[COMPETING] if i == 1 else [])
              for i in range(3)]
    after = [_run(f"{i:02d}" + "b" * 30, f"2026-02-0{i + 1}T00:00:00Z", {"stream.triad": 0.8}, bios="2.0")
             for i in range(3)]
    db = _db(tmp_path, *before, *after)
    argv = ("--host", before[0].host, "--before", "2026-01-15", "--after", "2026-01-20", "--db", db)
    whole = _json(capsys, *argv)
    monkeypatch.setattr(store_mod, "CHUNK", 2)
    assert _json(capsys, *argv) == whole
    assert len(whole["a"]["disturbed"]) == 1
    assert {"field": "system.bios_version", "a": "-", "b": "2.0"} in whole["configuration_differs"]
    with Store(db, readonly=True) as s:
        ids = [r.run_id for r in before + after]
        assert s.runs_points(ids) == {rid: s.run_points(rid) for rid in ids}


def test_one_verb_imports_no_other_verb():
    """`ceiling compare` builds its own options only: the other verbs' modules (and what they import) are not
    loaded, so the command starts sooner; an unknown first word still lists every verb."""
    import subprocess
    import sys
    code = ("import sys\nfrom ceiling import cli\ntry:\n    cli.main(['compare', '--help'])\n"
            "except SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.startswith('ceiling.verbs.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "ceiling.verbs.compare" in out and "ceiling.verbs.run'" not in out and "ceiling.verbs.bench" not in out
    assert cli.main(["compre"]) == 2


def test_damaged_rows_are_skipped_with_a_count(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"), _run("b" * 32, "2026-01-02T00:00:00Z"))
    con = sqlite3.connect(db)
    con.execute("UPDATE metrics SET better = 'sideways' WHERE run_id = ? AND name = 'stream.copy'", ("b" * 32,))
    con.execute("UPDATE metrics SET value = 'garbage' WHERE run_id = ? AND name = 'dgemm.node'", ("b" * 32,))
    con.commit()
    con.close()
    doc = _json(capsys, "aaaaaa", "bbbbbb", "--db", db)
    assert doc["b"]["damaged_rows_skipped"] == 2 and doc["a"]["damaged_rows_skipped"] == 0
    assert {"stream.copy", "dgemm.node"} <= {n["metric"] for n in doc["not_compared"] if n["why"] == "only in A"}
    assert cli.main(["compare", "aaaaaa", "bbbbbb", "--db", db]) == 0
    assert "B: 2 damaged rows skipped" in capsys.readouterr().out


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_an_old_history_is_compared_and_left_as_it_was(tmp_path, capsys):
    p = tmp_path / "old.db"
    shutil.copy(FIXTURE_V2, p)
    before = _digest(p)
    con = sqlite3.connect(p)
    ids = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE host = 'vm' AND doc LIKE '%bench%memory%' "
                                     "ORDER BY started")]
    con.close()
    assert len(ids) == 2                 # the --threads 1 and --threads 2 runs (fixtures README)
    doc = _json(capsys, ids[0], ids[1], "--db", str(p))
    assert any(n["metric"] == "stream.triad" and n["why"] == "contexts differ" for n in doc["not_compared"])
    assert _digest(p) == before


def test_json_files_and_nodes_of_a_cluster_run(tmp_path, capsys):
    doc = _json(capsys, str(GOLDEN / "run_v2.json") + ":cn101", str(GOLDEN / "run_v2.json") + ":cn102",
                "--db", str(tmp_path / "none.db"))
    assert {c["metric"] for c in doc["changes"]} == {"flops.dp.node", "stream.triad", "latency.dram"}
    doc2 = _json(capsys, "cn101", "cn102", "--run", str(GOLDEN / "run_v2.json"), "--db", str(tmp_path / "none.db"))
    assert doc2["changes"] == doc["changes"]
    assert cli.main(["compare", "cn101", "cn999", "--run", str(GOLDEN / "run_v2.json")]) == 2
    assert "no node 'cn999'" in capsys.readouterr().err


def _plan(s: Store, sql: str, args) -> str:
    return " | ".join(r[-1] for r in s._db.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_the_queries_are_ranges_of_indices(tmp_path):
    from ceiling.results import store_queries as q
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"))
    with Store(db, readonly=True) as s:
        for sql, args in (q.run_sql("a" * 32), q.earlier_sql("stream.triad", "vm", "{}", "2026", 50),
                          q.window_sql("vm", "2025", "2026"), q.window_sql(None, None, None, "a" * 32),
                          q.competing_sql(["a" * 32, "b" * 32]), q.runs_sql(["a" * 32, "b" * 32]),
                          q.inventories_sql(["0" * 16, "1" * 16])):
            plan = _plan(s, sql, args)
            assert "SCAN metrics" not in plan and "SCAN runs" not in plan and "SCAN r " not in plan, plan


def test_a_metric_measured_beside_competing_load_is_marked(tmp_path, capsys):
    a, b = _run("a" * 32, "2026-01-01T00:00:00Z"), _run("b" * 32, "2026-01-02T00:00:00Z", {"stream.triad": 0.7})
    b.metric("stream.triad").context["disturbed"] = "other processes used 1.2 CPUs"
    fa, fb = tmp_path / "a.json", tmp_path / "b.json"
    fa.write_text(jsonio.dumps(a))
    fb.write_text(jsonio.dumps(b))
    doc = _json(capsys, str(fa), str(fb), "--db", str(tmp_path / "none.db"))
    assert _by_name(doc, "stream.triad")["disturbed"] == ["B"] and _by_name(doc, "stream.copy")["disturbed"] == []
    assert doc["b"]["disturbed_metrics"] == {"stream.triad": "other processes used 1.2 CPUs"}
    assert cli.main(["compare", str(fa), str(fb), "--db", str(tmp_path / "none.db")]) == 0
    out = capsys.readouterr().out
    assert "stream.triad !" in out and "B: 1 metric measured beside competing load (stream.triad)" in out


def test_two_files_are_compared_when_the_default_history_cannot_be_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    (tmp_path / "data" / "ceiling").mkdir(parents=True)
    con = sqlite3.connect(tmp_path / "data" / "ceiling" / "history.db")
    con.executescript("CREATE TABLE runs (x); CREATE TABLE metrics (x); PRAGMA user_version = 99;")
    con.close()
    fa, fb = tmp_path / "a.json", tmp_path / "b.json"
    fa.write_text(jsonio.dumps(_run("a" * 32, "2026-01-01T00:00:00Z")))
    fb.write_text(jsonio.dumps(_run("b" * 32, "2026-01-02T00:00:00Z", {"stream.triad": 0.7})))
    doc = _json(capsys, str(fa), str(fb))
    assert _by_name(doc, "stream.triad")["verdict"] == "worse"
    assert doc["notes"] and "newer ceiling" in doc["notes"][0]
    # a history named with --db, or one a side is read from, must open: exit 5
    db = str(tmp_path / "data" / "ceiling" / "history.db")
    assert cli.main(["compare", str(fa), str(fb), "--db", db]) == 5
    assert cli.main(["compare", "aaaaaa", str(fb)]) == 5
    capsys.readouterr()


def test_earlier_runs_disturbed_by_competing_load_do_not_make_the_spread(tmp_path, capsys):
    earlier = [_run(f"{i:02d}" + "e" * 30, f"2025-12-{i + 1:02d}T00:00:00Z", {"stream.copy": 1 + 0.003 * (i % 3 - 1)},
                    findings=[COMPETING] if i % 2 else [])
               for i in range(12)]
    runs = [*earlier, _run("a" * 32, "2026-01-01T00:00:00Z"), _run("b" * 32, "2026-01-02T00:00:00Z")]
    cp = _by_name(_json(capsys, "aaaaaa", "bbbbbb", "--db", _db(tmp_path, *runs)), "stream.copy")
    assert cp["history_runs_read"] == 6 and cp["threshold"]["source"] == "family"


def test_an_inventory_is_flattened_once_for_compare_and_changes():
    """compare's flat_config and history --changes' configuration diff name a field the same way
    (history_keys.flat): nested fields with dots, compare's values as text."""
    from ceiling.analysis.compare import flat_config
    from ceiling.results.history_keys import flat
    inv = {"cpu_model": "X", "memory_gib": 64, "isa": ["avx2"], "system": {"bios_version": "1.2"}}
    assert flat(inv) == {"cpu_model": "X", "memory_gib": 64, "isa": ["avx2"], "system.bios_version": "1.2"}
    assert flat_config(inv) == {"cpu_model": "X", "memory_gib": "64", "isa": '["avx2"]', "system.bios_version": "1.2"}
    assert flat([1]) == {"inventory": [1]} and flat_config(None) == {}
