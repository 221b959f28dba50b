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

Each co-runner is ``python -m ceiling.probes.corunner KIND ELEMENTS CPU`` (``_main``
here): a process of its own (no GIL shared with ceiling), pinned to its CPU, that makes
its arrays once and then runs on command: ``go DUTY`` on its stdin starts the
kernel, ``stop`` stops it and has it print its rate since the ``go``, per second
and per second of the CPU it had (``rate R R_CPU``; or ``invalid``), end of
input ends it. observe/companions.py starts and commands them (CoRunners), and
experiments/sensitivity.py runs the program beside them; this module says how large
their arrays are and where they run. Nothing here decides anything
(analysis/profile_experiments.py).
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

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
