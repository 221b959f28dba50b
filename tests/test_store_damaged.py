"""A damaged history is refused before anything is measured, and never written to
(issue 11, item 3): SQLite's quick_check runs when a verb opens the history to
record a run; reading verbs still report the damage as before."""
from __future__ import annotations

import hashlib
import os

import pytest

from ceiling import cli
from ceiling.errors import StoreError
from ceiling.results.store import Store

import sample_runs


def _history(path, n=40):
    with Store(str(path)) as s:
        for i in range(n):
            run = sample_runs.vm_run()
            run.run_id = f"{i:032x}"
            s.save(run)


def _damage(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(os.urandom(8192))           # 8 KiB of garbage in the middle, as the issue found


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_a_damaged_history_is_refused_and_untouched(tmp_path, capsys):
    db = tmp_path / "history.db"
    _history(db)
    _damage(db)
    before = _digest(db)
    code = cli.main(["check", "--only", "env", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 5 and "is damaged" in err and "not touched" in err, err
    assert err.strip().count("\n") == 0
    assert _digest(db) == before and not os.path.exists(f"{db}-wal")


def test_an_intact_history_opens_and_records(tmp_path):
    db = tmp_path / "history.db"
    _history(db, n=3)
    with Store(str(db), check=True) as s:
        assert len(s.list()) == 3


def test_the_check_is_asked_for_by_writers_only(tmp_path):
    db = tmp_path / "history.db"
    _history(db)
    _damage(db)
    with pytest.raises(StoreError, match="is damaged"):
        Store(str(db), check=True)
