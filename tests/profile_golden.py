"""Golden profiles: what the analysis of `ceiling profile` was given in real runs, and what it
said, as JSON (tests/fixtures/profile_golden/*.json). The inputs are those of the analysis
entry point (the launch's exit, the /proc sampler's samples, the hardware counters, the
interposer's records and cost, the competing load, the history's answers); the outputs are
the profile dict the reports read, the bounds, findings, metrics and the overhead. Recorded
by tests/fixtures/profile_golden/record.py, fed back by tests/test_profile_golden.py."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict

from ceiling.probes.interpose_record import Records
from ceiling.probes.launch import Exit
from ceiling.probes.proc_sampler import ProcessSample, Sampled, ThreadSample
from ceiling.results.jsonio import plain
from ceiling.results.model import Finding


def sampled_doc(s: Sampled) -> Dict[str, Any]:
    d = {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name not in ("threads", "processes")}
    d["threads"] = [dataclasses.asdict(t) for t in s.threads.values()]
    d["processes"] = [dataclasses.asdict(p) for p in s.processes.values()]
    return json.loads(json.dumps(d))


def sampled_from(d: Dict[str, Any]) -> Sampled:
    s = Sampled(**{k: v for k, v in d.items() if k not in ("threads", "processes", "node_cpu", "psi")})
    s.node_cpu = {k: tuple(v) for k, v in d["node_cpu"].items()}
    s.psi = {k: tuple(v) for k, v in d["psi"].items()}
    s.threads = {(t["pid"], t["tid"]): ThreadSample(**t) for t in d["threads"]}
    s.processes = {p["pid"]: ProcessSample(**p) for p in d["processes"]}
    return s


def records_doc(r: Records) -> Dict[str, Any]:
    return {"records": json.loads(json.dumps(list(r))), "counts": r.counts(), "unread": [list(u) for u in r.unread]}


def records_from(d: Dict[str, Any]) -> Records:
    r = Records(d["records"])
    r.skipped_records, r.skipped_lines, r.skipped_fields = (d["counts"][k] for k in ("records", "lines", "fields"))
    r.unread = [tuple(u) for u in d["unread"]]
    return r


def inputs_doc(pid, ended, wall, sampled, counters, busy, records, written, removed, refused, cost, wrapped, cpus,
               host, refusals, history) -> Dict[str, Any]:
    return {"pid": pid, "ended": dataclasses.asdict(ended), "wall_s": wall, "sampled": sampled_doc(sampled),
            "counters": json.loads(json.dumps(counters)), "competing": [plain(f) for f in busy],
            "records": records_doc(records), "written": written, "removed": removed, "refused": refused,
            "cost": json.loads(json.dumps(cost)), "wrapped": list(wrapped) if wrapped else None, "cpus": cpus,
            "host": host, "refusals": refusals, "history": history}


def inputs_from(d: Dict[str, Any]) -> Dict[str, Any]:
    """The analysis entry point's arguments, by name, from a golden document's "inputs"."""
    refusals, history = d["refusals"], d["history"]
    return {"pid": d["pid"], "ended": Exit(**d["ended"]), "wall": d["wall_s"], "sampled": sampled_from(d["sampled"]),
            "counters": d["counters"], "busy": [Finding(**f) for f in d["competing"]],
            "records": records_from(d["records"]), "written": d["written"], "removed": d["removed"],
            "refused": d["refused"], "cost": d["cost"], "wrapped": tuple(d["wrapped"]) if d["wrapped"] else None,
            "cpus": d["cpus"], "host": d["host"], "unreached": lambda exe: refusals.get(exe, ""),
            "history": lambda prefix: [tuple(r) for r in history.get(prefix, [])], "quick": None}


def outputs_doc(done: Dict[str, Any]) -> Dict[str, Any]:
    """What the analysis said, as JSON values (tuples as lists, dataclasses as dicts)."""
    keys = ("profile", "bounds", "findings", "metrics", "overhead", "exit_status", "signal", "code", "partial_reason")
    return json.loads(json.dumps({k: plain(done[k]) for k in keys}))
