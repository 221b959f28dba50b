"""The OS-noise probe of the C core (csrc/kernels/noise.c): not a rate kernel, so
not in the descriptor table; its own entry point and result structures."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

from ..errors import CoreError
from . import _ERRORS, _Params, _Result, _lib

class _NoiseGap(ctypes.Structure):
    _fields_ = [("start_s", ctypes.c_double), ("length_s", ctypes.c_double)]


class _NoiseStats(ctypes.Structure):
    _fields_ = [
        ("iters", ctypes.c_int64),
        ("detours", ctypes.c_int64),
        ("detour_s", ctypes.c_double),
        ("min_gap_s", ctypes.c_double),
        ("max_gap_s", ctypes.c_double),
        ("window_s", ctypes.c_double),
        ("start_s", ctypes.c_double),
        ("cpu", ctypes.c_int32),
        ("ntop", ctypes.c_int32),
    ]


@dataclass(frozen=True)
class NoiseCPU:
    """One CPU's share of the OS-noise window (one pinned thread reading the clock)."""

    cpu: int                  # the CPU asked for
    ran_on: int               # the CPU the thread ended on (sched_getcpu), -1 unknown
    reads: int                # clock reads in the window
    detours: int              # gaps between reads longer than the threshold
    detour_s: float           # their sum, seconds
    window_s: float           # first read to last read, seconds
    min_gap_s: float          # the loop's own cost (one clock read), seconds
    max_gap_s: float          # the longest gap, seconds
    start_s: float            # first read after the shared start, seconds
    top: tuple                # ((start offset s, length s), ...) longest first

    @property
    def fraction(self) -> float:
        """Share of the window spent in detours (0..1)."""
        return self.detour_s / self.window_s if self.window_s > 0 else 0.0


@dataclass(frozen=True)
class NoiseResult:
    duration_s: float
    threshold_ns: int
    cpus: tuple               # NoiseCPU per CPU asked for, in that order
    valid: bool
    msg: str


def noise_detour(cpus: Sequence[int], duration_s: float, threshold_ns: int = 1000,
                 top: int = 10) -> NoiseResult:
    """Selfish-detour OS-noise probe: one pinned thread per CPU in ``cpus``, all in one
    window of ``duration_s``; gaps between clock reads over ``threshold_ns`` are detours.
    Keeps the ``top`` longest detours per CPU. Raises CoreError on bad parameters, a CPU
    that cannot be pinned, or a core built without the probe."""
    cpus = [int(c) for c in cpus]
    if not cpus:
        raise CoreError("noise probe: no CPU to measure")
    lib = _lib()
    fn = getattr(lib, "ceil_noise_detour", None)
    if fn is None:
        raise CoreError("the C core has no ceil_noise_detour: rebuild it")
    if fn.argtypes is None:
        fn.argtypes = [ctypes.POINTER(_Params), ctypes.c_double, ctypes.POINTER(_NoiseGap), ctypes.c_int32,
                       ctypes.POINTER(_NoiseStats), ctypes.POINTER(_Result)]
        fn.restype = ctypes.c_int
    n, cap = len(cpus), max(0, int(top))
    arr = (ctypes.c_int32 * n)(*cpus)
    p = _Params(threshold_ns=int(threshold_ns), nthreads=n, mem_node=-1,
                cpus=ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32)))
    gaps = (_NoiseGap * max(1, n * cap))()
    stats = (_NoiseStats * n)()
    r = _Result()
    # The caller is OpenMP thread 0 and pinned like the others; the C restores its affinity.
    rc = fn(ctypes.byref(p), float(duration_s), gaps, cap, stats, ctypes.byref(r))
    msg = r.msg.decode(errors="replace")
    if rc != 0:
        raise CoreError(f"noise probe: {_ERRORS.get(rc, f'error {rc}')}" + (f": {msg}" if msg else ""))
    out = []
    for i, c in enumerate(cpus):
        s = stats[i]
        top_i = tuple((gaps[i * cap + j].start_s, gaps[i * cap + j].length_s) for j in range(min(s.ntop, cap)))
        out.append(NoiseCPU(c, int(s.cpu), int(s.iters), int(s.detours), float(s.detour_s), float(s.window_s),
                            float(s.min_gap_s), float(s.max_gap_s), float(s.start_s), top_i))
    return NoiseResult(float(duration_s), int(threshold_ns) if threshold_ns > 0 else 1000, tuple(out),
                       bool(r.valid), msg)
