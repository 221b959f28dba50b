"""The C core, seen from Python: its kernel table and one call to run a kernel.

Every ctypes binding of the C core lives in this package: the kernel table
here, the OS-noise probe in noise.py, the storage I/O loops in io.py, the Perfetto
trace's encoder in pftrace.py.
Nothing else in ceiling declares a ctypes structure of the core.

The library is csrc/ built by CMake into ``ceiling/_core/libceiling_core.so``
(or the file named by ``CEILING_CORE_LIB``, for development builds). Python
never has per-kernel glue: it reads the descriptor table and calls ``run``
with the same parameter block for every kernel; each family reads its own
fields of it (``elements`` for bandwidth, ``ws_bytes`` and ``stride`` for
latency; csrc/include/ceiling.h lists them) and refuses one it would ignore.
Rates are computed by the callers from ``bytes_per_iter`` / ``flops_per_iter``
and the raw times.

The LD_PRELOAD interposer (csrc/interpose/) is a separate library that is
never loaded into this process; ``interpose_library_path`` only says where
it is, for the code that launches a child with it.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

from ..errors import CoreError

ABI_VERSION = 2     # CEIL_ABI_VERSION in csrc/include/ceiling.h

F_NT_STORES = 0x1
F_HUGEPAGES = 0x2
F_THREAD_CPU = 0x4     # clock: each repetition's CPU time of its slowest thread too (RawResult.cpu_s)

_ERRORS = {-1: "invalid parameter", -2: "out of memory", -3: "ISA not supported by this CPU",
           -4: "could not pin a thread to its CPU"}


class _Params(ctypes.Structure):
    """ceil_params: units and which family reads which field are in ceiling.h."""

    _fields_ = [
        ("elements", ctypes.c_int64),       # bandwidth: doubles per array
        ("ws_bytes", ctypes.c_int64),       # latency: working-set bytes
        ("threshold_ns", ctypes.c_int64),   # noise: detour threshold, ns
        ("iters", ctypes.c_int64),
        ("reps", ctypes.c_int32),
        ("warmup", ctypes.c_int32),
        ("nthreads", ctypes.c_int32),
        ("flags", ctypes.c_int32),
        ("cpus", ctypes.POINTER(ctypes.c_int32)),
        ("stride", ctypes.c_int64),
        ("seed", ctypes.c_uint64),
        ("mem_node", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


class _Result(ctypes.Structure):
    _fields_ = [
        ("times", ctypes.POINTER(ctypes.c_double)),
        ("iters", ctypes.c_int64),
        ("check", ctypes.c_double),
        ("valid", ctypes.c_int32),
        ("hugepages", ctypes.c_int32),
        ("nthreads", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("msg", ctypes.c_char * 256),
    ]


_RunFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Params), ctypes.POINTER(_Result))


class _Kernel(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("family", ctypes.c_char_p),
        ("isa", ctypes.c_char_p),
        ("bytes_per_iter", ctypes.c_double),
        ("flops_per_iter", ctypes.c_double),
        ("doc", ctypes.c_char_p),
        ("run", _RunFn),
    ]


@dataclass(frozen=True)
class Kernel:
    """One row of the C descriptor table."""

    name: str
    family: str
    isa: str
    bytes_per_iter: float
    flops_per_iter: float
    doc: str
    supported: bool
    index: int


@dataclass(frozen=True)
class RawResult:
    """What a kernel returns: raw seconds per repetition and its own check."""

    kernel: Kernel
    times_s: tuple
    iters: int
    check: float
    valid: bool
    hugepages: bool
    nthreads: int
    msg: str
    cpu_s: tuple = ()    # with F_THREAD_CPU: the slowest thread's own CPU time per repetition, s (< 0: unread)


def library_path() -> Path:
    env = os.environ.get("CEILING_CORE_LIB")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "_core" / "libceiling_core.so"


def interpose_library_path() -> Path:
    """Where the LD_PRELOAD interposer is: ``CEILING_INTERPOSE_LIB``, else the one built
    beside the core. Whether it exists is the caller's question."""
    env = os.environ.get("CEILING_INTERPOSE_LIB")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "_core" / "libceiling_interpose.so"


def launcher_path() -> Path:
    """Where ceiling-launch is (csrc/launch/: the process `ceiling profile` starts the
    program from): ``CEILING_LAUNCHER``, else the one built beside the core. Whether it
    exists is the caller's question."""
    env = os.environ.get("CEILING_LAUNCHER")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "_core" / "ceiling-launch"


@lru_cache(maxsize=None)
def _lib():
    path = library_path()
    if not path.exists():
        raise CoreError(f"the C core is not built: {path} is missing (reinstall with 'pip install .')")
    lib = ctypes.CDLL(str(path))
    lib.ceil_abi_version.restype = ctypes.c_int
    lib.ceil_kernel_count.restype = ctypes.c_int
    lib.ceil_kernel_get.restype = ctypes.POINTER(_Kernel)
    lib.ceil_kernel_get.argtypes = [ctypes.c_int]
    lib.ceil_isa_supported.restype = ctypes.c_int
    lib.ceil_isa_supported.argtypes = [ctypes.c_char_p]
    abi = lib.ceil_abi_version()
    if abi != ABI_VERSION:
        raise CoreError(f"the C core at {path} has ABI {abi}, this package expects {ABI_VERSION}: rebuild it")
    return lib


def isa_supported(isa: str) -> bool:
    return bool(_lib().ceil_isa_supported(isa.encode()))


@lru_cache(maxsize=None)
def kernels() -> tuple:
    """Every kernel compiled into the core, supported by this CPU or not."""
    lib = _lib()
    out = []
    for i in range(lib.ceil_kernel_count()):
        k = lib.ceil_kernel_get(i).contents
        isa = k.isa.decode()
        out.append(Kernel(k.name.decode(), k.family.decode(), isa, k.bytes_per_iter,
                          k.flops_per_iter, (k.doc or b"").decode(), isa_supported(isa), i))
    return tuple(out)


# Widest first: the variant a benchmark uses by default.
ISA_PREFERENCE = ("avx512", "sve", "avx2", "neon", "sse2", "scalar")


def find(name: str, isa: Optional[str] = None) -> Kernel:
    """The kernel called ``name``: the given ISA variant, or the widest this CPU runs."""
    cands = [k for k in kernels() if k.name == name]
    if not cands:
        raise CoreError(f"no kernel named {name!r} in the C core")
    if isa is not None:
        for k in cands:
            if k.isa == isa:
                if not k.supported:
                    raise CoreError(f"kernel {name!r} variant {isa} needs an ISA this CPU lacks")
                return k
        raise CoreError(f"kernel {name!r} has no {isa} variant (have: {', '.join(k.isa for k in cands)})")
    runnable = [k for k in cands if k.supported]
    if not runnable:
        raise CoreError(f"no variant of kernel {name!r} runs on this CPU")
    return min(runnable, key=lambda k: ISA_PREFERENCE.index(k.isa) if k.isa in ISA_PREFERENCE else 99)


def variants(name: str) -> list:
    """Every supported ISA variant of a kernel, widest first."""
    ks = [k for k in kernels() if k.name == name and k.supported]
    return sorted(ks, key=lambda k: ISA_PREFERENCE.index(k.isa) if k.isa in ISA_PREFERENCE else 99)


def run(kernel: Kernel, *, elements: int = 0, ws_bytes: int = 0, iters: int = 0, reps: int = 1,
        warmup: int = 0, nthreads: int = 1, cpus: Optional[Sequence[int]] = None, flags: int = 0,
        stride: int = 0, seed: int = 12345, mem_node: int = -1) -> RawResult:
    """Run one kernel once (with its warm-up and repetitions); raise CoreError on failure.

    ``elements``: doubles per array (bandwidth kernels); ``ws_bytes`` and ``stride``:
    working-set bytes and bytes between lines (the latency chase); ``iters``: the
    family's unit of work per repetition. A kernel refuses a size it does not read.

    The GIL is released for the duration (ctypes does so for every foreign
    call), so a Python thread can watch the clock or draw a progress bar.
    """
    if reps < 1:
        raise CoreError("reps must be >= 1")
    if cpus is not None and len(cpus) < nthreads:
        raise CoreError(f"placement names {len(cpus)} CPUs for {nthreads} threads")
    # F_THREAD_CPU: the kernel writes each repetition's thread CPU time after its wall times.
    times = (ctypes.c_double * (2 * reps if flags & F_THREAD_CPU else reps))()
    p = _Params(elements=elements, ws_bytes=ws_bytes, iters=iters, reps=reps, warmup=warmup,
                nthreads=nthreads, flags=flags, stride=stride, seed=seed, mem_node=mem_node)
    if cpus is not None:
        arr = (ctypes.c_int32 * len(cpus))(*cpus)
        p.cpus = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32))
    r = _Result()
    r.times = ctypes.cast(times, ctypes.POINTER(ctypes.c_double))
    row = _lib().ceil_kernel_get(kernel.index).contents
    # The calling thread is OpenMP's thread 0 (the chase's only thread) and gets pinned to
    # cpus[0]; the C core gives every thread it pins its own affinity back before it
    # returns (ceil_pin_member / ceil_pin_saving + ceil_affinity_restore), so nothing is
    # saved or restored here: tests/test_kernels_*.py check the C does it.
    rc = row.run(ctypes.byref(p), ctypes.byref(r))
    msg = r.msg.decode(errors="replace")
    if rc != 0:
        raise CoreError(f"kernel {kernel.name} ({kernel.isa}): {_ERRORS.get(rc, f'error {rc}')}"
                        + (f": {msg}" if msg else ""))
    return RawResult(kernel, tuple(times[:reps]), int(r.iters), float(r.check), bool(r.valid),
                     bool(r.hugepages), int(r.nthreads), msg, tuple(times[reps:]))


def cpuid(leaf: int, subleaf: int = 0) -> tuple:
    """Raw x86 cpuid registers (eax, ebx, ecx, edx) from the calling CPU.

    Raises CoreError where there is no cpuid (not x86, or a core built
    before csrc/kernels/cpuid.c existed); the machine model then does without.
    """
    lib = _lib()
    fn = getattr(lib, "ceil_cpuid", None)
    if fn is None:
        raise CoreError("the C core has no ceil_cpuid: rebuild it")
    if fn.argtypes is None:
        fn.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32 * 4)]
        fn.restype = ctypes.c_int
    out = (ctypes.c_uint32 * 4)()
    if fn(leaf & 0xFFFFFFFF, subleaf & 0xFFFFFFFF, ctypes.byref(out)) != 0:
        raise CoreError("cpuid is not available on this CPU")
    return tuple(int(x) for x in out)


from .noise import NoiseCPU, NoiseResult, noise_detour  # noqa: E402, F401  (the noise probe's binding)
