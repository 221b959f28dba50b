"""The LD_PRELOAD interposer's runtime (csrc/interpose/), seen from real child processes.

Nothing is built here: the library is the one ``core.interpose_library_path()`` names
(CEILING_INTERPOSE_LIB, else ceiling/_core/libceiling_interpose.so beside the core), and
every test fails when it is not there (conftest's interposer_library: a broken build).
Each test runs a child with LD_PRELOAD and CEILING_INTERPOSE_OUT and reads the record the
child leaves (the format is documented in csrc/interpose/interpose.h). The null module's
ceil_ip_null_touch is a function of the library's own, so a Python child can drive the
per-thread counting through ctypes.
"""
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

import pytest

from ceiling import core

LIB = core.interpose_library_path()
# fails each test, with the reason, where the library is missing (never a skip)
NEEDS_LIB = pytest.mark.usefixtures("interposer_library")
pytestmark = NEEDS_LIB

TRUE = shutil.which("true")

TOUCH = "import ctypes; touch = ctypes.CDLL(None).ceil_ip_null_touch\n"


def _unescape(v):
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), v)


def _fields(words):
    out = {}
    for w in words:
        k, _, v = w.partition("=")
        v = _unescape(v)
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


def parse(text):
    """Records in file order: {"version", "process", "modules": {name: fields},
    "lines": {module: [fields, ...]}, "end"}."""
    records, rec = [], None
    for line in text.splitlines():
        word, *rest = line.split(" ")
        if word == "ceiling-interpose":
            rec = {"version": int(rest[0]), "modules": {}, "lines": {}}
            records.append(rec)
        elif word == "process":
            rec["process"] = _fields(rest)
        elif word == "module":
            f = _fields(rest)
            rec["modules"][f["name"]] = f
        elif word == "end":
            rec["end"] = _fields(rest)
        else:
            rec["lines"].setdefault(word, []).append(_fields(rest))
    return records


def run_child(argv, out, env_extra=None, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", "LD_PRELOAD")}
    env.update(LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out), **(env_extra or {}))
    return subprocess.run(argv, env=env, capture_output=True, timeout=120, **kw)


def python(code, out, **kw):
    return run_child([sys.executable, "-c", TOUCH + code], out, **kw)


def assert_silent_without_output(exe, tmp_path):
    """``exe DATA_DIR`` preloaded but with no CEILING_INTERPOSE_OUT: the wrappers only pass
    through, so the program's own errno checks pass and nothing is written (no record in the
    working directory, nothing on stderr)."""
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CEILING_INTERPOSE_OUT"}
    p = subprocess.run([str(exe), str(data)], env={**env, "LD_PRELOAD": str(LIB)}, cwd=cwd,
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stderr == b""
    assert list(cwd.iterdir()) == [] and list(data.iterdir()) == []


def module_lines(rec, module):
    """A module's lines of one record: {"class": {name: fields}, "hist": {name: buckets},
    "fn": {name: calls}}."""
    out = {"class": {}, "hist": {}, "fn": {}}
    for f in rec["lines"][module]:
        f = dict(f)
        if "class" in f:
            out["class"][f.pop("class")] = f
        elif "hist" in f:
            out["hist"][f.pop("hist")] = f
        else:
            out["fn"][f["fn"]] = f["calls"]
    return out


def only_record(path):
    recs = parse(path.read_text())
    assert len(recs) == 1, recs
    return recs[0]


@pytest.mark.skipif(TRUE is None, reason="no `true` program on PATH")
def test_a_program_that_does_nothing_leaves_one_record_naming_the_null_module(tmp_path):
    out = tmp_path / "rec"
    p = subprocess.Popen([TRUE], env={**os.environ, "LD_PRELOAD": str(LIB), "CEILING_INTERPOSE_OUT": str(out)})
    assert p.wait(timeout=60) == 0
    r = only_record(out)
    assert r["version"] == 1
    proc = r["process"]
    assert proc["pid"] == p.pid and proc["ppid"] == os.getpid() and proc["forked"] == 0
    assert proc["reason"] == "exit" and proc["signal"] == 0
    assert proc["exe"] == os.path.realpath(TRUE)
    assert proc["threads"] == 0 and proc["threads_lost"] == 0
    assert proc["end_ns"] >= proc["start_ns"] > 0
    assert r["modules"]["null"] == {"name": "null", "version": 1, "enabled": 1}
    assert r["lines"]["null"] == [{"flushes": 1, "calls": 0, "threads": 0}]
    assert r["end"] == {"pid": p.pid, "truncated": 0, "self_read": r["end"]["self_read"],
                        "self_reads": r["end"]["self_reads"]}


@pytest.mark.skipif(TRUE is None, reason="no `true` program on PATH")
def test_without_an_output_path_the_runtime_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CEILING_INTERPOSE_OUT"}
    p = subprocess.run([TRUE], env={**env, "LD_PRELOAD": str(LIB)}, cwd=tmp_path, capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stderr == b""
    assert list(tmp_path.iterdir()) == []


def test_per_thread_counts_are_summed_at_exit(tmp_path):
    out = tmp_path / "rec"
    code = ("import threading\n"
            "touch()\n"
            "ts = [threading.Thread(target=lambda: [touch() for _ in range(5)]) for _ in range(2)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n")
    p = python(code, out)
    assert p.returncode == 0, p.stderr
    r = only_record(out)
    assert (r["process"]["threads"], r["process"]["threads_lost"]) == (3, 0)
    # a thread that starts after the other ended takes over its slot, counts and all
    assert 2 <= r["process"]["slots"] <= 3
    [null] = r["lines"]["null"]
    assert (null["calls"], null["threads"]) == (11, r["process"]["slots"])


def test_threads_beyond_the_reserved_slots_get_more_slots_and_ended_ones_are_reused(tmp_path):
    """Issue 25: 2,000 threads counted 10,230 of 20,000 calls with 1,024 slots. Now slots
    are mapped as needed (200 threads at once with 64 reserved) and an ended thread's slot
    goes to the next thread with its counts (300 more, one after another)."""
    out = tmp_path / "rec"
    code = ("import threading\n"
            "touch()\n"
            "b = threading.Barrier(200)\n"
            "def work():\n"
            "    touch(); b.wait(); [touch() for _ in range(9)]\n"
            "ts = [threading.Thread(target=work) for _ in range(200)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n"
            "for _ in range(300):\n"
            "    t = threading.Thread(target=lambda: [touch() for _ in range(10)]); t.start(); t.join()\n")
    p = python(code, out, env_extra={"CEILING_INTERPOSE_THREADS": "64"})
    assert p.returncode == 0, p.stderr
    r = only_record(out)
    assert (r["process"]["threads"], r["process"]["threads_lost"]) == (501, 0)
    assert 201 <= r["process"]["slots"] < 300
    assert r["lines"]["null"][0]["calls"] == 1 + 200 * 10 + 300 * 10


def test_the_record_has_each_live_threads_times_as_the_kernel_counted_them(tmp_path):
    """The proc module (proc.c): every thread alive at the record, its life, time on a CPU and
    waiting for one, read from /proc/self/task with raw system calls. What lets rank 0's
    ceiling split the time of ranks its sampler never saw."""
    out = tmp_path / "rec"
    code = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "end = time.thread_time() + 0.3\n"
            "while time.thread_time() < end: pass\n")
    r = python(code, out)
    assert r.returncode == 0, r.stderr
    rec = only_record(out)
    tasks = [ln for ln in rec["lines"]["proc"] if "task" in ln]
    [summary] = [ln for ln in rec["lines"]["proc"] if "tasks" in ln]
    assert summary["tasks"] == summary["shown"] == len(tasks) >= 2 and summary["clk_tck"] > 0
    assert summary["maxrss_kb"] > 1000 and summary["rchar"] > 0          # python read its modules
    pid = rec["process"]["pid"]
    main = next(t for t in tasks if t["task"] == pid)
    sleeper = [t for t in tasks if t["task"] != pid]
    assert main["run_ns"] >= 0.29e9                        # thread_time is this thread's CPU time
    assert all(t["life_ns"] >= t["run_ns"] + t["runq_ns"] for t in tasks), tasks
    assert min(t["run_ns"] for t in sleeper) < 0.1e9      # the sleeping thread hardly ran
    if summary["schedstat"]:
        assert main["utime_ticks"] + main["stime_ticks"] >= 0.2 * summary["clk_tck"]


def test_a_forked_child_writes_a_record_of_its_own_calls(tmp_path):
    out = tmp_path / "rec"
    code = ("import os\n"
            "touch()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    touch(); touch(); touch()\n"
            "    raise SystemExit(0)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "assert status == 0, status\n"
            "touch()\n"
            "print(os.getpid(), pid)\n")
    p = python(code, out)
    assert p.returncode == 0, p.stderr
    parent_pid, child_pid = map(int, p.stdout.split())
    recs = {r["process"]["pid"]: r for r in parse(out.read_text())}
    assert set(recs) == {parent_pid, child_pid}
    child, parent = recs[child_pid]["process"], recs[parent_pid]["process"]
    assert (child["forked"], child["ppid"]) == (1, parent_pid)
    assert parent["forked"] == 0
    assert child["start_ns"] > parent["start_ns"]
    # the child counts from the fork on; the parent's call before it stays the parent's
    assert recs[child_pid]["lines"]["null"][0]["calls"] == 3
    assert recs[parent_pid]["lines"]["null"][0]["calls"] == 2


@pytest.mark.skipif(TRUE is None, reason="no `true` program on PATH")
def test_percent_p_in_the_path_is_the_pid(tmp_path):
    p = subprocess.Popen([TRUE], env={**os.environ, "LD_PRELOAD": str(LIB),
                                      "CEILING_INTERPOSE_OUT": str(tmp_path / "rec.%p.100%%")})
    assert p.wait(timeout=60) == 0
    assert [f.name for f in tmp_path.iterdir()] == [f"rec.{p.pid}.100%"]


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@pytest.mark.parametrize("sig,code", [
    (signal.SIGTERM, "import os, signal\ntouch()\nos.kill(os.getpid(), signal.SIGTERM)\n"),
    (signal.SIGSEGV, "touch()\nctypes.string_at(0)\n"),
], ids=["SIGTERM", "SIGSEGV"])
def test_a_fatal_signal_still_writes_the_record_and_still_kills(tmp_path, sig, code):
    out = tmp_path / "rec"
    p = python(code + "raise SystemExit(3)\n", out, preexec_fn=_no_core)
    assert p.returncode == -sig, (p.returncode, p.stderr)
    r = only_record(out)
    assert (r["process"]["reason"], r["process"]["signal"]) == ("signal", sig)
    assert r["lines"]["null"] == [{"flushes": 1, "calls": 1, "threads": 1}]
    assert r["end"]["truncated"] == 0


def test_the_core_never_loads_the_interposer():
    """Two libraries: the kernel core does not link the interposer (it would then run
    inside every Python process that measures)."""
    core_lib = core.library_path()
    assert core_lib.is_file(), f"the core is not built: {core_lib}"
    assert core_lib.resolve() != LIB.resolve()
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("no ldd")
    assert "libceiling_interpose" not in subprocess.run([ldd, str(core_lib)], capture_output=True,
                                                        text=True, timeout=60).stdout


def test_a_program_that_saves_and_restores_sigterm_runs_and_still_leaves_a_record_when_killed(tmp_path):
    """Issue 25: the runtime's SIGTERM handler showed as None to signal.getsignal, and
    signal.signal(SIGTERM, old) raised TypeError. It is hidden now, and still writes the
    record when the program is killed after restoring the default."""
    out = tmp_path / "rec"
    code = ("import os, signal\n"
            "old = signal.getsignal(signal.SIGTERM)\n"
            "assert old is signal.SIG_DFL, old\n"
            "signal.signal(signal.SIGTERM, lambda *a: None)\n"
            "signal.signal(signal.SIGTERM, old)\n"
            "touch()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n")
    p = python(code, out)
    assert p.returncode == -signal.SIGTERM, p.stderr
    r = only_record(out)
    assert (r["process"]["reason"], r["process"]["signal"]) == ("signal", signal.SIGTERM)
    assert r["lines"]["null"][0]["calls"] == 1


def test_a_child_that_ends_with_os__exit_leaves_its_record(tmp_path):
    """Issue 26: a fork + os._exit child's counts vanished (records were written only at
    exit handlers, which _exit skips)."""
    out = tmp_path / "rec"
    code = ("import os\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    [touch() for _ in range(1000)]\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "print(pid)\n")
    p = python(code, out)
    assert p.returncode == 0, p.stderr
    recs = {r["process"]["pid"]: r for r in parse(out.read_text())}
    child = recs[int(p.stdout)]
    assert (child["process"]["reason"], child["process"]["by"]) == ("exit", "_exit")
    assert child["lines"]["null"][0]["calls"] == 1000 and child["end"]["truncated"] == 0


def test_an_exec_keeps_the_old_images_counts_and_a_failed_one_counts_nothing_twice(tmp_path):
    """Issue 26: counts before an exec were lost. The record is written before it (reason
    exec); the new image writes its own (same pid, later start); when the exec fails the
    program's record at exit supersedes the exec one (same pid and start)."""
    from ceiling.probes import interpose_record
    out = tmp_path / "rec"
    code = ("import os, sys\n"
            "touch(); touch()\n"
            "try:\n"
            "    os.execv('/nonexistent/x', ['x'])\n"
            "except OSError:\n"
            "    pass\n"
            "touch(); touch(); touch()\n"
            "os.execv(sys.executable, [sys.executable, '-c', "
            "'import ctypes; t = ctypes.CDLL(None).ceil_ip_null_touch; t(); t(); t(); t()'])\n")
    p = python(code, out)
    assert p.returncode == 0, p.stderr
    recs = parse(out.read_text())
    assert [(r["process"]["reason"], r["lines"]["null"][0]["calls"]) for r in recs] == \
        [("exec", 2), ("exec", 5), ("exit", 4)]
    assert len({r["process"]["pid"] for r in recs}) == 1
    kept = interpose_record.latest(interpose_record.parse(out.read_text()))
    assert sorted((r.process.reason, r.lines["null"][0].calls) for r in kept) == [("exec", 5), ("exit", 4)]


def test_a_vfork_child_that_execs_does_not_write_its_parents_record(tmp_path):
    """Python's subprocess execs from a vfork child, which shares the parent's memory: a
    record written there would carry the parent's counts under the child's pid and mark
    the parent's as written. (A guard for the exec wrappers: the old runtime had none.)"""
    out = tmp_path / "rec"
    code = (f"import subprocess\ntouch(); touch()\nsubprocess.run([{TRUE!r}])\ntouch()\n")
    p = python(code, out)
    assert p.returncode == 0, p.stderr
    recs = parse(out.read_text())
    parent = [r for r in recs if r["process"]["exe"] == os.path.realpath(sys.executable)]
    assert [(r["process"]["reason"], r["lines"]["null"][0]["calls"]) for r in parent] == [("exit", 3)]


def test_notes_never_go_into_a_file_the_program_opened_on_fd_2(tmp_path):
    """Issue 25: with stderr closed and a data file opened in its place (fd 2), the
    runtime's note about a record it could not write landed in the program's data."""
    data = tmp_path / "data"
    code = (f"import os\nos.close(2)\nfd = os.open({str(data)!r}, os.O_WRONLY | os.O_CREAT, 0o600)\n"
            "assert fd == 2\nos.write(fd, b'payload')\n")
    p = python(code, tmp_path / "missing-dir" / "rec")
    assert p.returncode == 0
    assert data.read_bytes() == b"payload"


def test_the_record_is_written_when_the_program_used_every_descriptor(tmp_path):
    """Issue 25: at the fd limit the record's open failed (EMFILE) and the record was lost.
    The soft limit is raised to the hard one for that write, and put back."""
    out = tmp_path / "rec"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 100:
        pytest.skip(f"the hard fd limit is {hard}")
    code = ("import os, resource\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
            "fds = []\n"
            "try:\n"
            "    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\n"
            "except OSError as e:\n"
            "    assert e.errno == 24, e\n"
            "touch()\n")
    p = python(code, out)
    assert p.returncode == 0, p.stderr
    assert only_record(out)["lines"]["null"][0]["calls"] == 1


@pytest.mark.parametrize("call,by", [("_exit", "_exit"), ("_Exit", "_Exit"), ("quick_exit", None)])
def test_ending_without_exit_handlers_still_leaves_the_record(tmp_path, call, by):
    """_exit and _Exit skip atexit handlers (the runtime wraps them); quick_exit runs
    at_quick_exit ones (the runtime registers one) and ends in glibc's own _exit."""
    out = tmp_path / "rec"
    p = python(f"touch(); touch()\nctypes.CDLL(None).{call}(5)\n", out)
    assert p.returncode == 5, p.stderr
    r = only_record(out)
    assert (r["process"]["reason"], r["process"].get("by")) == ("exit", by)
    assert r["lines"]["null"][0]["calls"] == 2
