"""Delivering a measured run: every output is written even when Ctrl-C or SIGTERM
arrives meanwhile, no temporary file stays behind, and a report file the user did
not name is never replaced nor made from an unsanitised hostname (issue 11, items 2, 7, 8)."""
from __future__ import annotations

import datetime as _dt
import json
import os
import signal

import pytest

from ceiling import cli
from ceiling.errors import held_signals, signals_deferred
from ceiling.report.exporters import html_file
from ceiling.results import jsonio
from ceiling.results.model import Run


def _run(host: str = "n01") -> Run:
    return Run(tool_version="0", host=host, started="2026-01-01T00:00:00Z", command=["ceiling"])


class _Frozen(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 1, 2, 3, 4, 5)


def test_a_hostile_hostname_makes_one_file_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = html_file.HtmlFile().export(_run("x/<script>alert(1)<"))
    made = list(tmp_path.iterdir())
    assert len(made) == 1 and made[0].is_file() and "/" not in made[0].name and "<" not in made[0].name
    assert line == f"HTML report: {made[0]}"


def test_the_default_report_never_replaces_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(html_file._dt, "datetime", _Frozen)
    theirs = tmp_path / "ceiling-n01-20260102-030405.html"
    theirs.write_text("mine")
    first = html_file.HtmlFile().export(_run())
    second = html_file.HtmlFile().export(_run())          # the same second
    assert theirs.read_text() == "mine"
    assert first.endswith("-2.html") and second.endswith("-3.html")
    assert all((tmp_path / p.split(": ", 1)[1]).read_text().startswith("<!DOCTYPE html>") for p in (first, second))


def test_a_named_report_is_replaced_as_asked(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("old")
    html_file.HtmlFile(str(out)).export(_run())
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_ctrl_c_while_delivering_still_delivers_everything(tmp_path, monkeypatch, capsys):
    real, pressed = jsonio.dumps, []

    def interrupted_dumps(run):
        if not pressed:                            # the user presses Ctrl-C once, while the JSON is made
            pressed.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real(run)

    monkeypatch.setattr(jsonio, "dumps", interrupted_dumps)
    saved, db = tmp_path / "run.json", tmp_path / "h.db"
    code = cli.main(["check", "--only", "env", "--save-json", str(saved), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 130 and "while the run was delivered" in err
    assert json.loads(saved.read_text())["findings"]                     # written in full
    from ceiling.results.store import Store
    assert len(Store(str(db)).list()) == 1                               # and recorded
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_sigterm_while_delivering_exits_143_after_delivering(tmp_path, monkeypatch, capsys):
    real = jsonio.dumps

    def terminated_dumps(run):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(run)

    monkeypatch.setattr(jsonio, "dumps", terminated_dumps)
    saved = tmp_path / "run.json"
    assert cli.main(["check", "--only", "env", "--no-store", "--save-json", str(saved)]) == 143
    assert saved.stat().st_size > 0


def test_a_second_signal_stops_at_once():
    with pytest.raises(KeyboardInterrupt):
        with held_signals() as held:
            os.kill(os.getpid(), signal.SIGINT)
            assert held.signum == signal.SIGINT
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupted_json_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def stop(fd):
        raise KeyboardInterrupt
    monkeypatch.setattr(jsonio.os, "fsync", stop)
    with pytest.raises(KeyboardInterrupt):
        jsonio.dump(_run(), tmp_path / "run.json")
    assert list(tmp_path.iterdir()) == []


def test_a_sigterm_after_ctrl_c_does_not_stop_delivery():
    # Open MPI: the Ctrl-C reaches the ranks, then mpirun sends each a SIGTERM of its own
    with held_signals() as held:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert held.signum == signal.SIGINT
    assert held.interruption()[1] == 130


def test_the_report_takes_its_mode_from_the_umask_without_changing_it(monkeypatch, tmp_path):
    """html._umask used to set and restore the process umask: a race with threads
    that create files meanwhile (issue 11, item 12). The report's file is now created
    0666 and the kernel applies the umask (files/output.py): nothing reads or sets it."""
    import os
    from ceiling.report import html
    calls = []
    real = os.umask
    monkeypatch.setattr(os, "umask", lambda m: calls.append(m) or real(m))
    old = real(0o027)
    try:
        html.write(_run(), tmp_path / "r.html")
    finally:
        real(old)
    assert calls == [] and (tmp_path / "r.html").stat().st_mode & 0o777 == 0o640


def test_a_bug_in_one_output_costs_only_that_output(tmp_path, monkeypatch, capsys):
    from ceiling.report.exporters import json_doc

    def broken(self, run):
        raise ValueError("a figure no axis can place")

    monkeypatch.setattr(json_doc.JsonFile, "export", broken)
    saved, db = tmp_path / "run.json", tmp_path / "h.db"
    code = cli.main(["check", "--only", "env", "--save-json", str(saved), "--db", str(db)])
    captured = capsys.readouterr()
    assert code == 1
    assert "ceiling: JSON not saved: an internal error (ValueError: a figure no axis can place)" in captured.err
    from ceiling.results.store import Store
    assert len(Store(str(db)).list()) == 1                # the history and the terminal report still came
    assert "env" in captured.out
    assert not saved.exists()


def test_signals_deferred_runs_the_handler_after_the_block():
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reached = []
        with pytest.raises(KeyboardInterrupt):
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                reached.append("end of block")
        assert reached == ["end of block"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, old)


def test_signals_deferred_keeps_each_signal_for_its_own_handler():
    seen = []
    old = signal.signal(signal.SIGTERM, lambda s, f: seen.append(("handler", s)))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            seen.append("end of block")
        assert seen == ["end of block", ("handler", signal.SIGTERM)]      # once, after the block
    finally:
        signal.signal(signal.SIGTERM, old)


def test_a_ctrl_c_and_a_sigterm_deferred_both_reach_their_handlers():
    """The Ctrl-C's KeyboardInterrupt does not swallow the SIGTERM deferred with it."""
    seen = []
    old_term = signal.signal(signal.SIGTERM, lambda s, f: seen.append("SIGTERM"))
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
        assert seen == ["SIGTERM"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def test_ctrl_c_before_anything_was_measured_still_delivers_a_partial_run(tmp_path, monkeypatch, capsys):
    """A stop while the options are checked (the storage preflight makes and removes a probe
    directory) had escaped before the run was set up: no JSON, exit 130 from the CLI alone."""
    from ceiling.bench import storage

    def stopped(ctx):
        raise KeyboardInterrupt
    monkeypatch.setattr(storage, "preflight", stopped)
    saved = tmp_path / "run.json"
    code = cli.main(["bench", "storage", "--no-store", "--dir", str(tmp_path), "--save-json", str(saved)])
    assert code == 130, capsys.readouterr().err
    doc = json.loads(saved.read_text())
    assert doc["partial"] is True and doc["partial_reason"].startswith("interrupted (Ctrl-C)")
    assert doc["metrics"] == [] and doc["machine"]
