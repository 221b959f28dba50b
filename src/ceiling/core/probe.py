"""The probe's single timed operations (csrc/kernels/io_probe.c), seen from Python.

``rw`` times one read or write of an open data file; ``md`` one MD-Workbench
iteration on one file of the pool. Each returns seconds, or raises OSError with
the errno the C side met, so that the caller counts an unavailable file system
as an error of that operation, not a crash.
"""
from __future__ import annotations

import ctypes
import os
from typing import Tuple

from . import _lib

MD_STEPS = ("stat", "read", "delete", "create")


def _bound(name: str):
    fn = getattr(_lib(), name, None)
    if fn is None:
        from ..errors import CoreError
        raise CoreError(f"the C core has no {name}: rebuild it")
    if fn.restype is not ctypes.c_int:
        if name == "ceil_probe_rw":
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_double)]
        else:
            fn.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_double),
                           ctypes.POINTER(ctypes.c_int)]
        fn.restype = ctypes.c_int
    return fn


def rw(fd: int, write: bool, offset: int, length: int, direct: bool) -> float:
    """Seconds for one read (or write) of ``length`` bytes at ``offset`` of ``fd``; OSError on failure."""
    sec = ctypes.c_double(0.0)
    rc = _bound("ceil_probe_rw")(fd, 1 if write else 0, offset, length, 1 if direct else 0, ctypes.byref(sec))
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    return sec.value


def md(path: str, md_bytes: int) -> Tuple[float, float, float, float]:
    """(stat, read, delete, create) seconds of one iteration on ``path``; OSError naming the step."""
    sec = (ctypes.c_double * 4)()
    err = ctypes.c_int(0)
    rc = _bound("ceil_probe_md")(os.fsencode(path), md_bytes, sec, ctypes.byref(err))
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    if rc > 0:
        e = OSError(err.value, os.strerror(err.value), path)
        e.step = MD_STEPS[rc - 1]           # type: ignore[attr-defined]
        raise e
    return (sec[0], sec[1], sec[2], sec[3])
