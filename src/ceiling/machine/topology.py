"""Sockets, cores, threads, caches and NUMA nodes from /sys/devices/system.

The kernel's own view is taken as it is: a core is the set of CPUs the
kernel calls thread siblings, a cache instance is a set of CPUs the kernel
says share it. Nothing is inferred from CPU numbering.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..sysfs import Root, parse_cpulist, parse_cpumask, parse_meminfo, parse_size
from .model import Cache, Cpu, NumaNode

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"


@dataclass
class Topology:
    cpus: List[Cpu] = field(default_factory=list)          # online first-class, offline with what is known
    online: List[int] = field(default_factory=list)
    offline: List[int] = field(default_factory=list)
    nodes: List[NumaNode] = field(default_factory=list)
    caches: List[Cache] = field(default_factory=list)
    unknowns: Dict[str, str] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)


def _cpu_ids(root: Root) -> List[int]:
    ids = []
    for name in root.listdir(CPU_DIR):
        m = re.fullmatch(r"cpu(\d+)", name)
        if m:
            ids.append(int(m.group(1)))
    return sorted(ids)


def online_cpus(root: Root, present: List[int]) -> Tuple[List[int], str]:
    """Online CPUs and where that came from.

    cpu/online is authoritative; without it, each cpuN/online file (absent
    for CPUs that cannot be hot-unplugged, e.g. cpu0: those are online).
    """
    text = root.read(f"{CPU_DIR}/online")
    if text:
        return parse_cpulist(text), f"{CPU_DIR}/online"
    out = []
    for c in present:
        flag = root.read(f"{CPU_DIR}/cpu{c}/online")
        if flag is None or flag.strip() != "0":
            out.append(c)
    return out, f"{CPU_DIR}/cpuN/online"


class _Sets:
    """CPU sets parsed once per distinct text. On a large node thousands of files hold
    the same list (every CPU of an L3, of a node, or on a flattened tree all of them):
    parsing each, and keeping a copy per CPU, is quadratic in time and memory."""

    def __init__(self) -> None:
        self._seen: Dict[Tuple[str, str], FrozenSet[int]] = {}

    def parse(self, text: Optional[str], kind: str) -> FrozenSet[int]:
        if not text:
            return frozenset()
        key = (kind, text)
        got = self._seen.get(key)
        if got is None:
            got = frozenset(parse_cpumask(text) if kind == "mask" else parse_cpulist(text))
            self._seen[key] = got
        return got

    def either(self, root: Root, mask: str, lst: str) -> FrozenSet[int]:
        """The mask's set, else the list's. The mask is what the kernel keeps, the _list
        file is printed from it: prefer the mask where both exist (hand-made trees
        sometimes disagree)."""
        return self.parse(root.read(mask), "mask") or self.parse(root.read(lst), "list")


def _siblings(root: Root, sets: _Sets, cpu: int, name: str) -> FrozenSet[int]:
    base = f"{CPU_DIR}/cpu{cpu}/topology/{name}"
    return sets.either(root, base, base + "_list")


class _UnionFind:
    def __init__(self):
        self.parent: Dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _read_caches(root: Root, cpus: List[int], sets: _Sets
                 ) -> Tuple[List[Cache], Dict[int, Dict[int, int]], Dict[str, str]]:
    """Caches grouped by (level, type, size); per-CPU instance ids of L2 and L3."""
    unknowns: Dict[str, str] = {}
    # (level, type, size, line) -> set of sharing sets
    groups: Dict[Tuple[int, str, int, Optional[int]], set] = {}
    per_level_sets: Dict[int, set] = {}
    cpu_sets: Dict[int, Dict[int, FrozenSet[int]]] = {}
    unshared = False
    for c in cpus:
        base = f"{CPU_DIR}/cpu{c}/cache"
        for idx in root.listdir(base):
            if not re.fullmatch(r"index\d+", idx):
                continue
            d = f"{base}/{idx}"
            level = root.read_int(f"{d}/level")
            ctype = (root.read(f"{d}/type") or "").lower()
            size = parse_size(root.read(f"{d}/size"))
            if level is None or size is None or ctype not in ("data", "instruction", "unified"):
                continue
            line = root.read_int(f"{d}/coherency_line_size")
            shared = sets.either(root, f"{d}/shared_cpu_map", f"{d}/shared_cpu_list")
            if not shared:
                shared, unshared = frozenset(), True
            key = shared if c in shared else sets.parse(",".join(map(str, sorted(shared | {c}))), "list")
            groups.setdefault((level, ctype, size, line), set()).add(key)
            if ctype != "instruction":
                per_level_sets.setdefault(level, set()).add(key)
                cpu_sets.setdefault(c, {})[level] = key
    if unshared:
        unknowns["caches.sharing"] = "some caches do not report shared_cpu_list/map: counted as private"
    caches = []
    for (level, ctype, size, line), sets in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        caches.append(Cache(level=level, type=ctype, size_bytes=size, line_bytes=line,
                            instances=len(sets), cpus_per_instance=max(len(s) for s in sets)))
    # Instance ids: ordinal of each sharing set, ordered by its lowest CPU.
    ids: Dict[int, Dict[int, int]] = {}
    for level, sets in per_level_sets.items():
        order = {s: i for i, s in enumerate(sorted(sets, key=min))}
        for c, by_level in cpu_sets.items():
            if level in by_level:
                ids.setdefault(c, {})[level] = order[by_level[level]]
    return caches, ids, unknowns


def _read_nodes(root: Root) -> Tuple[List[NumaNode], Dict[int, int]]:
    nodes, cpu_node = [], {}
    for name in root.listdir(NODE_DIR):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        nid = int(m.group(1))
        base = f"{NODE_DIR}/{name}"
        cpus = parse_cpulist(root.read(f"{base}/cpulist")) or parse_cpumask(root.read(f"{base}/cpumap"))
        mem = parse_meminfo(root.read(f"{base}/meminfo")).get("MemTotal")
        dist_text = root.read(f"{base}/distance") or ""
        try:
            dist = [int(x) for x in dist_text.split()]
        except ValueError:
            dist = []
        nodes.append(NumaNode(id=nid, cpus=cpus, mem_bytes=mem, distances=dist))
        for c in cpus:
            cpu_node.setdefault(c, nid)
    nodes.sort(key=lambda n: n.id)
    return nodes, cpu_node


def read(root: Root, mem_total_bytes: Optional[int] = None) -> Topology:
    """The whole topology under ``root``; missing pieces become unknowns, never errors."""
    topo = Topology()
    present = _cpu_ids(root)
    if not present:
        topo.unknowns["topology"] = f"{CPU_DIR} lists no CPUs"
        return topo
    online, src = online_cpus(root, present)
    present_set = set(present)
    online = [c for c in online if c in present_set] or []
    topo.sources["online"] = src
    online_set = set(online)
    topo.online = online
    topo.offline = [c for c in present if c not in online_set]

    # Cores: the kernel's thread-sibling sets, joined symmetrically.
    uf = _UnionFind()
    sets = _Sets()
    pkg_raw: Dict[int, Optional[int]] = {}
    core_raw: Dict[int, Optional[int]] = {}
    cluster_raw: Dict[int, Optional[int]] = {}
    has_topology = set()
    joined: Dict[FrozenSet[int], int] = {}              # a sibling set joined once -> its first CPU
    first_of: Dict[Tuple[Optional[int], int], int] = {}     # (package, core_id) -> its first CPU
    for c in present:
        base = f"{CPU_DIR}/cpu{c}/topology"
        pkg = root.read_int(f"{base}/physical_package_id")
        core = root.read_int(f"{base}/core_id")
        if pkg is None and core is None and not root.exists(base):
            continue
        has_topology.add(c)
        pkg_raw[c], core_raw[c] = pkg, core
        cluster = sets.parse(root.read(f"{base}/cluster_cpus_list"), "list")
        cluster_raw[c] = min(cluster) if cluster else None      # garbled or absent: no cluster
        sibs = _siblings(root, sets, c, "core_cpus") or _siblings(root, sets, c, "thread_siblings")
        uf.find(c)
        if sibs:
            if sibs not in joined:
                joined[sibs] = c
                for s in sibs & present_set:
                    uf.union(c, s)
            else:
                uf.union(c, joined[sibs])
        elif core is not None:
            # No sibling lists (very old kernels): same package and core_id = same core.
            uf.union(c, first_of.setdefault((pkg, core), c))
    if not has_topology:
        topo.unknowns["topology"] = "no cpuN/topology directories: each CPU counted as one core of one socket"

    # Sockets: dense indices in order of the raw package id (-1 means "not reported").
    raw_pkgs = sorted({p for p in pkg_raw.values() if p is not None and p >= 0})
    pkg_index = {p: i for i, p in enumerate(raw_pkgs)}
    if len(raw_pkgs) == 0:
        topo.unknowns.setdefault("sockets", "physical_package_id not reported: one socket assumed")

    core_groups: Dict[int, List[int]] = {}
    for c in present:
        if c in has_topology or not has_topology:
            core_groups.setdefault(uf.find(c), []).append(c)
    core_index = {r: i for i, r in enumerate(sorted(core_groups, key=lambda r: min(core_groups[r])))}

    clusters = sorted({v for v in cluster_raw.values() if v is not None})
    cluster_index = {v: i for i, v in enumerate(clusters)}

    nodes, cpu_node = _read_nodes(root)
    caches, cache_ids, cache_unknowns = _read_caches(root, online, sets)
    topo.unknowns.update(cache_unknowns)
    if not caches:
        topo.unknowns["caches"] = f"no {CPU_DIR}/cpuN/cache directories"

    # A CPU may point at a node directory that does not exist (an offline
    # node); take the node from its cpuN/nodeM entry then.
    for c in present:
        if c in cpu_node:
            continue
        for name in root.listdir(f"{CPU_DIR}/cpu{c}"):
            m = re.fullmatch(r"node(\d+)", name)
            if m:
                cpu_node[c] = int(m.group(1))
                break

    smt_of = {c: i for group in core_groups.values() for i, c in enumerate(sorted(group))}
    for c in present:
        if c not in has_topology and has_topology:
            topo.cpus.append(Cpu(id=c, core=-1, socket=-1, node=cpu_node.get(c, -1), smt=0,
                                 online=c in online_set))
            continue
        r = uf.find(c)
        p = pkg_raw.get(c)
        socket = pkg_index.get(p, 0) if p is not None else 0
        ids = cache_ids.get(c, {})
        cl = cluster_raw.get(c)
        topo.cpus.append(Cpu(id=c, core=core_index.get(r, c), socket=socket,
                             node=cpu_node.get(c, 0), smt=smt_of.get(c, 0),
                             l2=ids.get(2), l3=ids.get(3), online=c in online_set,
                             cluster=cluster_index.get(cl) if cl is not None else None))

    known_node_ids = {n.id for n in nodes}
    missing = sorted({cpu_node[c] for c in online if c in cpu_node and cpu_node[c] not in known_node_ids})
    for nid in missing:
        nodes.append(NumaNode(id=nid, cpus=[c for c in online if cpu_node.get(c) == nid],
                              mem_bytes=None, distances=[]))
        topo.unknowns[f"nodes.{nid}"] = f"{NODE_DIR}/node{nid} is missing (offline node?): memory and distances unknown"
    nodes.sort(key=lambda n: n.id)
    if not nodes:
        nodes = [NumaNode(id=0, cpus=list(online), mem_bytes=mem_total_bytes, distances=[10])]
        topo.sources["nodes"] = f"no {NODE_DIR}: one memory domain (the kernel has no NUMA information)"
    else:
        topo.sources["nodes"] = NODE_DIR
    # Only online CPUs belong to a node as the rest of the package sees it.
    topo.nodes = [NumaNode(id=n.id, cpus=[c for c in n.cpus if c in online_set], mem_bytes=n.mem_bytes,
                           distances=n.distances) for n in nodes]
    topo.caches = caches
    return topo
