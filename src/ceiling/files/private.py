"""The directories ceiling makes for itself (the profile's records, the interposer's
calibration, the storage bench's run directory, a compiler probe) and the history's
directory: made where no one else can swap them, and removed without following a link.

Run as root with $TMPDIR a directory another user owns, that user could rename
ceiling's directory away and put a link in its place: the interposer (root) then
appended its records through their links to any file, and the cleanup followed
them. So:

- a parent is ``safe`` when it is owned by this user or by root and no one else
  can write in it, or it has the sticky bit (as /tmp: others may create entries
  but not rename or remove ours). Writable by the group counts as by others,
  unless the group is the user's own private group (a user private group:
  the same name as the user, no other member), as umask 002 makes ~/.cache;
- ``temp_parent`` is $TMPDIR when safe, else the first safe of /tmp, /var/tmp,
  saying once, in one line on stderr, which it stepped around and why;
- ``make_dir`` makes a new directory there with mkdtemp (0700, a name no one
  could have taken), and checks what it made (ours, a directory, not a link);
- ``remove_tree`` removes it without following a link: a path that is now a
  link is unlinked, not followed; shutil.rmtree works from directory fds
  (``shutil.rmtree.avoids_symlink_attacks``); errors are ignored, never a traceback;
- ``data_dir`` checks the history's directory ($XDG_DATA_HOME/ceiling): a
  ``ceiling`` there that another user planted (a link or a directory of theirs in
  a directory others can write) is refused, PathError, never followed.

Only the immediate parent is checked, as the MPI build cache does (cluster/cache.py):
a parent of the parent that others can write is outside what ceiling can judge.
"""
from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import stat
import sys
import tempfile
from typing import Iterator, Optional

from ..errors import PathError

TEMP_CANDIDATES = ("/tmp", "/var/tmp")
_chosen: dict = {}          # $TMPDIR value -> the parent used (said once per process)


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is this user's own group: named as the user, no other member."""
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
        g = grp.getgrgid(gid)
    except (KeyError, OSError):
        return False
    return g.gr_name == user and set(g.gr_mem) <= {user}


def others_can_write(st: os.stat_result) -> bool:
    """Whether someone other than the owner may write in it (group-writable counts, unless
    the group is the user's private group)."""
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and not _private_group(st.st_gid)


def unsafe(path: str) -> Optional[str]:
    """Why ``path`` (followed if a link) may not hold ceiling's directories, or None when it may."""
    try:
        st = os.stat(path)
    except OSError as e:
        return e.strerror or str(e)
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"owned by uid {st.st_uid}, not by you (uid {me}) or root: its owner could swap what ceiling makes there"
    if others_can_write(st) and not st.st_mode & stat.S_ISVTX:
        return (f"writable by others (mode {stat.S_IMODE(st.st_mode):04o}) without the sticky bit: "
                "anyone who can write there could swap what ceiling makes there")
    return None


def temp_parent() -> str:
    """$TMPDIR (Python's tempfile choice) when safe, else the first safe candidate, said once.
    PathError when none is."""
    wanted = tempfile.gettempdir()
    if wanted in _chosen:
        return _chosen[wanted]
    why = unsafe(wanted)
    if why is None:
        _chosen[wanted] = wanted
        return wanted
    for c in TEMP_CANDIDATES:
        if os.path.realpath(c) != os.path.realpath(wanted) and unsafe(c) is None:
            print(f"ceiling: not using {wanted} for temporary files ({why}); using {c}",
                  file=sys.stderr, flush=True)
            _chosen[wanted] = c
            return c
    raise PathError(f"no safe directory for temporary files: {wanted} is {why}; "
                    f"set TMPDIR to a directory only you can write")


def check_parent(parent: str, what: str) -> None:
    """PathError (one line) unless ``parent``, a directory the user named, is safe."""
    why = unsafe(parent)
    if why is not None:
        raise PathError(f"{what} {parent}: {why}; use a directory only you can write "
                        f"(e.g. mkdir {os.path.join(parent, '$USER')}), or one with the sticky bit")


def make_dir(prefix: str, parent: Optional[str] = None) -> str:
    """A new directory ``prefix``XXXXXXXX, 0700, in ``parent`` (checked by the caller) or in
    temp_parent(); PathError if it cannot be made."""
    where = parent if parent is not None else temp_parent()
    try:
        path = tempfile.mkdtemp(prefix=prefix, dir=where)
    except OSError as e:
        raise PathError(f"cannot create a directory in {where}: {e.strerror or e}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():     # mkdtemp made it: a bug if not
        raise PathError(f"{path}: not the directory ceiling just made")
    return path


def remove_tree(path: str) -> None:
    """Remove ``path`` and what is in it, never following a link (a path that is now a
    link is unlinked); quietly, as a cleanup."""
    if not path:
        return
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    if shutil.rmtree.avoids_symlink_attacks:
        shutil.rmtree(path, ignore_errors=True)
        return
    _remove_slowly(path)                    # a platform without fd-based rmtree: lstat each entry


def _remove_slowly(path: str) -> None:
    for root, dirs, files in os.walk(path, topdown=False, followlinks=False):
        for n in files + dirs:
            p = os.path.join(root, n)
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(p).st_mode):
                    os.rmdir(p)
                else:
                    os.unlink(p)
    with contextlib.suppress(OSError):
        os.rmdir(path)


@contextlib.contextmanager
def temporary_dir(prefix: str) -> Iterator[str]:
    """make_dir in temp_parent(), removed by remove_tree on the way out (Ctrl-C included)."""
    path = make_dir(prefix)
    try:
        yield path
    finally:
        remove_tree(path)


def data_dir(base: str, name: str = "ceiling", create: bool = True) -> str:
    """``base/name``, the history's directory, checked, and made (0700) if missing and
    ``create``; PathError when another user could have put it there: ``base`` not ours or
    root's, or writable by others without the sticky bit; or, in a ``base`` others can
    write, a ``name`` that is a link or not ours. In a ``base`` only we (or root) can write,
    a link there is ours to follow. Not made and missing: returned as it is."""
    d = os.path.join(base, name)
    hint = "set XDG_DATA_HOME to a directory only you can write, or use --db"
    if create:
        try:
            os.makedirs(base, exist_ok=True)
        except OSError as e:
            raise PathError(f"cannot create {base}: {e.strerror or e}") from None
    elif not os.path.exists(base):
        return d
    why = unsafe(base)
    if why is not None:
        raise PathError(f"refusing the history directory {d}: {base} is {why}; {hint}")
    try:
        shared = others_can_write(os.stat(base))
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(d, 0o700)
        st = os.lstat(d)
    except FileNotFoundError:
        return d                     # not made (create=False): no history yet
    except OSError as e:
        raise PathError(f"cannot create {d}: {e.strerror or e}") from None
    if shared and stat.S_ISLNK(st.st_mode):
        why = f"a symbolic link in {base}, which others can write"
    elif shared and st.st_uid != os.geteuid():
        why = f"owned by uid {st.st_uid}, in {base}, which others can write"
    else:
        why = unsafe(d)
    if why is not None:
        raise PathError(f"refusing the history directory {d}: {why}; {hint}")
    return d
