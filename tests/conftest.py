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

from ceiling import core


@pytest.fixture(scope="session")
def interposer_library():
    """The LD_PRELOAD interposer the install built beside the core (or CEILING_INTERPOSE_LIB).
    Its absence is a broken build, never a reason to skip: `make test` and CI build it, and a
    skip would let about a hundred tests pass without checking anything."""
    lib = core.interpose_library_path()
    if not lib.is_file():
        pytest.fail(f"the interposer is not built: {lib} is missing (the install builds it from csrc/interpose "
                    "with the core: rerun `make .venv/.installed` and read its CMake output; CEILING_INTERPOSE_LIB "
                    "names another copy)", pytrace=False)
    return lib


def pytest_addoption(parser):
    parser.addoption("--only-mpi-launched", action="store_true",
                     help="only the tests that start ranks with the MPI mpi4py loads (those using the mpi_setup "
                          "fixture): scripts/test-openmpi.sh's second pass, where the rest would run as before")


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--only-mpi-launched"):
        return
    keep = [it for it in items if "mpi_setup" in getattr(it, "fixturenames", ())]
    config.hook.pytest_deselected(items=[it for it in items if it not in keep])
    items[:] = keep


@pytest.fixture(scope="session")
def mpi_setup(tmp_path_factory):
    """(a scratch directory with the build cache, what PROBE found): once per test session."""
    tmp = tmp_path_factory.mktemp("mpi")
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=run_env(tmp), timeout=60)
    assert r.returncode == 0, r.stderr
    return tmp, json.loads(r.stdout.strip().splitlines()[-1])
