"""observe/: a program run with its instruments gives a typed Observation (observe/run.py),
on real programs: how it ended, its processes as the sampler saw them, the interposer's
records, and nothing of its output where it is to be discarded."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from ceiling.observe import Instruments, Overdue, observe

SH = "/bin/sh"


def test_an_observation_says_how_the_program_ended_and_what_watched_it():
    obs = observe([SH, "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; cat /etc/hostname >/dev/null; "
                             "exit 3"], SH, Instruments(interval_s=0.02, cost=""))
    assert (obs.exit_status, obs.signal, obs.code, obs.interruption) == (3, "", 3, "")
    assert obs.pid in obs.sampled.processes and obs.sampled.samples >= 1 and obs.wall_s > 0
    assert obs.interposer.used and obs.interposer.records, obs.interposer.why     # the library is built here
    assert {r.process.pid for r in obs.interposer.records} >= {obs.pid}
    assert obs.interposer.written > 0 and not obs.interposer.removed
    assert obs.host == os.uname().nodename and obs.cpus == len(os.sched_getaffinity(0))
    assert obs.unreached.get(obs.sampled.processes[obs.pid].exe) == ""              # sh takes LD_PRELOAD


def test_a_signal_that_ended_it_is_its_code():
    obs = observe([SH, "-c", "kill -TERM $$"], SH, Instruments(interval_s=0.05, interpose=False, cost=""))
    assert (obs.exit_status, obs.signal, obs.code) == (None, "SIGTERM", 143)
    assert not obs.interposer.used and obs.interposer.why == "--no-interpose" and not obs.interposer.records


def test_bare_instruments_watch_nothing():
    obs = observe([SH, "-c", "true"], SH, Instruments(interval_s=0, interpose=False, counters=False, cost="",
                                                      competing=False))
    assert obs.code == 0 and obs.sampled.samples == 0 and not obs.sampled.processes
    assert obs.counters["available"] is False and obs.competing == []


def test_discarded_output_does_not_reach_ceilings_own():
    code = textwrap.dedent("""
        import json, sys
        from ceiling.observe import Instruments, observe
        print("before", flush=True)
        o = observe(["/bin/sh", "-c", "echo program; echo program >&2"], "/bin/sh",
                    Instruments(interval_s=0.05, interpose=False, cost="", discard_output=True))
        print("after", json.dumps(o.code), flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["before", "after", json.dumps(0)] and "program" not in r.stderr


# ---- a re-run: in a process group of its own (observe/detached.py) ---------------------------------------------

def _again(**more) -> Instruments:
    return Instruments(interval_s=0, interpose=False, counters=False, cost="", competing=False, discard_output=True,
                       own_group=True, **more)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_rerun_gives_its_times_and_status_as_subprocess_says_it():
    obs = observe([SH, "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; kill -TERM $$"], SH, _again())
    assert (obs.returncode, obs.code, obs.signal) == (-15, 143, "SIGTERM")
    assert obs.wall_s > 0 and obs.ended.user_s + obs.ended.system_s > 0 and "group of its own" in obs.ended.how
    assert obs.counters["available"] is False and "group of its own" in obs.counters["why"]
    assert not obs.interposer.used and obs.sampled.samples == 0


def test_a_rerun_stopped_by_ceiling_takes_its_process_group_with_it(tmp_path):
    """Ctrl-C (a KeyboardInterrupt in ceiling) while a re-run waits: its whole group is killed,
    the shell's child too, and the interruption goes on to the caller."""
    pidfile = tmp_path / "pid"

    class Stop:
        wait_s = 0.3

        def __call__(self, pgid: int) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        observe([SH, "-c", f"sleep 300 & echo $! > {pidfile}; wait"], SH, _again(look=Stop()))
    child = int(pidfile.read_text())
    for _ in range(100):                  # SIGKILL is delivered at once; reaping by init may lag
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child)


def test_companions_run_from_before_the_program_to_after_it_even_when_it_is_killed():
    seen = []

    @contextlib.contextmanager
    def companion(name):
        seen.append((name, "in", time.monotonic()))
        try:
            yield
        finally:
            seen.append((name, "out", time.monotonic()))

    obs = observe([SH, "-c", "true"], SH, _again(beside=[companion("a"), companion("b")]))
    assert [s[:2] for s in seen] == [("a", "in"), ("b", "in"), ("b", "out"), ("a", "out")]
    assert seen[1][2] <= obs.start_s and seen[2][2] >= obs.start_s + obs.wall_s
    seen.clear()
    with pytest.raises(Overdue):
        observe([SH, "-c", "sleep 30"], SH, _again(deadline_s=0.3, beside=[companion("a")]))
    assert [s[:2] for s in seen] == [("a", "in"), ("a", "out")]


def test_huge_pages_off_for_the_program_alone():
    out = "/proc/self/status"
    if "THP_enabled" not in open(out).read():
        pytest.skip("this kernel's /proc/PID/status has no THP_enabled (Linux 6.x and later)")
    code = "grep -q '^THP_enabled:.*0' /proc/self/status"
    assert observe([SH, "-c", code], SH, _again(no_thp=True)).code == 0
    assert observe([SH, "-c", code], SH, _again()).code == 1
    assert "THP_enabled:\t1" in open(out).read()          # ceiling's own is back


def test_what_a_run_in_ceilings_group_cannot_have_is_refused():
    with pytest.raises(ValueError, match="counters"):
        observe([SH, "-c", "true"], SH, Instruments(own_group=True))
    with pytest.raises(ValueError, match="own_group"):
        observe([SH, "-c", "true"], SH, Instruments(deadline_s=1.0, counters=False))
