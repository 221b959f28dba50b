"""One measuring session: a Run filled step by step, never lost.

Each step (machine, checks, a bench suite) adds to the same Run. Competing
load is sampled before and after every bench step. Ctrl-C or a failing step
ends the session early: the Run is marked partial with the reason and is
still saved and reported by the caller (``finish``).
"""
from __future__ import annotations

import os
import socket
import sys
import uuid
from typing import Callable, Dict, List, Optional, Tuple

from .. import __version__
from ..results.measure import Context, Options, Outcome
from ..errors import CeilingError
from ..machine.model import Machine
from ..results.model import SKIPPED, WARN, Finding, Run, utcnow

# Environment variables that change how kernels and libraries run.
_ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "OPENBLAS_", "MKL_", "BLIS_", "GOTO_", "SLURM_CPUS", "SLURM_JOB_ID",
                 "SLURM_NTASKS", "SLURM_NODELIST", "PBS_JOBID", "LSB_JOBID", "OMPI_COMM_WORLD_", "PMI_RANK",
                 "PMI_SIZE", "I_MPI_", "MV2_", "UCX_", "FI_", "OMPI_MCA_", "MPIR_CVAR_", "PSM2_", "PSM3_",
                 "LD_PRELOAD", "CEILING_")


def environment(opts: Optional[Options], cpus: Optional[List[int]]) -> Dict[str, object]:
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)}
    out: Dict[str, object] = {"variables": env, "python": sys.version.split()[0]}
    if cpus is not None:
        out["threads"] = len(cpus)
        out["cpus"] = list(cpus)
    if opts is not None:
        out["placement"] = opts.placement
        out["quick"] = opts.quick
    try:
        out["affinity"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    return out


class Session:
    def __init__(self, argv: List[str], opts: Optional[Options] = None, progress=None):
        self.opts = opts
        self.progress = progress
        self.run = Run(tool_version=__version__, host=socket.gethostname(), started=utcnow(),
                       command=["ceiling", *argv], run_id=uuid.uuid4().hex)
        self.machine: Optional[Machine] = None
        self.cpus: Optional[List[int]] = None
        # Processes of this measurement (other MPI ranks on this node): not competing load.
        self.own_pids: List[int] = [os.getpid()]
        self.step_errors: List[CeilingError] = []   # why steps were skipped, in order
        self.disturbed: List[Tuple[str, Finding]] = []  # (step, its competing-load finding), said once
        # Steps measured again when they met competing load (the node's own suites; not storage,
        # which writes gigabytes, nor steps under MPI, where the ranks would have to agree), and
        # how many times at most (--retry-disturbed; 0: a disturbed step is shown as disturbed).
        self.remeasure: Tuple[str, ...] = ()
        self.retries = opts.retry_disturbed if opts is not None else 0

    # -- steps -----------------------------------------------------------
    def set_machine(self, machine: Machine, cpus: Optional[List[int]] = None) -> None:
        self.machine = machine
        self.cpus = cpus
        self.run.machine = machine.to_dict()
        self.run.environment = environment(self.opts, cpus)

    def add(self, outcome: Outcome) -> None:
        self.run.metrics += outcome.metrics
        self.run.series += outcome.series
        self.run.findings += outcome.findings

    def context(self) -> Context:
        assert self.machine is not None and self.cpus is not None and self.opts is not None
        from ..results.measure import NullProgress
        return Context(self.machine, self.opts, list(self.cpus), self.progress or NullProgress())

    def bench(self, label: str, fn: Callable[[Context], Outcome]) -> None:
        """One bench step, bracketed by competing-load samples. A step that met competing load
        (other processes, steal time) is measured again up to ``retries`` times (--retry-disturbed)
        when ``remeasure`` allows it; the figures kept are the first quiet attempt's, else the
        last one's, marked ``disturbed`` (no verdict rests on them, no summary shows them as the
        node's) with the load's evidence."""
        outcome, busy = self._attempt(label, fn)
        tries, first = 1, busy[0].evidence if busy else ""
        while busy and label in self.remeasure and tries <= self.retries and not self.step_errors_of(label):
            tries += 1
            outcome, busy = self._attempt(label, fn, f"{label} (again: other processes were busy)")
            note = (f"measured {tries} times: the first attempt met competing load ({first})"
                    + (", and so did every other" if busy else ""))
            for m in outcome.metrics:
                m.context["remeasured"] = note
        if busy:
            self.disturbed += [(label, f) for f in busy]       # one finding for every step, at finish
            for m in outcome.metrics:
                m.context["disturbed"] = busy[0].evidence
                m.note = "; ".join(filter(None, [m.note, "other processes were busy during this measurement"]))
        self.add(outcome)

    def step_errors_of(self, label: str) -> List[CeilingError]:
        return [e for e in self.step_errors if getattr(e, "step", None) == label]

    def _attempt(self, label: str, fn: Callable[[Context], Outcome], shown: str = "") -> Tuple[Outcome, List[Finding]]:
        """Measure the step once: its outcome, and the competing-load findings of that interval."""
        from ..checks import load
        ncpus = len(self.cpus or []) or 1
        before = load.sample()
        if self.progress is not None:
            self.progress.start(shown or label, step=True)
        try:
            outcome = fn(self.context())
        except CeilingError as e:
            # One kernel refusing (no such ISA, no memory, a full disk) skips its step, not the run;
            # what the step measured before (e.outcome: storage's figures before the disk filled)
            # is kept, and the run says it is partial.
            e.step = label          # type: ignore[attr-defined]
            self.step_errors.append(e)
            kept = getattr(e, "outcome", None)
            if kept is not None and (kept.metrics or kept.series):
                outcome = kept
                outcome.findings.append(Finding(
                    id=f"bench.{label}", status=WARN, title=f"{label}: stopped after {len(kept.metrics)} figures",
                    evidence=str(e), why="The figures measured before the failure are kept; the rest of the "
                    "step was not measured."))
                self.partial(str(e) if str(e).startswith(f"{label}:") else f"{label} stopped: {e}")
            else:
                outcome = Outcome(findings=[Finding(id=f"bench.{label}", status=SKIPPED,
                                                    title=f"{label}: not measured", evidence=str(e))])
        finally:
            if self.progress is not None:
                self.progress.done(step=True)
        after = load.sample()
        busy = [f for f in load.compare(before, after, ncpus, own_pids=self.own_pids, check_loadavg=False)
                if f.status in ("warn", "fail")]
        return outcome, busy

    def _disturbed_finding(self) -> Optional[Finding]:
        """One competing-load finding for the steps that met it, each step's evidence in it."""
        if not self.disturbed:
            return None
        steps = [label for label, _ in self.disturbed]
        first = self.disturbed[0][1]
        worst = next((f for _, f in self.disturbed if f.status == "fail"), first)
        # Each step's causes (another process, steal, ...), once each: the fix covers all of them.
        from ..checks import load
        causes = list(dict.fromkeys(c for _, f in self.disturbed for c in f.data.get("causes", [])))
        return Finding(id="load.competing.steps", status="fail" if worst.status == "fail" else "warn",
                       title=f"Competing load during {len(steps)} step{'s' if len(steps) > 1 else ''} "
                             f"({', '.join(steps)}): {worst.title[0].lower()}{worst.title[1:]}",
                       evidence="; ".join(f"{label}: {f.evidence}" for label, f in self.disturbed),
                       why=first.why, fix=load.fix_for(causes) if causes else first.fix,
                       data={"cause": causes[0], "causes": causes} if causes else {})

    # -- end -------------------------------------------------------------
    def interrupted(self, reason: str) -> None:
        self.partial(reason)

    def partial(self, reason: str) -> None:
        """Mark the run partial; every reason is kept, in the order they came."""
        self.run.partial_reason = "; ".join(filter(None, [self.run.partial_reason if self.run.partial else "",
                                                          reason]))
        self.run.partial = True

    def _agree_on_placement(self) -> None:
        """The placement.stability check and the core-to-core bench of one run tell one story:
        modes the bench saw make a stable check a warning; an unstable check is said beside the
        core-to-core figures that saw one mode."""
        check = next((f for f in self.run.findings if f.id == "placement.stability"), None)
        c2c = [m for m in self.run.metrics if m.name.startswith("c2c.") and m.value is not None]
        if check is None or not c2c:
            return
        moded = [m for m in c2c if m.context.get("modes")]
        if moded and check.status == "ok":
            m = moded[0]
            lo, hi = (x["ns"] for x in m.context["modes"])
            check.status = WARN
            check.evidence = "; ".join(filter(None, [check.evidence, f"then the core-to-core bench ({m.name}) "
                                                     f"saw two modes, {lo:.0f} and {hi:.0f} ns"]))
            check.title = (f"Placement is unstable: the core-to-core latency changed between {lo:.0f} and "
                           f"{hi:.0f} ns during the run (the check's own probes were steady)")
            from ..checks.placement import BARE_METAL_WHY, WHY, advice
            virt = (self.run.machine or {}).get("virtualized")
            cause, fix = advice(virt)
            check.why, check.fix = check.why or (WHY if virt else BARE_METAL_WHY), check.fix or fix
            check.data = {**check.data, "cause": cause}
        elif check.status == WARN and not moded:
            for m in c2c:
                m.note = "; ".join(filter(None, [m.note, "placement was unstable when checked (placement.stability): "
                                                 "another run may measure another figure"]))

    def finish(self) -> Run:
        self._agree_on_placement()
        merged = self._disturbed_finding()
        if merged is not None:
            self.run.findings.append(merged)
            self.disturbed = []
        self.run.finished = utcnow()
        return self.run
