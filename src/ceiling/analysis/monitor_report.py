"""``ceiling monitor --report``: a node's (or one job's) time line from the history, in 10-minute
segments as DKRZ's monitoring shows them, the jobs of those minutes compared, and the probe's slowdown
factor over the same segments beside them, so that "my job was slow at 14:00" meets "the file system
was 8x slower from 13:50 to 14:20". Pure functions over the history's rows (results/store_monitor.py's
SAMPLE_COLUMNS and JOB_COLUMNS, store_probe.py's COLUMNS).

Per segment (``SEGMENT_S``, on the wall clock): each figure's mean and maximum over the samples in it
(node: CPU user, system, iowait and steal as fractions of the node, memory used, disk read and write
summed over devices, network received and sent summed over interfaces but loopback, I/O pressure; a
job: the CPUs it kept busy, its read and write rates, its memory), and per probe operation the largest
factor of the probe windows that overlap it.

A **stall** of the job (with ``--job``): a segment in which its I/O rate (read + write) is under
``DROP`` (half) of its median over the segments in which it did I/O, while the probe's largest factor
there is above ``threshold``; consecutive ones make one span. Such a span is the file system's
slowness reaching the job; a drop with the probe at 1 is the job's own (a phase without I/O, a
compute step), and is not called a stall.
"""
from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

SEGMENT_S = 600.0
DROP = 0.5

NODE = (("cpu.user", "CPU user", "share"), ("cpu.system", "CPU system", "share"),
        ("cpu.iowait", "CPU iowait", "share"), ("cpu.steal", "CPU steal", "share"),
        ("mem.used", "memory used", "bytes"), ("disk.read", "disk read", "Bps"), ("disk.write", "disk write", "Bps"),
        ("net.rx", "network in", "Bps"), ("net.tx", "network out", "Bps"), ("psi.io.some", "I/O pressure", "share"))
JOB = (("cpu_busy", "CPUs busy", "cpus"), ("read_Bps", "read", "Bps"), ("write_Bps", "write", "Bps"),
       ("mem", "memory", "bytes"))


def _node_figure(metric: str) -> Optional[str]:
    """The report's figure a node metric adds to (disks and interfaces summed), None: not shown."""
    if metric.startswith("disk.") and metric.endswith(".read_Bps"):
        return "disk.read"
    if metric.startswith("disk.") and metric.endswith(".write_Bps"):
        return "disk.write"
    if metric.startswith("net.") and not metric.startswith("net.lo.") and metric.endswith(".rx_Bps"):
        return "net.rx"
    if metric.startswith("net.") and not metric.startswith("net.lo.") and metric.endswith(".tx_Bps"):
        return "net.tx"
    return metric if metric in {k for k, _, _ in NODE} else None


def _segments(samples: Sequence[Sequence], job: str, names, seg: float) -> Dict[int, Dict[str, List[float]]]:
    """segment -> figure -> the values of the samples in it (a sample's sums over disks or interfaces first)."""
    per_sample: Dict[Tuple[float, str], float] = {}
    for _, j, metric, t, _, value in samples:
        if j != job:
            continue
        fig = _node_figure(metric) if job == "" else (metric if metric in names else None)
        if fig is not None:
            per_sample[(t, fig)] = per_sample.get((t, fig), 0.0) + value
    out: Dict[int, Dict[str, List[float]]] = {}
    for (t, fig), v in per_sample.items():
        out.setdefault(int((t - 1e-6) // seg), {}).setdefault(fig, []).append(v)
    return out


def _probe(windows: Sequence[Sequence], lo: int, hi: int, seg: float) -> Dict[int, Dict[str, float]]:
    """segment -> probe operation -> the largest factor of the windows overlapping it."""
    out: Dict[int, Dict[str, float]] = {}
    for w in windows:
        _, _, op, start, end, *_, slow = w
        if slow is None:
            continue
        for s in range(max(lo, int(start // seg)), min(hi, int((end - 1e-6) // seg)) + 1):
            d = out.setdefault(s, {})
            d[op] = max(d.get(op, 0.0), slow)
    return out


def report(samples: Sequence[Sequence], jobs: Sequence[Sequence], windows: Sequence[Sequence], since: float,
           until: float, job: Optional[str] = None, threshold: float = 3.0,
           segment_s: float = SEGMENT_S) -> Dict[str, Any]:
    """The report's data (module docstring); ``job``: a job id or key from ``jobs`` (None: the node);
    ``segment_s``: the segments' length (10 minutes, as DKRZ shows them; shorter for a short job)."""
    samples = [s for s in samples if since <= s[3] <= until]
    windows = [w for w in windows if w[4] >= since and w[3] <= until]
    known = [j for j in jobs if j[8] >= since and j[7] <= until]
    seg = segment_s
    out: Dict[str, Any] = {"since": since, "until": until, "segment_s": seg, "threshold": threshold,
                           "hosts": sorted({s[0] for s in samples}), "samples": len(samples),
                           "probe_windows": len(windows), "job": None, "segments": [], "jobs": [], "stalls": []}
    key = ""
    if job is not None:
        match = [j for j in jobs if job in (j[1], j[2])]
        if not match:
            out["error"] = f"no job {job!r} in the history"
            return out
        j = max(match, key=lambda j: j[8])
        key = j[1]
        out["job"] = {"key": j[1], "id": j[2], "kind": j[3], "user": j[5], "cpus": j[6], "first": j[7],
                      "last": j[8], "command": j[9], "status": j[10]}
    names = {k for k, _, _ in (JOB if key else NODE)}
    segs = _segments(samples, key, names, seg)
    if segs:
        lo, hi = min(segs), max(segs)
        probe = _probe(windows, lo, hi, seg)
        for s in range(lo, hi + 1):
            figs = segs.get(s, {})
            out["segments"].append({
                "start": s * seg, "end": (s + 1) * seg, "samples": max((len(v) for v in figs.values()),
                                                                                    default=0),
                "mean": {f: float(np.mean(v)) for f, v in figs.items()},
                "max": {f: float(np.max(v)) for f, v in figs.items()},
                "probe": probe.get(s, {})})
    for j in known:
        rows = [s for s in samples if s[1] == j[1]]
        if not rows:
            continue
        by: Dict[str, List[Tuple[float, float]]] = {}
        for _, _, metric, _, step, value in rows:
            by.setdefault(metric, []).append((step, value))
        out["jobs"].append({
            "id": j[2], "key": j[1], "user": j[5], "first": j[7], "last": j[8],
            "cpu_busy_mean": float(np.mean([v for _, v in by["cpu_busy"]])) if "cpu_busy" in by else None,
            "read_bytes": sum(st * v for st, v in by.get("read_Bps", [])) if "read_Bps" in by else None,
            "write_bytes": sum(st * v for st, v in by.get("write_Bps", [])) if "write_Bps" in by else None,
            "mem_max": max(v for _, v in by["mem"]) if "mem" in by else None})
    if key:
        out["stalls"] = _stalls(out["segments"], threshold)
    return out


def _stalls(segments: List[Dict[str, Any]], threshold: float) -> List[Dict[str, Any]]:
    io = [(s, s["mean"].get("read_Bps", 0.0) + s["mean"].get("write_Bps", 0.0)) for s in segments
          if "read_Bps" in s["mean"] or "write_Bps" in s["mean"]]
    active = [v for _, v in io if v > 0]
    if not active:
        return []
    usual = float(np.median(active))
    spans: List[Dict[str, Any]] = []
    for s, v in io:
        top = max(s["probe"].items(), key=lambda kv: kv[1]) if s["probe"] else None
        if v < DROP * usual and top is not None and top[1] > threshold:
            if spans and spans[-1]["end"] == s["start"]:
                sp = spans[-1]
            else:
                sp = {"start": s["start"], "end": s["end"], "io_Bps": [], "usual_Bps": usual, "probe": {}}
                spans.append(sp)
            sp["end"] = s["end"]
            sp["io_Bps"].append(v)
            for op, f in s["probe"].items():
                sp["probe"][op] = max(sp["probe"].get(op, 0.0), f)
    for sp in spans:
        sp["io_Bps"] = float(np.mean(sp["io_Bps"]))
    return spans


def _t(x: float) -> str:
    fmt = "%Y-%m-%d %H:%M" if x % 60 == 0 else "%Y-%m-%d %H:%M:%S"
    return datetime.datetime.fromtimestamp(x, datetime.timezone.utc).strftime(fmt)


def _v(value: Optional[float], unit: str) -> str:
    if value is None:
        return "-"
    if unit == "share":
        return f"{value:.0%}"
    if unit == "Bps":
        return f"{value / 1e9:.3g} GB/s" if value >= 1e9 else f"{value / 1e6:.3g} MB/s"
    if unit == "bytes":
        return f"{value / 2**30:.3g} GiB" if value >= 2**30 else f"{value / 2**20:.3g} MiB"
    return f"{value:.3g}"


def lines(res: Dict[str, Any]) -> List[str]:
    """The report as lines a user can paste into a ticket."""
    if res.get("error"):
        return [res["error"]]
    who = (f"job {res['job']['id']} ({res['job']['kind']}, user {res['job']['user'] or '?'})" if res["job"] else
           "the node" + (f" {', '.join(res['hosts'])}" if res["hosts"] else ""))
    seg = res["segment_s"]
    said = "10-minute" if seg == SEGMENT_S else f"{seg:g}-second"
    out = [f"ceiling monitor --report: {who}, {_t(res['since'])} to {_t(res['until'])} UTC, {said} segments "
           f"(mean / max); {res['samples']} samples, {res['probe_windows']} probe windows"]
    if not res["segments"]:
        return out + ["No samples of it in the history over these minutes."]
    figs = JOB if res["job"] else NODE
    shown = [(k, label, unit) for k, label, unit in figs if any(k in s["mean"] for s in res["segments"])]
    ops = sorted({op for s in res["segments"] for op in s["probe"]})
    out.append("")
    out.append(f"{'segment (UTC)':<17} " + " ".join(f"{label:>22}" for _, label, _ in shown)
               + "".join(f" {'probe ' + op:>14}" for op in ops))
    for s in res["segments"]:
        cells = [f"{_v(s['mean'].get(k), u)} / {_v(s['max'].get(k), u)}" for k, _, u in shown]
        factors = [f"{s['probe'][op]:.3g}x" if op in s["probe"] else "-" for op in ops]
        out.append(f"{_t(s['start']):<17} " + " ".join(f"{c:>22}" for c in cells)
                   + "".join(f" {c:>14}" for c in factors))
    if not ops:
        out += ["", "No probe windows in this history over these minutes: `ceiling probe --dir DIR` with the same "
                "--db gives the file system's side."]
    if res["jobs"]:
        out += ["", "Jobs in these minutes:",
                f"{'job':<14} {'user':<10} {'from (UTC)':<17} {'to':<17} {'CPUs busy':>9} {'read':>10} {'written':>10} "
                f"{'memory':>10}"]
        for j in sorted(res["jobs"], key=lambda j: j["first"]):
            out.append(f"{j['id']:<14} {j['user'] or '?':<10} {_t(j['first']):<17} {_t(j['last']):<17} "
                       f"{_v(j['cpu_busy_mean'], 'cpus'):>9} {_v(j['read_bytes'], 'bytes'):>10} "
                       f"{_v(j['write_bytes'], 'bytes'):>10} {_v(j['mem_max'], 'bytes'):>10}")
    for sp in res["stalls"]:
        ops_said = ", ".join(f"{op} {f:.3g}x" for op, f in sorted(sp["probe"].items(), key=lambda kv: -kv[1])
                             if f > res["threshold"])
        out.append("")
        out.append(f"I/O stall from {_t(sp['start'])} to {_t(sp['end'])} UTC: the job's I/O at "
                   f"{_v(sp['io_Bps'], 'Bps')}, against its usual {_v(sp['usual_Bps'], 'Bps')}, while the probe's "
                   f"slowdown was up to {ops_said}: the file system was slow for everyone then, not this job alone.")
    if res["job"] and not res["stalls"] and ops:
        out += ["", f"No I/O stall of the job while the probe's factor was above {res['threshold']:g}."]
    return out
