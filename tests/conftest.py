"""Fixtures shared by several test modules."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# The ceiling these tests start writes no progress lines to the pipes they read (one test
# of report/progress.py turns them on); a user's batch log gets them.
os.environ["CEILING_PROGRESS"] = "none"

from mpiutil import PROBE, run_env


@pytest.fixture(scope="session")
def mpi_setup(tmp_path_factory):
    """(a scratch directory with the build cache, what PROBE found): once per test session."""
    tmp = tmp_path_factory.mktemp("mpi")
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=run_env(tmp), timeout=60)
    assert r.returncode == 0, r.stderr
    return tmp, json.loads(r.stdout.strip().splitlines()[-1])
