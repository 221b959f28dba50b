"""Thread scaling inside the node, for `ceiling profile --experiments`: the program run
again, uninstrumented and its output discarded, with OMP_NUM_THREADS set to each of a few
thread counts, the counts' order rotating from round to round; each run's wall time and
the CPU time of the program and its children (wait4's rusage), from which the CPUs it
kept busy follow. analysis/profile_scaling.py says what the curve means."""
from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple


def thread_counts(cpus: int) -> List[int]:
    """1, half the CPUs (when that is a count of its own) and all of them; [] on one CPU."""
    if cpus < 2:
        return []
    return sorted({1, cpus // 2, cpus} - {0})


def run_threads(cmd: Sequence[str], exe: str, counts: Sequence[int], rounds: int,
                env: Optional[Dict[str, str]] = None, progress: Optional[Callable[[str], None]] = None
                ) -> Dict[str, Any]:
    """{"times": {n: [s, ...]}, "cpu_s": {n: [s, ...]}, "failed": {n: exit status}, "cost_s",
    "interrupted"}; Ctrl-C stops the runs and keeps what was measured."""
    base = {k: v for k, v in (env or os.environ).items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    times: Dict[int, List[float]] = {n: [] for n in counts}
    cpu: Dict[int, List[float]] = {n: [] for n in counts}
    failed: Dict[int, int] = {}
    t_start = time.monotonic()
    try:
        for rnd in range(rounds):
            order = list(counts[rnd % len(counts):]) + list(counts[:rnd % len(counts)])
            for n in order:
                if progress:
                    progress(f"experiments: round {rnd + 1}/{rounds}, {n} thread{'s' if n != 1 else ''}")
                wall, used, rc = _timed(cmd, exe, dict(base, OMP_NUM_THREADS=str(n)))
                if rc != 0:
                    failed[n] = rc
                else:
                    times[n].append(wall)
                    cpu[n].append(used)
    except KeyboardInterrupt:
        return {"times": times, "cpu_s": cpu, "failed": failed, "cost_s": time.monotonic() - t_start,
                "interrupted": True}
    return {"times": times, "cpu_s": cpu, "failed": failed, "cost_s": time.monotonic() - t_start,
            "interrupted": False}


def _timed(cmd: Sequence[str], exe: str, env: Dict[str, str]) -> Tuple[float, float, int]:
    """(wall s, user + system CPU s of the program and the children it waited for, exit status)."""
    t0 = time.monotonic()
    p = subprocess.Popen(list(cmd), executable=exe, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        _, status, ru = os.wait4(p.pid, 0)
    except BaseException:
        p.kill()
        p.wait()
        raise
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - t0, ru.ru_utime + ru.ru_stime, p.returncode
