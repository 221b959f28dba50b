"""The OTF2 archive's event writer (csrc/trace/otf2.c), seen from Python, and where libotf2 is.

OTF2's own C library writes the archive (Score-P's format, read by Vampir, Scalasca and
``otf2-print``); the C core calls it, since the ``otf2`` package's Python bindings cost 3 to 5 us per
record (benchmarks/otf2_writer.py) and an I/O call is four records. The core is built without
OTF2: the library is found here at run time and opened by the writer (dlopen), in this order:

1. ``CEILING_OTF2_LIB``, a path (a site's own OTF2 3.x build);
2. the ``otf2`` package of this Python (``pip install otf2``, the ``otf2`` extra of ceiling,
   installed by scripts/bootstrap.sh where it can be): its ``_otf2`` module is libotf2 itself,
   a plain C library that needs no Python;
3. the system's: ``libotf2.so`` (OTF2 built from source, Score-P) or Debian's
   ``libopen-trace-format2.so`` (apt-get install libopen-trace-format2-10).

``library()`` says which, or raises ``Otf2UnavailableError`` with one line saying what is missing.
What the writer records per row is documented in csrc/trace/otf2.h; the definitions are the
caller's (report/exporters/otf2.py).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno as errno_mod
import glob
import importlib.util
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import CoreError, Otf2UnavailableError
from . import _lib

ENV = "CEILING_OTF2_LIB"
LIB_ERROR = 1000            # CEIL_OTF2_LIB_ERROR: -(1000 + code) is an error of libotf2
# CEIL_OTF2_DEF_*, in otf2.h's order
(DEF_CLOCK, DEF_PARADIGM, DEF_STRING, DEF_NODE, DEF_LOCATION_GROUP, DEF_LOCATION, DEF_REGION, DEF_GROUP, DEF_COMM,
 DEF_IO_PARADIGM, DEF_IO_FILE, DEF_IO_HANDLE, DEF_METRIC_MEMBER, DEF_METRIC_CLASS, DEF_METRIC_INSTANCE,
 DEF_DESCRIPTION) = range(16)
_P = ctypes.c_void_p


@dataclass(frozen=True)
class Library:
    path: str
    source: str                 # where it came from, said in the trace's finding


def _package_lib() -> Optional[str]:
    """The otf2 package's libotf2 (its _otf2 module's shared object), without importing it."""
    try:
        spec = importlib.util.find_spec("_otf2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for where in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(where, "_otf2*.so")))
        if found:
            return found[0]
    return None


def check(path: str) -> str:
    """"" when ``path`` is OTF2 3.x's library (opened, every function the writer calls found), else why not."""
    lib = _bind()
    err = ctypes.create_string_buffer(600)
    return "" if lib.ceil_otf2_check(path.encode(), err, len(err)) == 0 else err.value.decode(errors="replace")


def library() -> Library:
    """Where libotf2 is (the module docstring's order), opened once to check it; Otf2UnavailableError saying what
    is missing, or what is wrong with the one given."""
    given = os.environ.get(ENV)
    if given:
        why = check(given)
        if why:
            raise Otf2UnavailableError(f"--format otf2: {ENV}={given} is not OTF2 3.x's library: {why}")
        return Library(given, ENV)
    tried = []
    pkg = _package_lib()
    candidates = ([(pkg, "the otf2 Python package")] if pkg else []) + [
        (found, "the system's library") for found in filter(None, (ctypes.util.find_library(n)
                                                                   for n in ("otf2", "open-trace-format2")))]
    for path, source in candidates:
        why = check(path)
        if not why:
            return Library(path, source)
        tried.append(why)
    raise Otf2UnavailableError(
        "--format otf2 needs OTF2's library (3.x), which is not installed: pip install otf2 (into ceiling's Python), "
        f"or apt-get install libopen-trace-format2-10, or set {ENV} to a libotf2.so"
        + (f" (found, but not usable: {'; '.join(tried)})" if tried else ""))


class _Calls(ctypes.Structure):
    _fields_ = [("p2p", _P), ("collop", _P), ("iomode", _P), ("iopar", _P), ("ncalls", ctypes.c_int64)]


class _Cols(ctypes.Structure):
    _fields_ = [("ts", _P), ("dur", _P), ("pid", _P), ("tid", _P), ("kind", _P), ("call", _P), ("file", _P),
                ("nbytes", _P), ("peer", _P), ("tag", _P), ("comm", _P), ("n", ctypes.c_int64)]


_STATS = ("enters", "clipped", "instants", "sends", "recvs", "unpaired", "collectives", "io_ops", "io_bytes",
          "msg_bytes", "metrics", "records", "first_ts", "last_ts", "buffer_peak")


class _Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in _STATS]


@dataclass(frozen=True)
class WriterStats:
    """What the writer wrote (otf2.h's ceil_otf2_stats): Enter records (as many Leaves), rows cut to nest,
    instants with no record, MpiSend and MpiRecv records, sends and receives left without (no partner,
    communicator or membership known), collective pairs, I/O operation pairs and their bytes, the bytes of
    the MpiSend records, Metric records, all records, the first and last record's time (absolute ns), and the
    most bytes libotf2's buffers held at once."""
    enters: int
    clipped: int
    instants: int
    sends: int
    recvs: int
    unpaired: int
    collectives: int
    io_ops: int
    io_bytes: int
    msg_bytes: int
    metrics: int
    records: int
    first_ts: int
    last_ts: int
    buffer_peak: int


def _bind():
    lib = _lib()
    fn = getattr(lib, "ceil_otf2_open", None)
    if fn is None:
        raise CoreError("the C core has no ceil_otf2_open (the OTF2 writer): rebuild it")
    if fn.restype is not ctypes.c_void_p:
        vp, i64, i32, u32, cp = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint32, ctypes.c_char_p
        sig = {
            "ceil_otf2_check": ([cp, cp, i64], ctypes.c_int),
            "ceil_otf2_open": ([cp, cp, cp, i64, i64, u32, cp, cp, cp, i64], vp),
            "ceil_otf2_calls_set": ([vp, ctypes.POINTER(_Calls)], ctypes.c_int),
            "ceil_otf2_comm": ([vp, i64, vp, i64], ctypes.c_int),
            "ceil_otf2_threads": ([vp, vp, vp, i64, vp, vp, i64], i64),
            "ceil_otf2_locate": ([vp, i32, i32, ctypes.c_uint64, u32], ctypes.c_int),
            "ceil_otf2_thread_done": ([vp, i32, i32], ctypes.c_int),
            "ceil_otf2_events": ([vp, ctypes.POINTER(_Cols)], ctypes.c_int),
            "ceil_otf2_metrics": ([vp, ctypes.c_uint64, vp, vp, vp, i64], ctypes.c_int),
            "ceil_otf2_finish": ([vp], ctypes.c_int),
            "ceil_otf2_location_events": ([vp, ctypes.c_uint64], i64),
            "ceil_otf2_regions": ([vp, vp, i64], i64),
            "ceil_otf2_touch": ([vp, ctypes.c_uint64], ctypes.c_int),
            "ceil_otf2_handles": ([vp, i64, vp, vp, vp, i64], i64),
            "ceil_otf2_def": ([vp, ctypes.c_int, vp, i64, cp, vp, i64], ctypes.c_int),
            "ceil_otf2_close": ([vp], ctypes.c_int),
            "ceil_otf2_stats_get": ([vp, ctypes.POINTER(_Stats)], None),
            "ceil_otf2_message": ([vp], cp),
            "ceil_otf2_free": ([vp], None),
        }
        for name, (args, res) in sig.items():
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = res
    return lib


class Otf2Error(OSError):
    """An error of libotf2 while writing (its name and description, and what it was doing)."""


class Writer:
    """One OTF2 archive being written: ``dir``/``name``.otf2 (dir must not exist yet)."""

    def __init__(self, lib: Library, dir: str, name: str, t0_ns: int, region_base: int, creator: str = "",
                 machine: str = "", chunk_bytes: int = 256 << 10):
        self._lib = _bind()
        err = ctypes.create_string_buffer(600)
        self._w = self._lib.ceil_otf2_open(lib.path.encode(), dir.encode(), name.encode(), chunk_bytes, t0_ns,
                                           region_base, creator.encode() or None, machine.encode() or None,
                                           err, len(err))
        if not self._w:
            raise Otf2Error(errno_mod.EIO, f"OTF2 ({lib.path}): {err.value.decode(errors='replace')}")

    def _check(self, rc: int, what: str) -> None:
        if rc >= 0:
            return
        if rc <= -LIB_ERROR:
            said = (self._lib.ceil_otf2_message(self._w) or b"").decode(errors="replace")
            raise Otf2Error(errno_mod.EIO, f"OTF2: {what}: {said}")
        if rc == -errno_mod.EINVAL:
            raise ValueError(f"OTF2 writer: {what}: rows out of time order on a thread, or a thread without "
                             "its location")
        raise OSError(-rc, f"OTF2 writer: {what}: {os.strerror(-rc)}")

    def calls(self, p2p: np.ndarray, collop: np.ndarray, iomode: np.ndarray, iopar: np.ndarray) -> None:
        self._keep = [np.ascontiguousarray(a, np.uint8) for a in (p2p, collop, iomode, iopar)]
        c = _Calls(*(a.ctypes.data for a in self._keep), ncalls=len(self._keep[0]))
        self._check(self._lib.ceil_otf2_calls_set(self._w, ctypes.byref(c)), "the call tables")

    def comm(self, index: int, xlat: Optional[np.ndarray]) -> None:
        """Communicator ``index``: world rank r is its rank xlat[r] (-1 not a member); None: world ranks."""
        if xlat is None:
            self._check(self._lib.ceil_otf2_comm(self._w, index, None, 0), "a communicator")
        else:
            x = np.ascontiguousarray(xlat, np.int32)
            self._check(self._lib.ceil_otf2_comm(self._w, index, x.ctypes.data, len(x)), "a communicator")

    def threads(self, pid: np.ndarray, tid: np.ndarray) -> List[Tuple[int, int]]:
        """The rows' threads not seen before, (pid, tid) each, in order of first appearance."""
        out: List[Tuple[int, int]] = []
        cap = 4096
        bp, bt = np.empty(cap, np.int32), np.empty(cap, np.int32)
        while True:
            got = self._lib.ceil_otf2_threads(self._w, pid.ctypes.data, tid.ctypes.data, len(pid), bp.ctypes.data,
                                              bt.ctypes.data, cap)
            self._check(got, "registering threads")
            out += zip(bp[:got].tolist(), bt[:got].tolist())
            if got < cap:
                return out

    def locate(self, pid: int, tid: int, location: int, group: int) -> None:
        self._check(self._lib.ceil_otf2_locate(self._w, pid, tid, location, group), "a thread's location")

    def thread_done(self, pid: int, tid: int) -> None:
        """No more rows for (pid, tid): its event writer closed and its buffer freed."""
        self._check(self._lib.ceil_otf2_thread_done(self._w, pid, tid), "closing a thread's events")

    def events(self, cols: dict) -> None:
        """Write one chunk's rows (``cols``: events.COLUMNS' arrays with their dtypes, contiguous)."""
        c = _Cols(**{k: cols[k].ctypes.data for k in ("ts", "dur", "pid", "tid", "kind", "call", "file", "nbytes",
                                                      "peer", "tag", "comm")}, n=len(cols["ts"]))
        self._check(self._lib.ceil_otf2_events(self._w, ctypes.byref(c)), "writing events")

    def metrics(self, location: int, ts: np.ndarray, metric: np.ndarray, value: np.ndarray) -> None:
        ts = np.ascontiguousarray(ts, np.int64)
        metric = np.ascontiguousarray(metric, np.uint32)
        value = np.ascontiguousarray(value, np.float64)
        self._check(self._lib.ceil_otf2_metrics(self._w, location, ts.ctypes.data, metric.ctypes.data,
                                                value.ctypes.data, len(ts)), "writing metrics")

    def finish(self) -> None:
        self._check(self._lib.ceil_otf2_finish(self._w), "closing the event files")

    def location_events(self, location: int) -> int:
        return int(self._lib.ceil_otf2_location_events(self._w, location))

    def regions(self) -> List[int]:
        """The regions entered, in id order (dense, by first Enter): each one's source, a call id below
        region_base, a user region's index + region_base from it."""
        n = int(self._lib.ceil_otf2_regions(self._w, None, 0))
        out = np.zeros(max(n, 1), np.uint32)
        self._lib.ceil_otf2_regions(self._w, out.ctypes.data, n)
        return out[:n].tolist()

    def touch(self, location: int) -> None:
        """A location with no records (its empty files)."""
        self._check(self._lib.ceil_otf2_touch(self._w, location), "an empty location")

    def handles(self) -> List[Tuple[int, int, int]]:
        """The I/O handles the events used, in id order: (group, file index, paradigm ref + 1) each."""
        out: List[Tuple[int, int, int]] = []
        cap = 4096
        g, f, p = np.empty(cap, np.uint32), np.empty(cap, np.int32), np.empty(cap, np.uint8)
        while True:
            got = self._lib.ceil_otf2_handles(self._w, len(out), g.ctypes.data, f.ctypes.data, p.ctypes.data, cap)
            out += zip(g[:got].tolist(), f[:got].tolist(), p[:got].tolist())
            if got < cap:
                return out

    def define(self, what: int, args: Sequence[int], text: Optional[str] = None,
               members: Sequence[int] = ()) -> None:
        a = np.asarray([int(x) & 0xFFFFFFFFFFFFFFFF for x in args] or [0], np.uint64).view(np.int64)
        m = np.asarray(list(members) or [0], np.uint64)
        self._check(self._lib.ceil_otf2_def(self._w, what, a.ctypes.data, len(args),
                                            None if text is None else text.encode("utf-8", "replace"),
                                            m.ctypes.data, len(members)), f"definition {what}")

    def describe(self, text: str) -> None:
        """The anchor file's description (otf2-print -A shows it)."""
        self.define(DEF_DESCRIPTION, [], text)

    def close(self) -> None:
        self._check(self._lib.ceil_otf2_close(self._w), "closing the archive")

    def stats(self) -> WriterStats:
        s = _Stats()
        self._lib.ceil_otf2_stats_get(self._w, ctypes.byref(s))
        return WriterStats(*(getattr(s, f) for f in _STATS))

    def free(self) -> None:
        if self._w:
            self._lib.ceil_otf2_free(self._w)
            self._w = None

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()
