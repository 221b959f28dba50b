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
    assert doc["application"]["profile"]["launch"]["io_read_at_exit"] is True


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
    assert doc["application"]["profile"]["launch"]["how"].startswith("forked from ceiling's Python")


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
    got = doc["application"]["profile"]["launch"]["signals"]
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


@needs_launcher
def test_ceiling_survives_hangups_and_user_signals_from_start_to_end(tmp_path):
    # SIGHUP and SIGUSR1 to ceiling alone, again and again from the moment it first catches SIGHUP
    # until its report is written: before the program, while it runs (passed on: the program may
    # die of them) and after, while ceiling analyses and delivers. Ceiling itself never dies of them (it would
    # end with a negative status); those outside the program's run are noted in the run.
    out = tmp_path / "p.json"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                          str(out), "--", "sleep", "0.3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=dict(os.environ, NO_COLOR="1"))
    sent = 0
    try:
        # until the report is written: ceiling then only exits (the handlers go back in its last
        # milliseconds); the old ceiling caught them only while the program ran, and died after
        while p.poll() is None and not out.exists():
            try:
                if not sent:
                    with open(f"/proc/{p.pid}/status") as f:
                        caught = int(next(ln for ln in f if ln.startswith("SigCgt:")).split()[1], 16)
                if sent or caught >> (signal.SIGHUP - 1) & 1:
                    os.kill(p.pid, signal.SIGHUP if sent % 2 == 0 else signal.SIGUSR1)
                    sent += 1
            except (OSError, StopIteration):
                pass
            time.sleep(0.01)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert sent >= 2 and p.returncode >= 0, (p.returncode, err)
    doc = json.loads(out.read_text())
    outside = doc["application"]["profile"]["launch"]["signals_outside"]
    assert "after the program ended" in {s["when"] for s in outside}, outside
    assert {s["signal"] for s in outside} <= {"SIGHUP", "SIGUSR1"}


# ---- a process that execs: two images of one pid -------------------------------------------------

EXECS_ITSELF = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static void writes(const char *path, int n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i < n; i++)
        write(fd, "0123456789abcdef", 16);
    close(fd);
}
int main(int argc, char **argv)
{
    if (argc > 1) {                       /* the second image */
        writes("second", 5);
        return 0;
    }
    writes("first", 7);
    struct timespec t0, t;                /* 0.3 s on a CPU, which the second image's rusage still holds */
    if (!getenv("BURN"))
        goto again;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    do
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1e9 + (t.tv_nsec - t0.tv_nsec) < 3e8);
again:
    execl("/proc/self/exe", argv[0], "again", (char *)0);
    return 1;
}
"""


def execs_itself(tmp_path: Path) -> Path:
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    src, app = tmp_path / "app.c", tmp_path / "app"
    src.write_text(EXECS_ITSELF)
    subprocess.run([cc, "-O1", "-o", str(app), str(src)], check=True)
    return app


@needs_launcher
def test_a_shell_that_execs_the_program_keeps_both_its_images_calls(tmp_path):
    # the shell waits for sleep (a launcher, by the sampler: a parent hardly ever on a CPU), then
    # execs the program in its own pid, which execs itself once: the program's two images are not
    # the shell's, and each write is counted once
    app = execs_itself(tmp_path)
    r, doc = profile(tmp_path, "sh", "-c", f"sleep 0.5; exec {app}")
    assert r.returncode == 0, r.stderr
    io = doc["application"]["profile"]["io_calls"]
    assert io["write"]["calls"] == 7 + 5 and io["write"]["bytes"] == 12 * 16, io


def test_a_process_that_execed_counts_its_cpu_once_from_its_records(tmp_path):
    # the program's two records, as a rank the sampler did not watch gives them: the second image's
    # utime and main-thread run time already hold the first's
    import resource
    from ceiling.analysis.profile import Rusage, conclude
    from ceiling.analysis.profile_io import io_calls
    from ceiling.probes import interpose_record
    from ceiling.probes.proc_sampler import Sampled
    app = execs_itself(tmp_path)
    out = tmp_path / "rec"
    out.mkdir()
    env = dict(os.environ, BURN="1", LD_PRELOAD=str(core.interpose_library_path()),
               CEILING_INTERPOSE_OUT=str(out / "interpose.%p"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([str(app)], cwd=tmp_path, env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    exact = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    records = interpose_record.latest(interpose_record.read_dir(str(out)))
    assert sorted(r.process.reason for r in records) == ["exec", "exit"]
    assert io_calls(records)["write"]["calls"] == 12              # calls: every image's, summed
    metrics, _, _, b = conclude(Sampled(samples=1, interval_s=0.1), Rusage(0.0, 0.0, 0), 1.0, 2, others=records)
    m = {x.name: x.value for x in metrics}
    assert b["from_records"]["processes"] == 1 and b["from_records"]["earlier_images"] == 1
    assert m["app.cpu.user"] + m["app.cpu.system"] == pytest.approx(exact, abs=0.02)
    assert b["shares"]["on_cpu"] * b["thread_seconds"] == pytest.approx(exact, abs=0.02)


def test_the_loaders_reads_are_taken_off_once_per_image_or_said_not_to_be():
    from ceiling.analysis.profile_run import without_own_io
    from ceiling.probes.interpose_record import from_dicts
    io = {"rchar": 10_000, "wchar": 500, "syscr": 40}
    recs = [{"process": {"host": "n1", "pid": p}, "end": {"self_read": 100, "self_reads": 2}} for p in (1, 2)]
    recs.append({"process": {"host": "n2", "pid": 3}, "end": {"self_read": 100, "self_reads": 2}})
    # a child of fork runs its parent's image: its own reads are taken off, no loader's
    recs.append({"process": {"host": "n1", "pid": 4, "forked": 1}, "end": {"self_read": 0, "self_reads": 0}})
    recs = from_dicts(recs)
    out, said = without_own_io(io, recs, 300, "n1", {"rchar": 832, "syscr": 1, "how": "measured"})
    assert out == {"rchar": 10_000 - 200 - 2 * 832, "wchar": 200, "syscr": 40 - 4 - 2}
    assert said["loader"]["images"] == 2 and said["loader"]["read_bytes"] == 1664
    out, said = without_own_io(io, recs, 300, "n1", {"rchar": None, "syscr": None, "why": "it differed"})
    assert out["rchar"] == 10_000 - 200 and "not taken off: it differed" in said["loader"]["how"]
