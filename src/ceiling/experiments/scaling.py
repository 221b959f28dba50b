"""Thread scaling inside the node, for `ceiling profile --experiments`: the program observed
again (observe/, with nothing but its times and status asked of it), its output discarded, in a
process group of its own with a deadline, with OMP_NUM_THREADS set to each of a few thread
counts, the counts' order rotating from round to round; each run's wall time and the CPU time
of the program and its children (wait4's rusage), from which the CPUs it kept busy follow.
analysis/profile_scaling.py says what the curve means. It uses observe/ as any new verb that
runs a program would (trace, scale): the instruments it wants, and the Observation back."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..errors import interruption
from ..observe import Instruments, Overdue, observe


def thread_counts(cpus: int) -> List[int]:
    """1, half the CPUs (when that is a count of its own) and all of them; [] on one CPU."""
    if cpus < 2:
        return []
    return sorted({1, cpus // 2, cpus} - {0})


def run_threads(cmd: Sequence[str], exe: str, counts: Sequence[int], rounds: int,
                env: Optional[Dict[str, str]] = None, progress: Optional[Callable[[str], None]] = None,
                deadline_s: Optional[float] = None) -> Dict[str, Any]:
    """{"times": {n: [s, ...]}, "cpu_s": {n: [s, ...]}, "failed": {n: exit status}, "cost_s",
    "interrupted", "stopped_by", "overdue"}; Ctrl-C (or SIGTERM made a KeyboardInterrupt) stops
    the runs and keeps what was measured, as does a run past ``deadline_s`` (its process group
    killed; "overdue" then names its thread count). A failed run's status is subprocess's (-N:
    killed by signal N)."""
    base = {k: v for k, v in (env or os.environ).items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    times: Dict[int, List[float]] = {n: [] for n in counts}
    cpu: Dict[int, List[float]] = {n: [] for n in counts}
    failed: Dict[int, int] = {}
    out: Dict[str, Any] = {"times": times, "cpu_s": cpu, "failed": failed, "interrupted": False, "stopped_by": "",
                           "overdue": None}
    t_start = time.monotonic()
    try:
        for rnd in range(rounds):
            order = list(counts[rnd % len(counts):]) + list(counts[:rnd % len(counts)])
            for n in order:
                if progress:
                    progress(f"experiments: round {rnd + 1}/{rounds}, {n} thread{'s' if n != 1 else ''}")
                out["overdue"] = n
                o = observe(list(cmd), exe, Instruments(
                    interval_s=0, interpose=False, counters=False, cost="", competing=False, discard_output=True,
                    env=dict(base, OMP_NUM_THREADS=str(n)), own_group=True, deadline_s=deadline_s))
                out["overdue"] = None
                if o.returncode != 0:
                    failed[n] = o.returncode
                else:
                    times[n].append(o.wall_s)
                    cpu[n].append(o.ended.user_s + o.ended.system_s)
    except KeyboardInterrupt as e:
        out["interrupted"], out["stopped_by"], out["overdue"] = True, interruption(e)[0], None
    except Overdue:
        pass
    out["cost_s"] = time.monotonic() - t_start
    return out
