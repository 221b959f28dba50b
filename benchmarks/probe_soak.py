"""ceiling probe over a long run: its CPU use, its memory over time, and the history kept bounded.

    .venv/bin/python benchmarks/probe_soak.py [--dir /var/tmp] [--duration 1h] [--every 30]
        [--window 1m] [--retain 10m]

One probe at its defaults (an iteration every second, a 4 GiB data file where O_DIRECT works: set
--data-size smaller on a small disk), 1-minute windows, its own history file (a new SQLite file in the
probe directory's parent, so the user's history is untouched) with ``--retain``, run for --duration.
Every --every seconds: the probe's resident set (VmRSS) and CPU time (utime + stime from
/proc/PID/stat), and the number of window rows in the history. Printed: the RSS curve (first sample after
the first window, median, max, last; and the least-squares slope over the second half, in KiB per hour),
the CPU used as a share of one CPU over the whole run, and the history's rows (they must stop growing
once the retention is reached: the retention bounds the table), and each operation's slowdown factors
over the windows. Issue 31's goals: at most 0.5 % of one CPU, memory flat over one hour, history growth
bounded by retention, and a factor of 1.0 +- 0.2 on an idle file system (the baseline here is the run's
own first hour, so the windows after the first compare the file system with itself a few minutes earlier).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from ceiling.units import parse_seconds

WINDOW = re.compile(r"^\S+Z (\S+)\s+n=\d+.* slowdown ([0-9.]+)x")


def sample(pid: int):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])          # utime, stime (fields 14 and 15)
    return rss, ticks / os.sysconf("SC_CLK_TCK")


def rows(db: str) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM probe_windows").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return -1


def slope_kib_per_hour(ts, ys) -> float:
    n = len(ts)
    if n < 2:
        return float("nan")
    mt, my = sum(ts) / n, sum(ys) / n
    den = sum((t - mt) ** 2 for t in ts)
    return (sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den) * 3600 if den else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--duration", default="1h")
    ap.add_argument("--every", type=float, default=30)
    ap.add_argument("--window", default="1m")
    ap.add_argument("--retain", default="10m")
    ap.add_argument("--data-size", default=None)
    a = ap.parse_args()
    duration = parse_seconds(a.duration, what="--duration")
    top = tempfile.mkdtemp(prefix="ceiling-probe-soak-", dir=a.dir)
    db = os.path.join(top, "history.db")
    cmd = [sys.executable, "-m", "ceiling", "probe", "--dir", top, "--window", a.window, "--listen", "off",
           "--db", db, "--retain", a.retain, "--duration", f"{int(duration)}s"]
    if a.data_size:
        cmd += ["--data-size", a.data_size]
    log = os.path.join(top, "probe.out")
    out = open(log, "w")
    probe = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
    points = []
    try:
        while probe.poll() is None:             # preparation done when the loop starts
            with open(log) as f:
                if "one operation in flight" in f.read():
                    break
            time.sleep(0.5)
        t0 = time.monotonic()
        _, cpu0 = sample(probe.pid)
        while probe.poll() is None:
            time.sleep(a.every)
            try:
                rss, cpu = sample(probe.pid)
            except (OSError, StopIteration):
                break
            points.append((time.monotonic() - t0, rss, cpu, rows(db)))
            t, r, c, n = points[-1]
            print(f"{t:8.0f} s  RSS {r / 1024:7.2f} MiB  CPU {c - cpu0:7.2f} s  history rows {n}", flush=True)
        probe.wait()
    except KeyboardInterrupt:
        probe.send_signal(signal.SIGTERM)
        probe.wait()
    finally:
        out.close()
    try:
        if len(points) < 4:
            print("too few samples for a curve")
            return
        t_end, _, cpu_end, _ = points[-1]
        settled = [p for p in points if p[0] >= 120] or points
        rss = [p[1] for p in settled]
        half = settled[len(settled) // 2:]
        print(f"\nprobe: {' '.join(cmd[3:])}")
        print(f"samples {len(points)} over {t_end / 60:.1f} min, every {a.every:g} s")
        print(f"RSS (KiB) after 2 min {rss[0]}, median {statistics.median(rss):.0f}, max {max(rss)}, last {rss[-1]}; "
              f"slope over the second half {slope_kib_per_hour([p[0] for p in half], [p[1] for p in half]):+.0f} "
              "KiB/h")
        print(f"CPU {cpu_end - cpu0:.2f} s in {t_end:.0f} s: {(cpu_end - cpu0) / t_end:.3%} of one CPU")
        counts = [p[3] for p in points]
        print(f"history rows: first {counts[0]}, max {max(counts)}, last {counts[-1]} (retention {a.retain})")
        factors: dict = {}
        with open(log) as f:
            for line in f:
                m = WINDOW.match(line)
                if m:
                    factors.setdefault(m.group(1), []).append(float(m.group(2)))
        print("slowdown factor per window (the first window is the baseline's own; goal for an idle file system: "
              "1.0 +- 0.2):")
        for op, fs in factors.items():
            rest = fs[1:] or fs
            inside = sum(1 for x in rest if 0.8 <= x <= 1.2)
            print(f"  {op:<9} windows {len(rest)}  min {min(rest):.2f}  median {statistics.median(rest):.2f}  "
                  f"max {max(rest):.2f}  within 0.8-1.2: {inside}/{len(rest)}")
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
