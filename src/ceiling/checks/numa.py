"""NUMA: automatic balancing, domains against sockets, memory balance across domains."""
from __future__ import annotations

import re
from typing import Dict, Optional

from ..sysfs import format_cpulist, parse_meminfo
from .base import Probe, check, ok, skipped, warn


@check("numa.balancing")
def balancing(p: Probe):
    """Automatic NUMA balancing (/proc/sys/kernel/numa_balancing).

    warn: on, on a node with several NUMA domains. The kernel then unmaps
    pages periodically to sample who touches them and migrates them: OS
    noise and jitter for pinned, first-touch HPC codes, which do not need it.
    skipped: one NUMA domain.

    Fix: ``echo 0 > /proc/sys/kernel/numa_balancing`` (root).
    """
    v = p.read("proc/sys/kernel/numa_balancing")
    if len(p.machine.nodes) <= 1:
        return skipped("Automatic NUMA balancing: one NUMA domain, not relevant",
                       evidence=f"{len(p.machine.nodes) or 1} NUMA domain")
    if v is None:
        return skipped("Automatic NUMA balancing: not exposed", evidence="no /proc/sys/kernel/numa_balancing")
    if v != "0":
        return warn("Automatic NUMA balancing is on", evidence=f"numa_balancing={v}",
                    why="the kernel migrates pages and unmaps them to sample accesses: OS noise and jitter in pinned "
                        "HPC codes",
                    fix="echo 0 > /proc/sys/kernel/numa_balancing (pinned, first-touch codes do not need it)",
                    needs_root=True,
                    cause="numa_balancing_on")
    return ok("Automatic NUMA balancing is off", evidence="numa_balancing=0")


# -- domains and memory balance ------------------------------------------------------
# Layout: Documentation/ABI/stable/sysfs-devices-node (nodeN/cpulist, nodeN/meminfo
# with lines "Node N MemTotal:  X kB").

NODE = "sys/devices/system/node"


def front_side_bus(p: Probe) -> bool:
    """Intel x86 before Nehalem (NetBurst, Core 2, Dunnington) and Itanium before
    the 9300 series had their memory controller in the chipset: several
    sockets, uniform memory, one domain is right."""
    m = p.machine
    if m.arch == "ia64" or (not m.vendor and "Itanium" in (p.read("proc/cpuinfo") or "")):
        return True
    if m.vendor != "GenuineIntel" or m.family is None:
        return False
    return m.family == 15 or (m.family == 6 and m.model is not None and (m.model <= 0x17 or m.model == 0x1D))


def gib(b: Optional[int]) -> str:
    if b is None:
        return "unknown"
    return f"{b / 2 ** 30:.1f} GiB" if b >= 2 ** 30 or b == 0 else f"{b / 2 ** 20:.0f} MiB"


@check("numa.domains")
def domains(p: Probe):
    """NUMA domains against sockets (/sys/devices/system/node, the topology's
    physical package ids).

    Every modern multi-socket server has one memory controller per socket (or
    more), so it should show at least one NUMA domain per socket.

    warn: several sockets but one domain: NUMA is off, or 'node interleaving'
    is on in the BIOS (or the kernel runs with numa=off). Every access then
    averages local and remote latency and bandwidth, and first-touch placement
    (which HPC codes rely on) cannot help.
    ok: one domain per socket; more domains than sockets (sub-NUMA clustering:
    Intel SNC, AMD NPS, which can add bandwidth for NUMA-aware codes); fewer
    domains than sockets but more than one (several sockets per memory domain,
    as on some large SMP systems); one domain on front-side-bus Intel systems
    (before Nehalem, 2008) whose memory really is uniform; one domain in a VM,
    whose sockets are virtual. Domains without CPUs (memory-only: CXL
    expanders, HBM in flat mode, coherent GPU memory, persistent memory) are named: memory is
    allocated there only with explicit placement (numactl --membind/--preferred)
    or memory tiering.

    Fix: disable node interleaving (enable NUMA) in the BIOS setup; remove
    numa=off from the kernel command line.
    """
    m = p.machine
    nodes = m.nodes
    cpu_nodes = [n for n in nodes if n.cpus]
    mem_only = [n for n in nodes if not n.cpus]
    ncpu = max(len(cpu_nodes), 1)
    sockets = m.sockets
    if not sockets:
        return skipped("NUMA domains vs sockets: socket count unknown", evidence=f"{len(nodes)} NUMA domains")
    have_dir = p.exists(NODE)
    ev = (f"{sockets} socket{'s' * (sockets != 1)}, {ncpu} NUMA domain{'s' * (ncpu != 1)} with CPUs: " +
          ("; ".join(f"node{n.id} CPUs {format_cpulist(n.cpus)}" for n in cpu_nodes) or "none listed"))
    if not have_dir:
        ev += f"; no {NODE} (kernel without NUMA support, or numa=off)"
    cmdline = p.read("proc/cmdline") or ""
    numa_off = any(t in ("numa=off", "numa=noacpi") for t in cmdline.split())
    if numa_off:
        ev += "; kernel command line has numa=off"
    extra = ""
    if mem_only:
        extra = (f"; memory-only domain{'s' * (len(mem_only) != 1)} " +
                 ", ".join(f"node{n.id} ({gib(n.mem_bytes)})" for n in mem_only) +
                 " (CXL, HBM, GPU or persistent memory: used only with numactl --membind/--preferred or "
                 "memory tiering)")
    ev += extra
    note = f", plus {len(mem_only)} memory-only" if mem_only else ""
    if sockets > 1 and ncpu == 1:
        if front_side_bus(p):
            return ok(f"One NUMA domain on {sockets} sockets: uniform memory (front-side-bus system)", evidence=ev)
        if m.virtualized:
            return ok(f"One NUMA domain on {sockets} virtual sockets ({m.virtualized} guest)", evidence=ev,
                      why="a VM's sockets are what the hypervisor presents; if the VM spans host sockets, ask for a "
                          "virtual NUMA topology so first-touch placement works")
        return warn(f"One NUMA domain on {sockets} sockets: NUMA is off (node interleaving in the BIOS?)",
                    evidence=ev,
                    why="every memory access averages local and remote latency and bandwidth, and first-touch "
                        "placement cannot help",
                    fix=("remove numa=off from the kernel command line" if numa_off else
                         "disable node interleaving (enable NUMA) in the BIOS setup"), needs_root=True,
                    cause="numa_off_kernel" if numa_off else "node_interleaving")
    if ncpu > sockets:
        per = ncpu / sockets
        per_s = f"{per:.0f}" if per == int(per) else f"{per:.1f}"
        return ok(f"{ncpu} NUMA domains on {sockets} socket{'s' * (sockets != 1)}{note}: sub-NUMA clustering "
                  f"(SNC/NPS, {per_s} per socket)", evidence=ev,
                  why="each domain has its own memory controllers: NUMA-aware, first-touch codes gain bandwidth "
                      "and latency; others see more remote accesses")
    if ncpu < sockets:
        return ok(f"{ncpu} NUMA domains on {sockets} sockets{note}: several sockets share a memory domain",
                  evidence=ev)
    return ok(f"{ncpu} NUMA domain{'s' * (ncpu != 1)} on {sockets} socket{'s' * (sockets != 1)}{note}", evidence=ev)


def node_meminfo(p: Probe, node: int) -> Dict[str, int]:
    """'MemTotal', 'MemFree', ... in bytes from nodeN/meminfo ('Node 0 MemTotal:  123 kB')."""
    return parse_meminfo(p.read(f"{NODE}/node{node}/meminfo"), node=node)


LOW_SHARE = 0.8     # a CPU node with less than this fraction of the mean memory is short
LOW_FREE = 0.10     # a node with less free than this while another has PLENTY_FREE is full
PLENTY_FREE = 0.25


@check("numa.memory_balance")
def memory_balance(p: Probe):
    """Memory per NUMA domain (/sys/devices/system/node/nodeN/meminfo:
    MemTotal and MemFree of each domain that has CPUs).

    warn:
    - a domain with CPUs has less than 80% of the mean memory of such domains,
      or none at all (a DIMM missing or failed, or unequal population): its
      threads then use remote memory, or fill their local memory first;
    - a domain has less than 10% of its memory free while another has at least
      25% free (page cache or another job filled it): first-touch allocations
      of threads on that domain then land on a remote domain.
    Memory-only domains (CXL, HBM, persistent memory) are listed but not
    compared.
    skipped: one domain, or fewer than two domains with readable meminfo.

    Fix: check the DIMM population (mem.* findings, dmidecode -t memory);
    for a full domain, drop the page cache (``sync; echo 3 >
    /proc/sys/vm/drop_caches``, root) or find the process holding the memory
    (numastat -m, numastat -p PID).
    """
    m = p.machine
    ids = [n.id for n in m.nodes] or [int(n[4:]) for n in p.listdir(NODE) if re.fullmatch(r"node\d{1,5}", n)]
    if len(ids) <= 1:
        return skipped("Memory balance across NUMA domains: one domain", evidence=f"{len(ids) or 1} NUMA domain")
    cpuful = {n.id for n in m.nodes if n.cpus}
    info = {i: node_meminfo(p, i) for i in ids}
    total = {i: v["MemTotal"] for i, v in info.items() if "MemTotal" in v}
    free = {i: v["MemFree"] for i, v in info.items() if "MemFree" in v and "MemTotal" in v}
    cpu_total = {i: t for i, t in total.items() if i in cpuful}
    unknown = sorted(i for i in ids if i in cpuful and i not in total)
    mem_only = sorted(i for i in ids if i not in cpuful)
    if len(cpu_total) < 2:
        return skipped("Memory balance across NUMA domains: meminfo of fewer than two domains with CPUs",
                       evidence=f"{NODE}/node*/meminfo readable for node(s) {format_cpulist(sorted(total)) or 'none'}"
                                + (f"; unreadable for {', '.join(f'node{i}' for i in unknown)}" if unknown else ""))

    def line(i: int) -> str:
        f = f", {gib(free[i])} free" if i in free else ""
        return f"node{i} {gib(total[i])}{f}"

    ev = "; ".join(line(i) for i in sorted(cpu_total))
    if unknown:
        ev += "; meminfo unreadable for " + ", ".join(f"node{i}" for i in unknown)
    if mem_only:
        ev += "; memory-only (not compared): " + ", ".join(line(i) if i in total else f"node{i}" for i in mem_only)
    mean = sum(cpu_total.values()) / len(cpu_total)
    ev += f"; mean of domains with CPUs {gib(int(mean))}"
    short = sorted(i for i, t in cpu_total.items() if t == 0 or t < LOW_SHARE * mean)
    problems, fixes, causes = [], [], []
    if short:
        problems.append(", ".join(f"node{i} has no memory" if cpu_total[i] == 0 else
                                  f"node{i} has {gib(cpu_total[i])} ({cpu_total[i] / mean:.0%} of the mean)"
                                  for i in short))
        fixes.append("check the DIMM population (dmidecode -t memory) for a missing or failed DIMM")
        causes.append("domain_short")
    fr = {i: free[i] / total[i] for i in free if i in cpu_total and total[i] > 0}
    full = sorted(i for i, f in fr.items() if f < LOW_FREE)
    roomy = [i for i, f in fr.items() if f >= PLENTY_FREE]
    if full and roomy:
        most = max(roomy, key=lambda i: fr[i])
        problems.append(", ".join(f"node{i} has {fr[i]:.0%} free" for i in full) + f" while node{most} has "
                        f"{fr[most]:.0%} free")
        fixes.append("drop the page cache (sync; echo 3 > /proc/sys/vm/drop_caches) or find what holds the memory "
                     "(numastat -m)")
        causes.append("domain_full")
    if not problems:
        return ok(f"Memory balanced across {len(cpu_total)} NUMA domains with CPUs", evidence=ev)
    return warn("Memory unbalanced across NUMA domains: " + "; ".join(problems), evidence=ev,
                why="threads on a domain with little (or little free) memory get remote memory: lower bandwidth, "
                    "higher latency, and their rank becomes the slowest",
                fix="; ".join(fixes), needs_root=True, cause=causes[0], data={"causes": causes})
