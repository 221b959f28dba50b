"""ceiling probe: the directory kept between runs, its lock, --clean, a clean stop on SIGTERM, the pool
repaired after SIGKILL, a tmpfs said; and the slowdown factor's arithmetic (analysis/slowdown.py).
Nothing here depends on a timing figure: only on which lines and files there are."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ceiling.analysis import slowdown
from ceiling.bench import fsprobe_dir

HOME = tempfile.mkdtemp(prefix="ceiling-probe-test-")      # the default history: never the user's
ENV = {**os.environ, "XDG_DATA_HOME": HOME}
SMALL = ["--data-size", "2M", "--files", "8", "--interval", "0.05", "--window", "1", "--listen", "off"]


def ceiling(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV)


def start(*args):
    p = subprocess.Popen([sys.executable, "-m", "ceiling", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV)
    for line in p.stdout:                    # running once the header says how much traffic it makes
        if "one operation in flight" in line:
            return p
    raise AssertionError(f"probe did not start: {p.stderr.read()}")


@pytest.fixture(scope="module", autouse=True)
def _history_home():
    yield
    import shutil
    shutil.rmtree(HOME, ignore_errors=True)


@pytest.fixture
def parent(tmp_path):
    d = tmp_path / "fs"
    d.mkdir(mode=0o700)
    return d


def probe_dir(parent: Path) -> Path:
    return parent / fsprobe_dir.dir_name()


def test_probe_prints_each_operation_and_keeps_its_directory(parent):
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.3")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "made a data file of 2 MiB" in out and "made a pool of 8 files of 3901 bytes" in out
    for op in ("read", "write", "md.stat", "md.read", "md.delete", "md.create"):
        assert f" {op} " in out, op
    assert "baseline: this run's first hour" in out
    assert "O_DIRECT" in out                  # which way the page cache was kept out is said
    d = probe_dir(parent)
    assert (d / "data").stat().st_size == 2 << 20
    assert sorted(os.listdir(d / "pool")) == [fsprobe_dir.pool_name(i) for i in range(8)]
    assert (d / ".state").read_text().split() == ["clean", str(2 << 20), "8"]
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1")
    assert r.returncode == 0 and "made a" not in r.stdout       # prepared once, kept between runs


def test_second_probe_refused_and_sigterm_stops_cleanly(parent):
    p = start("probe", "--dir", str(parent), *SMALL, "--duration", "60")
    try:
        r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1")
        assert r.returncode == 14, r.stderr
        assert r.stderr.count("\n") == 1 and "one probe per directory" in r.stderr
        assert f"pid {p.pid}" in r.stderr
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "stopped on SIGTERM" in out and "the pool is whole" in out
    d = probe_dir(parent)
    assert (d / ".state").read_text().split()[0] == "clean"
    assert all((d / "pool" / fsprobe_dir.pool_name(i)).stat().st_size == 3901 for i in range(8))


def test_pool_damaged_by_a_kill_is_repaired_at_the_next_start(parent):
    assert ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1").returncode == 0
    d = probe_dir(parent)
    # what SIGKILL between the delete and the re-create leaves, and one killed mid-write
    (d / ".state").write_text(f"running {2 << 20} 8\n")
    (d / "pool" / fsprobe_dir.pool_name(3)).unlink()
    (d / "pool" / fsprobe_dir.pool_name(5)).write_bytes(b"x" * 100)
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1")
    assert r.returncode == 0, r.stderr
    assert "re-created 2 pool file(s)" in r.stdout
    assert all((d / "pool" / fsprobe_dir.pool_name(i)).stat().st_size == 3901 for i in range(8))


def test_real_sigkill_leaves_a_pool_the_next_start_makes_whole(parent):
    p = start("probe", "--dir", str(parent), *SMALL, "--interval", "0.01", "--duration", "60")
    time.sleep(0.5)
    p.kill()
    p.communicate(timeout=30)
    d = probe_dir(parent)
    assert (d / ".state").read_text().split()[0] == "running"
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1")
    assert r.returncode == 0, r.stderr
    assert all((d / "pool" / fsprobe_dir.pool_name(i)).stat().st_size == 3901 for i in range(8))


def test_clean_removes_everything_and_keeps_what_is_not_ours(parent):
    assert ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1").returncode == 0
    (probe_dir(parent) / "notes.txt").write_text("mine")
    r = ceiling("probe", "--dir", str(parent), "--clean")
    assert r.returncode == 1 and "notes.txt" in r.stderr
    (probe_dir(parent) / "notes.txt").unlink()
    r = ceiling("probe", "--dir", str(parent), "--clean")
    assert r.returncode == 0, r.stderr
    assert os.listdir(parent) == []


def test_clean_refused_while_a_probe_runs(parent):
    p = start("probe", "--dir", str(parent), *SMALL, "--duration", "60")
    try:
        r = ceiling("probe", "--dir", str(parent), "--clean")
        assert r.returncode == 14 and (probe_dir(parent) / "data").exists()
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)
    assert p.returncode == 0


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK), reason="no /dev/shm")
def test_tmpfs_is_said_to_be_a_ram_probe(tmp_path):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        r = ceiling("probe", "--dir", d, *SMALL, "--duration", "0.1")
        assert r.returncode == 0, r.stderr
        assert "tmpfs is memory: this is a RAM probe, not a file-system probe" in r.stdout
        assert "reads and writes: O_DIRECT" in r.stdout or "posix_fadvise" in r.stdout   # tmpfs takes it since 6.6


@pytest.mark.parametrize("args, code, text", [
    (["--dir", "/nonexistent/x"], 4, "does not exist"),
    (["--dir", "{p}", "--data-size", "100k"], 3, "at least 1 MiB"),
    (["--dir", "{p}", "--window", "0.5"], 3, "must be from 1 s"),
    (["--dir", "{p}", "--threshold", "1"], 3, "must be above 1"),
    (["--dir", "{p}", "--files", "0"], 3, "at least 1"),
    (["--dir", "{p}", "--data-size", "100P"], 3, "more than the free space"),
])
def test_bad_input_one_line_and_its_code(parent, args, code, text):
    r = ceiling("probe", *[a.replace("{p}", str(parent)) for a in args], "--duration", "0.1")
    assert r.returncode == code and text in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_slowdown_is_window_median_over_baseline_median_with_p99():
    w = slowdown.window("read", 0, 10, [1.0, 2.0, 3.0, 4.0, 100.0], 1, 0.5, "history")
    assert w.median_s == 3.0 and w.slowdown == 6.0 and w.n == 5 and w.errors == 1
    assert w.p99_s == pytest.approx(96.16)            # numpy's linear interpolation: 4 + 0.96 x 96
    assert w.above(3.0) and not w.above(6.0)
    empty = slowdown.window("read", 0, 10, [], 3, 0.5, "history")
    assert empty.median_s is None and empty.slowdown is None and not empty.above(3.0)


def test_baseline_prefers_history_else_first_hour_only():
    b = slowdown.Baseline({"read": 0.002}, first_hour_s=10)
    b.add(0, "read", 1.0)
    b.add(0, "write", 0.004)
    b.add(5, "write", 0.006)
    b.add(11, "write", 9.0)                           # after the first hour: not part of it
    assert b.of("read") == (0.002, "history")
    assert b.of("write") == (pytest.approx(0.005), "first hour")
    assert b.of("md.stat") == (None, "none")


# -- the history: probe_windows (store version 5) ----------------------------------------------------

def _rows(db: Path, what: str = "count(*)"):
    import sqlite3
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return raw.execute(f"SELECT {what} FROM probe_windows").fetchall()
    finally:
        raw.close()


def test_windows_recorded_and_the_next_run_takes_its_baseline_from_them(parent, tmp_path):
    db = tmp_path / "h.db"
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.3", "--db", str(db))
    assert r.returncode == 0, r.stderr
    printed = sum(1 for line in r.stdout.splitlines() if " slowdown " in line)
    assert printed >= 6 and _rows(db) == [(printed,)]
    assert {k for (k,) in _rows(db, "DISTINCT baseline_kind")} == {"first hour"}
    assert "no baseline in the history yet" in r.stdout
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.3", "--db", str(db))
    assert "baseline from the history" in r.stdout and "(baseline: history)" in r.stdout
    assert "this run's first hour" not in r.stdout
    assert {k for (k,) in _rows(db, "DISTINCT baseline_kind")} == {"first hour", "history"}


def test_no_store_records_nothing(parent, tmp_path):
    db = tmp_path / "h.db"
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1", "--db", str(db), "--no-store")
    assert r.returncode == 0, r.stderr
    assert not db.exists()


def test_retain_drops_windows_older_than_it(parent, tmp_path):
    from ceiling.results.store import Store
    db = tmp_path / "h.db"
    old = time.time() - 100 * 86400
    with Store(db) as s:
        s.save_probe([("elsewhere", "/x", "read", old - 1, old, 1, 0, 0.001, 0.001, None, "none", None),
                      ("elsewhere", "/x", "read", old + 20 * 86400, old + 20 * 86400 + 1, 1, 0, 0.001, 0.001,
                       None, "none", None)])
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1", "--db", str(db), "--retain", "90d")
    assert r.returncode == 0, r.stderr
    ends = [e for (e,) in _rows(db, "end")]
    assert min(ends) > old + 10 * 86400          # the 100-day-old window went, the 80-day-old one stayed
    assert sum(1 for e in ends if e < time.time() - 86400) == 1


def _v5_file(db: Path) -> None:
    import sqlite3
    from ceiling.results.store import Store
    from sample_runs import vm_run                   # a stored run, kept through the upgrade
    with Store(db) as s:
        s.save(vm_run())
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE probe_windows")
    raw.execute("PRAGMA user_version = 5")
    raw.commit()
    raw.close()


def test_a_version_5_history_reads_without_writing_and_upgrades_additively(tmp_path):
    import sqlite3
    from ceiling.results.store import STORE_VERSION, Store
    db = tmp_path / "h.db"
    _v5_file(db)
    before = db.read_bytes()
    with Store(db, readonly=True) as s:
        assert s.probe_windows() == [] and len(s.list()) == 1
    assert db.read_bytes() == before                 # a reader never writes
    with Store(db) as s:
        s.save_probe([("n1", "/d", "read", 1.0, 2.0, 3, 0, 0.001, 0.002, None, "none", None)])
        assert len(s.list()) == 1 and len(s.probe_windows()) == 1
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION       # 6, or later (7: the monitor)
    raw.close()


def test_file_system_gone_is_counted_not_a_crash_and_repaired_after(parent):
    import shutil
    p = start("probe", "--dir", str(parent), *SMALL, "--duration", "60")
    d = probe_dir(parent)
    try:
        shutil.rmtree(d / "pool")            # what a file system that went away looks like to the pool
        (d / "data").unlink()
        os.unlink(d / ".state")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and " errors" not in p.stdout.readline():
            pass
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "md.stat failed: No such file or directory" in err
    assert "checked and repaired at the next start" in out
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.1")
    assert r.returncode == 0, r.stderr
    assert all((d / "pool" / fsprobe_dir.pool_name(i)).stat().st_size == 3901 for i in range(8))


@pytest.mark.parametrize("baseline_s, finding", [(1e-9, True), (1e3, False)])
def test_a_window_above_the_threshold_of_a_history_baseline_is_a_finding(parent, tmp_path, baseline_s, finding):
    import socket
    from ceiling.bench.fsprobe import OPS
    from ceiling.results.store import Store
    db = tmp_path / "h.db"
    d = probe_dir(parent)
    d.mkdir(mode=0o700)
    now = time.time()
    with Store(db) as s:                 # a baseline no real operation is near: 1 ns (every window far above)
        s.save_probe([(socket.gethostname(), os.path.realpath(d), op, now - 3600, now - 3599, 1, 0, baseline_s,
                       baseline_s, None, "first hour", None) for op in OPS])
    r = ceiling("probe", "--dir", str(parent), *SMALL, "--duration", "0.3", "--db", str(db))
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if " slowdown " in x]
    assert lines and all("(baseline: history)" in x for x in lines)
    assert all(("FINDING: above 3x" in x) == finding for x in lines if " n=0" not in x)


def test_default_data_size_is_said_and_kept(parent):
    from ceiling.bench.fsprobe_dir import ProbeDir
    with ProbeDir(str(parent)) as pd:
        size, why = pd.default_size()
    if "O_DIRECT" in why and "refused" not in why:
        assert size == 4 << 30
    else:
        assert size % (1 << 20) == 0 and "10 % of the free space" in why
    (probe_dir(parent) / "data").write_bytes(b"x" * (3 << 20))      # an earlier probe's file keeps its size
    r = ceiling("probe", "--dir", str(parent), *[a for a in SMALL if a not in ("--data-size", "2M")],
                "--duration", "0.1")
    assert r.returncode == 0, r.stderr
    assert "data file of 3 MiB: the data file made by an earlier probe" in r.stdout
    assert not (probe_dir(parent) / ".direct-test").exists()
