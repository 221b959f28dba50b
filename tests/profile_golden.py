"""Golden profiles: what the analysis of `ceiling profile` was given in real runs, and what it
said, as JSON (tests/fixtures/profile_golden/*.json). The inputs are those of the analysis
entry point (the launch's exit, the /proc sampler's samples, the hardware counters, the
interposer's records and cost, the competing load, the history's answers); the outputs are
the profile dict the reports read, the bounds, findings, metrics and the overhead. Recorded
by tests/fixtures/profile_golden/record.py, fed back by tests/test_profile_golden.py."""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Dict, List, Tuple

from ceiling.analysis.profile_run import Analysed
from ceiling.observe.model import Interposer, Observation
from ceiling.probes.interpose_record import Records, from_dicts
from ceiling.probes.launch import Exit
from ceiling.probes.proc_sampler import ProcessSample, Sampled, ThreadSample
from ceiling.results.base import plain
from ceiling.results.model import Finding


def scrub(text: str, roots: List[Tuple[str, str]]) -> str:
    """``text`` with the recording machine's own paths (``roots``: real prefix -> neutral name,
    e.g. the checkout, Python's prefix, the home directory, the run's temporary directory)
    replaced, so that no fixture names a path of the machine it was recorded on. The analysis
    reads no file the records name (tests/test_profile_golden.py runs where none exists)."""
    for real, neutral in sorted(roots, key=lambda r: -len(r[0])):
        if real and real != "/":
            text = re.sub(re.escape(real.rstrip("/")) + r"(?=[/\"':\s]|$)", neutral, text)
    return text


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
    return {"records": json.loads(json.dumps([rec.as_dict() for rec in r])), "counts": r.counts(),
            "unread": [list(u) for u in r.unread]}


def records_from(d: Dict[str, Any]) -> Records:
    """The typed records of a golden document, read from its dict form as a record file is
    (interpose_record.from_dicts): none of it may be skipped."""
    r = from_dicts(d["records"])
    assert r.counts() == {"records": 0, "lines": 0, "fields": 0} and len(r) == len(d["records"]), r.counts()
    r.skipped_records, r.skipped_lines, r.skipped_fields = (d["counts"][k] for k in ("records", "lines", "fields"))
    r.unread = [tuple(u) for u in d["unread"]]
    return r


def inputs_doc(obs: Observation, history: Dict[str, Any]) -> Dict[str, Any]:
    """An observation as the golden inputs (``history``: the answers the history gave)."""
    part = obs.interposer
    return {"pid": obs.pid, "ended": dataclasses.asdict(obs.ended), "wall_s": obs.wall_s,
            "sampled": sampled_doc(obs.sampled), "counters": json.loads(json.dumps(obs.counters)),
            "competing": [plain(f) for f in obs.competing], "records": records_doc(part.records),
            "written": part.written, "removed": part.removed, "refused": part.why,
            "cost": json.loads(json.dumps(part.cost)), "loader": json.loads(json.dumps(part.loader)),
            "exec_reads": json.loads(json.dumps(part.exec_reads)),
            "wrapped": list(obs.wrapped) if obs.wrapped else None,
            "cpus": obs.cpus, "host": obs.host, "refusals": obs.unreached, "history": history}


def observation_from(d: Dict[str, Any]) -> Observation:
    """The observation a golden document's "inputs" hold (the command itself is not kept)."""
    part = Interposer(used=not d["refused"], why=d["refused"], records=records_from(d["records"]),
                      written=d["written"], removed=d["removed"], cost=d["cost"],
                      loader=d.get("loader", {}),      # recorded before the loader's reads were measured: none
                      exec_reads=d.get("exec_reads", {}))   # recorded before the kernel's exec reads: none
    return Observation(command=[], exe="", pid=d["pid"], started="", finished="", wall_s=d["wall_s"], start_s=0.0,
                       ended=Exit(**d["ended"]), sampled=sampled_from(d["sampled"]), counters=d["counters"],
                       interposer=part, competing=[Finding(**f) for f in d["competing"]], host=d["host"],
                       cpus=d["cpus"], wrapped=tuple(d["wrapped"]) if d["wrapped"] else None,
                       unreached=d["refusals"])


def history_from(d: Dict[str, Any]):
    """The history lookup that gives the recorded answers."""
    return lambda prefix: [tuple(r) for r in d["history"].get(prefix, [])]


def outputs_doc(done: Analysed, obs: Observation) -> Dict[str, Any]:
    """What the analysis said, as JSON values (tuples as lists, dataclasses as dicts)."""
    out = {"profile": done.profile, "bounds": done.bounds, "findings": done.findings, "metrics": done.metrics,
           "overhead": done.overhead, "exit_status": obs.exit_status, "signal": obs.signal, "code": obs.code,
           "partial_reason": done.partial_reason}
    return json.loads(json.dumps(plain(out)))
