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
    d = doc("run_v2.json")
    assert migrate.upgrade(d) is d


def test_newer_documents_are_refused():
    d = doc("run_v2.json")
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
    with pytest.raises(DocumentError, match=r"^schema_version: 1 is not 2: upgrade the document first"):
        Run.from_dict(doc("run_v1.json"))


def test_a_v1_document_with_a_v2_key_is_not_silently_accepted():
    # v1 had no node: whoever wrote it was not ceiling v1, and the step must not hide it.
    d = doc("run_v1.json")
    d["metrics"][0]["colour"] = "red"
    with pytest.raises(StoreError, match=r"x.json is not a valid ceiling run: metrics\[0\].colour: unknown key"):
        jsonio.from_doc(d, source="x.json")
