"""How `ceiling profile` starts, watches and ends the program (probes/launch.py,
csrc/launch/launch.c), run as a user runs it: the I/O totals are the program's at its
exit, each byte once; the peak memory is the program's, not Python's; processes that
left the tree are named; signals sent to the process group are not doubled and those
sent to ceiling alone are passed on, and ceiling always reports. No timings are
asserted: the waits below only give a signal time to arrive."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from ceiling import core

MIB = 2**20
needs_launcher = pytest.mark.skipif(not core.launcher_path().exists(), reason="ceiling-launch is not built")


def profile(tmp_path: Path, *cmd: str, opts=(), env=None, **kw):
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), *opts, "--", *cmd], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NO_COLOR="1", **(env or {})), cwd=tmp_path, **kw)
    assert out.exists(), r.stderr
    return r, json.loads(out.read_text())


def metric(doc, name):
    return next(m for m in doc["metrics"] if m["name"] == name)


# ---- I/O totals: the program's at its exit, every waited-for child once -------------------------

def test_a_shell_running_dd_counts_the_bytes_once(tmp_path):
    # dd writes 30 MiB and exits; the shell waited for it, so the kernel added dd's bytes to the
    # shell's /proc/PID/io: summing both (the old way) said twice that, and a last sample taken
    # before the end said less
    r, doc = profile(tmp_path, "sh", "-c", "dd if=/dev/zero of=out bs=1M count=30 status=none")
    assert r.returncode == 0, r.stderr
    wrote = metric(doc, "app.io.write")
    assert 30 * MIB <= wrote["value"] * 1e6 <= 30 * MIB * 1.01, wrote
    assert "read once at its exit" in wrote["context"]["source"]
    assert doc["environment"]["profile"]["launch"]["io_read_at_exit"] is True


def test_the_totals_at_the_exit_stand_for_the_sampled_processes():
    # a shell and the dd it reaped, as the sampler last saw them: the shell's figures already hold
    # dd's; summed, they said twice the bytes
    from ceiling.analysis.profile import Rusage, conclude
    from ceiling.probes.proc_sampler import ProcessSample, Sampled
    io = {"rchar": 100, "wchar": 200, "read_bytes": 0, "write_bytes": 200}
    s = Sampled(processes={1: ProcessSample(1, 0, "sh", io=dict(io)), 2: ProcessSample(2, 1, "dd", io=dict(io))})
    exact = dict(io, syscr=3)
    metrics = conclude(s, Rusage(0.1, 0.1, 2**20, exact), 1.0, 2)[0]
    got = {m.name: (m.value, m.context["source"]) for m in metrics if m.name.startswith("app.io.")}
    assert got["app.io.write"][0] * 1e6 == 200 and got["app.io.read_device"][0] == 0
    assert "read once at its exit" in got["app.io.write"][1] and "system-call bytes" in got["app.io.write"][1]
    assert "device bytes" in got["app.io.write_device"][1]
    metrics = conclude(s, Rusage(0.1, 0.1, 2**20), 1.0, 2)[0]           # not read at the exit: the samples
    assert next(m for m in metrics if m.name == "app.io.write").context["source"].endswith("(not read at the exit)")


def test_without_the_launcher_the_totals_are_still_read_once_at_the_exit(tmp_path):
    r, doc = profile(tmp_path, "sh", "-c", "dd if=/dev/zero of=out bs=1M count=30 status=none",
                     env={"CEILING_LAUNCHER": str(tmp_path / "absent")})
    assert r.returncode == 0, r.stderr
    assert 30 * MIB <= metric(doc, "app.io.write")["value"] * 1e6 <= 30 * MIB * 1.01
    assert doc["environment"]["profile"]["launch"]["how"].startswith("forked from ceiling's Python")


def test_a_process_left_behind_is_named(tmp_path):
    # the background sleep is never waited for: its shell ends first and it is reparented
    r, doc = profile(tmp_path, "sh", "-c", "sleep 5 & sleep 2", opts=["--interval", "0.05"])
    assert r.returncode == 0, r.stderr
    left = [f for f in doc["findings"] if f["id"] == "profile.left_tree"]
    assert left and any(p.endswith(" sleep") for p in left[0]["data"]["processes"]), doc["findings"]


# ---- peak memory: the program's own -------------------------------------------------------------

@needs_launcher
def test_the_peak_memory_of_a_small_program_is_its_own(tmp_path):
    # `true` needs about 1 MiB; forked from ceiling's Python it carried Python's image (tens of MiB)
    # across its exec. The interposer is left out: it is loaded into the program, not part of it.
    r, doc = profile(tmp_path, "true", opts=["--no-interpose"])
    assert r.returncode == 0, r.stderr
    own = int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) * 1024
    peak = metric(doc, "app.rss.peak")["value"] * MIB
    assert peak < min(8 * MIB, own / 2), (peak, own)


# ---- signals --------------------------------------------------------------------------------------

PROGRAM = """
import os, signal, sys, time
log = open(sys.argv[1], "a", buffering=1)
def note(s, frame):
    log.write(signal.Signals(s).name + "\\n")
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
    signal.signal(s, note)
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
"""


def _terminal():
    """A pseudo-terminal made the controlling terminal of a new session: (master, options for Popen)."""
    master, slave = os.openpty()
    return master, slave, dict(stdin=slave, stdout=slave, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))


@needs_launcher
@pytest.mark.parametrize("name,to", [("SIGUSR1", "group"), ("SIGHUP", "group"), ("SIGINT", "group"),
                                     ("SIGINT", "terminal"), ("SIGINT", "ceiling"), ("SIGTERM", "ceiling")])
def test_a_signal_reaches_the_program_once_and_ceiling_reports(tmp_path, name, to):
    log, ready, stop, out = (tmp_path / n for n in ("log", "ready", "stop", "p.json"))
    master = slave = -1
    if to == "terminal":
        master, slave, streams = _terminal()
    else:
        streams = dict(stdout=subprocess.PIPE)
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--no-interpose",
                          "--save-json", str(out), "--", sys.executable, "-c", PROGRAM, str(log), str(ready),
                          str(stop)], stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=dict(os.environ, NO_COLOR="1"), **streams)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert ready.exists(), p.communicate(timeout=30)
        sig = getattr(signal, name)
        if to == "terminal":
            os.write(master, b"\x03")           # Ctrl-C typed: the kernel's SIGINT to the foreground group
        elif to == "group":
            os.killpg(p.pid, sig)               # a hangup, Slurm's --signal, kill -- -PGID
        else:
            os.kill(p.pid, sig)                 # ceiling's pid alone
        while time.monotonic() < deadline and not (log.exists() and log.read_text()) and p.poll() is None:
            time.sleep(0.05)
        time.sleep(2.5)                          # a doubled copy would come within ceiling's 1 s window
        stop.touch()
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        for fd in (master, slave):
            if fd >= 0:
                os.close(fd)
    assert log.read_text().split() == [name], err
    # ceiling survived and reported; the program exited 0, and so does ceiling: its exit status is
    # the program's, partial or not (the report says partial)
    assert p.returncode == 0, err
    doc = json.loads(out.read_text())
    got = doc["environment"]["profile"]["launch"]["signals"]
    assert [(s["signal"], s["passed_on"]) for s in got] == [(name, to == "ceiling")], got
    if to == "terminal":
        assert got[0]["how"] == "from the kernel (a terminal)" and doc["partial_reason"].startswith(
            "interrupted (Ctrl-C)")
    assert doc["partial"] == (name != "SIGUSR1")


@needs_launcher
def test_the_program_keeps_the_signals_its_parent_ignored(tmp_path):
    # under nohup (SIGHUP ignored) the program starts with SIGHUP ignored, as without ceiling
    r, doc = profile(tmp_path, "grep", "SigIgn", "/proc/self/status", preexec_fn=lambda: signal.signal(
        signal.SIGHUP, signal.SIG_IGN))
    ignored = int(r.stdout.split()[1], 16)
    assert ignored >> (signal.SIGHUP - 1) & 1 and not ignored >> (signal.SIGPIPE - 1) & 1
    r, doc = profile(tmp_path, "grep", "SigBlk", "/proc/self/status")
    assert int(r.stdout.split()[1], 16) == 0         # nothing ceiling blocked is left blocked
