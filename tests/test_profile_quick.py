"""A storage or memory ceiling the history lacks, measured quickly by ``ceiling profile``
(bench/quick_ceiling.py) and said to be that (analysis/profile_ceilings.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ceiling.analysis.profile_ceilings import compare
from ceiling.bench import quick_ceiling

IO = {"io_calls": {"write": {"calls": 64, "bytes": 64 << 20, "ns": 2 * 10**8}}}      # 64 MiB in 0.2 s


def test_a_missing_storage_ceiling_is_measured_once_and_said_to_be_quick():
    asked = []

    def measure(prefix):
        asked.append(prefix)
        return ("storage.seq.write.fpp (quick)", 500.0, "MiB/s", "2026-11-25T10:00:00", ""), "measured now (test)"
    cmp, _ = compare(IO, lambda p: [], measure)
    (c,) = cmp
    assert asked == ["storage.seq.write."]
    assert c["ceiling"] == pytest.approx(524.288) and c["quick"] is True
    assert c["source"] == "storage.seq.write.fpp (quick) = 500 MiB/s, measured now (test)"
    # the history wins when it has the figure: nothing is measured
    asked.clear()
    stored = [("storage.seq.write.fpp", 900.0, "MiB/s", "2026-11-20T10:00:00", "r" * 16)]
    cmp, _ = compare(IO, lambda p: stored, measure)
    assert asked == [] and not cmp[0]["quick"] and "2026-11-20" in cmp[0]["source"]


def test_a_quick_measurement_that_fails_says_why_beside_the_command():
    cmp, _ = compare(IO, lambda p: [], lambda prefix: (None, "/x has less than 512 MiB free"))
    assert cmp[0]["ceiling"] is None
    assert "ceiling bench storage" in cmp[0]["why"] and "/x has less than 512 MiB free" in cmp[0]["why"]


def test_the_quick_measurement_goes_where_the_program_wrote(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    files = {"shown": [{"path": str(a / "in.dat"), "write_s": 0.0, "read_s": 5.0},
                       {"path": str(b / "out.dat"), "write_s": 1.0, "read_s": 0.0},
                       {"path": "/nonexistent/x", "write_s": 9.0, "read_s": 0.0}]}
    assert quick_ceiling.where(files, "/cwd") == str(b)
    files["shown"][1]["write_s"] = 0.0
    assert quick_ceiling.where(files, "/cwd") == str(a)
    assert quick_ceiling.where({}, "/cwd") == "/cwd"


def test_the_quick_measurement_measures_and_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(quick_ceiling, "QUICK_BYTES", 8 << 20)
    rows, how = quick_ceiling.storage(str(tmp_path))
    assert "why" not in how, how
    assert set(rows) == {"storage.seq.write.", "storage.seq.read."}
    for name, value, unit, _, _ in rows.values():
        assert value > 0 and unit == "MiB/s" and name.endswith("(quick)")
    assert how["io"] in ("direct", "buffered") and how["reps"] == quick_ceiling.QUICK_REPS
    assert "8 MiB in 1 MiB requests" in quick_ceiling.words(how)
    assert list(tmp_path.iterdir()) == []


def test_no_room_means_no_measurement(tmp_path, monkeypatch):
    monkeypatch.setattr(quick_ceiling, "QUICK_BYTES", 1 << 60)
    rows, how = quick_ceiling.storage(str(tmp_path))
    assert rows == {} and "free" in how["why"]
    assert list(tmp_path.iterdir()) == []


def test_profile_no_measure_keeps_to_the_history(tmp_path):
    # a program writing 64 MiB with fsync: enough I/O to be compared with the storage
    prog = ("import os\nfd = os.open('out.dat', os.O_CREAT | os.O_WRONLY)\nb = b'x' * (1 << 20)\n"
            "for i in range(64):\n    os.write(fd, b)\nos.fsync(fd)\nos.close(fd)\n")
    out = tmp_path / "p.json"
    env = dict(os.environ, NO_COLOR="1", XDG_DATA_HOME=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), "--", sys.executable, "-c", prog], capture_output=True, text=True, timeout=120,
                       env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["application"]["profile"]
    assert prof["quick_ceilings"] == {}
    (c,) = [c for c in prof["ceilings"] if c["what"] == "I/O write"]
    assert c["ceiling"] is None and "ceiling bench storage" in c["why"]
    assert os.path.basename(prof["files"]["shown"][0]["path"]) == "out.dat"


def test_profile_without_a_stored_ceiling_measures_the_storage_where_the_program_wrote(tmp_path):
    prog = ("import os\nfd = os.open('out.dat', os.O_CREAT | os.O_WRONLY)\nb = b'x' * (1 << 20)\n"
            "for i in range(64):\n    os.write(fd, b)\nos.fsync(fd)\nos.close(fd)\n")
    work = tmp_path / "work"
    work.mkdir()
    out = tmp_path / "p.json"
    env = dict(os.environ, NO_COLOR="1", XDG_DATA_HOME=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
                        sys.executable, "-c", prog], capture_output=True, text=True, timeout=300, env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["application"]["profile"]
    how = prof["quick_ceilings"]["storage"]
    assert how["dir"] == str(work) and not how["why"], how
    (c,) = [c for c in prof["ceilings"] if c["what"] == "I/O write"]
    assert c["quick"] and c["ceiling"] > 0 and "measured now by this profile" in c["source"]
    assert "measured now by this profile in " + str(work) in " ".join(r.stderr.split())
    assert sorted(p.name for p in work.iterdir()) == ["out.dat"]       # its own directory removed


def test_a_memory_traffic_without_a_stored_stream_gets_a_quick_triad():
    bd = {"counters": {"derived": {"memory_bandwidth_min_bytes_per_s": {"value": 5e9}}}}
    asked = []

    def measure(prefix):
        asked.append(prefix)
        return ("stream.triad (quick)", 20.0, "GB/s", "2026-11-25T10:00:00", ""), "measured now (test)"
    cmp, _ = compare(bd, lambda p: [], measure)
    (c,) = cmp
    assert asked == ["stream.triad"] and c["ceiling"] == pytest.approx(20000.0) and c["share"] == pytest.approx(0.25)


def test_the_quick_stream_gives_a_valid_triad():
    from ceiling import machine
    m = machine.detect("/", measure=False)
    rows, how = quick_ceiling.memory(m)
    assert "why" not in how, how
    (name, value, unit, _, _), = rows.values()
    assert name == "stream.triad (quick)" and value > 0 and unit == "GB/s" and how["reps"] >= 1
    assert "STREAM Triad" in quick_ceiling.words(how)
