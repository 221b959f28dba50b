"""Floating-point operations retired, from the PMU's raw events (``ceiling profile``'s point
on the roofline from counters: analysis/app_roofline.py).

No generic perf event counts flops: each vendor has its own, with its own codes and meaning, so
they are opened only on the CPUs listed here (``events_for``) and a figure is derived only from
events that counted (``derive``). Elsewhere the words say which CPUs are known.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional, Tuple

# Floating-point operations retired, as raw events (PERF_TYPE_RAW: config = umask << 8 | event), opened
# only on the CPUs whose codes are known here (``flop_events``), with the flops each count stands for.
# Intel's FP_ARITH_INST_RETIRED (event 0xC7; Intel SDM vol. 3B and perfmon's event lists, Broadwell
# to Granite Rapids): one count per instruction of the width its umask names, an FMA counted twice,
# so flops = count x lanes; double precision only (the roofline's is DP). AMD's PMCx003
# RetiredSseAvxFlops (umask 0xFF: every kind; family 17h and 19h PPRs) counts flops themselves, single
# and double precision together, an FMA as 2 (more than 15 a cycle need the kernel's counter pairing,
# Linux 5.7 and later). Hybrid Intel CPUs (two PMUs) and other models are not listed: no flop events.
PERF_TYPE_RAW = 4
INTEL_FLOPS = (("fp_arith_inst_retired.scalar_double", PERF_TYPE_RAW, 0x01C7),
               ("fp_arith_inst_retired.128b_packed_double", PERF_TYPE_RAW, 0x04C7),
               ("fp_arith_inst_retired.256b_packed_double", PERF_TYPE_RAW, 0x10C7),
               ("fp_arith_inst_retired.512b_packed_double", PERF_TYPE_RAW, 0x40C7))
AMD_FLOPS = (("fp_ret_sse_avx_ops.all", PERF_TYPE_RAW, 0xFF03),)
FLOPS_PER_COUNT = {"fp_arith_inst_retired.scalar_double": 1, "fp_arith_inst_retired.128b_packed_double": 2,
                   "fp_arith_inst_retired.256b_packed_double": 4, "fp_arith_inst_retired.512b_packed_double": 8,
                   "fp_ret_sse_avx_ops.all": 1}
# family 6 models with FP_ARITH_INST_RETIRED at 0xC7: Broadwell, Skylake, Skylake-X/Cascade/Cooper Lake,
# Kaby/Coffee/Comet Lake, Cannon Lake, Ice Lake (client, server), Tiger Lake, Rocket Lake, Sapphire,
# Emerald and Granite Rapids
INTEL_FLOP_MODELS = frozenset({0x3D, 0x47, 0x4F, 0x56, 0x4E, 0x5E, 0x55, 0x8E, 0x9E, 0xA5, 0xA6, 0x66, 0x7D,
                               0x7E, 0x6A, 0x6C, 0x8C, 0x8D, 0xA7, 0x8F, 0xCF, 0xAD, 0xAE})
AMD_FLOP_FAMILIES = frozenset({0x17, 0x19})      # Zen 1 to 4


def events_for(cpuinfo: str) -> Tuple[Tuple[Tuple[str, int, int], ...], str]:
    """The raw flop events of this CPU (``cpuinfo``: /proc/cpuinfo's text) and, when there are
    none, why: (events, "") or ((), reason)."""
    def field_of(name: str) -> str:
        m = re.search(rf"^{name}\s*:\s*(.+)$", cpuinfo, re.M)
        return m.group(1).strip() if m else ""
    vendor = field_of("vendor_id")
    try:
        family, model = int(field_of("cpu family")), int(field_of("model"))
    except ValueError:
        return (), "no CPU family and model in /proc/cpuinfo: no flop counter known"
    if vendor == "GenuineIntel" and family == 6 and model in INTEL_FLOP_MODELS:
        return INTEL_FLOPS, ""
    if vendor == "AuthenticAMD" and family in AMD_FLOP_FAMILIES:
        return AMD_FLOPS, ""
    return (), (f"no flop counter known for this CPU ({vendor or 'vendor unknown'} family {family:#x} model "
                f"{model:#x}): ceiling knows Intel's FP_ARITH_INST_RETIRED (Broadwell to Granite Rapids, not the "
                "hybrid CPUs) and AMD's RetiredSseAvxFlops (Zen 1 to 4)")


def derive(events: Dict[str, dict], value: Callable[[Dict[str, dict], str], Optional[int]],
           missing: Callable[..., str]) -> Optional[Tuple[Optional[float], str, Dict[str, Any]]]:
    """perf_counters.derive's "flops": (flops, "", {how, note}) from the flop events that counted,
    (None, why, {}) when none did, None when none was asked for (a CPU without known codes)."""
    asked = [n for n in FLOPS_PER_COUNT if n in events]
    if not asked:
        return None
    counted = [(n, value(events, n)) for n in asked if value(events, n) is not None]
    if not counted:
        return None, missing(events, *asked), {}
    note = ("single and double precision together, an FMA as 2" if any(n.startswith("fp_ret") for n, _ in counted)
            else "double precision, an FMA as 2")
    if len(counted) < len(asked):
        note += "; not counted: " + ", ".join(n for n in asked if value(events, n) is None)
    return (float(sum(v * FLOPS_PER_COUNT[n] for n, v in counted)), "",
            {"how": " + ".join(f"{n} x {FLOPS_PER_COUNT[n]}" for n, _ in counted), "note": note})
