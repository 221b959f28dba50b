"""`ceiling profile --flops/--memory-bytes/...` (issue 30): the work a program states, over its measured wall time,
as E = W/P against this node's ceilings (analysis/efficiency.py, as `ceiling model`), with the roofline point;
bad values are one line before the program runs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest


def ceiling(*args):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=120)


def test_the_stated_work_over_the_runs_time_is_a_finding_with_the_roofline_point(tmp_path):
    out = tmp_path / "run.json"
    r = ceiling("profile", "--db", str(tmp_path / "h.db"), "--no-measure", "--save-json", str(out), "--flops", "1e9",
                "--memory-bytes", "4GB", "--ops", "1e6", "--", sys.executable, "-c", "import time; time.sleep(0.3)")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    (f,) = [f for f in doc["findings"] if f["id"] == "profile.efficiency"]
    wall = doc["application"]["wall_s"]
    res = f["data"]
    rows = {r["subsystem"]: r for r in res["rows"]}
    assert rows["flops"]["achieved"] == pytest.approx(1e9 / wall) and rows["memory"]["quantity"] == 4e9
    assert res["time_s"] == wall and res["per_op_s"] == pytest.approx(wall / 1e6)
    assert res["roofline"]["intensity"] == pytest.approx(0.25)
    assert "no peak known" in f["title"] and "ceiling bench compute" in f["evidence"]       # an empty history
    assert "E = W/P over the run" in r.stderr                     # the page: stdout is the program's


@pytest.mark.parametrize("verb", ["profile", "trace"])
@pytest.mark.parametrize("args, code, words", [
    (["--flops", "-3"], 3, "--flops '-3': must be larger than zero"),
    (["--flops", "lots"], 2, "--flops 'lots': not a number"),
    (["--memory-bytes", "12 apples"], 2, "--memory-bytes"),
])
def test_bad_work_is_one_line_before_the_program_runs(tmp_path, verb, args, code, words):
    mark = tmp_path / "ran"
    r = ceiling(verb, "--db", str(tmp_path / "h.db"), *args, "--", "touch", str(mark))
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code and len(err) == 1 and words in err[0], r.stderr
    assert not mark.exists()
