"""A file the user names for a report (--out, --save-json): refused before anything
is measured (``check``) and written by one function (``write``), by the type of
what is there (a symbolic link is resolved first, then the same rules):

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


def resolve(path: PathLike) -> Tuple[str, str, Optional[os.stat_result]]:
    """(what to write, how, its stat): how is REGULAR or NEW (the atomic rename at the
    returned path, the link resolved) or THROUGH (a device or FIFO, opened by the path
    given); PathError for anything refused."""
    path = os.fspath(path)
    try:
        st: Optional[os.stat_result] = os.stat(path)        # follows links, /proc/self/fd/N included
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise PathError(f"{path}: {e.strerror or e}") from None
    target = os.path.realpath(path) if os.path.islink(path) else path
    if st is None:
        return target, NEW, None
    how = _kind(st)
    if how == REGULAR and target != path:
        try:
            same = os.stat(target)
            if (same.st_dev, same.st_ino) != (st.st_dev, st.st_ino):
                # /proc/self/fd/1 to a file that was deleted, or that no path names the same: in place
                return path, THROUGH, st
        except OSError:
            return path, THROUGH, st
    if how not in (REGULAR, THROUGH):
        shown = path if target == path else f"{path} (-> {target})"
        raise PathError(f"{shown}: is {how}")
    return target, how, st


def check(path: Optional[str], what: str) -> None:
    """Refuse, before measuring, an output path that cannot be written (one line, PathError,
    ``what`` names the option); None passes. Nothing is opened but a regular file's path."""
    if not path:
        return
    try:
        target, how, st = resolve(path)
    except PathError as e:
        raise PathError(f"{what} {e}") from None
    if how == THROUGH:
        if not os.access(path, os.W_OK):
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
        target, how, st = resolve(path)
    except PathError as e:
        raise PathError(f"cannot write {what}{e}") from None
    if how == THROUGH:
        _write_through(path, raw, what, st)
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


def _write_through(path: str, raw: bytes, what: str, st: Optional[os.stat_result]) -> None:
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY
    fifo = st is not None and stat.S_ISFIFO(st.st_mode)
    if st is not None and stat.S_ISREG(st.st_mode):
        flags |= os.O_TRUNC                  # a file reached only through /proc/self/fd/N
    fd = _open_fifo(path, flags, what) if fifo else None
    if fd is None:
        try:
            fd = os.open(path, flags)
        except OSError as e:
            raise _fail(what, path, e) from None
    try:
        # Checked on what was opened: the path may have changed since it was looked at.
        kind = _kind(os.fstat(fd))
        if kind not in (REGULAR, THROUGH):
            raise PathError(f"cannot write {what}{path}: is {kind}")
        view = memoryview(raw)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as e:
        raise _fail(what, path, e) from None
    finally:
        os.close(fd)


def _open_fifo(path: str, flags: int, what: str) -> int:
    """The FIFO opened for writing once a reader has it open (O_NONBLOCK: ENXIO while none),
    then made blocking again; PathError after FIFO_WAIT_S without one."""
    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(path, flags | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise _fail(what, path, e) from None
            if time.monotonic() >= deadline:
                raise PathError(f"cannot write {what}{path}: a FIFO that no process read within "
                                f"{FIFO_WAIT_S:g} s") from None
            time.sleep(_FIFO_RETRY_S)
            continue
        os.set_blocking(fd, True)
        return fd
