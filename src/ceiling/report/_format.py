"""Number, size and unit formatting shared by the terminal and HTML reports.

Numbers are shown the way HPC users write them: three significant digits
(four when the value is at least 1000, never dropping integer digits), binary
units for sizes (KiB, MiB), and times scaled to ns / µs / ms / s so a column
never shows "123456 ns". Everything here is plain text; callers escape it.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..results.model import Peak

DASH = "-"          # shown for a missing number; ASCII so it survives e-mail

_TIME_UNITS = ("ns", "µs", "ms", "s")


def num(value: Optional[float], sig: int = 3) -> str:
    """``value`` with ``sig`` significant digits, keeping every integer digit."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    v = float(value)
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10 ** sig or a >= 1000:
        return f"{v:.0f}"
    if a < 1e-3:
        return f"{v:.{max(sig - 1, 0)}e}"
    decimals = sig - 1 - int(math.floor(math.log10(a)))
    text = f"{v:.{max(decimals, 0)}f}"
    # 9.996 rounds to "10.00": one digit too many.
    if decimals > 0 and len(text.lstrip("-").replace(".", "").lstrip("0")) > sig:
        text = f"{v:.{decimals - 1}f}"
    if sig > 3 and "." in text:
        # A peak is shown with a fourth digit only when it has one (409.6, not 62.40).
        text = text.rstrip("0").rstrip(".")
    return text


def pct(fraction: Optional[float]) -> str:
    """A fraction as a percentage: "61%", "0.4%", "103%"."""
    if fraction is None:
        return DASH
    p = 100.0 * fraction
    if 0 < abs(p) < 1:
        return f"{p:.1f}%"
    return f"{p:.0f}%"


def size(nbytes: Optional[float]) -> str:
    """Bytes in binary units: "32 KiB", "1.5 MiB", "24 GiB"."""
    if nbytes is None:
        return DASH
    v = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{v:.0f} B"
            text = num(v)
            if "." in text:
                text = text.rstrip("0").rstrip(".")   # "32 KiB", not "32.0 KiB"
            return f"{text} {unit}"
        v /= 1024.0
    return f"{v} B"  # unreachable


def size_tick(nbytes: float) -> str:
    """Short size label for an axis tick: "4K", "512K", "32M", "1G"."""
    v = float(nbytes)
    for unit in ("", "K", "M", "G", "T"):
        if abs(v) < 1024 or unit == "T":
            text = f"{v:.0f}" if v == int(v) else num(v)
            return f"{text}{unit}" if unit else f"{text}B"
        v /= 1024.0
    return str(nbytes)


def duration(seconds: float) -> str:
    """Elapsed time for a progress line: "4.2 s", "1 min 05 s", "1 h 02 min"."""
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def when(iso: str) -> str:
    """An ISO 8601 UTC time as "2024-05-02 09:14:03 UTC"."""
    if not iso:
        return "time unknown"
    text = iso.replace("T", " ")
    for utc in ("Z", "+00:00"):
        if text.endswith(utc):
            text = text[: -len(utc)]
            if "." in text[-7:]:
                text = text[: text.rindex(".")]     # fractions of a second say nothing here
            return text + " UTC"
    return text


def time_scale(value: Optional[float], unit: str) -> Tuple[float, str]:
    """Factor and unit that show ``value`` (in ``unit``) below 1000 when it is a time."""
    if unit not in _TIME_UNITS or value is None:
        return 1.0, unit
    i = _TIME_UNITS.index(unit)
    factor = 1.0
    v = abs(float(value))
    while v >= 1000 and i < len(_TIME_UNITS) - 1:
        v /= 1000.0
        factor /= 1000.0
        i += 1
    return factor, _TIME_UNITS[i]


def quantity(value: Optional[float], unit: str, sig: int = 3) -> Tuple[str, str]:
    """(number text, unit text) with times rescaled to a readable unit."""
    factor, shown = time_scale(value, unit)
    return num(None if value is None else value * factor, sig), shown


def with_unit(value: Optional[float], unit: str, sig: int = 3) -> str:
    """ "38.1 GB/s", "1.20 µs", or "-" for a missing value."""
    text, shown = quantity(value, unit, sig)
    if value is None:
        return DASH
    return f"{text} {shown}".rstrip()


# -- reading a Run's machine dictionary -----------------------------------------

def as_dict(obj: Any) -> Dict[str, Any]:
    """A Machine, a Machine.to_dict() or None, as a dictionary."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return dict(getattr(obj, "__dict__", {}))


def peak_from(obj: Any) -> Optional[Peak]:
    """A Peak from a Peak or its dictionary form (JSON); None otherwise."""
    if obj is None:
        return None
    if isinstance(obj, Peak):
        return obj
    if isinstance(obj, dict):
        return Peak(obj.get("value"), obj.get("unit", ""), obj.get("provenance", ""))
    return None


def machine_peak(machine: Dict[str, Any], key: str) -> Optional[Peak]:
    return peak_from(as_dict(machine).get("peaks", {}).get(key))


def caches(machine: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Data and unified caches, ordered by level."""
    out = [as_dict(c) for c in as_dict(machine).get("caches", []) or []]
    out = [c for c in out if c.get("type") != "instruction" and c.get("size_bytes")]
    return sorted(out, key=lambda c: (c.get("level", 0), c.get("type", "")))


def cache_name(cache: Dict[str, Any]) -> str:
    level = cache.get("level", "?")
    return f"L{level}d" if cache.get("type") == "data" else f"L{level}"


def topology(machine: Dict[str, Any]) -> str:
    """ "2 sockets × 64 cores × 2 threads = 256 CPUs", from what is known."""
    m = as_dict(machine)
    sockets, cores, threads = m.get("sockets") or 0, m.get("cores") or 0, m.get("threads") or 0
    smt = m.get("smt") or 1
    if not (sockets and cores):
        return f"{threads} CPUs" if threads else "unknown"
    per = cores // sockets if sockets else cores

    def plural(n: int, word: str) -> str:
        return f"{n} {word}" + ("" if n == 1 else "s")

    text = f"{plural(sockets, 'socket')} × {plural(per, 'core')} × {plural(smt, 'thread')}"
    if threads:
        text += f" = {threads} CPUs"
    return text


def clocks(machine: Dict[str, Any]) -> List[str]:
    """One phrase per clock figure, each with its source."""
    c = as_dict(as_dict(machine).get("clocks"))
    unknowns = as_dict(machine).get("unknowns", {}) or {}
    parts = []
    for key, label in (("base", "base"), ("max", "max")):
        v = c.get(f"{key}_ghz")
        if v is not None:
            src = c.get(f"{key}_source") or "source not recorded"
            parts.append(f"{label} {num(v)} GHz ({src})")
        else:
            why = unknowns.get(f"clocks.{key}_ghz") or unknowns.get(f"clocks.{key}") or ""
            parts.append(f"{label} unknown" + (f" ({why})" if why else ""))
    single, all_ = c.get("measured_single_ghz"), c.get("measured_all_ghz")
    if single is not None or all_ is not None:
        measured = []
        if single is not None:
            measured.append(f"{num(single)} GHz one core busy")
        if all_ is not None:
            measured.append(f"{num(all_)} GHz all cores busy")
        how = c.get("measured_method")
        parts.append("measured " + ", ".join(measured) + (f" ({how})" if how else ""))
    return parts


def memory(machine: Dict[str, Any]) -> str:
    m = as_dict(machine)
    total = m.get("mem_total_bytes")
    text = size(total) if total else "unknown size"
    ch, mts = m.get("memory_channels"), m.get("memory_mts")
    if ch and mts:
        text += f", {ch} channels × {mts} MT/s per socket"
    elif ch:
        text += f", {ch} channels per socket, speed unknown"
    elif mts:
        text += f", {mts} MT/s, channel count unknown"
    else:
        why = (m.get("unknowns") or {}).get("memory_channels") or (m.get("unknowns") or {}).get("memory_mts")
        text += ", channels and speed unknown" + (f" ({why})" if why else "")
    return text


def cpu_model(machine: Dict[str, Any]) -> str:
    m = as_dict(machine)
    name = m.get("model_name") or "unknown CPU"
    extra = []
    if m.get("microarch"):
        extra.append(m["microarch"])
    if m.get("family") is not None and m.get("model") is not None:
        extra.append(f"family {m['family']} model {m['model']}")
    elif m.get("part"):
        extra.append(f"part {m['part']}")
    return name + (f" ({', '.join(extra)})" if extra else "")


def isa_text(machine: Dict[str, Any], limit: int = 12) -> str:
    m = as_dict(machine)
    isa: Sequence[str] = m.get("isa") or []
    text = " ".join(isa[:limit]) + (f" (+{len(isa) - limit} more)" if len(isa) > limit else "")
    extra = []
    if m.get("vector_bits"):
        extra.append(f"{m['vector_bits']}-bit vectors")
    if m.get("fma_units"):
        extra.append(f"{m['fma_units']} FMA pipes/core")
    if extra:
        text = (text + "; " if text else "") + ", ".join(extra)
    return text or "unknown"


def caches_text(machine: Dict[str, Any]) -> str:
    parts = []
    for c in caches(machine):
        inst = c.get("instances")
        parts.append(f"{cache_name(c)} {size(c['size_bytes'])}" + (f" ×{inst}" if inst else ""))
    return ", ".join(parts) or "unknown"


def numa_text(machine: Dict[str, Any]) -> str:
    nodes = as_dict(machine).get("nodes") or []
    if not nodes:
        return "NUMA nodes unknown"
    return f"{len(nodes)} NUMA node" + ("" if len(nodes) == 1 else "s")
