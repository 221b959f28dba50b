"""The storage loops of the C core (csrc/kernels/io.c), seen from Python.

``seq_io``, ``random_io`` and ``meta_io`` each make one ceil_io_* call and
return its raw seconds and amounts per repetition and phase (``IoRaw``);
rates, percentiles and the judgement of the cache defeat are the caller's
(bench/storage.py). The C side writes a 64-bit stamp per STAMP_EVERY bytes
of file, made from (seed, file id, offset), and checks it on every read.

A call runs on a worker thread so that Ctrl-C reaches Python at once; the C
loop is then asked to stop (``cancel``), removes its files and returns.

Several processes can make one call together: ``par`` (see ``Group``) gives
io.c its agreement point (``sync``, called before each timed phase and
wherever the threads decide to go on or stop), this process's indices among
all threads, and ``combine``, which makes every process's outcome one; each
process then gets the combined figures, or the first failing one's error.
"""
from __future__ import annotations

import ctypes
import errno as errno_mod
import os
import select
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from ..errors import CoreError, PathError, signals_deferred
from . import _lib, _Params, _Result

LAYOUTS = {"fpp": 0, "shared": 1, "strided": 2}
F_DIRECT, F_EVICT, F_VERIFY_ALL, F_KEEP, F_UNIQUE_DIR, F_SEQ_ORDER = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20
E_EINVAL, E_ENOMEM, E_EPIN, E_EIO, E_EDIRECT, E_ECANCEL, E_EPEER, E_EQUEUE = -1, -2, -4, -5, -6, -7, -8, -9
STAMP_EVERY = 512
SEED = 0x10C0FFEE
RAND_XFER = 4 << 10                 # random I/O's transfer (fio's usual 4k)
MD_BYTES = 3901                     # MD-Workbench's default file size
LAT_CAP = 8192                      # latency samples kept per thread, phase and repetition, at most
_M64 = (1 << 64) - 1


_BetweenFn = ctypes.CFUNCTYPE(None)
_SyncFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)


class _IoSpec(ctypes.Structure):
    _fields_ = [
        ("dir", ctypes.c_char_p),
        ("tag", ctypes.c_char_p),
        ("bytes_per_thread", ctypes.c_int64),
        ("xfer", ctypes.c_int64),
        ("ops", ctypes.c_int64),
        ("duration_s", ctypes.c_double),
        ("layout", ctypes.c_int32),
        ("flags", ctypes.c_int32),
        ("md_bytes", ctypes.c_int32),
        ("lat_cap", ctypes.c_int32),
        ("between", _BetweenFn),
        ("gbase", ctypes.c_int32),
        ("gthreads", ctypes.c_int32),
        ("rbase", ctypes.c_int32),
        ("depth", ctypes.c_int32),
        ("sync", _SyncFn),
    ]


class _IoOut(ctypes.Structure):
    _fields_ = [
        ("phase_s", ctypes.POINTER(ctypes.c_double)),
        ("amount", ctypes.POINTER(ctypes.c_int64)),
        ("lat_s", ctypes.POINTER(ctypes.c_float)),
        ("lat_n", ctypes.POINTER(ctypes.c_int64)),
        ("bad_offset", ctypes.c_int64),
        ("resident", ctypes.c_double),
        ("err", ctypes.c_int32),
        ("direct", ctypes.c_int32),
        ("nphases", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


def _fn(name: str):
    lib = _lib()
    fn = getattr(lib, name, None)
    if fn is None:
        raise CoreError(f"the C core has no {name}: rebuild it")
    if fn.argtypes is None:
        fn.argtypes = [ctypes.POINTER(_Params), ctypes.POINTER(_IoSpec), ctypes.POINTER(_IoOut),
                       ctypes.POINTER(_Result)]
        fn.restype = ctypes.c_int
    return fn


def cancel(on: bool) -> None:
    """Ask the running ceil_io_* call to stop (``on``), or let the next one run (not ``on``)."""
    lib = _lib()
    lib.ceil_io_cancel.argtypes = [ctypes.c_int]
    lib.ceil_io_cancel.restype = None
    lib.ceil_io_cancel(1 if on else 0)


class DirectRefused(Exception):
    """O_DIRECT was refused by the file system (EINVAL); run again buffered."""


class QueueRefused(Exception):
    """Several operations in flight were refused: Linux AIO (io_setup) is not available here."""


@dataclass(frozen=True)
class IoRaw:
    """What one ceil_io_* call returned: raw seconds and amounts per repetition and phase."""

    kind: str                         # "seq" | "random" | "meta"
    phase_s: Tuple[Tuple[float, ...], ...]    # [rep][phase] seconds
    amount: Tuple[Tuple[int, ...], ...]       # [rep][phase] bytes (seq) or operations
    lat_s: Tuple[Tuple[Tuple[float, ...], ...], ...]  # [rep][phase] latency samples of all threads, seconds
    valid: bool
    msg: str
    bad_offset: int                   # first mismatching byte's file offset, -1 none
    resident: Optional[float]         # largest fraction of pages resident before a read; None unknown
    direct: bool
    nthreads: int

    def rates(self, phase: int, scale: float = 1.0) -> List[float]:
        """amount / seconds x scale, one per repetition."""
        return [a[phase] * scale / t[phase] for a, t in zip(self.amount, self.phase_s) if t[phase] > 0]


class Group(Protocol):
    """Several processes making one call together (bench/storage_mpi.Parallel is one)."""

    gbase: int                  # this process's first thread among all
    gthreads: int               # threads of all processes sharing the files
    rbase: int                  # the first thread whose data this process reads back
    interrupted: bool           # a stop was asked for before the call
    stop_reason: str            # the KeyboardInterrupt's argument when the call was cancelled

    def sync(self, stop: int) -> int:
        """io.c's agreement point: collective; 1 when any process stops."""

    def combine(self, rc: int, err: int, msg: str, raw: Optional["IoRaw"]) -> Tuple[int, int, str, Any]:
        """Every process's outcome of the call as one (rc, err, msg, IoRaw)."""


def _call(name: str, kind: str, nph: int, *, dirpath: str, tag: str, nthreads: int,
          cpus: Optional[Sequence[int]], reps: int, warmup: int, seed: int, flags: int,
          bytes_per_thread: int = 0, xfer: int = 0, ops: int = 0, duration_s: float = 0.0,
          layout: int = 0, md_bytes: int = 0, lat_cap: int = 0, depth: int = 0,
          between: Optional[Callable[[], None]] = None, par: Optional[Group] = None) -> IoRaw:
    """One ceil_io_* call; with ``par`` (a Group) every process makes it together and
    each gets the combined figures, or the first failing process's error."""
    fn = _fn(name)
    if cpus is not None and len(cpus) < nthreads:
        raise CoreError(f"placement names {len(cpus)} CPUs for {nthreads} threads")
    p = _Params(nthreads=nthreads, reps=reps, warmup=warmup, seed=seed & _M64)
    arr = None
    if cpus is not None:
        arr = (ctypes.c_int32 * nthreads)(*list(cpus)[:nthreads])
        p.cpus = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32))
    cb = _BetweenFn(between) if between is not None else _BetweenFn()
    sync = _SyncFn(par.sync) if par is not None else _SyncFn()
    s = _IoSpec(dir=os.fsencode(dirpath), tag=tag.encode(), bytes_per_thread=bytes_per_thread, xfer=xfer,
                ops=ops, duration_s=duration_s, layout=layout, flags=flags, md_bytes=md_bytes,
                lat_cap=lat_cap, depth=depth, between=cb, sync=sync)
    if par is not None:
        s.gbase, s.gthreads, s.rbase = par.gbase, par.gthreads, par.rbase
    phase_s = (ctypes.c_double * (reps * nph))()
    amount = (ctypes.c_int64 * (reps * nph))()
    o = _IoOut(phase_s=ctypes.cast(phase_s, ctypes.POINTER(ctypes.c_double)),
               amount=ctypes.cast(amount, ctypes.POINTER(ctypes.c_int64)))
    lat = lat_n = None
    if lat_cap > 0:
        lat = (ctypes.c_float * (reps * nph * nthreads * lat_cap))()
        lat_n = (ctypes.c_int64 * (reps * nph * nthreads))()
        o.lat_s = ctypes.cast(lat, ctypes.POINTER(ctypes.c_float))
        o.lat_n = ctypes.cast(lat_n, ctypes.POINTER(ctypes.c_int64))
    r = _Result()
    rc = _run_cancellable(lambda: fn(ctypes.byref(p), ctypes.byref(s), ctypes.byref(o), ctypes.byref(r)),
                          cancelled=par is not None and par.interrupted)
    msg, err = r.msg.decode(errors="replace"), int(o.err)
    raw = _raw(kind, nph, reps, nthreads, lat_cap, phase_s, amount, lat, lat_n, o, r) if rc == 0 else None
    if par is not None:
        rc, err, msg, raw = par.combine(rc, err, msg, raw)
    if rc == E_EDIRECT:
        raise DirectRefused(msg)
    if rc == E_EQUEUE:
        raise QueueRefused(msg)
    if rc == E_ECANCEL:
        raise KeyboardInterrupt(*((par.stop_reason,) if par is not None else ()))
    if rc == E_EIO:
        raise _io_error(err, msg)
    if rc != 0:
        what = {E_EINVAL: "invalid parameter", E_ENOMEM: "out of memory",
                E_EPIN: "could not pin a thread to its CPU", E_EPEER: "stopped"}.get(rc, f"error {rc}")
        raise CoreError(f"storage ({kind}): {what}" + (f": {msg}" if msg else ""))
    return raw


def _raw(kind: str, nph: int, reps: int, nthreads: int, lat_cap: int, phase_s, amount, lat, lat_n,
         o: _IoOut, r) -> IoRaw:
    """The arrays of one successful call as an IoRaw."""
    lats: List[Tuple[Tuple[float, ...], ...]] = []
    if lat is not None:
        samples = np.ctypeslib.as_array(lat).reshape(reps, nph, nthreads, lat_cap)
        counts = np.ctypeslib.as_array(lat_n).reshape(reps, nph, nthreads)
    for rep in range(reps):
        per_phase = []
        for ph in range(nph):
            vals: List[float] = []
            if lat is not None:
                vals = np.concatenate([samples[rep, ph, t, :int(counts[rep, ph, t])]
                                       for t in range(nthreads)]).astype(float).tolist()
            per_phase.append(tuple(vals))
        lats.append(tuple(per_phase))
    return IoRaw(kind, tuple(tuple(phase_s[r_ * nph + k] for k in range(nph)) for r_ in range(reps)),
                 tuple(tuple(int(amount[r_ * nph + k]) for k in range(nph)) for r_ in range(reps)),
                 tuple(lats), bool(r.valid), r.msg.decode(errors="replace"), int(o.bad_offset),
                 None if o.resident < 0 else float(o.resident), bool(o.direct), int(r.nthreads))


def _io_error(err: int, msg: str) -> PathError:
    if err in (errno_mod.ENOSPC, errno_mod.EDQUOT, errno_mod.EFBIG):
        why = {errno_mod.ENOSPC: "the file system is full", errno_mod.EDQUOT: "the disk quota is exhausted",
               errno_mod.EFBIG: "the file size limit (ulimit -f) was reached"}[err]
        return PathError(f"storage: {why} during the run ({msg}); the files written were removed")
    if err == errno_mod.EEXIST:
        return PathError(f"storage: a file name ceiling was about to create already exists ({msg}); "
                         "nothing was overwritten")
    return PathError(f"storage: {msg}")


def _wait_readable(fd: int) -> None:
    """Block until ``fd`` is readable; a signal's handler runs (and may raise) at once."""
    waiter = select.poll()
    waiter.register(fd, select.POLLIN)
    waiter.poll()


def _work(call: Callable[[], int], box: Dict[str, Any], wfd: int) -> None:
    """The worker of _run_cancellable: its result or exception in ``box``, then a byte on ``wfd``."""
    try:
        box["rc"] = call()
    except BaseException as e:      # noqa: BLE001 - raised again in the main thread
        box["error"] = e
    finally:
        try:
            os.write(wfd, b".")
        except OSError:             # the main thread left after a second signal
            pass
        os.close(wfd)


def _run_cancellable(call: Callable[[], int], cancelled: bool = False) -> int:
    """Run a C call on a worker thread so that Ctrl-C reaches Python at once:
    the main thread waits in poll(), and on KeyboardInterrupt asks the C
    loop to stop (it removes its files), waits for it, and re-raises.
    ``cancelled``: a stop was asked for before the call (several processes: their
    SIGINT handler asks instead of raising, see Group); the call stops at its
    first agreement point and returns CEIL_ECANCEL in every process.

    The worker is a daemon thread of its own, not a ThreadPoolExecutor's: a signal
    landing inside the executor's submit, after its thread started but before the
    executor recorded it, left a worker that interpreter exit waited for forever
    (a finished run that never exited, seen with SIGTERM right at the first call)."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    cancel(cancelled)
    box: Dict[str, Any] = {}
    # The worker says it ended by writing to a pipe, and the main thread waits in poll(): a
    # signal interrupts poll() cleanly. Not threading.Event: its wait re-takes a lock after
    # waking, and a KeyboardInterrupt landing there (the worker ending as Ctrl-C arrives) left
    # the lock released, so the wait raised "release unlocked lock" instead (seen in CI).
    # Not Thread.join either: a KeyboardInterrupt inside join() marks a running thread stopped.
    # The pipe is made and the thread started with signals deferred: a KeyboardInterrupt inside
    # start() would leave a thread running that nobody waits for (and its files behind).
    rfd = wfd = -1
    started = False
    try:
        with signals_deferred():
            rfd, wfd = os.pipe()
            t = threading.Thread(target=_work, args=(call, box, wfd), name="ceiling-io", daemon=True)
            # the worker inherits a mask blocking them: a handler running on it would cut the
            # C core's system calls short (EINTR)
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                t.start()
                started = True  # from here the worker owns (and closes) the write end
            except RuntimeError:    # no thread made ("can't start new thread"): the write end is ours
                os.close(wfd)
                raise
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        _wait_readable(rfd)
    except BaseException:
        cancel(True)
        if started:
            _wait_readable(rfd)     # a second signal leaves at once, the C loop still asked to stop
        cancel(False)
        raise
    finally:
        if rfd >= 0:
            os.close(rfd)
    if "error" in box:
        raise box["error"]
    return box["rc"]


def seq_io(dirpath: str, *, nthreads: int, bytes_per_thread: int, xfer: int, layout: str = "fpp",
           direct: bool = True, evict: bool = True, reps: int = 1, warmup: int = 0,
           cpus: Optional[Sequence[int]] = None, seed: int = SEED, verify_all: bool = False,
           keep: bool = False, tag: str = "seq", between: Optional[Callable[[], None]] = None,
           par: Optional[Group] = None) -> IoRaw:
    """Sequential write (with fsync) then read-back; phases 0 write, 1 read. Raises DirectRefused,
    PathError (I/O error, full disk), CoreError (bad parameters), KeyboardInterrupt (cancelled)."""
    flags = (F_DIRECT if direct else 0) | (F_EVICT if evict else 0) | (F_VERIFY_ALL if verify_all else 0) \
        | (F_KEEP if keep else 0)
    return _call("ceil_io_seq", "seq", 2, dirpath=dirpath, tag=tag, nthreads=nthreads, cpus=cpus, reps=reps,
                 warmup=warmup, seed=seed, flags=flags, bytes_per_thread=bytes_per_thread, xfer=xfer,
                 layout=LAYOUTS[layout], between=between, par=par)


def random_io(dirpath: str, *, nthreads: int, file_bytes: int, xfer: int = RAND_XFER, ops: int = 0,
              duration_s: float = 1.0, direct: bool = True, evict: bool = True, reps: int = 1,
              warmup: int = 0, cpus: Optional[Sequence[int]] = None, seed: int = SEED,
              verify_all: bool = False, keep: bool = False, lat_cap: int = LAT_CAP,
              tag: str = "rand", par: Optional[Group] = None, depth: int = 1, in_order: bool = False,
              between: Optional[Callable[[], None]] = None) -> IoRaw:
    """Random reads (checked) then random writes (+ fsync); phases 0 randread, 1 randwrite.
    ``depth`` > 1: that many operations in flight per thread (Linux AIO, needs ``direct``;
    QueueRefused where AIO is not available); ``in_order``: the file's blocks in order."""
    flags = (F_DIRECT if direct else 0) | (F_EVICT if evict else 0) | (F_VERIFY_ALL if verify_all else 0) \
        | (F_KEEP if keep else 0) | (F_SEQ_ORDER if in_order else 0)
    return _call("ceil_io_random", "random", 2, dirpath=dirpath, tag=tag, nthreads=nthreads, cpus=cpus,
                 reps=reps, warmup=warmup, seed=seed, flags=flags, bytes_per_thread=file_bytes, xfer=xfer,
                 ops=ops, duration_s=duration_s, lat_cap=lat_cap, par=par, depth=depth, between=between)


def meta_io(dirpath: str, *, nthreads: int, files: int, md_bytes: int = MD_BYTES, unique_dir: bool = False,
            reps: int = 1, warmup: int = 0, cpus: Optional[Sequence[int]] = None, seed: int = SEED,
            lat_cap: int = LAT_CAP, tag: str = "md", par: Optional[Group] = None) -> IoRaw:
    """Create, stat, read, unlink; phases 0..3."""
    return _call("ceil_io_meta", "meta", 4, dirpath=dirpath, tag=tag, nthreads=nthreads, cpus=cpus, reps=reps,
                 warmup=warmup, seed=seed, flags=F_UNIQUE_DIR if unique_dir else 0, ops=files,
                 md_bytes=md_bytes, lat_cap=lat_cap, par=par)
