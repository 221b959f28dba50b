"""schema.json pins the document that model.py writes; golden files and the model must both match it."""
import copy
import dataclasses
import hashlib
import json
import sys
import typing
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from ceiling.errors import StoreError
from ceiling.machine.model import Machine
from ceiling.results import jsonio
from ceiling.results import migrate
from ceiling.results.model import (BOUND_KINDS, HIGHER, LOWER, ROOF_KINDS, SCHEMA_VERSION, STATUSES,
                                   STUDY_KINDS, STUDY_VERSION, VERDICT_KINDS, Finding, Metric, Peak, Run, Series,
                                   Study)

GOLDEN = Path(__file__).parent / "golden"
SCHEMA = jsonio.schema()
DEFS = SCHEMA["$defs"]
SCHEMA_V1 = jsonio.schema(1)


def test_schema_is_valid_draft_2020_12():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_schema_file_ships_in_the_package():
    from importlib.resources import files
    assert json.loads(files("ceiling.results").joinpath("schema.json").read_text()) == SCHEMA


def test_schema_describes_the_current_version():
    assert SCHEMA["properties"]["schema_version"] == {
        "const": SCHEMA_VERSION, "description": SCHEMA["properties"]["schema_version"]["description"]}
    assert SCHEMA["$id"] == f"urn:ceiling:schema:run:{SCHEMA_VERSION}"


def test_every_older_version_keeps_its_schema():
    for v in range(1, SCHEMA_VERSION):
        old = jsonio.schema(v)
        jsonschema.Draft202012Validator.check_schema(old)
        assert old["$id"] == f"urn:ceiling:schema:run:{v}"
        assert old["properties"]["schema_version"]["const"] == v
    with pytest.raises(ValueError, match="no schema"):
        jsonio.schema(SCHEMA_VERSION + 1)


@pytest.mark.parametrize("version,digest", [
    (1, "dc3be1f08255e0d4bf0df25675130c5a74d178bd6a8320c49f940f4d734a90bd"),
    (2, "2e94438e7c4d899832a080474e87b8444e2799870b4142a31ad27c150ce2f66a"),
])
def test_older_schemas_are_frozen(version, digest):
    # Documents already written were checked against them: they describe them, not the model.
    from importlib.resources import files
    data = files("ceiling.results").joinpath(f"schema_v{version}.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == digest


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("run_v*.json")), ids=lambda p: p.name)
def test_golden_files_validate(path):
    # Each against the schema of its own version, as written; an older one also after upgrade.
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert jsonio.validate(doc) is True
    if doc["schema_version"] < SCHEMA_VERSION:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, SCHEMA)  # not the current shape...
        assert jsonio.validate(migrate.upgrade(doc)) is True   # ...until upgraded
    else:
        assert doc["schema_version"] == SCHEMA_VERSION


# -- the model and schema.json list the same objects, fields and types ------------

def _model_classes():
    """Every dataclass reachable from Run or Study (the two documents) through its fields' type hints,
    by name; a study's member run is a Run, already reached."""
    found, todo = {}, [Run, Study]
    while todo:
        cls = todo.pop()
        if cls.__name__ in found:
            continue
        found[cls.__name__] = cls
        for hint in typing.get_type_hints(cls).values():
            todo.extend(t for t in _leaves(hint) if dataclasses.is_dataclass(t))
    return found


def _leaves(hint):
    args = typing.get_args(hint)
    if not args:
        return [hint]
    return [leaf for a in args for leaf in _leaves(a)]


MODEL = _model_classes()
# Objects of the schema that are not result dataclasses: Machine is machine.model's, stored as a
# free-form dict (only the fields other tools read are pinned).
NOT_MODEL = {"Machine"}


def _schema_of(name):
    return SCHEMA if name == "Run" else DEFS[name]


def _json_types(sub, seen=()):
    """The JSON types a schema fragment allows (resolving $ref, oneOf, enum, const)."""
    if "$ref" in sub:
        ref = sub["$ref"].split("/")[-1]
        if ref in MODEL:
            return {ref}
        return _json_types(DEFS[ref])
    if "oneOf" in sub or "anyOf" in sub:
        return set().union(*(_json_types(s) for s in sub.get("oneOf", sub.get("anyOf"))))
    if "enum" in sub or "const" in sub:
        vals = sub.get("enum", [sub.get("const")])
        return {_TYPE_OF_VALUE[type(v)] for v in vals}
    t = sub["type"]
    return set(t) if isinstance(t, list) else {t}


_TYPE_OF_VALUE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _hint_types(hint):
    """The JSON types a field's type hint allows (a dataclass by its name)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        return set().union(*(_hint_types(a) for a in typing.get_args(hint)))
    if origin is list:
        return {"array"}
    if origin is dict:
        return {"object"}
    if dataclasses.is_dataclass(hint):
        return {hint.__name__}
    return {{str: "string", int: "integer", float: "number", bool: "boolean",
             type(None): "null"}[hint]}


# the application section (results/profile*.py, schema 3)
APPLICATION = {
    "Profile", "Spread", "Shares", "PerThread", "FromRecords", "Sampler", "Runnable", "IoTotals", "LoadProcess",
    "CompetingLoad", "IoClass", "FileRecord", "FilesRest", "AsyncIo", "Files", "SignalNote", "SignalOutside",
    "InterposerIo", "Launch", "Skipped", "Interposer", "Wrapped", "Comparison", "QuickCeiling",
    "CallCount", "PeerCount", "MpiRank", "MpiFunction", "MessageSizes", "LifeShare", "FinalizeUnknown", "Mpi",
    "CounterEvent", "Derived", "Counters", "CountersVerdict", "Footprint", "PageSetting", "WorkingSet",
    "PagesResult", "ScalingPoint", "Scaling", "Experiments", "PagesRate", "StreamRate", "Supervisor", "LoaderReads",
    "ExecReads", "Overhead", "OwnTime", "Range", "ExitStatuses", "Uninstrumented", "Region", "CallTimes",
}


# the study document (model.Study, its own study_version)
STUDY = {"Study", "Member", "StudyAnalysis"}


def test_the_model_reaches_the_new_objects():
    assert {"Run", "Metric", "Stats", "Peak", "Finding", "Series", "Node", "Job", "Application",
            "OutputFile", "Analysis", "Verdict", "Roofline", "Roof", "Ridge", "RooflinePoint", "Bound",
            "Uniformity", "Absent", "Capacity", "Figure"} | APPLICATION | STUDY == set(MODEL)


def test_the_application_section_is_closed_everywhere():
    # Strict: from Application down, every object the schema allows lists its properties and
    # refuses others (additionalProperties false), or is a map by name whose values are typed
    # (additionalProperties a schema, never true or absent), so that no figure a report shows
    # can reach the document outside a typed field.
    seen = set()

    def walk(sub, where):
        if isinstance(sub, list):
            for i, x in enumerate(sub):
                walk(x, f"{where}/{i}")
            return
        if not isinstance(sub, dict):
            return
        if "$ref" in sub:
            name = sub["$ref"].split("/")[-1]
            if name not in seen and name in DEFS:
                seen.add(name)
                walk(DEFS[name], f"$defs/{name}")
        if sub.get("type") == "object" or (isinstance(sub.get("type"), list) and "object" in sub["type"]):
            extra = sub.get("additionalProperties", True)
            if "properties" in sub:
                assert extra is False, f"{where}: open object"
            else:
                assert isinstance(extra, dict) and extra, f"{where}: a map without the type of its values"
        for k, v in sub.items():
            if k not in ("$ref", "description"):
                walk(v, f"{where}/{k}")

    walk(DEFS["Application"], "$defs/Application")
    assert {"Profile", "Overhead", "Mpi", "Experiments", "Counters"} <= seen


# Fields added to schema 2 after documents of it were written: always written, optional when read
# (their default means "nothing of the kind"), so a document written before them still reads.
ADDED_LATER = {"Analysis": {"figures"},
               "FileRecord": {"kernel_reads", "kernel_read_bytes", "kernel_writes", "kernel_write_bytes"},
               "InterposerIo": {"exec"}, "StudyAnalysis": {"roofline"}, "Profile": {"regions", "regions_lost"},
               "Application": {"calls"}}


@pytest.mark.parametrize("name", sorted(MODEL))
def test_schema_fields_match_the_model(name):
    # A field added, renamed, retyped or removed in the model must be mirrored in schema.json
    # (and SCHEMA_VERSION bumped, with a migrate step, when old documents no longer fit).
    cls, schema = MODEL[name], _schema_of(name)
    names = [f.name for f in dataclasses.fields(cls)]
    assert list(schema["properties"]) == names            # same fields, in the order asdict writes
    # asdict always writes every field; a field added to this version later is optional when read
    assert set(schema["required"]) == set(names) - ADDED_LATER.get(name, set())
    assert schema["additionalProperties"] is False
    hints = typing.get_type_hints(cls)
    for f in names:
        _same_types(hints[f], schema["properties"][f], f"{name}.{f}")


def _same_types(hint, sub, where):
    allowed = _json_types(sub)
    if "Run" in _hint_types(hint):
        # a study's member run is a run document of its own schema_version (an older one is upgraded
        # when read), checked as a run file is, not by the study's schema: an object there
        assert "Run" not in allowed and "object" in allowed, where
        allowed = allowed - {"object"} | {"Run"}
    # JSON has no int/float distinction the model relies on: a float field may hold an integer
    # (json.loads gives int for "1"), so "number" in the model admits "integer" in the schema.
    want = _hint_types(hint)
    if "number" in want:
        allowed.discard("integer")
    if want == {"number"}:
        allowed.discard("null")           # a float that was not finite is written as null (base.plain)
    assert allowed == want, f"{where}: schema allows {sorted(allowed)}, model has {sorted(want)}"
    if typing.get_origin(hint) is list:   # and what the list holds
        (item,) = typing.get_args(hint)
        _same_types(item, sub["items"], f"{where}[]")


def test_every_schema_object_is_a_model_class():
    objects = {n for n, d in DEFS.items() if d.get("type") == "object"}
    assert objects - NOT_MODEL == set(MODEL) - {"Run"}


def test_every_object_of_the_schema_is_closed():
    # additionalProperties false on every object with listed properties, nested ones too
    # (Verdict.unknown, Uniformity.outliers), except the free-form dicts and Machine.
    def walk(sub, where):
        if isinstance(sub, dict):
            if sub.get("type") == "object" and "properties" in sub and where not in OPEN:
                assert sub.get("additionalProperties") is False, where
            for k, v in sub.items():
                walk(v, f"{where}/{k}")
        elif isinstance(sub, list):
            for i, v in enumerate(sub):
                walk(v, f"{where}/{i}")
    walk(SCHEMA, "")


# Objects with documented keys that stay open: machine facts.
OPEN = {"/$defs/Machine"}


def test_pinned_machine_fields_exist_in_the_model():
    names = {f.name for f in dataclasses.fields(Machine)}
    assert set(DEFS["Machine"]["properties"]) <= names


def test_enums_match_the_model():
    assert set(DEFS["Metric"]["properties"]["better"]["enum"]) == {HIGHER, LOWER}
    assert set(DEFS["Uniformity"]["properties"]["better"]["enum"]) == {HIGHER, LOWER}
    assert set(DEFS["Finding"]["properties"]["status"]["enum"]) == set(STATUSES)
    assert set(DEFS["Series"]["properties"]["kind"]["enum"]) == {"xy", "matrix"}
    assert DEFS["Verdict"]["properties"]["kind"]["enum"] == list(VERDICT_KINDS)
    assert DEFS["Roof"]["properties"]["kind"]["enum"] == list(ROOF_KINDS)
    assert DEFS["Bound"]["properties"]["bound"]["enum"] == list(BOUND_KINDS)
    assert DEFS["Study"]["properties"]["kind"]["enum"] == list(STUDY_KINDS)
    assert DEFS["Study"]["properties"]["study_version"]["const"] == STUDY_VERSION


def _properties(schema, where="$"):
    for name, sub in schema.get("properties", {}).items():
        yield f"{where}.{name}", sub
    for name, sub in schema.get("$defs", {}).items():
        yield from _properties(sub, f"{where}.$defs.{name}")


@pytest.mark.parametrize("schema", [SCHEMA, SCHEMA_V1], ids=["current", "v1"])
def test_every_field_has_a_one_line_description(schema):
    for where, sub in _properties(schema):
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


def _golden_doc(name="run_v3.json"):
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


BREAKS = [
    ("extra field in a metric", lambda d: d["metrics"][0].update(bandwidth_gbs=1.0)),
    ("extra top-level field", lambda d: d.update(ranks=[])),
    ("better not an enum value", lambda d: d["metrics"][0].update(better="up")),
    ("status not an enum value", lambda d: d["findings"][0].update(status="error")),
    ("kind not an enum value", lambda d: d["series"][0].update(kind="table")),
    ("missing unit", lambda d: d["metrics"][0].pop("unit")),
    ("missing partial", lambda d: d.pop("partial")),
    ("value as text", lambda d: d["metrics"][0].update(value="3.5")),
    ("zero repetitions", lambda d: d["metrics"][0]["stats"].update(n=0)),
    ("stats field renamed", lambda d: d["metrics"][0]["stats"].update(stddev=d["metrics"][0]["stats"].pop("stdev"))),
    ("newer schema", lambda d: d.update(schema_version=SCHEMA_VERSION + 1)),
    ("older schema", lambda d: d.update(schema_version=SCHEMA_VERSION - 1)),
    ("peak without provenance", lambda d: d["metrics"][0]["peak"].pop("provenance")),
    ("machine peak malformed", lambda d: d["machine"]["peaks"]["membw.node"].update(value="fast")),
    ("started not ISO 8601", lambda d: d.update(started="yesterday")),
    ("empty name segment", lambda d: d["metrics"][0].update(name="stream..triad")),
    ("matrix row not a list", lambda d: d["series"][1]["matrix"].append(1.0)),
    ("negative efficiency", lambda d: d["metrics"][0].update(efficiency=-0.5)),
    # v2
    ("metric node not text", lambda d: d["metrics"][0].update(node=None)),
    ("finding data not an object", lambda d: d["findings"][0].update(data=[1, 2])),
    ("missing series node", lambda d: d["series"][0].pop("node")),
    ("extra field in a node", lambda d: d["nodes"][0].update(rank=0)),
    ("node without a name", lambda d: d["nodes"][0].update(name="")),
    ("node machine malformed", lambda d: d["nodes"][1]["machine"].update(cores="four")),
    ("job of zero ranks", lambda d: d["job"].update(ranks=0)),
    ("job ranks as text", lambda d: d["job"].update(ranks="8")),
    ("missing job node_names", lambda d: d["job"].pop("node_names")),
    ("application exit status as text", lambda d: d["application"].update(exit_status="0")),
    ("negative wall time", lambda d: d["application"].update(wall_s=-1.0)),
    ("application started not ISO 8601", lambda d: d["application"].update(started="11:00")),
    ("overhead not a number", lambda d: d["application"]["overhead"].update(fraction="1%")),
    ("extra field in a file", lambda d: d["application"]["files"][0].update(mode=0o644)),
    ("negative file size", lambda d: d["application"]["files"][0].update(bytes=-1)),
    ("analysis missing notes", lambda d: d["analysis"].pop("notes")),
    ("extra field in analysis", lambda d: d["analysis"].update(score=1)),
    ("verdict kind not an enum value", lambda d: d["analysis"]["verdict"].update(kind="slow")),
    ("verdict unknown entry extra key", lambda d: d["analysis"]["verdict"]["unknown"][0].update(hint="x")),
    ("verdict unknown entry without reason", lambda d: d["analysis"]["verdict"]["unknown"][0].pop("reason")),
    ("verdict peak malformed", lambda d: d["analysis"]["verdict"]["peak"].pop("unit")),
    ("roof kind not an enum value", lambda d: d["analysis"]["roofline"]["roofs"][0].update(kind="latency")),
    ("roof unit not normalised", lambda d: d["analysis"]["roofline"]["roofs"][0].update(unit="Tflop/s")),
    ("roof value unknown", lambda d: d["analysis"]["roofline"]["roofs"][0].update(value=None)),
    ("ridge without intensity", lambda d: d["analysis"]["roofline"]["ridges"][0].pop("intensity")),
    ("roofline point extra key", lambda d: d["analysis"]["roofline"]["points"][0].update(rank=0)),
    ("bound not an enum value", lambda d: d["analysis"]["bounds"][0].update(bound="cache")),
    ("bound share above one", lambda d: d["analysis"]["bounds"][0].update(share=1.5)),
    ("uniformity value as text", lambda d: d["analysis"]["uniformity"][0]["values"].update(cn101="81.5")),
    ("negative spread", lambda d: d["analysis"]["uniformity"][0].update(spread=-0.1)),
    ("outlier extra key", lambda d: d["analysis"]["uniformity"][0]["outliers"][0].update(rank=3)),
    ("outlier without node", lambda d: d["analysis"]["uniformity"][0]["outliers"][0].pop("node")),
]


@pytest.mark.parametrize("what,change", BREAKS, ids=[b[0] for b in BREAKS])
def test_breaking_changes_are_caught(what, change):
    doc = _golden_doc()
    jsonio.validate(doc)
    bad = copy.deepcopy(doc)
    change(bad)
    with pytest.raises(StoreError, match="invalid run document at"):
        jsonio.validate(bad)


PROFILE = "run_v3_profile.json"       # a real `ceiling profile` of an MPI program, upgraded from schema 2
PROFILE_BREAKS = [
    ("extra key in the profile", lambda p: p.update(score=1)),
    ("extra key in a rank", lambda p: p["mpi"]["per_rank"][0].update(colour="red")),
    ("extra key in an I/O class", lambda p: p["io_calls"]["read"].update(mb=1.0)),
    ("extra key in a file", lambda p: p["files"]["shown"][0].update(inode=12)),
    ("extra key in a counter event", lambda p: p["counters"]["events"]["cycles"].update(hint="x")),
    ("extra key in a comparison", lambda p: p["ceilings"][0].update(verdict="slow")),
    ("extra key in the launch", lambda p: p["launch"].update(pid=1)),
    ("share as text", lambda p: p["shares"].update(on_cpu="43%")),
    ("threads as text", lambda p: p.update(threads="2")),
    ("missing split key", lambda p: p["shares"].pop("runq")),
    ("an I/O class not a record", lambda p: p["io_calls"].update(read=138)),
    ("a rank's groups as text", lambda p: p["mpi"]["per_rank"][0]["groups"].update(p2p="0.18")),
    ("a message histogram of text", lambda p: p["mpi"]["hist"]["p2p"].update(hist=["8000"])),
    ("the split untyped again", lambda p: p.update(per_thread=[0.4, 0.5])),
]


@pytest.mark.parametrize("what,change", PROFILE_BREAKS, ids=[b[0] for b in PROFILE_BREAKS])
def test_breaking_changes_in_the_application_section_are_caught(what, change):
    doc = _golden_doc(PROFILE)
    jsonio.validate(doc)
    change(doc["application"]["profile"])
    with pytest.raises(StoreError, match="invalid run document at application/profile"):
        jsonio.validate(doc)
    with pytest.raises(StoreError, match=r"is not a valid ceiling run: application\.profile"):
        jsonio.from_doc(doc, "x.json")          # and the reader, without jsonschema, refuses it too


def test_overhead_is_closed_too():
    doc = _golden_doc(PROFILE)
    doc["application"]["overhead"]["ceiling"]["colour"] = "red"
    with pytest.raises(StoreError, match="invalid run document at application/overhead/ceiling"):
        jsonio.validate(doc)


V1_BREAKS = [
    ("a v2 field in a v1 metric", lambda d: d["metrics"][0].update(node="cn042")),
    ("a v2 field in a v1 run", lambda d: d.update(nodes=[])),
    ("extra field in a metric", lambda d: d["metrics"][0].update(bandwidth_gbs=1.0)),
    ("missing unit", lambda d: d["metrics"][0].pop("unit")),
]


@pytest.mark.parametrize("what,change", V1_BREAKS, ids=[b[0] for b in V1_BREAKS])
def test_v1_documents_are_still_checked_against_v1(what, change):
    doc = _golden_doc("run_v1.json")
    jsonio.validate(doc)
    bad = copy.deepcopy(doc)
    change(bad)
    with pytest.raises(StoreError, match="invalid run document at"):
        jsonio.validate(bad)


def test_validate_is_skipped_without_jsonschema(monkeypatch):
    monkeypatch.setitem(sys.modules, "jsonschema", None)     # import now raises ImportError
    assert jsonio.validate({"not": "a run"}) is False
