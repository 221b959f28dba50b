"""The private cache of compiled MPI timing loops, and why a file in it may be loaded.

A shared library found in the cache is code ceiling runs, often as root on a
compute node, so nothing there is trusted because of where it lies:

- the cache directory (``$XDG_CACHE_HOME/ceiling``) is created 0700 and
  refused when it is a symbolic link, not ours, or writable by group or
  others; its parent may be a link, but must be ours or root's and not
  writable by others unless sticky (as /tmp is), so no one else can rename
  our directory away and put theirs in its place. A directory of someone
  else's is never chmod-ed, only refused (PathError, exit 4);
- every file is written under a name ``mkstemp`` made (O_EXCL, 0600) and
  renamed into place, never through a predictable name;
- beside each library ``<name>.sha256`` records its SHA-256 at build time;
  a library is loaded only when it is a regular file of ours, not writable
  by group or others, and hashes to its record (``digest_of``, ``verified``).

``expected_uid`` is the one owner the checks compare with: tests replace it
to stand for another user without needing a second account.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

from ..errors import PathError

RECORD_SUFFIX = ".sha256"
HINT = "set XDG_CACHE_HOME to a directory only you can write"


def expected_uid() -> int:
    """Who must own the cache and what is in it: the user running ceiling."""
    return os.geteuid()


def _writable_by_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _check_parent(base: Path) -> None:
    try:
        st = os.stat(base)          # XDG_CACHE_HOME itself may be a link (~/.cache -> /scratch/...)
    except OSError as e:
        raise PathError(f"cannot use the cache directory {base}: {e.strerror}") from None
    if st.st_uid not in (expected_uid(), 0):
        raise PathError(f"refusing the cache directory {base}: owned by uid {st.st_uid}, "
                        f"not by you (uid {expected_uid()}) or root; {HINT}")
    if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
        raise PathError(f"refusing the cache directory {base}: writable by others "
                        f"(mode {stat.S_IMODE(st.st_mode):04o}) and not sticky; {HINT}")


def check_dir(d: Path) -> None:
    """PathError unless ``d`` (not followed if a link) is a directory of ours only we can write."""
    _check_parent(d.parent)
    try:
        st = os.lstat(d)
    except OSError as e:
        raise PathError(f"cannot use the cache directory {d}: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise PathError(f"refusing the cache directory {d}: it is a symbolic link; {HINT}")
    if not stat.S_ISDIR(st.st_mode):
        raise PathError(f"refusing the cache directory {d}: not a directory; {HINT}")
    if st.st_uid != expected_uid():
        raise PathError(f"refusing the cache directory {d}: owned by uid {st.st_uid}, "
                        f"not by you (uid {expected_uid()}); {HINT}")
    if _writable_by_others(st):
        raise PathError(f"refusing the cache directory {d}: writable by group or others "
                        f"(mode {stat.S_IMODE(st.st_mode):04o}); {HINT}")


def private_dir(d: Path) -> Path:
    """``d`` created 0700 if missing (its parents as usual), then checked (check_dir)."""
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass                        # ours from an earlier run, or someone else's: check_dir tells
    except OSError as e:
        raise PathError(f"cannot create the cache directory {d}: {e.strerror}") from None
    check_dir(d)
    return d


def record_of(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def _read_own(path: Path) -> Optional[bytes]:
    """The content of ``path`` if it is a regular file of ours that only we can write, else None.
    Opened once without following a link; the checks are on that open file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EACCES):
            return None
        raise PathError(f"cannot read {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != expected_uid() or _writable_by_others(st):
            return None
        return f.read()


def digest_of(path: Path) -> Optional[str]:
    """SHA-256 of ``path`` if it may be trusted as a file (see _read_own), else None."""
    data = _read_own(path)
    return None if data is None else hashlib.sha256(data).hexdigest()


def verified(path: Path) -> bool:
    """Whether ``path`` may be loaded: its directory is ours and private (PathError if not),
    the file is ours, not writable by others, and hashes to its record.

    Between this check and the loader opening the file by name it could be
    swapped only by someone who can write in its directory: that directory
    is 0700 and ours (checked here, its parent too), which is what makes
    checking by path and loading by the same path meaningful."""
    check_dir(path.parent)
    rec = _read_own(record_of(path))
    if rec is None:
        return False
    want = rec.decode("ascii", errors="replace").strip()
    return digest_of(path) == want


def _write_new(d: Path, name: str, data: bytes) -> None:
    """``data`` into ``d/name`` by way of an O_EXCL 0600 temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, d / name)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(p) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def temporary(target: Path) -> Path:
    """A new empty file (O_EXCL, 0600) beside ``target`` for a compiler to write into."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    return Path(tmp)


def install(tmp: Path, target: Path) -> str:
    """Move the freshly written ``tmp`` to ``target`` and record its digest; returns the digest.

    ``tmp`` is made ours-only first (a compiler that unlinks and recreates its
    output gives it the umask's mode). A stale or foreign ``target``, a link
    included, is replaced by the rename, never opened; PathError if it cannot be."""
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise PathError(f"cannot read the compiled {tmp}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != expected_uid():
            raise PathError(f"the compiled {tmp} is not a regular file of yours")
        os.fchmod(f.fileno(), 0o600)
        digest = hashlib.sha256(f.read()).hexdigest()
    try:
        os.replace(tmp, target)
        _write_new(target.parent, record_of(target).name, (digest + "\n").encode())
    except OSError as e:
        raise PathError(f"cannot replace {target} in the cache: {e.strerror}") from None
    return digest
