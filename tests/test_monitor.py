"""ceiling monitor end to end on this node (its real /proc), with recorded Slurm cgroup trees for the jobs
(tests/fixtures/slurm_cgroups): the history's rows, retention and minute means, SIGTERM, -- CMD's exit
status, and the bad-input table. No timing figure is asserted."""
import atexit
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

FIX = Path(__file__).parent / "fixtures" / "slurm_cgroups"
HOME = tempfile.mkdtemp(prefix="ceiling-monitor-test-")
atexit.register(shutil.rmtree, HOME, True)          # each process that imports this module made one: removed
ENV = {**os.environ, "XDG_DATA_HOME": HOME}


def ceiling(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "ceiling", "monitor", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def rows(db: Path, sql: str):
    raw = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return raw.execute(sql).fetchall()
    finally:
        raw.close()


def test_samples_the_node_and_the_slurm_jobs_into_the_history(tmp_path):
    db = tmp_path / "h.db"
    r = ceiling("--interval", "0.2", "--duration", "1", "--db", str(db), "--listen", "off",
                "--slurm-root", str(FIX / "v2"))
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if "| cpu user" in x]
    assert len(lines) >= 4 and all(x.endswith("jobs 2") for x in lines), r.stdout
    assert "2 Slurm job(s) now (slurm-v2)" in r.stdout and "own CPU time" in r.stdout
    node = {m for (m,) in rows(db, "SELECT DISTINCT metric FROM monitor_samples WHERE job = ''")}
    assert {"cpu.user", "cpu.system", "cpu.iowait", "cpu.steal", "mem.used", "load.1"} <= node
    assert any(m.startswith("net.") for m in node)
    jobs = rows(db, "SELECT job_id, kind, uid, cpus FROM monitor_jobs ORDER BY job_id")
    assert jobs == [("4242", "slurm-v2", 1000, "0-3"), ("4243", "slurm-v2", 1001, "4-7,12")]
    mem = rows(db, "SELECT DISTINCT value FROM monitor_samples WHERE job LIKE '4242@%' AND metric = 'mem'")
    assert mem == [(2147483648.0,)]
    steps = rows(db, "SELECT DISTINCT step FROM monitor_samples")
    assert all(0.1 < s < 1 for (s,) in steps)


def test_sigterm_mid_run_stops_after_the_sample_with_every_row_recorded(tmp_path):
    db = tmp_path / "h.db"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "monitor", "--interval", "0.1", "--db", str(db),
                          "--listen", "off"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    # a sample's line starts with its time; its CPU part is left out where the interval saw no tick of it
    sample = re.compile(r"^\d\d:\d\d:\d\dZ \| ")
    seen = 0
    while seen < 5:
        if sample.match(p.stdout.readline()):
            seen += 1
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    printed = seen + sum(1 for x in out.splitlines() if sample.match(x))
    assert "stopped on SIGTERM after" in out and f"after {printed} samples" in out
    assert rows(db, "SELECT count(DISTINCT t) FROM monitor_samples") == [(printed,)]     # none lost
    n = int(out.split("; ")[1].split()[0])
    assert rows(db, "SELECT count(*) FROM monitor_samples") == [(n,)]


def test_command_its_tree_as_a_job_and_its_exit_status(tmp_path):
    db = tmp_path / "h.db"
    r = ceiling("--interval", "0.2", "--db", str(db), "--listen", "off", "--",
                sys.executable, "-c", "import sys,time;x=bytearray(32<<20);time.sleep(0.8);print('out');sys.exit(7)")
    assert r.returncode == 7, r.stderr
    assert r.stdout == "out\n"                        # standard output is the command's; the monitor's on stderr
    assert "exited with status 7" in r.stderr
    (job, kind, status, cmd), = rows(db, "SELECT job, kind, status, command FROM monitor_jobs")
    assert kind == "command" and status == 7 and "sys.exit(7)" in cmd
    mem = rows(db, f"SELECT max(value) FROM monitor_samples WHERE job = '{job}' AND metric = 'mem'")
    assert mem[0][0] > 32 << 20


def test_command_killed_by_a_signal_is_128_plus_it(tmp_path):
    r = ceiling("--interval", "0.2", "--no-store", "--listen", "off", "--", "sh", "-c", "kill -9 $$")
    assert r.returncode == 137, r.stderr


def _port_taken():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


@pytest.mark.parametrize("args, code, text", [
    (["--interval", "0"], 3, "--interval '0': must be from 0.1 s"),
    (["--interval", "ten"], 2, "not a duration"),
    (["--retain", "1s"], 3, "--retain"),
    (["--textfile", "/nonexistent/dir"], 4, "not a directory"),
    (["--listen", "9465"], 2, "not ADDRESS:PORT"),
    (["--"], 2, "no command after --"),
    (["--duration", "1", "--", "true"], 2, "--duration with -- CMD"),
    (["--", "/nonexistent/cmd"], 127, "command not found"),
    (["--", "/dev/null"], 126, "monitor: /dev/null: "),
])
def test_bad_input_is_one_line_and_its_code(tmp_path, args, code, text):
    r = ceiling("--duration", "0.2", "--db", str(tmp_path / "h.db"), "--listen", "off", *args) if "--" not in args \
        else ceiling("--db", str(tmp_path / "h.db"), "--listen", "off", *args)
    assert r.returncode == code and text in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_port_in_use_is_exit_15_before_a_sample(tmp_path):
    s = _port_taken()
    try:
        r = ceiling("--duration", "0.2", "--db", str(tmp_path / "h.db"), "--listen", f"127.0.0.1:{s.getsockname()[1]}")
    finally:
        s.close()
    assert r.returncode == 15 and "in use" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "| cpu user" not in r.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes a read-only file")
def test_read_only_history_is_exit_4_before_a_sample(tmp_path):
    db = tmp_path / "h.db"
    assert ceiling("--duration", "0.2", "--db", str(db), "--listen", "off").returncode == 0
    os.chmod(db, 0o444)
    r = ceiling("--duration", "0.2", "--db", str(db), "--listen", "off")
    assert r.returncode == 4 and r.stderr.count("\n") == 1 and str(db) in r.stderr, r.stderr
    assert "| cpu user" not in r.stdout


def test_history_on_a_network_file_system_is_refused(tmp_path):
    from ceiling.verbs.monitor import shared_fs
    d = tmp_path / "home"
    d.mkdir()
    st = os.stat(d)
    mi = tmp_path / "mountinfo"
    mi.write_text(f"1 0 0:1 / / rw - ext4 /dev/sda1 rw\n"
                  f"2 1 {os.major(st.st_dev)}:{os.minor(st.st_dev)} / {d} rw - nfs4 srv:/home rw\n")
    assert shared_fs(str(d / "sub" / "h.db"), str(mi)) == "nfs4 (srv:/home)"
    mi.write_text(f"2 1 {os.major(st.st_dev)}:{os.minor(st.st_dev)} / {d} rw - xfs /dev/sdb rw\n")
    assert shared_fs(str(d / "h.db"), str(mi)) is None


# -- the history: store version 7 --------------------------------------------------------------------

def test_minute_means_beyond_full_and_retention():
    from ceiling.results.store import Store
    with tempfile.TemporaryDirectory() as t:
        db = Path(t) / "h.db"
        now = time.time()
        old = (now - 2 * 86400) // 60 * 60          # two days ago, on a minute
        s10 = [("n", "", "cpu.user", old + 10 * i + 10, 10.0, float(i)) for i in range(12)]   # two minutes
        ancient = [("n", "", "cpu.user", now - 100 * 86400, 10.0, 1.0)]
        fresh = [("n", "", "cpu.user", now - 5, 10.0, 9.0)]
        other = [("m", "", "cpu.user", old + 10, 10.0, 3.0)]
        with Store(db) as s:
            s.save_monitor("n", s10 + ancient + fresh + other, [])
            s.save_monitor("n", [], [], retain_before=now - 90 * 86400, downsample_before=now - 86400)
            got = s.monitor_samples("n")
            assert [(t - old, step, v) for _, _, _, t, step, v in got] == [(60, 60, 2.5), (120, 60, 8.5),
                                                                           (now - 5 - old, 10, 9.0)]
            assert len(s.monitor_samples("m")) == 1       # another node's rows are its own to thin


def test_a_version_6_history_reads_without_writing_and_upgrades_additively(tmp_path):
    from ceiling.results.store import STORE_VERSION, Store
    db = tmp_path / "h.db"
    with Store(db) as s:
        s.save_probe([("n1", "/d", "read", 1.0, 2.0, 3, 0, 0.001, 0.002, None, "none", None)])
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE monitor_samples")
    raw.execute("DROP TABLE monitor_jobs")
    raw.execute("PRAGMA user_version = 6")
    raw.commit()
    raw.close()
    before = db.read_bytes()
    with Store(db, readonly=True) as s:
        assert s.monitor_samples() == [] and s.monitor_jobs() == [] and len(s.probe_windows()) == 1
    assert db.read_bytes() == before
    with Store(db) as s:
        s.save_monitor("n1", [("n1", "", "load.1", 5.0, 10.0, 0.5)],
                       [("n1", "7@1:2", "7", "slurm-v2", 1000, "u", "0-3", 1.0, 5.0, "", None)])
        assert len(s.monitor_samples()) == 1 and len(s.probe_windows()) == 1
    assert STORE_VERSION == 7 and rows(db, "PRAGMA user_version") == [(7,)]


def test_sigterm_while_a_write_waits_for_the_history_loses_nothing(tmp_path):
    db = tmp_path / "h.db"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "monitor", "--interval", "0.2", "--db", str(db),
                          "--listen", "off"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    seen = 0
    while seen < 2:
        if "| cpu user" in p.stdout.readline():
            seen += 1
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")              # another writer holds the history: the next write waits
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)                 # mid-write
    time.sleep(0.5)
    other.execute("ROLLBACK")
    other.close()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    printed = seen + sum(1 for x in out.splitlines() if "| cpu user" in x)
    assert "stopped on SIGTERM" in out and "NOT recorded" not in out
    assert rows(db, "SELECT count(DISTINCT t) FROM monitor_samples") == [(printed,)]


def test_sigterm_goes_to_the_command_and_its_status_is_the_monitors(tmp_path):
    db = tmp_path / "h.db"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "monitor", "--interval", "0.2", "--db", str(db),
                          "--listen", "off", "--", "sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV)
    while "| cpu user" not in p.stderr.readline():
        pass
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert "exited with status 143" in err
    assert rows(db, "SELECT status FROM monitor_jobs") == [(143,)]


def test_the_monitors_history_connection_keeps_a_small_page_cache(tmp_path, monkeypatch, capsys):
    # appends only: SQLite's default 2 MiB page cache grew the monitor's RSS 1.5 MiB over an hour at 10 s
    from ceiling import cli
    from ceiling.results.store import Store
    from ceiling.verbs.monitor import CACHE_KIB
    with Store(tmp_path / "h.db") as store:
        store.limit_cache(CACHE_KIB)
        assert store._db.execute("PRAGMA cache_size").fetchone()[0] == -CACHE_KIB == -256
    seen = []
    real = Store.limit_cache
    monkeypatch.setattr(Store, "limit_cache", lambda self, kib: (seen.append(kib), real(self, kib)))
    assert cli.main(["monitor", "--duration", "0.3", "--interval", "0.1", "--db", str(tmp_path / "m.db"),
                     "--listen", "off"]) == 0
    assert seen == [CACHE_KIB]
