"""How `ceiling profile` starts the program, waits for it and passes signals on.

The program is started from ceiling-launch (csrc/launch/launch.c), a small C
process between ceiling and the program, not forked from ceiling's Python:

- its peak RSS (wait4's ru_maxrss) is then its own: Linux carries the high-water
  mark of the image a process had before its exec, and a fork of Python is ~16 MiB;
- its I/O totals are read once, at its exit: the launcher sees it end with
  waitid(WNOWAIT) and reads /proc/PID/io while it is a zombie, which holds its
  own bytes and those of every descendant it waited for (the kernel adds a reaped
  child's to its parent's), each once; then wait4 reaps it. Descendants no one
  waited for (orphans, daemons) are not in them: the sampler says which left;
- it tells signals sent to the process group from those sent to ceiling alone.

The signal rule (README, "ceiling profile"): ceiling survives SIGHUP, SIGINT,
SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 and SIGALRM while the program runs, and
always reports. A signal sent to the whole process group (a terminal's Ctrl-C or
hangup, ``kill -- -PGID``, Slurm's ``--signal`` or scancel signalling every pid
of the step) has reached the program already, and the launcher, in the same
group, gets it too; one sent to ceiling's pid alone does not reach the launcher.
So a signal ceiling gets is passed on to the program only when the launcher did
not get the same signal within ``SAME_SIGNAL_S`` of it; never twice. The
program's dispositions are its own (a program started under nohup ignores
SIGHUP; one passed on is sent with kill, as any sender's would be).

Without the launcher (not built) the program is forked from Python as before:
its I/O totals are still read once at its exit (waitid WNOWAIT here), its peak
RSS has Python's floor, and of the signals only SIGINT is taken as the
terminal's (not passed on): the others are passed on.
"""
from __future__ import annotations

import errno
import os
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

WATCHED = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM")
SAME_SIGNAL_S = 1.0          # ceiling's copy and the launcher's of one group signal arrive this close
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)     # Python ignores them; a program starts with them at default
PRELOAD_MARK = "CEILING_LAUNCH_PRELOAD"         # LD_PRELOAD for the program, kept out of the launcher


class LauncherFailed(OSError):
    """ceiling-launch itself could not run (not the program): start it from here instead."""


@dataclass
class Exit:
    """How the program ended, and its exact figures (wait4's, for it and every descendant
    it waited for). ``io``: its /proc/PID/io at its exit ({} when unread: ``io_why``)."""

    status: int
    user_s: float
    system_s: float
    maxrss_bytes: int
    io: Dict[str, int] = field(default_factory=dict)
    io_why: str = ""
    how: str = ""                                   # how they were taken, in words
    signals: List[dict] = field(default_factory=list)   # what ceiling got, and what it did

    def describe(self) -> dict:
        return {"how": self.how, "io_read_at_exit": bool(self.io), "io_why": self.io_why,
                "signals": self.signals}


def signal_name(sig: int) -> str:
    """A signal's name ("SIGKILL"), or "signal N" for a number Python has no name for."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class _Handlers:
    """Ceiling's own handler for ``names`` from ``_install`` to ``_restore`` (main thread only:
    Python runs handlers there). A signal ignored when ceiling started (nohup) stays ignored,
    and one whose handler was set outside Python is left alone."""

    def __init__(self, names: Sequence[str]):
        self.signals = [getattr(signal, n) for n in names if hasattr(signal, n)]
        self._old: Dict[int, object] = {}

    def _install(self) -> None:
        import threading
        if threading.current_thread() is not threading.main_thread():
            return
        for s in self.signals:
            old = signal.getsignal(s)
            if old == signal.SIG_IGN or old is None:
                continue
            self._old[s] = old
            signal.signal(s, self._handler)

    def _restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}

    def _handler(self, signum, frame) -> None:
        raise NotImplementedError


class Watch(_Handlers):
    """Ceiling's handlers for WATCHED while the program runs: each signal is noted with its
    time and wakes the waiting loop; ceiling survives it. ``forward``, when set, is called
    from the handler itself (the fallback without the launcher)."""

    def __init__(self, names: Sequence[str] = WATCHED):
        super().__init__(names)
        self.got: List[Tuple[int, float]] = []
        self.forward: Optional[Callable[[int], None]] = None
        self.r = self.w = -1

    def __enter__(self) -> "Watch":
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        self._install()
        return self

    def __exit__(self, *exc) -> None:
        self._restore()
        os.close(self.r)
        os.close(self.w)

    def _handler(self, signum, frame) -> None:
        self.got.append((signum, time.monotonic()))
        if self.forward is not None:
            self.forward(signum)
        try:
            os.write(self.w, b"s")
        except OSError:
            pass

    def take(self) -> List[Tuple[int, float]]:
        out, self.got = self.got, []
        try:
            while os.read(self.r, 64):
                pass
        except OSError:
            pass
        return out


OUTSIDE = ("SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM")   # noted, not fatal, from ceiling's start to its end


class Noted(_Handlers):
    """Ceiling's handlers for OUTSIDE around the whole of `ceiling profile`: a hangup, a batch
    system's warning signal (Slurm's --signal, SIGUSR1 by default) or an alarm that comes while
    ceiling prepares, analyses or delivers is noted, not fatal. ``Watch`` takes over while the
    program runs and gives them back after. One caught here is at its default in the program
    (exec resets a caught signal), as without ceiling."""

    def __init__(self, names: Sequence[str] = OUTSIDE):
        super().__init__(names)
        self.got: List[int] = []

    def __enter__(self) -> "Noted":
        self._install()
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _handler(self, signum, frame) -> None:
        self.got.append(signum)

    def take(self) -> List[str]:
        """The names of the signals noted since the last take, in order."""
        out, self.got = self.got, []
        return [signal_name(s) for s in out]


class _Lines:
    """Lines from the launcher's report pipe."""

    def __init__(self, fd: int):
        self.fd, self.buf, self.eof = fd, b"", False

    def next(self) -> Optional[str]:
        """The next whole line, reading as needed (blocking); None at EOF."""
        while b"\n" not in self.buf and not self.eof:
            self.feed()
        return self.pop()

    def feed(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except InterruptedError:
            return
        if not data:
            self.eof = True
        self.buf += data

    def pop(self) -> Optional[str]:
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")


class Launched:
    """A program started through ceiling-launch: ``pid`` is the program's, ``launcher``
    the launcher's (ceiling's child)."""

    def __init__(self, launcher: int, pid: int, lines: _Lines, cmd: int):
        self.launcher, self.pid, self._lines, self._cmd = launcher, pid, lines, cmd

    def wait(self, watch: Optional[Watch] = None) -> Exit:
        """Until the program ends, passing on the signals ceiling alone got (the rule in
        the module's docstring); then its exit status and figures."""
        mine: List[Tuple[int, float]] = []              # ceiling got these, not matched yet
        theirs: List[Tuple[int, float, str]] = []       # the launcher got these
        signals: List[dict] = []

        def settle(now: float, ended: bool) -> None:
            """Pair each signal ceiling got with the launcher's copy (sent to the group: the
            program has it), else, once SAME_SIGNAL_S has passed, pass it on."""
            nonlocal theirs
            for m in list(mine):
                twin = next((t for t in theirs if t[0] == m[0] and abs(t[1] - m[1]) <= SAME_SIGNAL_S), None)
                if twin is not None:
                    theirs.remove(twin)
                    mine.remove(m)
                    signals.append({"signal": signal_name(m[0]), "sent_to": "the process group", "passed_on": False,
                                    "how": twin[2]})
                elif now - m[1] >= SAME_SIGNAL_S and not ended:
                    mine.remove(m)
                    self._send(m[0])
                    signals.append({"signal": signal_name(m[0]), "sent_to": "ceiling alone", "passed_on": True})
            theirs = [t for t in theirs if now - t[1] < 2 * SAME_SIGNAL_S]

        poller = select.poll()
        poller.register(self._lines.fd, select.POLLIN)
        if watch is not None:
            poller.register(watch.r, select.POLLIN)
        line = None
        while True:
            if watch is not None:
                mine += watch.take()
            line = self._lines.pop()
            while line is not None and not line.startswith("exit "):
                if line.startswith("signal "):
                    _, sig, code, sender = (line.split() + ["", "", ""])[:4]
                    if sig.isdigit():
                        theirs.append((int(sig), time.monotonic(),
                                       "from the kernel (a terminal)" if code == "128" else f"from pid {sender}"))
                line = self._lines.pop()
            now = time.monotonic()
            ended = line is not None or self._lines.eof
            settle(now, ended)
            if ended:
                break
            # wakes for the launcher's lines, a signal ceiling got (its handler writes to watch.r),
            # or the end of a signal's SAME_SIGNAL_S
            timeout = max(0.0, min(m[1] + SAME_SIGNAL_S for m in mine) - now) if mine else None
            if any(fd == self._lines.fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)):
                self._lines.feed()
        for m in mine + (watch.take() if watch is not None else []):
            signals.append({"signal": signal_name(m[0]), "sent_to": "unknown", "passed_on": False,
                            "why": "the program had ended"})
        try:
            os.close(self._cmd)
        except OSError:
            pass
        os.close(self._lines.fd)
        _, lstatus, lru = _wait4(self.launcher)
        if line is None:
            # the launcher was killed (by the OOM killer, a kill -9): the program's end is unknown
            return Exit(lstatus, lru.ru_utime, lru.ru_stime, lru.ru_maxrss * 1024, {}, "the launcher ended first",
                        how=f"ceiling-launch ended ({_status_words(lstatus)}) before the program: its exit "
                            "status and figures are the launcher's", signals=signals)
        kv = dict(x.partition("=")[::2] for x in line.split()[1:])
        io = {k: int(v) for k, v in kv.items() if k not in ("status", "utime_us", "stime_us", "maxrss_kb", "io_errno")
              and v.lstrip("-").isdigit()}
        why = os.strerror(int(kv["io_errno"])) if kv.get("io_errno", "").isdigit() else ""
        return Exit(int(kv.get("status", 0)), int(kv.get("utime_us", 0)) / 1e6, int(kv.get("stime_us", 0)) / 1e6,
                    int(kv.get("maxrss_kb", 0)) * 1024, io, why,
                    how="forked from ceiling-launch; wait4 rusage; /proc/PID/io read once as a zombie "
                        "(waitid WNOWAIT), waited-for descendants included",
                    signals=signals)

    def _send(self, sig: int) -> None:
        try:
            os.write(self._cmd, bytes([sig]))
        except OSError:
            pass

    def abandon(self) -> None:
        """Give up before the go: the launcher and its child exit without the exec."""
        for fd in (self._cmd, self._lines.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        _wait4(self.launcher)


def start(launcher: str, argv: Sequence[str], exe: str, env: Mapping[str, str],
          before_exec: Callable[[int], object]) -> Tuple[Launched, object]:
    """Start ``argv`` (``exe``: a path, or a name searched in env's PATH) from ``launcher``;
    ``before_exec(pid)`` runs while the program waits before its exec (the hardware counters
    are opened on it then). (Launched, what before_exec returned). Raises OSError with the
    errno of a failed exec (nothing left behind then)."""
    watched = {getattr(signal, n) for n in WATCHED if hasattr(signal, n)}
    ctl_r, ctl_w = os.pipe()
    cmd_r, cmd_w = os.pipe()
    lenv = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    if "LD_PRELOAD" in env:
        lenv[PRELOAD_MARK] = env["LD_PRELOAD"]
    # Blocked from here into the launcher (a mask survives exec), which would otherwise die of a
    # group signal before it blocks them itself; the program gets them unblocked.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        os.set_inheritable(ctl_w, True)
        os.set_inheritable(cmd_r, True)
        unblock = ",".join(str(int(s)) for s in sorted(watched - set(old)))
        lpid = os.posix_spawn(launcher, [launcher, str(ctl_w), str(cmd_r), ",".join(str(int(s)) for s in
                                         sorted(watched)), unblock, exe, *argv], lenv, setsigdef=RESTORED)
    except OSError as e:
        for fd in (ctl_r, cmd_w):
            os.close(fd)
        raise LauncherFailed(e.errno, e.strerror, launcher) from None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        os.close(ctl_w)
        os.close(cmd_r)
    lines = _Lines(ctl_r)
    first = lines.next() or ""
    if not first.startswith("pid "):
        child = Launched(lpid, -1, lines, cmd_w)
        child.abandon()
        code = int(first.split()[1]) if first.startswith("error ") and first.split()[1].isdigit() else errno.ECHILD
        raise LauncherFailed(code, os.strerror(code), launcher)
    child = Launched(lpid, int(first.split()[1]), lines, cmd_w)
    try:
        opened = before_exec(child.pid)
    except BaseException:
        child.abandon()
        raise
    try:
        os.write(cmd_w, b"g")
    except OSError:
        pass
    second = lines.next() or ""
    if second != "started":
        child.abandon()
        code = int(second.split()[1]) if second.startswith("error ") and second.split()[1].isdigit() else errno.ECHILD
        raise OSError(code, os.strerror(code), exe)
    return child, opened


def fork(argv: Sequence[str], exe: str, env: Mapping[str, str],
         before_exec: Callable[[int], object]) -> Tuple[int, object]:
    """The fallback to ``start``: fork from here; the child waits on a pipe while
    ``before_exec(pid)`` runs, restores the signals Python ignores and execs; an exec failure
    comes back through a close-on-exec pipe, as subprocess reports it. (pid, what
    before_exec returned); OSError with the exec's errno (nothing left behind then)."""
    go_r, go_w = os.pipe()                    # both close on exec (PEP 446)
    err_r, err_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (go_r, go_w, err_r, err_w):
            os.close(fd)
        raise
    if pid == 0:
        _child(list(argv), exe, env, go_r, err_w, (go_w, err_r))
    os.close(go_r)
    os.close(err_w)
    try:
        opened = before_exec(pid)
        try:
            os.write(go_w, b"g")
        except BrokenPipeError:               # it died before its exec: its wait status will say how
            pass
        os.close(go_w)
        go_w = -1
        failure = os.read(err_r, 64)          # EOF at the exec, or the errno written at once before _exit
    except BaseException:
        if go_w >= 0:
            os.close(go_w)                    # the child reads EOF and exits without exec
        os.close(err_r)
        _reap(pid, kill=go_w < 0)
        raise
    os.close(err_r)
    if failure:
        _reap(pid, kill=False)
        code = int(failure) if failure.isdigit() else errno.ENOEXEC
        raise OSError(code, os.strerror(code), exe)
    return pid, opened


def _child(argv: List[str], executable: str, env: Mapping[str, str], go: int, report: int,
           parents: Tuple[int, int]) -> None:
    """In the forked child: wait for the parent's go (EOF: it gave up), restore the signals
    Python ignores, exec; on failure send the errno up ``report`` (close-on-exec). Never returns."""
    try:
        for fd in parents:
            os.close(fd)
        if os.read(go, 1) == b"g":
            for s in RESTORED:
                signal.signal(s, signal.SIG_DFL)
            try:
                if "/" in executable:
                    os.execve(executable, argv, env)
                else:
                    os.execvpe(executable, argv, env)
            except OSError as e:
                os.write(report, str(e.errno or errno.ENOEXEC).encode())
    finally:
        os._exit(127)


def _reap(pid: int, kill: bool) -> None:
    """Reap a child that is given up; ``kill``: it may be past its exec already."""
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


def wait_direct(pid: int, watch: Optional[Watch] = None) -> Exit:
    """The fallback: ``pid`` is ceiling's own child. Its /proc/PID/io is read once, as a
    zombie (waitid WNOWAIT), then it is reaped. SIGINT is taken as the terminal's (the
    program has it already); the other signals are passed on as they come."""
    signals: List[dict] = []
    if watch is not None:
        def forward(sig: int) -> None:
            passed = sig != signal.SIGINT
            if passed:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            signals.append({"signal": signal_name(sig), "sent_to": "unknown", "passed_on": passed})
        watch.forward = forward
    try:
        while True:
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
        io, why = read_io(pid)
        _, status, ru = _wait4(pid)
    finally:
        if watch is not None:
            watch.forward = None
    return Exit(status, ru.ru_utime, ru.ru_stime, ru.ru_maxrss * 1024, io, why,
                how="forked from ceiling's Python (ceiling-launch is not built, or did not run: the peak RSS "
                    "is at least Python's); wait4 rusage; /proc/PID/io read once as a zombie (waitid WNOWAIT)",
                signals=signals)


def read_io(pid: int, proc: str = "/proc") -> Tuple[Dict[str, int], str]:
    """/proc/PID/io as numbers, and why not ("" when read)."""
    try:
        with open(f"{proc}/{pid}/io") as f:
            return {k: int(v) for k, _, v in (line.partition(":") for line in f) if v.strip().isdigit()}, ""
    except OSError as e:
        return {}, e.strerror or str(e)


def _wait4(pid: int):
    while True:
        try:
            return os.wait4(pid, 0)
        except InterruptedError:
            continue


def _status_words(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal_name(os.WTERMSIG(status))}"
    return f"exit {os.WEXITSTATUS(status)}"
