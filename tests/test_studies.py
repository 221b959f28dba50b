"""Studies (issue 27 item 3): several runs stored and shown as one thing, each member still a run.

The study document (results.model.Study, study_version 1) beside the run document; the history's
store version 4 (a ``studies`` row grouping member runs stored as normal runs), upgraded from a
version 3 history (tests/fixtures/history/store_v3.db, written by the version 3 store) and read,
never written, by readers of one; ``ceiling show`` and ``history`` on studies; the terminal table
and the HTML page; and the first producer, ``ceiling bench --repeat N``.

tests/golden/study_v1.json is a real ``ceiling bench memory --quick --repeat 2 --no-store --json``
of a 2-vCPU KVM guest (host vm).
"""
from __future__ import annotations

import hashlib
import json

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.errors import StoreError, StudyError, UsageError
from ceiling.report import html_study, terminal_study
from ceiling.results import jsonio
from ceiling.results.model import REPETITION, SCHEMA_VERSION, STUDY_VERSION, Member, Run, Study
from ceiling.results.store import STORE_VERSION, Store

import sample_runs

GOLDEN = Path(__file__).parent / "golden" / "study_v1.json"
V3 = Path(__file__).parent / "fixtures" / "history" / "store_v3.db"
V3_RUNS = 8            # what store_v3.db holds (tests/fixtures/history/README.md)

def ceiling(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=timeout)

def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()

def _copy(tmp_path: Path, name: str = "history.db") -> Path:
    p = tmp_path / name
    shutil.copyfile(V3, p)
    return p

def _study(n: int = 3, host: str = "vm") -> Study:
    """A repetition study of ``n`` sample runs, each with its own triad figure."""
    members = []
    for i in range(1, n + 1):
        run = sample_runs.vm_run()
        run.run_id = str(i) * 32
        run.started = f"2026-01-0{i}T00:00:00+00:00"
        run.metric("stream.triad").value = 10.0 + i
        members.append(Member(i, run.run_id, run))
    return Study(kind=REPETITION, parameter="repetition", tool_version="0.1.0", host=host,
                 started="2026-01-01T00:00:00+00:00", command=["ceiling", "bench", "memory", "--repeat", str(n)],
                 finished="2026-01-03T00:01:00+00:00", fixed={"suites": ["memory"], "quick": True},
                 hosts=[host], members=members)

# -- the document -------------------------------------------------------------------------------

def test_a_real_study_file_reads_and_writes_back_byte_for_byte():
    text = GOLDEN.read_text(encoding="utf-8")
    study = jsonio.loads_study(text)
    assert study.study_version == STUDY_VERSION and study.kind == REPETITION and study.parameter == "repetition"
    assert [m.value for m in study.members] == [1, 2]
    assert all(isinstance(m.run, Run) and m.run.schema_version == SCHEMA_VERSION for m in study.members)
    assert [m.run_id for m in study.members] == [m.run.run_id for m in study.members]
    assert jsonio.dumps_study(study) == text

def test_a_study_written_before_its_roofline_still_reads():
    # StudyAnalysis.roofline came later in study_version 1: a file without it reads, with none
    text = GOLDEN.read_text(encoding="utf-8").replace(',\n    "roofline": null', "")
    assert '"roofline"' not in text.split('"analysis"')[-1]
    assert jsonio.loads_study(text).analysis.roofline is None


def test_the_loader_tells_a_study_from_a_run():
    assert isinstance(jsonio.load_document(GOLDEN), Study)
    run_file = Path(__file__).parent / "golden" / "run_v3.json"
    assert isinstance(jsonio.load_document(run_file), Run)
    with pytest.raises(StoreError, match="is a study of several runs, not one run"):
        jsonio.load(GOLDEN)
    with pytest.raises(StudyError, match="not a ceiling study"):
        jsonio.loads_study(run_file.read_text())

def test_a_study_validates_against_the_schema_and_keeps_its_members_versions():
    pytest.importorskip("jsonschema")
    doc = json.loads(GOLDEN.read_text())
    assert jsonio.validate_study(doc) is True
    # a member written by an older ceiling is a run of its own version: upgraded when read
    v1 = json.loads((Path(__file__).parent / "golden" / "run_v1.json").read_text())
    doc["members"][0]["run"], doc["members"][0]["run_id"] = v1, v1["run_id"]
    study = jsonio.study_from_doc(doc)
    assert study.members[0].run.schema_version == SCHEMA_VERSION
    assert study.study_version == STUDY_VERSION        # the study keeps its own version

def _broken(change):
    doc = json.loads(GOLDEN.read_text())
    change(doc)
    return json.dumps(doc)

BAD = [
    ("an unknown kind", lambda d: d.update(kind="sweep"), "kind: 'sweep' is not one of"),
    ("an unknown key", lambda d: d.update(colour="red"), "colour: unknown key"),
    ("a member without value", lambda d: d["members"][0].pop("value"), "members[0].value: missing key"),
    ("a damaged member run", lambda d: d["members"][1]["run"]["metrics"][0].update(value="fast"),
     "member 1 (run) is not a valid ceiling run"),
    ("a member naming another run", lambda d: d["members"][0].update(run_id="f" * 32), "holds run"),
    ("a newer study", lambda d: d.update(study_version=STUDY_VERSION + 1), "newer ceiling"),
    ("a non-finite value", lambda d: d["members"][0].update(value=None), "members[0].value"),
]

@pytest.mark.parametrize("what,change,text", BAD, ids=[b[0] for b in BAD])
def test_a_malformed_study_is_refused_in_one_line(what, change, text):
    with pytest.raises(StudyError) as e:
        jsonio.loads_study(_broken(change), source="s.json")
    assert text in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_code == 12

def test_show_refuses_a_malformed_study_file_with_its_own_exit_code(tmp_path):
    bad = tmp_path / "study.json"
    bad.write_text(_broken(lambda d: d["members"][1]["run"].update(schema_version="three")))
    r = ceiling("show", str(bad))
    assert r.returncode == StudyError.exit_code == 12, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ceiling: {bad} is not a valid ceiling study: member 1"), lines
    assert "Traceback" not in r.stderr

# -- the history ----------------------------------------------------------------------------------

def test_a_study_round_trips_through_the_history_and_its_members_are_runs(tmp_path):
    study = _study()
    with Store(tmp_path / "h.db") as s:
        sid = s.save_study(study)
        back = s.get_study(sid[:8])
        assert jsonio.dumps_study(back) == jsonio.dumps_study(study)
        # each member is an ordinary run: listed, shown, in the metric's series
        assert {r.run_id for r in s.list()} == {m.run_id for m in study.members}
        assert {r.study for r in s.list()} == {sid}
        assert s.get(study.members[0].run_id).metric("stream.triad").value == 11.0
        assert [p.value for p in s.series("stream.triad")] == [11.0, 12.0, 13.0]
        assert s.find(sid[:8]) == ("study", sid) and s.find(study.members[1].run_id) == ("run", study.members[1].run_id)
        (summary,) = s.list_studies()
        assert (summary.study_id, summary.kind, summary.members, summary.values) == (sid, REPETITION, 3, [1, 2, 3])
    raw = sqlite3.connect(tmp_path / "h.db")
    doc = json.loads(raw.execute("SELECT doc FROM studies").fetchone()[0])
    assert [m["run"] for m in doc["members"]] == [None] * 3       # one row that groups; the runs are stored apart
    assert raw.execute("SELECT count(*) FROM runs").fetchone()[0] == 3

def test_a_member_removed_from_the_history_is_said_not_lost(tmp_path):
    study = _study(2)
    with Store(tmp_path / "h.db") as s:
        sid = s.save_study(study)
        s._db.execute("DELETE FROM runs WHERE run_id = ?", (study.members[0].run_id,))
        back = s.get_study(sid)
    assert back.members[0].run is None and back.members[0].run_id == study.members[0].run_id
    assert "not in this history" in terminal_study.render(back)

def _tables(p: Path):
    raw = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        return (raw.execute("PRAGMA user_version").fetchone()[0],
                {t: sorted(raw.execute(f"SELECT * FROM {t}"), key=repr) for t in ("runs", "metrics", "inventories")})
    finally:
        raw.close()


def test_a_version_3_history_is_upgraded_with_everything_it_held(tmp_path):
    p = _copy(tmp_path)
    version, before = _tables(p)
    assert version == 3 and len(before["runs"]) == V3_RUNS
    with Store(p, check=True) as s:
        assert len(s.list(limit=100)) == V3_RUNS and s.list_studies() == []
    version, after = _tables(p)
    assert version == STORE_VERSION           # 4 studies, 5 history --changes, 6 the probe
    assert after == before                        # every run, metric row and inventory as it was
    with Store(p) as s:
        sid = s.save_study(_study(2))
        assert len(s.list(limit=100)) == V3_RUNS + 2
    raw = sqlite3.connect(p)
    assert raw.execute("SELECT study_id FROM studies").fetchall() == [(sid,)]
    assert raw.execute("SELECT count(*) FROM study_members").fetchone()[0] == 2


def test_a_version_3_history_is_read_without_being_upgraded(tmp_path, capsys):
    p = _copy(tmp_path)
    digest = _digest(p)
    with Store(p, readonly=True) as s:
        assert len(s.list(limit=100)) == V3_RUNS and all(r.study == "" for r in s.list(limit=100))
        assert s.list_studies() == []
        assert len(s.series("stream.triad", host="vm")) == 2          # the version 3 rows, read as they are
        with pytest.raises(UsageError, match="no run or study"):
            s.find("ffffffffffff")
    from ceiling import cli
    assert cli.main(["history", "--db", str(p), "--studies"]) == 0
    assert "No studies are recorded." in capsys.readouterr().out
    assert cli.main(["history", "--db", str(p)]) == 0
    assert "study" not in capsys.readouterr().out.splitlines()[0]
    assert _digest(p) == digest
    raw = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 3
    assert "studies" not in {r[0] for r in raw.execute("SELECT name FROM sqlite_master")}

def test_a_version_2_history_reaches_version_4_in_one_upgrade(tmp_path):
    p = tmp_path / "h.db"
    shutil.copyfile(V3.parent / "store_v2.db", p)
    with Store(p, check=True) as s:
        s.save_study(_study(2))
        assert len(s.list_studies()) == 1 and len(s.list(limit=100)) == V3_RUNS + 2

# -- showing it -------------------------------------------------------------------------------------

def test_the_terminal_shows_one_row_per_member_with_its_own_figures():
    study = jsonio.load_document(GOLDEN)
    text = terminal_study.render(study)
    lines = text.splitlines()
    assert lines[0].startswith("Repetition study of 2 runs over repetition: ceiling bench memory --quick --repeat 2")
    assert "held fixed: suites=memory quick=true placement=compact threads=2" in text
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["repetition", "run"])
    assert "stream.triad" in lines[head]
    for member, row in zip(study.members, lines[head + 1: head + 3]):
        cells = row.split()
        assert cells[0] == str(member.value) and cells[1] == member.run_id[:12]
        triad = member.run.metric("stream.triad")
        assert terminal_study.value_text(triad) in row and f"{triad.value:.3g}" in row

def test_show_prints_a_stored_study_and_its_json_holds_every_member(tmp_path, capsys):
    from ceiling import cli
    study = _study()
    with Store(tmp_path / "h.db") as s:
        sid = s.save_study(study)
    assert cli.main(["show", sid[:10], "--db", str(tmp_path / "h.db")]) == 0
    out = capsys.readouterr().out
    assert f"study {sid}" in out and "11.0 GB/s" in out and "13.0 GB/s" in out
    assert cli.main(["show", sid, "--db", str(tmp_path / "h.db"), "--json"]) == 0
    back = jsonio.loads_study(capsys.readouterr().out)
    assert [m.run.metric("stream.triad").value for m in back.members] == [11.0, 12.0, 13.0]
    assert cli.main(["history", "--db", str(tmp_path / "h.db")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[-1] == "study" and out.count(sid[:12]) == 3

def test_the_html_page_lists_every_member():
    study = jsonio.load_document(GOLDEN)
    page = html_study.render(study)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    for i, m in enumerate(study.members):
        assert f'data-member="{i}"' in page and m.run_id[:12] in page
    assert page.count("<tr data-member=") == len(study.members)
    assert "repetition over repetition" in page

def test_the_html_page_escapes_what_the_study_holds():
    study = _study(1)
    study.fixed = {"note": "<script>alert(1)</script>"}
    assert "<script>alert" not in html_study.render(study)

# -- the producer: ceiling bench --repeat N ---------------------------------------------------------

@pytest.mark.parametrize("args,code,text", [
    (["--repeat", "1"], 3, "--repeat 1: must be at least 2"),
    (["--repeat", "2", "--cluster"], 2, "--cluster measures every node once"),
    (["storage", "--repeat", "2"], 2, "network and storage"),
])
def test_repeat_refuses_what_it_cannot_do(tmp_path, args, code, text):
    r = ceiling("bench", *args, "--no-store")
    assert r.returncode == code, r.stderr
    assert text in r.stderr and len(r.stderr.strip().splitlines()) == 1

@pytest.mark.slow
def test_bench_repeat_records_a_study_of_real_runs(tmp_path):
    db, doc, page = tmp_path / "h.db", tmp_path / "s.json", tmp_path / "s.html"
    r = ceiling("bench", "cores", "--quick", "--repeat", "2", "--db", str(db), "--save-json", str(doc),
                "--out", str(page))
    assert r.returncode == 0, r.stderr
    study = jsonio.load_document(doc)
    assert isinstance(study, Study) and [m.value for m in study.members] == [1, 2]
    assert study.fixed["suites"] == ["cores"] and study.fixed["quick"] is True
    with Store(db, readonly=True) as s:
        assert s.get_study(study.study_id).members[1].run.metrics == study.members[1].run.metrics
        assert {r.run_id for r in s.list()} == {m.run_id for m in study.members}
    assert f"Recorded as study {study.study_id[:12]}" in r.stdout
    assert "repetition 2 of 2" in r.stdout and page.read_text().count("<tr data-member=") == 2


def test_a_damaged_study_in_the_history_is_refused_with_its_exit_code(tmp_path):
    db = tmp_path / "h.db"
    with Store(db) as s:
        sid = s.save_study(_study(2))
    raw = sqlite3.connect(db)
    raw.execute("UPDATE studies SET doc = json_set(doc, '$.kind', 'sweep')")
    raw.commit()
    raw.close()
    r = ceiling("show", sid, "--db", str(db))
    assert r.returncode == 12, r.stderr
    assert r.stderr.startswith(f"ceiling: study {sid} in {db} is not a valid ceiling study: kind: 'sweep'")
    assert r.stderr.count("\n") == 1


def test_a_study_is_shown_from_a_history_on_a_read_only_mount(tmp_path):
    from test_store_readonly import _cli, _readonly
    d = tmp_path / "ro"
    d.mkdir()
    db = d / "history.db"
    with Store(db) as s:
        sid = s.save_study(_study(2))
    digest = _digest(db)
    r = _readonly(d, _cli("show", sid[:8], "--db", str(db), "--json"))
    assert r.returncode == 0, r.stderr
    assert jsonio.loads_study(r.stdout).study_id == sid
    assert sorted(p.name for p in d.iterdir()) == ["history.db"] and _digest(db) == digest
