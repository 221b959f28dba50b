"""Time ``ceiling compare`` on a large history (issue 33: under 0.5 s on 100,000 runs over 100 hosts).

Builds (once; reused when present) an SQLite history of the current store version with RUNS runs spread
evenly over HOSTS hosts, one run every few hours per host, each with METRICS figures of five repetitions
and their summary, as results/store_schema.py writes them. The runs' documents are small JSON objects
(the verb reads a document only through SQLite's JSON1, for a competing-load finding): the rows and
indices are the real ones, the file is not 100,000 whole runs (that would be tens of GB).

Then times, each the median of ROUNDS: the floor of any command (a new Python that imports ceiling's CLI
and numpy), the whole CLI (``python -m ceiling compare A B --db FILE``, a new process each time) and
``compare``'s own work in-process (open the store read-only, read both sides, read each series' earlier
runs, judge, render), and prints the figures.

    .venv/bin/python benchmarks/compare_history.py [--db /tmp/ceiling-compare-100k.db] [--runs 100000]
        [--rounds 7] [--against OTHER/src]

``--against`` times another ceiling's whole CLI beside this one, round by round alternating (the
same history, the same commands; ``OTHER/src`` a source tree, e.g. ``git archive main src`` unpacked,
with the installed ``ceiling/_core`` copied in): on a shared host only figures taken together compare.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ceiling.results.history_keys import context_key
from ceiling.results.store_schema import METRIC_COLUMNS, SCHEMA, STORE_VERSION, statements

METRICS = (("stream.triad", "GB/s", "higher", {"threads": 64, "placement": "compact", "array_bytes": 1 << 30}),
           ("stream.copy", "GB/s", "higher", {"threads": 64, "placement": "compact", "array_bytes": 1 << 30}),
           ("dgemm.node", "Gflop/s", "higher", {"threads": 64, "n": 8192}),
           ("flops.dp.node", "Gflop/s", "higher", {"threads": 64, "isa": "avx512"}),
           ("latency.dram", "ns", "lower", {"threads": 1}),
           ("clock.all", "GHz", "higher", {"threads": 64}))
CENTER = {"stream.triad": 300.0, "stream.copy": 280.0, "dgemm.node": 4000.0, "flops.dp.node": 5000.0,
          "latency.dram": 110.0, "clock.all": 3.1}


def build(path: Path, runs: int, hosts: int) -> None:
    rng = random.Random(33)
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    for stmt in statements(SCHEMA):
        db.execute(stmt)
    db.execute(f"PRAGMA user_version = {STORE_VERSION}")
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    per_host = runs // hosts
    keys = {name: context_key(ctx) for name, _, _, ctx in METRICS}
    for h in range(hosts):
        host = f"cn{h:03d}"
        inv = f"{h:016x}"
        db.execute("INSERT OR IGNORE INTO inventories VALUES (?, ?)", (inv, json.dumps({"cpu": "x", "host": h})))
        run_rows, metric_rows = [], []
        for i in range(per_host):
            rid = f"{h:04d}{i:06d}" + "0" * 22
            started = (start + timedelta(hours=4 * i, minutes=h)).isoformat()
            disturbed = rng.random() < 0.02
            doc = json.dumps({"findings": [{"id": "load.competing", "status": "warn", "title": "Competing load"}]
                              if disturbed else []})
            run_rows.append((rid, host, started, started, "0.1.0", 0, doc, inv))
            for name, unit, better, _ in METRICS:
                reps = [CENTER[name] * rng.gauss(1.0, 0.01) for _ in range(5)]
                st = sorted(reps)
                best = st[-1] if better == "higher" else st[0]
                mean = statistics.fmean(reps)
                sd = statistics.stdev(reps)
                metric_rows.append((rid, name, best, unit, better, None, "", host, started, keys[name], inv, 1, 5,
                                    best, st[2], mean, st[0], st[-1], sd, sd / mean,
                                    json.dumps(reps, separators=(",", ":"))))
        db.executemany("INSERT INTO runs (run_id, host, started, finished, tool_version, partial, doc, "
                       "inventory_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", run_rows)
        db.executemany(f"INSERT INTO metrics ({', '.join(METRIC_COLUMNS)}) VALUES "
                       f"({', '.join('?' * len(METRIC_COLUMNS))})", metric_rows)
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="/tmp/ceiling-compare-100k.db")
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--against", metavar="SRC", help="another ceiling's source tree, timed alternating")
    a = ap.parse_args()
    path = Path(a.db)
    if not path.exists():
        t = time.perf_counter()
        build(path, a.runs, a.hosts)
        print(f"built {path}: {a.runs} runs over {a.hosts} hosts, {a.runs * len(METRICS)} figures, "
              f"{path.stat().st_size / 2**20:.0f} MiB in {time.perf_counter() - t:.1f} s")
    db = sqlite3.connect(str(path))
    n_runs, n_hosts = db.execute("SELECT count(*), count(DISTINCT host) FROM runs").fetchone()
    # the two latest runs of one host, so that each series has its 50 earlier runs to read
    rb, ra = [r[0] for r in db.execute("SELECT run_id FROM runs WHERE host = 'cn042' ORDER BY started DESC LIMIT 2")]
    db.close()
    argv = ["compare", ra[:12], rb[:12], "--db", str(path)]
    sets = ["compare", "--host", "cn042", "--before", "2025-01-21", "--after", "2025-06-01", "--db", str(path)]
    print(f"history: {n_runs} runs, {n_hosts} hosts; comparing {ra[:12]} with {rb[:12]} (host cn042)")

    from ceiling import cli
    import contextlib
    import io
    floor = []
    for _ in range(a.rounds):       # what any ceiling command costs here: Python's start, the CLI's imports, numpy
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy, ceiling.cli; ceiling.cli.main(['--version'])"],
                       capture_output=True, check=True)
        floor.append(time.perf_counter() - t)
    print(f"floor (python, ceiling's CLI and numpy imported, --version): median {statistics.median(floor) * 1000:.0f} "
          f"ms (min {min(floor) * 1000:.0f})")
    other_env = dict(os.environ, PYTHONPATH=a.against) if a.against else None
    for what, args in (("two runs", argv), ("two sets of runs (--host --before --after)", sets)):
        inproc, whole, other = [], [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                rc = cli.main(args)
            inproc.append(time.perf_counter() - t)
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True)
            whole.append(time.perf_counter() - t)
            assert p.returncode in (0, 12) and rc in (0, 12), p.stderr
            if other_env is not None:
                t = time.perf_counter()
                q = subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True,
                                   env=other_env)
                other.append(time.perf_counter() - t)
                assert q.returncode in (0, 12), q.stderr
        print(f"compare, {what}: in-process median {statistics.median(inproc) * 1000:.0f} ms "
              f"(min {min(inproc) * 1000:.0f}, max {max(inproc) * 1000:.0f}), whole CLI median "
              f"{statistics.median(whole) * 1000:.0f} ms (min {min(whole) * 1000:.0f}, max {max(whole) * 1000:.0f}), "
              f"{a.rounds} rounds")
        if other:
            print(f"  --against {a.against}: whole CLI median {statistics.median(other) * 1000:.0f} ms "
                  f"(min {min(other) * 1000:.0f}, max {max(other) * 1000:.0f}), alternating with the above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
