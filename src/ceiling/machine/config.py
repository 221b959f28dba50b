"""The user's config file: figures that replace what is detected or looked up.

Where it is looked for, first found wins:
  1. an explicit path (``--config FILE``), which must exist;
  2. $CEILING_CONFIG, which must exist;
  3. $XDG_CONFIG_HOME/ceiling/config.toml (default ~/.config/ceiling/config.toml),
     used when present.

Keys (every one optional; units in the names):

  [cpu]
  microarch = "Zen 3"           # name shown in reports
  fma_units = 2                 # FMA pipes per core ...
  fma_width_bits = 256          # ... each this wide (128, 256, 512, ...); narrower
                                # vectors keep the data file's pipe counts
  base_ghz = 2.45               # nominal clock
  max_ghz = 3.5                 # highest clock (used for peaks when nothing is measured)
  all_core_ghz = 3.2            # clock for peaks, instead of the measured all-core clock

  [memory]
  channels = 8                  # populated DDR channels per socket
  mts = 3200                    # DIMM speed, MT/s
  peak_bandwidth_gbs = 409.6    # whole node, GB/s (replaces channels x MT/s x 8 B)

  [peaks]                       # replace a computed peak outright
  flops_dp_core_gflops, flops_sp_core_gflops, flops_dp_node_gflops, flops_sp_node_gflops,
  flops_dp_domain_gflops, flops_sp_domain_gflops, membw_domain_gbs, membw_node_gbs

An unknown section or key, a value of the wrong type (true where a number
goes), a value out of range (each key's range is in SCHEMA: finite, above zero
and plausible for a real machine) or a file that is not TOML raises
ConfigError with one line that names the file, the key, the value and the
accepted range (for bad TOML, the line).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Type, Union

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from ..errors import ConfigError
from ..sysfs import NotReadable, read_file

Number = (int, float)


@dataclass(frozen=True)
class Key:
    """One key: its type, the range a real machine's figure falls in (both ends
    accepted), and the unit the range is written in."""

    types: Union[Type, Tuple[Type, ...]]
    low: Optional[float] = None
    high: Optional[float] = None
    unit: str = ""


# The ranges are generous on purpose: they refuse a slip of the keyboard (a peak of
# 0, inf or nan, 1e-320, MT/s given in Hz, a node figure in the core key) that would
# make every efficiency and the roofline meaningless, never a machine that exists.
_GHZ = Key(Number, 0.01, 10.0, "GHz")             # nothing running Linux ticks below 10 MHz; boost
                                                  # clocks reach 6 GHz, overclocking records 9
_CORE_GFLOPS = Key(Number, 0.001, 1e5, "Gflop/s")  # 10 GHz x 16 FMA pipes x 2048-bit SP = 20,480
_NODE_GFLOPS = Key(Number, 0.001, 1e9, "Gflop/s")  # an exaflop/s in one node; today's: tens of Tflop/s
_GBS = Key(Number, 0.001, 1e6, "GB/s")             # a PB/s; HBM nodes reach a few TB/s

SCHEMA: Dict[str, Dict[str, Key]] = {
    "cpu": {
        "microarch": Key(str),
        "fma_units": Key(int, 1, 16),             # pipes per core: 1 to 4 on every CPU so far
        "fma_width_bits": Key(int, 64, 2048),     # 2048: SVE's architectural maximum
        "base_ghz": _GHZ,
        "max_ghz": _GHZ,
        "all_core_ghz": _GHZ,
    },
    "memory": {
        "channels": Key(int, 1, 64),              # per socket: DDR5 has 12 today, HBM 32 pseudo-channels
        "mts": Key(int, 100, 100_000, "MT/s"),    # DDR5 8800, MRDIMM 12800, HBM3 9600 per pin
        "peak_bandwidth_gbs": _GBS,
    },
    "peaks": {
        "flops_dp_core_gflops": _CORE_GFLOPS, "flops_sp_core_gflops": _CORE_GFLOPS,
        "flops_dp_node_gflops": _NODE_GFLOPS, "flops_sp_node_gflops": _NODE_GFLOPS,
        "flops_dp_domain_gflops": _NODE_GFLOPS, "flops_sp_domain_gflops": _NODE_GFLOPS,
        "membw_domain_gbs": _GBS, "membw_node_gbs": _GBS,
    },
}

# [peaks] key -> Machine.peaks key
PEAK_KEYS = {
    "flops_dp_core_gflops": "flops.dp.core", "flops_sp_core_gflops": "flops.sp.core",
    "flops_dp_node_gflops": "flops.dp.node", "flops_sp_node_gflops": "flops.sp.node",
    "flops_dp_domain_gflops": "flops.dp.domain", "flops_sp_domain_gflops": "flops.sp.domain",
    "membw_domain_gbs": "membw.domain", "membw_node_gbs": "membw.node",
}


@dataclass(frozen=True)
class Config:
    """A checked config file: ``values[section][key]``."""

    path: str
    values: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def get(self, section: str, key: str, default: Any = None) -> Any:
        return self.values.get(section, {}).get(key, default)

    @property
    def provenance(self) -> str:
        return f"config file {self.path}"

    def as_dict(self) -> Dict[str, Any]:
        return {"path": self.path, **{s: dict(v) for s, v in self.values.items()}}


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ceiling" / "config.toml"


def _type_name(t) -> str:
    if t is Number:
        return "a number"
    return {int: "an integer", str: "a string", float: "a number"}.get(t, str(t))


def _shown(val: Any) -> str:
    """The value as the user wrote it, short (an integer of 400 digits is not echoed)."""
    if isinstance(val, int) and not isinstance(val, bool) and abs(val) >= 10 ** 20:
        return f"(an integer of {len(str(abs(val)))} digits)"
    text = repr(val)
    return text if len(text) <= 40 else text[:37] + "..."


def _range(spec: Key) -> str:
    what = "a whole number" if spec.types is int else "a number"
    return f"{what} from {spec.low:g} to {spec.high:g}" + (f" {spec.unit}" if spec.unit else "")


def _in_range(val: Any, spec: Key) -> bool:
    # Compared as written: an integer beyond a float is out of range, not an OverflowError.
    if spec.low is None or spec.high is None:
        return True
    if isinstance(val, float) and not math.isfinite(val):
        return False                      # nan and inf: TOML spells both
    return spec.low <= val <= spec.high


def check(data: Dict[str, Any], path: str) -> Config:
    """Validate parsed TOML against SCHEMA; ConfigError names the first bad key."""
    values: Dict[str, Dict[str, Any]] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"config file {path}: {section}: unknown key outside a section "
                              f"(sections: {', '.join('[' + s + ']' for s in SCHEMA)})")
        if section not in SCHEMA:
            raise ConfigError(f"config file {path}: unknown section [{section}] (known: "
                              f"{', '.join('[' + s + ']' for s in SCHEMA)})")
        spec = SCHEMA[section]
        for key, val in table.items():
            if key not in spec:
                raise ConfigError(f"config file {path}: [{section}] {key}: unknown key "
                                  f"(known: {', '.join(sorted(spec))})")
            k = spec[key]
            if isinstance(val, bool) or not isinstance(val, k.types):
                raise ConfigError(f"config file {path}: [{section}] {key} = {_shown(val)}: "
                                  f"must be {_type_name(k.types)}")
            if not _in_range(val, k):
                raise ConfigError(f"config file {path}: [{section}] {key} = {_shown(val)}: out of range: "
                                  f"must be {_range(k)}")
            if key == "fma_width_bits" and val % 64:
                raise ConfigError(f"config file {path}: [{section}] {key} = {val!r}: must be a multiple of 64")
            values.setdefault(section, {})[key] = float(val) if k.types is Number else val
    cpu = values.get("cpu", {})
    if ("fma_units" in cpu) != ("fma_width_bits" in cpu):
        raise ConfigError(f"config file {path}: [cpu] fma_units and fma_width_bits go together: set both")
    return Config(path=str(path), values=values)


def parse(text: str, path: str = "<string>") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: bad TOML: {e}") from None
    except ValueError as e:
        # Python will not read an integer of over 4300 digits (a bare ValueError, not a TOML error).
        why = "an integer of over 4300 digits" if "digits" in str(e) else str(e)
        raise ConfigError(f"config file {path}: cannot be read: {why}") from None
    return check(data, path)


MAX_CONFIG_BYTES = 1 << 20      # a config of figures is a few hundred bytes


def load(path: "Optional[Union[str, os.PathLike[str]]]" = None) -> Optional[Config]:
    """The config in force, or None when there is none (see the module doc for the order)."""
    explicit = path is not None
    if path is None and os.environ.get("CEILING_CONFIG"):
        path, explicit = os.environ["CEILING_CONFIG"], True
    p = Path(path) if path is not None else default_path()
    if not p.exists():
        if explicit:
            raise ConfigError(f"config file {p}: not found")
        return None
    try:
        text = read_file(p, cap=MAX_CONFIG_BYTES, why=True).decode("utf-8")
    except (NotReadable, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {p}: cannot be read ({e})") from None
    return parse(text, str(p))
