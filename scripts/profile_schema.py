#!/usr/bin/env python3
"""Write the application section's part of src/ceiling/results/schema.json from
src/ceiling/results/profile*.py (profile.PARTS): one $defs object per dataclass there, each property's
description its field's comment, every object closed (additionalProperties false; a map by
name gives the type of its values). Run it after adding a field to profile.py:

    .venv/bin/python scripts/profile_schema.py

tests/test_results_schema.py checks that schema.json and the model agree, field by field.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "src" / "ceiling" / "results"
SCHEMA = RESULTS / "schema.json"


def _comments(source: str):
    """{class name: {field name: its comment}} and {class name: its docstring's first line}."""
    lines = source.splitlines()
    fields, docs = {}, {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs[node.name] = (ast.get_docstring(node) or "").splitlines()[0]
        got = {}
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                text = "\n".join(lines[st.lineno - 1:st.end_lineno])
                if "#" not in text.splitlines()[-1]:
                    raise SystemExit(f"{node.name}.{st.target.id}: no comment to describe it")
                got[st.target.id] = text.splitlines()[-1].split("#", 1)[1].strip()
        fields[node.name] = got
    return fields, docs


def _type(hint) -> dict:
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        if dataclasses.is_dataclass(inner):
            return {"oneOf": [{"$ref": f"#/$defs/{inner.__name__}"}, {"type": "null"}]}
        t = _type(inner)
        if t == {"$ref": "#/$defs/number_or_null"}:
            return t
        return {"type": [t["type"], "null"]}
    if origin is list:
        return {"type": "array", "items": _type(typing.get_args(hint)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type(typing.get_args(hint)[1])}
    if dataclasses.is_dataclass(hint):
        return {"$ref": f"#/$defs/{hint.__name__}"}
    if hint is float:
        return {"$ref": "#/$defs/number_or_null"}       # a figure that was not finite is written null
    return {"type": {str: "string", int: "integer", bool: "boolean"}[hint]}


def defs() -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    import importlib
    from ceiling.results.profile import PARTS
    out = {}
    for part in PARTS:
        module = importlib.import_module(f"ceiling.results.{part}")
        comments, docs = _comments((RESULTS / f"{part}.py").read_text(encoding="utf-8"))
        out.update(_records(module, comments, docs))
    return out


def _records(module, comments, docs) -> dict:
    out = {}
    for name, cls in vars(module).items():
        if not (dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__):
            continue
        hints = typing.get_type_hints(cls)
        props = {}
        for f in dataclasses.fields(cls):
            # a field a record inherits (StreamRate's from PagesRate) is described where it is declared
            said = next(comments[c.__name__] for c in cls.__mro__ if f.name in comments.get(c.__name__, {}))
            props[f.name] = dict(_type(hints[f.name]), description=said[f.name])
        out[name] = {"description": docs[name], "type": "object", "additionalProperties": False,
                     "required": [f.name for f in dataclasses.fields(cls)], "properties": props}
    return out


def _block(name: str, d: dict) -> str:
    """One $defs object as schema.json spells them: a line per property."""
    props = ",\n".join(f"        {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                        for k, v in d["properties"].items())
    return (f"    {json.dumps(name)}: {{\n      \"description\": {json.dumps(d['description'], ensure_ascii=False)},\n"
            f"      \"type\": \"object\",\n      \"additionalProperties\": false,\n"
            f"      \"required\": {json.dumps(d['required'])},\n      \"properties\": {{\n{props}\n      }}\n    }},\n")


APP_TAIL = {
    "overhead": {"oneOf": [{"$ref": "#/$defs/Overhead"}, {"type": "null"}],
                 "description": "measured cost of watching the application; null when not measured"},
    "files": {"type": "array", "items": {"$ref": "#/$defs/OutputFile"}, "description": "traces and logs written"},
    "profile": {"oneOf": [{"$ref": "#/$defs/Profile"}, {"type": "null"}],
                "description": "what ceiling profile found in the program; null when it was not profiled"},
}


def main() -> None:
    from ceiling.results.model import SCHEMA_VERSION
    text = SCHEMA.read_text(encoding="utf-8")
    text = re.sub(r'"urn:ceiling:schema:run:\d+"', f'"urn:ceiling:schema:run:{SCHEMA_VERSION}"', text, count=1)
    text = re.sub(r"schema_version \d+\)", f"schema_version {SCHEMA_VERSION})", text, count=1)
    text = re.sub(r'("schema_version": \{\s*"const": )\d+', rf"\g<1>{SCHEMA_VERSION}", text, count=1)
    # Application: overhead a record, profile after files
    head, rest = text.split('    "Application": {\n', 1)
    app, tail = rest.split('\n    },\n', 1)
    app_lines = app.split("\n")
    keep = app_lines[:app_lines.index('      "properties": {') + 1]
    props = [ln for ln in app_lines[len(keep):] if ln.startswith('        "') and
             ln.split('"')[1] not in APP_TAIL and ln.split('"')[1] not in ("per_call_ns", "fraction")]
    props = [ln.rstrip(",") for ln in props]
    props += [f"        {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in APP_TAIL.items()]
    names = [ln.split('"')[1] for ln in props]
    keep = [f'      "required": {json.dumps(names)},' if ln.startswith('      "required"') else ln for ln in keep]
    app = "\n".join(keep + [",\n".join(props), "      }"])
    # the application's records, after Application, each replaced when already there
    generated = defs_cache
    for name in generated:
        tail = re.sub(rf'    "{name}": {{\n.*?\n    }},\n', "", tail, count=1, flags=re.S)
    blocks = "".join(_block(n, d) for n, d in generated.items())
    text = head + '    "Application": {\n' + app + "\n    },\n" + blocks + tail
    json.loads(text)
    SCHEMA.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    defs_cache = defs()
    main()
