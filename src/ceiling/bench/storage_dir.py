"""The storage bench's run directory: a new ``ceiling-io-XXXXXX`` directory
in a checked parent (``--dir``, or $TMPDIR), removed whatever happens.

Safety comes first: the parent must exist and be a directory, the new one is
made with mkdtemp (never an existing name), and it is removed on success,
error and Ctrl-C, by an atexit hook if the interpreter exits some other way,
and on SIGTERM (made a KeyboardInterrupt when nobody else handles it).
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import stat as stat_mod
import tempfile
import threading
from typing import Any, Callable, Optional

from ..errors import PathError, raise_terminated

RUN_PREFIX = "ceiling-io-"


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
        try:
            self.path = tempfile.mkdtemp(prefix=RUN_PREFIX, dir=parent)
        except OSError as e:
            where = parent if parent is not None else tempfile.gettempdir()
            raise PathError(f"--dir {where}: cannot create a directory in it: {e.strerror or e}") from None
        path = self.path
        self._hook = lambda: _remove(path)
        atexit.register(self._hook)
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    self._old_term = signal.signal(signal.SIGTERM, raise_terminated)
            except (ValueError, OSError):
                self._old_term = None
        return self

    def __exit__(self, *exc) -> None:
        try:
            _remove(self.path)
            atexit.unregister(self._hook)
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None


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


def _remove(path: str) -> None:
    if path and os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
