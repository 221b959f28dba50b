"""results.doccheck reads schema.json as jsonschema does: the same documents pass and fail.

doccheck is what refuses a damaged run when it is read (jsonschema is a test dependency
only); here every kind of value of a golden document is set to values of other types
and ranges, and both checkers must agree on each."""
from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from ceiling.results import doccheck, jsonio
from test_report_values import BASES, groups, mutated

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = jsonio.schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
CHECKER = doccheck.Checker(SCHEMA)


def _keywords(schema, out):
    """Every keyword schema.json uses (the names under properties and $defs are not keywords)."""
    if isinstance(schema, dict):
        for k, v in schema.items():
            out.add(k)
            if k in ("properties", "$defs"):
                for sub in v.values():
                    _keywords(sub, out)
            elif k in ("items", "additionalProperties"):
                _keywords(v, out)
            elif k == "oneOf":
                for sub in v:
                    _keywords(sub, out)
    return out


def test_schema_uses_only_keywords_doccheck_reads():
    assert _keywords(SCHEMA, set()) <= doccheck.SUPPORTED | doccheck.ANNOTATIONS


# The application section alone, as jsonschema reads it: a profile document changed only there is
# valid when that section is (the rest is the unchanged golden run's, valid: checked first), and
# jsonschema's time grows with the document it reads (10-40 ms a whole profile document).
APPLICATION = jsonschema.Draft202012Validator(dict(SCHEMA["properties"]["application"], **{"$defs": SCHEMA["$defs"]}))


def _agree(text: str, part: str = "") -> bool:
    doc = json.loads(text)
    try:
        CHECKER.check(doc)
        ours = True
    except doccheck.Problem:
        ours = False
    theirs = APPLICATION.is_valid(doc["application"]) if part == "application" else VALIDATOR.is_valid(doc)
    assert ours == theirs, text[:200]
    # check's first pass (the compiled yes-or-no) alone agrees too: a yes there that the walk
    # would refuse would let a bad document through unread
    assert CHECKER.fits(doc) == ours, text[:200]
    return ours


def _one_of_each(v):
    """``v`` with every list of objects cut to its first: each kind of value once, in half the
    profile's size (jsonschema's time grows with it)."""
    if isinstance(v, dict):
        return {k: _one_of_each(x) for k, x in v.items()}
    if isinstance(v, list) and v and isinstance(v[0], dict):
        return [_one_of_each(v[0])]
    return v


def _agree_all(texts):
    return [_agree(*t) for t in texts]


@pytest.mark.slow      # every kind of value through both checkers: 15-25 s a document, in two shards
@pytest.mark.parametrize("shard", range(2))
@pytest.mark.parametrize("base", ["golden_v3", "profile_v3"])
def test_both_checkers_agree_on_every_kind_of_value(base, shard):
    doc = BASES[base] if base != "profile_v3" else _one_of_each(BASES[base])
    # the profile's document: its application section (the rest is golden_v3's)
    part = (lambda kind: kind[0] == "application") if base == "profile_v3" else (lambda kind: True)
    where = "application" if base == "profile_v3" else ""
    assert VALIDATOR.is_valid(doc) and CHECKER.fits(doc)
    texts = []
    numbers = groups(doc)
    for kind, paths in numbers.items():
        for v in (-1, 0.5, 1e308, "abc", None, True, {}) if part(kind) else ():
            texts.append((mutated(doc, [(p, v) for p in paths]), where))
    for kind, paths in groups(doc, numbers_only=False).items():
        if kind not in numbers and part(kind):
            for v in (0, "", None):
                texts.append((mutated(doc, [(p, v) for p in paths]), where))
    for key in ("metrics", "findings", "series", "analysis", "machine", "job"):
        for v in (None, [], {}, "x"):
            texts.append((json.dumps(dict(doc, **{key: v})), ""))
    texts = texts[shard::2]         # each shard has valid and invalid documents (asserted below)
    # jsonschema takes 10-40 ms a document: the documents are shared among the CPUs there are,
    # as test_report_values does (a disagreement fails the test with its document all the same)
    # a worker of make test's parallel pass (pytest-xdist) runs its share in-process: the pass spreads
    # the tests over the CPUs already, and a fork pool inside its worker breaks the worker's channel
    workers = 1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(4, len(os.sched_getaffinity(0))))
    shares = [texts[k::workers] for k in range(workers)]
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        verdicts = set(_agree_all(texts))
    else:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            verdicts = {v for part in pool.map(_agree_all, shares) for v in part}
    assert verdicts == {True, False}


def test_unknown_and_missing_keys_are_refused_with_their_path():
    doc = json.loads(json.dumps(BASES["golden_v3"]))
    doc["metrics"][1]["colour"] = "red"
    with pytest.raises(doccheck.Problem, match=r"^metrics\[1\]\.colour: unknown key$"):
        CHECKER.check(doc)
    del doc["metrics"][1]["colour"]
    del doc["metrics"][1]["unit"]
    with pytest.raises(doccheck.Problem, match=r"^metrics\[1\]\.unit: missing key$"):
        CHECKER.check(doc)


def test_a_number_must_be_finite():
    doc = json.loads(json.dumps(BASES["golden_v3"]))
    doc["metrics"][0]["value"] = float("inf")
    with pytest.raises(doccheck.Problem, match="inf is not a number or null"):
        CHECKER.check(doc)


def test_depth_is_measured_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert "nested deeper than 64 levels" in doccheck.depth_problem({"x": deep})
    assert doccheck.depth_problem(BASES["golden_v2"]) is None
