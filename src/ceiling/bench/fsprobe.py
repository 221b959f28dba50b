"""One probe iteration: what ``ceiling probe`` does every ``--interval``.

io-probing's two data operations, a random 1 MiB read and a random 1 MiB write at
4 KiB-aligned offsets of the data file, and one MD-Workbench iteration on a random
file of the pool (stat, read, delete, re-create: the pool keeps its size), each
timed alone in C (core/probe.py). Never more than one operation in flight; per
iteration 2 MiB + 2 x MD_BYTES of traffic.

An operation that fails (the file system gone, full, stale) is an error of that
operation, counted, never raised: the data file is opened again at the next
iteration, and a pool file whose delete went through but whose re-create failed is
re-created first at the next one, so the pool stays whole.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Dict, Optional

from ..core import probe as cprobe
from .fsprobe_dir import ALIGN, DATA, MD_BYTES, POOL, XFER, Prepared, pool_name

OPS = ("read", "write", "md.stat", "md.read", "md.delete", "md.create")
BYTES_PER_ITERATION = 2 * XFER + 2 * MD_BYTES


@dataclass
class Iteration:
    """Seconds per operation that ran; the errors of those that failed (op -> one line)."""

    seconds: Dict[str, float] = field(default_factory=dict)
    errors: Dict[str, str] = field(default_factory=dict)


class Prober:
    def __init__(self, prep: Prepared, seed: Optional[int] = None):
        self.prep = prep
        self.rng = random.Random(seed)
        self.fd = -1
        self.missing: Optional[int] = None       # a pool file deleted but not re-created

    def _open(self) -> int:
        if self.fd < 0:
            flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_DIRECT if self.prep.direct else 0)
            self.fd = os.open(os.path.join(self.prep.path, DATA), flags)
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def iterate(self) -> Iteration:
        out = Iteration()
        blocks = (self.prep.data_size - XFER) // ALIGN + 1
        for op in ("read", "write"):
            off = self.rng.randrange(blocks) * ALIGN
            try:
                out.seconds[op] = cprobe.rw(self._open(), op == "write", off, XFER, self.prep.direct)
            except OSError as e:
                out.errors[op] = e.strerror or str(e)
                self.close()                  # opened again next time: the file system may come back
        self._md(out)
        return out

    def _md(self, out: Iteration) -> None:
        pool = os.path.join(self.prep.path, POOL)
        if self.missing is not None:          # finish what a failed iteration left
            try:
                _create(os.path.join(pool, pool_name(self.missing)))
                self.missing = None
            except OSError as e:
                for op in OPS[2:]:
                    out.errors[op] = f"pool file {pool_name(self.missing)} cannot be re-created: {e.strerror or e}"
                return
        i = self.rng.randrange(self.prep.files)
        path = os.path.join(pool, pool_name(i))
        try:
            secs = cprobe.md(path, MD_BYTES)
        except OSError as e:
            step = getattr(e, "step", "stat")
            out.errors["md." + step] = e.strerror or str(e)
            if step == "create" or (step == "delete" and not os.path.lexists(path)):
                self.missing = i              # deleted, not (wholly) re-created: _create makes it again
            return
        for op, s in zip(OPS[2:], secs):
            out.seconds[op] = s


def _create(path: str) -> None:
    try:
        os.unlink(path)                       # a half-written one
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, os.urandom(MD_BYTES))
    finally:
        os.close(fd)
