"""Strings from outside (a hostname, a CPU model name, a JSON file, a path) reach the
terminal with their control characters written out, never obeyed (issue 11, item 5)."""
from __future__ import annotations

import json

from ceiling import cli
from ceiling.report import terminal
from ceiling.results.model import Finding, Metric, Run

import sample_runs
from reporting import analysed

EVIL = "\x1b]0;pwned\x07\x1b[2J\rEVIL\x9b"


def _no_controls(text: str) -> None:
    assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text and "\r" not in text
    assert "\x9b" not in text


def _evil_run() -> Run:
    run = analysed(sample_runs.vm_run())
    run.host = EVIL
    run.machine["model_name"] = EVIL
    run.machine["microarch"] = EVIL
    run.findings.append(Finding("env.virtualized", "warn", EVIL, evidence=EVIL, fix=EVIL))
    # A metric name is dotted words (schema.json): no whitespace, so no carriage return.
    run.metrics.append(Metric.measured("x." + EVIL.replace("\r", ""), [1.0], EVIL))
    return run


def test_every_terminal_rendering_escapes_control_characters():
    run = _evil_run()
    for text in (terminal.render(run), terminal.summary(run), terminal.render_checks(run, verbose=True),
                 terminal.nhc_line(run), terminal.render_machine(run)):
        _no_controls(text)
        assert "\\x1b]0;pwned\\x07" in text or "pwned" not in text


def test_show_of_a_crafted_file_escapes(tmp_path, capsys):
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(_evil_run().to_dict()))
    assert cli.main(["show", str(path)]) == 0
    _no_controls(capsys.readouterr().out)
    # A file the schema refuses (whitespace in a metric name) is named in one escaped line.
    doc = _evil_run().to_dict()
    doc["metrics"][-1]["name"] = "x." + EVIL
    path.write_text(json.dumps(doc))
    assert cli.main(["show", str(path)]) == 5
    err = capsys.readouterr().err
    _no_controls(err)
    assert err.count("\n") == 1 and "metrics[" in err


def test_an_error_naming_an_outside_path_escapes(tmp_path, capsys):
    bad = str(tmp_path / ("no" + EVIL + "where"))
    assert cli.main(["check", "--root", bad]) == 4
    err = capsys.readouterr().err
    _no_controls(err)
    assert "\\x1b" in err


def test_history_rows_escape(tmp_path, capsys):
    from ceiling.results.store import Store
    db = str(tmp_path / "h.db")
    Store(db).save(_evil_run())
    assert cli.main(["history", "--db", db]) == 0
    _no_controls(capsys.readouterr().out)
