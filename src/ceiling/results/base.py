"""What model.py and analysis.py both build on: the value types Stats and Peak,
the strict reader that turns a JSON document's dicts back into dataclasses, and
``plain``, which makes any value JSON-ready.

It is its own module so that analysis.py (whose Verdict carries a Peak) and
model.py (whose Run carries an Analysis) need not import each other; model.py
re-exports everything here, and callers keep importing from there.

The reader (``Record.from_dict``) follows each field's type hint: a nested
dataclass, an ``Optional`` one, a ``List`` of them or a ``Dict`` of them by name is read
recursively; any other value is taken as it is (the schema pins scalar types). A key the
dataclass does not have is refused, as is a missing field without a default;
the error names the key path ("metrics[3].colour: unknown key") so that a
hand-edited or foreign document says where it went wrong.
"""
from __future__ import annotations

import copy
import json
import math
import numbers
import os
import typing
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from functools import lru_cache
from typing import Any, Dict, Optional, Tuple

HIGHER = "higher"
LOWER = "lower"

# Coefficient of variation above which a measurement is noisy: benches note it on the
# metric as they measure, analysis.stats warns with it.
CV_WARN = 0.05


class DocumentError(ValueError):
    """A run document that does not fit the model; ``path`` names the offending key."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path or '(top)'}: {problem}")


class Record:
    """Mixin of every result dataclass: ``to_dict`` and the strict ``from_dict``."""

    __slots__ = ()

    def to_dict(self) -> Dict[str, Any]:
        """dataclasses.asdict's result, without its deep copy of every leaf (a run of 10,000
        nodes has a million: the copy took seconds); containers are new, leaves are shared."""
        return _plain(self)

    @classmethod
    def from_dict(cls, d: Any, path: str = ""):
        """An instance from its document dict; DocumentError (a ValueError) naming the key path."""
        return read(cls, d, path)


def plain(obj: Any) -> Any:
    """``obj`` as JSON-ready values: non-finite floats -> None, NumPy -> Python (jsonio writes
    these; profile.profile_from reads the analysis' dict through it)."""
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, int):
        return int(obj)            # IntEnum and friends: their number, not their name
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {_key(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if is_dataclass(obj) and not isinstance(obj, type):
        return plain(asdict(obj))
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        return plain(float(obj))
    if hasattr(obj, "tolist"):     # NumPy arrays and scalars (np.bool_ is not Integral)
        return plain(obj.tolist())
    if isinstance(obj, (set, frozenset)):
        return sorted(plain(v) for v in obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"cannot store a {type(obj).__name__} in a run document: {obj!r}")


def document(obj: Any) -> Any:
    """``plain(obj.to_dict())`` in one walk: what a run's JSON document is made of (jsonio.to_doc),
    the containers new, the leaves shared."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is list:
        return [document(x) for x in obj]
    if t is dict:
        return {(k if type(k) is str else _key(_plain(k))): document(x) for k, x in obj.items()}
    names = _field_names(t)
    if names is not None:
        return {n: document(getattr(obj, n)) for n in names}
    return plain(_plain(obj))


def _key(k: Any) -> str:
    # json.dumps would turn int keys into strings anyway; doing it here keeps
    # the dict that validate() sees identical to what is written.
    if isinstance(k, str):
        return k
    if isinstance(k, bool) or k is None:
        return json.dumps(k)
    return str(plain(k))


_LEAVES = (str, int, float, bool, type(None))
_LEAF_TYPES = frozenset(_LEAVES)


@lru_cache(maxsize=None)
def _field_names(cls) -> Optional[Tuple[str, ...]]:
    """The field names of a dataclass type, None for any other type (asked once per type)."""
    return tuple(f.name for f in fields(cls)) if is_dataclass(cls) else None


def _plain(v: Any) -> Any:
    t = type(v)
    if t in _LEAF_TYPES:
        return v
    if t is list:
        return [_plain(x) for x in v]
    if t is dict:
        return {_plain(k): _plain(x) for k, x in v.items()}
    names = _field_names(t)
    if names is not None:
        return {n: _plain(getattr(v, n)) for n in names}
    if isinstance(v, _LEAVES):                 # subclasses: IntEnum, a str subclass
        return v
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, tuple):
        return type(v)(*(_plain(x) for x in v)) if hasattr(v, "_fields") else tuple(_plain(x) for x in v)
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    return copy.deepcopy(v)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@lru_cache(maxsize=None)
def _hints(cls) -> Tuple[Tuple[str, Any, bool], ...]:
    """(name, type hint, required) of each field, in order."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.default is MISSING and f.default_factory is MISSING)
                 for f in fields(cls))


@lru_cache(maxsize=None)
def _plan(cls) -> Tuple[frozenset, Tuple[Tuple[str, Any, bool], ...]]:
    """What reading ``cls`` takes, worked out once per class from its hints: the known keys, and
    per field (name, reader or None, required); None takes the value as it is (most fields: a
    scalar, or a list or dict of them), a reader is called as reader(value, path)."""
    spec = tuple((name, _reader(hint), required) for name, hint, required in _hints(cls))
    return frozenset(name for name, _, _ in spec), spec


def _reader(hint: Any):
    """The function that reads a value of this hint (value, path) -> value, or None for "as it is"."""
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        one = _reader(inner[0]) if len(inner) == 1 else None
        if one is None:
            return None
        return lambda v, path: None if v is None else one(v, path)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        if not is_dataclass(item):
            return None

        def read_list(v, path):
            if not isinstance(v, list):
                raise DocumentError(path, f"expected a list, not {type(v).__name__}")
            return [read(item, x, f"{path}[{i}]") for i, x in enumerate(v)]
        return read_list
    if origin is dict:
        _, item = typing.get_args(hint) or (str, Any)
        if not is_dataclass(item):
            return None

        def read_dict(v, path):
            if not isinstance(v, dict):
                raise DocumentError(path, f"expected an object, not {type(v).__name__}")
            return {k: read(item, x, f"{path}.{k}") for k, x in v.items()}
        return read_dict
    if isinstance(hint, type) and is_dataclass(hint):
        return lambda v, path: read(hint, v, path)
    return None


def read(cls, d: Any, path: str = ""):
    """``cls(**d)`` with every nested dataclass read too, unknown and missing keys refused."""
    if not isinstance(d, dict):
        raise DocumentError(path, f"expected an object, not {type(d).__name__}")
    known, spec = _plan(cls)
    for key in d:
        if key not in known:
            raise DocumentError(_join(path, str(key)), "unknown key")
    kw = {}
    for name, reader, required in spec:
        if name in d:
            v = d[name]
            kw[name] = v if reader is None else reader(v, _join(path, name))
        elif required:
            raise DocumentError(_join(path, name), "missing key")
    return cls(**kw)


@dataclass(frozen=True)
class Stats(Record):
    """Summary of repeated measurements, in the metric's unit."""

    n: int            # repetitions
    best: float       # max when better is higher, min when lower
    median: float
    mean: float
    min: float
    max: float
    stdev: float      # sample standard deviation (0 when n == 1)
    cv: float         # stdev / mean (coefficient of variation, a fraction)

    @classmethod
    def of(cls, values, better: str = HIGHER) -> "Stats":
        vals = sorted(float(v) for v in values)
        if not vals:
            raise ValueError("no values")
        n = len(vals)
        mean = math.fsum(vals) / n
        mid = n // 2
        median = vals[mid] if n % 2 else 0.5 * (vals[mid - 1] + vals[mid])
        stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
        best = vals[-1] if better == HIGHER else vals[0]
        cv = stdev / mean if mean else 0.0
        return cls(n, best, median, mean, vals[0], vals[-1], stdev, cv)


@dataclass(frozen=True)
class Peak(Record):
    """A theoretical ceiling and where it came from, or why it is unknown."""

    value: Optional[float]   # None = unknown
    unit: str
    provenance: str          # the formula with its inputs, or the reason it is unknown

    @property
    def known(self) -> bool:
        return self.value is not None
