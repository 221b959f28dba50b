"""What ``ceiling monitor`` costs the node: its own CPU time (utime + stime of /proc/PID/stat, every
thread) over a steady span that leaves out its start (imports, first reads), as a share of one CPU,
and its resident memory (VmRSS) sampled through the span, to see it flat.

    .venv/bin/python benchmarks/monitor_cost.py [--interval 10] [--seconds 240] [--warmup 15] [--no-store]

The monitor runs as users run it: history on (a temporary file), HTTP exporter on loopback, this node's
Slurm cgroups (none here: a node with jobs reads a few more files per job). Prints one line per RSS
reading and a summary (with the RSS's least-squares slope over the second half of the span: flat is
about 0 KiB/h); nothing is asserted (the goal, 0.5% of one CPU at 10 s, is the reader's check).
--no-store runs it without the history, to tell SQLite's page cache (2 MiB by default, filled as the
history grows) from the monitor's own memory.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    fields = st[st.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def slope(xs, ys) -> float:
    """Least-squares slope of ys over xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--no-store", action="store_true", help="no history: tells SQLite's page cache (2 MiB by "
                    "default, filled as the history grows) from the monitor's own memory")
    a = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with tempfile.TemporaryDirectory() as t:
        # its lines to a file: a pipe read only at the end fills (64 KiB, ~380 lines) and blocks the monitor
        log = open(os.path.join(t, "out"), "w+")
        p = subprocess.Popen([sys.executable, "-m", "ceiling", "monitor", "--interval", f"{a.interval:g}",
                              *(["--no-store"] if a.no_store else ["--db", os.path.join(t, "h.db")]),
                              "--listen", f"127.0.0.1:{port}"],
                             stdout=log, stderr=subprocess.STDOUT, text=True)
        time.sleep(a.warmup)
        c0, w0 = cpu_s(p.pid), time.monotonic()
        rss, at = [], []
        while time.monotonic() - w0 < a.seconds:
            time.sleep(min(30.0, a.seconds - (time.monotonic() - w0)) or 0.01)
            rss.append(rss_kib(p.pid))
            at.append(time.monotonic() - w0)
            print(f"  t={time.monotonic() - w0:6.0f} s  cpu {cpu_s(p.pid) - c0:7.3f} s  rss {rss[-1] / 1024:.1f} MiB",
                  flush=True)
        c1, w1 = cpu_s(p.pid), time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        log.seek(0)
        out = log.read()
        log.close()
    used, wall = c1 - c0, w1 - w0
    print(f"monitor at {a.interval:g} s: {used:.2f} s of CPU over {wall:.0f} s = {used / wall * 100:.3f}% of one CPU "
          f"(/proc/PID/stat, {TICK} ticks/s: resolution {1 / TICK:.2f} s); RSS {min(rss) / 1024:.1f}-"
          f"{max(rss) / 1024:.1f} MiB over {len(rss)} readings")
    half = len(rss) // 2
    if len(rss) - half >= 3:
        print(f"RSS slope over the second half ({at[half]:.0f}-{at[-1]:.0f} s): "
              f"{slope(at[half:], rss[half:]) * 3600:+.0f} KiB/h; over the whole span "
              f"{slope(at, rss) * 3600:+.0f} KiB/h")
    print("its own statement: " + [x for x in out.splitlines() if "own CPU time" in x][-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
