"""Reading /proc and /sys under a root, and the small formats they use.

The one reader of the kernel's files for every layer above it: the machine
model reads through ``Root``, a check through its Probe, which reads with the
same ``Root`` and decodes with the same ``decode``. Everything goes through
``Root.raw`` so that a test can point it at an unpacked tree of another
machine, or feed it garbage (tests/checks/test_robust.py,
tests/test_machine_robust.py). Reads never raise and never hang: a file that is
missing, unreadable, not a regular file (a FIFO, /dev/zero) or absurdly large
(MAX_FILE_BYTES) is ``None``, and the caller decides what that means (usually:
the figure is unknown, with a reason).

Text comes in two strengths, chosen by the caller, never by the file:
  lenient (the machine model): NUL bytes dropped (some sysfs dumps have them),
    undecodable bytes replaced, an empty file is "" - a DMI string with one odd
    byte still names the board;
  strict (checks): undecodable bytes or an empty file are None - a check that
    judges a node says "unreadable" rather than reason from mangled text.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Dict, Iterable, List, Optional


# A file larger than this is not one the kernel writes for a real machine (/proc/interrupts
# of 10,000 CPUs and 300 IRQs is about 35 MB): refused, rather than read into memory.
MAX_FILE_BYTES = 64 << 20
_CHUNK = 1 << 20


class NotReadable(Exception):
    """Why read_file refused a file (raised only with ``why=True``)."""


def read_file(path: "str | os.PathLike[str]", cap: int = MAX_FILE_BYTES, why: bool = False) -> Optional[bytes]:
    """The bytes of a regular file of at most ``cap`` bytes; None otherwise (missing,
    unreadable, a FIFO, a device such as /dev/zero, or too large). Never blocks on
    a FIFO and never reads more than ``cap`` + 1 MiB. ``why``: raise NotReadable
    with the reason instead of returning None."""
    def no(reason: str) -> None:
        if why:
            raise NotReadable(reason)
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:
        return no(getattr(e, "strerror", None) or str(e))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return no("not a regular file")
        chunks, total = [], 0
        while True:
            b = os.read(fd, _CHUNK)
            if not b:
                return b"".join(chunks)
            total += len(b)
            if total > cap:
                return no(f"larger than {cap >> 20} MiB")
            chunks.append(b)
    except OSError as e:
        return no(e.strerror or str(e))
    finally:
        os.close(fd)


def decode(data: Optional[bytes], strict: bool = False) -> Optional[str]:
    """Stripped text of a file's bytes (see the module doc for ``strict``); None for None."""
    if data is None:
        return None
    if not strict:
        return data.replace(b"\0", b"").decode("utf-8", errors="replace").strip()
    try:
        text = data.decode("utf-8", errors="strict").strip()
    except UnicodeDecodeError:
        return None
    return text or None


def first_int(text: Optional[str], base: int = 10) -> Optional[int]:
    """The first word of ``text`` as an integer (base 0: with its 0x/0o prefix); None when it is not one."""
    if not text:
        return None
    try:
        return int(text.split()[0], base)
    except (ValueError, IndexError):
        return None


def natural_key(name: str):
    """Sort key that puts cpu2 before cpu10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


class Root:
    """A file-system root ("/" on a live system, a fixture directory in tests)."""

    def __init__(self, root: "str | os.PathLike[str]" = "/"):
        self.path = Path(root)
        self.live = self.path.resolve() == Path("/")
        self._prefix = os.path.join(str(self.path), "")     # joined as strings: a node of 10,000
                                                              # CPUs is 300,000 reads

    def p(self, rel: str) -> Path:
        return self.path / rel.lstrip("/")

    def raw(self, rel: str) -> Optional[bytes]:
        """The file's bytes, or None when it cannot be read (read_file: regular files of
        at most MAX_FILE_BYTES only): every read goes through here."""
        return read_file(self._prefix + rel.lstrip("/"))

    def read(self, rel: str, strict: bool = False) -> Optional[str]:
        """Stripped text of a file, or None (``strict``: see the module doc)."""
        return decode(self.raw(rel), strict)

    def read_int(self, rel: str, base: int = 10, strict: bool = False) -> Optional[int]:
        return first_int(self.read(rel, strict), base)

    def exists(self, rel: str) -> bool:
        try:
            return self.p(rel).exists()
        except OSError:
            return False

    def listdir(self, rel: str, natural: bool = False) -> List[str]:
        """Names in a directory, sorted (``natural``: cpu2 before cpu10); [] if absent."""
        try:
            names = os.listdir(self.p(rel))
        except OSError:
            return []
        return sorted(names, key=natural_key) if natural else sorted(names)

    def __str__(self) -> str:
        return str(self.path)


# No Linux build has more CPUs (NR_CPUS <= 8192); bounds lists read from garbled files.
MAX_CPU_ID = 1 << 16


def read_text(path: "str | os.PathLike[str]") -> Optional[str]:
    """Stripped text of one file by its absolute path (sysfs, procfs), or None."""
    return Root("/").read(str(path))


def stat_fields(data: bytes) -> List[bytes]:
    """/proc/PID/stat from field 3 (state) on: comm, which may hold spaces and
    parentheses, ends at the last ')'. Field N of proc(5) is item N - 3."""
    return data[data.rindex(b")") + 2:].split()


def parse_meminfo(text: Optional[str], kib: bool = False, node: Optional[int] = None) -> Dict[str, int]:
    """/proc/meminfo, or with ``node`` nodeN/meminfo ("Node 0 MemTotal: ..."; lines of
    another node are skipped), as {field: value}: "kB" values in bytes (``kib``: in KiB,
    as written), unit-less counts (HugePages_Total, ...) as they are. Garbled lines are skipped."""
    out: Dict[str, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"\s*(?:Node\s+(\d+)\s+)?([A-Za-z0-9_()]+):\s+(\d{1,20})\s*(kB)?\s*$", line)
        if m and (node is None or (m.group(1) is not None and int(m.group(1)) == node)):
            out[m.group(2)] = int(m.group(3)) * (1024 if m.group(4) and not kib else 1)
    return out


def parse_uptime(text: Optional[str]) -> Optional[float]:
    """Seconds since boot from /proc/uptime; None when unreadable, negative or absurd."""
    try:
        v = float((text or "").split()[0])
    except (ValueError, IndexError):
        return None
    return v if 0 <= v < 1e10 else None


def meminfo_bytes(field: str = "MemAvailable", root: "Root | None" = None) -> Optional[int]:
    """One /proc/meminfo figure in bytes (MemAvailable, MemTotal), None where unreadable."""
    return parse_meminfo((root or Root("/")).read("proc/meminfo")).get(field)


def parse_cpulist(text: Optional[str]) -> List[int]:
    """Linux list format "0-3,8,10-14:2" -> sorted ids; None, junk or absurd ranges -> []."""
    if not text:
        return []
    out = set()
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if not m:
            return []
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        step = int(m.group(3)) if m.group(3) else 1
        if b < a or step < 1 or b >= MAX_CPU_ID:
            return []
        out.update(range(a, b + 1, step))
    return sorted(out)


_NONZERO_HEX = re.compile(r"[1-9a-fA-F]")


def parse_cpumask(text: Optional[str]) -> List[int]:
    """Hex mask "00000000,0000000f" (most significant word first) -> ids; junk, a sign or
    more than MAX_CPU_ID bits -> []. Linear in the mask's length."""
    if not text:
        return []
    digits = text.replace(",", "").strip()
    if not digits or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        return []
    digits = digits.lstrip("0")
    if digits and 4 * (len(digits) - 1) + int(digits[0], 16).bit_length() > MAX_CPU_ID:
        return []
    # Only the non-zero digits are visited (the scan for them runs in C): a mask as wide
    # as a 10,000-CPU node naming two CPUs costs two steps, not 10,000.
    out: List[int] = []
    last = len(digits) - 1
    for m in _NONZERO_HEX.finditer(digits):
        v, base = int(m.group(), 16), 4 * (last - m.start())
        out.extend(base + b for b in range(4) if v >> b & 1)
    out.sort()
    return out


def format_cpulist(ids: Iterable[int]) -> str:
    """Inverse of parse_cpulist: [0,1,2,5] -> "0-2,5"."""
    ids = sorted(set(ids))
    parts, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2,
          "MIB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3, "GIB": 1024 ** 3,
          "T": 1024 ** 4, "TB": 1024 ** 4, "TIB": 1024 ** 4}


def parse_size(text: Optional[str]) -> Optional[int]:
    """Sizes as sysfs and dmidecode write them ("32K", "5118K", "16 GB", "512 kB") -> bytes.

    Binary multiples throughout: the kernel's "K" and dmidecode's "GB" both mean 2^10/2^30.
    """
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*", text, flags=re.I)
    if not m:
        return None
    unit = m.group(2).upper()
    if unit not in _UNITS:
        return None
    return int(float(m.group(1)) * _UNITS[unit])
