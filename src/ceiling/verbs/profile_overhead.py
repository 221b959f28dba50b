"""What watching a program cost, for ``ceiling profile`` (verbs/profile.py): the interposer's
calls times its measured cost per call, the sampler's CPU, ceiling's own start-up and
wrap-up apart from the program's time, and --overhead's reruns (the program alone and
watched, interleaved, compared only where every run ended alike).
"""
from __future__ import annotations

import os
import time
from typing import List, Optional

from ..files.private import make_dir, remove_tree


def cost(cost: dict, breakdown: dict, wall: float, calls: int, mpi_calls: int, busiest: int) -> dict:
    """What watching cost: the interposer's measured ns per call times the calls it counted in
    every process, launchers included; the slowdown the program saw is that of its busiest
    process (the others ran beside it): its calls times the cost over the wall time. And the
    sampler's CPU."""
    per = cost.get("per_call_ns")
    out = {"per_call_ns": per, "calls": calls, "mpi_calls": mpi_calls,
           "sampler_cpu_s": breakdown["sampler"]["cpu_s"],
           "sampler_share_of_one_cpu": breakdown["sampler"]["share_of_one_cpu"]}
    if per is not None:
        out["interposer_s"] = per * calls / 1e9
        out["busiest_calls"] = busiest
        out["fraction"] = per * busiest / 1e9 / wall if wall else None
        out["how"] = cost.get("how", "")
    elif cost:
        out["why"] = cost.get("why", "")
    return out


OVERHEAD_ROUNDS = 3          # --overhead: the program this many times alone and as many watched, interleaved


def plain_run(cmd: List[str], exe: str, profiled_s: float, profiled_code: int = 0,
               env: Optional[dict] = None, interval: float = 0.1, rounds: int = OVERHEAD_ROUNDS) -> dict:
    """--overhead: the program ``rounds`` times alone and ``rounds`` times watched as the profile
    watches it (the /proc sampler, and the interposer when ``env`` preloads it; not the
    counters), interleaved, output discarded, each timed from start to wait4. The slowdown is
    the watched runs' median over the plain runs' median, with each pair's as the spread; a
    comparison whose runs did not all end as the profiled run did (exit status or signal: a
    second run that fails because the first left its output file) is refused, not computed.
    ``wall_s`` / ``profiled_wall_s`` are the medians; the first profiled run is not among them
    (the file cache was cold for it, and ceiling's own start-up is apart: "ceiling_s")."""
    import statistics
    import subprocess
    from ..probes.proc_sampler import ProcSampler

    def once(watched: bool):
        run_env, tmp = None, ""                  # alone: ceiling's own environment, without the interposer
        if watched and env is not None:
            run_env, tmp = dict(env), make_dir("ceiling-overhead-")
            run_env["CEILING_INTERPOSE_OUT"] = os.path.join(tmp, "interpose.%p")
        try:
            t0 = time.monotonic()
            p = subprocess.Popen(cmd, executable=exe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=run_env)
            sampler = ProcSampler(p.pid, interval).start() if watched else None
            rc = p.wait()
            wall = time.monotonic() - t0
            if sampler:
                sampler.stop()
        finally:
            remove_tree(tmp)
        return wall, 128 - rc if rc < 0 else rc           # as the shell says a signal: 128 + N

    plain, watched, codes = [], [], {"plain": [], "profiled": []}
    try:
        for _ in range(rounds):
            for way, into in (("plain", plain), ("profiled", watched)):
                wall, code = once(way == "profiled")
                into.append(wall)
                codes[way].append(code)
    except KeyboardInterrupt:
        return {"why": "interrupted"}
    except OSError as e:
        return {"why": f"the program could not be run again ({e.strerror})"}
    out = {"rounds": rounds, "plain_s": plain, "profiled_s": watched, "exit_statuses": codes,
           "first_profiled_s": profiled_s, "profiled_exit_status": profiled_code,
           "how": f"{rounds} runs alone and {rounds} watched by the sampler"
                  + (" and the interposer" if env is not None else "") + " (no counters), interleaved"}
    differ = sorted({c for v in codes.values() for c in v if c != profiled_code})
    if differ:
        out["why"] = (f"the runs did not end alike: the profiled run ended {profiled_code}, the reruns "
                      f"{', '.join(str(c) for c in codes['plain'])} alone and "
                      f"{', '.join(str(c) for c in codes['profiled'])} watched (a program that fails the second "
                      "time, on an output file the first left, says nothing about the cost)")
        return out
    mp, mw = statistics.median(plain), statistics.median(watched)
    pairs = sorted(w / q - 1 for q, w in zip(plain, watched) if q > 0)
    out.update(wall_s=mp, profiled_wall_s=mw, slowdown=mw / mp - 1 if mp > 0 else None,
               spread={"min": pairs[0], "max": pairs[-1]} if pairs else {})
    return out


def since_start() -> Optional[float]:
    """Seconds since this process started: its /proc starttime (clock ticks after boot) against
    CLOCK_BOOTTIME, to the tick (10 ms); None where either cannot be read."""
    from ..sysfs import stat_fields
    try:
        with open("/proc/self/stat", "rb") as f:
            start = int(stat_fields(f.read())[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def own_time(startup: Optional[float], wrap_up: float, quick: float, cost: dict) -> dict:
    """ceiling's own time, apart from the program's: from its start to the program's (Python,
    imports, the checks before it; the interposer's cost per call, from the cache when
    ``cost["cached"]``) and from the program's end to this record (the analysis, the quick
    ceilings measured then, ``quick_ceilings_s``); the report's writing after it is not in it."""
    return {"startup_s": startup, "wrap_up_s": wrap_up, "quick_ceilings_s": quick,
            "interposer_cost_cached": cost.get("cached"),
            "how": "start-up: the process's /proc starttime to the program's start (10 ms steps); wrap-up: the "
                   "program's end to its analysis done, the quick ceilings included; the report's writing after "
                   "it is not counted"}
