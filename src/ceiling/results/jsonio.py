"""A Run as a JSON document: the interchange format, versioned and validated.

The document is ``Run.to_dict()`` made plain: NaN and infinities become
``null`` (JSON has no spelling for them, and ``null`` already means "no
figure"), NumPy scalars become Python numbers, tuples become lists. The
written form is canonical, so that loading a file and writing it again gives
the same bytes (the golden files in tests/golden/ rely on it): two-space
indent, fields in model order, UTF-8, lists of plain values (raw repetitions,
one matrix row) on one line so that a large matrix stays readable and
diffable, and a final newline.

``schema.json`` beside this file pins the shape of the current
``schema_version``, ``schema_v<N>.json`` that of each older one; ``validate``
checks a document against the schema of its version when jsonschema is
installed (a test dependency, not a runtime one). Reading goes through
``migrate.upgrade``, so a document of any older version loads as a current Run,
and then through ``doccheck`` against schema.json (without jsonschema), so a
damaged document (a string where a figure goes, nesting 100,000 levels deep) is
refused in one line naming the place. A number beyond a float reads as unknown
(1e999, as NaN and Infinity do) or, as an integer of hundreds of digits that no
writer makes, refuses the document.

A study (model.Study) is a document of its own, told from a run by its version key
(``study_version`` instead of ``schema_version``): ``loads_study`` checks it against the Study
definition of schema.json and reads each member run held whole as a run file is read (upgraded,
checked), so a member keeps its own schema_version; ``loads_document`` reads either kind. A study
that does not fit is refused in one line with StudyError (exit 12).
"""
from __future__ import annotations

import json
import math
import os
import sys
from json.encoder import encode_basestring as _encode_str   # what json.dumps(ensure_ascii=False) uses
from functools import lru_cache
from typing import Any, Dict, Optional, Union

from ..errors import PathError, StoreError, StudyError
from ..files import output
from . import doccheck, migrate
from .base import document
from .model import SCHEMA_VERSION, STUDY_VERSION, Run, Study

PathLike = Union[str, "os.PathLike[str]"]

_INDENT = "  "


def to_doc(run: Run) -> Dict[str, Any]:
    """The plain JSON document of ``run`` (what ``dumps`` writes)."""
    return document(run)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _format(v: Any, level: int) -> str:
    if isinstance(v, dict):
        if not v:
            return "{}"
        pad = _INDENT * (level + 1)
        items = ",\n".join(f"{pad}{_encode_str(k)}: {_format(x, level + 1)}"
                           for k, x in v.items())
        return "{\n" + items + "\n" + _INDENT * level + "}"
    if isinstance(v, list):
        if all(_scalar(x) for x in v):
            return "[" + ", ".join(_format(x, level) for x in v) + "]"
        pad = _INDENT * (level + 1)
        return "[\n" + ",\n".join(pad + _format(x, level + 1) for x in v) + "\n" + _INDENT * level + "]"
    return _leaf(v)


def _leaf(v: Any) -> str:
    """json.dumps of one scalar, by the encoder's own pieces (a run of 10,000 nodes has a million)."""
    if isinstance(v, str):
        return _encode_str(v)
    if v is None or isinstance(v, bool):
        return "null" if v is None else ("true" if v else "false")
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float) and math.isfinite(v):
        return float.__repr__(v)
    return json.dumps(v, ensure_ascii=False, allow_nan=False)      # refuses what JSON cannot hold


def dumps(run: Run) -> str:
    """The canonical JSON text of ``run`` (ends with a newline)."""
    return _format(to_doc(run), 0) + "\n"


def dump(run: Run, path: PathLike) -> None:
    """Write ``run`` to ``path``: a file atomically (readers see the old file or the new one,
    never half), a device or FIFO written through, a disk or a directory refused
    (files/output.py). Raises PathError (one line) when the file cannot be written.
    """
    output.write(path, dumps(run))


class _HugeInteger(ValueError):
    """An integer in the text that no float can hold."""


def _float(text: str) -> Optional[float]:
    v = float(text)
    return v if math.isfinite(v) else None     # 1e999: an infinity spelt as a number


def _int(text: str) -> int:
    # Every figure is used as a float downstream, where an integer beyond 1.8e308 raises
    # OverflowError; and Python refuses to parse one of over 4300 digits with a bare
    # ValueError. No writer produces such a number: the file is refused, before int() runs.
    digits = len(text.lstrip("-"))
    if digits <= 309:
        v = int(text)
        if abs(v) <= sys.float_info.max:
            return v
    raise _HugeInteger(f"an integer of {digits} digits, larger than any figure can be")


def loads(text: Union[str, bytes], source: str = "run document") -> Run:
    """Parse a Run from JSON text; ``source`` names it in error messages.

    Raises StoreError for text that is not JSON, not a run document (the schema's
    shape, doccheck), or written by a newer ceiling.
    """
    return from_doc(_parse(text, source), source)


def _parse(text: Union[str, bytes], source: str) -> Any:
    """The JSON value of ``text``; StoreError (one line) where it is no JSON a ceiling could have written."""
    try:
        # NaN/Infinity are never written, but another tool may have: read them as unknown,
        # as a number too large for a float (1e999), which Python would read as infinity.
        doc = json.loads(text, parse_constant=lambda _name: None, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as e:
        raise StoreError(f"{source} is not valid JSON (line {e.lineno}, column {e.colno}, "
                         f"char {e.pos}): {e.msg}") from None
    except UnicodeDecodeError as e:
        raise StoreError(f"{source} is not valid JSON (byte {e.start}): not UTF-8") from None
    except _HugeInteger as e:
        raise StoreError(f"{source} is not a valid ceiling run: {e}") from None
    except RecursionError:
        raise StoreError(f"{source} is not a valid ceiling run: nested deeper than "
                         f"{doccheck.MAX_DEPTH} levels (a ceiling run is under 10)") from None
    except ValueError as e:     # anything else the parser refuses, in one line
        raise StoreError(f"{source} is not valid JSON: {e}") from None
    return doc


def from_doc(doc: Any, source: str = "run document") -> Run:
    """A Run from an already parsed document (same checks as ``loads``).

    An older document is upgraded first (migrate.upgrade), so every reader of
    files and of the store gets a current Run.
    """
    if isinstance(doc, dict) and "study_version" in doc and "schema_version" not in doc:
        raise StoreError(f"{source} is a study of several runs, not one run: 'ceiling show' shows it")
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise StoreError(f"{source} is not a ceiling run (no schema_version)")
    too_deep = doccheck.depth_problem(doc)
    if too_deep:
        raise StoreError(f"{source} is not a valid ceiling run: {too_deep}")
    version = doc["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreError(f"{source} has an invalid schema_version {version!r}")
    try:
        doc = migrate.upgrade(doc)
    except migrate.NewerSchemaError as e:
        raise StoreError(f"{source} was {e}: upgrade ceiling") from None
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise StoreError(f"{source} (schema {version}) could not be upgraded: {e}") from None
    try:
        _checker().check(doc)
        return Run.from_dict(doc)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise StoreError(f"{source} is not a valid ceiling run: {e}") from None


@lru_cache(maxsize=None)
def _checker() -> doccheck.Checker:
    return doccheck.Checker(schema(SCHEMA_VERSION))


def _read(path: str) -> bytes:
    """The file's bytes; PathError when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise PathError(f"cannot read {path}: {e.strerror or e}") from None


def load(path: PathLike) -> Run:
    """Read a Run from a JSON file. PathError when unreadable, StoreError when not a run."""
    path = os.fspath(path)
    return loads(_read(path), source=path)


@lru_cache(maxsize=None)
def schema(version: int = SCHEMA_VERSION) -> Dict[str, Any]:
    """The JSON Schema (draft 2020-12) of document ``version``: schema.json for the
    current one, schema_v<N>.json for older ones. ValueError for a version never written."""
    from importlib.resources import files

    name = "schema.json" if version == SCHEMA_VERSION else f"schema_v{version}.json"
    res = files(__package__).joinpath(name)
    if not (isinstance(version, int) and 1 <= version <= SCHEMA_VERSION) or not res.is_file():
        raise ValueError(f"no schema for schema_version {version!r}")
    return json.loads(res.read_text(encoding="utf-8"))


# -- studies -----------------------------------------------------------------------------------

def study_doc(study: Study) -> Dict[str, Any]:
    """The plain JSON document of ``study`` (what ``dumps_study`` writes)."""
    return document(study)


def dumps_study(study: Study) -> str:
    """The canonical JSON text of ``study``, written as a run's is (ends with a newline)."""
    return _format(study_doc(study), 0) + "\n"


def dump_study(study: Study, path: PathLike) -> None:
    """Write ``study`` to ``path`` by the rules of ``dump``."""
    output.write(path, dumps_study(study))


def loads_study(text: Union[str, bytes], source: str = "study document") -> Study:
    """Parse a Study from JSON text. StudyError (exit 12) for one that is not a valid study;
    StoreError for text that is not JSON at all."""
    return study_from_doc(_parse(text, source), source)


def study_from_doc(doc: Any, source: str = "study document") -> Study:
    """A Study from a parsed document: its own shape checked against schema.json's Study, each
    member run held whole read as a run file is (upgraded to the current schema_version, checked)."""
    if not isinstance(doc, dict) or "study_version" not in doc:
        raise StudyError(f"{source} is not a ceiling study (no study_version)")
    version = doc["study_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StudyError(f"{source} has an invalid study_version {version!r}")
    if version > STUDY_VERSION:
        raise StudyError(f"{source} was written by a newer ceiling (study version {version}); "
                         f"this one reads up to {STUDY_VERSION}: upgrade ceiling")
    too_deep = doccheck.depth_problem(doc)
    if too_deep:
        raise StudyError(f"{source} is not a valid ceiling study: {too_deep}")
    try:
        _study_checker().check(doc)
        members = doc["members"]
        study = Study.from_dict(dict(doc, members=[dict(m, run=None) for m in members]))
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise StudyError(f"{source} is not a valid ceiling study: {e}") from None
    for i, (m, d) in enumerate(zip(study.members, members)):
        if d["run"] is None:
            continue
        try:
            m.run = from_doc(d["run"], f"member {i} (run)")
        except StoreError as e:
            raise StudyError(f"{source} is not a valid ceiling study: {e}") from None
        if m.run_id and m.run.run_id and m.run_id != m.run.run_id:
            raise StudyError(f"{source} is not a valid ceiling study: member {i} names run {m.run_id} "
                             f"but holds run {m.run.run_id}")
    return study


def loads_document(text: Union[str, bytes], source: str = "document") -> Union[Run, Study]:
    """A Run or a Study, whichever the text holds (told by its version key)."""
    doc = _parse(text, source)
    if isinstance(doc, dict) and "study_version" in doc and "schema_version" not in doc:
        return study_from_doc(doc, source)
    return from_doc(doc, source)


def load_document(path: PathLike) -> Union[Run, Study]:
    """Read a Run or a Study from a JSON file. PathError when unreadable."""
    path = os.fspath(path)
    return loads_document(_read(path), source=path)


@lru_cache(maxsize=None)
def study_schema() -> Dict[str, Any]:
    """The JSON Schema of a study document: schema.json's Study definition as the root."""
    full = schema(SCHEMA_VERSION)
    return {"$schema": full["$schema"], "$id": f"urn:ceiling:schema:study:{STUDY_VERSION}",
            "$ref": "#/$defs/Study", "$defs": full["$defs"]}


@lru_cache(maxsize=None)
def _study_checker() -> doccheck.Checker:
    return doccheck.Checker(study_schema())


def validate_study(doc: Union[Study, Dict[str, Any]]) -> bool:
    """``validate`` for a study: its own shape, then each member run held whole against its version's
    schema. False when jsonschema is not installed; StudyError naming the first offending field."""
    try:
        import jsonschema
    except ImportError:
        return False
    if isinstance(doc, Study):
        doc = study_doc(doc)
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(study_schema()).iter_errors(doc))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        raise StudyError(f"invalid study document at {where}: {err.message}")
    for i, m in enumerate(doc["members"]):
        if m["run"] is not None:
            try:
                validate(m["run"])
            except StoreError as e:
                raise StudyError(f"member {i}: {e}") from None
    return True


def validate(doc: Union[Run, Dict[str, Any]]) -> bool:
    """Check a document (or Run) against the schema of its schema_version.

    A document of an older version is checked against that version's schema, as
    it was written (before migration); anything else against schema.json.
    Returns True when it was checked, False when jsonschema is not installed (the
    check is skipped: it is a test dependency). Raises StoreError naming the first
    offending field when the document does not match.
    """
    try:
        import jsonschema
    except ImportError:
        return False
    if isinstance(doc, Run):
        doc = to_doc(doc)
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    known = isinstance(version, int) and not isinstance(version, bool) and 1 <= version < SCHEMA_VERSION
    validator = jsonschema.Draft202012Validator(schema(version if known else SCHEMA_VERSION))
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        raise StoreError(f"invalid run document at {where}: {err.message}")
    return True
