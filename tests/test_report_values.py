"""Any value a stored run can hold is either refused when the run is read (one line, a
CeilingError) or shown: the analysis, the terminal report, the summary, the JSON and
the HTML page are made without an exception, no plot coordinate is NaN or infinite,
and what is written can be read back.

A stored run is a JSON file given to ``ceiling show`` or a history row (both read by
results.jsonio.loads). Its figures are mutated here to what files in the wild hold:
0, negatives, denormals, 1e308, NaN and infinities (Python's json writes them), huge
integers, strings, null, true, lists and objects where a number goes.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import re
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from ceiling.analysis.analyse import analyse, ensure
from ceiling.errors import CeilingError
from ceiling.report import html, terminal, terminal_profile
from ceiling.results import jsonio
from reporting import analysed
from sample_runs import vm_run

GOLDEN = Path(__file__).resolve().parent / "golden"

HUGE = "@@HUGE@@"          # replaced by a 5000-digit integer in the text (Python cannot print one)
BAD: Tuple[Any, ...] = (0, -1, -0.0, 0.5, 1e-320, 1e308, -1e308, float("nan"), float("inf"), float("-inf"),
                        2 ** 63, 10 ** 300, 10 ** 400, HUGE, "abc", "", None, True, [], {})
# The same, shorter, for the fast suite (NaN and infinities read as null) and for where a string goes.
KEY_VALUES = (0, -1, 1e-320, 1e308, "abc", None)
FOR_STRINGS = (0, 1e308, None, True, [], {})

BASES: Dict[str, Any] = {
    "golden_v2": json.loads((GOLDEN / "run_v2.json").read_text()),     # two nodes, stored analysis
    "golden_v1": json.loads((GOLDEN / "run_v1.json").read_text()),     # analysed when read
    "golden_v3": json.loads((GOLDEN / "run_v3.json").read_text()),     # two nodes, as this ceiling writes them
    "profile_v3": json.loads((GOLDEN / "run_v3_profile.json").read_text()),   # a program's typed profile
    "vm": jsonio.to_doc(analysed(vm_run())),                           # every kind of plot
}


def leaves(doc: Any, numbers_only: bool = True, path: Tuple = ()) -> List[Tuple]:
    """Paths of the numeric leaves (and, unless numbers_only, the strings) of a document."""
    out: List[Tuple] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += leaves(v, numbers_only, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += leaves(v, numbers_only, path + (i,))
    elif (isinstance(doc, (int, float)) and not isinstance(doc, bool)) or (not numbers_only and isinstance(doc, str)):
        if path != ("schema_version",):
            out.append(path)
    return out


def groups(doc: Any, numbers_only: bool = True) -> Dict[Tuple, List[Tuple]]:
    """The leaves by kind: their paths with every list index as '*' (all metric values, ...)."""
    out: Dict[Tuple, List[Tuple]] = {}
    for p in leaves(doc, numbers_only):
        out.setdefault(tuple("*" if isinstance(x, int) else x for x in p), []).append(p)
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def mutated(doc: Any, changes) -> str:
    """The JSON text of ``doc`` with each (path, value) set (``doc`` is left as it was: the
    lists and dicts on the paths are copied, the rest shared)."""
    doc = copy.copy(doc)
    copied = {(): doc}
    for path, value in changes:
        at = doc
        for i, p in enumerate(path[:-1]):
            key = path[:i + 1]
            if key not in copied:
                at[p] = copied[key] = copy.copy(at[p])
            at = at[p]
        at[path[-1]] = value
    text = json.dumps(doc)         # NaN and Infinity as Python writes them
    return text.replace(json.dumps(HUGE), "1" + "0" * 4999)


_COORD = re.compile(r'\s(x|y|x1|x2|y1|y2|cx|cy|r|width|height|points|d|viewBox|transform|offset|'
                    r'stroke-width|font-size)="([^"]*)"')
_NOT_FINITE = re.compile(r"nan|inf", re.IGNORECASE)


def bad_coordinates(page: str) -> List[str]:
    return [m.group(0) for m in _COORD.finditer(page) if _NOT_FINITE.search(m.group(2))]


# The runs this process has shown, each as a digest of its pickle: the whole state, exactly
# (-0.0 and 0, 1 and 1.0, the order of keys told apart; equal bytes unpickle to the same run).
# The reports are functions of the run, so showing one state again checks nothing new, and
# changes meet the same state often: NaN, the infinities and null read alike, and a fresh
# analysis replaces a stored one that a change touched. Only a state every check passed is kept.
_SHOWN: set = set()


def _state(run) -> bytes:
    return hashlib.blake2b(pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL), digest_size=16).digest()


def survives(text: str) -> str:
    """'refused' or 'shown'; fails the test on any other outcome."""
    try:
        run = jsonio.loads(text, source="t.json")
    except CeilingError as e:
        assert "\n" not in str(e)
        return "refused"
    for fresh in (False, True):
        if fresh:
            run.analysis = analyse(run)       # as `ceiling run` analyses what it measured
        else:
            ensure(run)                       # as `ceiling show` does
        state = _state(run)
        if state in _SHOWN:
            continue
        terminal.render(run)
        terminal.summary(run)
        if run.application is not None and run.application.profile is not None:
            terminal_profile.render(run)          # what `ceiling show` prints for a profile
        page = html.render(run)
        assert not bad_coordinates(page), bad_coordinates(page)[:3]
        jsonio.loads(jsonio.dumps(run), source="written")   # what ceiling writes, it reads back
        _SHOWN.add(state)
    return "shown"


# -- deterministic: each kind of figure, everywhere it occurs at once, set to a bad value ------

def test_every_figure_of_a_run_with_every_plot_set_to_each_bad_value():
    doc = BASES["vm"]
    outcomes = {"refused": 0, "shown": 0}
    for paths in groups(doc).values():
        for v in KEY_VALUES:
            outcomes[survives(mutated(doc, [(p, v) for p in paths]))] += 1
    assert outcomes["shown"] and outcomes["refused"]


def _survive_all(work: Tuple[str, List[Tuple[int, List]]]) -> List[str]:
    """Each (index, changes) of one base survives; what failed, as one text each."""
    base, items = work
    failed = []
    for i, changes in items:
        try:
            survives(mutated(BASES[base], changes))
        except Exception as e:          # an assertion or a crash: reported by the test, with its change
            failed.append(f"{base} change {i} {changes[:2]}...: {type(e).__name__}: {e}")
    return failed


# NaN and the infinities read as null (results/jsonio: what another tool may have written is
# unknown), so a document with one of them where null also goes is that document: shown once.
READ_AS_NULL = (float("nan"), float("inf"), float("-inf"))


def test_nan_and_the_infinities_read_as_null():
    doc = BASES["golden_v3"]
    (paths,) = [p for k, p in groups(doc).items() if k == ("metrics", "*", "values", "*")]
    texts = [mutated(doc, [(p, v) for p in paths]) for v in READ_AS_NULL + (None,)]
    assert len(set(texts)) == 4
    docs = [jsonio.from_doc(jsonio._parse(t, "t.json")) for t in texts]
    assert all(jsonio.to_doc(d) == jsonio.to_doc(docs[-1]) for d in docs)


# Each document's changes in SHARDS tests of their own, so that make test's parallel pass spreads a
# document's 20-30 s over its workers rather than ending on one worker's queue of them.
SHARDS = 3


@pytest.mark.slow      # 20-30 s per document on one CPU; shared between the CPUs there are
@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("base", sorted(BASES))
def test_every_figure_and_text_set_to_every_bad_value(base, shard):
    doc = BASES[base]
    values = [v for v in BAD if not (isinstance(v, float) and not math.isfinite(v))]     # READ_AS_NULL
    # the profile's machine section is shown as every run's is, which the other documents cover
    part = (lambda kind: kind[0] != "machine") if base == "profile_v3" else (lambda kind: True)
    changes = [[(p, v) for p in paths] for kind, paths in groups(doc).items() if part(kind) for v in values]
    numbers = set(groups(doc))
    changes += [[(p, v) for p in paths] for kind, paths in groups(doc, numbers_only=False).items()
                if kind not in numbers and part(kind) for v in FOR_STRINGS]
    items = list(enumerate(changes))
    # a worker of make test's parallel pass (pytest-xdist) runs its share in-process: the pass spreads
    # the tests over the CPUs already, and a fork pool inside its worker breaks the worker's channel
    workers = 1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(4, len(os.sched_getaffinity(0))))
    # the changes of one kind of figure (all its values, which often read as the same run) go to one
    # worker, the kinds handed out as workers come free
    shares = [(base, items[k:k + len(values)]) for k in range(0, len(items), len(values))][shard::SHARDS]
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        failed = [f for share in shares for f in _survive_all(share)]
    else:       # forked: the workers have BASES and the imports already
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            failed = [f for part in pool.imap(_survive_all, shares) for f in part]
    assert shares and not failed, f"{len(failed)} of {len(items)} changes failed; first: {failed[:3]}"


# -- random: several figures at once ----------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

VALUES = st.one_of(st.sampled_from(BAD), st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(min_value=-(10 ** 320), max_value=10 ** 320), st.text(max_size=8))


@settings(max_examples=120, deadline=None, database=None)
@given(data=st.data())
def test_random_values_never_crash_a_report(data):
    base = data.draw(st.sampled_from(sorted(BASES)))
    doc = BASES[base]
    paths = leaves(doc, numbers_only=data.draw(st.booleans()))
    changes = data.draw(st.lists(st.tuples(st.sampled_from(paths), VALUES), min_size=1, max_size=6))
    survives(mutated(doc, changes))


# -- what is refused and what is shown --------------------------------------------------------

@pytest.mark.parametrize("path,value", [
    (("metrics", 0, "value"), "abc"),                   # a string where a figure goes
    (("metrics", 0, "efficiency"), -0.5),               # below the schema's minimum
    (("metrics", 0, "stats", "n"), None),               # a required integer
    (("analysis", "roofline", "roofs", 0, "value"), float("inf")),   # read as null: not a number
    (("machine", "cores"), 10 ** 400),                  # beyond any float
    (("machine", "cores"), HUGE),                       # beyond what Python parses
])
def test_schema_invalid_values_are_refused_when_read(path, value):
    with pytest.raises(CeilingError) as e:
        jsonio.loads(mutated(BASES["golden_v2"], [(path, value)]), source="t.json")
    assert str(e.value).startswith("t.json is not a valid ceiling run: ") and "\n" not in str(e.value)


def test_a_refusal_names_the_path_and_the_value():
    with pytest.raises(CeilingError, match=r"metrics\[0\]\.value: 'abc' is not a number or null"):
        jsonio.loads(mutated(BASES["golden_v2"], [(("metrics", 0, "value"), "abc")]), source="t.json")
    with pytest.raises(CeilingError, match="an integer of 5000 digits"):
        jsonio.loads(mutated(BASES["golden_v2"], [(("metrics", 0, "value"), HUGE)]), source="t.json")


@pytest.mark.parametrize("value", [0, -1, -409.6, 1e-320, 1e308])
@pytest.mark.parametrize("key", ["flops.dp.node", "membw.node"])
def test_a_peak_the_schema_allows_is_shown(key, value):
    doc = copy.deepcopy(BASES["vm"])
    doc["machine"]["peaks"][key]["value"] = value
    for m in doc["metrics"]:
        if m["peak"] is not None and m["name"] in ("flops.dp.node", "dgemm.node", "stream.triad"):
            m["peak"]["value"] = value
    assert survives(json.dumps(doc)) == "shown"
    run = jsonio.loads(json.dumps(doc))
    run.analysis = analyse(run)
    assert all(0 < r.value < 1e300 for r in run.analysis.roofline.roofs)   # a log axis can place each


@pytest.mark.parametrize("value", [0, -1, 1e-320, 1e308])
def test_a_stored_roof_the_schema_allows_is_named_not_drawn(value):
    doc = copy.deepcopy(BASES["golden_v2"])
    for r in doc["analysis"]["roofline"]["roofs"]:
        r["value"] = value
    assert survives(json.dumps(doc)) == "shown"
    page = html.render(jsonio.loads(json.dumps(doc)))
    assert 'data-series="roofline"' not in page and "is no rate a log scale can show" in page


def test_nan_infinity_and_1e999_read_as_unknown():
    doc = copy.deepcopy(BASES["golden_v2"])
    for i, spelt in enumerate(("NaN", "Infinity", "-Infinity", "1e999")):
        doc["metrics"][i]["value"] = f"@@{i}@@"
    text = json.dumps(doc)
    for i, spelt in enumerate(("NaN", "Infinity", "-Infinity", "1e999")):
        text = text.replace(f'"@@{i}@@"', spelt)
    run = jsonio.loads(text, source="t.json")
    assert [m.value for m in run.metrics[:4]] == [None] * 4


@pytest.mark.parametrize("depth", [65, 5000, 100_000])
def test_deep_nesting_is_refused_in_one_line(depth):
    doc = copy.deepcopy(BASES["golden_v2"])
    doc["environment"] = {"x": "@@DEEP@@"}
    text = json.dumps(doc).replace('"@@DEEP@@"', "[" * depth + "]" * depth)
    with pytest.raises(CeilingError, match="nested deeper than 64 levels") as e:
        jsonio.loads(text, source="t.json")
    assert "\n" not in str(e.value)


def test_nesting_a_run_can_have_is_read():
    doc = copy.deepcopy(BASES["golden_v2"])
    doc["findings"][0]["data"] = {"x": json.loads("[" * 50 + "]" * 50)}
    assert survives(json.dumps(doc)) == "shown"


# -- a measured run is delivered whatever its peaks -------------------------------------------

@pytest.mark.parametrize("peak", [0.0, 1e-320, 1e308, float("inf"), float("nan")])
def test_a_measured_run_with_any_peak_is_delivered_in_full(peak, tmp_path, capsys):
    # As `ceiling run` delivers: a peak the machine model or an older config gave, efficiencies
    # computed from it as a bench does, then analysis, JSON file, HTML report, history, terminal.
    import argparse

    from ceiling.results.model import Peak
    from ceiling.results.store import Store
    from ceiling.verbs import common

    run = vm_run()
    for key, p in list(run.machine["peaks"].items()):
        run.machine["peaks"][key] = {"value": peak, "unit": p["unit"], "provenance": "config file c.toml"}
    for m in run.metrics:
        if m.peak is not None:
            m.peak = Peak(peak, m.peak.unit, "config file c.toml")
            m.efficiency = m.value / peak if peak else None
    args = argparse.Namespace(save_json=str(tmp_path / "r.json"), out=str(tmp_path / "r.html"), json=False)
    store = Store(str(tmp_path / "h.db"))
    assert common.deliver(run, common.exporters(args, store, html=True), 0, print) == 0
    out, err = capsys.readouterr()
    assert "ceiling: " not in err and "ceiling summary" in out
    assert not bad_coordinates((tmp_path / "r.html").read_text())
    back = jsonio.load(tmp_path / "r.json")
    assert back.metrics and Store(str(tmp_path / "h.db")).get(back.run_id or store.list()[0].run_id).metrics


def test_a_nan_efficiency_is_never_the_verdict():
    from ceiling.analysis.summary import verdict
    run = vm_run()
    # the first metric with an efficiency: min() would keep a NaN met first, whatever follows
    first = next(m for m in run.metrics if m.efficiency is not None)
    assert verdict(run).metric != first.name
    expected = verdict(run)
    first.efficiency = float("nan")             # a NaN peak while measuring
    assert verdict(run) == expected
