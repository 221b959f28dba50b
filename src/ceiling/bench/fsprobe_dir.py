"""The probe's directory: ``ceiling-probe-<host>`` in ``--dir``, kept between runs.

It holds the data file (``data``, ``--data-size`` bytes, written, not sparse), the
pool of small files (``pool/f000000`` ...: ``--files`` of MD_BYTES each), a lock
(``.lock``) and a state line (``.state``). The parent is checked as the storage
bench checks its ``--dir`` (bench/storage_dir.check_dir: ours or root's, writable by
no one else unless sticky); the probe directory is ours, a directory, never a link
(PathError otherwise). One directory per host, so that ``srun --ntasks-per-node=1``
on a shared file system gives each node its own.

One probe per directory: ``.lock`` is held with a POSIX record lock (lockf: the lock
NFS and Lustre carry between clients) for the probe's life; a second probe is refused
(ProbeBusyError, its own exit code). ``.state`` says ``clean`` when the last probe
stopped cleanly (with the sizes it had), ``running`` while one runs; a start that
finds ``running`` (a probe killed with SIGKILL, perhaps mid-iteration, with one pool
file deleted or half written) checks every pool file and re-creates the missing or
short ones; a start that finds other sizes than its own fixes the data file and the
pool to them. ``clean`` (``--clean``) removes only the names above, then the
directory; anything else in it keeps the directory, said.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import socket
import stat as stat_mod
from dataclasses import dataclass
from typing import List, Optional

from ..core import probe as cprobe
from ..errors import BadValueError, PathError, ProbeBusyError
from ..machine.storage import MEMORY_FS, mount_of
from .storage_dir import check_dir

PREFIX = "ceiling-probe-"
DATA, POOL, LOCK, STATE = "data", "pool", ".lock", ".state"
MD_BYTES = 3901              # IO500's mdtest-hard file size, MD-Workbench's default too
XFER = 1 << 20               # io-probing's random read and write: 1 MiB
ALIGN = 4096
DEFAULT_DIRECT = 4 << 30     # the data file where O_DIRECT is taken


def dir_name() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname().split(".")[0]) or "host"
    return PREFIX + host


def pool_name(i: int) -> str:
    return f"f{i:06d}"


@dataclass
class Prepared:
    """What ``prepare`` found and did, for the probe's header."""

    path: str
    data_size: int
    files: int
    direct: bool                 # O_DIRECT accepted; else the page cache is dropped per range
    cache_mode: str              # in words
    fstype: str
    memory_fs: bool              # tmpfs and the like: a RAM probe, not a file-system probe
    repaired: int                # pool files re-created at this start
    created: List[str]           # what was made at this start ("data file", "pool of N files")


class ProbeDir:
    """The probe directory, locked for the life of the ``with``."""

    def __init__(self, parent: str):
        self.parent = parent
        self.path = os.path.join(parent, dir_name())
        self.lock_fd = -1

    # -- ownership and lock -------------------------------------------------------------------------
    def __enter__(self) -> "ProbeDir":
        check_dir(self.parent)
        try:
            os.mkdir(self.path, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise PathError(f"--dir {self.parent}: cannot create {dir_name()} in it: {e.strerror or e}") from None
        _check_ours(self.path)
        try:
            self.lock_fd = os.open(os.path.join(self.path, LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                                   | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise PathError(f"--dir {self.parent}: cannot write in {self.path}: {e.strerror or e}") from None
        try:
            fcntl.lockf(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read(self.lock_fd).strip() or "another process"
            os.close(self.lock_fd)
            self.lock_fd = -1
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise ProbeBusyError(f"--dir {self.parent}: {self.path} is being probed by {holder}; "
                                     "one probe per directory (stop it, or give another --dir)") from None
            raise PathError(f"--dir {self.parent}: cannot lock {self.path}: {e.strerror or e}") from None
        os.ftruncate(self.lock_fd, 0)
        os.pwrite(self.lock_fd, f"ceiling probe pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return self

    def __exit__(self, *exc) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)           # closing releases the lock
            self.lock_fd = -1

    # -- state ----------------------------------------------------------------------------------------
    def state(self) -> List[str]:
        try:
            with open(os.path.join(self.path, STATE)) as f:
                return f.read(256).split()
        except OSError:
            return []

    def set_state(self, *words: object) -> None:
        tmp = os.path.join(self.path, STATE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(" ".join(str(w) for w in words) + "\n")
        os.replace(tmp, os.path.join(self.path, STATE))

    # -- preparation ----------------------------------------------------------------------------------
    def default_size(self) -> "tuple[int, str]":
        """The data file's size when --data-size is not given, and why: DEFAULT_DIRECT where the file
        system takes O_DIRECT (no client cache can serve it); else min(2 x RAM, 10 % of the free
        space), so that the page cache cannot hold it either. An existing data file keeps its size
        (10 % of a free space that the file itself shrinks would move at every start)."""
        try:
            have = os.stat(os.path.join(self.path, DATA)).st_size
        except OSError:
            have = 0
        if have >= XFER and have % ALIGN == 0:
            return have, "the data file made by an earlier probe"
        if _direct_ok_here(self.path):
            return DEFAULT_DIRECT, "read with O_DIRECT"
        st = os.statvfs(self.path)
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        size = max(XFER, min(2 * ram, st.f_bavail * st.f_frsize // 10) // XFER * XFER)
        return size, (f"O_DIRECT refused here: min(2 x RAM = {2 * ram / (1 << 30):.1f} GiB, 10 % of the free "
                      "space), so that the page cache cannot hold it")

    def prepare(self, data_size: int, files: int) -> Prepared:
        """Make or fix the data file and the pool; mark the directory running. A disk that is full
        or fails is PathError (one line); a --data-size over the free space BadValueError, before writing."""
        try:
            have = os.stat(os.path.join(self.path, DATA)).st_size
        except OSError:
            have = 0
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize
        need = max(0, data_size - have) + files * ALIGN
        if need > free:
            raise BadValueError(f"--data-size {data_size / (1 << 20):.0f} MiB and --files {files}: more than the "
                                f"free space in {self.path} ({free / (1 << 20):.0f} MiB)")
        try:
            return self._prepare(data_size, files)
        except OSError as e:
            raise PathError(f"{self.path}: cannot prepare the probe's files: {e.strerror or e}") from None

    def _prepare(self, data_size: int, files: int) -> Prepared:
        st = self.state()
        created: List[str] = []
        if _make_data(os.path.join(self.path, DATA), data_size):
            created.append(f"a data file of {data_size / (1 << 20):.0f} MiB")
        pool = os.path.join(self.path, POOL)
        fresh = not os.path.isdir(pool)
        os.makedirs(pool, 0o700, exist_ok=True)
        repaired = 0
        if fresh or st != ["clean", str(data_size), str(files)]:
            self.set_state("running", data_size, files)       # a stop part way checks again next time
            repaired = _fix_pool(pool, files)
            if fresh:
                created.append(f"a pool of {files} files of {MD_BYTES} bytes")
                repaired = 0
        self.set_state("running", data_size, files)
        direct = _direct_ok(os.path.join(self.path, DATA))
        m = mount_of(self.path)
        fstype = m.fstype if m else "unknown"
        mode = ("O_DIRECT" if direct else
                "O_DIRECT refused here: each read's range dropped from the page cache first (posix_fadvise "
                "DONTNEED), each write followed by fdatasync")
        return Prepared(self.path, data_size, files, direct, mode, fstype, fstype in MEMORY_FS, repaired, created)

    def stopped(self, data_size: int, files: int) -> None:
        """The pool is whole again (the last iteration finished): the next start needs no check."""
        self.set_state("clean", data_size, files)


def _check_ours(path: str) -> None:
    try:
        st = os.lstat(path)
    except OSError as e:
        raise PathError(f"{path}: cannot be reached: {e.strerror or e}") from None
    if stat_mod.S_ISLNK(st.st_mode) or not stat_mod.S_ISDIR(st.st_mode):
        raise PathError(f"{path}: not a directory (a link or a file is never followed)")
    if st.st_uid != os.geteuid():
        raise PathError(f"{path}: owned by uid {st.st_uid}, not by you: another user's probe directory")


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode(errors="replace")
    except OSError:
        return ""


def _make_data(path: str, size: int) -> bool:
    """Write the data file to ``size`` bytes of non-zero data (a file system that compresses or
    skips zeros would not be measured); a shorter one is completed, a longer one cut. True when written."""
    try:
        have = os.stat(path).st_size
    except FileNotFoundError:
        have = -1
    if have == size:
        return False
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        chunk = os.urandom(XFER)
        off = max(0, have) // XFER * XFER
        if have > size:
            os.ftruncate(fd, size)
        while off < size:
            n = min(XFER, size - off)
            os.pwrite(fd, chunk[:n], off)
            off += n
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _fix_pool(pool: str, files: int) -> int:
    """Every pool file there with MD_BYTES; extra ones removed. How many were (re)created."""
    made = 0
    body = os.urandom(MD_BYTES)
    for i in range(files):
        p = os.path.join(pool, pool_name(i))
        try:
            st = os.lstat(p)
            if stat_mod.S_ISREG(st.st_mode) and st.st_size == MD_BYTES:
                continue
            os.unlink(p)
        except FileNotFoundError:
            pass
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
        made += 1
    for name in os.listdir(pool):
        if re.fullmatch(r"f[0-9]{6}", name) and int(name[1:]) >= files:
            os.unlink(os.path.join(pool, name))
    return made


def _direct_ok_here(directory: str) -> bool:
    """Whether the file system of ``directory`` takes O_DIRECT: one aligned read of a small file made there."""
    path = os.path.join(directory, ".direct-test")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"\x5a" * ALIGN)
        finally:
            os.close(fd)
        return _direct_ok(path)
    except OSError:
        return False
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def _direct_ok(path: str) -> bool:
    """Whether this file system takes O_DIRECT for the data file (one aligned read tried)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        cprobe.rw(fd, False, 0, ALIGN, True)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def clean(parent: str) -> Optional[str]:
    """Remove the probe directory of this host in ``parent`` (``--clean``): our names, then the directory.
    None when it is gone; else the one line that says what kept it."""
    path = os.path.join(parent, dir_name())
    if not os.path.lexists(path):
        return None
    with ProbeDir(parent) as pd:            # the lock: a running probe's directory is not removed under it
        pool = os.path.join(path, POOL)
        if os.path.isdir(pool) and not os.path.islink(pool):
            for name in os.listdir(pool):
                if re.fullmatch(r"f[0-9]{6}", name):
                    os.unlink(os.path.join(pool, name))
            try:
                os.rmdir(pool)
            except OSError:
                pass
        for name in (DATA, STATE, STATE + ".tmp", ".direct-test"):
            try:
                os.unlink(os.path.join(path, name))
            except FileNotFoundError:
                pass
        left = sorted(n for n in os.listdir(path) if n != LOCK)
        if left:
            return f"kept {path}: it holds files the probe did not create ({', '.join(left[:5])})"
        os.unlink(os.path.join(path, LOCK))
        pd.__exit__()
    os.rmdir(path)
    return None
