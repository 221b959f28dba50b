"""The CPU families data file (families.toml): lookup by cpuid or Arm part.

The data file holds what the hardware does not report about itself: FMA
pipes per core and their width, memory channels per socket, the fastest
supported DIMM speed, and how AVX-512 behaves. Lookups return ``None`` for a
CPU that is not listed; a listed CPU may still lack a figure (the SKU decides
it and no rule pins it down), which the peaks then call unknown.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

DATA_FILE = Path(__file__).with_name("families.toml")

_FACT_KEYS = {"name", "fma", "fma_width_bits", "memory", "memory_channels", "memory_max_mts",
              "peak_bandwidth_gbs_per_socket", "launch_year", "avx512_note", "clock_note",
              "vector_note", "source"}
_X86_KEYS = _FACT_KEYS | {"vendor", "family", "models", "steppings", "sku"}
_ARM_KEYS = _FACT_KEYS | {"implementer", "parts", "sku"}
_SKU_KEYS = _FACT_KEYS - {"source"} | {"match"}
_SOC_KEYS = _FACT_KEYS | {"core", "match"}


@dataclass(frozen=True)
class Family:
    """What the data file says about one CPU (after SKU and SoC rules)."""

    name: str
    fma: Dict[int, int] = field(default_factory=dict)   # vector bits -> FMAs per cycle at that width
    fma_width_bits: Optional[int] = None        # widest FMA data path (None: unknown)
    memory: Optional[str] = None
    memory_channels: Optional[int] = None       # per socket
    memory_max_mts: Optional[int] = None
    peak_bandwidth_gbs_per_socket: Optional[float] = None
    launch_year: Optional[int] = None
    avx512_note: str = ""
    clock_note: str = ""
    vector_note: str = ""
    source: str = ""
    matched: str = ""                           # how the entry was chosen, for provenance

    def as_dict(self) -> Dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if v not in (None, "", {})}
        if self.fma:
            d["fma"] = {int(k): v for k, v in self.fma.items()}
        return d


def _check(entry: Dict[str, Any], allowed: set, where: str) -> None:
    bad = set(entry) - allowed
    if bad:
        raise ValueError(f"{DATA_FILE}: {where}: unknown key(s) {sorted(bad)}")


def _fma(raw: Any, where: str) -> Dict[int, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{DATA_FILE}: {where}: fma must be a table {{bits = pipes}}")
    out = {}
    for k, v in raw.items():
        bits = int(k)
        if bits % 64 or bits <= 0 or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{DATA_FILE}: {where}: bad fma entry {k} = {v}")
        out[bits] = v
    return out


@lru_cache(maxsize=4)
def load(path: Optional[str] = None) -> Dict[str, List[Dict[str, Any]]]:
    """The parsed and checked data file (cached)."""
    p = Path(path) if path else DATA_FILE
    data = tomllib.loads(p.read_text())
    for sect, keys in (("x86", _X86_KEYS), ("arm", _ARM_KEYS), ("soc", _SOC_KEYS)):
        for i, e in enumerate(data.get(sect, [])):
            where = f"[[{sect}]] #{i + 1} ({e.get('name', '?')})"
            _check(e, keys, where)
            if "name" not in e:
                raise ValueError(f"{DATA_FILE}: {where}: no name")
            e["fma"] = _fma(e.get("fma"), where)
            for j, s in enumerate(e.get("sku", [])):
                _check(s, _SKU_KEYS, f"{where} sku #{j + 1}")
                if "match" not in s:
                    raise ValueError(f"{DATA_FILE}: {where} sku #{j + 1}: no match")
                re.compile(s["match"])
                s["fma"] = _fma(s.get("fma"), where)
    return data


def _in(value: Optional[int], ranges: List[Any]) -> bool:
    if value is None:
        return False
    for r in ranges:
        if isinstance(r, list) and len(r) == 2 and r[0] <= value <= r[1]:
            return True
        if isinstance(r, int) and r == value:
            return True
    return False


def _merge(base: Dict[str, Any], over: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if k in ("match", "sku", "core"):
            continue
        if k == "fma":
            if v:
                out["fma"] = {**base.get("fma", {}), **v}
            continue
        out[k] = v
    return out


def _family(e: Dict[str, Any], matched: str) -> Family:
    fma = dict(e.get("fma") or {})
    return Family(name=e["name"], fma=fma, fma_width_bits=e.get("fma_width_bits") or (max(fma) if fma else None),
                  memory=e.get("memory"),
                  memory_channels=e.get("memory_channels"), memory_max_mts=e.get("memory_max_mts"),
                  peak_bandwidth_gbs_per_socket=e.get("peak_bandwidth_gbs_per_socket"),
                  launch_year=e.get("launch_year"), avx512_note=e.get("avx512_note", ""),
                  clock_note=e.get("clock_note", ""), vector_note=e.get("vector_note", ""),
                  source=e.get("source", ""), matched=matched)


def _apply_skus(e: Dict[str, Any], text: str, matched: str):
    for s in e.get("sku", []):
        if text and re.search(s["match"], text, flags=re.I):
            return _merge(e, s), f"{matched}, SKU rule /{s['match']}/"
    return e, matched


def lookup_x86(vendor: str, family: Optional[int], model: Optional[int],
               stepping: Optional[int] = None, model_name: str = "") -> Optional[Family]:
    """The entry for an x86 CPU (cpuid display family/model), refined by its brand string."""
    if family is None or model is None:
        return None
    for e in load().get("x86", []):
        if e.get("vendor") != vendor or e.get("family") != family or not _in(model, e.get("models", [])):
            continue
        if "steppings" in e and not _in(stepping, e["steppings"]):
            continue
        matched = f"{vendor} family 0x{family:02x} model 0x{model:02x}"
        if "steppings" in e:
            matched += f" stepping {stepping}"
        merged, matched = _apply_skus(e, model_name, matched)
        return _family(merged, matched)
    return None


def lookup_arm(implementer: Optional[str], part: Optional[str], hint: str = "") -> Optional[Family]:
    """The entry for an Arm core ("0x41", "0xd0c"), refined to a SoC when ``hint`` (DMI text) names one."""
    if not implementer or not part:
        return None
    try:
        imp, prt = int(implementer, 16), int(part, 16)
    except ValueError:
        return None
    data = load()
    for e in data.get("arm", []):
        if e.get("implementer") != imp or prt not in e.get("parts", []):
            continue
        matched = f"Arm implementer {implementer} part {part}"
        merged, matched = _apply_skus(e, hint, matched)
        for soc in data.get("soc", []):
            if soc.get("core") == e["name"] and hint and re.search(soc["match"], hint, flags=re.I):
                merged = _merge(merged, soc)
                merged["name"] = f"{soc['name']} ({e['name']})"
                matched += f", SoC {soc['name']} (matched /{soc['match']}/ in DMI)"
                if "source" in soc:
                    merged["source"] = f"{e.get('source', '')}; {soc['source']}".strip("; ")
                break
        return _family(merged, matched)
    return None
