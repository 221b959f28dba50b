"""Bad input: one clear line on stderr and a distinct exit code (README "Exit codes").

Table-driven like LIKWID's executable tests: args | exit code | text the
one line must contain. Every case fails before anything is measured.
"""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def ceiling(*args, env=None, cwd=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True,
                          env=e, cwd=cwd, timeout=timeout)


CASES = [
    # args, exit code, text in the message
    (["frobnicate"], 2, "invalid choice"),
    (["run", "--bogus"], 2, "unrecognized arguments"),
    (["bench", "nosuchsuite", "--no-store"], 2, "unknown suite"),
    (["bench", "memory", "--size", "abc", "--no-store"], 2, "not a size"),
    (["bench", "memory", "--size", "0", "--no-store"], 3, "larger than zero"),
    (["bench", "memory", "--size=-5M", "--no-store"], 3, "positive"),
    (["bench", "memory", "--size", "100TiB", "--no-store"], 3, "larger than this node's memory"),
    (["bench", "memory", "--size", "1", "--no-store"], 3, "below one STREAM array element"),
    (["bench", "memory", "--threads", "0", "--no-store"], 3, "at least 1"),
    (["bench", "memory", "--threads", "x", "--no-store"], 2, "not a whole number"),
    (["bench", "memory", "--threads", "100000", "--no-store"], 3, "CPU"),
    (["bench", "memory", "--reps", "0", "--no-store"], 3, "at least 1"),
    (["bench", "memory", "--retry-disturbed", "-1", "--no-store"], 3, "at least 0"),
    (["run", "--retry-disturbed", "many", "--no-store"], 2, "not a whole number"),
    (["bench", "memory", "--isa", "mmx", "--no-store"], 2, "unknown"),
    (["bench", "memory", "--isa", "sve" if os.uname().machine == "x86_64" else "avx2", "--no-store"], 3, "cannot run"),
    (["bench", "memory", "--placement", "diagonal", "--no-store"], 2, "unknown"),
    (["run", "--out", "/nonexistent-dir/r.html", "--no-store"], 4, "does not exist"),
    (["run", "--save-json", "/proc/version", "--no-store"], 4, "not writable"),
    (["history", "--limit", "0", "--db", "{tmp}/h.db"], 3, "at least 1"),
    (["show", "{tmp}/missing.json"], 4, "no such file"),
    (["show", "/dev/zero"], 4, "not a regular file"),
    (["show", "{tmp}/missing-dir/run"], 4, "no such file"),
    (["show", "{tmp}/notes.txt"], 2, "is not a run's JSON file"),
    (["show", "{tmp}/h.sqlite"], 2, "is a SQLite database, not a run's JSON: 'ceiling history --db"),
    (["show", "{tmp}/cut.json"], 5, "is not valid JSON"),
    (["show", "{tmp}/study.json"], 12, "is not a valid ceiling study: kind: 'sweep' is not one of"),
    (["bench", "memory", "--repeat", "1", "--no-store"], 3, "must be at least 2"),
    (["bench", "memory", "--repeat", "2", "--cluster", "--no-store"], 2, "--cluster measures every node once"),
    (["history", "--studies", "--metric", "stream.triad", "--db", "{tmp}/h.db"], 2, "give one of them"),
    (["bench", "memory", "--node-timeout", "-3", "--no-store"], 2, "not a duration"),
    (["bench", "network", "memory", "--no-store"], 2, "runs on its own"),
    (["bench", "storage", "--dir", "{tmp}/nowhere", "--no-store"], 4, "does not exist"),
    (["bench", "storage", "--dir", "{tmp}", "--size", "100TiB", "--no-store"], 3, "free"),
    (["check", "--only", "bogus", "--no-store"], 2, "no such area or check"),
    (["check", "--explain", "cpu.nonsense"], 2, "no such check"),
    (["check", "--noise-seconds", "abc", "--no-store"], 2, "not a number"),
    (["check", "--noise-seconds", "0", "--no-store"], 3, "between"),
    (["check", "--root", "{tmp}/nowhere", "--no-store"], 4, "not a directory"),
    (["trace", "--format", "vtf", "--no-store", "--", "true"], 2, "not a trace format"),
]


@pytest.mark.parametrize("args,code,text", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input(tmp_path, args, code, text):
    (tmp_path / "notes.txt").write_text("not a run\n")
    (tmp_path / "cut.json").write_text('{"schema_version": 3, "metr')       # a run file cut short
    study = json.loads((REPO / "tests" / "golden" / "study_v1.json").read_text())
    (tmp_path / "study.json").write_text(json.dumps(dict(study, kind="sweep")))      # a study of no known kind
    import sqlite3
    sqlite3.connect(tmp_path / "h.sqlite").execute("CREATE TABLE t (x)").connection.commit()
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    r = ceiling(*args)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == code, (r.returncode, r.stderr)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ceiling: ") and not lines[0].startswith("ceiling: ceiling"), lines
    assert text in lines[0], lines[0]
    assert "Traceback" not in r.stderr


def _config_cases(tmp_path):
    bad_key = tmp_path / "bad_key.toml"
    bad_key.write_text("[cpu]\nfma_unitz = 2\n")
    bad_type = tmp_path / "bad_type.toml"
    bad_type.write_text("[cpu]\nfma_units = \"two\"\n")
    bad_toml = tmp_path / "bad_toml.toml"
    bad_toml.write_text("[cpu\nfma_units = 2\n")
    return [(bad_key, "fma_unitz"), (bad_type, "fma_units"), (bad_toml, "line")]


def test_bad_config_files(tmp_path):
    for path, text in _config_cases(tmp_path):
        for before, after in ((["--config", str(path)], []), ([], ["--config", str(path)]), ([], [])):
            # the global option, the same after the verb (where users put it), the environment
            r = ceiling(*before, "machine", "--no-measure", *after,
                        env={} if before or after else {"CEILING_CONFIG": str(path)})
            assert r.returncode == 6, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert text in r.stderr and str(path) in r.stderr, r.stderr


def test_corrupt_database_is_reported_and_kept(tmp_path):
    db = tmp_path / "history.db"
    db.write_bytes(b"this is not a database" * 100)
    before = db.read_bytes()
    r = ceiling("history", "--db", str(db))
    assert r.returncode == 5, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert db.read_bytes() == before


def test_newer_database_is_refused(tmp_path):
    db = tmp_path / "history.db"
    ceiling("history", "--db", str(db))  # creates it
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 999")
    con.commit()
    con.close()
    r = ceiling("history", "--db", str(db))
    assert r.returncode == 5, r.stderr
    assert "newer" in r.stderr


def test_unwritable_db_directory(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/ceiling-history.db"  # not writable even for root
    else:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        target = str(d / "h.db")
    r = ceiling("check", "--db", target)
    assert r.returncode == 4, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_c_compiler_at_install(tmp_path):
    r = subprocess.run(["bash", str(REPO / "scripts" / "bootstrap.sh")], capture_output=True, text=True,
                       env={**os.environ, "CC": "/nonexistent/cc", "CEILING_VENV": str(tmp_path / "venv")})
    assert r.returncode == 8, r.stderr
    assert "no C compiler" in r.stderr
    assert not (tmp_path / "venv").exists()


def test_help_for_every_verb():
    r = ceiling("--help")
    assert r.returncode == 0 and "run" in r.stdout
    for verb in ("run", "machine", "check", "bench", "history", "show"):
        r = ceiling(verb, "--help")
        assert r.returncode == 0, (verb, r.stderr)
        assert verb in r.stdout
    r = ceiling("--version")
    assert r.returncode == 0 and r.stdout.startswith("ceiling ")


def test_a_bad_size_is_refused_before_measuring(tmp_path):
    """`bench memory --size 1` measured the clock and every step, then exited 3 (issue 10, item 8)."""
    db = tmp_path / "h.db"
    r = ceiling("bench", "memory", "cache", "--size", "1", "--db", str(db))
    assert r.returncode == 3 and r.stdout == "", r.stdout[:500]
    from ceiling.results.store import Store
    with Store(db, readonly=True) as s:
        assert s.list() == []
