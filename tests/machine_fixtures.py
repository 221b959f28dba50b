"""Recorded machines for the machine-model tests.

The recorded trees (hwloc's test data: /proc and /sys of real machines, and
raw cpuid dumps; BSD-3-Clause, tests/fixtures/machines/hwloc/HWLOC-COPYING)
are in tests/fixtures/machines/hwloc/, so a clone runs every test. Tests
unpack what they need into a temporary directory, once per test session.
Our own small fixtures (dmidecode outputs, configs) are in tests/fixtures/machines/.
"""
from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple


LOCAL = Path(__file__).resolve().parent / "fixtures" / "machines"
HWLOC = LOCAL / "hwloc"

_cache: Dict[Tuple[str, str, bool], Path] = {}

# Parts of the trees the machine model never reads; leaving them packed
# halves the files written per tree (the trees are many tiny files).
SKIP = ("*/sys/bus/*", "*/sys/kernel/*", "*/sys/module/*", "*/sys/block/*",
        "*/cache/index*/ways_of_associativity", "*/cache/index*/number_of_sets",
        "*/cache/index*/physical_line_partition", "*/cache/index*/uevent",
        "*/cache/index*/allocation_policy", "*/cache/index*/write_policy",
        "*/cpuidle/*", "*/thermal_throttle/*", "*/cpufreq/stats/*",
        "*/node*/vmstat", "*/node*/numastat", "*/node*/hugepages/*")


def local(*parts: str) -> Path:
    return LOCAL.joinpath(*parts)


def _extract(tarball: Path, dest: Path, skip=SKIP) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    tar = shutil.which("tar")
    # The system tar is several times faster on these trees of many small files.
    excludes = [f"--exclude={p}" for p in skip]
    ok = tar is not None and subprocess.run([tar, "-xjf", str(tarball), "-C", str(dest), "--wildcards", *excludes],
                                            capture_output=True).returncode == 0
    if not ok:
        with tarfile.open(tarball, "r:bz2") as tf:
            members = [m for m in tf.getmembers() if not any(fnmatch.fnmatch(m.name, p) for p in skip)]
            # The trees hold relative symlinks (cpuN/nodeM -> ../../node/nodeM);
            # the "tar" filter keeps them while refusing absolute or escaping paths.
            try:
                tf.extractall(dest, members=members, filter="tar")
            except TypeError:  # Python without extraction filters
                tf.extractall(dest, members=members)
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise RuntimeError(f"{tarball}: expected one top directory, found {[p.name for p in tops]}")
    return tops[0]


def unpack(kind: str, name: str, tmp_path_factory, full: bool = False) -> Path:
    """Unpack HWLOC/kind/name.tar.bz2 (once per session); the tree's root directory.
    ``full``: every file, also those the machine model never reads (checks read them)."""
    key = (kind, name, full)
    if key in _cache:
        return _cache[key]
    tarball = HWLOC / kind / f"{name}.tar.bz2"
    if not tarball.exists():
        raise FileNotFoundError(f"recorded machine {tarball} is missing from the repository")
    root = _extract(tarball, tmp_path_factory.mktemp(f"{kind}-{name[:20]}"), skip=() if full else SKIP)
    _cache[key] = root
    return root


def fsroot(name: str, tmp_path_factory, full: bool = False) -> Path:
    """A recorded /proc + /sys tree (linux-fsroot/NAME); ``full`` keeps every file."""
    return unpack("linux-fsroot", name, tmp_path_factory, full=full)


def cpuid_dump(name: str, tmp_path_factory, pu: str = "pu0") -> Path:
    """One PU's cpuid dump file from x86-cpuid/NAME."""
    return unpack("x86-cpuid", name, tmp_path_factory) / pu


class Recording:
    """A reader (sysfs.Root, or a check's Probe) that remembers every file it read
    and can swap one file's bytes: the robustness tests' way to find what a parser
    reads and then feed it garbage. Mix in before the reader's class."""

    def __init__(self, *a, swap: Optional[Dict[str, Optional[bytes]]] = None, **kw):
        super().__init__(*a, **kw)
        self.seen: List[str] = []
        self.swap: Dict[str, Optional[bytes]] = dict(swap or {})

    def raw(self, rel: str) -> Optional[bytes]:
        rel = rel.lstrip("/")
        if rel in self.swap:
            return self.swap[rel]
        data = super().raw(rel)
        if data is not None and rel not in self.seen:
            self.seen.append(rel)
        return data
