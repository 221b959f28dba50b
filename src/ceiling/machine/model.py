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
    online: bool = True       # offline CPUs are listed with core/socket -1 when sysfs does not say
    cluster: Optional[int] = None  # id of its cluster (Arm cluster_cpus_list), None = not reported


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
    measured_domain_ghz: Optional[float] = None   # the CPUs of one NUMA domain busy at once
    measured_per_cpu_ghz: Dict[int, float] = field(default_factory=dict)
    measured_single_values_ghz: List[float] = field(default_factory=list)  # every repetition, fastest single CPU
    measured_all_values_ghz: List[float] = field(default_factory=list)     # every repetition, all CPUs busy
    measured_method: str = ""
    measured_disturbed: str = ""   # why the measured figures met other processes on their CPUs; "" = they did not


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
    # "sse4_2", "avx2", "fma", "avx512f", "amx_tile", "neon", "sve", ...
    isa: List[str] = field(default_factory=list)
    sve_vector_bits: Optional[int] = None
    vector_bits: Optional[int] = None   # widest usable SIMD register
    fma_units: Optional[int] = None     # FMA pipes per core at fma_width_bits (data file or config)
    fma_width_bits: Optional[int] = None  # data path width of each FMA pipe (widest)
    # vector bits -> FMAs per cycle per core at that width
    fma_units_by_bits: Dict[int, int] = field(default_factory=dict)
    # the CPU families data file's entry (name, year, notes, source)
    cpu_facts: Dict[str, Any] = field(default_factory=dict)
    clocks: Clocks = field(default_factory=Clocks)
    mem_total_bytes: Optional[int] = None
    memory_channels: Optional[int] = None      # per socket
    memory_mts: Optional[int] = None           # DIMM speed in MT/s as configured
    memory_channels_populated: Optional[int] = None  # channels with a DIMM, whole node (from DIMM locators)
    dimms: Optional[List[Dict[str, Any]]] = None  # dmidecode rows, None when not readable
    dimms_unread: str = ""              # why dimms is None, as a word (machine/dmi.py: not_root, no_tables, ...)
    affinity: List[int] = field(default_factory=list)   # CPUs this process may run on
    cgroup: Dict[str, Any] = field(default_factory=dict)  # cpu quota, cpuset, memory limit
    system: Dict[str, str] = field(default_factory=dict)  # DMI: sys_vendor, product_name, bios_version, ...
    config: Dict[str, Any] = field(default_factory=dict)  # the user's config file: {"path": ..., section: {key: value}}
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

    def describe(self) -> List[str]:
        """A few lines for a terminal: what the node is and its main peaks."""
        def size(b: Optional[int]) -> str:
            if b is None:
                return "?"
            for unit, f in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
                if b >= f:
                    v = b / f
                    return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
            return f"{b} B"

        name = self.model_name or "unknown CPU"
        if self.microarch and self.microarch not in name:
            name += f" ({self.microarch})"
        vm = f", {self.virtualized} guest" if self.virtualized else ""
        lines = [f"{self.hostname or 'host'}: {name}, {self.arch or '?'}{vm}",
                 f"{self.sockets} socket{'s' * (self.sockets != 1)}, {self.cores} cores, {self.threads} threads "
                 f"(SMT {self.smt}), {len(self.nodes)} NUMA node{'s' * (len(self.nodes) != 1)}, "
                 f"{size(self.mem_total_bytes)} memory"]
        cache = [f"L{c.level}{'d' if c.type == 'data' else 'i' if c.type == 'instruction' else ''} "
                 f"{size(c.size_bytes)} ×{c.instances}" for c in self.caches if c.type != "instruction"]
        if cache:
            lines.append("caches: " + ", ".join(cache))
        simd = [i for i in ("avx512f", "avx2", "avx", "sve2", "sve", "neon", "sse2") if i in self.isa][:1]
        fma = (f"; {self.fma_units} × {self.fma_width_bits}-bit FMA per core" if self.fma_units and self.fma_width_bits
               else "; FMA pipes unknown")
        lines.append(f"SIMD: {simd[0] if simd else 'none known'} ({self.vector_bits or '?'} bits){fma}")
        c = self.clocks
        meas = (f"measured {c.measured_single_ghz:.2f} GHz one core, {c.measured_all_ghz:.2f} GHz all"
                if c.measured_single_ghz and c.measured_all_ghz else "not measured")
        lines.append(f"clock: {meas}; base {c.base_ghz or '?'} GHz, max {c.max_ghz or '?'} GHz")
        for key, label in (("flops.dp.node", "DP peak"), ("membw.node", "memory peak")):
            p = self.peaks.get(key)
            if p is not None:
                lines.append(f"{label}: {p.value:.1f} {p.unit}" if p.known else f"{label}: {p.provenance}")
        return lines
