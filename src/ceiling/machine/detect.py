"""detect(): the Machine, read from a file-system root and, on a live system,
from cpuid, dmidecode and a measurement of the clock.

Order matters only where one fact refines another: topology and cpuinfo
first, then the families data file (needs vendor/model and DMI text), then
the user's config (overrides everything), then the clock measurement, then
the peaks (need all of the above). Every step degrades to "unknown, because
..." instead of failing.
"""
from __future__ import annotations

import os
import platform
import re
import socket
from typing import Dict, List, Optional, Union

from . import cgroups, clocks, dmi, families, isa as isa_mod, peaks, topology
from ..sysfs import Root, meminfo_bytes
from .config import Config, load as load_config
from .cpuinfo import parse as parse_cpuinfo
from .model import Machine

ConfigArg = Union[Config, str, "os.PathLike[str]", None, bool]

_VM_DMI = (
    (re.compile(r"QEMU|KVM", re.I), "KVM/QEMU"), (re.compile(r"VMware", re.I), "VMware"),
    (re.compile(r"\bXen\b|HVM domU", re.I), "Xen"), (re.compile(r"VirtualBox|innotek", re.I), "VirtualBox"),
    (re.compile(r"Microsoft Corporation.*Virtual Machine|Virtual Machine.*Microsoft", re.I), "Hyper-V"),
    (re.compile(r"Google Compute Engine", re.I), "Google Compute Engine (KVM)"),
    (re.compile(r"OpenStack", re.I), "OpenStack (KVM)"), (re.compile(r"Parallels", re.I), "Parallels"),
    (re.compile(r"Amazon EC2", re.I), "Amazon EC2 (Nitro)"), (re.compile(r"BHYVE", re.I), "bhyve"),
)


def _cpuid_fn(root: Root, arch: str):
    """core.cpuid on a live x86 system with the C core built; None otherwise."""
    if not root.live or not arch.startswith(("x86", "i686", "i386")):
        return None
    try:
        from .. import core
        core.cpuid(0, 0)
        return core.cpuid
    except Exception:  # no core built, or built without cpuid.c: cpuid is optional
        return None


def _hypervisor(root: Root, flags: set, system: Dict[str, str], arch: str, cpuid) -> Optional[str]:
    xen = root.read("sys/hypervisor/type")
    dmi_text = " ".join(system.get(k, "") for k in ("sys_vendor", "product_name", "bios_vendor", "board_vendor"))
    is_x86 = arch.startswith(("x86", "i686", "i386"))
    if is_x86 and "hypervisor" not in flags and not xen:
        return None
    if cpuid is not None:
        try:
            name = isa_mod.hypervisor_vendor(cpuid)
            if name:
                return name
        except Exception:
            pass
    if xen:
        return xen.capitalize() if xen.lower() == "xen" else xen
    for rx, name in _VM_DMI:
        if rx.search(dmi_text):
            if name.startswith("Amazon") and "metal" in system.get("product_name", "").lower():
                return None
            return name
    return "unknown hypervisor" if is_x86 else None


def _resolve_config(config: ConfigArg, root: Root) -> Optional[Config]:
    if config is False:
        return None
    if isinstance(config, Config):
        return config
    if config is None or config is True:
        # The user's default config describes this machine, not a recorded tree.
        return load_config() if root.live else None
    return load_config(config)


def _one_per_core(m: Machine, cpus: List[int]) -> List[int]:
    seen, out = set(), []
    for c in sorted(cpus):
        info = m.cpu(c)
        key = info.core if info is not None else ("cpu", c)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _apply_family(m: Machine, fam: Optional[families.Family]) -> None:
    if fam is None:
        m.unknowns["microarch"] = (f"{m.vendor} family {m.family} model {m.model}" if m.family is not None
                                   else f"{m.vendor} part {m.part}" if m.part else m.model_name or "this CPU") + \
            " is not in the CPU families data file: FMA pipes and memory channels unknown"
        return
    m.microarch = fam.name
    m.cpu_facts = fam.as_dict()
    m.sources["microarch"] = f"CPU families data file ({fam.matched})"
    m.fma_units_by_bits = dict(fam.fma)
    m.fma_width_bits = fam.fma_width_bits
    m.fma_units = fam.fma.get(fam.fma_width_bits) if fam.fma_width_bits else None
    if fam.fma:
        m.sources["fma_units"] = "CPU families data file"
    if fam.memory_channels:
        m.memory_channels = fam.memory_channels
        m.sources["memory_channels"] = f"CPU families data file: {fam.name}"


def _apply_config(m: Machine, cfg: Config) -> None:
    prov = cfg.provenance
    m.config = cfg.as_dict()
    cpu, mem = cfg.values.get("cpu", {}), cfg.values.get("memory", {})
    if "microarch" in cpu:
        m.microarch, m.sources["microarch"] = cpu["microarch"], prov
    if "fma_units" in cpu:
        width = cpu["fma_width_bits"]
        fma = {k: v for k, v in m.fma_units_by_bits.items() if k < width}
        fma[width] = cpu["fma_units"]
        m.fma_units_by_bits, m.fma_width_bits, m.fma_units = fma, width, cpu["fma_units"]
        m.sources["fma_units"] = prov
    if "base_ghz" in cpu:
        m.clocks.base_ghz, m.clocks.base_source = cpu["base_ghz"], prov
        m.unknowns.pop("clocks.base_ghz", None)
    if "max_ghz" in cpu:
        m.clocks.max_ghz, m.clocks.max_source = cpu["max_ghz"], prov
        m.unknowns.pop("clocks.max_ghz", None)
    if "channels" in mem:
        m.memory_channels, m.sources["memory_channels"] = mem["channels"], prov
    if "mts" in mem:
        m.memory_mts, m.sources["memory_mts"] = mem["mts"], prov
        m.unknowns.pop("memory_mts", None)


def _measure(m: Machine) -> None:
    cpus = m.affinity or [c.id for c in m.cpus if c.online]
    singles = _one_per_core(m, cpus)
    domain = None
    if len([n for n in m.nodes if n.cpus]) > 1:
        big = max(m.nodes, key=lambda n: len(set(n.cpus) & set(cpus)))
        domain = sorted(set(big.cpus) & set(cpus))
    try:
        res = clocks.measure_clock(cpus, single_cpus=singles, domain_cpus=domain)
    except Exception as e:  # CoreError (no core / no kernel), ValidationError, pinning refused
        reason = f"not measured: {type(e).__name__}: {e}"
        m.clocks.measured_method = reason
        m.unknowns["clocks.measured"] = reason
        return
    c = m.clocks
    c.measured_single_ghz = res["measured_single_ghz"]
    c.measured_all_ghz = res["measured_all_ghz"]
    c.measured_domain_ghz = res.get("measured_domain_ghz")
    c.measured_per_cpu_ghz = res["measured_per_cpu_ghz"]
    c.measured_method = res["measured_method"]
    c.measured_single_values_ghz = res.get("single_values_ghz", [])
    c.measured_all_values_ghz = res.get("all_values_ghz", [])
    c.measured_disturbed = res.get("measured_disturbed", "")


def detect(root: "str | os.PathLike[str] | Root" = "/", *, measure: bool = True,
           config: ConfigArg = None) -> Machine:
    """The Machine under ``root``; on a live root also cpuid, dmidecode and (``measure``) the clock.

    ``config``: a Config, a path, False for none, or None for the default
    lookup (live root only; a fixture tree is not this machine).
    Never raises for missing or unreadable files; a bad config file raises
    ConfigError.
    """
    r = root if isinstance(root, Root) else Root(root)
    m = Machine()
    cfg = _resolve_config(config, r)
    info = parse_cpuinfo(r.read("proc/cpuinfo"))
    if r.live:
        m.hostname = socket.gethostname()
        m.arch = platform.machine()
    else:
        m.hostname = r.read("proc/sys/kernel/hostname") or r.path.name
        m.arch = info.arch
    if not info.arch and not m.arch:
        m.unknowns["cpuinfo"] = f"{r.p('proc/cpuinfo')}: missing or in a format not understood"
    cpuid = _cpuid_fn(r, m.arch or info.arch)
    m.vendor, m.model_name = info.vendor, info.model_name
    m.family, m.model, m.stepping = info.family, info.model, info.stepping
    m.implementer, m.part = info.implementer, info.part
    if cpuid is not None and m.family is None:
        try:
            ident = isa_mod.identify(cpuid)
            m.vendor = m.vendor or str(ident.get("vendor", ""))
            m.family, m.model, m.stepping = ident.get("family"), ident.get("model"), ident.get("stepping")
            m.model_name = m.model_name or str(ident.get("brand", ""))
            m.sources["family"] = "cpuid"
        except Exception:
            pass
    elif m.family is not None:
        m.sources["family"] = "/proc/cpuinfo"
    if len(info.parts) > 1:
        m.unknowns["heterogeneous"] = f"CPU parts {sorted(info.parts)}: cores differ; figures are for {info.part}"

    m.mem_total_bytes = meminfo_bytes("MemTotal", r) or None      # 0 B of memory is no figure
    if m.mem_total_bytes is None:
        m.unknowns["mem_total_bytes"] = _no_mem_total(r.read("proc/meminfo"))
    topo = topology.read(r, m.mem_total_bytes)
    m.cpus, m.nodes, m.caches = topo.cpus, topo.nodes, topo.caches
    m.unknowns.update(topo.unknowns)
    m.sources.update({f"topology.{k}": v for k, v in topo.sources.items()})
    online = [c for c in m.cpus if c.online]
    m.threads = len(online)
    m.cores = len({c.core for c in online})
    m.sockets = len({c.socket for c in online}) if online else 0
    per_core: Dict[int, int] = {}
    for c in online:
        per_core[c.core] = per_core.get(c.core, 0) + 1
    m.smt = max(per_core.values()) if per_core else 1

    arch = m.arch or info.arch
    m.isa = isa_mod.isa_list(info.flags, arch)
    if "sve" in m.isa:
        m.sve_vector_bits = isa_mod.sve_default_bits(r.read("proc/sys/abi/sve_default_vector_length"))
        if m.sve_vector_bits is None:
            m.unknowns["sve_vector_bits"] = "/proc/sys/abi/sve_default_vector_length not readable"
    m.vector_bits = isa_mod.vector_bits(m.isa, arch, m.sve_vector_bits)
    m.system = dmi.read_system(r)
    m.virtualized = _hypervisor(r, info.flags, m.system, arch, cpuid)

    if info.implementer:
        hint = " ".join([*m.system.values(), m.model_name])
        fam = families.lookup_arm(info.implementer, info.part, hint)
        if not m.model_name:
            m.model_name = f"{info.vendor} {fam.name}" if fam else f"{info.vendor} part {info.part}"
    else:
        fam = families.lookup_x86(m.vendor, m.family, m.model, m.stepping, m.model_name)
    _apply_family(m, fam)

    m.clocks, clock_unknowns = clocks.read_clocks(r, info, [c.id for c in online], cpuid)
    m.unknowns.update(clock_unknowns)

    m.cgroup = cgroups.read(r)
    online_ids = [c.id for c in online]
    if r.live:
        try:
            m.affinity = sorted(os.sched_getaffinity(0))
            m.sources["affinity"] = "sched_getaffinity"
        except (AttributeError, OSError):
            m.affinity = online_ids
            m.sources["affinity"] = "all online CPUs (sched_getaffinity unavailable)"
    else:
        cs = m.cgroup.get("cpuset_cpus")
        m.affinity = [c for c in online_ids if c in set(cs)] if cs else online_ids
        m.sources["affinity"] = "cgroup cpuset ∩ online CPUs" if cs else "all online CPUs (recorded tree)"

    rows, why, src, m.dimms_unread = dmi.read_dimms(r)
    m.dimms = rows
    if rows is None:
        m.unknowns["dimms"] = why or "not readable"
    else:
        summary = dmi.summarize(rows)
        m.sources["dimms"] = src
        if summary["mts"]:
            m.memory_mts = summary["mts"]
            m.sources["memory_mts"] = f"{src}: configured speed of the slowest DIMM"
        else:
            m.unknowns["memory_mts"] = summary.get("mts_reason") or "no populated DIMM"
        if summary["channels_by_socket"]:
            m.memory_channels_populated = sum(summary["channels_by_socket"].values())
            m.sources["memory_channels_populated"] = f"DIMM locators ({src})"
        elif summary["channels_reason"]:
            m.unknowns["memory_channels_populated"] = summary["channels_reason"]
    if m.memory_mts is None and "memory_mts" not in m.unknowns:
        m.unknowns["memory_mts"] = m.unknowns.get("dimms", "DIMM speed not readable")

    if cfg is not None:
        _apply_config(m, cfg)

    if measure and r.live:
        _measure(m)
    elif measure:
        m.clocks.measured_method = f"not measured: {r} is a recorded tree, not this machine"
    else:
        m.clocks.measured_method = "not measured (detect(measure=False))"

    peaks.compute_peaks(m)
    return m


def _no_mem_total(text: Optional[str]) -> str:
    """Why /proc/meminfo gave no memory size: missing, or what its MemTotal line says."""
    if text is None:
        return "/proc/meminfo missing or unreadable"
    line = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("MemTotal:")), None)
    if line is None:
        return "/proc/meminfo has no MemTotal line"
    return f"/proc/meminfo's MemTotal is not a size in kB: {line[:80]!r}"

