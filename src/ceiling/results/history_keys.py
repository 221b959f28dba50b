"""What the history files each stored figure under, so that like is compared with like.

**The context key** of a Metric is its ``context`` cut down to the fields that
say how the figure was measured, written canonically: a JSON object with
sorted keys, no spaces, integral floats as integers (``{"isa":"avx512",
"placement":"compact","threads":2}``); ``{}`` when the context holds none of
them. Two figures with the same name and key were measured the same way: a
1-thread and a 2-thread ``stream.triad`` have different keys. The fields
(CONTEXT_FIELDS) are the knobs of a measurement: threads, placement, ISA,
non-temporal stores, direct or buffered I/O, the problem size in whichever
field the bench writes it (STREAM's ``array_bytes``, a buffer's
``size_bytes``, a transfer's ``xfer_bytes``, a message's ``message_bytes``
or ``bytes``, DGEMM's order ``n``), and the ranks and nodes a job-wide figure
spanned. What a measurement found is never part of it (cycles, plateaus,
competing load, huge pages granted, the CPU list of one allocation): a key
must not change because a run was noisy. The definition is part of the store
version (results/store_schema.py): changing CONTEXT_FIELDS means a new
version whose upgrade computes every row's key again.

**The inventory** of a node is the configuration its figures depend on, read
from the machine facts the run recorded (``Run.machine``, ``Node.machine``):
CPU identity and stepping, sockets, cores, logical CPUs, SMT, NUMA domains,
memory in whole GiB (a few MiB that firmware reserves differ between
identical nodes), the caches, the ISA extensions, the hypervisor, and the
DMI identity and BIOS. Its hash (``inventory_hash``: the first 16 hex digits
of the SHA-256 of its canonical JSON) is equal for two runs of one
configuration and differs when any of those changed. Left out on purpose:
what needs root to read (DIMMs and their speed), what comes from ceiling's
own tables rather than the machine (microarchitecture, FMA units, memory
channels), and what describes one job rather than the node (affinity,
cgroup limits, measured clocks): a hash must not change because ceiling ran
as root, learned about a CPU, or ran in another allocation. A machine record
without these facts (a cluster run keeps a compact one per node; each node's
own run beside it holds them) has no inventory: hash "".
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ..errors import UsageError

# Metric.context fields that say how a figure was measured (module docstring), in display order.
CONTEXT_FIELDS: Tuple[str, ...] = (
    "threads", "placement", "isa", "nt_stores", "io",
    "array_bytes", "size_bytes", "xfer_bytes", "message_bytes", "bytes", "n",
    "k_ranks", "processes", "ranks", "k_nodes", "nodes")

UNKNOWN_CONTEXT = ""       # the key of a row whose document could not be read: not the same as "{}"
HASH_DIGITS = 16

GIB = 1 << 30
# Machine facts in the inventory, as Machine.to_dict() names them (module docstring).
_MACHINE_FIELDS = ("arch", "vendor", "model_name", "family", "model", "stepping", "part", "implementer",
                   "virtualized", "sockets", "cores", "threads", "smt")
_SYSTEM_FIELDS = ("sys_vendor", "product_name", "board_vendor", "board_name", "bios_vendor", "bios_version",
                  "bios_date")
_FULL = ("caches", "isa", "nodes")      # present in a whole Machine record, absent from a compact one


def _canon(v: Any) -> Any:
    """``v`` as a JSON value that compares equal whenever the figure's setup was equal."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v
    if isinstance(v, Mapping):
        return {str(k): _canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    return str(v)


def _dumps(d: Any) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def context_fields(context: Any) -> Dict[str, Any]:
    """The fields of a Metric.context that make its key, canonical values."""
    if not isinstance(context, Mapping):
        return {}
    return {k: _canon(context[k]) for k in CONTEXT_FIELDS if k in context and context[k] is not None}


def context_key(context: Any) -> str:
    """The canonical context key of a Metric.context (module docstring)."""
    return _dumps(context_fields(context))


def key_of(fields: Mapping[str, Any]) -> str:
    """The canonical key of fields already chosen (context_fields, key_fields, parse_context)."""
    return _dumps({str(k): _canon(v) for k, v in fields.items()})


def key_fields(key: str) -> Dict[str, Any]:
    """The fields of a stored context key; {} for "{}" and for an unknown ("") or damaged key."""
    try:
        d = json.loads(key) if key else {}
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    return _dumps(v)


def context_text(key: str, leave_out: Iterable[str] = ()) -> str:
    """``threads=2 placement=compact isa=avx512`` for a key, in CONTEXT_FIELDS order; "" for none."""
    d = key_fields(key)
    skip = set(leave_out)
    order = [k for k in CONTEXT_FIELDS if k in d] + sorted(k for k in d if k not in CONTEXT_FIELDS)
    return " ".join(f"{k}={_text(d[k])}" for k in order if k not in skip)


def parse_context(text: str) -> Dict[str, Any]:
    """``threads=1,placement=compact`` (commas or spaces between pairs) as canonical fields, for
    matching stored keys: a whole number is a number, true/false are booleans. UsageError when a pair
    is not NAME=VALUE or names a field that is not part of a context key."""
    out: Dict[str, Any] = {}
    for pair in text.replace(",", " ").split():
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--context {text!r}: {pair!r} is not NAME=VALUE")
        if name not in CONTEXT_FIELDS:
            raise UsageError(f"--context {text!r}: {name!r} is not a context field "
                             f"(one of {', '.join(CONTEXT_FIELDS)})")
        out[name] = _value(value)
    if not out:
        raise UsageError(f"--context {text!r}: give NAME=VALUE pairs, e.g. threads=1,placement=compact")
    return out


def _value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    try:
        return _canon(json.loads(text)) if text[:1] in "[{" else int(text)
    except ValueError:
        return text


def matches(key: str, wanted: Mapping[str, Any]) -> bool:
    """Whether the stored key has every field of ``wanted`` (parse_context) with that value."""
    d = key_fields(key)
    return all(k in d and d[k] == v for k, v in wanted.items())


def inventory(machine: Any) -> Optional[Dict[str, Any]]:
    """The inventory of a recorded machine (Machine.to_dict()), or None when the record lacks
    the facts (module docstring)."""
    if not isinstance(machine, Mapping) or any(k not in machine for k in _FULL):
        return None
    out: Dict[str, Any] = {k: _canon(machine.get(k)) for k in _MACHINE_FIELDS}
    mem = machine.get("mem_total_bytes")
    out["memory_gib"] = round(mem / GIB) if isinstance(mem, (int, float)) and math.isfinite(mem) else None
    nodes = machine.get("nodes")
    out["numa_nodes"] = len(nodes) if isinstance(nodes, list) else None
    isa = machine.get("isa")
    out["isa"] = sorted({str(x) for x in isa}) if isinstance(isa, list) else None
    out["caches"] = sorted((_cache(c) for c in machine.get("caches") or [] if isinstance(c, Mapping)), key=_dumps)
    system = machine.get("system")
    system = system if isinstance(system, Mapping) else {}
    out["system"] = {k: str(system[k]) for k in _SYSTEM_FIELDS if system.get(k)}
    return out


def _cache(c: Mapping) -> List[Any]:
    return [_canon(c.get("level")), str(c.get("type", "")), _canon(c.get("size_bytes")),
            _canon(c.get("instances"))]


def flat(inv: Any, prefix: str = "") -> Dict[str, Any]:
    """An inventory as one value per field, nested objects' fields named with dots (``system.bios_version``),
    the values as stored; something not an object is one field, ``inventory``. What ``compare`` and
    ``history --changes`` tell two configurations apart by."""
    if not isinstance(inv, Mapping):
        return {prefix or "inventory": inv}
    out: Dict[str, Any] = {}
    for k, v in inv.items():
        name = f"{prefix}.{k}" if prefix else str(k)
        out.update(flat(v, name) if isinstance(v, Mapping) else {name: v})
    return out


def inventory_json(inv: Optional[Mapping]) -> str:
    """The canonical text of an inventory, as hashed and stored; "" for none."""
    return "" if inv is None else _dumps(inv)


def inventory_hash(inv: Optional[Mapping]) -> str:
    """First HASH_DIGITS hex digits of the SHA-256 of the canonical inventory; "" for none."""
    text = inventory_json(inv)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_DIGITS] if text else ""
