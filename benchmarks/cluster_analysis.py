"""Cluster mode's analysis at scale: rank 0's work for N simulated nodes
(default 10,000), timed, with the memory it held (issue 13: under 5 s).

    PYTHONPATH=src python benchmarks/cluster_analysis.py [--nodes 10000]

Each node is a digest as a rank sends it (analysis/cluster.NodeDigest through
its JSON form): the headline metrics of `ceiling run` with a value drawn
around a plausible median (a few nodes slow), the 14 inventory keys (a few
nodes on another kernel or BIOS), and two or three warnings per node, a
failure on a few. Timed: decoding the digests and adding them (the gather's
part), the uniformity and the findings, the cluster run (median metrics),
the terminal report and the JSON document. Not a test: the figure depends on
the machine.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time

from ceiling.analysis.cluster import Cluster, NodeDigest
from ceiling.machine.inventory import KEYS
from ceiling.report import terminal
from ceiling.results import jsonio
from ceiling.results.model import Job, Node, Run

METRICS = {  # name: (median, unit, better)
    "clock.single": (3.2, "GHz", "higher"), "clock.all": (3.0, "GHz", "higher"),
    "flops.dp.node": (5200.0, "Gflop/s", "higher"), "dgemm.node": (4400.0, "Gflop/s", "higher"),
    "stream.triad": (380.0, "GB/s", "higher"), "stream.copy": (350.0, "GB/s", "higher"),
    "latency.l1": (1.2, "ns", "lower"), "latency.l2": (4.0, "ns", "lower"), "latency.l3": (15.0, "ns", "lower"),
    "latency.dram": (110.0, "ns", "lower"), "c2c.l3": (30.0, "ns", "lower"), "c2c.socket": (90.0, "ns", "lower"),
    "c2c.cross_socket": (140.0, "ns", "lower"), "bandwidth.l1": (12000.0, "GB/s", "higher"),
    "bandwidth.dram": (370.0, "GB/s", "higher"),
}


def digests(n: int, seed: int = 1):
    rng = random.Random(seed)
    for i in range(n):
        slow = rng.random() < 0.003
        metrics = {}
        for name, (med, unit, better) in METRICS.items():
            v = med * rng.gauss(1.0, 0.01) * ((0.8 if better == "higher" else 1.25) if slow else 1.0)
            metrics[name] = {"value": v, "unit": unit, "better": better,
                             "peak": [med * 1.1, unit,
                                      "2 sockets × 64 cores × 3.2 GHz × 16"] if "flops" in name else None}
        inv = {k: f"{k}-A" for k in KEYS}
        if rng.random() < 0.002:
            inv["kernel"] = "kernel-B"
        if rng.random() < 0.001:
            inv["bios"] = "bios-B"
        problems = [("limits.memlock", "warn", "Locked-memory limit is low"),
                    ("irq.balance", "warn", f"device interrupts at {rng.randint(100, 900)}/s")]
        if slow:
            problems.append(("thermal.throttling_now", "fail", "CPU 17 is throttling now"))
        d = NodeDigest(f"nid{i:05d}", metrics, problems, inv)
        yield json.dumps(d.to_dict())           # what arrives over MPI, as text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10000)
    a = ap.parse_args()
    docs = list(digests(a.nodes))
    t = {}
    t0 = time.perf_counter()
    cl = Cluster()
    nodes = []
    for doc in docs:
        d = NodeDigest.from_dict(json.loads(doc))
        cl.add(d)
        nodes.append(Node(d.name, {"model_name": "x"}, {"inventory": d.inventory, "run_id": ""}))
    t["decode and add"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    uni = cl.uniformity()
    findings = cl.findings(uni)
    metrics = cl.metrics()
    t["uniformity, findings, metrics"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    run = Run(tool_version="bench", host="nid00000", started="2026-11-24T00:00:00Z", command=["ceiling", "run"],
              metrics=metrics, findings=findings, nodes=nodes)
    run.job = Job(launcher="srun", mpi_library="x", ranks=a.nodes, nodes=a.nodes, ranks_per_node=1,
                  node_names=[n.name for n in nodes])
    run.analysis.uniformity = uni
    text = terminal.render(run, width=100)
    t["terminal report"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    doc = jsonio.dumps(run)
    t["JSON document"] = time.perf_counter() - t3
    total = time.perf_counter() - t0
    for k, v in t.items():
        print(f"{k:32s} {v:7.2f} s")
    print(f"{'total':32s} {total:7.2f} s   ({a.nodes} nodes; target < 5 s)")
    outl = sum(len(u.outliers) for u in uni)
    print(f"{len(uni)} metrics, {outl} outlier entries, {len(findings)} findings; report {len(text) // 1024} KiB, "
          f"JSON {len(doc) // (1 << 20)} MiB; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} "
          "MiB "
          "(the digests' text included)")
    return 0 if total < 5 else 1


if __name__ == "__main__":
    sys.exit(main())
