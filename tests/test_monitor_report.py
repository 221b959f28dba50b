"""`ceiling monitor --report` (issue 32): a job's time line in 10-minute segments from the history, the
jobs of those minutes compared, and the probe's slowdown over the same minutes beside them; a job whose
I/O stalls while the probe's factor rises is named with both, over the same minutes. The histories are
real SQLite files made through the store, as the monitor and the probe write them."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from ceiling.analysis import monitor_report as M
from ceiling.results.store import Store

SEG = 600.0


def ceiling(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=timeout)


def _history(path, t0, stall=True):
    """Two hours of node vm from t0 (on a segment) at 10 s: job 1234 writes 100 MB/s, 5 MB/s from 60 to 80 min;
    job 99 computes only; the probe's 10-minute windows are at 1x, 8x on write from 60 to 80 min (only
    where ``stall``: else 1x throughout)."""
    samples, jobs = [], []
    for i in range(1, 721):
        t = t0 + i * 10
        minute = (t - t0) / 60
        samples += [("vm", "", "cpu.user", t, 10, 0.5), ("vm", "", "cpu.iowait", t, 10, 0.05),
                    ("vm", "", "disk.vda.write_Bps", t, 10, 90e6), ("vm", "", "disk.vdb.write_Bps", t, 10, 10e6),
                    ("vm", "", "net.lo.rx_Bps", t, 10, 1e9), ("vm", "", "net.eth0.rx_Bps", t, 10, 1e6),
                    ("vm", "", "mem.used", t, 10, 8 * 2**30)]
        slow = 60 < minute <= 80
        samples += [("vm", "1234:a", "cpu_busy", t, 10, 1.0 if not slow else 0.1),
                    ("vm", "1234:a", "write_Bps", t, 10, 5e6 if slow else 100e6),
                    ("vm", "1234:a", "read_Bps", t, 10, 0.0), ("vm", "1234:a", "mem", t, 10, 2**30)]
        if minute <= 30:
            samples += [("vm", "99:b", "cpu_busy", t, 10, 2.0), ("vm", "99:b", "mem", t, 10, 4 * 2**30)]
    jobs = [("vm", "1234:a", "1234", "slurm-v2", 1000, "alice", "0-1", t0, t0 + 7200, "", None),
            ("vm", "99:b", "99", "slurm-v2", 1001, "bob", "2-3", t0, t0 + 1800, "", None)]
    windows = []
    for k in range(12):
        for op in ("read", "write"):
            f = 8.0 if stall and op == "write" and k in (6, 7) else 1.0
            windows.append(("vm", "/scratch", op, t0 + k * SEG, t0 + (k + 1) * SEG, 600, 0, 0.001 * f, 0.002 * f,
                            0.001, "history", f))
    with Store(path) as s:
        s.save_monitor("vm", samples, jobs)
        s.save_probe(windows)


@pytest.fixture
def hist(tmp_path):
    t0 = (time.time() // SEG - 15) * SEG           # on a segment, 2.5 hours ago
    db = tmp_path / "h.db"
    _history(db, t0)
    return db, t0


def test_a_stalled_job_is_named_with_the_probes_slowdown_over_the_same_minutes(hist):
    db, t0 = hist
    r = ceiling("monitor", "--report", "--job", "1234", "--db", str(db), "--since", "3h", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["job"]["id"] == "1234" and len(res["segments"]) == 12
    (st,) = res["stalls"]
    assert (st["start"] - t0, st["end"] - t0) == (3600, 4800)
    assert st["io_Bps"] == pytest.approx(5e6) and st["usual_Bps"] == pytest.approx(100e6)
    assert st["probe"] == {"read": 1.0, "write": 8.0}
    text = ceiling("monitor", "--report", "--job", "1234", "--db", str(db), "--since", "3h").stdout
    hhmm = time.strftime("%H:%M", time.gmtime(t0 + 3600)), time.strftime("%H:%M", time.gmtime(t0 + 4800))
    line = next(ln for ln in text.splitlines() if ln.startswith("I/O stall"))
    assert f"{hhmm[0]} to " in line and f"{hhmm[1]} UTC" in line and "5 MB/s" in line and "100 MB/s" in line
    assert "write 8x" in line and "file system was slow for everyone" in line
    assert "Jobs in these minutes:" in text and "alice" in text and "bob" in text


def test_a_drop_while_the_probe_stays_at_1_is_no_stall(tmp_path):
    t0 = (time.time() // SEG - 15) * SEG
    db = tmp_path / "h.db"
    _history(db, t0, stall=False)
    res = json.loads(ceiling("monitor", "--report", "--job", "1234", "--db", str(db), "--since", "3h",
                             "--json").stdout)
    assert res["stalls"] == [] and len(res["segments"]) == 12


def test_the_node_report_sums_disks_and_interfaces_but_loopback():
    t0 = 1_800_000_000.0
    samples = [("vm", "", "disk.vda.write_Bps", t0 + 10, 10, 90e6), ("vm", "", "disk.vdb.write_Bps", t0 + 10, 10, 10e6),
               ("vm", "", "net.lo.rx_Bps", t0 + 10, 10, 1e9), ("vm", "", "net.eth0.rx_Bps", t0 + 10, 10, 1e6),
               ("vm", "", "disk.vda.write_Bps", t0 + 20, 10, 50e6)]
    res = M.report(samples, [], [], t0, t0 + 600)
    (seg,) = res["segments"]
    assert seg["mean"]["disk.write"] == pytest.approx(75e6) and seg["max"]["disk.write"] == pytest.approx(100e6)
    assert seg["mean"]["net.rx"] == pytest.approx(1e6) and seg["probe"] == {}
    assert any("No probe windows" in ln for ln in M.lines(res))


def test_an_unknown_job_and_bad_options_are_one_line_each(hist, tmp_path):
    db, _ = hist
    for args, code, words in ((["--job", "4321", "--db", str(db)], 2, "no job '4321' in the history"),
                              (["--db", str(tmp_path / "none.db")], 4, "no such file"),
                              (["--threshold", "0.5", "--db", str(db)], 3, "must be above 1"),
                              (["--since", "soon", "--db", str(db)], 2, "--since")):
        r = ceiling("monitor", "--report", *args)
        err = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == code and len(err) == 1 and words in err[0], (args, r.returncode, r.stderr)


def test_a_real_command_monitored_then_reported(tmp_path):
    db = tmp_path / "h.db"
    r = ceiling("monitor", "--interval", "0.5s", "--db", str(db), "--listen", "off", "--",
                sys.executable, "-c", "import time; x = sum(range(10**7)); time.sleep(1.5)")
    assert r.returncode == 0, r.stderr
    r = ceiling("monitor", "--report", "--db", str(db), "--since", "1h")
    assert r.returncode == 0, r.stderr
    assert "ceiling monitor --report: the node" in r.stdout and "CPU user" in r.stdout
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("cmd-"))
    job = line.split()[0]
    r = ceiling("monitor", "--report", "--db", str(db), "--since", "1h", "--job", job, "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["job"]["kind"] == "command" and res["segments"] and "cpu_busy" in res["segments"][-1]["mean"]


def test_shorter_segments_for_a_short_job(hist):
    db, t0 = hist
    res = json.loads(ceiling("monitor", "--report", "--job", "1234", "--db", str(db), "--since", "3h", "--segment",
                             "5m", "--json").stdout)
    assert res["segment_s"] == 300 and len(res["segments"]) == 24
    (st,) = res["stalls"]
    assert (st["start"] - t0, st["end"] - t0) == (3600, 4800)
