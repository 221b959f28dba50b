"""Fixtures shared by several test modules."""
from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time

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
    parser.addoption("--cpu-times", metavar="PATH",
                     help="append one line per test to PATH: node id, CPU seconds (user+sys of pytest and of the "
                          "children it waited for, setup to teardown) and wall seconds; the session's end prints the "
                          "20 largest. For finding what makes the suite slow: wall minus CPU is time spent waiting")


def _cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = item.config.getoption("--cpu-times")
    if not path:
        yield
        return
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    cpu, wall = _cpu_seconds() - cpu, time.monotonic() - wall
    with open(path, "a") as f:          # one short line per write: workers of pytest-xdist may share the file
        f.write(f"{item.nodeid}\t{cpu:.3f}\t{wall:.3f}\n")


def pytest_terminal_summary(terminalreporter, config):
    path = config.getoption("--cpu-times")
    if not path or not os.path.exists(path) or hasattr(config, "workerinput"):
        return
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.count("\t") == 2]
    rows.sort(key=lambda r: -float(r[1]))
    terminalreporter.section(f"CPU seconds per test (the 20 largest of {len(rows)}, in {path})")
    terminalreporter.write_line(f"total CPU {sum(float(r[1]) for r in rows):.1f} s, "
                                f"wall {sum(float(r[2]) for r in rows):.1f} s")
    for nodeid, cpu, wall in rows[:20]:
        terminalreporter.write_line(f"{float(cpu):8.2f} cpu {float(wall):8.2f} wall  {nodeid}")


# The tests `make test` keeps out of its parallel pass (pytest-xdist) and runs alone after it: those
# that start MPI ranks (they busy-poll, and their launch and watchdog deadlines are real seconds),
# that send a signal at a moment or wait for a deadline, and the end-to-end runs that measure the
# node and check what they measured. Under two workers' load these would race or wait longer,
# not fail any more truly; elsewhere they are ordinary tests. `@pytest.mark.serial` adds one.
SERIAL_MODULES = {"test_mpi_watchdog.py", "test_profile_srun.py", "test_run_e2e.py"}
# Words in a test function's name (not its parameters': "--node-timeout" in a bad option's id is no
# wait); "hang" not in "change", "interrupted" and not a node's hardware "interrupts".
SERIAL_NAMES = re.compile(r"ctrl_c|signal|sigint|sigterm|interrupted|keyboard_interrupt|deadline|timeout|(?<!c)hang")


def _serial(item) -> bool:
    return (item.get_closest_marker("serial") is not None or "mpi_setup" in getattr(item, "fixturenames", ())
            or item.path.name in SERIAL_MODULES
            or SERIAL_NAMES.search(getattr(item, "originalname", item.name)) is not None)


# The tests that set one process's speed against another's, or a disk's latency against its own a moment
# before (`@pytest.mark.alone` adds one): `make test` runs its serial pass and the Open MPI pass side by side
# (scripts/run-tests.sh), and a test of one loading a CPU or the disk made these fail in the other (a slowed
# node measured faster than its peer; a probe's factor at 22x after its co-runner had ended). With
# CEILING_TEST_LOCK naming a file, every test holds a shared lock on it, and these an exclusive one.
ALONE_MODULES = {"test_probe_corunner.py", "test_trace_planted.py"}
_TEST_LOCK = os.environ.get("CEILING_TEST_LOCK")


@pytest.fixture(autouse=True)
def _alone_or_beside(request):
    if not _TEST_LOCK:
        yield
        return
    import fcntl
    fd = os.open(_TEST_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        alone = request.node.get_closest_marker("alone") is not None or request.node.path.name in ALONE_MODULES
        fcntl.flock(fd, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def pytest_collection_modifyitems(config, items):
    for it in items:
        if _serial(it) and it.get_closest_marker("serial") is None:
            it.add_marker(pytest.mark.serial)
    # The slow tests first, each module's in its order: pytest-xdist's workers then end on short
    # tests together rather than one waiting for the other's 30 s test (stable: the rest keep theirs).
    items.sort(key=lambda it: it.get_closest_marker("slow") is None)
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
