"""The Perfetto trace's hot encoder (csrc/trace/perfetto.c), seen from Python.

``Encoder`` wraps one ceil_pf_writer: numpy columns go to C by pointer (no copy), packets the
caller encodes itself (descriptors, the tracer's statement) go in with ``raw``, and the string
tables are set per chunk with ``tables``. What the packets contain is documented in
csrc/trace/perfetto.h; the file's layout is the caller's (report/exporters/perfetto.py).
"""
from __future__ import annotations

import ctypes
import errno as errno_mod
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from ..errors import CoreError
from . import _lib

_P = ctypes.c_void_p


class _Cols(ctypes.Structure):
    _fields_ = [("ts", _P), ("dur", _P), ("pid", _P), ("tid", _P), ("kind", _P), ("call", _P), ("file", _P),
                ("offset", _P), ("nbytes", _P), ("result", _P), ("peer", _P), ("tag", _P), ("comm", _P),
                ("flow", _P), ("dirtab", _P), ("ndir", ctypes.c_int64), ("n", ctypes.c_int64)]


class _Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("bytes", "packets", "slices", "instants", "clipped", "flows_out",
                                                     "flows_in", "counter_samples", "sequences")]


@dataclass(frozen=True)
class EncoderStats:
    """What the encoder wrote: bytes, packets, slices (BEGIN/END pairs), instants, slices cut at their
    enclosing slice's end, flows begun on sends and ended on receives, counter samples, sequences."""
    bytes: int
    packets: int
    slices: int
    instants: int
    clipped: int
    flows_out: int
    flows_in: int
    counter_samples: int
    sequences: int


def _bind():
    lib = _lib()
    fn = getattr(lib, "ceil_pf_open", None)
    if fn is None:
        raise CoreError("the C core has no ceil_pf_open (the Perfetto encoder): rebuild it")
    if fn.restype is not ctypes.c_void_p:
        vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        sig = {
            "ceil_pf_open": ([ctypes.c_int, i64, i64, ctypes.c_uint32], vp),
            "ceil_pf_raw": ([vp, ctypes.c_char_p, i64], i32),
            "ceil_pf_static": ([vp, ctypes.c_char_p, i64], i32),
            "ceil_pf_tables": ([vp, vp, vp, i64, vp, vp, i64], None),
            "ceil_pf_threads": ([vp, vp, vp, i64, vp, vp, vp, vp, i64], i64),
            "ceil_pf_events": ([vp, ctypes.POINTER(_Cols)], i32),
            "ceil_pf_take_seq": ([vp], ctypes.c_uint32),
            "ceil_pf_counter": ([vp, ctypes.c_uint32, ctypes.c_uint64, vp, vp, i64], i32),
            "ceil_pf_finish": ([vp], i32),
            "ceil_pf_stats_get": ([vp, ctypes.POINTER(_Stats)], None),
            "ceil_pf_close": ([vp], None),
        }
        for name, (args, res) in sig.items():
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = res
    return lib


def _check(rc: int, what: str) -> None:
    if rc == -errno_mod.EINVAL:
        raise ValueError(f"Perfetto encoder: {what}: rows out of time order on a thread, a thread not registered, "
                         f"or a name or string id outside its table")
    if rc < 0:
        raise OSError(-rc, f"Perfetto encoder: {what}: {os.strerror(-rc)}")


def _ptr(a: Optional[np.ndarray]) -> Optional[int]:
    return None if a is None else a.ctypes.data


class Encoder:
    """One Perfetto file being written on ``fd`` (which stays the caller's to close)."""

    def __init__(self, fd: int, t0_ns: int, first_seq: int, buf_bytes: int = 4 << 20):
        self._lib = _bind()
        self._w = self._lib.ceil_pf_open(fd, buf_bytes, t0_ns, first_seq)
        if not self._w:
            raise MemoryError("Perfetto encoder: out of memory")
        self._keep: Tuple = ()

    def raw(self, data: bytes) -> None:
        _check(self._lib.ceil_pf_raw(self._w, data, len(data)), "writing a packet")

    def static_interned(self, body: bytes) -> None:
        _check(self._lib.ceil_pf_static(self._w, body, len(body)), "static interned data")

    def tables(self, names: List[str], strings: List[str]) -> None:
        """Set the string tables: ``names[iid]``, ``strings[iid]`` (iid 0 unused)."""
        keep = []
        args = []
        for table in (names, strings):
            enc = [s.encode("utf-8", "replace") for s in table]
            off = np.zeros(len(enc) + 1, np.int64)
            if enc:
                np.cumsum([len(b) for b in enc], out=off[1:])
            blob = np.frombuffer(b"".join(enc) or b"\0", np.uint8)
            keep += [blob, off]
            args += [blob.ctypes.data, off.ctypes.data, len(enc)]
        self._keep = tuple(keep)
        self._lib.ceil_pf_tables(self._w, *args)

    def threads(self, pid: np.ndarray, tid: np.ndarray) -> List[Tuple[int, int, int, int]]:
        """Register the rows' threads not seen before: (pid, tid, sequence id, track uuid) each."""
        out: List[Tuple[int, int, int, int]] = []
        cap = 4096
        bp, bt = np.empty(cap, np.int32), np.empty(cap, np.int32)
        bs, bu = np.empty(cap, np.uint32), np.empty(cap, np.uint64)
        while True:
            got = self._lib.ceil_pf_threads(self._w, pid.ctypes.data, tid.ctypes.data, len(pid), bp.ctypes.data,
                                            bt.ctypes.data, bs.ctypes.data, bu.ctypes.data, cap)
            _check(got, "registering threads")
            out += zip(bp[:got].tolist(), bt[:got].tolist(), bs[:got].tolist(), bu[:got].tolist())
            if got < cap:
                return out

    def events(self, cols: dict, flow: Optional[np.ndarray], dirtab: np.ndarray) -> None:
        """Encode one chunk's rows (``cols``: events.COLUMNS' arrays with their dtypes, contiguous)."""
        c = _Cols(**{k: cols[k].ctypes.data for k in ("ts", "dur", "pid", "tid", "kind", "call", "file", "offset",
                                                      "nbytes", "result", "peer", "tag", "comm")},
                  flow=_ptr(flow), dirtab=dirtab.ctypes.data, ndir=len(dirtab), n=len(cols["ts"]))
        _check(self._lib.ceil_pf_events(self._w, ctypes.byref(c)), "encoding events")

    def take_seq(self) -> int:
        return int(self._lib.ceil_pf_take_seq(self._w))

    def counter(self, seq: int, uuid: int, ts: np.ndarray, value: np.ndarray) -> None:
        ts = np.ascontiguousarray(ts, np.int64)
        value = np.ascontiguousarray(value, np.float64)
        _check(self._lib.ceil_pf_counter(self._w, seq, uuid, ts.ctypes.data, value.ctypes.data, len(ts)),
               "encoding a counter track")

    def finish(self) -> None:
        _check(self._lib.ceil_pf_finish(self._w), "finishing")

    def stats(self) -> EncoderStats:
        s = _Stats()
        self._lib.ceil_pf_stats_get(self._w, ctypes.byref(s))
        return EncoderStats(*(getattr(s, f) for f, _ in _Stats._fields_))

    def close(self) -> None:
        if self._w:
            self._lib.ceil_pf_close(self._w)
            self._w = None

    def __enter__(self) -> "Encoder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
