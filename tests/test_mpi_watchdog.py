"""A rank that stops answering ends the MPI job at a deadline, named, with what was
measured kept (cluster/watchdog.py). The real thing: one rank of `mpirun -n 2 ceiling
bench network` / `bench storage` stopped with SIGSTOP, with MPICH here and with Open MPI
in scripts/test-openmpi.sh."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from ceiling.cluster import watchdog
from ceiling.errors import BadValueError, StalledError, UsageError
from ceiling.units import parse_seconds
from mpiutil import measuring, needs_mpi, ranks_of, run_env

TIMEOUT = "5"       # --node-timeout of these tests: seconds


# -- the parts -------------------------------------------------------------------------

def test_allowance_grows_with_the_work_from_a_floor():
    assert watchdog.allowance() == watchdog.FLOOR_S
    assert watchdog.allowance(messages=1000) == pytest.approx(watchdog.FLOOR_S + 10)
    assert watchdog.allowance(nbytes=100e6) == pytest.approx(watchdog.FLOOR_S + 10)
    assert watchdog.allowance(floor=5) == 5


def test_node_timeout_values():
    assert parse_seconds("30", what="--node-timeout") == 30
    assert parse_seconds("90s", what="--node-timeout") == 90
    assert parse_seconds("5m", what="--node-timeout") == 300
    assert parse_seconds("1h", what="--node-timeout") == 3600
    assert parse_seconds(None, what="--node-timeout") is None
    with pytest.raises(UsageError):
        parse_seconds("soon", what="--node-timeout")
    with pytest.raises(BadValueError):
        parse_seconds("0", what="--node-timeout")
    with pytest.raises(BadValueError):
        parse_seconds("200h", what="--node-timeout")    # over a week
    with pytest.raises(UsageError):
        parse_seconds("30d", what="--node-timeout")     # no unit d: an error, not a silent 30 s
    assert StalledError.exit_code == 11


def test_process_state_says_stopped_exited_or_nothing():
    assert watchdog.process_state(os.getpid()) == ""
    p = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(p.pid, signal.SIGSTOP)
        # until it is stopped, not until any state: a process still paging in its program under
        # heavy disk load is briefly "in uninterruptible sleep" before the signal is taken
        for _ in range(1000):
            if watchdog.process_state(p.pid).startswith("stopped"):
                break
            time.sleep(0.01)
        assert watchdog.process_state(p.pid).startswith("stopped by SIGSTOP")
    finally:
        p.kill()
        p.wait()
    assert watchdog.process_state(p.pid).startswith("gone")


def _dog(size=3, reports=()):
    ranks = [watchdog._Rank("n0", "h0", 1), watchdog._Rank("n1", "h1", 2), watchdog._Rank("n2", "h2", 3)]
    dog = watchdog.Watchdog(0, size, ranks[:size], sock=None)
    dog._reports.update({r: ("x", 0.0) for r in reports})
    return dog


def test_the_rank_that_did_not_report_is_named_with_its_node():
    dog = _dog(reports=[1])
    arm = watchdog._Arm("ping-pong", 8, 0, peers=(0, 1))
    line = dog.describe(arm, [2])
    assert line.startswith("rank 2 (node n2, pid 3) did not answer within 8 s (rank 0 was waiting in ping-pong)")
    assert "marked partial" in line
    # every other rank reported waiting: none stopped, the MPI library or the fabric lost a message
    assert "none of them stopped" in _dog(reports=[1, 2]).describe(arm, [])


def test_the_silent_peer_of_a_pair_is_named_first():
    arm = watchdog._Arm("ping-pong", 8, 0, peers=(0, 2))
    assert _dog().describe(arm, [1, 2]).startswith("rank 2 (node n2")


def test_waits_nest_without_shortening_and_are_forgotten_on_leaving():
    dog = _dog()
    with dog.waiting("outer", 100):
        with dog.waiting("inner", 1):
            assert [a.what for a in dog._arms.values()] == ["outer"]
    assert not dog._arms
    dog.timeout = 7                      # --node-timeout: every deadline
    with dog.waiting("x", 100):
        assert next(iter(dog._arms.values())).seconds == 7


def test_a_watched_communicator_arms_every_wait_and_passes_the_rest():
    class Comm:
        def allgather(self, x):
            return [list(watchdog.current()._arms.values())[0].what, x]

        def Get_rank(self):
            return 0

    dog = _dog()
    watchdog._DOG = dog
    try:
        c = watchdog.wrap(Comm())
        assert c.allgather(1) == ["MPI allgather", 1]
        assert c.Get_rank() == 0 and not dog._arms
    finally:
        watchdog.stop()


def test_abandoned_run_directory_goes_with_the_loops_files_only(tmp_path):
    from ceiling.bench.storage_dir import OWNER_FILE, remove_abandoned
    d = tmp_path / "ceiling-io-x"
    (d / "md.unique7.r0" / "t0").mkdir(parents=True)
    for name in ("seq.fpp3.r0.t1", "seq.shared4.r1.shared", "rand5.t0", OWNER_FILE, "md.unique7.r0/t0/f.1"):
        (d / name).write_text("x")
    remove_abandoned(str(d))
    assert not d.exists()
    d.mkdir()
    (d / "seq.fpp1.r0.t0").write_text("x")
    (d / "mine.txt").write_text("planted")
    remove_abandoned(str(d))
    assert sorted(p.name for p in d.iterdir()) == ["mine.txt"]


# -- the real thing ----------------------------------------------------------------------

def _launch(mpi_setup, tmp_path, mark, *args):
    tmp, info = mpi_setup
    out = tmp_path / "partial.json"
    p = subprocess.Popen([*info["argv2"], sys.executable, "-m", "ceiling", *args, "--no-store",
                          "--node-timeout", TIMEOUT, "--save-json", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=run_env(tmp, TEST_MARK=mark))
    return p, out


def _stop_when(mark, rank, ready, p):
    deadline, pid = time.time() + 90, None
    while time.time() < deadline and pid is None and p.poll() is None:
        r = ranks_of(mark).get(rank)
        if r is not None and ready(r):
            pid = r
        time.sleep(0.05)
    assert pid is not None, f"rank {rank} never got ready to be stopped"
    os.kill(pid, signal.SIGSTOP)
    return pid


def _finish(p, pid):
    try:
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    return stdout, stderr


@needs_mpi
def test_a_stopped_rank_ends_the_network_job_named_and_what_was_measured_is_kept(mpi_setup, tmp_path):
    mark = uuid.uuid4().hex
    p, out = _launch(mpi_setup, tmp_path, mark, "bench", "network")
    t0 = time.monotonic()
    pid = _stop_when(mark, 1, measuring, p)
    stdout, stderr = _finish(p, pid)
    assert p.returncode == StalledError.exit_code, stdout + stderr
    assert time.monotonic() - t0 < 90
    assert "Traceback" not in stderr, stderr
    line = next(x for x in stderr.splitlines() if x.startswith("ceiling: rank 1 ("))
    assert f"pid {pid}, stopped by SIGSTOP" in line and "did not answer within 5 s" in line, line
    doc = json.loads(out.read_text())
    assert doc["partial"] and doc["partial_reason"].startswith("rank 1 ("), doc["partial_reason"]
    assert "PARTIAL RUN" in stdout


@needs_mpi
def test_a_stopped_rank_0_is_named_by_rank_1(mpi_setup, tmp_path):
    mark = uuid.uuid4().hex
    p, out = _launch(mpi_setup, tmp_path, mark, "bench", "network")
    pid = _stop_when(mark, 0, measuring, p)
    stdout, stderr = _finish(p, pid)
    assert p.returncode == StalledError.exit_code, stdout + stderr
    line = next(x for x in stderr.splitlines() if x.startswith("ceiling: rank 0 ("))
    assert "stopped by SIGSTOP" in line and "nothing could be saved" in line, line
    assert not out.exists()


@needs_mpi
def test_a_stopped_rank_ends_the_storage_job_and_its_files_are_removed(mpi_setup, tmp_path):
    d = tmp_path / "io"
    d.mkdir()
    mark = uuid.uuid4().hex

    def writing(_pid):
        return any(f.name.startswith("seq.") for x in d.glob("ceiling-io-*") for f in x.iterdir())

    p, out = _launch(mpi_setup, tmp_path, mark, "bench", "storage", "--dir", str(d), "--size", "256MiB")
    pid = _stop_when(mark, 1, writing, p)
    stdout, stderr = _finish(p, pid)
    assert p.returncode == StalledError.exit_code, stdout + stderr
    assert any(x.startswith("ceiling: rank 1 (") and "storage, sequential" in x for x in stderr.splitlines()), stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] and doc["partial_reason"].startswith("rank 1 (")
    assert list(d.iterdir()) == []


def test_a_bad_node_timeout_is_one_line_before_anything_runs():
    r = subprocess.run([sys.executable, "-m", "ceiling", "bench", "compute", "--no-store", "--node-timeout", "soon"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == UsageError.exit_code
    assert r.stderr.strip() == "ceiling: --node-timeout 'soon': not a duration (examples: 30, 90s, 5m, 1h)"
