"""Memory: transparent huge pages, pressure, huge pages obtainable now, DIMM population.

Longer than 500 lines: each check chooses its fix from a cause it records (issue 34), and
the DIMM population's causes (not root, dmidecode missing, no SMBIOS tables, a container)
sit with the check that reads them; the area is one module, as the check registry loads
one module per area."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..machine import dmi
from ..machine.dmi import channel_of
from ..sysfs import parse_meminfo
from .base import Probe, check, ok, skipped, warn

KIB, MIB, GIB = 1024, 1024 ** 2, 1024 ** 3


@check("mem.thp")
def transparent_hugepages(p: Probe):
    """Transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled).

    warn: 'never'. Large arrays then live on 4 KiB pages: more TLB misses,
    lower bandwidth and higher latency for working sets beyond a few MiB.
    'madvise' is fine for ceiling's kernels (they ask for huge pages) but not
    for applications that do not; 'always' serves both.

    Fix: ``echo always > /sys/kernel/mm/transparent_hugepage/enabled``
    (or madvise) as root.
    """
    v = p.read("sys/kernel/mm/transparent_hugepage/enabled")
    if v is None:
        return skipped("Transparent huge pages: not exposed", evidence="no /sys/kernel/mm/transparent_hugepage")
    sel = v[v.find("[") + 1:v.find("]")] if "[" in v and "]" in v else v
    if sel == "never":
        return warn("Transparent huge pages are disabled", evidence=f"enabled: {v}",
                    why="large arrays then use 4 KiB pages: more TLB misses, lower bandwidth and higher latency for "
                        "big working sets",
                    fix="echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or always)", needs_root=True,
                    cause="thp_disabled")
    return ok(f"Transparent huge pages: {sel}", evidence=f"enabled: {v}")


# ---- helpers ---------------------------------------------------------------

def _size(nbytes: float) -> str:
    """Bytes in binary units: "512 MiB", "1.5 GiB", "503 GiB"."""
    v = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{v:.0f} B"
            return f"{v:.0f} {unit}" if v >= 100 or v == int(v) else f"{v:.1f} {unit}"
        v /= 1024.0
    return f"{v:.0f} B"  # unreachable


def _pct(frac: float) -> str:
    """A fraction as a percentage, with a decimal under 1% ("0.4%", "12%")."""
    v = 100.0 * frac
    return f"{v:.1f}%" if 0 < v < 1 else f"{v:.0f}%"


def meminfo(p: Probe) -> Dict[str, int]:
    """/proc/meminfo as {field: value}; values in kB except the HugePages_* counts.
    Lines that are not "Name: <non-negative integer> [kB]" are left out (sysfs.parse_meminfo)."""
    return parse_meminfo(p.read("proc/meminfo"), kib=True)


# ---- pressure --------------------------------------------------------------

SWAP_FRACTION = 0.01          # swap in use above 1% of memory ...
SWAP_BYTES = 256 * MIB        # ... or above 256 MiB
AVAILABLE_FRACTION = 0.10     # MemAvailable below 10% of MemTotal


@check("mem.pressure")
def pressure(p: Probe):
    """Memory pressure: swap in use and memory available (/proc/meminfo).

    Reads MemTotal, MemAvailable (the kernel's estimate of what can be
    allocated without swapping: free memory plus reclaimable cache, since
    Linux 3.14), SwapTotal and SwapFree.

    warn: swap in use above 1% of MemTotal or above 256 MiB; or MemAvailable
    below 10% of MemTotal. Swapped-out pages of a running job cost a disk
    access each time they are touched again, and a node short of memory
    reclaims cache and compacts pages while the job runs: both slow it down
    by orders of magnitude, and leftover processes of earlier jobs are the
    usual cause. In a container the figures are the host's unless lxcfs
    provides its own.
    skipped: /proc/meminfo missing or without MemTotal.

    Fix: find what holds memory and swap
    (``grep VmSwap /proc/[0-9]*/status | sort -k2 -n | tail``; the load.*
    findings name the top consumers), end stale processes, then
    ``swapoff -a && swapon -a`` (root) to bring swapped pages back.
    """
    mi = meminfo(p)
    total = mi.get("MemTotal")
    if not total:
        return skipped("Memory pressure: /proc/meminfo not readable", evidence="no MemTotal in /proc/meminfo")
    total_b = total * KIB
    facts: List[str] = [f"MemTotal {_size(total_b)}"]
    problems: List[str] = []
    causes: List[str] = []
    avail = mi.get("MemAvailable")
    if avail is None:
        facts.append("MemAvailable unknown (kernel before 3.14, or not in /proc/meminfo)")
    else:
        frac = avail / total
        facts.append(f"MemAvailable {_size(avail * KIB)} ({frac:.0%})")
        if frac < AVAILABLE_FRACTION:
            problems.append(f"only {frac:.0%} of memory available ({_size(avail * KIB)} of {_size(total_b)})")
            causes.append("low_available")
    st, sf = mi.get("SwapTotal"), mi.get("SwapFree")
    swap_used: Optional[int] = None
    if st is None or sf is None:
        facts.append("swap unknown (no SwapTotal/SwapFree)")
    elif st == 0:
        facts.append("no swap configured")
    else:
        swap_used = max(st - sf, 0) * KIB
        facts.append(f"swap {_size(swap_used)} used of {_size(st * KIB)}")
        if swap_used > min(SWAP_FRACTION * total_b, SWAP_BYTES):
            problems.insert(0, f"{_size(swap_used)} of swap in use")
            causes.insert(0, "swap_in_use")
    evidence = ", ".join(facts) + " (/proc/meminfo)"
    if problems:
        swapped = "swap_in_use" in causes
        fix = ("find what holds memory"
               + (" and swap (grep VmSwap /proc/[0-9]*/status | sort -k2 -n | tail; " if swapped
                  else " (ps -eo pid,rss,comm --sort=-rss | head; ")
               + "the load.* findings name the top consumers), end stale processes"
               + (", then swapoff -a && swapon -a to bring swapped pages back" if swapped else ""))
        return warn("Memory pressure: " + "; ".join(problems), evidence=evidence,
                    why="swapped-out pages cost a disk access each time they are touched, and a node short of memory "
                        "reclaims and compacts while the job runs: both slow it down by orders of magnitude",
                    fix=fix, needs_root=swapped, cause=causes[0], data={"causes": causes})
    title = f"Memory: {_size(avail * KIB)} of {_size(total_b)} available" if avail is not None else \
        f"Memory: {_size(total_b)} total"
    title += ", no swap in use" if not swap_used else f", {_size(swap_used)} of swap in use"
    return ok(title, evidence=evidence)


# ---- huge pages obtainable now -------------------------------------------------

FRAGMENTED_BELOW = 0.25       # under 25% of free memory in blocks a huge page fits in
POOL_UNUSED_ABOVE = 0.10      # a hugetlbfs pool holding over 10% of memory unused


def buddyinfo(p: Probe) -> List[Tuple[str, str, List[int]]]:
    """(node, zone, free blocks per order) for each line of /proc/buddyinfo,
    "Node 0, zone   Normal    143    891 ..."; garbled lines are left out."""
    out = []
    for line in p.lines("proc/buddyinfo"):
        m = re.match(r"\s*Node\s+(\d+)\s*,\s*zone\s+(\S+)\s+(.*)$", line)
        if not m:
            continue
        try:
            counts = [int(x) for x in m[3].split()]
        except ValueError:
            continue
        if counts and all(c >= 0 for c in counts):
            out.append((m[1], m[2], counts))
    return out


def _pools(p: Probe, mi: Dict[str, int]) -> List[Dict[str, int]]:
    """hugetlbfs pools: one per page size from /sys/kernel/mm/hugepages/hugepages-<N>kB,
    else the default size's from /proc/meminfo. Each: size, total, free, rsvd (pages, size in bytes)."""
    pools = []
    base = "sys/kernel/mm/hugepages"
    for name in p.listdir(base):
        m = re.fullmatch(r"hugepages-(\d+)kB", name)
        if not m:
            continue
        d = f"{base}/{name}"
        total = p.read_int(f"{d}/nr_hugepages")
        if total is None or total < 0:
            continue
        free = p.read_int(f"{d}/free_hugepages")
        rsvd = p.read_int(f"{d}/resv_hugepages")
        pools.append({"size": int(m[1]) * KIB, "total": total, "free": max(free or 0, 0), "rsvd": max(rsvd or 0, 0)})
    if not pools and "HugePages_Total" in mi and mi.get("Hugepagesize"):
        pools.append({"size": mi["Hugepagesize"] * KIB, "total": mi["HugePages_Total"],
                      "free": mi.get("HugePages_Free", 0), "rsvd": mi.get("HugePages_Rsvd", 0)})
    return pools


@check("mem.hugepages")
def hugepages(p: Probe):
    """Huge pages obtainable now (fragmentation) and hugetlbfs pools.

    A transparent huge page needs a free, physically contiguous block of its
    size (2 MiB with 4 KiB pages on x86 and most Arm; 512 MiB with 64 KiB
    pages on Arm). /proc/buddyinfo lists the free blocks of each order (2^n
    base pages) per NUMA node and zone; the bytes in blocks of at least a
    huge page's order are compared with MemFree. The huge page size is
    /sys/kernel/mm/transparent_hugepage/hpage_pmd_size, else Hugepagesize in
    /proc/meminfo; the base page size is this process's page size on a live
    node, and 4 KiB on a recorded tree.

    warn: under 25% of free memory is in blocks a huge page fits in. Free
    memory is then fragmented: THP allocations fall back to base pages
    (more TLB misses, lower bandwidth) or stall in compaction, and
    huge-page-backed buffers (MPI, RDMA) are hard to get.
    Also reads the hugetlbfs pools (/sys/kernel/mm/hugepages/hugepages-*kB,
    else HugePages_Total/Free/Rsvd and Hugepagesize): warn when a pool holds
    over 10% of memory unused (free and not reserved), because pool pages are
    taken from everything else and only programs that map hugetlbfs use them.
    skipped: neither /proc/buddyinfo nor the pool figures are readable.

    Fix: ``echo 1 > /proc/sys/vm/compact_memory`` (root) defragments free
    memory; dropping the page cache first (``sync; echo 3 >
    /proc/sys/vm/drop_caches``) gives it more to work with. Shrink an unused
    pool with ``echo N > /proc/sys/vm/nr_hugepages`` (root), or have the
    batch system size it per job.
    """
    mi = meminfo(p)
    facts: List[str] = []
    notes: List[str] = []
    problems: List[str] = []
    fixes: List[str] = []
    causes: List[str] = []

    # -- fragmentation
    pmd = p.read_int("sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
    if pmd and pmd > 0:
        huge, huge_src = pmd, "hpage_pmd_size"
    elif mi.get("Hugepagesize"):
        huge, huge_src = mi["Hugepagesize"] * KIB, "Hugepagesize"
    else:
        huge, huge_src = None, ""
    if p.live:
        try:
            page, page_src = int(os.sysconf("SC_PAGE_SIZE")), "this process's page size"
        except (ValueError, OSError, AttributeError):
            page, page_src = 4096, "assumed"
    else:
        page, page_src = 4096, "assumed on a recorded tree"
    buddy = buddyinfo(p)
    order = None
    frag: Optional[float] = None
    if huge and page > 0 and huge >= page and huge % page == 0 and (huge // page) & (huge // page - 1) == 0:
        order = (huge // page).bit_length() - 1
    if not buddy:
        notes.append("fragmentation: /proc/buddyinfo not readable")
    elif order is None:
        notes.append("fragmentation: huge page size unknown (no hpage_pmd_size, no Hugepagesize)" if not huge
                     else f"fragmentation: a {_size(huge)} huge page is not a power-of-two number of {_size(page)} "
                          "pages")
    elif order >= max(len(c) for _, _, c in buddy):
        notes.append(f"fragmentation: a {_size(huge)} huge page is order {order} with {_size(page)} pages "
                     f"({page_src}), but /proc/buddyinfo lists orders 0-{max(len(c) for _, _, c in buddy) - 1}")
    else:
        big: Dict[str, int] = {}
        free_by_node: Dict[str, int] = {}
        for node, _zone, counts in buddy:
            big[node] = big.get(node, 0) + sum(n << i for i, n in enumerate(counts) if i >= order) * page
            free_by_node[node] = free_by_node.get(node, 0) + sum(n << i for i, n in enumerate(counts)) * page
        big_total = sum(big.values())
        free_kb = mi.get("MemFree")
        free_b, free_src = (free_kb * KIB, "MemFree") if free_kb else (sum(free_by_node.values()), "/proc/buddyinfo")
        unit = f"blocks of ≥ {_size(huge)} ({huge_src}; order {order} with {_size(page)} pages, {page_src})"
        if free_b <= 0:
            notes.append("fragmentation: no free memory to compare with")
        else:
            frac = frag = min(big_total / free_b, 1.0)
            facts.append(f"{_size(big_total)} of {_size(free_b)} free ({free_src}) is in {unit}: {_pct(frac)}")
            if len(big) > 1:
                facts.append("per node: " + ", ".join(
                    f"node {n} {_size(big[n])} of {_size(free_by_node[n])}" for n in sorted(big, key=int)))
            if frac < FRAGMENTED_BELOW:
                problems.append(f"free memory is fragmented: only {_pct(frac)} of it ({_size(big_total)} of "
                                f"{_size(free_b)}) is in blocks a {_size(huge)} huge page fits in")
                fixes.append("echo 1 > /proc/sys/vm/compact_memory (after sync; echo 3 > /proc/sys/vm/drop_caches "
                             "to give it more room)")
                causes.append("fragmented")

    # -- hugetlbfs pools
    pools = _pools(p, mi)
    total_b = mi.get("MemTotal", 0) * KIB
    if not pools:
        notes.append("hugetlbfs pools: not readable")
    elif not any(x["total"] for x in pools):
        facts.append("no hugetlbfs pool (" + ", ".join(f"{_size(x['size'])}: 0 pages" for x in pools) + ")")
    else:
        for x in pools:
            if not x["total"]:
                continue
            unused = max(x["free"] - x["rsvd"], 0) * x["size"]
            facts.append(f"hugetlbfs pool of {x['total']} × {_size(x['size'])} ({_size(x['total'] * x['size'])}): "
                         f"{x['free']} free, {x['rsvd']} reserved")
            if total_b and unused > POOL_UNUSED_ABOVE * total_b:
                problems.append(f"a hugetlbfs pool holds {_size(unused)} unused ({unused / total_b:.0%} of memory)")
                if "pool_unused" not in causes:
                    fixes.append("echo N > /proc/sys/vm/nr_hugepages to shrink it (or let the batch system size it "
                                 "per job)")
                    causes.append("pool_unused")

    evidence = "; ".join(facts + ([f"not judged: {'; '.join(notes)}"] if notes else []))
    if problems:
        whys = []
        if "fragmented" in causes:
            whys.append("transparent huge pages fall back to base pages when no free block is big enough "
                        "(more TLB misses, lower bandwidth, compaction stalls)")
        if "pool_unused" in causes:
            whys.append("pages held in a hugetlbfs pool are lost to every program that does not map hugetlbfs")
        return warn("Huge pages: " + "; ".join(problems), evidence=evidence, why="; ".join(whys),
                    fix="; ".join(fixes), needs_root=True, cause=causes[0], data={"causes": causes})
    if not facts:
        return skipped("Huge pages: nothing readable", evidence=evidence)
    if frag is None:
        return ok("Huge pages: no unused pool; fragmentation not judged", evidence=evidence)
    return ok(f"Huge pages obtainable: {_pct(frag)} of free memory is in blocks of ≥ {_size(huge or 0)}",
              evidence=evidence)


# ---- DIMM population -------------------------------------------------------

VISIBLE_BELOW = 0.90          # visible memory under 90% of installed

HIDDEN, POPULATION, SLOW = "memory_hidden", "population", "slow_dimms"
POPULATION_FIXES = {
    HIDDEN: "check the BIOS memory mode (mirroring, sparing hide memory) and the event log (ipmitool sel list) "
            "for a DIMM disabled after errors",
    POPULATION: "populate every channel with identical DIMMs, the same number per channel (see the board's "
                "population table)",
    SLOW: "check the BIOS memory speed setting; two DIMMs per channel lower the speed on many CPUs",
}


def _unread(p: Probe, cause: str, reason: str):
    """The skipped finding when the DIMM records could not be read, with the fix for
    ``cause`` (machine/dmi.py's words) as it applies to this user (root or not)."""
    title = "DIMM population: DIMM records not readable"
    why = "the DIMM records (SMBIOS type 17) say how many channels are populated and at what speed"
    if cause == dmi.NOT_ROOT and p.is_root:
        # Root and still refused: a container or a security module, not a missing sudo.
        return skipped(title, evidence=reason, why=why, cause="denied_to_root",
                       fix="root is refused here too (a container without access to /sys/firmware/dmi or "
                           "/dev/mem): run ceiling on the host")
    if cause == dmi.NOT_ROOT:
        return skipped(title, evidence=reason, why=why, cause=cause, needs_root=True,
                       fix="run ceiling as root once (it reads /sys/firmware/dmi/entries itself), or "
                           "sudo dmidecode -t memory")
    if cause == dmi.TOOL_MISSING:
        run = "" if p.is_root else ", then run ceiling as root once (or sudo dmidecode -t memory)"
        return skipped(title, evidence=reason, why=why, cause=cause, needs_root=True,
                       fix=f"install dmidecode (the package of that name: dnf, apt or zypper install dmidecode){run}")
    if cause in (dmi.NO_TABLES, dmi.NO_RECORDS):
        return skipped("DIMM population: no SMBIOS memory records on this system", evidence=reason, cause=cause,
                       why="the firmware or hypervisor provides none (usual in VMs and containers): nothing to fix")
    if cause == dmi.NOT_RECORDED:
        return skipped(title, evidence=reason, why=why, cause=cause,
                       fix=f"on the recorded machine, save `dmidecode -t memory` (as root) as {dmi.RECORDED} at "
                           f"the top of the tree")
    if cause == dmi.TOOL_FAILED:
        return skipped(title, evidence=reason, why=why, cause=cause,
                       fix="run dmidecode -t memory by hand to see why it fails")
    return skipped(title, evidence=reason, why=why, cause=cause or "unknown")


def _counts(values: List[Any], fmt) -> str:
    seen: Dict[Any, int] = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    return ", ".join(f"{n} × {fmt(v)}" for v, n in sorted(seen.items(), key=lambda kv: (-kv[1], str(kv[0]))))


@check("mem.population")
def population(p: Probe):
    """DIMM population: installed vs visible memory, sizes, speeds, channels.

    Reads the DIMM records (SMBIOS type 17, from dmidecode or
    /sys/firmware/dmi/entries: root only), the memory the kernel sees
    (MemTotal) and the memory channels per socket of this CPU (CPU families
    data file or config).

    warn, each named:
    - visible memory under 90% of installed: mirroring or sparing set in
      the BIOS, or memory not recognised (a DIMM disabled after errors);
    - DIMMs of mixed sizes or rated speeds: channels end up unbalanced and
      run at the slowest DIMM's speed;
    - a DIMM configured below its rated speed: the CPU's limit, two DIMMs
      per channel or a BIOS setting costs bandwidth;
    - channels left empty (populated channels < channels per socket ×
      sockets): memory bandwidth is proportional to populated channels;
    - unbalanced population: different numbers of DIMMs per channel, or
      different capacity per socket: interleaving then covers only part of
      memory, and one NUMA domain is slower or fills first.
    Channels are known only when the DIMM locators name socket and channel
    (e.g. "P0_Node0_Channel0_Dimm0", "CPU1_DIMM_A1").
    skipped, with the cause in data["cause"] and its own fix: the records
    are root's (not_root: run ceiling as root once, or ``sudo dmidecode -t
    memory``); running as root but dmidecode is not installed and the
    kernel does not export the records (tool_missing: install the dmidecode
    package); the firmware or hypervisor provides no SMBIOS tables
    (no_tables, no_records: nothing to fix); a VM (virtual_machine: its DIMM
    records are the hypervisor's invention).

    Fix, by cause: memory not visible (memory_hidden): the BIOS memory mode
    (mirroring, sparing) and the event log for a DIMM disabled after errors;
    mixed sizes or speeds, empty channels, unbalanced channels or sockets
    (population): identical DIMMs in every channel, the same number per
    channel (the board manual's population table); DIMMs below their rated
    speed (slow_dimms): the BIOS memory speed setting, or fewer DIMMs per
    channel where the CPU slows two.
    """
    m = p.machine
    rows = m.dimms
    if rows is None:
        return _unread(p, m.dimms_unread, m.unknowns.get("dimms", "no SMBIOS memory records"))
    if m.virtualized:
        return skipped(f"DIMM population: not applicable in a VM ({m.virtualized})",
                       evidence=f"{len(rows)} DIMM records from the hypervisor",
                       why="a VM's DIMM records are the hypervisor's invention, not the hardware's population",
                       cause="virtual_machine")
    # Persistent-memory modules (NVDIMM, Optane) are not part of MemTotal.
    pop = [r for r in rows if isinstance(r, dict) and r.get("populated")
           and "non-volatile" not in str(r.get("type") or "").lower()]
    if not pop:
        return skipped("DIMM population: no populated DIMM listed",
                       evidence=f"{len(rows)} memory device records, none populated")
    j = _Judged()
    sizes = [r.get("size_bytes") for r in pop if isinstance(r.get("size_bytes"), int) and r["size_bytes"] > 0]
    types = "/".join(sorted({str(r["type"]) for r in pop if r.get("type")})) or "DIMMs"
    j.facts.append(f"{len(pop)} of {len(rows)} slots populated: "
                   f"{_counts(sizes, _size) if sizes else 'sizes unknown'} {types}")
    _judge_visible(j, sum(sizes), m.mem_total_bytes)
    rated, conf = _judge_speeds(j, pop, sizes)
    _judge_channels(j, pop, m)
    facts, problems, notes, causes = j.facts, j.problems, j.notes, j.causes

    evidence = "; ".join(facts + ([f"not judged: {'; '.join(notes)}"] if notes else []))
    evidence += f"; DIMM records from {m.sources.get('dimms', 'SMBIOS')}"
    if problems:
        if len(problems) > len(causes):      # mixed sizes or speeds, empty or unbalanced channels, sockets
            causes.insert(1 if causes[:1] == [HIDDEN] else 0, POPULATION)
        return warn("Memory population: " + "; ".join(problems), evidence=evidence,
                    why="memory bandwidth grows with every populated channel and needs identical DIMMs in all of "
                        "them; mixed, slow or missing DIMMs cost bandwidth on every memory-bound code",
                    fix="; ".join(POPULATION_FIXES[c] for c in causes), needs_root=True,
                    cause=causes[0], data={"causes": causes})
    what = f"{len(pop)} × {_size(sizes[0])}" if sizes and len(set(sizes)) == 1 else f"{len(pop)} DIMMs"
    speed = f" at {min(conf or rated)} MT/s" if (conf or rated) else ""
    judged = "" if notes else ", every channel populated alike"
    return ok(f"Memory population: {what} {types}{speed}{judged}", evidence=evidence)


@dataclass
class _Judged:
    """What population's parts found: facts for the evidence, problems for the title,
    notes on what could not be judged, and the causes that choose the fixes."""
    facts: List[str] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    causes: List[str] = field(default_factory=list)


def _judge_visible(j: _Judged, installed: int, visible: Optional[int]) -> None:
    """Installed DIMM capacity against the memory the kernel sees (MemTotal)."""
    if installed and visible:
        frac = visible / installed
        j.facts.append(f"installed {_size(installed)}, visible {_size(visible)} (MemTotal, {frac:.0%})")
        if frac < VISIBLE_BELOW:
            j.problems.append(f"only {_size(visible)} of {_size(installed)} installed is visible ({frac:.0%})")
            j.causes.append(HIDDEN)
    else:
        j.notes.append("installed vs visible: " + ("DIMM sizes unknown" if not installed else "MemTotal unknown"))


def _judge_speeds(j: _Judged, pop: List[dict], sizes: List[int]) -> Tuple[List[int], List[int]]:
    """Mixed sizes, mixed rated speeds and DIMMs configured below their rated speed;
    returns the rated and configured speeds (MT/s)."""
    def positive(key: str) -> List[int]:
        return [r[key] for r in pop if isinstance(r.get(key), int) and r[key] > 0]

    if len(set(sizes)) > 1:
        j.problems.append(f"mixed DIMM sizes ({_counts(sizes, _size)})")
    rated, conf = positive("speed_mts"), positive("configured_mts")
    if rated:
        j.facts.append(f"rated {_counts(rated, lambda v: f'{v} MT/s')}")
    if conf:
        j.facts.append(f"configured {_counts(conf, lambda v: f'{v} MT/s')}")
    if not rated and not conf:
        j.notes.append("speeds: the DIMM records give none")
    if len(set(rated)) > 1:
        j.problems.append(f"mixed DIMM speeds ({_counts(rated, lambda v: f'{v} MT/s')})")
    slow = [(r, r["configured_mts"], r["speed_mts"]) for r in pop
            if isinstance(r.get("configured_mts"), int) and isinstance(r.get("speed_mts"), int)
            and 0 < r["configured_mts"] < r["speed_mts"]]
    if slow:
        pairs = sorted({(c, sp) for _, c, sp in slow})
        j.problems.append(f"{len(slow)} DIMM{'s' * (len(slow) != 1)} run below their rated speed ("
                          + ", ".join(f"{c} of {sp} MT/s" for c, sp in pairs) + ")")
        j.causes.append(SLOW)
    return rated, conf


def _judge_channels(j: _Judged, pop: List[dict], m) -> None:
    """Empty channels, unbalanced DIMMs per channel and unequal memory per socket, where
    the DIMM locators name socket and channel."""
    where = [channel_of(r) for r in pop]
    if any(w is None for w in where):
        r = pop[where.index(None)]
        j.notes.append(f"channels: DIMM locators do not name socket and channel "
                       f"(e.g. {r.get('locator')!r} / {r.get('bank_locator')!r})")
        return
    per_chan: Dict[Tuple[int, str], int] = {}
    per_socket: Dict[int, int] = {}
    for r, w in zip(pop, where):
        per_chan[w] = per_chan.get(w, 0) + 1
        per_socket[w[0]] = per_socket.get(w[0], 0) + (r.get("size_bytes") or 0)
    chans_by_socket: Dict[int, int] = {}
    for sock, _ch in per_chan:
        chans_by_socket[sock] = chans_by_socket.get(sock, 0) + 1
    populated = len(per_chan)
    want_per_socket = m.memory_channels
    sockets = max(m.sockets, len(chans_by_socket))
    j.facts.append(f"{populated} channels populated (" + ", ".join(
        f"socket {k}: {v}" for k, v in sorted(chans_by_socket.items())) + " as the locators number them)")
    if want_per_socket:
        want = want_per_socket * sockets
        if populated < want:
            short = [f"socket {k}: {v} of {want_per_socket}" for k, v in sorted(chans_by_socket.items())
                     if v < want_per_socket]
            if len(chans_by_socket) < sockets:
                short.append(f"{sockets - len(chans_by_socket)} socket(s) without any DIMM")
            j.problems.append(f"{want - populated} of {want} memory channels empty ({'; '.join(short)})")
        j.facts.append(f"{want_per_socket} channels per socket × {sockets} sockets "
                       f"({m.sources.get('memory_channels', 'CPU families data file')})")
    else:
        j.notes.append("empty channels: channels per socket unknown for this CPU")
    dpc = sorted(set(per_chan.values()))
    if len(dpc) > 1:
        j.problems.append("unbalanced: " + ", ".join(
            f"{sum(1 for v in per_chan.values() if v == n)} channels with {n} DIMM{'s' * (n != 1)}" for n in dpc))
    elif dpc:
        j.facts.append(f"{dpc[0]} DIMM{'s' * (dpc[0] != 1)} per channel")
    caps = {k: v for k, v in per_socket.items() if v}
    if len(set(caps.values())) > 1:
        j.problems.append("unequal memory per socket (" + ", ".join(
            f"socket {k}: {_size(v)}" for k, v in sorted(caps.items())) + ")")
