"""Compute or memory, from hardware counters, for a profiled program whose time was on
a CPU (the undecided "cpu" bound of analysis/profile.py).

What the counters give (probes/perf_counters.derive): instructions per cycle, the share of
cycles the back end stalled, last-level read misses per 1000 instructions, and from those
misses a lower bound of the memory traffic (read misses x line; prefetches and
write-backs are not in it). The rule, in order:

- memory bandwidth: that lower bound is at least BANDWIDTH_SHARE of this node's STREAM
  Triad (history or a quick measurement, analysis/profile_ceilings.py). Since the bound
  leaves traffic out, reaching it is strong evidence; missing it proves nothing, so
  this is never used to say "not memory" on its own.
- memory latency: the back end stalled at least STALL_SHARE of the cycles and the
  program misses the last-level cache at least LATENCY_MPKI times per 1000
  instructions, with the traffic below the bandwidth rule: the cores wait for
  single misses (pointer chasing, irregular access), not for bandwidth.
- compute: instructions per cycle at least COMPUTE_IPC and few last-level misses
  (under QUIET_MPKI per 1000 instructions): the cores are busy with the work.
- otherwise undecided, with what was missing or in between; the experiments
  (--experiments) can still decide.

Every verdict says how sure it is: "medium" for a rule met by a margin, "low" within
MARGIN of its threshold. The verdict is reached before the bounds are (``classify``, on the
memory traffic's comparison alone) and given to analysis/profile.py's ``conclude``, which
builds the "cpu" bound with the counters' word once its bounds are final (``settle``); the
verdict's finding comes last (``finding``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from ..results.analysis import Bound
from ..results.model import OK, WARN, Finding

BANDWIDTH_SHARE = 0.6
STALL_SHARE = 0.5
LATENCY_MPKI = 5.0
COMPUTE_IPC = 1.0
QUIET_MPKI = 1.0
MARGIN = 0.2                 # within 20 % of a threshold: confidence low


def _sure(value: float, threshold: float, above: bool = True) -> str:
    ratio = value / threshold if above else threshold / value if value else float("inf")
    return "medium" if ratio >= 1 + MARGIN else "low"


def classify(counters: Dict[str, Any], ceilings: List[Dict[str, Any]]) -> Dict[str, Any]:
    """{"bound": "memory" | "compute" | None, "by": "bandwidth" | "latency" | None, "words",
    "confidence", "why" (when None)}."""
    if not counters.get("available"):
        return {"bound": None, "why": counters.get("why") or "no hardware counters"}
    d = {k: (v or {}).get("value") for k, v in (counters.get("derived") or {}).items()}
    ipc, stall, mpki = d.get("ipc"), d.get("backend_stall_share"), d.get("llc_load_misses_per_kilo_instruction")
    mem = next((c for c in ceilings if c.get("what", "").startswith("memory traffic")), None)
    share = mem.get("share") if mem else None
    said = []
    if ipc is not None:
        said.append(f"{ipc:.2f} instructions per cycle")
    if stall is not None:
        said.append(f"back end stalled {stall:.0%} of the cycles")
    if mpki is not None:
        said.append(f"{mpki:.3g} last-level misses per 1000 instructions")
    if share is not None:
        said.append(f"memory traffic at least {mem['program']:.4g} MB/s, {share:.0%} of STREAM Triad "
                    f"({mem['ceiling']:.4g} MB/s, {mem.get('source', '')})")
    words = "; ".join(said)
    if share is not None and share >= BANDWIDTH_SHARE:
        return {"bound": "memory", "by": "bandwidth", "words": words, "confidence": _sure(share, BANDWIDTH_SHARE)}
    if stall is not None and mpki is not None and stall >= STALL_SHARE and mpki >= LATENCY_MPKI:
        sure = min(_sure(stall, STALL_SHARE), _sure(mpki, LATENCY_MPKI), key=("low", "medium").index)
        return {"bound": "memory", "by": "latency", "words": words, "confidence": sure}
    if ipc is not None and mpki is not None and ipc >= COMPUTE_IPC and mpki < QUIET_MPKI:
        sure = min(_sure(ipc, COMPUTE_IPC), _sure(mpki, QUIET_MPKI, above=False), key=("low", "medium").index)
        return {"bound": "compute", "by": None, "words": words, "confidence": sure}
    lacking = [n for n, v in (("instructions per cycle", ipc), ("back-end stalls", stall),
                              ("last-level misses", mpki)) if v is None]
    why = (f"the counters do not give {', '.join(lacking)}" if lacking else
           "the counters sit between the rules (neither busy cores with few misses, nor stalls on many misses, "
           "nor traffic near STREAM)")
    return {"bound": None, "words": words, "why": why + (f" ({words})" if words else "")}


WHAT = {"bandwidth": "memory bandwidth", "latency": "memory latency", None: "computation"}
# The "cpu" bound's last words, by what the counters said: nothing to tell with, undecided, or a verdict.
NO_COUNTERS = "; compute and memory cannot be told apart without hardware counters"
NO_COUNTERS_TITLE = "(compute or memory: no hardware counters to tell)"
UNDECIDED_TITLE = "(compute or memory: the hardware counters do not tell)"


def settle(bounds: List[Bound], findings: List[Finding], verdict: Optional[Dict[str, Any]], counted: bool,
           pending: bool = False, mpi: str = "") -> Tuple[List[Bound], List[Finding], Optional[Dict[str, Any]]]:
    """The "cpu" bound and its finding with the counters' word, as new values: analysis/profile.py
    builds them without it and calls this once its bounds are final. ``verdict``: ``classify``'s
    (None: not asked); ``counted``: the counters counted; ``pending``: the bound is the split's
    (its words end before "compute or memory ..."; a "no class dominates" one says none); ``mpi``:
    the share outside MPI, in words, that comes after the counters' "cannot be told apart" and
    before a verdict. Returns the verdict too (None when there is no "cpu" bound to decide)."""
    if not any(b.bound == "cpu" for b in bounds):
        return bounds, findings, None
    v = verdict or {"bound": None, "why": "no hardware counters"}
    if not v["bound"] and not counted:
        return ([replace(b, evidence=b.evidence + (NO_COUNTERS if pending else "") + mpi) if b.bound == "cpu" else b
                 for b in bounds],
                [replace(f, title=f"{f.title} {NO_COUNTERS_TITLE}") if f.id == "profile.cpu" else f for f in findings],
                verdict)
    if not v["bound"]:
        # counted, but undecided: say so instead of "no counters"
        return ([replace(b, evidence=f"{b.evidence}{mpi}; the hardware counters do not decide: {v['why']}")
                 if b.bound == "cpu" else b for b in bounds],
                [replace(f, title=f"{f.title} {UNDECIDED_TITLE}") if f.id == "profile.cpu" else f for f in findings],
                v)
    said = f"; hardware counters: {WHAT[v['by']]} ({v['words']}; confidence {v['confidence']})"
    return ([Bound(b.subject, v["bound"], b.share, b.evidence + mpi + said, dict(b.data, counters=v))
             if b.bound == "cpu" else b for b in bounds],
            [f for f in findings if f.id != "profile.cpu"], v)


def finding(v: Dict[str, Any]) -> Finding:
    """The counters' verdict on the time on a CPU, as a finding (``v``: ``classify``'s, decided)."""
    by, what = v["by"], WHAT[v["by"]]
    return Finding(
        id="profile.counters.bound", status=WARN if by else OK,
        title=f"Hardware counters: the time on a CPU is {what}" + ("" if by else " (not memory)"),
        evidence=f"{v['words']}; confidence {v['confidence']}",
        why=("The memory traffic is near what this node's memory delivers: more cores or faster code will not "
             "help until the program moves less data." if by == "bandwidth" else
             "The cores stall on last-level cache misses while the bandwidth is far from used: each miss is "
             "waited for alone (dependent or irregular accesses)." if by == "latency" else
             "The cores retire instructions at a good rate and rarely miss the last-level cache: the speed is "
             "the cores'."),
        fix=("Move less data: block for the caches, fuse loops, use smaller types; place threads over every "
             "memory channel (NUMA)." if by == "bandwidth" else
             "Make accesses regular or independent (arrays instead of lists, prefetch, sort by address), or keep "
             "the working set in the cache." if by == "latency" else
             "Vectorise, use more cores, or reduce the work; compare with the node's peak ('ceiling bench "
             "compute')."),
        data=v)
