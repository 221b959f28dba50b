"""`ceiling profile --experiments`: the program run again, alone and beside co-runners, with
the other page size and watched for its working set (experiments/sensitivity.py), then with
OMP_NUM_THREADS at a few counts (experiments/scaling.py); what that says
(analysis/profile_experiments.py, analysis/profile_scaling.py), and whether the node let it
say anything (the competing load around each set of runs, checks/load.py). Each re-run has a
deadline; Ctrl-C or SIGTERM stops them and the caller (verbs/profile.py) marks the run
partial."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import List, Optional

from ..checks.load import competing_during


EXPERIMENT_ROUNDS = 2


def experiments(cmd: List[str], exe: str, m, code: int, bounds, findings, wall: float = 0.0,
                cpu: Optional[float] = None):
    """--experiments: the program again, alone and beside co-runners (experiments/sensitivity.py), and
    what that says (analysis/profile_experiments.py). Not when the profiled run failed: a
    program that fails says nothing about its bound. Each re-run has a deadline
    (corunner.deadline_for the profiled ``wall``); Ctrl-C or SIGTERM stops them, and "stopped_by"
    says which (the caller marks the run partial). ``cpu``: the profiled run's CPU time, which sets
    the working-set windows."""
    from ..analysis.profile_experiments import ARMS, apply, classify
    from ..analysis.profile_footprint import wants_other_pages
    from ..experiments.sensitivity import run_arms
    from ..probes.corunner import corunner_cpus, corunner_shares, reference_cpu
    from ..probes.rerun import deadline_for
    if code != 0:
        return {"why": f"not run: the program exited {code}"}, bounds, findings
    allowed = os.sched_getaffinity(0)
    cpus = corunner_cpus(allowed, m)
    ref = reference_cpu(allowed, cpus, m)
    deadline = deadline_for(wall)
    # about 20 windows over a run, 10 ms to 0.1 s of its CPU time each (``cpu``, the profiled run's
    # user + system time; else its wall time): a working set is what a program touches in a stretch of
    # its run, and clearing the pages' accessed bits more often would slow it
    window = min(0.1, max(0.01, (cpu or wall) / 20))
    with _stoppable(), competing_during() as busy:
        res = run_arms(cmd, exe, ARMS, EXPERIMENT_ROUNDS, cpus, m.last_level_cache_bytes(),
                       progress=lambda text: print(f"ceiling: {text}", file=sys.stderr, flush=True), reference=ref,
                       shares=corunner_shares(cpus, m), deadline_s=deadline, window_s=window,
                       other_pages=lambda fp: wants_other_pages(fp, _caches(m)))
    out = {"rounds": EXPERIMENT_ROUNDS, "corunner_cpus": cpus, "reference_cpu": ref, "cost_s": res["cost_s"],
           "times_s": res["times"], "deadline_s": deadline,
           "corunner_rates": res["rates"], "failed": res["failed"], "interrupted": res["interrupted"],
           "footprint": res["footprint"], "footprint_pages": res["footprint_pages"], "page_setting": res["pages"]}
    if res["stopped_by"]:
        out["stopped_by"] = res["stopped_by"]
    if res["overdue"] or res["failed"] or res["interrupted"] or \
            any(len(v) < EXPERIMENT_ROUNDS for v in res["times"].values()):
        out["why"] = (f"{res['stopped_by']}: stopped during the experiments" if res["interrupted"] else
                      f"a re-run ({res['overdue']}) passed its deadline of {deadline:.0f} s ({DEADLINE_WORDS}) and "
                      "was killed with its process group; the experiments stopped there" if res["overdue"] else
                      f"the program failed in {', '.join(f'{a} (exit {c})' for a, c in res['failed'].items())}"
                      if res["failed"] else "not every arm finished")
        return out, bounds, findings
    # slowdowns and stolen bandwidth beside other busy processes say as much about them as about the
    # program: the node was disturbed, and only what is not a time (the working set) may still decide
    if busy:
        out["competing_load"] = busy[0].evidence
    verdict = classify(res["times"], res["rates"], res["footprint"], res["pages"], _caches(m),
                       [f"{busy[0].title.rstrip('.')}: {busy[0].evidence}"] if busy else [], res["footprint_pages"])
    out.update({k: v for k, v in verdict.items() if k != "words"}, words=verdict.get("words", ""))
    bounds, findings = apply(verdict, bounds, findings)
    out["scaling"], more = _scaling(cmd, exe, deadline)
    if out["scaling"].get("stopped_by"):
        out["stopped_by"] = out["scaling"]["stopped_by"]
    return out, bounds, findings + more


DEADLINE_WORDS = "10 times the profiled run, 20 s at least"


def _caches(m) -> dict:
    """One core's private caches (the largest level below the last that one core has to itself, or
    shares only with its SMT siblings: their share) and the last-level cache, in bytes."""
    data = [c for c in getattr(m, "caches", None) or [] if c.type != "instruction"]
    top = max((c.level for c in data), default=None)
    private = [c.size_bytes // max(1, c.cpus_per_instance or 1) for c in data
               if c.level != top and (c.cpus_per_instance or 1) <= max(1, m.smt or 1)]
    return {"private_bytes": max(private) if private else None, "llc_bytes": m.last_level_cache_bytes()}


@contextlib.contextmanager
def _stoppable():
    """Ctrl-C and SIGTERM as a KeyboardInterrupt through the experiments (cli.main makes SIGTERM one;
    a caller that did not would have the default action end ceiling and lose the profile): the
    re-runs catch it, kill the running one and return what they measured."""
    from ..errors import raise_terminated
    try:
        old = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
               signal.SIGTERM: signal.signal(signal.SIGTERM, raise_terminated)}
    except ValueError:                  # not the main thread: signals are not ours to take
        old = {}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _scaling(cmd: List[str], exe: str, deadline: Optional[float] = None):
    """--experiments, thread scaling: the program on 1, half and all the CPUs it may use
    (OMP_NUM_THREADS; experiments/scaling.py), and what the curve says (analysis/profile_scaling.py)."""
    from ..analysis.profile_scaling import classify, finding
    from ..experiments.scaling import run_threads, thread_counts
    counts = thread_counts(len(os.sched_getaffinity(0)))
    if not counts:
        return {"why": "one CPU: no thread counts to compare"}, []
    with _stoppable(), competing_during() as busy:
        res = run_threads(cmd, exe, counts, EXPERIMENT_ROUNDS,
                          progress=lambda text: print(f"ceiling: {text}", file=sys.stderr, flush=True),
                          deadline_s=deadline)
    out = {"counts": counts, "times_s": res["times"], "cpu_s": res["cpu_s"], "cost_s": res["cost_s"]}
    if res["stopped_by"]:
        out["stopped_by"] = res["stopped_by"]
    if res["failed"] or res["interrupted"] or res["overdue"] or busy:
        out["why"] = (f"{res['stopped_by']}: stopped during the experiments" if res["interrupted"] else
                      f"a run on {res['overdue']} thread(s) passed its deadline of {deadline:.0f} s "
                      f"({DEADLINE_WORDS}) and was killed with its process group" if res["overdue"] else
                      f"not judged: {busy[0].title.rstrip('.')} ({busy[0].evidence})" if busy else
                      "the program failed on " + ", ".join(f"{n} thread(s) (exit {c})"
                                                           for n, c in res["failed"].items()))
        return out, []
    verdict = classify(res["times"], res["cpu_s"])
    out.update(verdict)
    return out, [finding(verdict)]
