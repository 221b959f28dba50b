"""migrate.upgrade: older documents step up to the current version; newer ones are refused."""
import copy
import json
from pathlib import Path

import pytest

from ceiling.errors import StoreError
from ceiling.results import jsonio, migrate
from ceiling.results.model import SCHEMA_VERSION, DocumentError, Run

GOLDEN = Path(__file__).parent / "golden"
V1 = ["run_v1.json", "run_v1_partial.json"]


def doc(name):
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def test_every_older_version_has_a_step():
    assert sorted(migrate._STEPS) == list(range(1, SCHEMA_VERSION))


@pytest.mark.parametrize("name", V1)
def test_v1_to_current_keeps_everything_and_adds_the_defaults(name):
    old = doc(name)
    before = copy.deepcopy(old)
    new = migrate.upgrade(old)
    assert old == before                                   # the input is not changed
    assert new["schema_version"] == SCHEMA_VERSION
    # Every v1 value survives as it was; only keys are added.
    for k, v in old.items():
        if k not in ("schema_version", "metrics", "findings", "series"):
            assert new[k] == v, k
    for part, added in (("metrics", {"node": ""}), ("findings", {"node": "", "data": {}}),
                        ("series", {"node": ""})):
        assert new[part] == [dict(x, **added) for x in old[part]]
    assert new["nodes"] == [] and new["job"] is None and new["application"] is None
    assert new["analysis"] == {"verdict": None, "roofline": None, "bounds": [], "uniformity": [], "notes": [],
                               "absent": [], "capacities": []}
    assert set(new) == set(Run.__dataclass_fields__)
    jsonio.validate(new)
    # what the analysis layer looks for to compute it at render time
    assert Run.from_dict(new).analysis.empty


def test_current_documents_pass_through():
    d = doc("run_v3.json")
    assert migrate.upgrade(d) is d


def test_newer_documents_are_refused():
    d = doc("run_v3.json")
    d["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(migrate.NewerSchemaError,
                       match=rf"^written by a newer ceiling \(schema {SCHEMA_VERSION + 1}\); "
                             rf"this one reads up to {SCHEMA_VERSION}$"):
        migrate.upgrade(d)


@pytest.mark.parametrize("bad,message", [
    ([1], "no schema_version"), ({}, "no schema_version"), ({"schema_version": "2"}, "invalid schema_version '2'"),
    ({"schema_version": 0}, "invalid schema_version 0"), ({"schema_version": True}, "invalid schema_version True"),
])
def test_documents_without_a_valid_version_are_refused(bad, message):
    with pytest.raises(migrate.MigrationError, match=message):
        migrate.upgrade(bad)


def test_from_dict_refuses_an_old_document_that_was_not_upgraded():
    # Read as it is, a v1 document would become a "version 1" Run with v2 fields.
    with pytest.raises(DocumentError, match=rf"^schema_version: 1 is not {SCHEMA_VERSION}: upgrade the document first"):
        Run.from_dict(doc("run_v1.json"))


def test_a_v1_document_with_a_v2_key_is_not_silently_accepted():
    # v1 had no node: whoever wrote it was not ceiling v1, and the step must not hide it.
    d = doc("run_v1.json")
    d["metrics"][0]["colour"] = "red"
    with pytest.raises(StoreError, match=r"x.json is not a valid ceiling run: metrics\[0\].colour: unknown key"):
        jsonio.from_doc(d, source="x.json")


V2_PROFILES = ["run_v2_profile_mpi.json", "run_v2_profile_experiments.json"]


@pytest.mark.parametrize("name", V2_PROFILES)
def test_v2_profile_moves_into_the_typed_section(name):
    # Real `ceiling profile` documents of schema 2 (an MPI program; --experiments --overhead):
    # their untyped environment["profile"] becomes application.profile, every key typed.
    old = doc(name)
    before = copy.deepcopy(old)
    new = migrate.upgrade(old)
    assert old == before
    assert new["schema_version"] == SCHEMA_VERSION
    assert "profile" not in new["environment"] and "v2_unread" not in new["environment"]
    prof, was = new["application"]["profile"], old["environment"]["profile"]
    for key, value in was.items():                      # every value survives, under its own key
        if key == "files":
            value = {("async_io" if k == "async" else k): v for k, v in value.items()}
        assert _subset(value, prof[key]), key
    assert _subset(old["application"]["overhead"], new["application"]["overhead"])
    jsonio.validate(new)
    run = Run.from_dict(new)
    assert run.application.profile.threads == was["threads"]
    assert run.environment == {k: v for k, v in old["environment"].items() if k != "profile"}


def _subset(old, new):
    """Whether ``new`` holds every value of ``old`` (a record adds its other fields, with their defaults; a
    spread over nothing, {}, is null)."""
    if isinstance(old, dict):
        if not old:
            return new in ({}, None)
        return isinstance(new, dict) and all(k in new and _subset(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(_subset(a, b) for a, b in zip(old, new))
    return old == new


def test_v2_keys_the_types_lack_are_kept_not_dropped():
    # A key an older ceiling wrote that no field has: kept, untyped, beside the typed section.
    old = doc("run_v2_profile_mpi.json")
    old["environment"]["profile"]["legacy_score"] = 7
    old["environment"]["profile"]["mpi"]["per_rank"][1]["colour"] = "red"
    old["application"]["overhead"]["old_key"] = "x"
    new = migrate.upgrade(old)
    unread = {"profile": {"legacy_score": 7, "mpi": {"per_rank": {"1": {"colour": "red"}}}},
              "overhead": {"old_key": "x"}}
    assert new["environment"]["v2_unread"] == unread
    assert "colour" not in new["application"]["profile"]["mpi"]["per_rank"][1]
    jsonio.validate(new)


def test_v2_overhead_not_measured_is_null():
    old = doc("run_v2.json")
    old["application"]["overhead"] = {}
    new = migrate.upgrade(old)
    assert new["application"]["overhead"] is None and new["application"]["profile"] is None
    assert migrate.upgrade(doc("run_v2.json"))["application"]["overhead"]["per_call_ns"] == 85.0
