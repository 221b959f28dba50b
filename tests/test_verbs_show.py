"""`ceiling show` reads every version of the document: v1 files (no stored analysis) are
migrated and analysed once; v2 files render the analysis they carry."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling import cli
from ceiling.results.model import SCHEMA_VERSION

GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.mark.parametrize("name", ["run_v1.json", "run_v1_partial.json", "run_v2.json", "run_v2_partial.json"])
def test_show_renders_every_golden_document(name, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["show", str(GOLDEN / name), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ceiling summary" in text and "Traceback" not in text
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "No verdict was recorded" not in page


def test_a_v1_document_is_analysed_when_shown(capsys):
    assert cli.main(["show", str(GOLDEN / "run_v1.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["analysis"]["verdict"]["kind"] in ("below_peak", "unknown_peaks", "no_peak", "nothing_measured")
    assert doc["analysis"]["roofline"] is not None


def test_a_v2_document_keeps_its_stored_verdict(capsys):
    stored = json.loads((GOLDEN / "run_v2.json").read_text())["analysis"]["verdict"]
    assert cli.main(["show", str(GOLDEN / "run_v2.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["analysis"]["verdict"] == stored


def _show_refuses(tmp_path, capsys, text: str, code: int, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert cli.main(["show", str(path)]) == code
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"ceiling: {path} ") and words in err


def test_show_refuses_an_integer_of_5000_digits_in_one_line(tmp_path, capsys):
    text = (GOLDEN / "run_v2.json").read_text().replace('"value": 352.5', '"value": 1' + "0" * 4999, 1)
    assert "0" * 4999 in text
    _show_refuses(tmp_path, capsys, text, 5, "an integer of 5000 digits")


def test_show_refuses_nesting_100000_levels_deep_in_one_line(tmp_path, capsys):
    doc = json.loads((GOLDEN / "run_v2.json").read_text())
    doc["environment"] = {"x": "@@"}
    text = json.dumps(doc).replace('"@@"', "[" * 100_000 + "]" * 100_000)
    _show_refuses(tmp_path, capsys, text, 5, "nested deeper than 64 levels")


def test_show_refuses_a_string_where_a_figure_goes_naming_it(tmp_path, capsys):
    doc = json.loads((GOLDEN / "run_v2.json").read_text())
    doc["metrics"][0]["peak"]["value"] = "fast"
    _show_refuses(tmp_path, capsys, json.dumps(doc), 5, "metrics[0].peak.value: 'fast' is not a number or null")


def test_show_renders_a_peak_of_zero_and_an_infinite_one(tmp_path, capsys):
    doc = json.loads((GOLDEN / "run_v2.json").read_text())
    doc["metrics"][0]["peak"]["value"] = 0
    doc["machine"]["peaks"]["flops.dp.node"]["value"] = "@@"
    doc["analysis"]["roofline"]["roofs"][0]["value"] = 0       # as stored: a log axis has no place for it
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc).replace('"@@"', "Infinity"))
    assert cli.main(["show", str(path), "--out", str(tmp_path / "r.html")]) == 0
    assert "ceiling summary" in capsys.readouterr().out
    page = (tmp_path / "r.html").read_text()
    assert "NaN" not in page and "Infinity" not in page
