"""A program started in a session and process group of its own (Instruments.own_group: the
re-runs of `ceiling profile --experiments`), as observe/run.py starts it: forked from
ceiling's Python (subprocess, no ceiling-launch between: nothing but its wall time, wait4's
rusage and its exit status is asked of it), its input /dev/null (no terminal needed), with a
deadline past which the group is killed, and a watcher called every ``look.wait_s`` while it
runs (probes/rerun.Footprint). On any exception meanwhile (Ctrl-C, a SIGTERM made
KeyboardInterrupt, the deadline) the group is killed before it goes on: a group of its own,
because the program's children (a shell's, mpirun's) must go with it, and Ctrl-C at the
terminal then reaches ceiling only, which ends the run itself."""
from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

from .model import Overdue

PR_SET_THP_DISABLE = 41         # linux/prctl.h; inherited by fork and kept across exec


def start(cmd: Sequence[str], exe: str, env: Dict[str, str], discard_output: bool = True,
          no_thp: bool = False, output: Optional[str] = None) -> subprocess.Popen:
    """``cmd`` started in a session of its own; ``no_thp``: with PR_SET_THP_DISABLE (set on
    ceiling around the fork, inherited by the child and kept across its exec). OSError when it
    cannot be started; ``output``: its standard output and error written to this file."""
    if output:
        with open(output, "wb") as f, thp_disabled(no_thp):
            return subprocess.Popen(list(cmd), executable=exe, env=env, stdin=subprocess.DEVNULL, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    out = subprocess.DEVNULL if discard_output else None
    with thp_disabled(no_thp):
        return subprocess.Popen(list(cmd), executable=exe, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=out, start_new_session=True)     # Popen's process_group is Python 3.11's


def wait(p: subprocess.Popen, t0: float, deadline_s: Optional[float] = None,
         look: Any = None) -> Tuple[int, Any, float]:
    """(wait status, wait4's rusage, seconds from ``t0`` to its end) of ``p``. Past ``deadline_s``
    after ``t0`` its process group is killed and Overdue raised; ``look(pgid)`` is called every
    ``look.wait_s`` while it runs; on any exception its group is killed before it goes on."""
    try:
        fd: Optional[int] = os.pidfd_open(p.pid)
    except (OSError, AttributeError):
        fd = None                       # before Linux 5.3: wait4 polled every 5 ms
    try:
        next_look = t0 + look.wait_s if look else None
        while True:
            now = time.monotonic()
            ends = [x for x in (t0 + deadline_s if deadline_s else None, next_look) if x is not None]
            timeout = max(0.0, min(ends) - now) if ends else None
            if fd is not None:
                select.select([fd], [], [], timeout)
            else:
                time.sleep(min(0.005, timeout) if timeout is not None else 0.005)
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                wall = time.monotonic() - t0
                p.returncode = os.waitstatus_to_exitcode(status)
                return status, ru, wall
            now = time.monotonic()
            if deadline_s and now - t0 >= deadline_s:
                raise Overdue(f"a re-run passed its deadline of {deadline_s:.0f} s")
            if look and next_look is not None and now >= next_look:
                look(p.pid)
                next_look = now + look.wait_s
    except BaseException:
        _kill_group(p)
        raise
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def thp_disabled(on: bool) -> Iterator[None]:
    """PR_SET_THP_DISABLE on ceiling through the block, when ``on``: a process started in it
    inherits it and keeps it across its exec."""
    if not on:
        yield
        return
    _prctl_thp_disable(True)
    try:
        yield
    finally:
        _prctl_thp_disable(False)


def _prctl_thp_disable(on: bool) -> None:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, int(on), 0, 0, 0)


def _kill_group(p: subprocess.Popen) -> None:
    """SIGKILL to the program's process group, and the leader reaped."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    if p.returncode is None:
        try:
            _, status = os.waitpid(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            pass
