"""schema.json pins the document that model.py writes; golden files and the model must both match it."""
import copy
import dataclasses
import json
import sys
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from ceiling.errors import StoreError
from ceiling.machine.model import Machine
from ceiling.results import jsonio
from ceiling.results.model import (HIGHER, LOWER, SCHEMA_VERSION, STATUSES, Finding, Metric, Peak, Run, Series,
                                   Stats)

GOLDEN = Path(__file__).parent / "golden"
SCHEMA = jsonio.schema()
DEFS = SCHEMA["$defs"]


def test_schema_is_valid_draft_2020_12():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_schema_file_ships_in_the_package():
    from importlib.resources import files
    assert json.loads(files("ceiling.results").joinpath("schema.json").read_text()) == SCHEMA


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("run_v*.json")), ids=lambda p: p.name)
def test_golden_files_validate(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc["schema_version"] != SCHEMA_VERSION:
        pytest.skip("schema.json describes the current version only")
    assert jsonio.validate(doc) is True


@pytest.mark.parametrize("cls,schema", [(Run, SCHEMA), (Metric, DEFS["Metric"]), (Stats, DEFS["Stats"]),
                                        (Peak, DEFS["Peak"]), (Finding, DEFS["Finding"]),
                                        (Series, DEFS["Series"])], ids=lambda x: getattr(x, "__name__", ""))
def test_schema_fields_match_the_model(cls, schema):
    # A field added, renamed or removed in model.py must be mirrored in schema.json
    # (and SCHEMA_VERSION bumped when old documents no longer fit).
    names = [f.name for f in dataclasses.fields(cls)]
    assert set(schema["properties"]) == set(names)
    assert set(schema["required"]) == set(names)          # asdict always writes every field
    assert schema["additionalProperties"] is False


def test_pinned_machine_fields_exist_in_the_model():
    names = {f.name for f in dataclasses.fields(Machine)}
    assert set(DEFS["Machine"]["properties"]) <= names


def test_enums_match_the_model():
    assert set(DEFS["Metric"]["properties"]["better"]["enum"]) == {HIGHER, LOWER}
    assert set(DEFS["Finding"]["properties"]["status"]["enum"]) == set(STATUSES)
    assert set(DEFS["Series"]["properties"]["kind"]["enum"]) == {"xy", "matrix"}


def _properties(schema, where="$"):
    for name, sub in schema.get("properties", {}).items():
        yield f"{where}.{name}", sub
    for name, sub in schema.get("$defs", {}).items():
        yield from _properties(sub, f"{where}.$defs.{name}")


def test_every_field_has_a_one_line_description():
    for where, sub in _properties(SCHEMA):
        assert sub.get("description"), where
        assert "\n" not in sub["description"], where


def test_a_run_built_from_the_model_validates():
    peak = Peak(None, "ns", "unknown: no floor for DRAM latency")
    run = Run(tool_version="0.1.0", host="h", started="2025-01-01T00:00:00Z", command=["ceiling"],
              machine=Machine(hostname="h", peaks={"membw.node": Peak(10.0, "GB/s", "x")}).to_dict(),
              metrics=[Metric.measured("latency.dram", [90.0, 91.0], "ns", LOWER, peak=peak),
                       Metric.measured("stream.triad", [1.0, float("nan")], "GB/s"),
                       Metric("stream.copy", None, "GB/s")],
              findings=[Finding("x.y", s, "t") for s in STATUSES],
              series=[Series("a.b", "xy", x=[1.0], y=[None]), Series("c2c.matrix", "matrix")])
    assert jsonio.validate(run) is True


def _golden_doc():
    return json.loads((GOLDEN / "run_v1.json").read_text(encoding="utf-8"))


BREAKS = [
    ("extra field in a metric", lambda d: d["metrics"][0].update(bandwidth_gbs=1.0)),
    ("extra top-level field", lambda d: d.update(nodes=[])),
    ("better not an enum value", lambda d: d["metrics"][0].update(better="up")),
    ("status not an enum value", lambda d: d["findings"][0].update(status="error")),
    ("kind not an enum value", lambda d: d["series"][0].update(kind="table")),
    ("missing unit", lambda d: d["metrics"][0].pop("unit")),
    ("missing partial", lambda d: d.pop("partial")),
    ("value as text", lambda d: d["metrics"][0].update(value="3.5")),
    ("zero repetitions", lambda d: d["metrics"][0]["stats"].update(n=0)),
    ("stats field renamed", lambda d: d["metrics"][0]["stats"].update(stddev=d["metrics"][0]["stats"].pop("stdev"))),
    ("newer schema", lambda d: d.update(schema_version=2)),
    ("peak without provenance", lambda d: d["metrics"][0]["peak"].pop("provenance")),
    ("machine peak malformed", lambda d: d["machine"]["peaks"]["membw.node"].update(value="fast")),
    ("started not ISO 8601", lambda d: d.update(started="yesterday")),
    ("empty name segment", lambda d: d["metrics"][0].update(name="stream..triad")),
    ("matrix row not a list", lambda d: d["series"][1]["matrix"].append(1.0)),
    ("negative efficiency", lambda d: d["metrics"][0].update(efficiency=-0.5)),
]


@pytest.mark.parametrize("what,change", BREAKS, ids=[b[0] for b in BREAKS])
def test_breaking_changes_are_caught(what, change):
    doc = _golden_doc()
    jsonio.validate(doc)
    bad = copy.deepcopy(doc)
    change(bad)
    with pytest.raises(StoreError, match="invalid run document at"):
        jsonio.validate(bad)


def test_validate_is_skipped_without_jsonschema(monkeypatch):
    monkeypatch.setitem(sys.modules, "jsonschema", None)     # import now raises ImportError
    assert jsonio.validate({"not": "a run"}) is False
