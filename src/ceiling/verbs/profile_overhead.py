"""What watching a program cost, for ``ceiling profile`` (verbs/profile.py): ceiling's own
start-up and wrap-up apart from the program's time, and --overhead's reruns (the program
alone and watched, interleaved, each observed by observe/ as the profile is, compared only
where every run ended alike). The interposer's calls times its cost per call, and the
sampler's CPU, are analysis/profile_run.py's ``watching_cost``.
"""
from __future__ import annotations

import os
import time
from typing import Optional

OVERHEAD_ROUNDS = 3          # --overhead: the program this many times alone and as many watched, interleaved


def plain_run(profiled, rounds: int = OVERHEAD_ROUNDS) -> dict:
    """--overhead: the program of the ``profiled`` observation ``rounds`` times alone and
    ``rounds`` times watched as the profile watched it (the /proc sampler at its interval, and
    the interposer where it was put in; not the counters), interleaved, output discarded, each
    observed by observe/ as the profile is, timed from start to wait4. The slowdown is the
    watched runs' median over the plain runs' median, with each pair's as the spread; a
    comparison whose runs did not all end as the profiled run did (exit status or signal: a
    second run that fails because the first left its output file) is refused, not computed.
    ``wall_s`` / ``profiled_wall_s`` are the medians; the first profiled run is not among them
    (the file cache was cold for it, and ceiling's own start-up is apart: "ceiling_s")."""
    import statistics
    from ..observe import Instruments, observe
    interposed = profiled.interposer.used
    alone = Instruments(interval_s=0, interpose=False, counters=False, cost="", competing=False,
                        discard_output=True)
    watched_alike = Instruments(interval_s=profiled.sampled.interval_s, interpose=interposed, counters=False,
                                cost="", competing=False, discard_output=True)
    plain, watched, codes = [], [], {"plain": [], "profiled": []}
    try:
        for _ in range(rounds):
            for way, into in (("plain", plain), ("profiled", watched)):
                o = observe(profiled.command, profiled.exe, alone if way == "plain" else watched_alike)
                if o.interruption:
                    return {"why": "interrupted"}
                into.append(o.wall_s)
                codes[way].append(o.code)           # as the shell says a signal: 128 + N
    except KeyboardInterrupt:
        return {"why": "interrupted"}
    except OSError as e:
        return {"why": f"the program could not be run again ({e.strerror})"}
    profiled_code = profiled.code
    out = {"rounds": rounds, "plain_s": plain, "profiled_s": watched, "exit_statuses": codes,
           "first_profiled_s": profiled.wall_s, "profiled_exit_status": profiled_code,
           "how": f"{rounds} runs alone and {rounds} watched by the sampler"
                  + (" and the interposer" if interposed else "") + " (no counters), interleaved"}
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
