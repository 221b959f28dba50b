"""Reading the records libceiling_interpose.so writes (format: csrc/interpose/interpose.h).

One file may hold the records of many processes (every process of a job appends
its own with one write); a record cut short (no "end" line: the process died
while writing) is kept and marked, and lines that are not understood are skipped.
A process may write more than one record (a checkpoint at MPI_Finalize, then
its record at exit): ``latest`` keeps the one that supersedes the others.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List

_ESC = re.compile(r"%([0-9A-Fa-f]{2})")
_INT = re.compile(r"-?\d+")


def _value(v: str) -> Any:
    v = _ESC.sub(lambda m: chr(int(m.group(1), 16)), v)
    return int(v) if _INT.fullmatch(v) else v


def fields(words: List[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for w in words:
        k, eq, v = w.partition("=")
        if eq:
            out[k] = _value(v)
    return out


def parse(text: str) -> List[Dict[str, Any]]:
    """Records in file order: {"version", "process": fields, "modules": {name: fields},
    "lines": {module: [fields, ...]}, "end": fields ({} when cut short)}."""
    records: List[Dict[str, Any]] = []
    rec = None
    for line in text.splitlines():
        word, *rest = line.split(" ")
        if word == "ceiling-interpose":
            rec = {"version": int(rest[0]) if rest and rest[0].isdigit() else 0, "process": {}, "modules": {},
                   "lines": {}, "end": {}}
            records.append(rec)
        elif rec is None or not word:
            continue
        elif word == "process":
            rec["process"] = fields(rest)
        elif word == "module":
            f = fields(rest)
            if "name" in f:
                rec["modules"][str(f["name"])] = f
        elif word == "end":
            rec["end"] = fields(rest)
        else:
            rec["lines"].setdefault(word, []).append(fields(rest))
    return records


def latest(records: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One record per process (host, pid, start), in first-seen order: its last complete
    one (with an "end" line), else its last one. A checkpoint is superseded by the record
    the same process wrote at exit, which counts everything the checkpoint did and more."""
    best: Dict[tuple, Dict[str, Any]] = {}
    order: List[tuple] = []
    for rec in records:
        p = rec.get("process", {})
        key = (p.get("host"), p.get("pid"), p.get("start_ns"))
        if key not in best:
            order.append(key)
            best[key] = rec
        elif rec.get("end") or not best[key].get("end"):
            best[key] = rec
    return [best[k] for k in order]
