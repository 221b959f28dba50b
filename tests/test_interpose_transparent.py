"""Nothing a program can observe changes under the interposer (issue 25).

Small programs in tests/interpose_progs/ print what they see of their process: every
signal's disposition as queried (sigaction, the signal() family, Python's
signal.getsignal, Go's signal.Ignored), fd numbers of new opens, errno of failing
calls, a fork + _exit child's output, an exec, and their exit status or death by a
signal. Each runs twice, with LD_PRELOAD of the built interposer and
CEILING_INTERPOSE_OUT set, and without, and the two must agree byte for byte (stdout,
stderr, status); the preloaded run must also have left a record, so the comparison is
not of two plain runs. The Go programs are built when a Go toolchain is found (PATH or
/usr/local/go/bin) and skip with the reason otherwise; CI installs none, to keep its
time small.
"""
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling import core

LIB = core.interpose_library_path()
pytestmark = pytest.mark.usefixtures("interposer_library")     # fails where it is missing
PROGS = Path(__file__).parent / "interpose_progs"
CC = shutil.which("cc") or shutil.which("gcc")
GO = shutil.which("go")         # a Go toolchain on PATH; without one the Go cases skip, saying so


def _child_setup(ignore=()):
    def setup():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for s in ignore:
            signal.signal(s, signal.SIG_IGN)
    return setup


def observe(argv, tmp_path, preload, ignore=()):
    """(status, stdout, stderr) of argv, and the number of records it left."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT", "PYTHONFAULTHANDLER")}
    out = tmp_path / f"rec-{'on' if preload else 'off'}"
    if preload:
        env.update(LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out))
    p = subprocess.run([str(a) for a in argv], env=env, capture_output=True, timeout=120, cwd=tmp_path,
                       preexec_fn=_child_setup(ignore))
    records = out.read_text().count("ceiling-interpose ") if out.exists() else 0
    return (p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")), records


def assert_same(argv, tmp_path, ignore=(), record=True, stderr_lines=None):
    """stderr_lines: compare only its first lines (a Go crash report goes on with addresses), the
    runtime's thread number ("m=4": which OS thread took the signal, run to run) left out."""
    with_, records = observe(argv, tmp_path, True, ignore)
    without, _ = observe(argv, tmp_path, False, ignore)
    if stderr_lines:
        with_, without = ((rc, out, re.sub(r"\bm=\d+\b", "m=N", "\n".join(err.splitlines()[:stderr_lines])))
                          for rc, out, err in (with_, without))
    if record:
        assert records >= 1, "the preloaded run left no record: it was not interposed"
    assert with_ == without
    return without


@pytest.fixture(scope="module")
def c_observe(tmp_path_factory):
    if CC is None:
        pytest.skip("no C compiler (cc) on PATH")
    exe = tmp_path_factory.mktemp("c") / "observe"
    subprocess.run([CC, "-O0", "-o", str(exe), str(PROGS / "observe.c")], check=True)
    return exe


def _go_build(tmp_path_factory, what, cgo):
    if GO is None:
        pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go)")
    if cgo and CC is None:
        pytest.skip("no C compiler for cgo")
    d = tmp_path_factory.mktemp(what)
    exe = d / what
    env = {**os.environ, "CGO_ENABLED": "1" if cgo else "0", "GOFLAGS": "-mod=mod", "GO111MODULE": "off"}
    env.setdefault("GOCACHE", str(tmp_path_factory.getbasetemp() / "gocache"))
    p = subprocess.run([GO, "build", "-o", str(exe), str(PROGS / what / "main.go")], env=env,
                       capture_output=True, timeout=300)
    if p.returncode != 0:
        pytest.skip(f"go build failed: {p.stderr.decode(errors='replace')[-300:]}")
    return exe


@pytest.fixture(scope="module")
def go_cgo(tmp_path_factory):
    return _go_build(tmp_path_factory, "cgo", True)


@pytest.fixture(scope="module")
def go_pure(tmp_path_factory):
    return _go_build(tmp_path_factory, "pure", False)


@pytest.mark.parametrize("mode,status", [("exit", 3), ("_exit", 4), ("term", -signal.SIGTERM),
                                         ("segv", -signal.SIGSEGV)])
def test_a_c_program_sees_the_same_with_and_without_the_interposer(c_observe, tmp_path, mode, status):
    rc, out, err = assert_same([c_observe, mode], tmp_path)
    assert rc == status and "child status 7" in out and "start 15 DFL" in out


def test_a_c_program_sees_inherited_ignored_signals_and_so_does_the_image_it_execs(c_observe, tmp_path):
    rc, out, _ = assert_same([c_observe, "exec", c_observe, "exit"], tmp_path,
                             ignore=(signal.SIGHUP, signal.SIGTERM))
    assert rc == 3 and out.count("start 1 IGN") == 2 and out.count("start 15 IGN") == 2


@pytest.mark.parametrize("mode,status", [("exit", 3), ("_exit", 4), ("term", -signal.SIGTERM)])
def test_a_python_program_sees_the_same_with_and_without_the_interposer(tmp_path, mode, status):
    rc, out, err = assert_same([sys.executable, PROGS / "observe.py", mode], tmp_path)
    assert rc == status, err
    assert f"start {int(signal.SIGTERM)} <Handlers.SIG_DFL: 0>" in out and "child status 7" in out


def test_a_python_program_sees_inherited_ignored_signals(tmp_path):
    rc, out, err = assert_same([sys.executable, PROGS / "observe.py"], tmp_path, ignore=(signal.SIGHUP,))
    assert rc == 3 and f"start {int(signal.SIGHUP)} <Handlers.SIG_IGN: 1>" in out, err


@pytest.mark.parametrize("mode,status", [("exit", 3), ("segv", 2), ("term", -signal.SIGTERM)])
def test_a_go_program_with_cgo_sees_the_same_with_and_without_the_interposer(go_cgo, tmp_path, mode, status):
    """cgo on linux/amd64 sets and reads dispositions through libc's sigaction
    (x_cgo_sigaction), so the interposer's handlers were Go's 'found' handlers: a fault
    in C code was forwarded to them and the program died of SIGSEGV instead of Go's own
    report and exit status 2. Go ends with the exit_group system call, not exit(3), so
    only the SIGTERM run leaves a record (Go puts SIG_DFL back through libc and raises
    it: the interposer's handler stands in and writes it)."""
    rc, out, err = assert_same([go_cgo, mode], tmp_path, ignore=(signal.SIGHUP,), record=mode == "term",
                               stderr_lines=3)
    assert rc == status, err
    assert f"ignored {int(signal.SIGHUP)} true" in out


def test_a_pure_go_program_started_by_a_profiled_one_sees_the_same(c_observe, go_pure, tmp_path):
    """Pure Go is linked statically (the interposer never loads in it) and reads its
    dispositions with raw system calls: what it inherits from a profiled parent must be
    what it would inherit from the parent alone."""
    rc, out, _ = assert_same([c_observe, "exec", go_pure], tmp_path, ignore=(signal.SIGHUP,))
    assert rc == 3 and f"ignored {int(signal.SIGHUP)} true" in out and f"ignored {int(signal.SIGTERM)} false" in out
