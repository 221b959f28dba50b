"""Name a part of a Python program on ``ceiling trace``'s timeline.

    import ceiling.region as region

    with region.region("checkpoint"):
        save()

    @region.region("solve")
    def solve(): ...

Each span becomes a slice on the calling thread's track. The work is done by ceiling's interposer
(libceiling_interpose.so, preloaded by ``ceiling trace``): its ``ceiling_region_begin`` and
``ceiling_region_end`` are looked up once in the process; without it (a plain run) both are
no-ops. C and C++ programs use ``include/ceiling/region.h``, Fortran programs the module
``include/ceiling/ceiling_region.f90`` (both under ``include_dir()``)."""
from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

_fns = None


def _lookup():
    global _fns
    if _fns is None:
        try:
            lib = ctypes.CDLL(None)
            b, e = lib.ceiling_region_begin, lib.ceiling_region_end
            b.argtypes = e.argtypes = [ctypes.c_char_p]
            b.restype = e.restype = None
            _fns = (b, e)
        except (AttributeError, OSError):
            _fns = ()
    return _fns


class region(contextlib.ContextDecorator):
    """A context manager and decorator: ``with region("io"):`` or ``@region("io")``."""

    def __init__(self, name: str):
        self.name = name.encode()

    def __enter__(self):
        f = _lookup()
        if f:
            f[0](self.name)
        return self

    def __exit__(self, *exc):
        f = _lookup()
        if f:
            f[1](self.name)
        return False


def include_dir() -> Path:
    """Where ``ceiling/region.h`` is: pass it as ``-I`` to the compiler; Fortran programs compile
    ``ceiling/ceiling_region.f90`` from here with theirs (``use ceiling_region``)."""
    return Path(__file__).resolve().parent / "include"


__all__ = ["region", "include_dir"]
