"""The model's strict reader: every object refuses keys it does not have, naming their path."""
import dataclasses
import json
import sqlite3
import typing
from pathlib import Path

import pytest

from ceiling.errors import StoreError
from ceiling.results import jsonio, migrate
from ceiling.results.model import (Analysis, Application, Bound, DocumentError, Finding, Job, Metric, Node,
                                   OutputFile, Peak, Roofline, Run, Series, Stats, Uniformity, Verdict)
from ceiling.results.profile_cost import Overhead
from ceiling.results.store import Store

GOLDEN = Path(__file__).parent / "golden"


def golden_doc(name="run_v3.json"):
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def _objects(cls, value, path=""):
    """(path, class, dict) of every dataclass object inside a document value of type ``cls``."""
    if dataclasses.is_dataclass(cls):
        yield path, cls, value
        hints = typing.get_type_hints(cls)
        for k, v in value.items():
            yield from _objects(hints[k], v, f"{path}.{k}" if path else k)
        return
    origin = typing.get_origin(cls)
    if origin is typing.Union:
        if value is not None:
            (inner,) = [a for a in typing.get_args(cls) if a is not type(None)]
            yield from _objects(inner, value, path)
    elif origin is list:
        (item,) = typing.get_args(cls)
        for i, v in enumerate(value):
            yield from _objects(item, v, f"{path}[{i}]")
    elif origin is dict:
        (_, item) = typing.get_args(cls)
        for k, v in value.items():
            yield from _objects(item, v, f"{path}.{k}")


PROFILE = "run_v3_profile.json"       # a program's profile: the application section's records
MEMBER = "run_v3_scale_member.json"   # a profiled point of a scaling study: its calls' and regions' times


def _in_profile(path):
    return path.startswith(("application.profile", "application.overhead."))


def _in_member(path):
    return path.startswith("application.calls")


# a run of two nodes, the records of a profile, and those of a scaling study's profiled point
OBJECTS = (list(_objects(Run, golden_doc())) + [o for o in _objects(Run, golden_doc(PROFILE)) if _in_profile(o[0])]
           + [o for o in _objects(Run, golden_doc(MEMBER)) if _in_member(o[0])])


def _doc_for(path):
    return golden_doc(PROFILE if _in_profile(path) else MEMBER if _in_member(path) else "run_v3.json")


def _classes(hint):
    """Every dataclass a type hint can hold, and those their fields can hold."""
    if dataclasses.is_dataclass(hint):
        found = {hint}
        for h in typing.get_type_hints(hint).values():
            found |= _classes(h)
        return found
    return set().union(*(_classes(a) for a in typing.get_args(hint)))


def test_the_golden_files_hold_every_kind_of_object():
    # the application section's records: those a profile of an MPI program holds (the others,
    # --experiments' and --overhead's, are read by tests/test_results_migrate.py's v2 profiles)
    from ceiling.results import profile
    section = _classes(profile.Profile) | _classes(Overhead)
    assert {cls for _, cls, _ in OBJECTS} - section == _classes(Run) - section
    assert len(_classes(Run) - section) == 22
    assert {"Profile", "Mpi", "MpiRank", "Files", "FileRecord", "Counters", "Overhead", "OwnTime"} <= \
        {cls.__name__ for _, cls, _ in OBJECTS}


def _at(doc, path):
    """The dict at ``path`` ("metrics[3].peak") inside ``doc``."""
    import re
    cur = doc
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        cur = cur[name] if name else cur[int(index)]
    return cur


@pytest.mark.parametrize("path", [p for p, _, _ in OBJECTS], ids=lambda p: p or "(top)")
def test_an_unknown_key_is_refused_where_it_is(path):
    d = _doc_for(path)
    _at(d, path)["colour"] = "red"
    where = f"{path}.colour" if path else "colour"
    with pytest.raises(DocumentError) as e:
        Run.from_dict(d)
    assert str(e.value) == f"{where}: unknown key" and e.value.path == where
    assert isinstance(e.value, ValueError)
    with pytest.raises(StoreError, match=rf"^x\.json is not a valid ceiling run: {_re(where)}: unknown key$"):
        jsonio.loads(json.dumps(d), source="x.json")


def _re(s):
    import re
    return re.escape(s)


@pytest.mark.parametrize("path,cls", [(p, c) for p, c, _ in OBJECTS
                                      if any(f.default is dataclasses.MISSING and f.default_factory is
                                             dataclasses.MISSING for f in dataclasses.fields(c))],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_a_missing_required_key_is_named(path, cls):
    first = next(f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                 and f.default_factory is dataclasses.MISSING)
    d = _doc_for(path)
    del _at(d, path)[first]
    where = f"{path}.{first}" if path else first
    with pytest.raises(DocumentError, match=rf"^{_re(where)}: missing key$"):
        Run.from_dict(d)


def test_free_form_dicts_take_any_key():
    d = golden_doc()
    d["metrics"][0]["context"]["colour"] = "red"
    d["findings"][0]["data"]["colour"] = "red"
    d["analysis"]["bounds"][0]["data"]["colour"] = "red"
    d["nodes"][0]["environment"]["colour"] = "red"
    d["nodes"][0]["machine"]["colour"] = "red"
    run = Run.from_dict(d)
    assert run.findings[0].data["colour"] == run.nodes[0].machine["colour"] == "red"


@pytest.mark.parametrize("path,value,problem", [
    ("metrics[0]", [1], "expected an object, not list"),
    ("analysis", "none", "expected an object, not str"),
    ("metrics", {"a": 1}, "expected a list, not dict"),
    ("application.files", "trace.json", "expected a list, not str"),
])
def test_an_object_of_the_wrong_shape_is_named(path, value, problem):
    d = golden_doc()
    parent, _, key = path.rpartition(".")
    if "[" in key:
        key, idx = key.rstrip("]").split("[")
        _at(d, ".".join(filter(None, [parent, key])))[int(idx)] = value
    else:
        _at(d, parent)[key] = value
    with pytest.raises(DocumentError, match=rf"^{_re(path)}: {problem}$"):
        Run.from_dict(d)


def test_every_object_reads_itself():
    for path, cls, value in OBJECTS:
        obj = cls.from_dict(value)
        assert isinstance(obj, cls) and obj.to_dict() == value, path
    with pytest.raises(DocumentError, match=r"^\(top\): expected an object, not list$"):
        Stats.from_dict([1])
    with pytest.raises(DocumentError, match=r"^peak.colour: unknown key$"):
        Verdict.from_dict({"kind": "no_peak", "peak": {"value": None, "unit": "", "provenance": "",
                                                         "colour": 1}})


def test_the_store_names_the_run_of_a_bad_document(tmp_path):
    p = tmp_path / "h.db"
    with Store(p) as s:
        s.save(jsonio.load(GOLDEN / "run_v2.json"))
    d = golden_doc()
    d["job"]["colour"] = "red"
    db = sqlite3.connect(p)
    db.execute("UPDATE runs SET doc = ?", (json.dumps(d),))
    db.commit()
    db.close()
    with Store(p) as s:
        with pytest.raises(StoreError, match=rf"^run {d['run_id']} in {_re(str(p))} is not a valid ceiling run: "
                                             r"job.colour: unknown key$"):
            s.get(d["run_id"])


# -- construction stays as before; the new fields have "one node, nothing more" defaults --

def test_existing_constructors_keep_their_positions_and_defaults():
    m = Metric("stream.copy", None, "GB/s")
    assert (m.node, m.better, m.valid) == ("", "higher", True)
    f = Finding("x.y", "ok", "t", "e", "w", "f", True)
    assert (f.needs_root, f.node, f.data) == (True, "", {})
    s = Series("a.b", "xy", "title")
    assert s.node == "" and s.title == "title"
    r = Run("0.1.0", "h", "2025-01-01T00:00:00Z", ["ceiling"])
    assert (r.nodes, r.job, r.application, r.analysis) == ([], None, None, Analysis())
    assert r.analysis.empty and r.node_names() == ["h"]


def test_analysis_empty_is_false_once_anything_is_stored():
    assert Analysis().empty
    for a in (Analysis(verdict=Verdict("no_verdict")), Analysis(notes=["x"]), Analysis(roofline=Roofline()),
              Analysis(bounds=[Bound("application", "unknown")]), Analysis(uniformity=[Uniformity("a.b", "ns")]),
              Analysis(bounds=[], uniformity=[], notes=[])):
        assert a.empty == (a == Analysis())


def test_node_helpers_of_a_multi_node_run():
    run = Run("0.1.0", "n1", "2025-01-01T00:00:00Z", ["ceiling"], machine={"hostname": "n1"},
              nodes=[Node("n1", {"hostname": "n1", "cores": 4}), Node("n2", {"hostname": "n2"})],
              job=Job("srun", "Open MPI 5.0.3", 2, 2, 1, ["n1", "n2"]),
              metrics=[Metric("a.b", 1.0, "GB/s"), Metric("a.b", 2.0, "GB/s", node="n2"),
                       Metric("a.b", 3.0, "GB/s", node="n1")])
    assert run.node_names() == ["n1", "n2"]
    # A node listed in nodes wins over the run's own machine (which may hold less).
    assert run.machine_of("n1") == {"hostname": "n1", "cores": 4} == run.machine_of("")
    assert run.machine_of("n2") == {"hostname": "n2"}
    assert [m.value for m in run.metrics_of("n1")] == [1.0, 3.0] == [m.value for m in run.metrics_of("")]
    assert [m.value for m in run.metrics_of("n2")] == [2.0]
    assert run.metrics_of("n3") == []
    with pytest.raises(KeyError):
        run.machine_of("n3")


def test_new_objects_round_trip_through_json():
    app = Application(["./a.out"], exit_status=None, signal="SIGKILL", wall_s=1.5,
                      started="2025-01-01T00:00:00Z", overhead=Overhead(per_call_ns=40.0),
                      files=[OutputFile("t.json", "trace-perfetto")])
    run = Run("0.1.0", "h", "2025-01-01T00:00:00Z", ["ceiling"], application=app,
              analysis=Analysis(verdict=Verdict("unknown_peaks", peak=Peak(None, "GB/s", "no DIMM data"),
                                                unknown=[{"metric": "stream.triad", "reason": "no DIMM data"}])))
    assert jsonio.loads(jsonio.dumps(run)) == run
    jsonio.validate(run)


def _default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def test_the_v2_golden_file_sets_every_field_added_in_v2():
    # A golden file full of defaults would not pin what a new field looks like when written.
    from importlib.resources import files
    v1 = json.loads(files("ceiling.results").joinpath("schema_v1.json").read_text(encoding="utf-8"))
    v1_fields = {"Run": set(v1["properties"])}
    v1_fields.update({name: set(d.get("properties", {})) for name, d in v1["$defs"].items()})
    v2 = json.loads(files("ceiling.results").joinpath("schema_v2.json").read_text(encoding="utf-8"))
    v2_fields = {"Run": set(v2["properties"])}
    v2_fields.update({name: set(d.get("properties", {})) for name, d in v2["$defs"].items()})
    added = {(c.__name__, f.name) for c in _classes(Run) for f in dataclasses.fields(c)
             if f.name not in v1_fields.get(c.__name__, set()) and f.name in v2_fields.get(c.__name__, set())}
    assert ("Metric", "node") in added and ("Analysis", "verdict") in added
    every = [o for name in ("run_v2.json", "run_v2_partial.json")
             for o in _objects(Run, migrate.upgrade(golden_doc(name)))]
    set_somewhere = {(cls.__name__, k) for _, cls, value in every for f in dataclasses.fields(cls)
                     for k in [f.name] if value[k] not in (_default(f), None, "", [], {})}
    assert added - set_somewhere == set()
