"""Reading verbs never write the history, and a history that cannot be written is
found before measuring (issue 11, item 9).

A read-only mount is made for real where the tests run as root (a private
mount namespace: ``unshare -m``, a read-only bind mount of the test's
directory); otherwise the directory and file lose their write bits, which is
the same refusal for a user who is not root."""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.errors import PathError
from ceiling.results.store import STORE_VERSION, Store
from ceiling.results.store_schema import UPGRADES

import sample_runs
from test_results_store import _v1_store, golden


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _history(path: Path, n: int = 3) -> None:
    with Store(path) as s:
        for i in range(n):
            run = sample_runs.vm_run()
            run.run_id = f"{i:032x}"
            s.save(run)


def _readonly(directory: Path, argv: list) -> subprocess.CompletedProcess:
    """``argv`` run with ``directory`` read-only: mounted so as root, else without write bits."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    if os.geteuid() == 0:
        if not shutil.which("unshare"):
            pytest.skip("no unshare(1) to make a read-only mount")
        d = shlex.quote(str(directory))
        script = (f"mount --bind {d} {d} && mount -o remount,bind,ro {d} || exit 99; "
                  f"touch {d}/probe 2>/dev/null && exit 98; exec " + " ".join(map(shlex.quote, argv)))
        r = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True)
        if r.returncode in (98, 99):
            pytest.skip(f"cannot make a read-only mount here: {r.stderr.strip()}")
        return r
    for p in directory.iterdir():
        p.chmod(0o444)
    directory.chmod(0o555)
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True)
    finally:
        directory.chmod(0o755)


def _cli(*args: str) -> list:
    return [sys.executable, "-m", "ceiling", *args]


@pytest.fixture
def history_dir(tmp_path):
    """A directory holding a history of three runs, and the history's digest."""
    d = tmp_path / "ro"
    d.mkdir()
    db = d / "history.db"
    _history(db)
    return d, db, _digest(db)


def test_history_and_show_read_a_history_on_a_read_only_mount(history_dir):
    d, db, before = history_dir
    r = _readonly(d, ["sh", "-c", " ".join(map(shlex.quote, _cli("history", "--db", str(db), "--json")))
                      + " && " + " ".join(map(shlex.quote, _cli("show", "0" * 32, "--db", str(db), "--json")))])
    assert r.returncode == 0, r.stderr
    assert '"run_id": "' + "0" * 31 + '2"' in r.stdout        # the listing
    assert '"schema_version"' in r.stdout                          # the run shown
    assert sorted(p.name for p in d.iterdir()) == ["history.db"] and _digest(db) == before


def test_a_run_refuses_a_read_only_history_before_measuring(history_dir):
    d, db, before = history_dir
    r = _readonly(d, _cli("bench", "compute", "--quick", "--db", str(db)))
    assert r.returncode == 4, (r.returncode, r.stderr)
    assert r.stderr.startswith("ceiling: cannot write") and r.stderr.count("\n") == 1, r.stderr
    assert r.stdout == ""                                          # nothing was measured
    assert _digest(db) == before


def test_a_writer_finds_a_read_only_file_when_it_opens(tmp_path, monkeypatch):
    """A file a user may read but not write (0444, theirs or root's): SQLite opens it
    read-only without a word; the writer must see it before measuring."""
    db = tmp_path / "history.db"
    _history(db)
    import sqlite3
    real = sqlite3.connect

    def readonly_connect(path, *a, **k):          # what SQLite does with a file it may not write
        if str(path) == str(db):
            return real(f"file:{path}?mode=ro", *a, uri=True, **k)
        return real(path, *a, **k)
    monkeypatch.setattr(sqlite3, "connect", readonly_connect)
    with pytest.raises(PathError, match="cannot write"):
        Store(db, check=True)


def test_reading_a_missing_history_creates_nothing(tmp_path):
    db = tmp_path / "none" / "history.db"
    with Store(db, readonly=True) as s:
        assert s.list() == [] and s.metrics_history("stream.triad") == []
        with pytest.raises(PathError, match="reading only"):
            s.save(sample_runs.vm_run())
    assert not db.parent.exists()


def test_an_old_store_is_read_without_being_upgraded(tmp_path):
    p = tmp_path / "h.db"
    _v1_store(p)
    before = _digest(p)
    with Store(p, readonly=True) as s:
        assert s.get(golden().run_id) == golden()
        assert {r.run_id for r in s.list()} == {golden().run_id, "v1run0001"}
        assert [h[1] for h in s.metrics_history("stream.triad")] == ["cn042", "cn042"]
    assert _digest(p) == before        # SQLite's readers may leave its -wal and -shm beside it, no more
    assert {x.name for x in tmp_path.iterdir()} <= {"h.db", "h.db-wal", "h.db-shm"}
    assert os.path.getsize(f"{p}-wal") == 0 if os.path.exists(f"{p}-wal") else True


def test_every_older_store_version_has_an_upgrade():
    # a reader sees an older file through store_schema.read_old, which builds every version's rows
    assert set(UPGRADES) == set(range(1, STORE_VERSION))
