"""A scrape of ``ceiling monitor``'s endpoint with 10,000 jobs on the node (simulated: JobRead records
with every field set, as a v2 Slurm job has them) beside one node's series: the time of a whole HTTP GET
of /metrics on loopback through the exporter's real server (report/prometheus.serve_page), median and
slowest of ``--n`` scrapes, and the size of the page. The goal (issue 32) is under 1 s.

    .venv/bin/python benchmarks/monitor_scrape.py [--jobs 10000] [--n 10]
"""
import argparse
import socket
import statistics
import sys
import time
import urllib.request

from ceiling.probes.jobs import JobRead
from ceiling.probes.node_sampler import NodeSampler, rates
from ceiling.report import prometheus
from ceiling.report.prometheus_monitor import MonitorCollector


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=10)
    a = ap.parse_args()
    ns = NodeSampler("/")
    r0 = ns.read()
    time.sleep(0.2)
    node = rates(r0, ns.read())
    jobs = [(JobRead(str(1_000_000 + i), f"{1_000_000 + i}@{i}:0", "slurm-v2", 0.0, uid=1000 + i % 500,
                     user=f"user{i % 500}", cpus=4, cpu_list="0-3", cpu_s=1e4 + i, mem_bytes=2 << 30,
                     mem_peak_bytes=3 << 30, read_bytes=1 << 30, write_bytes=1 << 29),
             {"cpus": 4.0, "cpu_busy": 3.5, "mem": float(2 << 30)}) for i in range(a.jobs)]
    col = MonitorCollector()
    col.update(node, jobs, 0.0, 1)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = prometheus.serve_page(("127.0.0.1", port), col.page)
    times = []
    try:
        for i in range(a.n):
            if i % 2 == 0:                   # every other scrape follows a new sample: its page is made in it
                col.update(node, jobs, 0.0, i + 2)
            t = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
                body = resp.read()
            times.append(time.perf_counter() - t)
    finally:
        prometheus.stop(server)
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    print(f"{a.jobs} jobs, {series} series, {len(body) / 1e6:.2f} MB per scrape: median "
          f"{statistics.median(times):.3f} s, slowest {max(times):.3f} s of {a.n} scrapes (HTTP GET on loopback, the "
          f"exporter's server; every other one makes the page after a new sample: first {times[0]:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
