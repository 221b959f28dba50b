"""Where a process's memory sits: its pages per NUMA node, from /proc/PID/numa_maps.

One line per mapping (proc(5), numa(7)): its start address, the memory policy, then items; among
them ``N<node>=<pages>`` (the pages of the mapping on that node that this process maps),
``kernelpagesize_kB=<k>`` (the size of those pages; 2048 for a huge-page mapping) and
``file=<path>`` for a mapping backed by a file. Only the mappings with no file are counted (heap,
stack, anonymous mmap: the program's own data, placed by the first thread that touched each page);
a file's pages (libraries, the page cache of a mapped file) are shared with other processes and
placed by whoever read them first, and are left out, said as such.

Reading the file walks the process's page tables under its mmap lock, so the program's own page
faults and mmaps wait while it is read: the sampler (probes/proc_sampler.py) reads it only where the
node has more than one NUMA node, at most every ``EVERY_S`` seconds a process, and times each read.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

from ..sysfs import parse_cpulist

EVERY_S = 10.0           # at most one read of a process's numa_maps this often
FIRST_S = 1.0            # the first once the process is this old (its data allocated, in most programs)


@dataclass
class Placement:
    """A process's private (not file-backed) memory per NUMA node, bytes, as one read saw it."""

    by_node: Dict[int, int] = field(default_factory=dict)
    at_s: float = 0.0                     # monotonic seconds of the read
    reads: int = 0                        # reads of this process so far
    read_s: float = 0.0                   # their wall time, seconds (the program's mmap lock held as long)
    files_bytes: int = 0                  # file-backed pages mapped, left out (shared, placed by their first reader)

    @property
    def total(self) -> int:
        return sum(self.by_node.values())


def parse(text: str) -> Placement:
    """The bytes per node of the mappings without a file in numa_maps ``text``; garbled items are
    skipped (a line the kernel printed in a newer format keeps what it has of the known items)."""
    out = Placement()
    for line in text.splitlines():
        items = line.split()[2:]
        page = 4096
        pages: Dict[int, int] = {}
        backed = False
        for it in items:
            key, eq, val = it.partition("=")
            if not eq:
                continue
            if key == "file":
                backed = True
            elif key == "kernelpagesize_kB":
                try:
                    page = int(val) * 1024
                except ValueError:
                    pass
            elif key[:1] == "N" and key[1:].isdigit():
                try:
                    pages[int(key[1:])] = int(val)
                except ValueError:
                    pass
        for node, n in pages.items():
            if backed:
                out.files_bytes += n * page
            else:
                out.by_node[node] = out.by_node.get(node, 0) + n * page
    return out


def read(proc: str, pid: int, before: Optional[Placement] = None, now: Optional[float] = None) -> Optional[Placement]:
    """One read of ``pid``'s numa_maps under ``proc``, timed, with the count and time of ``before``'s
    reads carried on; None where it cannot be read (the process ended, another user's, no NUMA in the
    kernel)."""
    t0 = time.monotonic()
    try:
        with open(f"{proc}/{pid}/numa_maps", "r", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    took = time.monotonic() - t0
    out = parse(text)
    out.at_s = t0 if now is None else now
    out.reads = (before.reads if before else 0) + 1
    out.read_s = (before.read_s if before else 0.0) + took
    return out


def cpu_nodes(sys_root: str = "/sys") -> Dict[int, int]:
    """CPU -> NUMA node from ``sys_root``/devices/system/node/node*/cpulist ({} where the kernel has none)."""
    base = f"{sys_root}/devices/system/node"
    out: Dict[int, int] = {}
    try:
        names = os.listdir(base)
    except OSError:
        return out
    for name in names:
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        try:
            with open(f"{base}/{name}/cpulist") as f:
                cpus = parse_cpulist(f.read())
        except OSError:
            continue
        for c in cpus:
            out.setdefault(c, int(m.group(1)))
    return out
