"""The interposer's names: its calls and their classes, the record's lines and their keys.

Defined once, in C (csrc/interpose/calls.def, an X-macro table the interposer is compiled
from), and written by the build as ``ceiling/_core/interpose_names.json`` (CMakeLists.txt runs
csrc/tools/interpose_names.c): this module reads that file, so the record's keys are the same
on both sides and neither can add one alone (tests/test_interpose_names.py: real records have
only these lines and keys, and the typed reader, probes/interpose_record.py, has a field for
each key, no more, no fewer).

``names()`` gives them; ``CEILING_INTERPOSE_NAMES`` names another file (a test's). A missing
or damaged file is a broken build (the interposer beside it is then missing too):
``CoreError``, said in one line.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..errors import CoreError


@dataclass(frozen=True)
class Line:
    """One kind of record line: its first word, its kind's name, the key that tells it from
    the module's other lines (``lead``; None: the runtime's process line), the value set of
    that key's names (``set``; None: any), its other keys, and whether the 18 size buckets
    follow."""
    word: str
    kind: str
    lead: Optional[str]
    set: Optional[str]
    keys: Tuple[str, ...]
    buckets: bool

    def all_keys(self, buckets: Tuple[str, ...]) -> Tuple[str, ...]:
        return ((self.lead,) if self.lead else ()) + self.keys + (buckets if self.buckets else ())


@dataclass(frozen=True)
class Call:
    """A wrapped function: its number on the per-event channel (calls.def), module, name, class."""
    id: int
    module: str
    fn: str
    cls: str


@dataclass(frozen=True)
class Names:
    format_version: int
    keys: Dict[str, str]                 # key -> "u64", "i32", "str" or "peer" (a number or "other")
    buckets: Tuple[str, ...]             # the size histogram's, in order
    file_counters: Tuple[str, ...]       # files.c's per-file counters, in order
    file_counters_ns: FrozenSet[str]     # those of them that are times (ns)
    proc_io: Tuple[str, ...]             # proc.c's /proc/self/io fields
    sets: Dict[str, Tuple[str, ...]]     # value sets of the name keys (classes, histograms, calls)
    lines: Tuple[Line, ...]
    calls: Tuple[Call, ...]

    def of_type(self, t: str) -> FrozenSet[str]:
        return frozenset(k for k, v in self.keys.items() if v == t)

    def line_kinds(self, word: str) -> List[Line]:
        return [ln for ln in self.lines if ln.word == word]

    def classes(self, module: str) -> Dict[str, str]:
        """fn -> class of a module's calls."""
        return {c.fn: c.cls for c in self.calls if c.module == module}

    def calls_digest(self) -> str:
        """A short hash of the call numbering (names in id order): what an event file names
        its table by (calls.def, the per-event channel)."""
        text = "\n".join(f"{c.id} {c.module} {c.fn} {c.cls}" for c in self.calls)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def path() -> Path:
    env = os.environ.get("CEILING_INTERPOSE_NAMES")
    if env:
        return Path(env)
    return _installed()


def where() -> str:
    """``path()`` as text: what the readers' tables are cached by, cheap enough to ask per line."""
    return os.environ.get("CEILING_INTERPOSE_NAMES") or _installed_text()


@lru_cache(maxsize=1)
def _installed_text() -> str:
    return str(_installed())


@lru_cache(maxsize=1)
def _installed() -> Path:
    """The names beside the built core, resolved once: the record's reader asks for each value
    it types, and a realpath is a system call per path component."""
    return Path(__file__).resolve().parents[1] / "_core" / "interpose_names.json"


@lru_cache(maxsize=None)
def _load(where: str) -> Names:
    try:
        d = json.loads(Path(where).read_text())
        return Names(
            format_version=int(d["format_version"]),
            keys=dict(d["keys"]),
            buckets=tuple(d["buckets"]),
            file_counters=tuple(c["key"] for c in d["file_counters"]),
            file_counters_ns=frozenset(c["key"] for c in d["file_counters"] if c["ns"]),
            proc_io=tuple(d["proc_io"]),
            sets={k: tuple(v) for k, v in d["sets"].items()},
            lines=tuple(Line(ln["word"], ln["kind"], ln["lead"], ln["set"], tuple(ln["keys"]), bool(ln["buckets"]))
                        for ln in d["lines"]),
            calls=tuple(Call(c["id"], c["module"], c["fn"], c["class"]) for c in d["calls"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CoreError(f"the interposer's names ({where}) cannot be read: {e}; rebuild ceiling "
                        "(make .venv/.installed, or pip install .)") from e


def names() -> Names:
    """The names, read once per file."""
    return _load(where())
