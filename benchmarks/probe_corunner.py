"""ceiling probe under a co-runner: the slowdown factor should rise in the loaded windows and fall back after.

    .venv/bin/python benchmarks/probe_corunner.py [--dir /var/tmp] [--idle 8] [--load 4] [--after 6]

One probe (1 s windows, an iteration every 0.1 s, --no-store so its baseline is this run's first hour),
idle for --idle seconds, then a co-runner on the same file system for --load seconds (fio: 1 MiB
random reads and writes, direct, libaio with 32 requests in flight, two jobs: what a parallel job's
checkpoint or restart does to a shared device), then idle again for --after seconds. Printed:
each window's slowdown factor for read and write, with the phase it fell in. Timing-dependent, so not a
test (issue 31's goal: seen within two windows, back after).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LINE = re.compile(r"^(\d\d:\d\d:\d\d)-(\d\d:\d\d:\d\d)Z (\S+)\s+n=\d+.* slowdown ([0-9.]+)x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--idle", type=float, default=8)
    ap.add_argument("--load", type=float, default=4)
    ap.add_argument("--after", type=float, default=6)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ceiling-probe-corunner-", dir=a.dir)
    try:
        probe = subprocess.Popen([sys.executable, "-m", "ceiling", "probe", "--dir", d, "--data-size", "256M",
                                  "--files", "200", "--interval", "0.1", "--window", "1", "--listen", "off",
                                  "--no-store"], stdout=subprocess.PIPE, text=True)
        for line in probe.stdout:
            if "one operation in flight" in line:
                break
        t_start = time.time()
        time.sleep(a.idle)
        t_load = time.time()
        co = subprocess.Popen(["fio", "--name=co", f"--directory={d}", "--rw=randrw", "--bs=1M", "--direct=1",
                               "--ioengine=libaio", "--iodepth=32", "--size=512M", "--numjobs=2", "--time_based",
                               f"--runtime={a.load}", "--output=/dev/null"])
        co.wait()
        t_after = time.time()
        time.sleep(a.after)
        probe.send_signal(signal.SIGTERM)
        out = probe.communicate()[0]
    finally:
        shutil.rmtree(d, ignore_errors=True)
    day = time.strftime("%Y-%m-%d", time.gmtime(t_start))
    print(f"{'window end':>10} {'phase':6} {'read':>7} {'write':>7}")
    rows: dict = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and m.group(3) in ("read", "write"):
            rows.setdefault(m.group(2), {})[m.group(3)] = float(m.group(4))
    for end, f in sorted(rows.items()):
        t = time.mktime(time.strptime(f"{day} {end}", "%Y-%m-%d %H:%M:%S")) - time.timezone
        phase = "idle" if t <= t_load else ("LOAD" if t <= t_after + 1 else "after")
        print(f"{end:>10} {phase:6} {f.get('read', float('nan')):7.2f} {f.get('write', float('nan')):7.2f}")
    os.sync()


if __name__ == "__main__":
    main()
