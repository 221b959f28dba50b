"""Time ``ceiling history --changes`` on a large synthetic history (issue 33's goal: 100,000 runs over 100
hosts, a full look under 2 minutes, ``--since`` under 3 s) and say what it found against what was planted.

The history is written straight into a store made by ceiling's own Store (its tables and indices), with
the rows a run's ``save`` writes (store_schema.METRIC_COLUMNS) but without building each run's document
(a short one stands in: nothing here reads it). Planted: a site-wide BIOS update at run 600 of every host
that lowers stream.triad by 6 %; on node007 a 8 % DGEMM step at run 300 with no configuration change;
on node013 a 5 % drift of latency.dram over its whole history. Noise: 1.5 % CV, independent per value.

Then it times, as a user runs them (the ceiling command, a fresh process each):
  1. ``history --changes`` (full look, writes nothing);
  2. ``history --changes --since`` the first time (everything is new; the results are kept);
  3. one new run per host added, ``history --changes --since`` again (only those examined).

    .venv/bin/python benchmarks/history_changes.py [--runs 100000] [--hosts 100] [--db PATH [--reuse]]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np

from ceiling.results import history_keys as keys
from ceiling.results.store import Store
from ceiling.results.store_schema import METRIC_COLUMNS

METRICS = (("stream.triad", "GB/s", "higher", 200.0, {"threads": 64}),
           ("dgemm.node", "Gflop/s", "higher", 3000.0, {"threads": 64}),
           ("latency.dram", "ns", "lower", 95.0, {"size_bytes": 1 << 30}),
           ("flops.dp.node", "Gflop/s", "higher", 4000.0, {"threads": 64}),
           ("bandwidth.dram", "GB/s", "higher", 180.0, {"threads": 64}))
CV = 0.015
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _inventory(bios: str) -> dict:
    return {"arch": "x86_64", "model_name": "Synthetic CPU 9000", "sockets": 2, "cores": 64, "threads": 128,
            "memory_gib": 512, "system": {"bios_version": bios, "product_name": "Box 1"}}


def _level(name: str, host: int, i: int, base: float) -> float:
    f = 1.0
    if name == "stream.triad" and i >= 600:
        f *= 0.94
    if name == "dgemm.node" and host == 7 and i >= 300:
        f *= 0.92
    if name == "latency.dram" and host == 13:
        f *= 1.0 + 0.05 * i / 999.0
    return base * f


def build(path: str, runs: int, hosts: int, first: int, last: int, seed: int) -> None:
    """Runs ``first`` .. ``last - 1`` of each host (``runs`` // ``hosts`` per host in all)."""
    rng = np.random.default_rng(seed + first)
    with Store(path):
        pass                                    # the tables and indices, as ceiling makes them
    import sqlite3
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    invs = {b: _inventory(b) for b in ("1.0", "1.1")}
    hashes = {b: keys.inventory_hash(v) for b, v in invs.items()}
    db.executemany("INSERT OR IGNORE INTO inventories (hash, inventory) VALUES (?, ?)",
                   [(hashes[b], keys.inventory_json(v)) for b, v in invs.items()])
    ctx = {name: keys.context_key(c) for name, _, _, _, c in METRICS}
    run_rows, metric_rows = [], []
    for h in range(hosts):
        host = f"node{h:03d}"
        for i in range(first, last):
            rid = f"{h:03d}{i:05d}" + uuid.UUID(int=(h << 32) | i).hex[8:]
            started = (T0 + timedelta(days=i, minutes=h)).strftime("%Y-%m-%dT%H:%M:%SZ")
            inv = hashes["1.1" if i >= 600 else "1.0"]
            run_rows.append((rid, host, started, started, "0.1.0", 0,
                             json.dumps({"schema_version": 3, "run_id": rid, "host": host}), inv))
            for name, unit, better, base, _ in METRICS:
                reps = _level(name, h, i, base) * (1 + CV * rng.standard_normal(3))
                med = float(np.median(reps))
                best = float(reps.max() if better == "higher" else reps.min())
                row = {"run_id": rid, "name": name, "value": best, "unit": unit, "better": better,
                       "efficiency": None, "node": "", "host": host, "started": started, "context": ctx[name],
                       "inventory_hash": inv, "valid": 1, "n": 3, "best": best, "median": med,
                       "mean": float(reps.mean()), "min": float(reps.min()), "max": float(reps.max()),
                       "stdev": float(reps.std(ddof=1)), "cv": float(reps.std(ddof=1) / reps.mean()),
                       "reps": json.dumps([round(float(v), 4) for v in reps])}
                metric_rows.append(tuple(row[c] for c in METRIC_COLUMNS))
    db.executemany("INSERT INTO runs (run_id, host, started, finished, tool_version, partial, doc, inventory_hash) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", run_rows)
    db.executemany(f"INSERT INTO metrics ({', '.join(METRIC_COLUMNS)}) VALUES ({', '.join('?' * len(METRIC_COLUMNS))})",
                   metric_rows)
    db.commit()
    db.close()


def timed(db: str, *extra: str) -> tuple:
    cmd = [sys.executable, "-m", "ceiling", "history", "--db", db, "--changes", "--json", *extra]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return dt, json.loads(p.stdout)


def summary(doc: dict) -> str:
    kinds = {}
    for c in doc["changes"]:
        k = (c["kind"], c["metric"], c["scope"].split(":")[0] if c["scope"] else "")
        kinds[k] = kinds.get(k, 0) + 1
    return "; ".join(f"{n} x {kind} {metric}{' (' + scope + ')' if scope else ''}"
                     for (kind, metric, scope), n in sorted(kinds.items())) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", help="where to build it (default: a temporary directory)")
    ap.add_argument("--reuse", action="store_true", help="time an existing --db built by this script again")
    a = ap.parse_args()
    per = a.runs // a.hosts
    tmp = tempfile.mkdtemp(prefix="ceiling-changes-")
    db = a.db or os.path.join(tmp, "history.db")
    import sqlite3
    if a.reuse and os.path.exists(db):            # a history built before: its kept looks forgotten
        con = sqlite3.connect(db)
        have = con.execute("SELECT count(*) FROM runs").fetchone()[0] // a.hosts
        con.execute("DELETE FROM change_series")
        con.execute("DELETE FROM change_looks")
        con.commit()
        con.close()
        print(f"reusing {db}: {a.hosts} hosts x {have} runs, {os.path.getsize(db) / 1e6:.0f} MB")
    else:
        have = per - 1
        t = time.perf_counter()
        build(db, a.runs, a.hosts, 0, have, a.seed)
        print(f"built {a.hosts} hosts x {have} runs x {len(METRICS)} metrics in {time.perf_counter() - t:.1f} s: "
              f"{os.path.getsize(db) / 1e6:.0f} MB")
    dt, doc = timed(db)
    print(f"history --changes (full look): {dt:.2f} s, {doc['series']} series; found: {summary(doc)}")
    dt, doc = timed(db, "--since")
    print(f"history --changes --since (first look, results kept): {dt:.2f} s")
    build(db, a.runs, a.hosts, have, have + 1, a.seed)
    dt, doc = timed(db, "--since")
    print(f"history --changes --since after one new run per host ({a.hosts} runs): {dt:.2f} s, "
          f"{doc['examined']} series examined; new: {summary(doc)}")
    dt, doc = timed(db, "--since")
    print(f"history --changes --since with nothing new: {dt:.2f} s")


if __name__ == "__main__":
    main()
