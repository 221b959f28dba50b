"""Reading /proc and /sys under a root, and the small formats they use.

The one reader of the kernel's files for every layer above it (machine model,
checks, benches). Everything goes through ``Root`` so that a test can point it
at an unpacked tree of another machine. Reads never raise: a file
that is missing, unreadable or not text is ``None``, and the caller decides
what that means (usually: the figure is unknown, with a reason).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional


class Root:
    """A file-system root ("/" on a live system, a fixture directory in tests)."""

    def __init__(self, root: "str | os.PathLike[str]" = "/"):
        self.path = Path(root)
        self.live = self.path.resolve() == Path("/")

    def p(self, rel: str) -> Path:
        return self.path / rel.lstrip("/")

    def read(self, rel: str) -> Optional[str]:
        """Stripped text of a file, or None. NUL bytes (some sysfs dumps have them) are dropped."""
        try:
            data = self.p(rel).read_bytes()
        except (OSError, ValueError):
            return None
        return data.replace(b"\0", b"").decode("utf-8", errors="replace").strip()

    def read_int(self, rel: str, base: int = 10) -> Optional[int]:
        s = self.read(rel)
        if s is None:
            return None
        try:
            return int(s.split()[0], base) if s else None
        except (ValueError, IndexError):
            return None

    def exists(self, rel: str) -> bool:
        try:
            return self.p(rel).exists()
        except OSError:
            return False

    def listdir(self, rel: str) -> List[str]:
        try:
            return sorted(os.listdir(self.p(rel)))
        except OSError:
            return []

    def __str__(self) -> str:
        return str(self.path)


# No Linux build has more CPUs (NR_CPUS <= 8192); bounds lists read from garbled files.
MAX_CPU_ID = 1 << 16


def read_text(path: "str | os.PathLike[str]") -> Optional[str]:
    """Stripped text of one file by its absolute path (sysfs, procfs), or None."""
    return Root("/").read(str(path))


def parse_meminfo(text: Optional[str]) -> Dict[str, int]:
    """/proc/meminfo (or a NUMA node's meminfo) as {field: value}; "kB" values in bytes,
    unit-less counts (HugePages_Total, ...) as they are. Garbled lines are skipped."""
    out: Dict[str, int] = {}
    for line in (text or "").splitlines():
        m = re.match(r"\s*(?:Node\s+\d+\s+)?([A-Za-z0-9_()]+):\s+(\d+)\s*(kB)?\s*$", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * (1024 if m.group(3) else 1)
    return out


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


def parse_cpumask(text: Optional[str]) -> List[int]:
    """Hex mask "00000000,0000000f" (most significant word first) -> ids."""
    if not text:
        return []
    try:
        value = int(text.replace(",", "").strip() or "0", 16)
    except ValueError:
        return []
    ids, i = [], 0
    while value:
        if value & 1:
            ids.append(i)
        value >>= 1
        i += 1
    return ids


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
