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

Each co-runner is ``python -m ceiling.probes.corunner KIND DUTY ELEMENTS CPU``: a
process of its own (no GIL shared with ceiling), pinned to its CPU, that runs
until SIGTERM. Nothing here decides anything (analysis/profile_experiments.py).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

KINDS = ("bandit", "pirate", "spin", "resident")
PERIOD_S = 0.02


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
    """Started co-runners, stopped (and reaped) by ``stop`` or on leaving a with block."""

    def __init__(self, kind: str, duty: float, cpus: Sequence[int], llc_bytes: Optional[int],
                 shares: Optional[Dict[int, int]] = None):
        if kind not in KINDS:
            raise ValueError(f"no co-runner {kind!r}")
        self.kind, self.duty, self.cpus = kind, duty, list(cpus)
        self.elements = {cpu: elements_for(kind, llc_bytes, (shares or {}).get(cpu, 1)) for cpu in self.cpus}
        self.procs: List[subprocess.Popen] = []
        self.rates: List[float] = []      # each co-runner's rate while it ran (B/s, or flop/s for spin)

    def __enter__(self) -> "CoRunners":
        env = dict(os.environ)
        for k in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT"):
            env.pop(k, None)
        for cpu in self.cpus:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "ceiling.probes.corunner", self.kind, str(self.duty), str(self.elements[cpu]),
                 str(cpu)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env))
        for p in self.procs:          # each says "ready" once its arrays are touched and it runs
            line = p.stdout.readline() if p.stdout else b""
            if line.strip() != b"ready":
                self.stop()
                raise RuntimeError(f"the {self.kind} co-runner did not start")
        return self

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                out, _ = p.communicate(timeout=10)
                words = out.split()
                if len(words) == 2 and words[0] == b"rate":
                    self.rates.append(float(words[1]))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def rate(self) -> Optional[float]:
        """The co-runners' rate summed, once stopped; None when one did not say."""
        return sum(self.rates) if self.rates and len(self.rates) == len(self.cpus) else None

    def __exit__(self, *exc) -> None:
        self.stop()


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
             shares: Optional[Dict[int, int]] = None) -> Dict[str, Any]:
    """Run the program (its output discarded) once per arm per round, the arms' order rotating
    from round to round, and after each round every co-runner kind alone for as long as the
    program ran alone, and, on CPU ``reference`` (reference_cpu), the experiment's power: a
    thread streaming memory (the bandit's own kernel) alone and beside the bandits, and one
    working in half the last-level cache (resident) alone and beside the pirates: {"times":
    {arm: [s, ...]}, "rates": {arm, KIND_alone, reference_alone, reference_beside_bandit,
    resident_alone, resident_beside_pirate: [rate, ...]}, "failed": {arm: exit status},
    "cost_s", "interrupted": bool}. An arm is (name, co-runner kind or None, duty). Ctrl-C
    stops the experiments and keeps what was measured."""
    times: Dict[str, List[float]] = {a[0]: [] for a in arms}
    rates: Dict[str, List[Optional[float]]] = {}
    failed: Dict[str, int] = {}
    t_start = time.monotonic()
    env = {k: v for k, v in (env or os.environ).items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    if reference is None:
        reference = reference_cpu(os.sched_getaffinity(0), cpus)
    try:
        for rnd in range(rounds):
            order = list(arms[rnd % len(arms):]) + list(arms[:rnd % len(arms)])
            for name, kind, duty in order:
                if progress:
                    progress(f"experiments: round {rnd + 1}/{rounds}, {name}")
                if kind is None:
                    t, rc = _timed(cmd, exe, env)
                else:
                    with CoRunners(kind, duty, cpus, llc_bytes, shares) as co:
                        t, rc = _timed(cmd, exe, env)
                    rates.setdefault(name, []).append(co.rate())
                if rc != 0:
                    failed[name] = rc
                else:
                    times[name].append(t)
            # each co-runner kind alone, as long as the program runs alone: its rate with nothing beside it
            span = min(2.0, max(0.3, min(times["alone"]) if times.get("alone") else 1.0))
            for kind in sorted({k for _, k, d in arms if k and d == 1.0}):
                with CoRunners(kind, 1.0, cpus, llc_bytes, shares) as co:
                    time.sleep(span)
                rates.setdefault(f"{kind}_alone", []).append(co.rate())
            # the experiment's power: what the bandits take from a thread that only streams memory,
            # what the pirates take from one that works in the cache
            if reference is not None:
                for kind, co, name in (("bandit", "bandit", "reference"), ("resident", "pirate", "resident")):
                    with CoRunners(co, 1.0, cpus, llc_bytes, shares):
                        with CoRunners(kind, 1.0, [reference], llc_bytes) as ref:
                            time.sleep(span)
                    rates.setdefault(f"{name}_beside_{co}", []).append(ref.rate())
                    with CoRunners(kind, 1.0, [reference], llc_bytes) as ref:
                        time.sleep(span)
                    rates.setdefault(f"{name}_alone", []).append(ref.rate())
    except KeyboardInterrupt:
        return {"times": times, "rates": rates, "failed": failed, "cost_s": time.monotonic() - t_start,
                "interrupted": True}
    return {"times": times, "rates": rates, "failed": failed, "cost_s": time.monotonic() - t_start,
            "interrupted": False}


def _timed(cmd: Sequence[str], exe: str, env: Dict[str, str]) -> Tuple[float, int]:
    t0 = time.monotonic()
    rc = subprocess.run(list(cmd), executable=exe, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    return time.monotonic() - t0, rc


SLICE = 1 << 18          # doubles per array a memory step works on: 6 MiB moved, about 0.4 ms


def _main(kind: str, duty: float, elements: int, cpu: int) -> None:
    """The co-runner's loop. Memory kinds allocate and touch their arrays once, then add b + c
    into a (STREAM's Add: 24 bytes an element, as STREAM counts them) slice by slice, so the
    duty cycle holds even where one pass over the arrays outlasts the period; numpy's add from
    one core moves what the C core's Triad does (15.8 and 15.6 GB/s from DRAM on the 2-vCPU
    development VM). A kernel that allocates per call would spend its time in page faults
    instead (1.5 GB/s seen). spin runs the C core's FMA peak kernel, registers only."""
    os.sched_setaffinity(0, {cpu})
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
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
    work = 0.0
    t_start = time.monotonic()
    while not stop:
        t0 = time.monotonic()
        while time.monotonic() - t0 < duty * PERIOD_S and not stop:
            work += step()
        rest = PERIOD_S - (time.monotonic() - t0)
        if rest > 0 and duty < 1 and not stop:
            time.sleep(rest)
    # its rate over its whole life (duty included): what it got of the machine beside the program
    rate = work / (time.monotonic() - t_start)
    # (nothing when the arrays do not hold what was written: the caller then has no rate)
    print(f"rate {rate}" if check() else "invalid", flush=True)


if __name__ == "__main__":
    _main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
