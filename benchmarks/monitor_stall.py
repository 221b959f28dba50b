"""A real job whose I/O stalls while the file system's slowdown rises, and `ceiling monitor --report` naming both
over the same seconds (issue 32's goal, end to end with the real parts).

    .venv/bin/python benchmarks/monitor_stall.py [--dir /var/tmp] [--idle 40] [--load 30] [--after 40]

One history file, two writers, as on a node: `ceiling probe` (2 s windows, an iteration every 0.1 s; its
baseline is this run's first hour) and `ceiling monitor --interval 1s -- JOB`, where JOB writes 1 MiB blocks
with fdatasync to a file beside the probe's, all along. After --idle seconds a co-runner loads the same device
for --load seconds (fio: 1 MiB random reads and writes, direct, libaio, 32 requests in flight, two jobs: another
job's checkpoint), then --after seconds of quiet. Then `ceiling monitor --report --job cmd-PID --segment 5s`
over the run, printed whole: the stall must fall in the loaded seconds. Timing-dependent (how much the
co-runner slows this device), so a benchmark, not a test; fio from Debian (benchmarks/install-debian-peers.sh).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

JOB = r"""
import os, sys, time
end = time.monotonic() + float(sys.argv[2])
buf = os.urandom(1 << 20)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
i = 0
while time.monotonic() < end:
    os.pwrite(fd, buf, (i % 256) << 20)
    os.fdatasync(fd)
    i += 1
os.close(fd)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--idle", type=float, default=40)
    ap.add_argument("--load", type=float, default=30)
    ap.add_argument("--after", type=float, default=40)
    a = ap.parse_args()
    if not shutil.which("fio"):
        sys.exit("monitor_stall: needs fio (apt-get install fio)")
    d = tempfile.mkdtemp(prefix="ceiling-monitor-stall-", dir=a.dir)
    db = os.path.join(d, "history.db")
    total = a.idle + a.load + a.after
    procs = []
    try:
        probe = subprocess.Popen([sys.executable, "-m", "ceiling", "probe", "--dir", d, "--data-size", "256M",
                                  "--files", "200", "--interval", "0.1", "--window", "2", "--listen", "off",
                                  "--db", db], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(probe)
        for line in probe.stdout:
            if "one operation in flight" in line or "Z " in line:
                break
        t0 = time.time()
        mon = subprocess.Popen([sys.executable, "-m", "ceiling", "monitor", "--interval", "1s", "--db", db,
                                "--listen", "off", "--", sys.executable, "-c", JOB, os.path.join(d, "job.dat"),
                                str(total)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(mon)
        time.sleep(a.idle)
        load0 = time.time()
        subprocess.run(["fio", "--name=corunner", f"--directory={d}", "--rw=randrw", "--bs=1M", "--size=512M",
                        "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=2", f"--runtime={a.load:g}",
                        "--time_based", "--group_reporting", "--output-format=terse"], capture_output=True, check=True)
        load1 = time.time()
        mon.wait(timeout=total + 120)
        probe.send_signal(signal.SIGTERM)
        probe.wait(timeout=60)
        since = f"{int(time.time() - t0 + 30)}s"
        r = subprocess.run([sys.executable, "-m", "ceiling", "monitor", "--report", "--db", db, "--since", since,
                            "--json"], capture_output=True, text=True, check=True)
        job = next(j["id"] for j in json.loads(r.stdout)["jobs"] if j["id"].startswith("cmd-"))
        rep = subprocess.run([sys.executable, "-m", "ceiling", "monitor", "--report", "--db", db, "--since", since,
                              "--job", job, "--segment", "5s"], capture_output=True, text=True, check=True).stdout
        print(rep)
        print(f"co-runner from {time.strftime('%H:%M:%S', time.gmtime(load0))} to "
              f"{time.strftime('%H:%M:%S', time.gmtime(load1))} UTC")
        res = json.loads(subprocess.run([sys.executable, "-m", "ceiling", "monitor", "--report", "--db", db, "--since",
                                         since, "--job", job, "--segment", "5s", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
        inside = [s for s in res["stalls"] if s["start"] < load1 + 5 and s["end"] > load0]
        print(f"stalls named: {len(res['stalls'])}, of them overlapping the co-runner: {len(inside)}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run([sys.executable, "-m", "ceiling", "probe", "--dir", d, "--clean"], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
