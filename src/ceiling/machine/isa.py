"""Instruction sets and the cpuid facts that /proc/cpuinfo does not carry.

``isa_list`` turns cpuinfo flags (x86 "flags", Arm "Features") into the
names the rest of ceiling uses; ``vector_bits`` is the widest SIMD register
that the OS lets a program use. The cpuid helpers take a ``query(leaf,
subleaf) -> (eax, ebx, ecx, edx)`` function, so the same code decodes the
live CPU (``ceiling.core.cpuid``) and a recorded dump (hwloc's format).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

Regs = Tuple[int, int, int, int]
Query = Callable[[int, int], Regs]

# x86 flags reported as ISA, in the order a reader expects (narrow to wide).
X86_ISA = (
    "sse2", "sse4_1", "sse4_2", "avx", "fma", "avx2", "avx_vnni",
    "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16",
    "avx512_fp16", "avx512er", "avx512pf", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
)
# Arm "Features" reported as ISA. "asimd" is AArch64's name for NEON; both are listed.
ARM_ISA = ("asimd", "asimdhp", "asimddp", "asimdfhm", "fphp", "bf16", "i8mm",
           "sve", "sve2", "svebf16", "svei8mm", "sme", "sme2")


def isa_list(flags: Iterable[str], arch: str) -> List[str]:
    """The ISA names this CPU reports, from cpuinfo flags."""
    f = set(flags)
    if arch.startswith("x86") or arch in ("i686", "i386"):
        out = [name for name in X86_ISA if name in f]
        if "pni" in f:   # the kernel calls SSE3 "pni"
            out.insert(1 if "sse2" in out else 0, "sse3")
        return out
    if arch in ("aarch64", "arm"):
        out = []
        if "asimd" in f or "neon" in f:
            out.append("neon")
        out += [name for name in ARM_ISA if name in f]
        return out
    return []


def vector_bits(isa: List[str], arch: str, sve_bits: Optional[int] = None) -> Optional[int]:
    """Widest SIMD register usable for floating point; None when it cannot be told.

    AVX (not AVX2) already has 256-bit floating-point registers; an SVE CPU
    whose vector length is unknown reports its NEON width.
    """
    s = set(isa)
    if arch.startswith("x86") or arch in ("i686", "i386"):
        if "avx512f" in s:
            return 512
        if "avx" in s:
            return 256
        if "sse2" in s:
            return 128
        return None
    if arch in ("aarch64", "arm"):
        if "sve" in s and sve_bits:
            return max(sve_bits, 128)
        if "neon" in s:
            return 128
    return None


def kernel_isas(isa: List[str], arch: str, sve_bits: Optional[int] = None) -> List[str]:
    """The C core's variant names ("scalar", "sse2", "avx2", "avx512", "neon", "sve") this CPU can run."""
    s = set(isa)
    out = ["scalar"]
    if arch.startswith("x86"):
        if "sse2" in s:
            out.append("sse2")
        if "avx2" in s and "fma" in s:
            out.append("avx2")
        if {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= s:
            out.append("avx512")
    elif arch == "aarch64":
        if "neon" in s:
            out.append("neon")
        if "sve" in s:
            out.append("sve")
    return out


def sve_default_bits(text: Optional[str]) -> Optional[int]:
    """/proc/sys/abi/sve_default_vector_length holds bytes; return bits."""
    if not text:
        return None
    try:
        v = int(text.split()[0])
    except (ValueError, IndexError):
        return None
    return v * 8 if v > 0 else None


# ---- cpuid ---------------------------------------------------------------

def decode_signature(eax: int) -> Tuple[int, int, int]:
    """Leaf 1 EAX -> (display family, display model, stepping), as the SDM and APM define them."""
    stepping = eax & 0xF
    model = (eax >> 4) & 0xF
    family = (eax >> 8) & 0xF
    ext_model = (eax >> 16) & 0xF
    ext_family = (eax >> 20) & 0xFF
    if family == 0xF:
        family += ext_family
    if family in (0x6, 0xF) or family > 0xF:
        model |= ext_model << 4
    return family, model, stepping


def _regs_str(*regs: int) -> str:
    return b"".join(r.to_bytes(4, "little") for r in regs).decode("ascii", errors="replace")


def identify(query: Query) -> Dict[str, object]:
    """Vendor, family/model/stepping and brand string from cpuid."""
    eax, ebx, ecx, edx = query(0, 0)
    out: Dict[str, object] = {"max_leaf": eax, "vendor": _regs_str(ebx, edx, ecx).rstrip("\0")}
    if eax >= 1:
        a, _, c, _ = query(1, 0)
        out["family"], out["model"], out["stepping"] = decode_signature(a)
        out["hypervisor_bit"] = bool(c >> 31 & 1)
    ext_max = query(0x80000000, 0)[0]
    if ext_max >= 0x80000004:
        brand = "".join(_regs_str(*query(leaf, 0)) for leaf in (0x80000002, 0x80000003, 0x80000004))
        out["brand"] = re.sub(r"\s+", " ", brand.replace("\0", " ")).strip()
    return out


def leaf16_mhz(query: Query) -> Tuple[Optional[int], Optional[int]]:
    """cpuid leaf 0x16 (Intel): (base MHz, max MHz); (None, None) where not implemented or zero."""
    if query(0, 0)[0] < 0x16:
        return None, None
    eax, ebx, _, _ = query(0x16, 0)
    base = eax & 0xFFFF
    top = ebx & 0xFFFF
    return (base or None), (top or None)


HYPERVISORS = {
    "KVMKVMKVM": "KVM", "Microsoft Hv": "Hyper-V", "VMwareVMware": "VMware", "XenVMMXenVMM": "Xen",
    "TCGTCGTCGTCG": "QEMU (TCG)", "ACRNACRNACRN": "ACRN", "bhyve bhyve ": "bhyve",
    " lrpepyh  vr": "Parallels", "VBoxVBoxVBox": "VirtualBox", "QNXQVMBSQG": "QNX",
    "Linux KVM Hv": "KVM (Hyper-V enlightened)",
}


def hypervisor_vendor(query: Query) -> Optional[str]:
    """The hypervisor's name from cpuid leaf 0x40000000, when the hypervisor bit is set."""
    if query(0, 0)[0] < 1 or not (query(1, 0)[2] >> 31) & 1:
        return None
    _, ebx, ecx, edx = query(0x40000000, 0)
    sig = _regs_str(ebx, ecx, edx)
    name = HYPERVISORS.get(sig) or HYPERVISORS.get(sig.rstrip("\0"))
    return name or (sig.strip("\0 ") or "unknown hypervisor")


def dump_query(pu_file: "str | Path") -> Query:
    """A cpuid query function over one hwloc dump file ("mask eax ebx ecx edx => eax ebx ecx edx")."""
    table: Dict[Tuple[int, int], Regs] = {}
    for line in Path(pu_file).read_text().splitlines():
        if line.startswith("#") or "=>" not in line:
            continue
        lhs, rhs = line.split("=>")
        try:
            _mask, leaf, _ebx, sub, _edx = (int(x, 16) for x in lhs.split())
            out = tuple(int(x, 16) for x in rhs.split())
        except ValueError:
            continue
        if len(out) == 4:
            table.setdefault((leaf, sub), out)              # type: ignore[arg-type]
            table.setdefault((leaf, -1), out)               # type: ignore[arg-type]

    def query(leaf: int, sub: int) -> Regs:
        return table.get((leaf, sub)) or table.get((leaf, -1)) or (0, 0, 0, 0)

    return query
