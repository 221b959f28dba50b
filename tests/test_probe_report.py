"""The probe's history over time (issue 31): windows past --full merged into hourly ones with the baseline
kept honest (results/store_probe.py), and several nodes' histories read together (`ceiling probe --report`,
analysis/slowdown.across_nodes): the file system slow for all told from one node slow alone. Real SQLite
files made through the store, as each node's probe makes its own."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest

from ceiling.analysis.slowdown import across_nodes
from ceiling.results import store_probe
from ceiling.results.store import Store

OPS = ("read", "write", "md.stat")
H = 3600.0


def _row(host, op, start, length, med, base=0.001, d="/p"):
    return (host, d, op, start, start + length, 60, 0, med, med * 1.5, base, "history", med / base)


def test_weighted_median_is_the_plain_median_for_equal_weights():
    wm = store_probe.weighted_median
    assert wm([(3, 1), (1, 1), (2, 1)]) == 2
    assert wm([(4, 1), (1, 1), (2, 1), (3, 1)]) == 2.5
    assert wm([(1, 1), (10, 5)]) == 10 and wm([(1, 5), (10, 1)]) == 1
    assert wm([]) is None and wm([(1, 0)]) is None


def test_windows_past_full_are_merged_per_hour_and_the_baseline_stays(tmp_path):
    rng = random.Random(7)
    t0 = (time.time() // H - 30) * H                   # on an hour, 30 hours ago
    rows = [_row("n1", op, t0 + i * 60, 60, 0.001 * (1 + 0.01 * rng.gauss(0, 1))) for i in range(30 * 60)
            for op in OPS]
    other = [_row("n2", "read", t0 + i * 60, 60, 0.002) for i in range(120)]     # another probe: left alone
    db = tmp_path / "h.db"
    with Store(db) as s:
        s.save_probe(rows + other)
        before = s.probe_baseline("n1", "/p", 0)
        cut = t0 + 20 * H + 1800                       # 20.5 hours in: the first 20 whole hours merge
        s.save_probe([_row("n1", "read", t0 + 30 * H, 60, 0.001)], downsample_before=cut)
        after = s.probe_baseline("n1", "/p", 0)
        got = s.probe_windows("n1")
        assert len(s.probe_windows("n2")) == 120
        s.save_probe([_row("n1", "read", t0 + 30 * H + 60, 60, 0.001)], retain_before=t0 + 5 * H,
                     downsample_before=cut)
        kept = s.probe_windows("n1")
    merged = [w for w in got if w[4] - w[3] > 60]
    assert len(merged) == 20 * len(OPS) and len(got) == len(merged) + 10 * 60 * len(OPS) + 1
    for w in merged:
        assert w[4] - w[3] == pytest.approx(H - 0) and w[3] % H == 0          # whole hours, on the hour
        assert w[5] == 60 * 60 and w[6] == 0                                   # 60 windows' operations
        src = [r for r in rows if r[2] == w[2] and w[3] <= r[3] < w[4]]
        assert len(src) == 60 and w[8] == max(r[8] for r in src)              # p99: the largest
        assert min(r[7] for r in src) <= w[7] <= max(r[7] for r in src)
        assert w[11] == pytest.approx(w[7] / w[9])
    for op in OPS:                                     # 1% noise: the median of hourly medians moves < 0.5%
        assert after[op][0] == pytest.approx(before[op][0], rel=0.005), (op, before[op], after[op])
        # windows counted: 30 h of minutes before; 20 merged hours, 10 h of minutes and the saved one after
        assert before[op][1] == 30 * 60 and after[op][1] == 20 + 10 * 60 + (op == "read")
    assert min(w[3] for w in kept) >= t0 + 4 * H       # retention still drops (a merged hour ends at 5 H)


def _histories(tmp_path):
    """Three nodes' own files, 10-minute windows over 4 hours, factors about 1; from 1 h to 1 h 20 all three
    slow together (8x on read and write), from 2 h 30 to 2 h 40 node b alone (12x on md.stat)."""
    rng = random.Random(3)
    t0 = (time.time() // H - 5) * H
    paths = []
    for host in ("a", "b", "c"):
        rows = []
        for i in range(24):
            start = t0 + i * 600 + rng.uniform(0, 30)      # each probe started at its own second
            for op in OPS:
                f = 1 + 0.05 * rng.uniform(-1, 1)
                if i in (6, 7) and op in ("read", "write"):
                    f = 8.0 + rng.uniform(0, 1)
                if i == 15 and host == "b" and op == "md.stat":
                    f = 12.0
                rows.append(_row(host, op, start, 600, 0.001 * f))
        p = tmp_path / f"{host}.db"
        with Store(p) as s:
            s.save_probe(rows)
        paths.append(str(p))
    return t0, paths


def test_three_nodes_slow_together_and_one_alone_are_each_named_and_nothing_else(tmp_path):
    t0, paths = _histories(tmp_path)
    rows = []
    for p in paths:
        with Store(p, readonly=True) as s:
            rows += s.probe_windows()
    res = across_nodes(rows, 3.0)
    assert res["nodes"] == ["a", "b", "c"] and res["step_s"] == 600
    spans = [(s["kind"], s["nodes"], round((s["start"] - t0) / 600), round((s["end"] - t0) / 600), sorted(s["ops"]))
             for s in res["spans"]]
    assert spans == [("together", ["a", "b", "c"], 6, 8, ["read", "write"]),
                     ("alone", ["b"], 15, 16, ["md.stat"])], spans
    alone = res["spans"][1]
    assert alone["ops"]["md.stat"] == 12.0 and 0.9 < alone["others_range"][0] <= alone["others_range"][1] < 1.1
    b = next(p for p in res["per_node"] if p["node"] == "b" and p["op"] == "md.stat")
    assert b["windows"] == 24 and b["above"] == 1 and b["max"] == 12.0


def ceiling(*args):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=120)


def test_report_reads_each_nodes_file_and_says_which_it_could_not(tmp_path):
    _, paths = _histories(tmp_path)
    bad = tmp_path / "corrupt.db"
    bad.write_bytes(b"this is not SQLite" * 100)
    r = ceiling("probe", "--report", *paths, str(bad), str(tmp_path / "missing.db"), "--since", "1d")
    assert r.returncode == 0, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 2 and all(ln.startswith("ceiling probe: ") and ln.endswith("; left out") for ln in err), err
    assert "corrupt.db" in err[0] and "missing.db" in err[1]
    assert "3 node(s) (a, b, c)" in r.stdout
    assert "the file system: all slow together: a, b, c from" in r.stdout
    assert "one node slow alone: b from" in r.stdout and "md.stat up to 12x" in r.stdout
    doc = json.loads(ceiling("probe", "--report", *paths, "--json").stdout)
    assert [s["kind"] for s in doc["spans"]] == ["together", "alone"]


def test_report_with_nothing_readable_is_one_line_and_exit_4(tmp_path):
    r = ceiling("probe", "--report", str(tmp_path / "missing.db"))
    assert r.returncode == 4 and r.stderr.strip().splitlines()[-1] == "ceiling: probe --report: no history could " \
        "be read", r.stderr


def test_probe_without_dir_or_report_is_one_line_and_exit_2():
    r = ceiling("probe", "--duration", "1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give --dir DIR" in r.stderr, r.stderr
