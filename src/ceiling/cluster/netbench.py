"""The MPI timing loops (csrc/mpi/netbench.c) seen from Python: the ctypes
binding of the library build.py compiles, and what each call returns.

The library is loaded after mpi4py initialised MPI, and must prove it
resolved the very library mpi4py initialised: ``nb_library`` reports MPI
initialised there and the same version string. Every call is collective
over MPI_COMM_WORLD; a negative return is the loop refusing its parameters.

Loading runs the library's code, so ``NetBench.load`` first checks the file
as every rank finds it (cache.verified: a private directory of ours, a file
of ours matching the digest recorded when it was built) and refuses it
otherwise: build.py rebuilds what fails the check, a rank merely loading
never executes it.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Tuple

from ..errors import CoreError, MPIUnavailableError, PathError
from ..units import size
from . import cache, watchdog
from .watchdog import allowance

NB_ABI = 2
NB_F_CORRUPT = 0x1
NB_F_STALE = 0x2              # test hook: ping-pong's block 0 goes out unstamped (netbench.c)
NB_MSG = 256

OPS = {"barrier": 0, "bcast": 1, "allreduce": 2, "alltoall": 3}


@dataclass
class PairRaw:
    """One point-to-point measurement: seconds per timed block, and the data check."""

    times_s: List[float]
    valid: bool
    msg: str = ""


@dataclass
class CollRaw:
    """One collective measurement: per timed block, IMB's t_min / t_max / t_avg over ranks (seconds per call)."""

    tmin_s: List[float]
    tmax_s: List[float]
    tavg_s: List[float]
    valid: bool
    msg: str = ""


@dataclass
class NetBench:
    """The loaded timing loops. Every method is collective over MPI_COMM_WORLD."""

    path: str
    lib: Any = field(repr=False)

    @classmethod
    def load(cls, path: Path, library_version: str) -> "NetBench":
        # Checked by path, then loaded by the same path: safe because the directory is
        # 0700 and ours (checked in cache.verified), so no one else can swap the file between.
        if not cache.verified(Path(path)):
            raise PathError(f"refusing to load {path}: not a file of yours matching the digest recorded "
                            f"when it was built ({cache.record_of(Path(path)).name}); run again to rebuild it")
        try:
            so = ctypes.CDLL(str(path))
        except OSError as e:
            raise CoreError(f"cannot load {path}: {e}") from None
        i64, i32, dp, cp = ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_char_p
        so.nb_abi.restype = i32
        so.nb_library.argtypes, so.nb_library.restype = [cp, i32], i32
        so.nb_pingpong.argtypes = [i32, i32, i64, i32, i32, i32, i32, dp, cp]
        so.nb_stream.argtypes = [i32, i32, i64, i32, i32, i32, i32, i32, i32, dp, cp]
        so.nb_coll.argtypes = [i32, i32, i32, i64, i32, i32, i32, i32, dp, dp, dp, cp]
        so.nb_pairs.argtypes = [i32, i64, i32, i32, i32, i32, dp, cp]
        for fn in (so.nb_pingpong, so.nb_stream, so.nb_coll, so.nb_pairs):
            fn.restype = i32
        if so.nb_abi() != NB_ABI:
            raise CoreError(f"{path}: timing loops of another ceiling (ABI {so.nb_abi()}, want {NB_ABI})")
        buf = ctypes.create_string_buffer(8192)
        initialised = so.nb_library(buf, len(buf))
        theirs = buf.value.decode(errors="replace").strip()
        if not initialised or theirs != library_version.strip():
            raise MPIUnavailableError(
                f"{path} resolved another MPI library than the one mpi4py initialised "
                f"({'not initialised there' if not initialised else theirs.splitlines()[0]}); "
                "remove it and make mpicc match mpi4py's library")
        return cls(str(path), so)

    @staticmethod
    def _check(rc: int, msg: bytes, what: str) -> Tuple[bool, str]:
        text = msg.decode(errors="replace").strip("\0").strip()
        if rc < 0:
            raise CoreError(f"{what}: {text or 'refused its parameters'}")
        return rc == 1, text

    def pingpong(self, a: int, b: int, nbytes: int, reps: int, warmup: int, blocks: int, flags: int = 0) -> PairRaw:
        times = (ctypes.c_double * blocks)()
        msg = ctypes.create_string_buffer(NB_MSG)
        n = 2 * (reps + warmup) * blocks
        with watchdog.waiting(f"ping-pong of {size(nbytes)} between ranks {a} and {b}", allowance(n, n * nbytes),
                              peers=(a, b)):
            rc = self.lib.nb_pingpong(a, b, nbytes, reps, warmup, blocks, flags, times, msg)
        ok, text = self._check(rc, msg.raw, "ping-pong")
        return PairRaw(list(times), ok, text)

    def pairs(self, partner: int, nbytes: int, reps: int, warmup: int, blocks: int, flags: int = 0) -> PairRaw:
        """Every rank ping-pongs with its partner at once (-1: sits out); this rank's pair's seconds."""
        times = (ctypes.c_double * blocks)()
        msg = ctypes.create_string_buffer(NB_MSG)
        n = 2 * (reps + warmup) * blocks
        with watchdog.waiting(f"ping-pong of {size(nbytes)} with rank {partner} (all pairs at once)",
                              allowance(n, n * nbytes), peers=(partner,) if partner >= 0 else ()):
            rc = self.lib.nb_pairs(partner, nbytes, reps, warmup, blocks, flags, times, msg)
        ok, text = self._check(rc, msg.raw, "pairs")
        return PairRaw(list(times), ok, text)

    def stream(self, a: int, b: int, nbytes: int, window: int, iters: int, warmup: int, blocks: int,
               bidir: bool, flags: int = 0) -> PairRaw:
        times = (ctypes.c_double * blocks)()
        msg = ctypes.create_string_buffer(NB_MSG)
        n = (iters + warmup) * window * blocks * (2 if bidir else 1)
        with watchdog.waiting(f"{'bidirectional ' if bidir else ''}streaming of {size(nbytes)} "
                              f"messages between ranks {a} and {b}", allowance(n, n * nbytes), peers=(a, b)):
            rc = self.lib.nb_stream(a, b, nbytes, window, iters, warmup, blocks, int(bidir), flags, times, msg)
        ok, text = self._check(rc, msg.raw, "bibw" if bidir else "bw")
        return PairRaw(list(times), ok, text)

    def coll(self, op: str, color: int, key: int, nbytes: int, iters: int, warmup: int, blocks: int,
             flags: int = 0) -> CollRaw:
        arrs = [(ctypes.c_double * blocks)() for _ in range(3)]
        msg = ctypes.create_string_buffer(NB_MSG)
        dog = watchdog.current()
        n = (iters + warmup) * blocks * (dog.size if dog is not None else 2)     # alltoall: one per rank
        with watchdog.waiting(f"{op} of {size(nbytes)}", allowance(n, n * nbytes)):
            rc = self.lib.nb_coll(OPS[op], color, key, nbytes, iters, warmup, blocks, flags, *arrs, msg)
        ok, text = self._check(rc, msg.raw, op)
        return CollRaw(list(arrs[0]), list(arrs[1]), list(arrs[2]), ok, text)
