"""Who held the CPUs while a profiled program waited for one: its own threads, or other
load on the node. A program is oversubscribed only where its runnable threads (state R at
the same sample: running or waiting for a CPU) outnumbered the CPUs its processes may use;
make -j2 runs two compilers at a time however many it runs over its life, and its wait for
a CPU beside someone else's job is that job's doing. Other load is checks/load.py's finding
over the program's run (the bench verbs' own: processes named with their share of a CPU,
the hypervisor's steal), and says the program's time split is disturbed.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..probes.proc_sampler import Sampled
from ..results.model import WARN, Finding


def concurrency(s: Sampled, cpus: int) -> Dict[str, Any]:
    """How many of the program's threads wanted a CPU at once, from the thread states of each
    sample (R: running or runnable), against the CPUs its processes may use (the union of
    their Cpus_allowed_list at their latest sample, else ``cpus``): the most and the mean over
    the samples where any did, and ``excess``: the share of those runnable threads beyond its
    CPUs, the part of its waiting for a CPU its own threads explain. Not the number of threads
    it ever had: make -j2 runs two compilers at a time, dozens over its life."""
    allowed = len({c for p in s.processes.values() for c in p.cpus_allowed}) or cpus
    counts = [n for n in s.runnable if n > 0]
    if not counts:
        return {"cpus": allowed, "samples": 0}
    return {"cpus": allowed, "samples": len(counts), "max": max(counts), "mean": sum(counts) / len(counts),
            "excess": sum(max(0, n - allowed) for n in counts) / sum(counts)}


def own_oversubscription(conc: Dict[str, Any], shares: Dict[str, float]) -> Optional[bool]:
    """Whether the program's own threads explain its waiting for a CPU: their runnable excess
    over its CPUs (``concurrency``) is at least half the share of its CPU-wanting time it spent
    waiting; None when no sample saw a thread of it runnable (then nothing tells)."""
    if not conc.get("samples"):
        return None
    wanting = shares["on_cpu"] + shares["runq"]
    return conc["excess"] >= 0.5 * (shares["runq"] / wanting if wanting else 0.0)


def findings(competing: Sequence[Finding], waited: Optional[float], shares: Dict[str, float],
             conc: Dict[str, Any]) -> List[Finding]:
    """profile.competing: other load during the program's run (checks/load.py's finding, its
    processes named with their share of a CPU), which disturbs the split; and where the
    program's wait for a CPU was not its own threads' (``waited``: that share), says so."""
    if not competing and not waited:
        return []
    load = competing[0] if competing else None
    said = load.title.replace(" during the measurement", "") if load else ""
    mine = (f"its own threads: at most {conc['max']} runnable at once on {conc['cpus']} CPUs"
            if conc.get("samples") else "")
    if waited:
        title = (f"Waited for a CPU {waited:.0%} of the time because other load held the CPUs, not because of "
                 f"its own threads" + (f": {said[:1].lower()}{said[1:]}" if said else ""))
    else:
        title = f"{said} while the program ran: its time split is disturbed"
    evidence = "; ".join(x for x in (load.evidence if load else
                                     "the competing processes were not named: the run was too short to "
                                     "judge other processes' CPU time, or they are not visible here", mine) if x)
    data = dict(load.data) if load else {}
    data.update(runnable=conc, **({"runq_share": waited} if waited else {}))
    return [Finding(
        id="profile.competing", status=WARN, title=title, evidence=evidence,
        why="Other processes took CPU time (and memory bandwidth) from the program while it ran: its time on "
            "and off a CPU, its wall time and its rates are not what it does on an idle node.",
        fix=(load.fix if load and load.fix else "profile it on an idle node or an exclusive allocation "
             "(srun --exclusive)") + "; threads and ranks are not the thing to cut here", data=data)]


def oversubscribed(runq: float, own: Optional[bool], conc: Dict[str, Any], cpus: int, evidence: str,
                   data: Dict[str, Any]) -> Finding:
    """profile.oversubscribed: the program's runnable threads outnumbered its CPUs (``own``), or
    no sample saw which threads were runnable and no other load was named (None)."""
    return Finding(
        id="profile.oversubscribed", status=WARN,
        title=(f"Threads waited for a CPU {runq:.0%} of their time: more runnable threads than CPUs"
               + (f" (up to {conc['max']} on {cpus})" if own else "")),
        evidence=evidence,
        why="A runnable thread that waits for a CPU makes no progress; the program asks for more CPUs "
            "than it has." if own else
            "A runnable thread that waits for a CPU makes no progress; no sample saw which threads were "
            "runnable, so the program or other load on the node asked for more CPUs than there are.",
        fix=f"Run at most {cpus} busy threads (OMP_NUM_THREADS, ranks per node) or give the job more CPUs"
            + ("." if own else ", or find the competing load ('ceiling check')."), data=data)
