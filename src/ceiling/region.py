"""Name a part of a Python program on ``ceiling trace``'s timeline.

    import ceiling.region as region

    with region.region("checkpoint"):
        save()

    @region.region("solve")
    def solve(): ...

    region.work(flops=2 * n, bytes=24 * n)     # the work done: flops, bytes to and from memory

Each span becomes a slice on the calling thread's track under ``ceiling trace``; under ``ceiling
profile`` each region's spans and time are counted per process (``ceiling scale --profile`` models
each region's time over the counts; end them before MPI_Finalize, where an MPI program's record is
written). ``work`` states the work the program
did, so that ``ceiling profile`` places it on this node's roofline (summed over threads,
processes and MPI ranks; state it before MPI_Finalize, where an MPI program's record is written).
The work is done by ceiling's interposer (libceiling_interpose.so, preloaded by ``ceiling trace``
and ``ceiling profile``): its ``ceiling_region_begin``, ``ceiling_region_end`` and ``ceiling_work``
are looked up once in the process; without it (a plain run) all are no-ops. C and C++ programs
use ``include/ceiling/region.h``, Fortran programs the module ``include/ceiling/ceiling_region.f90``
(both under ``include_dir()``)."""
from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

_fns = None
_work = None


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


def _lookup_work():
    global _work
    if _work is None:
        try:
            fn = ctypes.CDLL(None).ceiling_work
            fn.argtypes = [ctypes.c_double, ctypes.c_double]
            fn.restype = None
            _work = fn
        except (AttributeError, OSError):
            _work = False
    return _work


def work(flops: float, bytes: float) -> None:
    """Add ``flops`` floating-point operations and ``bytes`` moved to and from memory to the work
    this process states (the interposer's ceiling_work); nothing without ceiling. A negative,
    infinite or NaN value is counted as refused there, not added."""
    f = _lookup_work()
    if f:
        f(float(flops), float(bytes))


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


__all__ = ["region", "work", "include_dir"]
