"""Sensitivity experiments, for `ceiling profile --experiments`: the program observed again
(observe/), alone and beside co-runners (observe/companions.py; probes/corunner.py says what
each kind runs and where), with the other page size (probes/rerun.page_setting), and once
(twice where its data lies beyond the cache: footprint_run) while its working set is read
(probes/rerun.Footprint, the observation's look). Every re-run is ``again``'s: in a process
group of its own, its output discarded, nothing watching it but what the run asks for, killed
with its group past its deadline (Overdue) or when ceiling is stopped (KeyboardInterrupt).
Nothing here decides anything (analysis/profile_experiments.py).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import interruption
from ..observe import Instruments, Overdue, observe
from ..observe.companions import CoRunners
from ..probes.corunner import KINDS, reference_cpu
from ..probes.rerun import Footprint, page_setting


def again(env: Dict[str, str], deadline_s: Optional[float], look: Optional[Footprint] = None, no_thp: bool = False,
          beside: Sequence[Any] = ()) -> Instruments:
    """How a re-run is observed: in a process group of its own with its deadline, its output
    discarded, no sampler, interposer, counters or competing load (its wall time, wait4's CPU
    time and its exit status are what is asked of it), ``look`` reading its pages, ``no_thp``
    with huge pages off, ``beside`` its companions."""
    return Instruments(interval_s=0, interpose=False, counters=False, cost="", competing=False,
                       discard_output=True, env=env, own_group=True, deadline_s=deadline_s, look=look,
                       no_thp=no_thp, beside=beside)


def run_arms(cmd: Sequence[str], exe: str, arms: Sequence[Tuple[str, Optional[str], float]], rounds: int,
             cpus: Sequence[int], llc_bytes: Optional[int], env: Optional[Dict[str, str]] = None,
             progress: Optional[Callable[[str], None]] = None, reference: Optional[int] = None,
             shares: Optional[Dict[int, int]] = None, deadline_s: Optional[float] = None,
             window_s: Optional[float] = None,
             other_pages: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Dict[str, Any]:
    """Run the program (its output discarded) once per arm per round, the arms' order rotating
    from round to round, and after each round every co-runner kind alone for as long as the
    program ran alone, and, on CPU ``reference`` (reference_cpu), the experiment's power: a
    thread streaming memory (the bandit's own kernel) alone and beside the bandits, and one
    working in half the last-level cache (resident) alone and beside the pirates. After the
    rounds, once more alone while its working set is read every ``window_s`` (Footprint), and
    where ``other_pages(that footprint)`` says so, once more with the other page size, read alike
    ("footprint_pages": how fast it references pages of either size).
    An arm is (name, co-runner kind, duty): kind None runs it alone, "pages" alone with the
    other page size (page_setting). {"times": {arm: [s, ...]}, "rates": {arm, KIND_alone,
    reference_alone, reference_beside_bandit, resident_alone, resident_beside_pirate: [rate,
    ...]}, "failed": {arm: exit status}, "footprint", "pages", "cost_s", "interrupted": bool,
    "stopped_by": what interrupted them ("" when nothing did), "overdue": the arm whose run
    passed ``deadline_s`` and was killed}. Ctrl-C, or SIGTERM made a KeyboardInterrupt, stops
    the experiments (the running re-run's process group killed) and keeps what was measured;
    so does a re-run past its deadline: the next would most likely hang too."""
    times: Dict[str, List[float]] = {a[0]: [] for a in arms}
    rates: Dict[str, List[Optional[float]]] = {}
    failed: Dict[str, int] = {}
    t_start = time.monotonic()
    env = {k: v for k, v in (env or os.environ).items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    if reference is None:
        reference = reference_cpu(os.sched_getaffinity(0), cpus)
    pool: Dict[Tuple[str, Tuple[int, ...]], CoRunners] = {}
    pages = page_setting()
    if pages.get("why"):
        times.pop("pages", None)
    out: Dict[str, Any] = {"times": times, "rates": rates, "failed": failed, "pages": pages, "footprint": None,
                           "footprint_pages": None,
                           "interrupted": False, "stopped_by": "", "overdue": None}

    def co(kind: str, on: Sequence[int], duty: float) -> Any:
        """The co-runners of ``kind`` on ``on`` (made at their first use), running at ``duty``."""
        key = (kind, tuple(on))
        if key in pool and not pool[key].alive():
            pool.pop(key).close()       # one of them died: a new set
        if key not in pool:
            pool[key] = CoRunners(kind, on, llc_bytes, shares if list(on) == list(cpus) else None).open()
        return pool[key].running(duty)

    def timed(name: str, run_env: Dict[str, str], watch: Optional[Footprint] = None, no_thp: bool = False,
              beside: Sequence[Any] = ()) -> Tuple[float, int]:
        try:
            o = observe(list(cmd), exe, again(run_env, deadline_s, watch, no_thp, beside))
        except Overdue:
            out["overdue"] = name
            raise
        return o.wall_s, o.returncode

    try:
        for rnd in range(rounds):
            order = list(arms[rnd % len(arms):]) + list(arms[:rnd % len(arms)])
            for name, kind, duty in order:
                if name not in times:
                    continue
                if progress:
                    progress(f"experiments: round {rnd + 1}/{rounds}, {name}")
                if kind is None:
                    t, rc = timed(name, env)
                elif kind == "pages":
                    seen = Footprint(window_s or 0.1, clear=False)
                    t, rc = timed(name, dict(env, **pages["env"]), seen, pages["no_thp"])
                    pages.setdefault("anon_huge_bytes", []).append(seen.huge_bytes)
                else:
                    running = co(kind, cpus, duty)          # a companion of the run: its go before, its stop after
                    t, rc = timed(name, env, beside=[running])
                    rates.setdefault(name, []).append(pool[(kind, tuple(cpus))].rate())
                if rc != 0:
                    failed[name] = rc
                else:
                    times[name].append(t)
            # each co-runner kind alone, as long as the program runs alone: its rate with nothing beside it
            span = min(2.0, max(0.3, min(times["alone"]) if times.get("alone") else 1.0))
            for kind in sorted({k for _, k, d in arms if k in KINDS and d == 1.0}):
                with co(kind, cpus, 1.0) as c:
                    time.sleep(span)
                rates.setdefault(f"{kind}_alone", []).append(c.rate())
            # the experiment's power: what the bandits take from a thread that only streams memory,
            # what the pirates take from one that works in the cache
            if reference is not None:
                for kind, other, name in (("bandit", "bandit", "reference"), ("resident", "pirate", "resident")):
                    with co(other, cpus, 1.0):
                        with co(kind, [reference], 1.0) as ref:
                            time.sleep(span)
                    rates.setdefault(f"{name}_beside_{other}", []).append(ref.rate())
                    with co(kind, [reference], 1.0) as ref:
                        time.sleep(span)
                    rates.setdefault(f"{name}_alone", []).append(ref.rate())
                    # one core's streaming rate per second of CPU it had: what a program's working-set
                    # rate is set beside (analysis/profile_footprint.stream_rate)
                    rates.setdefault(f"{name}_alone_per_cpu_s", []).append(ref.cpu_rate())
        if window_s:
            if progress:
                progress("experiments: its working set, alone")
            out["footprint"] = footprint_run(cmd, exe, env, window_s, deadline_s)
            if other_pages and not pages.get("why") and other_pages(out["footprint"]):
                if progress:
                    progress("experiments: its working set with the other page size")
                out["footprint_pages"] = footprint_run(cmd, exe, env, window_s, deadline_s, pages)
    except KeyboardInterrupt as e:
        out["interrupted"], out["stopped_by"] = True, interruption(e)[0]
    except Overdue:
        out["interrupted"] = False
        # a working-set run's, which is not timed()
        out["overdue"] = out["overdue"] or ("footprint_pages" if out["footprint"] else "footprint")
    finally:
        while pool:
            pool.popitem()[1].close()
    out["cost_s"] = time.monotonic() - t_start
    return out


def footprint_run(cmd: Sequence[str], exe: str, env: Dict[str, str], window_s: float,
                  deadline_s: Optional[float] = None, pages: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The program once more, alone, its working set read every ``window_s`` (probes/rerun.Footprint;
    shorter where a window took in all its data), with the other page size where ``pages``
    (page_setting) is given. Its output discarded; past ``deadline_s`` Overdue is raised."""
    env = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    seen = Footprint(window_s)
    o = observe(list(cmd), exe, again(dict(env, **(pages or {}).get("env", {})), deadline_s, seen,
                                      bool((pages or {}).get("no_thp"))))
    return {"window_s": window_s, "referenced_bytes": seen.windows, "cpu_s": seen.cpu_s, **seen.timing(),
            "wall_s": o.wall_s, "anon_huge_bytes": seen.huge_bytes, "exit_status": o.returncode,
            "look_s": seen.look_s}
