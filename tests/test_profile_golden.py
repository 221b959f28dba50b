"""The analysis of `ceiling profile` gives, on the inputs recorded from real runs
(tests/fixtures/profile_golden/, recorded by record.py there), exactly the bounds, findings,
metrics, overhead and profile dict it gave then: what the reports read cannot change while
the code around it is moved. A changed output is either a regression or a change of
behaviour to record again (record.py NAME), said in its commit."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import profile_golden as pg
from ceiling.analysis.profile_run import analyse

HERE = Path(__file__).resolve().parent / "fixtures" / "profile_golden"
CASES = sorted(p.stem for p in HERE.glob("*.json"))


def test_there_are_cases():
    assert {"cpu_awk", "children_io", "threads_xz", "mpi_pingpong", "cpu_awk_compute"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_same_profile_from_the_same_inputs(name, monkeypatch):
    doc = json.loads((HERE / f"{name}.json").read_text())
    real = os.uname()
    host = doc["inputs"]["host"]
    # the records name their host; which are this node's, the analysis asks os.uname
    monkeypatch.setattr(os, "uname", lambda: os.uname_result((real.sysname, host, real.release, real.version,
                                                             real.machine)))
    obs = pg.observation_from(doc["inputs"])
    got = pg.outputs_doc(analyse(obs, pg.history_from(doc["inputs"])), obs)
    want = doc["outputs"]
    for key in want:
        assert got[key] == want[key], f"{name}: {key} differs"
    assert got == want
