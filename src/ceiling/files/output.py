"""A file the user names for a report (--out, --save-json): refused before anything
is measured (``check``) and written by one function (``write``), by the type of
what is there, looked at once with lstat (a symbolic link is followed only where no
other user could have planted it, then the same rules apply to what it names):

- a name of one of this process's descriptors (/dev/stdout, /dev/fd/N, /proc/self/fd/N):
  written to that descriptor as it is, its offset and O_APPEND kept;
- nothing, or a regular file: a temporary file beside it (O_EXCL, its mode from the
  umask), then a rename over it; readers see the old file or the new one, never half;
- a character device (/dev/null, a terminal, /dev/stdout) or a FIFO: written
  through, never replaced (the rename used to leave a regular file where
  /dev/null was). A FIFO is opened without blocking, again until a reader comes,
  at most FIFO_WAIT_S; then PathError;
- a block device or a directory (or a socket): refused, PathError; as root,
  ``--out /dev/sda`` must never reach a disk.

The preflight opens nothing but a regular file's own path: opening a FIFO would
hand its reader an end of file, and opening some devices does something.
"""
from __future__ import annotations

import errno
import os
import stat
import time
import uuid
from typing import Optional, Tuple, Union

from ..errors import PathError

FIFO_WAIT_S = 10.0        # how long a FIFO may lack a reader before the write is given up
_FIFO_RETRY_S = 0.05

PathLike = Union[str, "os.PathLike[str]"]

REGULAR, NEW, THROUGH = "regular", "new", "through"


def _kind(st: os.stat_result) -> str:
    m = st.st_mode
    if stat.S_ISREG(m):
        return REGULAR
    if stat.S_ISCHR(m) or stat.S_ISFIFO(m):
        return THROUGH
    if stat.S_ISBLK(m):
        return "a block device: ceiling never writes to a disk; name a file"
    if stat.S_ISDIR(m):
        return "a directory"
    if stat.S_ISSOCK(m):
        return "a socket"
    return "not a file ceiling can write"


def _own_fd(path: str) -> Optional[int]:
    """The descriptor of this process that ``path`` names (/dev/stdout, /dev/stderr, /dev/fd/N,
    /proc/self/fd/N, /proc/<this pid>/fd/N), else None. Such a path is written to that
    descriptor as it is (its offset, O_APPEND kept): opening it again by name would truncate or
    replace the file a shell redirected it to (``--save-json /dev/stdout >> log``)."""
    norm = os.path.normpath(path)
    names = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
    if norm in names:
        return names[norm]
    head, _, tail = norm.rpartition("/")
    if tail.isdigit() and tail.isascii() and head in ("/dev/fd", "/proc/self/fd", f"/proc/{os.getpid()}/fd"):
        return int(tail)
    return None


def _fd_named(path: str) -> Optional[int]:
    """``_own_fd`` of the path, or of what a trusted link there names (a link to /proc/self/fd/1)."""
    fd = _own_fd(os.path.abspath(path))
    if fd is not None:
        return fd
    try:
        lst = os.lstat(path)
        if not stat.S_ISLNK(lst.st_mode) or not _trusted_link(path, lst):
            return None
        return _own_fd(os.path.join(os.path.dirname(os.path.abspath(path)), os.readlink(path)))
    except OSError:
        return None


def _trusted_link(path: str, lst: os.stat_result) -> bool:
    """A link ceiling may follow as root: made by this user or root, in a directory no other
    user can put a link in (not writable by others, or sticky with the link this user's own, as
    the kernel's protected_symlinks allows). Python's realpath is not the kernel's open: that
    guard never sees it, so it is applied here."""
    if lst.st_uid not in (os.geteuid(), 0):
        return False
    try:
        d = os.stat(os.path.dirname(os.path.abspath(path)) or "/")
    except OSError:
        return False
    others_write = d.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not others_write and d.st_uid in (os.geteuid(), 0):
        return True
    return bool(d.st_mode & stat.S_ISVTX) and lst.st_uid == os.geteuid()


def resolve(path: PathLike) -> Tuple[str, str, Optional[os.stat_result]]:
    """(what to write, how, its lstat): how is REGULAR or NEW (the atomic rename at the
    returned path) or THROUGH (a device or FIFO, opened by the returned path without following
    a link, and checked to be the same node). The path is looked at once (lstat): a name that
    was no link is renamed over or opened as itself, so a link planted afterwards is replaced,
    never followed. A link is followed only where no other user could have planted it
    (``_trusted_link``), then the same rules apply to what it names; PathError for anything
    refused."""
    path = os.fspath(path)
    target = path
    for _ in range(2):          # the name, then (a trusted link) the node it resolves to
        try:
            lst = os.lstat(target)
        except FileNotFoundError:
            return target, NEW, None
        except OSError as e:
            raise PathError(f"{path}: {e.strerror or e}") from None
        if not stat.S_ISLNK(lst.st_mode):
            how = _kind(lst)
            if how not in (REGULAR, THROUGH):
                shown = path if target == path else f"{path} (-> {target})"
                raise PathError(f"{shown}: is {how}")
            return target, how, lst
        if target != path or not _trusted_link(path, lst):
            raise PathError(f"{path}: is a symbolic link another user could have made (in a directory others "
                            "can write, or not yours): name the file itself")
        target = os.path.realpath(path)
    raise PathError(f"{path}: a symbolic link that does not resolve")


def _where(path: str) -> Tuple[Optional[int], Tuple[str, str, Optional[os.stat_result]]]:
    """(this process's open descriptor the path names, else None; else resolve()'s answer)."""
    fd = _fd_named(path)
    if fd is None:
        return None, resolve(path)
    try:
        os.fstat(fd)
    except OSError:
        raise PathError(f"{path}: descriptor {fd} is not open") from None
    return fd, (path, THROUGH, None)


def check(path: Optional[str], what: str) -> None:
    """Refuse, before measuring, an output path that cannot be written (one line, PathError,
    ``what`` names the option); None passes. Nothing is opened but a regular file's path."""
    if not path:
        return
    try:
        fd, (target, how, st) = _where(path)
    except PathError as e:
        raise PathError(f"{what} {e}") from None
    if fd is not None:
        return
    if how == THROUGH:
        if not os.access(target, os.W_OK):
            raise PathError(f"{what} {path}: not writable (permission denied)")
        return
    parent = os.path.dirname(target) or "."
    if not os.path.isdir(parent):
        raise PathError(f"{what} {path}: directory {parent} does not exist")
    # Try what write() will do, a new file beside it: access() says yes to root even where the
    # file system says no (/proc, read-only mounts).
    tmp = _temporary_name(target)
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError as e:
        raise PathError(f"{what} {path}: not writable ({e.strerror})") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def write(path: PathLike, data: Union[str, bytes], what: str = "") -> None:
    """Write ``data`` to ``path`` by the rules of the module docstring. PathError (one line,
    "cannot write {what}{path}: why") when it cannot be; a temporary file is never left
    behind (Ctrl-C included), and an existing file is left intact when the write fails."""
    path = os.fspath(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, (target, how, st) = _where(path)
    except PathError as e:
        raise PathError(f"cannot write {what}{e}") from None
    if fd is not None:
        try:
            _write_all(fd, raw)
        except OSError as e:
            raise _fail(what, path, e) from None
        return
    if how == THROUGH:
        _write_through(target, raw, what, st, path)
    else:
        _replace(target, raw, what, path)


def _temporary_name(target: str) -> str:
    """A new name beside ``target``, in the directory the rename happens in."""
    directory = os.path.dirname(os.path.abspath(target))
    return os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex[:8]}.tmp")


def _fail(what: str, path: str, e: OSError) -> PathError:
    return PathError(f"cannot write {what}{path}: {e.strerror or e}")


def _replace(target: str, raw: bytes, what: str, shown: str) -> None:
    tmp = _temporary_name(target)
    try:
        # 0o666: the umask decides the mode, as a plain open() would.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise _fail(what, shown, e) from None
    done = False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        done = True
    except OSError as e:
        raise _fail(what, shown, e) from None
    finally:
        if not done:          # also on Ctrl-C: never leave the temporary file behind
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_through(target: str, raw: bytes, what: str, st: os.stat_result, shown: str) -> None:
    """Write to the device or FIFO ``target`` (no link: resolve() saw it with lstat), opened
    without following a link and checked to be the very node resolve() saw: one swapped in
    meanwhile (a regular file, another device) is refused, never written."""
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW
    if stat.S_ISFIFO(st.st_mode):
        fd = _open_fifo(target, flags, what, shown)
    else:
        try:
            fd = os.open(target, flags | os.O_NONBLOCK)
            os.set_blocking(fd, True)
        except OSError as e:
            raise _fail(what, shown, e) from None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino, stat.S_IFMT(now.st_mode)) != (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode)):
            raise PathError(f"cannot write {what}{shown}: it was replaced while ceiling opened it")
        _write_all(fd, raw)
    except OSError as e:
        raise _fail(what, shown, e) from None
    finally:
        os.close(fd)


def _open_fifo(path: str, flags: int, what: str, shown: str) -> int:
    """The FIFO opened for writing once a reader has it open (O_NONBLOCK: ENXIO while none),
    then made blocking again; PathError after FIFO_WAIT_S without one."""
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(path, flags | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise _fail(what, shown, e) from None
            if time.monotonic() >= deadline:
                raise PathError(f"cannot write {what}{shown}: a FIFO that no process read within "
                                f"{FIFO_WAIT_S:g} s") from None
            time.sleep(_FIFO_RETRY_S)
            continue
        os.set_blocking(fd, True)
        return fd
