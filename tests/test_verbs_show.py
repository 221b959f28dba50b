"""`ceiling show` reads every version of the document: v1 files (no stored analysis) are
migrated and analysed once; v2 files render the analysis they carry."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ceiling import cli

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
    assert doc["schema_version"] == 2
    assert doc["analysis"]["verdict"]["kind"] in ("below_peak", "unknown_peaks", "no_peak", "nothing_measured")
    assert doc["analysis"]["roofline"] is not None


def test_a_v2_document_keeps_its_stored_verdict(capsys):
    stored = json.loads((GOLDEN / "run_v2.json").read_text())["analysis"]["verdict"]
    assert cli.main(["show", str(GOLDEN / "run_v2.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["analysis"]["verdict"] == stored
