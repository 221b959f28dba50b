"""What a run document must be before it is read: shallow enough, and of the shape
schema.json pins.

Reading checks every document (a JSON file given to ``show``, a row of the
history) against schema.json itself, so that a value of the wrong type (a
string where a figure goes, a negative efficiency) is refused when it is read,
with one line naming its path, instead of reaching a report that would fail
on it later. jsonschema is a test dependency only, so this module checks the
few keywords schema.json uses (``SUPPORTED``; a test keeps the two in step and
compares the verdicts with jsonschema's). It is stricter than JSON Schema in
one respect: a number must be finite (JSON cannot spell NaN or an infinity;
jsonio reads those as null before this check).

Nesting is limited (``MAX_DEPTH``) and measured without recursion: a document
nested ten thousand levels deep (which json can parse in pieces, and which
the copies and renderers downstream would each recurse through) is refused
here with one line.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Callable, Dict, List, Optional

# A document ceiling writes is nested 7 levels deep, a run of several nodes 9;
# evidence dictionaries of findings add a few. 64 leaves room for any of them
# and keeps every recursive step downstream (copies, JSON writing, rendering)
# far from Python's recursion limit.
MAX_DEPTH = 64

# The keywords understood here; schema.json may use no other (tests/test_doccheck.py).
SUPPORTED = frozenset({"type", "properties", "required", "additionalProperties", "items", "$ref",
                       "oneOf", "enum", "const", "minimum", "maximum", "minLength", "pattern"})
ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description"})


class Problem(ValueError):
    """The first place a document does not fit: ``path`` names it ("metrics[3].value")."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path or '(top)'}: {problem}")


def depth_problem(doc: Any, limit: int = MAX_DEPTH) -> Optional[str]:
    """A one-line problem when ``doc`` nests objects and lists deeper than ``limit``; else None."""
    stack = [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if d > limit:
            return f"nested deeper than {limit} levels (a ceiling run is under 10)"
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return None


def shown(v: Any, limit: int = 40) -> str:
    """A value for an error line: short, whatever its size."""
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10 ** 20:
        return f"an integer of {len(str(abs(v))) if abs(v) < 10 ** 4000 else 'over 4000'} digits"
    text = repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string", "boolean": "true or false",
               "null": "null", "integer": "an integer", "number": "a number"}


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, float) and math.isfinite(v)


def _is_type(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if t == "number":
        return _is_number(v)
    if t == "integer":     # JSON Schema: 3.0 is an integer
        return _is_number(v) and (isinstance(v, int) or float(v).is_integer())
    raise ValueError(f"schema type {t!r} is not supported")


_PY_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_test(allowed) -> "Callable[[Any], bool]":
    """_is_type(v, t) for any t of ``allowed``, as one isinstance where the types allow."""
    py = tuple(_PY_TYPES[t] for t in allowed if t in _PY_TYPES)
    if "number" in allowed:
        return lambda v: isinstance(v, py) or _is_number(v)
    if "integer" in allowed:
        return lambda v: isinstance(v, py) or _is_type(v, "integer")
    return lambda v: isinstance(v, py)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


@lru_cache(maxsize=None)
def _pattern(p: str) -> "re.Pattern[str]":
    return re.compile(p)


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Checker:
    """Checks documents against one JSON Schema (schema.json, already loaded)."""

    def __init__(self, schema: Dict[str, Any]):
        self.schema = schema
        self.defs: Dict[str, Any] = schema.get("$defs", {})
        self._compiled: Dict[int, Callable[[Any], bool]] = {}
        self._fits: Optional[Callable[[Any], bool]] = None

    def check(self, doc: Any) -> None:
        """Raise Problem at the first place ``doc`` does not fit the schema.

        Two passes over one schema: ``fits`` (the schema compiled once into closures that only
        say yes or no, with no key path built: most documents fit) and, only where it says no,
        the walk below that finds and names the first place. ``fits`` never says yes where the
        walk would refuse (tests/test_doccheck.py compares them on every kind of value)."""
        if self._fits is None:
            self._fits = self._compile(self.schema)
        if not self._fits(doc):
            self._check(doc, self.schema, "")

    def fits(self, doc: Any) -> bool:
        """Whether ``doc`` fits the schema (check's first pass alone)."""
        if self._fits is None:
            self._fits = self._compile(self.schema)
        return self._fits(doc)

    def _compile(self, s: Dict[str, Any]) -> Callable[[Any], bool]:
        """The yes-or-no test of one schema node, as closures; a node reached again through
        $ref (a recursive schema) is looked up when called."""
        key = id(s)
        if key in self._compiled:
            return self._compiled[key]
        cell: List[Callable[[Any], bool]] = []
        self._compiled[key] = lambda v: cell[0](v)          # a recursive $ref meets this while compiling
        tests: List[Callable[[Any], bool]] = []
        if "$ref" in s:
            tests.append(self._compile(self._ref(s["$ref"])))
        if "oneOf" in s:
            alternatives = s["oneOf"]
            nulls = [a for a in alternatives if a.get("type") == "null"]
            others = [a for a in alternatives if a.get("type") != "null"]
            if len(others) == 1 and len(nulls) == 1:
                one = self._compile(others[0])
                tests.append(lambda v: v is None or one(v))
            else:
                forms = [self._compile(a) for a in alternatives]
                tests.append(lambda v: sum(1 for form in forms if form(v)) == 1)
        if "type" in s:
            allowed = tuple(s["type"] if isinstance(s["type"], list) else [s["type"]])
            for t in allowed:
                _is_type(None, t)                        # an unsupported type fails here, as in the walk
            tests.append(_type_test(allowed))
        if "const" in s:
            const = s["const"]
            tests.append(lambda v: _same(v, const))
        if "enum" in s:
            enum = tuple(s["enum"])
            tests.append(lambda v: any(_same(v, e) for e in enum))
        if "minimum" in s:
            low = s["minimum"]
            tests.append(lambda v: not _is_number(v) or v >= low)
        if "maximum" in s:
            high = s["maximum"]
            tests.append(lambda v: not _is_number(v) or v <= high)
        if "minLength" in s:
            n = s["minLength"]
            tests.append(lambda v: not isinstance(v, str) or len(v) >= n)
        if "pattern" in s:
            rx = _pattern(s["pattern"])
            tests.append(lambda v: not isinstance(v, str) or rx.search(v) is not None)
        props = {k: self._compile(x) for k, x in s.get("properties", {}).items()}
        required = tuple(s.get("required", ()))
        extra = s.get("additionalProperties", True)
        extra_f = self._compile(extra) if isinstance(extra, dict) else None
        closed = extra is False

        def obj(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            for k in required:
                if k not in v:
                    return False
            for k, x in v.items():
                f = props.get(k)
                if f is not None:
                    if not f(x):
                        return False
                elif closed:
                    return False
                elif extra_f is not None and not extra_f(x):
                    return False
            return True
        if props or required or closed or extra_f is not None:
            tests.append(obj)
        if "items" in s:
            item = self._compile(s["items"])
            item_types = self._types_only(s["items"])
            if item_types is not None:
                plain = tuple(item_types)
                tests.append(lambda v: not isinstance(v, list) or all(
                    any(_is_type(x, t) for t in plain) for x in v))
            else:
                tests.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
        if not tests:
            f: Callable[[Any], bool] = lambda v: True          # noqa: E731
        elif len(tests) == 1:
            f = tests[0]
        elif len(tests) == 2:
            first, second = tests
            f = lambda v: first(v) and second(v)                # noqa: E731
        else:
            every = tuple(tests)

            def f(v: Any) -> bool:
                for t in every:
                    if not t(v):
                        return False
                return True
        cell.append(f)
        self._compiled[key] = f
        return f

    def _ref(self, ref: str) -> Dict[str, Any]:
        prefix = "#/$defs/"
        if not ref.startswith(prefix) or ref[len(prefix):] not in self.defs:
            raise ValueError(f"schema reference {ref!r} is not supported")
        return self.defs[ref[len(prefix):]]

    def _check(self, v: Any, s: Dict[str, Any], path: str) -> None:
        if "$ref" in s:
            self._check(v, self._ref(s["$ref"]), path)
        if "oneOf" in s:
            self._one_of(v, s["oneOf"], path)
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(_is_type(v, t) for t in types):
                want = " or ".join(_TYPE_WORDS.get(t, t) for t in types)
                raise Problem(path, f"{shown(v)} is not {want}")
        if "const" in s and not _same(v, s["const"]):
            raise Problem(path, f"{shown(v)} is not {s['const']!r}")
        if "enum" in s and not any(_same(v, e) for e in s["enum"]):
            raise Problem(path, f"{shown(v)} is not one of {', '.join(repr(e) for e in s['enum'])}")
        if _is_number(v):
            if "minimum" in s and v < s["minimum"]:
                raise Problem(path, f"{shown(v)} is below the minimum {s['minimum']!r}")
            if "maximum" in s and v > s["maximum"]:
                raise Problem(path, f"{shown(v)} is above the maximum {s['maximum']!r}")
        if isinstance(v, str):
            if "minLength" in s and len(v) < s["minLength"]:
                raise Problem(path, "must not be empty" if s["minLength"] == 1
                              else f"shorter than {s['minLength']} characters")
            if "pattern" in s and not _pattern(s["pattern"]).search(v):
                raise Problem(path, f"{shown(v)} does not match {s['pattern']!r}")
        if isinstance(v, dict):
            self._object(v, s, path)
        if isinstance(v, list) and "items" in s:
            items = s["items"]
            types = self._types_only(items)
            for i, x in enumerate(v):
                # a matrix of 65,536 figures: its cells are checked without a call each
                if types is None or not any(_is_type(x, t) for t in types):
                    self._check(x, items, f"{path}[{i}]")

    def _types_only(self, s: Dict[str, Any]) -> Optional[List[str]]:
        """The types ``s`` allows when a type is all it asks (through one $ref); else None."""
        if set(s) - ANNOTATIONS == {"$ref"}:
            s = self._ref(s["$ref"])
        if set(s) - ANNOTATIONS != {"type"}:
            return None
        return s["type"] if isinstance(s["type"], list) else [s["type"]]

    def _object(self, v: Dict[str, Any], s: Dict[str, Any], path: str) -> None:
        props = s.get("properties", {})
        for key in s.get("required", ()):
            if key not in v:
                raise Problem(_at(path, key), "missing key")
        extra = s.get("additionalProperties", True)
        for key, x in v.items():
            if key in props:
                self._check(x, props[key], _at(path, key))
            elif extra is False:
                raise Problem(_at(path, str(key)), "unknown key")
            elif isinstance(extra, dict):
                self._check(x, extra, _at(path, str(key)))

    def _one_of(self, v: Any, alternatives: List[Dict[str, Any]], path: str) -> None:
        nulls = [a for a in alternatives if a.get("type") == "null"]
        others = [a for a in alternatives if a.get("type") != "null"]
        if len(others) == 1 and len(nulls) == 1:
            # "X or null", the one form schema.json uses: say what is wrong with the X.
            if v is not None:
                self._check(v, others[0], path)
            return
        first: Optional[Problem] = None
        matched = 0
        for a in alternatives:
            try:
                self._check(v, a, path)
                matched += 1
            except Problem as e:
                first = first or e
        if matched == 0 and first is not None:
            raise first
        if matched > 1:
            raise Problem(path, f"{shown(v)} fits more than one form")
