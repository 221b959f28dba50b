"""Co-runners for the sensitivity experiments of `ceiling profile --experiments`:
processes that run a kernel (STREAM Add, or ceiling's FMA kernel) beside the
program, on a CPU of their own, until they are stopped.

- ``bandit``: STREAM Add over arrays four times the last-level cache, that
  is, memory traffic (the Bandwidth Bandit of Eklöv et al., CGO 2012), at a duty
  cycle: the kernel runs ``duty`` of every 20 ms period and sleeps the rest, so
  intensities are fractions of what one core can pull;
- ``pirate``: STREAM Add over arrays that fill about three quarters of the
  last-level cache and stay there, taking its capacity from the program without
  much memory traffic (Cache Pirating, Eklöv et al., ICPP 2011);
- ``spin``: the FMA peak kernel, registers only: the control, what merely
  sharing the core's time or its SMT sibling's pipelines costs;
- ``resident``: STREAM Add over arrays that fill half the last-level cache:
  not a co-runner but the reference that tells whether the pirate can take the
  cache at all (beside it, the two together overflow the cache).

Co-runners run in every last-level cache domain (else every NUMA node) of the
CPUs the program may use: a pirate takes only the cache it shares, and a bandit
presses only its own memory controllers, so co-runners on one socket of two
would leave the program's other half untouched.

Each co-runner is ``python -m ceiling.probes.corunner KIND ELEMENTS CPU``: a
process of its own (no GIL shared with ceiling), pinned to its CPU, that makes
its arrays once and then runs on command: ``go DUTY`` on its stdin starts the
kernel, ``stop`` stops it and has it print its rate since the ``go``, per second
and per second of the CPU it had (``rate R R_CPU``; or ``invalid``), end of
input ends it. One set of each kind serves every arm and round of an experiment
(run_arms): making a bandit's arrays, four times the last-level cache, cost 1-5 s
a time on a VM (the host backs fresh memory page by page), 12 starts a round.
run_arms also runs the program with the other page size, and once (twice where
its data lies beyond the cache: footprint_run) while its working set is read,
each run through probes/rerun.py (a deadline, its own process group). Nothing
here decides anything (analysis/profile_experiments.py).
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

KINDS = ("bandit", "pirate", "spin", "resident")
PERIOD_S = 0.02
LINE_TIMEOUT_S = 60.0      # a co-runner's answer: "ready" after making its arrays, a rate after a stop


def elements_for(kind: str, llc_bytes: Optional[int], share: int = 1) -> int:
    """Doubles per array of the Add's three: 4x the last-level cache for the bandits, 3/4 of
    it for the pirates, each of the ``share`` co-runners of one cache domain taking its part
    (two pirates of 3/4 each would overflow the cache and stream from memory); half of it for
    the resident reference (32 MiB when the cache's size is unknown); 0 for spin."""
    llc = llc_bytes or 32 << 20
    share = max(1, share)
    if kind == "bandit":
        return max(1 << 20, 4 * llc // 8 // 3 // share)
    if kind == "pirate":
        return max(1 << 12, 3 * llc // 4 // 8 // 3 // share)
    if kind == "resident":
        return max(1 << 12, llc // 2 // 8 // 3)
    return 0


class CoRunners:
    """Co-runners of one kind on ``cpus``, their arrays made once (``open``, or a with block,
    which ``close``s them), each ``running(duty)`` block one run of the kernel beside
    whatever it wraps, its rates in ``rates`` after."""

    def __init__(self, kind: str, cpus: Sequence[int], llc_bytes: Optional[int],
                 shares: Optional[Dict[int, int]] = None):
        if kind not in KINDS:
            raise ValueError(f"no co-runner {kind!r}")
        self.kind, self.cpus = kind, list(cpus)
        self.elements = {cpu: elements_for(kind, llc_bytes, (shares or {}).get(cpu, 1)) for cpu in self.cpus}
        self.procs: List[subprocess.Popen] = []
        self.rates: List[float] = []      # each co-runner's rate over its last run (B/s, or flop/s for spin)
        self.cpu_rates: List[float] = []  # the same work per second of CPU time it had (a shared node's share left out)

    def open(self) -> "CoRunners":
        env = dict(os.environ)
        for k in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT"):
            env.pop(k, None)
        try:
            for cpu in self.cpus:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "ceiling.probes.corunner", self.kind, str(self.elements[cpu]), str(cpu)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env))
            for p in self.procs:      # each says "ready" once its arrays are touched
                if self._line(p) != b"ready":
                    raise RuntimeError(f"the {self.kind} co-runner did not start")
        except BaseException:
            self.close()
            raise
        return self

    @staticmethod
    def _line(p: subprocess.Popen, timeout: float = LINE_TIMEOUT_S) -> bytes:
        """Its next line, or nothing (and it killed) when it says none in ``timeout`` seconds:
        a stopped or hung co-runner must not hang the profile."""
        if not p.stdout or not select.select([p.stdout], [], [], timeout)[0]:
            p.kill()
            return b""
        return p.stdout.readline().strip()

    def alive(self) -> bool:
        """Every co-runner still there (one killed from outside, or by the kernel's OOM killer,
        would leave the arms with less pressure than they say)."""
        return bool(self.procs) and all(p.poll() is None for p in self.procs)

    def _say(self, words: str) -> None:
        for p in self.procs:
            try:
                if p.stdin:
                    p.stdin.write(words.encode() + b"\n")
                    p.stdin.flush()
            except OSError:             # it died: no rate from it
                pass

    @contextlib.contextmanager
    def running(self, duty: float) -> Iterator["CoRunners"]:
        """The kernel running at ``duty`` through the block; ``rates`` then holds this run's."""
        self.rates, self.cpu_rates = [], []
        self._say(f"go {duty}")
        try:
            yield self
        finally:
            self._say("stop")
            for p in self.procs:
                words = self._line(p).split()
                if len(words) == 3 and words[0] == b"rate":
                    self.rates.append(float(words[1]))
                    if float(words[2]) > 0:
                        self.cpu_rates.append(float(words[2]))

    def close(self) -> None:
        procs, self.procs = self.procs, []
        for p in procs:
            try:
                if p.stdin:
                    p.stdin.close()     # end of input: it leaves
            except OSError:
                pass
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            finally:
                if p.stdout:
                    p.stdout.close()

    def rate(self) -> Optional[float]:
        """The co-runners' rate over their last run, summed; None when one did not say."""
        return sum(self.rates) if self.rates and len(self.rates) == len(self.cpus) else None

    def cpu_rate(self) -> Optional[float]:
        """The co-runners' rate per second of CPU time over their last run, summed; None when one
        did not say."""
        return sum(self.cpu_rates) if self.cpu_rates and len(self.cpu_rates) == len(self.cpus) else None

    def __enter__(self) -> "CoRunners":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()


def _domains(allowed: Sequence[int], machine: Any = None) -> List[List[int]]:
    """The CPUs of ``allowed`` grouped by the last-level cache they share (by NUMA node where
    the caches' sharing is unknown); one group when the machine says neither."""
    where = {c.id: (c.l3 if c.l3 is not None else ("node", c.node)) for c in getattr(machine, "cpus", None) or []}
    groups: Dict[Any, List[int]] = {}
    for cpu in sorted(allowed):
        groups.setdefault(where.get(cpu, "?"), []).append(cpu)
    return sorted(groups.values())


def corunner_cpus(allowed: Sequence[int], machine: Any = None) -> List[int]:
    """Where the co-runners run: in each last-level cache domain (machine.cpus' l3, else their
    NUMA node) of the CPUs this process may use, the last quarter of its CPUs; where a domain
    has fewer than 4 of them (a small allocation spread over sockets), the last quarter of all,
    one at least (the program keeps all of them: the control arm measures what sharing them
    costs)."""
    groups = _domains(allowed, machine)
    if min(len(g) for g in groups) < 4:
        groups = [sorted(allowed)]
    return sorted(c for group in groups for c in group[-max(1, len(group) // 4):])


def corunner_shares(cpus: Sequence[int], machine: Any = None) -> Dict[int, int]:
    """For each co-runner CPU, how many co-runners share its last-level cache domain."""
    return {c: len(g) for g in _domains(cpus, machine) for c in g}


def reference_cpu(allowed: Sequence[int], cpus: Sequence[int], machine: Any = None) -> Optional[int]:
    """Where the references that measure the experiment's power run: a CPU that is not a
    co-runner's, in a domain that has co-runners (sharing their cache and memory); None when
    every CPU runs a co-runner (one CPU)."""
    for group in _domains(allowed, machine):
        if set(group) & set(cpus):
            free = [c for c in group if c not in cpus]
            if free:
                return free[0]
    return None


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
    from ..errors import interruption
    from .rerun import Footprint, Overdue, page_setting, rerun
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

    def timed(name: str, run_env: Dict[str, str], watch: Optional[Footprint] = None, no_thp: bool = False):
        try:
            return rerun(cmd, exe, run_env, deadline_s, watch, no_thp)
        except Overdue:
            out["overdue"] = name
            raise

    try:
        for rnd in range(rounds):
            order = list(arms[rnd % len(arms):]) + list(arms[:rnd % len(arms)])
            for name, kind, duty in order:
                if name not in times:
                    continue
                if progress:
                    progress(f"experiments: round {rnd + 1}/{rounds}, {name}")
                if kind is None:
                    t, _, rc = timed(name, env)
                elif kind == "pages":
                    seen = Footprint(window_s or 0.1, clear=False)
                    t, _, rc = timed(name, dict(env, **pages["env"]), seen, pages["no_thp"])
                    pages.setdefault("anon_huge_bytes", []).append(seen.huge_bytes)
                else:
                    with co(kind, cpus, duty) as c:
                        t, _, rc = timed(name, env)
                    rates.setdefault(name, []).append(c.rate())
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
    from .rerun import Footprint, rerun
    env = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    seen = Footprint(window_s)
    t, _, rc = rerun(cmd, exe, dict(env, **(pages or {}).get("env", {})), deadline_s, seen,
                     bool((pages or {}).get("no_thp")))
    return {"window_s": window_s, "referenced_bytes": seen.windows, "cpu_s": seen.cpu_s, **seen.timing(),
            "wall_s": t, "anon_huge_bytes": seen.huge_bytes, "exit_status": rc, "look_s": seen.look_s}


SLICE = 1 << 18          # doubles per array a memory step works on: 6 MiB moved, about 0.4 ms


def _main(kind: str, elements: int, cpu: int) -> None:
    """The co-runner's loop. Memory kinds allocate and touch their arrays once, then, on each
    ``go DUTY``, add b + c into a (STREAM's Add: 24 bytes an element, as STREAM counts them)
    slice by slice, so the duty cycle holds even where one pass over the arrays outlasts the
    period; numpy's add from one core moves what the C core's Triad does (15.8 and 15.6 GB/s
    from DRAM on the 2-vCPU development VM). A kernel that allocates per call would spend its
    time in page faults instead (1.5 GB/s seen). spin runs the C core's FMA peak kernel,
    registers only. ``stop`` (looked for once a period) ends a run: its rate, or ``invalid``
    when the arrays do not hold what was written (the caller then has no rate)."""
    os.sched_setaffinity(0, {cpu})
    ended = []
    signal.signal(signal.SIGTERM, lambda *_: ended.append(1))
    if kind == "spin":
        from .. import core
        k = core.find("peak_fma_dp")
        valid = [True]

        def step() -> float:
            r = core.run(k, reps=1, cpus=[cpu], iters=2_000_000)
            valid[0] = valid[0] and r.valid           # the kernel checks its own result
            return r.iters * k.flops_per_iter
        check: Callable[[], bool] = lambda: valid[0]
    else:
        import numpy as np
        a, b, c = np.full(elements, 0.0), np.full(elements, 1.0), np.full(elements, 2.0)   # all touched
        spans = [slice(j, min(j + SLICE, elements)) for j in range(0, elements, SLICE)]
        at = [0]

        def step() -> float:
            s = spans[at[0] % len(spans)]
            at[0] += 1
            np.add(b[s], c[s], out=a[s])
            return 24.0 * (s.stop - s.start)
        # every element the steps wrote must hold b + c
        check = lambda: bool(np.all(a[:min(elements, at[0] * SLICE)] == 3.0))
    step()
    print("ready", flush=True)
    pending = bytearray()           # stdin read unbuffered: a "go" and its "stop" may come together

    def told() -> bool:
        return b"\n" in pending or bool(select.select([0], [], [], 0)[0])

    def readline() -> bytes:
        while b"\n" not in pending:
            chunk = os.read(0, 4096)
            if not chunk:
                return bytes(pending)
            pending.extend(chunk)
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        return line

    while not ended:
        words = readline().split()
        if not words or words[0] != b"go":
            return                      # end of input (or nonsense): leave
        duty = float(words[1])
        work = 0.0
        t_start, cpu_start = time.monotonic(), time.process_time()
        while True:                     # a period at least: a rate even for a run cut at once
            t0 = time.monotonic()
            while time.monotonic() - t0 < duty * PERIOD_S:
                work += step()
            rest = PERIOD_S - (time.monotonic() - t0)
            if rest > 0 and duty < 1:
                time.sleep(rest)
            if ended or told():
                break
        # its rate over the run (duty included): what it got of the machine beside the program
        # and per second of the CPU it had: what one core does when it runs, whoever else shares the node
        rate = work / (time.monotonic() - t_start)
        ran_s = time.process_time() - cpu_start
        readline()                      # the stop
        print(f"rate {rate} {work / ran_s if ran_s > 0 else 0.0}" if check() else "invalid", flush=True)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
