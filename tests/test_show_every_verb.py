"""Every run a verb records is shown again by `ceiling show` in every format (issue 26 item 13).

Each verb's run is made as the verb makes it: `check`, `bench` (its cheapest kinds: compute, cache)
and `profile` run for real, into a history of their own; a cluster run is made by the
cluster analysis itself (analysis/cluster.py, the code `run --cluster` calls) from
digests of three nodes, one an outlier (a real one needs an MPI job across nodes); a
full `ceiling run` by the golden documents. Each is then shown from the history (by
id, as `ceiling history` lists it) and from its JSON file, as terminal text, as JSON
and as HTML: exit 0 every time, the JSON equal to what was recorded, and what the
original showed (its verdict, the program's bound, the outlier) shown again.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.analysis.analyse import analyse
from ceiling.analysis.cluster import Cluster, NodeDigest
from ceiling.results import jsonio, migrate
from ceiling.results.model import HIGHER, LOWER, Run

GOLDEN = Path(__file__).resolve().parent / "golden"


def ceiling(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, NO_COLOR="1"))


def _recorded(db: Path, saved: Path, verb: str, *args) -> str:
    """Runs ``verb`` into the history ``db`` and the JSON file ``saved``; the run's id."""
    r = ceiling(verb, "--db", str(db), "--save-json", str(saved), *args)
    assert r.returncode == 0, (verb, r.returncode, r.stderr[-2000:])
    return sqlite3.connect(db).execute("SELECT run_id FROM runs").fetchone()[0]


def _cluster_run() -> Run:
    """What verbs/cluster._cluster_run builds from the nodes' digests, without the MPI job."""
    def digest(name, dgemm, problems=()):
        return NodeDigest(name, {"dgemm.node": {"value": dgemm, "unit": "Gflop/s", "better": HIGHER,
                                                "peak": [120.0, "Gflop/s", "2 sockets x 8 cores"]},
                                 "latency.dram": {"value": 90.0, "unit": "ns", "better": LOWER, "peak": None}},
                          list(problems), {"kernel": "6.1.0-18", "governor": "performance"})
    cl = Cluster(None)
    for d in (digest("cn01", 100.0), digest("cn02", 101.0), digest("cn03", 60.0, [("cpu.throttle", "warn",
                                                                                   "the CPU was throttled")])):
        cl.add(d)
    uni = cl.uniformity()
    run = Run(tool_version="0", host="cn01", started="2026-01-01T00:00:00Z", command=["ceiling", "run", "--cluster"],
              metrics=cl.metrics(), findings=cl.findings(uni))
    run.analysis = analyse(run)
    run.analysis.uniformity = uni
    return run


def _show_everywhere(tmp_path: Path, source: list, doc: dict) -> tuple:
    """`ceiling show SOURCE` as text, JSON and HTML; each exits 0. (text, page)."""
    text = ceiling("show", *source)
    assert text.returncode == 0, text.stderr
    assert "Traceback" not in text.stderr + text.stdout
    js = ceiling("show", *source, "--json")
    assert js.returncode == 0, js.stderr
    # the document as recorded, nothing lost; one of an older schema as this ceiling upgrades it
    assert json.loads(js.stdout) == migrate.upgrade(doc)
    page = tmp_path / "shown.html"
    html = ceiling("show", *source, "--out", str(page))
    assert html.returncode == 0, html.stderr
    return text.stdout, page.read_text(encoding="utf-8")


def _check_shown(kind: str, doc: dict, text: str, page: str) -> None:
    verdict = (doc.get("analysis") or {}).get("verdict")
    if kind == "profile":
        bound = doc["analysis"]["bounds"][0]["bound"]
        assert f"Bound: {bound}" in text and f"Bound: {bound}" in page
        assert "No verdict was recorded" not in text + page
        assert "no headline metric" not in text.lower() and "no headline metric" not in page.lower()
        assert "Ended" in text and "Cost of profiling" in page
    elif kind.startswith("check"):
        for f in doc["findings"][:5]:
            assert f["title"][:40] in text, f["title"]
    else:
        assert verdict is not None
        assert "No verdict was recorded" not in text + page
        assert "ceiling summary" in text
    if kind == "cluster":
        assert "cn03" in text and "cn03" in page
        assert any(f["id"] == "cluster.outlier.dgemm.node" and "cn03" in f["title"] for f in doc["findings"])


CASES = {
    "check": ["check", "--only", "mem,limits"],
    # the cheapest kinds (a few seconds each); memory and latency take 15 s and render the same way
    "bench": ["bench", "compute", "--quick", "--threads", "1"],
    "bench-cache": ["bench", "cache", "--quick", "--threads", "1"],
    "profile": ["profile", "--no-measure", "--", "sleep", "0.2"],
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_run_recorded_by_each_verb_is_shown_again_in_every_format(tmp_path, kind):
    db, saved = tmp_path / "h.db", tmp_path / "run.json"
    rid = _recorded(db, saved, *CASES[kind])
    doc = json.loads(saved.read_text())
    assert doc["run_id"] == rid
    for source in (["--db", str(db), rid], [str(saved)]):
        text, page = _show_everywhere(tmp_path, source, doc)
        _check_shown(kind, doc, text, page)


def test_a_cluster_run_with_an_outlier_is_shown_again_in_every_format(tmp_path):
    run = _cluster_run()
    assert run.analysis.uniformity[0].outliers, "the test needs an outlier"
    saved = tmp_path / "cluster.json"
    saved.write_text(jsonio.dumps(run))
    doc = json.loads(saved.read_text())
    text, page = _show_everywhere(tmp_path, [str(saved)], doc)
    _check_shown("cluster", doc, text, page)


@pytest.mark.parametrize("name", ["run_v2.json", "run_v2_partial.json", "run_v3.json"])
def test_the_golden_runs_are_shown_again_in_every_format(tmp_path, name):
    doc = json.loads((GOLDEN / name).read_text())
    text, page = _show_everywhere(tmp_path, [str(GOLDEN / name)], doc)
    _check_shown("run", doc, text, page)


# `ceiling profile` documents of schema 2 (an MPI program; --experiments --overhead) and 3
PROFILES = ["run_v2_profile_mpi.json", "run_v2_profile_experiments.json", "run_v3_profile.json"]


@pytest.mark.parametrize("name", PROFILES)
def test_profiles_of_every_schema_are_shown_from_a_file_and_from_a_history(tmp_path, name):
    doc = json.loads((GOLDEN / name).read_text())
    # a history that an older ceiling wrote holds the document as it was: put it there as it is
    db = tmp_path / "h.db"
    from ceiling.results.store import Store
    with Store(db) as store:
        rid = store.save(jsonio.load(GOLDEN / name))
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET doc = ? WHERE run_id = ?", (json.dumps(dict(doc, run_id=rid)), rid))
    con.commit()
    con.close()
    for source, recorded in (([str(GOLDEN / name)], doc), (["--db", str(db), rid], dict(doc, run_id=rid))):
        text, page = _show_everywhere(tmp_path, source, recorded)
        _check_shown("profile", migrate.upgrade(recorded), text, page)
        prof = migrate.upgrade(doc)["application"]["profile"]
        assert f"over {prof['threads']} thread" in text and f"over {prof['threads']} thread" in page
