"""What the hardware and OS are: the facts every other part reads.

Filled by ``machine.detect()`` from /proc, /sys, cpuid, dmidecode and the
measured clock; read by placement plans, peaks, benches and reports. Every
figure that could not be read is ``None`` with the reason in ``unknowns``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from ..results.model import Peak


@dataclass(frozen=True)
class Cpu:
    """One logical CPU (a hardware thread, "PU" in hwloc's words)."""

    id: int                   # Linux CPU number
    core: int                 # global core id (unique across sockets)
    socket: int               # physical package id
    node: int                 # NUMA node id (0 when there is no NUMA information)
    smt: int                  # index of this thread within its core (0 = first sibling)
    l2: Optional[int] = None  # id of the L2 instance it shares (None = unknown)
    l3: Optional[int] = None  # id of the L3 instance it shares (None = unknown)
    online: bool = True


@dataclass(frozen=True)
class Cache:
    level: int
    type: str                 # "data" | "instruction" | "unified"
    size_bytes: int           # one instance
    line_bytes: Optional[int]
    instances: int            # how many of it on the node
    cpus_per_instance: int    # logical CPUs sharing one instance


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: List[int]
    mem_bytes: Optional[int]
    distances: List[int]      # SLIT row, in node-id order (10 = local)


@dataclass
class Clocks:
    """Clock figures in GHz, each with where it came from."""

    base_ghz: Optional[float] = None
    base_source: str = ""
    max_ghz: Optional[float] = None
    max_source: str = ""
    current_ghz: Optional[float] = None
    current_source: str = ""
    measured_single_ghz: Optional[float] = None   # one core busy, dependent add chain
    measured_all_ghz: Optional[float] = None      # all allowed cores busy at once
    measured_per_cpu_ghz: Dict[int, float] = field(default_factory=dict)
    measured_method: str = ""


@dataclass
class Machine:
    hostname: str = ""
    arch: str = ""                      # "x86_64" | "aarch64" | ...
    vendor: str = ""                    # "GenuineIntel" | "AuthenticAMD" | "ARM" | ...
    model_name: str = ""
    family: Optional[int] = None        # x86 cpuid family (display family)
    model: Optional[int] = None         # x86 cpuid model (display model)
    stepping: Optional[int] = None
    part: Optional[str] = None          # Arm "CPU part", e.g. "0xd40"
    implementer: Optional[str] = None   # Arm "CPU implementer", e.g. "0x41"
    microarch: str = ""                 # from the CPU families data file, "" = not listed
    virtualized: Optional[str] = None   # hypervisor name when running in a VM
    sockets: int = 0
    cores: int = 0                      # physical cores, online
    threads: int = 0                    # logical CPUs, online
    smt: int = 1                        # threads per core
    cpus: List[Cpu] = field(default_factory=list)
    nodes: List[NumaNode] = field(default_factory=list)
    caches: List[Cache] = field(default_factory=list)
    isa: List[str] = field(default_factory=list)       # "sse4_2", "avx2", "fma", "avx512f", "amx", "neon", "sve"
    sve_vector_bits: Optional[int] = None
    vector_bits: Optional[int] = None   # widest usable SIMD register
    fma_units: Optional[int] = None     # FMA pipes per core (data file or config)
    fma_width_bits: Optional[int] = None  # data path width of each FMA pipe
    clocks: Clocks = field(default_factory=Clocks)
    mem_total_bytes: Optional[int] = None
    memory_channels: Optional[int] = None      # per socket
    memory_mts: Optional[int] = None           # DIMM speed in MT/s as configured
    dimms: Optional[List[Dict[str, Any]]] = None  # dmidecode rows, None when not readable
    affinity: List[int] = field(default_factory=list)   # CPUs this process may run on
    cgroup: Dict[str, Any] = field(default_factory=dict)  # cpu quota, cpuset, memory limit
    peaks: Dict[str, Peak] = field(default_factory=dict)  # "flops.dp.node", "flops.sp.core", "membw.node", ...
    unknowns: Dict[str, str] = field(default_factory=dict)  # field -> why it could not be read
    sources: Dict[str, str] = field(default_factory=dict)   # field -> where it was read (file, cpuid, config)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def cpu(self, cpu_id: int) -> Optional[Cpu]:
        for c in self.cpus:
            if c.id == cpu_id:
                return c
        return None

    def last_level_cache_bytes(self) -> Optional[int]:
        """Size of one instance of the largest-level data/unified cache."""
        data = [c for c in self.caches if c.type != "instruction"]
        if not data:
            return None
        top = max(c.level for c in data)
        return max(c.size_bytes for c in data if c.level == top)

    def total_llc_bytes(self) -> Optional[int]:
        data = [c for c in self.caches if c.type != "instruction"]
        if not data:
            return None
        top = max(c.level for c in data)
        return sum(c.size_bytes * c.instances for c in data if c.level == top)
