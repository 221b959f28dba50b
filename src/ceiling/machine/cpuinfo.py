"""/proc/cpuinfo in its x86 and Arm dialects, reduced to what the model needs."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set


@dataclass
class CpuInfo:
    """The identifying lines of /proc/cpuinfo (taken from the first processor block)."""

    arch: str = ""                        # "x86_64" | "aarch64" | "" (not recognised)
    vendor: str = ""                      # "GenuineIntel" | "AuthenticAMD" | "ARM" | implementer name
    model_name: str = ""
    family: Optional[int] = None
    model: Optional[int] = None
    stepping: Optional[int] = None
    implementer: Optional[str] = None     # "0x41"
    part: Optional[str] = None            # "0xd0c"
    variant: Optional[str] = None
    flags: Set[str] = field(default_factory=set)   # x86 "flags" or Arm "Features"
    mhz: Dict[int, float] = field(default_factory=dict)   # "cpu MHz" per processor
    processors: List[int] = field(default_factory=list)
    parts: Set[str] = field(default_factory=set)   # every distinct Arm part (big.LITTLE shows several)


# Arm implementer codes (the "CPU implementer" line), as the kernel and lscpu name them.
ARM_IMPLEMENTERS = {
    "0x41": "ARM", "0x42": "Broadcom", "0x43": "Cavium", "0x46": "Fujitsu", "0x48": "HiSilicon",
    "0x4e": "NVIDIA", "0x50": "APM", "0x51": "Qualcomm", "0x61": "Apple", "0x6d": "Microsoft",
    "0xc0": "Ampere",
}


def _blocks(text: str) -> List[Dict[str, str]]:
    blocks, cur = [], {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        key, sep, val = line.partition(":")
        if sep:
            cur.setdefault(key.strip(), val.strip())
    if cur:
        blocks.append(cur)
    return blocks


def _int(s: Optional[str], base: int = 10) -> Optional[int]:
    if s is None:
        return None
    try:
        return int(s, base)
    except ValueError:
        return None


def _hex(s: Optional[str]) -> Optional[str]:
    v = _int(s, 16) if s else None
    return None if v is None else f"0x{v:02x}" if v < 0x100 else f"0x{v:03x}"


def parse(text: Optional[str]) -> CpuInfo:
    """Parse /proc/cpuinfo text; an empty or missing file gives an empty CpuInfo."""
    info = CpuInfo()
    if not text:
        return info
    blocks = _blocks(text)
    procs = [b for b in blocks if "processor" in b and _int(b["processor"]) is not None]
    first = procs[0] if procs else (blocks[0] if blocks else {})
    # Old arm kernels print one header block (model name, Features) and then
    # per-processor blocks; merge the header into the first processor's view.
    header = {k: v for b in blocks if "processor" not in b for k, v in b.items()}
    view = {**header, **first}
    for b in procs:
        pid = _int(b["processor"])
        info.processors.append(pid)
        mhz = b.get("cpu MHz")
        try:
            if mhz is not None:
                info.mhz[pid] = float(mhz)
        except ValueError:
            pass
        part = _hex(b.get("CPU part"))
        if part:
            info.parts.add(part)
    if "vendor_id" in view and "flags" in view:
        info.arch = "x86_64" if "lm" in view["flags"].split() else "i686"
        info.vendor = view["vendor_id"]
        info.model_name = re.sub(r"\s+", " ", view.get("model name", "")).strip()
        info.family = _int(view.get("cpu family"))
        info.model = _int(view.get("model"))
        info.stepping = _int(view.get("stepping"))
        info.flags = set(view["flags"].split())
    elif "CPU implementer" in view:
        info.arch = "aarch64" if view.get("CPU architecture", "").strip() in ("8", "9", "AArch64") \
            else "arm"
        info.implementer = _hex(view.get("CPU implementer"))
        info.part = _hex(view.get("CPU part"))
        info.variant = view.get("CPU variant")
        info.vendor = ARM_IMPLEMENTERS.get(info.implementer or "", info.implementer or "")
        info.model_name = view.get("model name", "") or view.get("Processor", "")
        info.flags = set(view.get("Features", "").split())
        if info.part:
            info.parts.add(info.part)
    return info


_GHZ = re.compile(r"@\s*(\d+(?:\.\d+)?)\s*([GM])Hz", re.I)


def nominal_ghz(model_name: str) -> Optional[float]:
    """The clock printed in an Intel-style brand string ("... @ 2.60GHz"), or None."""
    m = _GHZ.search(model_name or "")
    if not m:
        return None
    v = float(m.group(1))
    return v if m.group(2).upper() == "G" else v / 1000.0
