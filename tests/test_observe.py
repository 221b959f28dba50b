"""observe/: a program run with its instruments gives a typed Observation (observe/run.py),
on real programs: how it ended, its processes as the sampler saw them, the interposer's
records, and nothing of its output where it is to be discarded."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from ceiling.observe import Instruments, observe

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
