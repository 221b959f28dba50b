"""What the kernel reads when it executes a program: bytes counted in the process's rchar
(and calls in syscr) that no system call of the program made, so strace's sums and the
interposer cannot see them.

Linux's execve (fs/exec.c, fs/binfmt_elf.c) reads, through kernel_read, which counts in
/proc/PID/io like a read(2):

1. the first BINPRM_BUF_SIZE (256) bytes of the file, to choose its format;
2. for an ELF file, its program headers (e_phnum x e_phentsize at e_phoff);
3. with a PT_INTERP header (a dynamically linked program): the interpreter's path
   (p_filesz bytes), the interpreter's ELF header (64 bytes in ELF64, 52 in ELF32) and its
   program headers;
4. on arm64 only (the architecture that parses GNU properties at exec,
   CONFIG_ARCH_USE_GNU_PROPERTY), the PT_GNU_PROPERTY note of the interpreter, or of the
   program where it has none.

Each is one read call. Checked against the kernel: a program's rchar at exit less the bytes
of every read-like system call strace saw equals ``exec_reads`` of it (tests/test_exec_reads.py).
Not counted here: a script's own first 256 bytes (the kernel reads them, then executes its
interpreter, whose reads are these), and a file that is not ELF (None).
"""
from __future__ import annotations

import os
import platform
import struct
from typing import Dict, Optional, Tuple

BINPRM_BUF_SIZE = 256
PT_INTERP, PT_GNU_PROPERTY = 3, 0x6474E553


def _headers(path: str) -> Optional[Tuple[int, int, Optional[str], int, int]]:
    """(file size, program headers' bytes, interpreter path, its length, the GNU property
    note's size) of an ELF file; None where it is not one or cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            ident = f.read(64)
            if len(ident) < 52 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
                return None
            wide, order = ident[4] == 2, "<" if ident[5] == 1 else ">"
            if wide:
                phoff, = struct.unpack_from(order + "Q", ident, 32)
                phentsize, phnum = struct.unpack_from(order + "HH", ident, 54)
            else:
                phoff, = struct.unpack_from(order + "I", ident, 28)
                phentsize, phnum = struct.unpack_from(order + "HH", ident, 42)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            if len(table) < phentsize * phnum:
                return None
            interp, interp_len, prop = None, 0, 0
            for i in range(phnum):
                at = i * phentsize
                kind, = struct.unpack_from(order + "I", table, at)
                if wide:
                    off, filesz = struct.unpack_from(order + "Q", table, at + 8)[0], \
                        struct.unpack_from(order + "Q", table, at + 32)[0]
                else:
                    off, filesz = struct.unpack_from(order + "I", table, at + 4)[0], \
                        struct.unpack_from(order + "I", table, at + 16)[0]
                if kind == PT_INTERP and interp is None:
                    f.seek(off)
                    interp = f.read(filesz).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                    interp_len = filesz
                elif kind == PT_GNU_PROPERTY:
                    prop = filesz
            return size, phentsize * phnum, interp, interp_len, prop
    except (OSError, struct.error, ValueError):
        return None


def exec_reads(path: str, machine: Optional[str] = None) -> Optional[Dict[str, int]]:
    """{"rchar": bytes, "syscr": calls} the kernel reads to execute the ELF program ``path``
    (module docstring); None where it is not an ELF file or its interpreter cannot be read."""
    exe = _headers(path)
    if exe is None:
        return None
    size, phdrs, interp, interp_len, prop = exe
    rchar, calls = min(BINPRM_BUF_SIZE, size) + phdrs, 2
    if interp is not None:
        loader = _headers(interp)
        if loader is None:
            return None
        _, loader_phdrs, _, _, loader_prop = loader
        with open(interp, "rb") as f:
            ehdr = 64 if f.read(5)[4:5] == b"\x02" else 52
        rchar += interp_len + ehdr + loader_phdrs
        calls += 3
        prop = loader_prop
    if (machine or platform.machine()) == "aarch64" and prop:
        rchar += prop
        calls += 1
    return {"rchar": rchar, "syscr": calls}
