"""A synthetic /proc + /sys tree of a node with many CPUs, written to disk: what
the 10,000-CPU tests (tests/test_big_tree.py) and benchmarks/big_tree.py read.

Shaped like a real large node (sockets, NUMA nodes, SMT siblings, an L3 per
group of cores); ``all_share`` makes every CPU list one huge set instead (every
CPU a sibling of every other, one L3 for all), the worst case for the parsers.
"""
from __future__ import annotations

import os
from pathlib import Path

from ceiling.sysfs import format_cpulist


def _cpumask(ids, n):
    words = [0] * ((n + 31) // 32)
    for c in ids:
        words[c // 32] |= 1 << (c % 32)
    return ",".join(f"{w:08x}" for w in reversed(words))


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def make_tree(root: Path, ncpus: int, sockets: int = 2, smt: int = 2, nodes: int = 8,
              cores_per_l3: int = 8, all_share: bool = False, interrupts: int = 64) -> Path:
    """Write the tree under ``root``; CPUs are numbered core-major within the sockets
    and SMT siblings n apart, as Linux numbers x86 nodes."""
    cores = ncpus // smt
    per_socket = cores // sockets
    everyone = range(ncpus)
    every_list, every_mask = format_cpulist(everyone), _cpumask(everyone, ncpus)
    cpu = "sys/devices/system/cpu"
    for name in ("online", "present", "possible"):
        _w(root, f"{cpu}/{name}", f"0-{ncpus - 1}\n")
    info = []
    for c in range(ncpus):
        core = c % cores
        sock = core // per_socket
        sibs = [core + k * cores for k in range(smt)]
        l3 = [x for x in everyone if (x % cores) // cores_per_l3 == core // cores_per_l3]
        t = f"{cpu}/cpu{c}/topology"
        _w(root, f"{t}/physical_package_id", f"{sock}\n")
        _w(root, f"{t}/core_id", f"{core % per_socket}\n")
        sl, sm = (every_list, every_mask) if all_share else (format_cpulist(sibs), _cpumask(sibs, ncpus))
        for name in ("core_cpus", "thread_siblings"):
            _w(root, f"{t}/{name}", sm + "\n")
            _w(root, f"{t}/{name}_list", sl + "\n")
        caches = ((0, 1, "Data", "48K", sibs), (1, 1, "Instruction", "32K", sibs), (2, 2, "Unified", "2048K", sibs),
                  (3, 3, "Unified", "32768K", l3))
        for idx, level, ctype, size, shared in caches:
            d = f"{cpu}/cpu{c}/cache/index{idx}"
            if all_share:
                shared_list, shared_mask = every_list, every_mask
            else:
                shared_list, shared_mask = format_cpulist(shared), _cpumask(shared, ncpus)
            for name, text in (("level", level), ("type", ctype), ("size", size), ("coherency_line_size", 64),
                               ("shared_cpu_list", shared_list), ("shared_cpu_map", shared_mask)):
                _w(root, f"{d}/{name}", f"{text}\n")
        info.append(f"processor\t: {c}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                    f"model name\t: AMD EPYC 9654 96-Core Processor\nstepping\t: 1\ncpu MHz\t\t: 2400.000\n"
                    f"physical id\t: {sock}\ncore id\t\t: {core % per_socket}\n"
                    f"flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq\n\n")
    _w(root, "proc/cpuinfo", "".join(info))
    node = "sys/devices/system/node"
    _w(root, f"{node}/online", f"0-{nodes - 1}\n")
    for k in range(nodes):
        ids = [c for c in everyone if (c % cores) // (cores // nodes) == k]
        _w(root, f"{node}/node{k}/cpulist", format_cpulist(ids) + "\n")
        _w(root, f"{node}/node{k}/meminfo",
           f"Node {k} MemTotal:       {64 << 20} kB\nNode {k} MemFree: {60 << 20} kB\n")
        _w(root, f"{node}/node{k}/distance", " ".join("10" if j == k else "32" for j in range(nodes)) + "\n")
    _w(root, "proc/meminfo", f"MemTotal:       {nodes * (64 << 20)} kB\nMemFree: {nodes * (60 << 20)} kB\n"
                             f"MemAvailable: {nodes * (60 << 20)} kB\n")
    _w(root, "proc/stat", "cpu  1 0 1 100 0 0 0 0 0 0\n" +
       "".join(f"cpu{c} 1 0 1 100 0 0 0 0 0 0\n" for c in everyone) + "ctxt 1\nbtime 1\nprocesses 1\n")
    _w(root, "proc/interrupts", " " * 10 + "".join(f"CPU{c:<8}" for c in everyone) + "\n" +
       "".join(f"{i:>4}: " + " ".join("1" for _ in everyone) + f"  PCI-MSI {i}-edge  nvme0q{i}\n"
               for i in range(interrupts)))
    _w(root, "proc/loadavg", "0.00 0.00 0.00 1/100 1\n")
    _w(root, "proc/uptime", "1000.0 2000.0\n")
    os.makedirs(root / "proc/self", exist_ok=True)
    _w(root, "proc/self/status", f"Name:\tceiling\nCpus_allowed_list:\t0-{ncpus - 1}\n")
    return root
