"""The main job end to end, on this machine, as a user runs it (no timing asserted)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ceiling.report import labels
from ceiling.results import jsonio

pytestmark = pytest.mark.slow


def ceiling(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 300), **kw)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    t0 = time.monotonic()
    r = ceiling("run", "--quick", "--json", "--db", str(d / "h.db"), "--out", str(d / "report.html"),
                "--save-json", str(d / "run.json"), cwd=d)
    return r, d, time.monotonic() - t0


def test_quick_run_measures_everything(quick_run):
    r, d, _ = quick_run
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc == json.loads((d / "run.json").read_text())
    assert doc["partial"] is False
    names = {m["name"] for m in doc["metrics"]}
    for name in ("clock.all", "flops.dp.node", "flops.dp.core", "dgemm.node", "stream.triad", "stream.copy",
                 "bandwidth.l1", "latency.l1", "latency.dram"):
        assert name in names, name
    assert any(n.startswith("c2c.") for n in names)
    for m in doc["metrics"]:
        assert m["valid"], m["name"]
        assert m["stats"]["n"] == len(m["values"]) >= 1
    series = {s["name"] for s in doc["series"]}
    assert {"stream.triad.threads", "latency.size", "c2c.matrix"} <= series
    assert {f["id"] for f in doc["findings"]} >= {"cpu.clock", "mem.thp"}


def test_quick_run_is_schema_valid(quick_run):
    pytest.importorskip("jsonschema")
    r, d, _ = quick_run
    jsonio.validate(json.loads((d / "run.json").read_text()))


def test_quick_run_writes_report_and_history(quick_run):
    r, d, _ = quick_run
    html = (d / "report.html").read_text()
    assert html.count("<svg") >= 3
    # the summary on stderr leads with the verdict the document stores, word for word (wrapped)
    run = jsonio.loads(r.stdout)
    assert run.analysis.verdict is not None and run.analysis.verdict.kind not in ("nothing_measured", "no_peak")
    said = " ".join(r.stderr.split())
    assert "ceiling summary: " in said and " ".join(labels.verdict_text(run).split()) in said, said[-3000:]
    h = ceiling("history", "--db", str(d / "h.db"), "--json")
    assert h.returncode == 0, h.stderr
    rows = json.loads(h.stdout)
    assert len(rows) == 1 and rows[0]["verb"] == "run"
    run_id = json.loads(r.stdout)["run_id"]
    s = ceiling("show", run_id[:8], "--db", str(d / "h.db"), "--json")
    assert s.returncode == 0, s.stderr
    assert json.loads(s.stdout)["run_id"] == run_id


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    out = tmp_path / "partial.json"
    # progress lines on (conftest turns them off): "ceiling: latency ..." says the compute suite is done
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "bench", "compute", "latency", "--quick", "--no-store",
                          "--save-json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, CEILING_PROGRESS="lines"))
    seen = []
    for line in p.stderr:
        seen.append(line)
        if line.startswith("ceiling: latency"):
            break
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    stderr = "".join(seen) + stderr
    assert p.returncode == 130, stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] is True
    assert "interrupted" in doc["partial_reason"]
    names = {m["name"] for m in doc["metrics"]}
    assert "flops.dp.node" in names and all(m["value"] is not None for m in doc["metrics"]
                                            if m["name"].startswith("flops.")), sorted(names)


def test_sigterm_keeps_what_was_measured_and_removes_the_files(tmp_path):
    """A job's time limit or scancel sends SIGTERM: as Ctrl-C, with its own reason and exit 143."""
    d = tmp_path / "io"
    d.mkdir()
    out = tmp_path / "partial.json"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "bench", "storage", "--no-store", "--dir", str(d),
                          "--size", "1GiB", "--reps", "50", "--save-json", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not any(any(x.iterdir()) for x in d.glob("ceiling-io-*")):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 143, stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] is True and doc["partial_reason"].startswith("terminated (SIGTERM)")
    assert list(d.iterdir()) == []
