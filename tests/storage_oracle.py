"""The storage loops' data pattern (csrc/kernels/io.c) rewritten in Python, for
the tests to check the files io.c writes byte for byte. ceiling itself never
computes the pattern in Python: the C core writes and checks it.

Every 512-byte-aligned file offset holds a 64-bit stamp made from (seed, file
id, offset); the rest of a transfer is a base buffer made from the seed.
"""
from __future__ import annotations

import sys

import numpy as np

FILE_SEQ, FILE_RAND, FILE_MD, SHARED_TID = 1, 2, 3, 0xFFFF     # io.c's file kinds, the shared file's thread
STAMP_EVERY = 512
_M64 = (1 << 64) - 1


def _mix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def stamp(seed: int, file_id: int, offset: int) -> int:
    """The pattern's 64-bit word at a 512-byte-aligned file offset (io.c's ceil_io_stamp)."""
    return _mix64(_mix64((seed ^ file_id) & _M64) ^ offset)


def file_id(kind: int, rep: int, tid: int, index: int = 0) -> int:
    """io.c's ceil_io_file_id."""
    return ((kind & 0xFF) << 56) | ((rep & 0xFFFF) << 40) | ((tid & 0xFFFF) << 24) | (index & 0xFFFFFF)


def base_bytes(seed: int, n: int) -> bytes:
    """The pattern's base buffer (io.c's ceil_io_fill_base)."""
    k = seed ^ 0xBA5EBA11
    words = [_mix64((k + w) & _M64) for w in range((n + 7) // 8)]
    return np.array(words, dtype=np.uint64).tobytes()[:n]


def expected_transfer(seed: int, fid: int, off: int, xfer: int) -> bytes:
    """What a transfer of ``xfer`` bytes at file offset ``off`` must hold."""
    buf = bytearray(base_bytes(seed, xfer))
    for fo in range((off + STAMP_EVERY - 1) // STAMP_EVERY * STAMP_EVERY, off + xfer - 7, STAMP_EVERY):
        buf[fo - off:fo - off + 8] = stamp(seed, fid, fo).to_bytes(8, sys.byteorder)
    return bytes(buf)
