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

An unknown section or key, a value of the wrong type, a value out of range
or a file that is not TOML raises ConfigError with one line that names the
file, the key and (for bad TOML) the line.
"""
from __future__ import annotations

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

# section -> key -> (accepted types, lower bound exclusive or None, one-line doc)
SCHEMA: Dict[str, Dict[str, Tuple[Union[Type, Tuple[Type, ...]], Optional[float], str]]] = {
    "cpu": {
        "microarch": (str, None, "microarchitecture name shown in reports"),
        "fma_units": (int, 0, "FMA pipes per core"),
        "fma_width_bits": (int, 0, "bits per FMA pipe (a multiple of 64)"),
        "base_ghz": (Number, 0, "nominal clock, GHz"),
        "max_ghz": (Number, 0, "highest clock, GHz"),
        "all_core_ghz": (Number, 0, "clock with all cores busy, GHz (used for peaks)"),
    },
    "memory": {
        "channels": (int, 0, "populated DDR channels per socket"),
        "mts": (int, 0, "DIMM speed, MT/s"),
        "peak_bandwidth_gbs": (Number, 0, "node memory bandwidth peak, GB/s"),
    },
    "peaks": {
        f"{k}": (Number, 0, f"peak {k}") for k in (
            "flops_dp_core_gflops", "flops_sp_core_gflops", "flops_dp_node_gflops", "flops_sp_node_gflops",
            "flops_dp_domain_gflops", "flops_sp_domain_gflops", "membw_domain_gbs", "membw_node_gbs")
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
            types, low, _doc = spec[key]
            if isinstance(val, bool) or not isinstance(val, types):
                raise ConfigError(f"config file {path}: [{section}] {key} = {val!r}: "
                                  f"must be {_type_name(types)}")
            if low is not None and val <= low:
                raise ConfigError(f"config file {path}: [{section}] {key} = {val!r}: must be > {low:g}")
            if key == "fma_width_bits" and val % 64:
                raise ConfigError(f"config file {path}: [{section}] {key} = {val!r}: must be a multiple of 64")
            values.setdefault(section, {})[key] = float(val) if types is Number else val
    cpu = values.get("cpu", {})
    if ("fma_units" in cpu) != ("fma_width_bits" in cpu):
        raise ConfigError(f"config file {path}: [cpu] fma_units and fma_width_bits go together: set both")
    return Config(path=str(path), values=values)


def parse(text: str, path: str = "<string>") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: bad TOML: {e}") from None
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
