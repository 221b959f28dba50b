"""Storage: sequential bandwidth (file per thread, one shared file, strided),
random 4 KiB IOPS and metadata rates, on the file system of ``--dir``.

What is measured, and how it is kept true (csrc/kernels/io.c does the I/O):

- Sequential write then read of each thread's data in transfers of one size,
  fsync before close inside the timed write phase (IOR ``-e``, fio
  ``end_fsync=1``), in three layouts: a file per thread (IOR-easy), one shared
  file with a contiguous segment per thread, and one shared file with the
  threads' transfers interleaved (transfer i of thread t at (i*N+t)*xfer,
  IOR-hard-like, 64 KiB transfers). Bandwidth by transfer size (4 KiB ..
  16 MiB) on the file-per-thread layout is a Series.
- The page cache is defeated so that a read figure is the device's: O_DIRECT
  where the file system takes it, otherwise buffered I/O and, after the
  fsync, posix_fadvise(POSIX_FADV_DONTNEED) on every file (no root needed).
  Which one held is measured: mincore() counts the file pages still resident
  before the read, and a read figure with pages left in the cache says so.
  Writing 1.5x the node's memory would also defeat the cache but takes
  minutes on a large node, so it is never the default (``--size`` can ask).
- Every transfer carries a stamp per 512 bytes made from (file, offset), and
  every read checks it: a stale, misplaced, zeroed or short block makes the
  metric invalid, with the first mismatching offset in its note.
- Random 4 KiB reads and writes (pread/pwrite, one operation in flight per
  thread: fio's psync at iodepth 1), O_DIRECT when available, on one file per
  thread; every operation is timed for p50/p99 latency (reservoir sample).
- Metadata (mdtest's phases and order): each thread creates, stats, reads and
  unlinks its files, in one shared directory and in a directory per thread
  (mdtest -u), a barrier between phases; rates are files per second of all
  threads, each operation timed for percentiles. Files are 3901 bytes, MD-
  Workbench's default (mdtest's default of 0 bytes would make "read" an
  open and close only; 3901 is not a multiple of 512 or 4096, so the last
  block is a partial one, as it is for most small files).

Units follow IOR: MiB/s (2^20 bytes per second); IOPS and op/s are
operations per second of all threads together.

Safety: everything is written inside a new ``ceiling-io-XXXXXX`` directory
(under ``--dir``, or $TMPDIR), every file is created with O_EXCL, free space
is checked first, and the directory is removed on success, error and Ctrl-C
(and by an atexit hook if all else failed). A full disk mid-run is one clear
error, after the files are removed.
"""
from __future__ import annotations

import atexit
import contextlib
import concurrent.futures
import ctypes
import errno as errno_mod
import os
import re
import shutil
import signal
import stat as stat_mod
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import core
from ..errors import BadValueError, CeilingError, CoreError, PathError, raise_terminated
from ..sysfs import read_text as _read
from ..results.model import HIGHER, LOWER, OK, WARN, Finding, Metric, Peak, Series
from ..results.measure import Context, Interrupted, Outcome
from ..sysfs import meminfo_bytes
from .base import judge

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MIBS = "MiB/s"
IOPS = "IOPS"
OPS = "op/s"
US = "µs"

# -- defaults ---------------------------------------------------------------------

QUICK_TOTAL_BYTES = 256 * MIB       # sequential data per measurement, all threads
TOTAL_BYTES = 1 * GIB
MIN_BYTES_PER_THREAD = 1 * MIB
XFER = 1 * MIB                      # headline transfer (IOR-easy's usual -t 1m)
STRIDED_XFER = 64 * KIB             # interleaved layout's transfer (IOR-hard uses 47008 B, which O_DIRECT cannot)
SWEEP_XFERS = (4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB)
QUICK_SWEEP_XFERS = (4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB)
SWEEP_TRANSFERS = 1024              # transfers per thread at each sweep point, at most
RAND_XFER = 4 * KIB
RAND_FILE_BYTES = 256 * MIB         # per thread, at most; never more than the sequential data
QUICK_RAND_FILE_BYTES = 64 * MIB
RAND_SECONDS, QUICK_RAND_SECONDS = 3.0, 1.0
MD_FILES, QUICK_MD_FILES = 4000, 1000   # per thread
MD_BYTES = 3901                     # MD-Workbench's default file size
REPS, QUICK_REPS = 5, 3
SWEEP_REPS = 2
DEFAULT_MAX_THREADS = 8             # without --threads: a node's storage saturates with a few streams
LAT_CAP = 8192                      # latency samples kept per thread, phase and repetition, at most
LAT_SAMPLES = 65536                 # ... and per phase and repetition, all threads (never below 16 a thread)
FREE_MARGIN = 1.10                  # free space needed: what a run writes at once, +10 %
RESIDENT_OK = 0.01                  # at most 1 % of pages left in the page cache counts as defeated
SEED = 0x10C0FFEE

LAYOUTS = {"fpp": 0, "shared": 1, "strided": 2}
F_DIRECT, F_EVICT, F_VERIFY_ALL, F_KEEP, F_UNIQUE_DIR = 0x1, 0x2, 0x4, 0x8, 0x10
E_EINVAL, E_ENOMEM, E_EPIN, E_EIO, E_EDIRECT, E_ECANCEL, E_EPEER = -1, -2, -4, -5, -6, -7, -8
FILE_SEQ, FILE_RAND, FILE_MD, SHARED_TID = 1, 2, 3, 0xFFFF
STAMP_EVERY = 512
RUN_PREFIX = "ceiling-io-"

# Test hook: called with the run directory between each sequential write and
# its read (after eviction), so a test can corrupt a file there.
_BETWEEN: Optional[Callable[[str], None]] = None


# -- ctypes --------------------------------------------------------------------------

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
        ("reserved", ctypes.c_int32),
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
    lib = core._lib()
    fn = getattr(lib, name, None)
    if fn is None:
        raise CoreError(f"the C core has no {name}: rebuild it")
    if fn.argtypes is None:
        fn.argtypes = [ctypes.POINTER(core._Params), ctypes.POINTER(_IoSpec), ctypes.POINTER(_IoOut),
                       ctypes.POINTER(core._Result)]
        fn.restype = ctypes.c_int
    return fn


def _cancel(on: bool) -> None:
    lib = core._lib()
    lib.ceil_io_cancel.argtypes = [ctypes.c_int]
    lib.ceil_io_cancel.restype = None
    lib.ceil_io_cancel(1 if on else 0)


def stamp(seed: int, file_id: int, offset: int) -> int:
    """The pattern's 64-bit word at a 512-byte-aligned file offset (io.c's ceil_io_stamp, in Python)."""
    return _mix64(_mix64((seed ^ file_id) & _M64) ^ offset)


def file_id(kind: int, rep: int, tid: int, index: int = 0) -> int:
    return ((kind & 0xFF) << 56) | ((rep & 0xFFFF) << 40) | ((tid & 0xFFFF) << 24) | (index & 0xFFFFFF)


_M64 = (1 << 64) - 1


def _mix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class DirectRefused(Exception):
    """O_DIRECT was refused by the file system (EINVAL); run again buffered."""


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


def _call(name: str, kind: str, nph: int, *, dirpath: str, tag: str, nthreads: int,
          cpus: Optional[Sequence[int]], reps: int, warmup: int, seed: int, flags: int,
          bytes_per_thread: int = 0, xfer: int = 0, ops: int = 0, duration_s: float = 0.0,
          layout: int = 0, md_bytes: int = 0, lat_cap: int = 0,
          between: Optional[Callable[[], None]] = None, par: Any = None) -> IoRaw:
    """One ceil_io_* call; with ``par`` (storage_mpi.Parallel) every rank makes it together and
    each gets the combined figures, or the first failing rank's error."""
    fn = _fn(name)
    if cpus is not None and len(cpus) < nthreads:
        raise CoreError(f"placement names {len(cpus)} CPUs for {nthreads} threads")
    p = core._Params(nthreads=nthreads, reps=reps, warmup=warmup, seed=seed & _M64)
    arr = None
    if cpus is not None:
        arr = (ctypes.c_int32 * nthreads)(*list(cpus)[:nthreads])
        p.cpus = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32))
    cb = _BetweenFn(between) if between is not None else _BetweenFn()
    sync = _SyncFn(par.sync) if par is not None else _SyncFn()
    s = _IoSpec(dir=os.fsencode(dirpath), tag=tag.encode(), bytes_per_thread=bytes_per_thread, xfer=xfer,
                ops=ops, duration_s=duration_s, layout=layout, flags=flags, md_bytes=md_bytes,
                lat_cap=lat_cap, between=cb, sync=sync)
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
    r = core._Result()
    rc = _run_cancellable(lambda: fn(ctypes.byref(p), ctypes.byref(s), ctypes.byref(o), ctypes.byref(r)),
                          cancelled=par is not None and par.interrupted)
    msg, err = r.msg.decode(errors="replace"), int(o.err)
    raw = _raw(kind, nph, reps, nthreads, lat_cap, phase_s, amount, lat, lat_n, o, r) if rc == 0 else None
    if par is not None:
        rc, err, msg, raw = par.combine(rc, err, msg, raw)
    if rc == E_EDIRECT:
        raise DirectRefused(msg)
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


_POOL: Optional[concurrent.futures.ThreadPoolExecutor] = None


def _run_cancellable(call: Callable[[], int], cancelled: bool = False) -> int:
    """Run a C call on a worker thread so that Ctrl-C reaches Python at once:
    the main thread waits in short slices, and on KeyboardInterrupt asks the C
    loop to stop (it removes its files), waits for it, and re-raises.
    ``cancelled``: a stop was asked for before the call (several ranks: their
    SIGINT handler asks instead of raising, see storage_mpi); the call stops at
    its first agreement point and returns CEIL_ECANCEL on every rank."""
    global _POOL
    if threading.current_thread() is not threading.main_thread():
        return call()
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ceiling-io")
    _cancel(cancelled)
    fut = _POOL.submit(call)
    try:
        while True:
            try:
                return fut.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                continue
    except BaseException:
        _cancel(True)
        try:
            concurrent.futures.wait([fut])
        finally:
            _cancel(False)
        raise


def seq_io(dirpath: str, *, nthreads: int, bytes_per_thread: int, xfer: int, layout: str = "fpp",
           direct: bool = True, evict: bool = True, reps: int = 1, warmup: int = 0,
           cpus: Optional[Sequence[int]] = None, seed: int = SEED, verify_all: bool = False,
           keep: bool = False, tag: str = "seq", between: Optional[Callable[[], None]] = None,
           par: Any = None) -> IoRaw:
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
              tag: str = "rand", par: Any = None) -> IoRaw:
    """Random reads (checked) then random writes (+ fsync); phases 0 randread, 1 randwrite."""
    flags = (F_DIRECT if direct else 0) | (F_EVICT if evict else 0) | (F_VERIFY_ALL if verify_all else 0) \
        | (F_KEEP if keep else 0)
    return _call("ceil_io_random", "random", 2, dirpath=dirpath, tag=tag, nthreads=nthreads, cpus=cpus,
                 reps=reps, warmup=warmup, seed=seed, flags=flags, bytes_per_thread=file_bytes, xfer=xfer,
                 ops=ops, duration_s=duration_s, lat_cap=lat_cap, par=par)


def meta_io(dirpath: str, *, nthreads: int, files: int, md_bytes: int = MD_BYTES, unique_dir: bool = False,
            reps: int = 1, warmup: int = 0, cpus: Optional[Sequence[int]] = None, seed: int = SEED,
            lat_cap: int = LAT_CAP, tag: str = "md", par: Any = None) -> IoRaw:
    """Create, stat, read, unlink; phases 0..3."""
    return _call("ceil_io_meta", "meta", 4, dirpath=dirpath, tag=tag, nthreads=nthreads, cpus=cpus, reps=reps,
                 warmup=warmup, seed=seed, flags=F_UNIQUE_DIR if unique_dir else 0, ops=files,
                 md_bytes=md_bytes, lat_cap=lat_cap, par=par)


# -- the file system and its device ----------------------------------------------------

@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    mount_point: str
    fstype: str
    source: str
    major: int
    minor: int
    options: str = ""
    super_options: str = ""


def _unescape(s: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def parse_mountinfo(text: str) -> List[Mount]:
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10 or "-" not in f[6:]:
            continue
        sep = f.index("-", 6)
        try:
            major, minor = (int(x) for x in f[2].split(":"))
        except ValueError:
            continue
        rest = f[sep + 1:]
        out.append(Mount(_unescape(f[4]), rest[0], _unescape(rest[1]) if len(rest) > 1 else "",
                         major, minor, f[5], rest[2] if len(rest) > 2 else ""))
    return out


def mount_of(path: str, mountinfo: str = "/proc/self/mountinfo") -> Optional[Mount]:
    """The mount holding ``path``: same device number, longest mount point above it."""
    try:
        with open(mountinfo) as f:
            mounts = parse_mountinfo(f.read())
        st = os.stat(path)
    except OSError:
        return None
    real = os.path.realpath(path)

    def above(m: Mount) -> bool:
        mp = m.mount_point.rstrip("/") or "/"
        return mp == "/" or real == mp or real.startswith(mp + "/")

    cands = [m for m in mounts if above(m)]
    same = [m for m in cands if (m.major, m.minor) == (os.major(st.st_dev), os.minor(st.st_dev))]
    pick = same or cands
    return max(pick, key=lambda m: len(m.mount_point)) if pick else None


NETWORK_FS = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "glusterfs", "fuse.glusterfs",
              "fuse.sshfs", "9p", "virtiofs", "fuse.ceph", "orangefs", "pvfs2", "wekafs", "fuse.weka"}
MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"}


def pcie_link_bytes_s(speed: str, width: str) -> Tuple[Optional[float], str]:
    """PCIe link bandwidth per direction after line encoding, bytes/s, and the formula.

    GT/s x lanes x encoding / 8: 8b/10b up to 5 GT/s (gen 1-2), 128b/130b at
    8-32 GT/s (gen 3-5), 242/256 FLIT at 64 GT/s (gen 6). Packet headers
    (TLP/DLLP, about 5-10 % at the usual 256-byte maximum payload) are not
    subtracted: the figure is an upper bound.
    """
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed or "")
    try:
        lanes = int((width or "").strip())
    except ValueError:
        lanes = 0
    if not m or lanes <= 0:
        return None, f"link speed {speed!r} / width {width!r} not understood"
    gts = float(m.group(1))
    if gts <= 5.0:
        enc, enc_s = 0.8, "8b/10b"
    elif gts <= 32.0:
        enc, enc_s = 128 / 130, "128b/130b"
    else:
        enc, enc_s = 242 / 256, "242B/256B FLIT"
    bps = gts * 1e9 * lanes * enc / 8
    return bps, (f"PCIe {gts:g} GT/s x{lanes} x {enc_s} / 8 bits = {bps / 1e9:.3f} GB/s per direction "
                 "(packet headers not subtracted)")


def sata_link_bytes_s(spd: str) -> Tuple[Optional[float], str]:
    """SATA link bandwidth after 8b/10b encoding, bytes/s, and the formula."""
    m = re.match(r"\s*([\d.]+)\s*Gbps", spd or "")
    if not m:
        return None, f"SATA link speed {spd!r} not understood (link down?)"
    gbps = float(m.group(1))
    bps = gbps * 1e9 * 0.8 / 8
    return bps, f"SATA {gbps:g} Gb/s x 8b/10b / 8 bits = {bps / 1e6:.0f} MB/s"


def _disk_path(sys_root: str, major: int, minor: int, notes: List[str]) -> Optional[str]:
    """Resolved sysfs path of the whole disk behind MAJ:MIN (partitions and one-slave device-mapper followed)."""
    link = os.path.join(sys_root, "dev", "block", f"{major}:{minor}")
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    for _ in range(8):
        if os.path.exists(os.path.join(real, "partition")):
            real = os.path.dirname(real)
            continue
        slaves_dir = os.path.join(real, "slaves")
        slaves = sorted(os.listdir(slaves_dir)) if os.path.isdir(slaves_dir) else []
        if len(slaves) == 1:
            notes.append(f"{os.path.basename(real)} sits on {slaves[0]}")
            real = os.path.realpath(os.path.join(slaves_dir, slaves[0]))
            continue
        if len(slaves) > 1:
            notes.append(f"{os.path.basename(real)} spans {', '.join(slaves)}")
        break
    return real


def device_peak(major: int, minor: int, sys_root: str = "/sys") -> Tuple[Peak, Dict[str, Any]]:
    """The link peak of the block device MAJ:MIN in MiB/s (NVMe: PCIe link; SATA: SATA link), or unknown and why."""
    info: Dict[str, Any] = {}
    notes: List[str] = []

    def unknown(why: str) -> Tuple[Peak, Dict[str, Any]]:
        if notes:
            info["stack"] = notes
        return Peak(None, MIBS, f"unknown: {why}"), info

    if major == 0:
        return unknown("no block device behind this mount (network, memory or virtual file system)")
    disk = _disk_path(sys_root, major, minor, notes)
    if disk is None:
        return unknown(f"no {sys_root}/dev/block/{major}:{minor} entry")
    name = os.path.basename(disk)
    info["device"] = name
    parts = disk.split(os.sep)
    rot = _read(os.path.join(disk, "queue", "rotational"))
    if rot is not None:
        info["rotational"] = rot == "1"
    model = _read(os.path.join(disk, "device", "model"))
    if model:
        info["model"] = model
    if len(notes) and notes[-1].startswith(f"{name} spans"):
        return unknown(f"{name} spans several devices ({notes[-1]}): the peak of a striped or mirrored set is "
                       "not derived")
    ctrl = next((c for c in parts if re.fullmatch(r"nvme\d+", c)), None)
    if ctrl is None:
        sub = next((i for i, c in enumerate(parts) if re.fullmatch(r"nvme-subsys\d+", c)), None)
        if sub is not None:
            subdir = os.sep.join(parts[:sub + 1])
            ctrls = sorted(c for c in (os.listdir(subdir) if os.path.isdir(subdir) else [])
                           if re.fullmatch(r"nvme\d+", c))
            if ctrls:
                ctrl = ctrls[0]
                if len(ctrls) > 1:
                    notes.append(f"multipath over {', '.join(ctrls)}: one controller's link is shown")
    if ctrl is not None or re.fullmatch(r"nvme\d+n\d+", name):
        info["kind"] = "nvme"
        if ctrl is None:
            ctrl = re.match(r"(nvme\d+)n", name).group(1)
        dev = os.path.join(sys_root, "class", "nvme", ctrl, "device")
        speed = _read(os.path.join(dev, "current_link_speed"))
        width = _read(os.path.join(dev, "current_link_width"))
        model = model or _read(os.path.join(sys_root, "class", "nvme", ctrl, "model"))
        if model:
            info["model"] = model
        if speed is None or width is None:
            return unknown(f"NVMe {ctrl}: {dev}/current_link_speed or current_link_width not readable "
                           "(a virtual NVMe device has no PCIe link)")
        bps, formula = pcie_link_bytes_s(speed, width)
        info.update(link_speed=speed, link_width=width)
        if bps is None:
            return unknown(f"NVMe {ctrl}: {formula}")
        if notes:
            info["stack"] = notes
        return Peak(bps / MIB, MIBS, f"NVMe {ctrl} link: {formula}; read from {dev}"), info
    ata = next((c for c in parts if re.fullmatch(r"ata\d+", c)), None)
    if ata is not None:
        info["kind"] = "sata"
        port = ata[3:]
        link = os.path.join(sys_root, "class", "ata_link", f"link{port}", "sata_spd")
        spd = _read(link)
        if spd is None:
            return unknown(f"SATA {ata}: {link} not readable")
        bps, formula = sata_link_bytes_s(spd)
        info["link_speed"] = spd
        if bps is None:
            return unknown(formula)
        note = "; a spinning disk reaches a fraction of it" if info.get("rotational") else ""
        if notes:
            info["stack"] = notes
        return Peak(bps / MIB, MIBS, f"{formula}; read from {link}{note}"), info
    if any(re.fullmatch(r"virtio\d+", c) for c in parts):
        info["kind"] = "virtio"
        return unknown(f"{name} is a virtio disk: a virtual device has no link speed, the host's storage "
                       "and its limits decide")
    if "virtual" in parts:
        info["kind"] = "virtual"
        return unknown(f"{name} is a virtual block device (loop, zram, device-mapper, md): no link to read")
    if "usb" in disk:
        info["kind"] = "usb"
        return unknown(f"{name} is on USB: its link is not read")
    info["kind"] = "other"
    return unknown(f"{name}: neither NVMe nor SATA (SAS, SCSI, MMC links are not read)")


@dataclass
class FileSystem:
    """Where the run writes: the mount, its type and the device peak."""

    dir: str
    mount: Optional[Mount]
    peak: Peak
    device: Dict[str, Any] = field(default_factory=dict)
    groups: List[Dict[str, Any]] = field(default_factory=list)   # under MPI, one per directory (combine_fs)

    @property
    def fstype(self) -> str:
        return self.mount.fstype if self.mount else "unknown"

    def context(self) -> Dict[str, Any]:
        m = self.mount
        return {"fs_type": self.fstype, "fs_source": m.source if m else "", "mount_point": m.mount_point if m else "",
                "dir": self.dir, **({"device": self.device} if self.device else {}),
                **({"directories": self.groups} if self.groups else {})}


def describe_fs(path: str, mountinfo: str = "/proc/self/mountinfo", sys_root: str = "/sys") -> FileSystem:
    m = mount_of(path, mountinfo)
    if m is None:
        return FileSystem(path, None, Peak(None, MIBS, f"unknown: the mount of {path} is not in {mountinfo}"))
    if m.fstype in MEMORY_FS:
        return FileSystem(path, m, Peak(None, MIBS, f"unknown: {m.fstype} is memory-backed, no device; "
                                                    "the figures are the page cache's"))
    if m.fstype in NETWORK_FS or m.fstype.startswith("fuse"):
        return FileSystem(path, m, Peak(None, MIBS, f"unknown: {m.fstype} ({m.source}) is a network or "
                                                    "user-space file system: its servers and network set the peak"))
    major, minor = m.major, m.minor
    if m.fstype == "overlay":
        up = re.search(r"(?:^|,)upperdir=([^,]+)", m.super_options)
        under = mount_of(up.group(1), mountinfo) if up and os.path.exists(up.group(1)) else None
        if under is None:
            return FileSystem(path, m, Peak(None, MIBS, "unknown: overlay file system whose upper layer's "
                                                        "device could not be found"))
        major, minor = under.major, under.minor
    peak, dev = device_peak(major, minor, sys_root)
    return FileSystem(path, m, peak, dev)


# -- the run's directory ---------------------------------------------------------------

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


# -- the plan ---------------------------------------------------------------------------

@dataclass
class Plan:
    """Sizes and counts of one storage run, and where they came from."""

    threads: int                # per process
    cpus: Optional[List[int]]   # the threads' CPUs; None: not pinned (ranks sharing CPUs)
    total_bytes: int            # sequential data per measurement, all threads (of this node, with MPI)
    bytes_per_thread: int
    xfer: int
    strided_xfer: int
    sweep: List[int]
    rand_file_bytes: int        # per thread
    rand_seconds: float
    md_files: int               # per thread
    md_bytes: int
    reps: int
    notes: Dict[str, str] = field(default_factory=dict)

    def bytes_at_once(self) -> int:
        """The most this run has on disk at one time (each measurement removes its files)."""
        return max(self.threads * self.bytes_per_thread, self.threads * self.rand_file_bytes) \
            + self.threads * self.md_files * max(self.md_bytes, 4096)


def plan(ctx: Context, par: Any = None) -> Plan:
    """Sizes and counts; with ``par`` (several ranks) per rank, from the node's share of the data."""
    opts = ctx.opts
    quick = opts.quick
    cpus: Optional[List[int]] = list(ctx.cpus)
    notes: Dict[str, str] = {}
    if par is not None:
        cpus = par.cpus
        n_threads = par.threads
        per_node = par.threads * par.max_ranks_per_node      # the threads sharing one node's data
    else:
        if opts.threads is None and len(cpus) > DEFAULT_MAX_THREADS:
            cpus = cpus[:DEFAULT_MAX_THREADS]
            notes["threads"] = (f"{DEFAULT_MAX_THREADS} threads (the first CPUs of the plan): one node's "
                                "storage saturates with a few streams; --threads sets another count")
        n_threads = per_node = max(1, len(cpus))
    n = per_node
    if opts.size_bytes is not None:
        total = int(opts.size_bytes)
        if total < n * MIN_BYTES_PER_THREAD:
            raise BadValueError(f"--size {total}: storage needs at least {MIN_BYTES_PER_THREAD // MIB} MiB per "
                                f"thread ({n * MIN_BYTES_PER_THREAD} bytes for {n} threads)")
        notes["size"] = "set by the user" + (" (data per node)" if par is not None else "")
    else:
        total = QUICK_TOTAL_BYTES if quick else TOTAL_BYTES
        mem = meminfo_bytes("MemTotal")
        notes["size"] = (f"{total // MIB} MiB of data per measurement{' and node' if par is not None else ''} "
                         f"({'quick' if quick else 'default'}); the page cache is defeated by O_DIRECT or "
                         "fadvise, not by size"
                         + (f" (1.5x the {mem // GIB} GiB of memory would take far longer)" if mem else ""))
    bpt = max(XFER, total // n // XFER * XFER)
    reps = opts.reps if opts.reps else (QUICK_REPS if quick else REPS)
    if reps < 1 or reps > 1000:
        raise BadValueError(f"--reps {reps}: must be between 1 and 1000")
    rand = min(QUICK_RAND_FILE_BYTES if quick else RAND_FILE_BYTES, bpt) // RAND_XFER * RAND_XFER
    return Plan(threads=n_threads, cpus=cpus, total_bytes=n * bpt, bytes_per_thread=bpt, xfer=XFER,
                strided_xfer=STRIDED_XFER, sweep=list(QUICK_SWEEP_XFERS if quick else SWEEP_XFERS),
                rand_file_bytes=rand, rand_seconds=QUICK_RAND_SECONDS if quick else RAND_SECONDS,
                md_files=QUICK_MD_FILES if quick else MD_FILES, md_bytes=MD_BYTES, reps=reps, notes=notes)


# -- statistics ------------------------------------------------------------------------

LAT_QUANTILES = (50, 90, 99, 99.9)


def latency_summary(samples: Sequence[float]) -> Dict[str, Any]:
    """p50/p90/p99/p99.9/max in microseconds of per-operation seconds (numpy's linear percentiles)."""
    if not len(samples):
        return {}
    a = np.asarray(samples, dtype=float)
    out: Dict[str, Any] = {f"p{q:g}": round(float(v) * 1e6, 3)
                           for q, v in zip(LAT_QUANTILES, np.percentile(a, LAT_QUANTILES))}
    out["max"] = round(float(a.max()) * 1e6, 3)
    out["samples"] = int(a.size)
    return out


# -- the bench --------------------------------------------------------------------------

@dataclass
class _Mode:
    direct: bool = True
    refused: str = ""           # why O_DIRECT was given up


def lat_cap(threads: int) -> int:
    """Latency samples kept per thread, ``threads`` those of every process: all together keep
    about LAT_SAMPLES per phase and repetition (LAT_CAP at most, 16 at least, per thread)."""
    return min(LAT_CAP, max(16, LAT_SAMPLES // max(1, threads)))


class _Runner:
    """One storage run: the mode (direct or buffered), the context every metric carries."""

    def __init__(self, ctx: Context, p: Plan, run_dir: str, fs: FileSystem, par: Any = None):
        self.ctx, self.p, self.dir, self.fs, self.par = ctx, p, run_dir, fs, par
        self.mode = _Mode()
        self.n = 0
        self.all_threads = p.threads * (par.size if par is not None else 1)

    def tag(self, what: str) -> str:
        self.n += 1
        return f"{what}{self.n}"

    def between(self) -> Optional[Callable[[], None]]:
        hook = _BETWEEN
        return (lambda: hook(self.dir)) if hook is not None else None

    def seq(self, *, layout: str, xfer: int, bytes_per_thread: int, reps: int, direct: Optional[bool] = None
            ) -> IoRaw:
        """One sequential measurement; falls back to buffered (for good) when O_DIRECT is refused."""
        want = self.mode.direct if direct is None else direct
        kw = dict(nthreads=self.p.threads, cpus=self.p.cpus, bytes_per_thread=bytes_per_thread, xfer=xfer,
                  layout=layout, evict=True, reps=reps, between=self.between(), par=self.par)
        if want:
            try:
                return seq_io(self.dir, direct=True, tag=self.tag(f"seq.{layout}"), **kw)
            except DirectRefused as e:
                self.mode = _Mode(False, str(e))
        return seq_io(self.dir, direct=False, tag=self.tag(f"seq.{layout}"), **kw)

    def rand(self) -> IoRaw:
        kw = dict(nthreads=self.p.threads, cpus=self.p.cpus, file_bytes=self.p.rand_file_bytes,
                  duration_s=self.p.rand_seconds, reps=self.p.reps, evict=True,
                  lat_cap=lat_cap(self.all_threads), par=self.par)
        if self.mode.direct:
            try:
                return random_io(self.dir, direct=True, tag=self.tag("rand"), **kw)
            except DirectRefused as e:
                self.mode = _Mode(False, str(e))
        return random_io(self.dir, direct=False, tag=self.tag("rand"), **kw)

    def meta(self, unique: bool) -> IoRaw:
        return meta_io(self.dir, nthreads=self.p.threads, cpus=self.p.cpus, files=self.p.md_files,
                       md_bytes=self.p.md_bytes, unique_dir=unique, reps=self.p.reps,
                       lat_cap=lat_cap(self.all_threads), par=self.par,
                       tag=self.tag("md.unique" if unique else "md.shared"))

    def context(self, raw: IoRaw, **extra) -> Dict[str, Any]:
        out: Dict[str, Any] = {"threads": raw.nthreads, "reps": len(raw.phase_s),
                               "io": "direct" if raw.direct else "buffered"}
        if self.par is None:
            out.update(cpus=(self.p.cpus or [])[:raw.nthreads], placement=self.ctx.opts.placement)
        else:
            out.update(self.par.context())
        out.update(self.fs.context())
        out.update(extra)
        out.update({f"{k}_note": v for k, v in self.p.notes.items()})
        return out


def cache_defeat(raw: IoRaw) -> Tuple[str, bool]:
    """Which method kept the read phase off the page cache, and whether it held."""
    res = raw.resident
    if res is None:
        if raw.direct:
            return "O_DIRECT (residency not measurable: mmap/mincore failed)", True
        return ("posix_fadvise(DONTNEED) asked, but residency could not be measured (mmap/mincore failed): "
                "the read figure may be the page cache's"), False
    pct = f"{res:.1%} of the file pages resident before the read (mincore)"
    if res <= RESIDENT_OK:
        return ("O_DIRECT" if raw.direct else "posix_fadvise(DONTNEED) after fsync") + f": {pct}", True
    return f"none held: {pct}; the read figure is partly the page cache's", False


def _metric(name: str, values: List[float], unit: str, raw: IoRaw, better: str = HIGHER,
            peak: Optional[Peak] = None, context: Optional[Dict[str, Any]] = None, note: str = "") -> Metric:
    m = Metric.measured(name, values, unit, better, peak=peak, context=context or {})
    m.note = note
    return judge(m, raw.valid, f"validation failed: {raw.msg or 'data read back did not match'}",
                 "other I/O on this file system or device caching; rerun, or use --size to write more")


def _seq_metrics(r: _Runner, raw: IoRaw, layout: str, xfer: int, bpt: int, suffix: str = "") -> List[Metric]:
    method, held = cache_defeat(raw)
    ctx = r.context(raw, layout=layout, xfer_bytes=xfer, bytes_per_thread=bpt, total_bytes=bpt * raw.nthreads,
                    fsync="before close, inside the timed write phase (IOR -e)",
                    verify=f"a 64-bit stamp per {STAMP_EVERY} B checked on every read",
                    unit_note="MiB/s = 2^20 bytes per second (IOR's convention)")
    if r.mode.refused:
        ctx["direct_refused"] = r.mode.refused
    out = []
    for ph, what in ((0, "write"), (1, "read")):
        c = dict(ctx)
        note = ""
        if ph == 1:
            c["cache_defeat"] = method
            c["resident_fraction"] = raw.resident
            if not held:
                note = f"page cache not defeated: {method}"
        out.append(_metric(f"storage.seq.{what}.{layout}{suffix}", raw.rates(ph, 1 / MIB), MIBS, raw,
                           peak=r.fs.peak, context=c, note=note))
    return out


def _check_space(p: Plan, path: str, shown: str, processes: int = 1) -> None:
    need = p.bytes_at_once() * processes
    free = free_bytes(path)
    if free < FREE_MARGIN * need:
        raise BadValueError(f"--dir {shown}: {free / GIB:.2f} GiB free, the storage bench needs "
                            f"{FREE_MARGIN * need / GIB:.2f} GiB (what it writes at once +10 %): use a smaller "
                            "--size or another --dir")


def preflight(ctx: Context) -> Plan:
    """Every check that needs no measurement, for the CLI to run before anything else:
    sizes and repetitions (BadValueError), the directory (PathError) and its free space
    (BadValueError). bench_storage repeats them; this only makes bad input fail first."""
    p = plan(ctx)
    parent = getattr(ctx.opts, "storage_dir", None)
    with RunDir(parent) as rd:        # proves the directory writable, and removes the probe
        _check_space(p, rd.path, parent or os.path.dirname(rd.path))
    return p


def bench_storage(ctx: Context, parallel: Optional[Tuple[Any, str, Plan]] = None) -> Outcome:
    """Sequential bandwidth, random IOPS and metadata rates on ``storage_dir`` (or $TMPDIR).

    ``parallel``: what ``prepare_parallel`` yields; every MPI rank calls this and they
    measure together (bench/storage_mpi.py). Every rank returns the same figures, except
    the latency percentiles, which only rank 0 computes from every rank's samples.
    """
    if parallel is not None:
        return _bench_parallel(ctx, *parallel)
    parent = getattr(ctx.opts, "storage_dir", None)
    p = plan(ctx)
    out = Outcome()
    with RunDir(parent) as rd:
        _check_space(p, rd.path, parent or os.path.dirname(rd.path))
        fs = describe_fs(rd.path)
        fs.dir = os.path.dirname(rd.path)     # the run's own subdirectory is gone afterwards
        r = _Runner(ctx, p, rd.path, fs)
        try:
            _measure(r, out)
        except KeyboardInterrupt as e:
            raise Interrupted(out, *e.args) from None
    return out


def _plan_parallel(ctx: Context, parent: Optional[str], par: Any, path: str) -> Plan:
    """The plan on every rank, and the free space of each group's directory, or every rank's error."""
    from ..cluster.stop import raise_agreed
    err = None
    try:
        p = plan(ctx, par)
    except CeilingError as e:
        err = e
    raise_agreed(par.world, err)
    if par.group.Get_rank() == 0:        # what the whole group writes at once, in its directory
        try:
            _check_space(p, path, parent or os.path.dirname(path), processes=par.group.Get_size())
        except CeilingError as e:
            err = e
    raise_agreed(par.world, err)
    return p


@contextlib.contextmanager
def prepare_parallel(ctx: Context):
    """Every MPI rank together: directories, indices and the plan, with each rank's error
    (bad --dir, size or space) raised on all of them before anything is measured. Yields what
    ``bench_storage(ctx, parallel=...)`` measures with; the directories go on leaving."""
    from .storage_mpi import parallel_run
    parent = getattr(ctx.opts, "storage_dir", None)
    with parallel_run(ctx, parent) as (par, path):
        yield par, path, _plan_parallel(ctx, parent, par, path)


def combine_fs(parts: List[Tuple[str, List[str], FileSystem]]) -> FileSystem:
    """One description of the directories the ranks write to: (host, nodes, file system)
    of each group's directory. One directory: its own. Several (node-local --dir): the
    peak of the aggregate is the sum of each distinct device's (a device shared by two
    groups on one host counted once), unknown when one of them is; every directory is
    listed in the context."""
    if len(parts) == 1:
        return parts[0][2]
    first = parts[0][2]
    seen: Dict[Tuple[str, str], Peak] = {}
    for host, _, fs in parts:
        seen.setdefault((host, fs.mount.source if fs.mount else fs.dir), fs.peak)
    unknown = [(k, pk) for k, pk in seen.items() if not pk.known]
    if unknown:
        (host, src), pk = unknown[0]
        peak = Peak(None, MIBS, f"unknown: {src} on {host}: {pk.provenance}")
    else:
        peak = Peak(sum(pk.value for pk in seen.values()), MIBS,    # type: ignore[misc]
                    f"sum of {len(seen)} devices' peaks, one per directory: "
                    + "; ".join(f"{src} on {host} {pk.value:.0f} {MIBS}" for (host, src), pk in seen.items()))
    out = FileSystem(first.dir, first.mount, peak, first.device)
    out.groups = [{"host": host, "nodes": nodes, **fs.context(),
                   "peak_mibs": fs.peak.value, "peak_provenance": fs.peak.provenance} for host, nodes, fs in parts]
    return out


def _describe_groups(par: Any, path: str) -> FileSystem:
    """Each group's first rank describes its directory; every rank gets the combination."""
    import socket
    members = par.group.allgather(par.rank)
    mine = None
    if par.group.Get_rank() == 0:
        fs = describe_fs(path)
        fs.dir = os.path.dirname(path)
        mine = (socket.gethostname(), list(dict.fromkeys(par.nodes[r] for r in members)), fs)
    return combine_fs([x for x in par.world.allgather(mine) if x is not None])


def _bench_parallel(ctx: Context, par: Any, path: str, p: Plan) -> Outcome:
    out = Outcome()
    fs = _describe_groups(par, path)
    r = _Runner(ctx, p, path, fs, par)
    try:
        _measure(r, out)
    except KeyboardInterrupt as e:
        raise Interrupted(out, *e.args) from None
    return out


def _measure(r: _Runner, out: Outcome) -> None:
    p, prog = r.p, r.ctx.progress
    fs = r.fs
    peak = (f"{fs.peak.value:.0f} {MIBS}" if fs.peak.known else "unknown") + f" - {fs.peak.provenance}"
    if fs.groups:
        where = "; ".join(f"{g['dir']} on {g['host']} (nodes {', '.join(g['nodes'][:4])}"
                          f"{' ...' if len(g['nodes']) > 4 else ''}) is on {g['mount_point'] or '?'} ({g['fs_type']})"
                          for g in fs.groups[:8])
        out.findings.append(Finding(
            id="storage.fs", status=OK, title=f"storage: {len(fs.groups)} directories, one per group of nodes",
            evidence=f"{where}{' ...' if len(fs.groups) > 8 else ''}; peak of the aggregate: {peak}"))
    else:
        out.findings.append(Finding(
            id="storage.fs", status=OK, title=f"storage: {fs.fstype} on {fs.mount.source if fs.mount else '?'}",
            evidence=f"{r.dir} is on {fs.mount.mount_point if fs.mount else '?'} ({fs.fstype}); device peak: {peak}"))
    steps = 3 + 1 + len(p.sweep) + 2 + 2     # layouts, buffered, sweep, random read/write, metadata x2
    prog.start("storage", total=steps)
    # headline: the three layouts at the headline transfer, direct when the file system allows
    for layout, xfer in (("fpp", p.xfer), ("shared", p.xfer), ("strided", p.strided_xfer)):
        bpt = p.bytes_per_thread // xfer * xfer
        raw = r.seq(layout=layout, xfer=xfer, bytes_per_thread=bpt, reps=p.reps)
        out.metrics += _seq_metrics(r, raw, layout, xfer, bpt)
        prog.advance()
    # the same file-per-thread pattern buffered (fsync + fadvise), when the headline was direct
    if r.mode.direct:
        raw = r.seq(layout="fpp", xfer=p.xfer, bytes_per_thread=p.bytes_per_thread, reps=p.reps, direct=False)
        out.metrics += _seq_metrics(r, raw, "fpp", p.xfer, p.bytes_per_thread, suffix=".buffered")
    prog.advance()
    # bandwidth against transfer size
    xs: List[float] = []
    ys: Dict[int, List[Optional[float]]] = {0: [], 1: []}
    invalid: List[str] = []
    skipped: List[str] = []
    sweep_reps = min(p.reps, SWEEP_REPS)
    for xfer in p.sweep:
        bpt = min(p.bytes_per_thread, xfer * SWEEP_TRANSFERS) // xfer * xfer
        if bpt < xfer:
            skipped.append(f"{xfer} B: larger than the {p.bytes_per_thread} bytes per thread")
            prog.advance()
            continue
        raw = r.seq(layout="fpp", xfer=xfer, bytes_per_thread=bpt, reps=sweep_reps)
        xs.append(xfer)
        for ph in (0, 1):
            ys[ph].append(max(raw.rates(ph, 1 / MIB)) if raw.valid else None)
        if not raw.valid:
            invalid.append(f"{xfer} B: {raw.msg}")
        prog.advance()
    for ph, what in ((0, "write"), (1, "read")):
        c = {"layout": "fpp", "threads": p.threads * (r.par.size if r.par else 1),
             "io": "direct" if r.mode.direct else "buffered", **(r.par.context() if r.par else {}),
             "reps": sweep_reps, "y_stat": f"best of {sweep_reps} repetitions",
             "x_note": f"transfer size; each thread moves up to {SWEEP_TRANSFERS} transfers",
             **fs.context()}
        if invalid:
            c["invalid"] = invalid
        if skipped:
            c["skipped"] = skipped
        out.series.append(Series(f"storage.seq.{what}.xfer", "xy", title=f"Sequential {what} by transfer size",
                                 x_label="transfer", x_unit="bytes", y_label="bandwidth", y_unit=MIBS,
                                 x=xs, y=ys[ph], context=c))
    # random 4 KiB
    raw = r.rand()
    method, held = cache_defeat(raw)
    for ph, what in ((0, "randread"), (1, "randwrite")):
        pooled = [v for rep in raw.lat_s for v in rep[ph]]
        c = r.context(raw, xfer_bytes=RAND_XFER, file_bytes_per_thread=p.rand_file_bytes,
                      seconds_per_rep=p.rand_seconds, engine="pread/pwrite, one operation in flight per thread "
                      "(fio psync, iodepth=1)", latency_us=latency_summary(pooled),
                      cache_defeat=method if ph == 0 else None)
        if ph == 1:
            c["fsync"] = "once per thread at the end, inside the timed phase (fio end_fsync=1)"
        note = "" if held or ph == 1 else f"page cache not defeated: {method}"
        if not raw.direct and ph == 0:
            note = "; ".join(filter(None, [note, "buffered reads: blocks read twice in a repetition come from "
                                                 "the page cache"]))
        out.metrics.append(_metric(f"storage.iops.{what}", raw.rates(ph), IOPS, raw, context=c, note=note))
        for q in (50, 99):
            vals = [float(np.percentile(rep[ph], q)) * 1e6 for rep in raw.lat_s if len(rep[ph])]
            if vals:
                out.metrics.append(_metric(f"storage.lat.{what}.p{q}", vals, US, raw, better=LOWER,
                                           context={"threads": raw.nthreads, "io": c["io"],
                                                    "stat": f"p{q} of each repetition's operations",
                                                    **fs.context()}))
        prog.advance()
    # metadata, shared directory then a directory per thread
    for unique, suffix in ((False, ""), (True, ".unique")):
        raw = r.meta(unique)
        for ph, what in enumerate(("create", "stat", "read", "unlink")):
            pooled = [v for rep in raw.lat_s for v in rep[ph]]
            c = r.context(raw, files_per_thread=p.md_files, file_bytes=p.md_bytes,
                          directory="one per thread (mdtest -u)" if unique else "one shared by all threads",
                          latency_us=latency_summary(pooled), io="buffered",
                          note="no fsync (mdtest's default): rates include the journal's and page cache's work")
            out.metrics.append(_metric(f"storage.md.{what}{suffix}", raw.rates(ph), OPS, raw, context=c))
        prog.advance()
    prog.done()
    if r.mode.refused:
        out.findings.append(Finding(
            id="storage.direct", status=WARN, title="storage: O_DIRECT refused, buffered I/O used",
            evidence=r.mode.refused,
            why="Without O_DIRECT, reads reach the device only if the page cache was emptied first.",
            fix="Each read metric says whether posix_fadvise emptied it (cache_defeat, resident_fraction)."))
    bad = [m.name for m in out.metrics if "page cache not defeated" in m.note]
    if bad:
        out.findings.append(Finding(
            id="storage.cache", status=WARN, title="storage: read figures include the page cache",
            evidence=f"{', '.join(bad)}: pages stayed resident after the write and eviction",
            why="A read served from memory is not the device's bandwidth.",
            fix="Use a file system that honours O_DIRECT or posix_fadvise, or --size of 1.5x the node's memory."))
