"""Co-runners for the sensitivity experiments of `ceiling profile --experiments`:
processes that run one of ceiling's own kernels beside the program, on a CPU of
their own, until they are stopped.

- ``bandit``: STREAM Triad over arrays four times the last-level cache, that
  is, memory traffic (the Bandwidth Bandit of Eklöv et al., CGO 2012), at a duty
  cycle: the kernel runs ``duty`` of every 20 ms period and sleeps the rest, so
  intensities are fractions of what one core can pull;
- ``pirate``: STREAM Triad over arrays that fill about three quarters of the
  last-level cache and stay there, taking its capacity from the program without
  much memory traffic (Cache Pirating, Eklöv et al., ICPP 2011);
- ``spin``: the FMA peak kernel, registers only: the control, what merely
  sharing the core's time or its SMT sibling's pipelines costs.

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

KINDS = ("bandit", "pirate", "spin")
PERIOD_S = 0.02


def elements_for(kind: str, llc_bytes: Optional[int]) -> int:
    """Doubles per array of the Triad's three: 4x the last-level cache for the bandit, 3/4 of
    it for the pirate (32 MiB when the cache's size is unknown); 0 for spin."""
    llc = llc_bytes or 32 << 20
    if kind == "bandit":
        return max(1 << 20, 4 * llc // 8 // 3)
    if kind == "pirate":
        return max(1 << 12, 3 * llc // 4 // 8 // 3)
    return 0


class CoRunners:
    """Started co-runners, stopped (and reaped) by ``stop`` or on leaving a with block."""

    def __init__(self, kind: str, duty: float, cpus: Sequence[int], llc_bytes: Optional[int]):
        if kind not in KINDS:
            raise ValueError(f"no co-runner {kind!r}")
        self.kind, self.duty, self.cpus = kind, duty, list(cpus)
        self.elements = elements_for(kind, llc_bytes)
        self.procs: List[subprocess.Popen] = []
        self.rates: List[float] = []      # each co-runner's rate while it ran (B/s, or flop/s for spin)

    def __enter__(self) -> "CoRunners":
        env = dict(os.environ)
        for k in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT"):
            env.pop(k, None)
        for cpu in self.cpus:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "ceiling.probes.corunner", self.kind, str(self.duty), str(self.elements),
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


def corunner_cpus(allowed: Sequence[int]) -> List[int]:
    """Where the co-runners run: the last quarter of the CPUs this process may use, one at
    least (the program keeps all of them: the control arm measures what sharing them costs)."""
    cpus = sorted(allowed)
    return cpus[-max(1, len(cpus) // 4):]


def run_arms(cmd: Sequence[str], exe: str, arms: Sequence[Tuple[str, Optional[str], float]], rounds: int,
             cpus: Sequence[int], llc_bytes: Optional[int], env: Optional[Dict[str, str]] = None,
             progress: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Run the program (its output discarded) once per arm per round, the arms' order rotating
    from round to round, and after each round every co-runner kind alone for as long as the
    program ran alone, and a reference thread streaming memory (the bandit's own kernel, on
    a CPU of the program's) alone and beside the bandit: {"times": {arm: [s, ...]}, "rates":
    {arm, KIND_alone, reference_alone, reference_beside_bandit: [co-runner rate, ...]},
    "failed": {arm: exit status}, "cost_s", "interrupted": bool}. An arm is (name, co-runner kind or None, duty). Ctrl-C stops the
    experiments and keeps what was measured."""
    times: Dict[str, List[float]] = {a[0]: [] for a in arms}
    rates: Dict[str, List[Optional[float]]] = {}
    failed: Dict[str, int] = {}
    t_start = time.monotonic()
    env = {k: v for k, v in (env or os.environ).items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    reference_cpus = [c for c in sorted(os.sched_getaffinity(0)) if c not in cpus][:1]
    try:
        for rnd in range(rounds):
            order = list(arms[rnd % len(arms):]) + list(arms[:rnd % len(arms)])
            for name, kind, duty in order:
                if progress:
                    progress(f"experiments: round {rnd + 1}/{rounds}, {name}")
                if kind is None:
                    t, rc = _timed(cmd, exe, env)
                else:
                    with CoRunners(kind, duty, cpus, llc_bytes) as co:
                        t, rc = _timed(cmd, exe, env)
                    rates.setdefault(name, []).append(co.rate())
                if rc != 0:
                    failed[name] = rc
                else:
                    times[name].append(t)
            # each co-runner kind alone, as long as the program runs alone: its rate with nothing beside it
            span = min(2.0, max(0.3, min(times["alone"]) if times.get("alone") else 1.0))
            for kind in sorted({k for _, k, d in arms if k and d == 1.0}):
                with CoRunners(kind, 1.0, cpus, llc_bytes) as co:
                    time.sleep(span)
                rates.setdefault(f"{kind}_alone", []).append(co.rate())
            # the experiment's power: what the bandit takes from a thread that only streams memory
            if reference_cpus:
                with CoRunners("bandit", 1.0, cpus, llc_bytes):
                    with CoRunners("bandit", 1.0, reference_cpus, llc_bytes) as ref:
                        time.sleep(span)
                rates.setdefault("reference_beside_bandit", []).append(ref.rate())
                with CoRunners("bandit", 1.0, reference_cpus, llc_bytes) as ref:
                    time.sleep(span)
                rates.setdefault("reference_alone", []).append(ref.rate())
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


def _main(kind: str, duty: float, elements: int, cpu: int) -> None:
    from .. import core
    os.sched_setaffinity(0, {cpu})
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    if kind == "spin":
        k, size = core.find("peak_fma_dp"), {"iters": 2_000_000}
    else:
        k, size = core.find("stream_triad"), {"elements": elements, "iters": 1}
    core.run(k, reps=1, cpus=[cpu], **size)                    # first touch, and the library loaded
    print("ready", flush=True)
    unit = k.flops_per_iter if kind == "spin" else k.bytes_per_iter
    work = busy = 0.0
    t_start = time.monotonic()
    while not stop:
        t0 = time.monotonic()
        while time.monotonic() - t0 < duty * PERIOD_S and not stop:
            r = core.run(k, reps=1, cpus=[cpu], **size)
            work += r.iters * unit
            busy += sum(r.times_s)
        rest = PERIOD_S - (time.monotonic() - t0)
        if rest > 0 and duty < 1 and not stop:
            time.sleep(rest)
    # its rate over its whole life (duty included): what it got of the machine beside the program
    print(f"rate {work / (time.monotonic() - t_start) if busy > 0 else 0.0}", flush=True)


if __name__ == "__main__":
    _main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
