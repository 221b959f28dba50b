"""A node's configuration as a flat dict of short strings, for comparing the nodes of a cluster.

The ``nhc-genconf`` + ``dshbak -c`` way: every node computes the same keys,
so that the majority value of each key, and the nodes that differ from it,
can be found by comparing strings. Hence three rules:

- every key is always present; a fact that cannot be read is "unknown", so
  that nodes that all fail to read it agree rather than vanish from the table;
- values are what the node says, stripped, not interpreted (control
  characters are escaped where they are printed);
- a value must not change with noise: memory is rounded to whole GiB (a few
  MiB reserved by firmware differ between identical nodes), distinct values
  over the CPUs are sorted, never listed per CPU.

Every file is read through sysfs.Root, so a recorded tree works as "/" does;
its reads never raise (a missing, odd or endless file is None), and each
reader below turns None or garbage into None, hence "unknown", rather than
raise (tests/test_machine_inventory.py feeds every file garbage).
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Tuple

from ..sysfs import Root
from .model import Machine

UNKNOWN = "unknown"
CPU = "sys/devices/system/cpu"
IB = "sys/class/infiniband"
GIB, MIB = 1 << 30, 1 << 20

KEYS: Tuple[str, ...] = ("kernel", "os", "bios", "cpu", "microcode", "governor", "turbo", "smt", "numa",
                         "memory", "dimms", "thp", "mitigations", "interconnect", "mpi")

TITLES: Dict[str, str] = {
    "kernel": "Kernel", "os": "Operating system", "bios": "BIOS version", "cpu": "CPU model",
    "microcode": "CPU microcode", "governor": "Frequency governor", "turbo": "Turbo / boost",
    "smt": "SMT (hyper-threading)", "numa": "NUMA nodes", "memory": "Memory", "dimms": "DIMMs",
    "thp": "Transparent huge pages", "mitigations": "CPU mitigations (kernel command line)",
    "interconnect": "InfiniBand ports", "mpi": "MPI library",
}


def inventory(m: Machine, root: str = "/", mpi: Optional[str] = None) -> Dict[str, str]:
    """Every key of KEYS -> a short string. A fact that cannot be read is "unknown" (never
    missing, never an exception): nodes that all say unknown agree. ``mpi``: the MPI library
    this process loaded (cluster mode knows it; no file of the tree says it)."""
    r = Root(root)
    out = {key: _READERS[key](m, r) or UNKNOWN for key in KEYS if key != "mpi"}
    out["mpi"] = mpi or UNKNOWN
    return out


# ---- one reader per key: (machine, root) -> the value, or None when unknown ----

def _kernel(m: Machine, r: Root) -> Optional[str]:
    return r.read("proc/sys/kernel/osrelease")


def _os(m: Machine, r: Root) -> Optional[str]:
    """PRETTY_NAME of os-release(5): /etc/os-release, else the vendor's /usr/lib/os-release."""
    for rel in ("etc/os-release", "usr/lib/os-release"):
        name = _os_release_field(r.read(rel), "PRETTY_NAME")
        if name:
            return name
    return None


def _os_release_field(text: Optional[str], field: str) -> Optional[str]:
    """One KEY=value of os-release, its shell quoting undone (the quotes, and the
    backslash before ", \\, ` and $ inside double quotes)."""
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key == field:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == "'":
                return value[1:-1].strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                return re.sub(r'\\(["\\`$])', r"\1", value[1:-1]).strip()
            return value
    return None


def _bios(m: Machine, r: Root) -> Optional[str]:
    version, date = m.system.get("bios_version"), m.system.get("bios_date")
    if date:
        return f"{version or 'unknown version'} ({date})"
    return version


def _cpu(m: Machine, r: Root) -> Optional[str]:
    return m.model_name


def _microcode(m: Machine, r: Root) -> Optional[str]:
    """The microcode revision of each processor in /proc/cpuinfo (x86 only): a node where
    an update reached some CPUs but not others shows both."""
    found = re.findall(r"^microcode\s*:[ \t]*(\S.*?)\s*$", r.read("proc/cpuinfo") or "", flags=re.M)
    return ", ".join(sorted(set(found))) or None


def _governor(m: Machine, r: Root) -> Optional[str]:
    cpus = [n for n in r.listdir(CPU) if re.fullmatch(r"cpu\d+", n)]
    found = {g for g in (r.read(f"{CPU}/{c}/cpufreq/scaling_governor") for c in cpus) if g}
    if found:
        return ", ".join(sorted(found))
    if any(r.exists(f"{CPU}/{c}/cpufreq") for c in cpus):
        return None          # cpufreq is there, its governor unreadable
    return "none (no cpufreq)" if cpus else None


def _turbo(m: Machine, r: Root) -> Optional[str]:
    """intel_pstate's no_turbo, else the generic cpufreq boost (acpi-cpufreq, amd-pstate, Arm)."""
    no_turbo = {"0": "on", "1": "off"}.get(r.read(f"{CPU}/intel_pstate/no_turbo") or "")
    return no_turbo or {"1": "on", "0": "off"}.get(r.read(f"{CPU}/cpufreq/boost") or "")


def _smt(m: Machine, r: Root) -> Optional[str]:
    control = r.read(f"{CPU}/smt/control")
    if control:
        return control
    return f"{m.smt} thread(s) per core" if m.cpus else None


def _numa(m: Machine, r: Root) -> Optional[str]:
    return f"{len(m.nodes)} NUMA node(s)" if m.nodes else None


def _memory(m: Machine, r: Root) -> Optional[str]:
    return _size(m.mem_total_bytes) if m.mem_total_bytes else None


def _size(nbytes: int) -> str:
    """Whole GiB, rounded to nearest (MiB below 1 GiB, where a GiB would read "0 GiB")."""
    if nbytes >= GIB:
        return f"{int(nbytes / GIB + 0.5)} GiB"
    return f"{int(nbytes / MIB + 0.5)} MiB"


def _dimms(m: Machine, r: Root) -> Optional[str]:
    """Populated DIMMs grouped by size, type and speed: "16 x 16 GiB DDR5 4800 MT/s"; mixed
    populations are listed group by group, joined by " + "."""
    if m.dimms is None:
        return None
    groups: Dict[Tuple[int, str, int], int] = {}
    for row in m.dimms:
        if row.get("populated"):
            key = (row.get("size_bytes") or 0, row.get("type") or "",
                   row.get("configured_mts") or row.get("speed_mts") or 0)
            groups[key] = groups.get(key, 0) + 1
    if not groups:
        return f"none populated ({len(m.dimms)} slots)"
    return " + ".join(_dimm_group(n, *key) for key, n in sorted(groups.items(), reverse=True))


def _dimm_group(count: int, size_bytes: int, kind: str, mts: int) -> str:
    words = [f"{count} x", _size(size_bytes) if size_bytes else "unknown size", kind,
             f"{mts} MT/s" if mts else ""]
    return " ".join(w for w in words if w)


def _thp(m: Machine, r: Root) -> Optional[str]:
    """The selected word of "always [madvise] never"; a file without brackets as it is."""
    text = r.read("sys/kernel/mm/transparent_hugepage/enabled")
    sel = re.search(r"\[([^\]]*)\]", text or "")
    return sel.group(1).strip() if sel else text


def _mitigations(m: Machine, r: Root) -> Optional[str]:
    """The kernel's mitigations= option; the last one given wins, as in the kernel."""
    cmdline = r.read("proc/cmdline")
    if cmdline is None:
        return None
    given = [w.partition("=")[2] for w in cmdline.split() if w.startswith("mitigations=")]
    return given[-1] if given else "default"


def _interconnect(m: Machine, r: Root) -> Optional[str]:
    """Each InfiniBand port's rate and state: "mlx5_0 100 Gb/sec (4X EDR) ACTIVE"; a
    device with several ports names each port ("mlx5_0:2")."""
    if not r.exists(IB):
        return "none"
    ports: List[str] = []
    for dev in r.listdir(IB):
        numbers = r.listdir(f"{IB}/{dev}/ports", natural=True)
        for port in numbers:
            name = dev if len(numbers) == 1 else f"{dev}:{port}"
            ports.append(_port(r, f"{IB}/{dev}/ports/{port}", name))
    return "; ".join(ports) or "none"


def _port(r: Root, path: str, name: str) -> str:
    rate = r.read(f"{path}/rate") or "rate unknown"
    state = r.read(f"{path}/state")       # "4: ACTIVE": the number is the state's code
    return f"{name} {rate} {state.rpartition(':')[2].strip() if state else 'state unknown'}"


_READERS: Dict[str, Callable[[Machine, Root], Optional[str]]] = {
    "kernel": _kernel, "os": _os, "bios": _bios, "cpu": _cpu, "microcode": _microcode,
    "governor": _governor, "turbo": _turbo, "smt": _smt, "numa": _numa, "memory": _memory,
    "dimms": _dimms, "thp": _thp, "mitigations": _mitigations, "interconnect": _interconnect,
}
