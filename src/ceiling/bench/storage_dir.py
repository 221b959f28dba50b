"""The storage bench's run directory: a new ``ceiling-io-XXXXXX`` directory
in a checked parent (``--dir``, or $TMPDIR), removed whatever happens.

Safety comes first: the parent must exist, be a directory, and be one where
no one else can swap our directory for a link (files/private.py: ours or
root's, writable by no one else unless sticky; $TMPDIR that is not is stepped
around, --dir refused), the new one is made with mkdtemp (0700, never an
existing name), a path that is no longer our directory is unlinked, never
followed, and it is removed on success,
error and Ctrl-C, by an atexit hook if the interpreter exits some other way,
and on SIGTERM (made a KeyboardInterrupt when nobody else handles it).

Only what ceiling created is deleted: the C loops remove their own files
(also on an error or a cancel), this module removes the two files it writes
itself (OWN_FILES), then the directory with rmdir. Anything else found there
was put there by someone else: the directory is kept, and a line on stderr
names what is in it.

A run killed outright (SIGKILL, a node crash) cannot clean up. Its directory
holds an owner record (``.ceiling-owner``: host, pid, the pid's start time and
the boot id); ``leftovers`` finds such directories of this user whose process is
gone on this host, for the storage bench to name and ``--clean`` to remove.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import stat as stat_mod
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from ..errors import PathError, raise_terminated, signals_deferred
from ..files.private import check_parent, remove_tree, temp_parent
from ..sysfs import Root, read_text, stat_fields
from ..results.model import WARN, Finding

RUN_PREFIX = "ceiling-io-"
OWNER_FILE = ".ceiling-owner"
# The files this package writes itself (bench/storage_mpi.py's TOKEN_FILE is the second).
OWN_FILES = (OWNER_FILE, ".ceiling-group")


class RunDir:
    """A new ceiling-io-XXXXXX directory in a checked parent, removed whatever happens.

    Removed on leaving the ``with`` (success, error, KeyboardInterrupt); an
    atexit hook removes it if the interpreter exits some other way; SIGTERM,
    when nobody else handles it, becomes KeyboardInterrupt so that the same
    path runs.
    """

    def __init__(self, parent: Optional[str]):
        self.parent = parent
        self.path = ""
        self._old_term: Any = None
        self._hook: Callable[[], None] = lambda: None

    def __enter__(self) -> "RunDir":
        parent = self.parent
        if parent is not None:
            check_dir(parent)
        else:
            parent = temp_parent()          # $TMPDIR when no one else can swap our directory there
        # Made and registered for removal with signals deferred: a Ctrl-C between mkdtemp and
        # the registration left the directory behind (3 stops in 60 early in a run).
        try:
            if threading.current_thread() is threading.main_thread():
                try:
                    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                        self._old_term = signal.signal(signal.SIGTERM, raise_terminated)
                except (ValueError, OSError):
                    self._old_term = None
            with signals_deferred():
                self._make(parent)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _make(self, parent: Optional[str]) -> None:
        try:
            self.path = tempfile.mkdtemp(prefix=RUN_PREFIX, dir=parent)
        except OSError as e:
            raise PathError(f"--dir {parent}: cannot create a directory in it: {e.strerror or e}") from None
        path = self.path
        try:
            _write_owner(path)
        except OSError as e:
            _remove(path)                       # the owner file too, where it was made
            self.path = ""
            raise PathError(f"--dir {parent}: cannot write in it: {e.strerror or e}") from None
        self._hook = lambda: _remove(path)
        atexit.register(self._hook)

    def __exit__(self, *exc) -> None:
        try:
            _remove(self.path)
            atexit.unregister(self._hook)
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None


# The names the C loops give their files and directories (csrc/kernels/io_seq.c, io_random.c,
# io_meta.c, with the tags bench/storage.py passes): seq.fpp3.r0.t1, rand5.t0, md.unique7.r0/ ...
LOOP_FILE = re.compile(r"(seq\.[a-z]+[0-9]+\.r[0-9]+\.(t[0-9]+|shared)|rand[0-9]+\.t[0-9]+"
                       r"|queue\.(rand|seq)[0-9]+\.t[0-9]+|md\.(unique|shared)[0-9]+\.r[0-9]+)")


# What each tag's measurement is, in words (a stalled rank's message names it).
TAG_WORDS = {"seq.fpp": "sequential, a file per thread", "seq.shared": "sequential, one shared file",
             "seq.strided": "sequential, one shared file in strides", "rand": "random reads and writes",
             "queue.seq": "sequential with requests in flight", "queue.rand": "random with requests in flight",
             "md.unique": "metadata, a directory per rank", "md.shared": "metadata, one shared directory"}


def remove_abandoned(path: str) -> None:
    """Remove the run directory when the job ends at a deadline (cluster/watchdog.py): a
    rank that stopped answering never removes its files, so what the C loops name
    (LOOP_FILE) goes too; anything else keeps the directory, as in ``_remove``."""
    try:
        st = os.lstat(path)
        if not stat_mod.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            _remove(path)                   # a link put in its place is unlinked, never followed
            return
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        if not LOOP_FILE.fullmatch(name):
            continue
        p = os.path.join(path, name)
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                remove_tree(p)
            else:
                os.unlink(p)
        except OSError:
            pass
    _remove(path)


def check_dir(parent: str) -> None:
    """PathError unless ``parent`` is an existing directory (writability is tried by creating in it)."""
    try:
        isdir = stat_mod.S_ISDIR(os.stat(parent).st_mode)
    except FileNotFoundError:
        raise PathError(f"--dir {parent}: does not exist") from None
    except OSError as e:
        raise PathError(f"--dir {parent}: cannot be reached: {e.strerror or e}") from None
    if not isdir:
        raise PathError(f"--dir {parent}: not a directory")
    check_parent(parent, "--dir")


def _remove(path: str) -> None:
    """Remove the run directory: our own files, then rmdir. Something ceiling did not
    create still in it keeps it, with one line on stderr. (Under MPI every rank's C loop
    removes its files before the call's last agreement point: rank 0 leaves after.)
    A path that is no longer our directory (someone swapped a link in) is unlinked, not followed."""
    if not path:
        return
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat_mod.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        if stat_mod.S_ISLNK(st.st_mode):
            try:
                os.unlink(path)
            except OSError:
                pass
        return
    for name in OWN_FILES:
        try:
            os.unlink(os.path.join(path, name))
        except OSError:
            pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        try:
            names = sorted(os.listdir(path))
        except OSError:
            names = []
        shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        print(f"ceiling: kept {path}: it holds files ceiling did not create ({shown or 'unreadable'}); "
              "nothing in it was deleted", file=sys.stderr, flush=True)


def _boot_id() -> str:
    return read_text("/proc/sys/kernel/random/boot_id") or ""


def _start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat (clock ticks after boot): a pid reused since differs."""
    data = Root("/").raw(f"proc/{pid}/stat")
    try:
        return stat_fields(data)[19].decode() if data else ""
    except (ValueError, IndexError):
        return ""


def _write_owner(path: str) -> None:
    pid = os.getpid()
    fd = os.open(os.path.join(path, OWNER_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{socket.gethostname()} {pid} {_start_time(pid)} {_boot_id()}\n")


@dataclass
class Leftover:
    """A run directory of this user left by a ceiling process that is gone."""

    path: str
    bytes: int
    why: str


def leftovers(parent: Optional[str]) -> List[Leftover]:
    """The ceiling-io-* directories in ``parent`` (or $TMPDIR) that this user's ceiling
    left behind on this host: an owner record naming this host, and its process gone
    (no such pid, another start time, or an earlier boot). A directory of another host
    on a shared file system, or without a record, is never claimed."""
    base = parent if parent is not None else temp_parent()
    found: List[Leftover] = []
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith(RUN_PREFIX))
    except OSError:
        return found
    host, boot, uid = socket.gethostname(), _boot_id(), os.geteuid()
    for name in names:
        d = os.path.join(base, name)
        try:
            st = os.lstat(d)
            if not stat_mod.S_ISDIR(st.st_mode) or st.st_uid != uid:
                continue
            with open(os.path.join(d, OWNER_FILE)) as f:
                fields = f.read(4096).split()
        except OSError:
            continue
        if len(fields) < 2 or fields[0] != host or not fields[1].isdigit():
            continue
        pid, started = int(fields[1]), fields[2] if len(fields) > 2 else ""
        booted = fields[3] if len(fields) > 3 else ""
        if boot and booted and booted != boot:
            why = f"pid {pid} ran before the last reboot"
        elif not os.path.exists(f"/proc/{pid}"):
            why = f"pid {pid} is gone"
        elif started and _start_time(pid) != started:
            why = f"pid {pid} is gone (the number is another process's now)"
        else:
            continue                      # its ceiling is still running
        found.append(Leftover(d, _du(d), why))
    return found


def _du(path: str) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        for n in files:
            try:
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
            except OSError:
                pass
    return total


def clean(found: List[Leftover]) -> List[str]:
    """Remove leftovers (``--clean``); what could not be removed, one line each."""
    failed: List[str] = []
    for lo in found:
        try:
            shutil.rmtree(lo.path)
        except OSError as e:
            failed.append(f"{lo.path}: {e.strerror or e}")
    return failed


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def find_leftovers(opts: Any) -> List[Leftover]:
    """What killed runs of this user left in the parent; removed first with --clean."""
    found = leftovers(getattr(opts, "storage_dir", None))
    if found and getattr(opts, "storage_clean", False):
        failed = clean(found)
        if failed:
            raise PathError(f"--clean: could not remove {failed[0]}")
        return []
    return found


def held(found: List[Leftover]) -> str:
    return (f"{len(found)} ceiling-io-* director{'y' if len(found) == 1 else 'ies'} left by killed runs "
            f"hold{'s' if len(found) == 1 else ''} {sum(lo.bytes for lo in found) / (1 << 30):.2f} GiB")


def leftover_finding(found: List[Leftover]) -> Finding:
    listed = "; ".join(f"{lo.path} ({lo.bytes / (1 << 20):.0f} MiB, {lo.why})" for lo in found[:5])
    return Finding(
        id="storage.leftovers", status=WARN, title=f"storage: {held(found)}",
        evidence=listed + (f"; and {len(found) - 5} more" if len(found) > 5 else ""),
        why="A run killed outright (SIGKILL, a crash, a node reboot) cannot remove its files; they take "
            "space the next runs need.",
        fix="ceiling bench storage --clean (with the same --dir) removes them, or: rm -r "
            + " ".join(lo.path for lo in found[:5]))
