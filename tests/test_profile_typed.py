"""The application section is typed (schema 3, results/profile*.py): a real `ceiling profile`
document fits the JSON Schema with no room for an untyped key anywhere in it, and the
reports show the program's figures from those typed fields only."""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.report import html_profile, terminal_profile
from ceiling.results import jsonio, profile, profile_cost, profile_evidence, profile_mpi, profile_run

jsonschema = pytest.importorskip("jsonschema")

SRC = Path(profile.__file__).resolve().parents[1]
SCHEMA = jsonio.schema()
# a program that writes, syncs and reads a file, on two threads of a shell pipeline
PROGRAM = ("dd if=/dev/zero of=data bs=64k count=32 conv=fsync 2>/dev/null; "
           "cat data | wc -c > /dev/null; sync")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("typed")
    out = tmp / "run.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), "--", "/bin/sh", "-c", PROGRAM], capture_output=True, text=True, timeout=120,
                       cwd=tmp, env=dict(os.environ, NO_COLOR="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text(encoding="utf-8")), r.stderr


def _strict(value, sub, where):
    """Walks ``value`` along the schema fragment ``sub``: every object of the document must meet
    a closed object (additionalProperties false, each key listed) or a map by name whose values
    have a schema of their own; an object the schema leaves open fails."""
    if "$ref" in sub:
        _strict(value, SCHEMA["$defs"][sub["$ref"].split("/")[-1]], where)
        return
    if "oneOf" in sub:
        if value is None:
            return
        (form,) = [f for f in sub["oneOf"] if f.get("type") != "null"]
        _strict(value, form, where)
        return
    if isinstance(value, dict):
        extra = sub.get("additionalProperties", True)
        if "properties" in sub:
            assert extra is False, f"{where}: an open object in the application section"
            for k, v in value.items():
                assert k in sub["properties"], f"{where}.{k}: not in the schema"
                _strict(v, sub["properties"][k], f"{where}.{k}")
        else:
            assert isinstance(extra, dict) and extra, f"{where}: an object of any keys in the application section"
            for k, v in value.items():
                _strict(v, extra, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _strict(v, sub.get("items", {}), f"{where}[{i}]")


def test_a_real_profile_fits_the_schema_with_no_untyped_key(recorded):
    doc, _ = recorded
    assert doc["schema_version"] == 3 and "profile" not in doc["environment"]
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    app = doc["application"]
    assert app["profile"]["io_calls"]["write"]["calls"] > 0 and app["profile"]["files"]["shown"]
    assert app["overhead"]["ceiling"]["how"]
    _strict(app, SCHEMA["$defs"]["Application"], "application")
    # and the reader takes it back as records, not dicts
    run = jsonio.from_doc(doc)
    assert isinstance(run.application.profile, profile.Profile)
    assert isinstance(run.application.profile.io_calls["write"], profile_run.IoClass)
    assert isinstance(run.application.overhead, profile_cost.Overhead)


def test_the_reports_show_the_typed_figures_and_nothing_else(recorded):
    doc, stderr = recorded
    run = jsonio.from_doc(doc)
    prof = run.application.profile
    text, section = terminal_profile.render(run, width=200), html_profile.application_section(run)
    w = prof.io_calls["write"]
    assert f"write {w.calls}, {w.bytes / 1e6:.4g} MB" in text
    assert f'<td class="n">{w.calls}</td>' in section
    assert f"over {prof.threads} thread" in text and f"over {prof.threads} thread" in section
    top = prof.files.shown[0]
    assert top.path in text and top.path in section
    # whatever the environment holds, the page is the same: nothing is read from it
    run.environment = {"profile": {"threads": 999, "io_calls": {}, "files": {}}}
    assert terminal_profile.render(run, width=200) == text
    assert html_profile.application_section(run) == section


FIELDS = {f.name for m in (profile, profile_run, profile_mpi, profile_evidence, profile_cost)
          for cls in vars(m).values() if dataclasses.is_dataclass(cls) for f in dataclasses.fields(cls)}
# keys of the typed maps the pages look up by name: I/O classes, MPI groups and message kinds
MAP_KEYS = {"read", "write", "meta", "sync", "copy", "other", "p2p", "wait", "coll", "io"}


@pytest.mark.parametrize("module", ["report/terminal_profile.py", "report/html_profile.py", "verbs/show.py"])
def test_the_reports_read_no_untyped_profile(module):
    """No ``environment`` read, no ``x["key"]`` and no ``x.get("field")`` of a profile field name:
    the old pages read the profile as ``prof.get("shares")``, ``f["read_bytes"]``, ``mpi["ranks"]``."""
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "environment":
            found.append(f"line {node.lineno}: .environment")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, str) and node.slice.value in FIELDS:
            found.append(f"line {node.lineno}: [{node.slice.value!r}]")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in FIELDS - MAP_KEYS:
            found.append(f"line {node.lineno}: .get({node.args[0].value!r})")
    assert not found, f"{module} reads the profile by string keys: {found[:8]}"
