"""Companions: processes ceiling starts beside an observed program, entered through
``Instruments.beside`` (observe/run.py enters each before the program starts and leaves it
after the program ended). Co-runners (probes/corunner.py says what each kind runs, how large
its arrays are and where it runs): one set of each kind serves every arm and round of an
experiment (experiments/sensitivity.py): making a bandit's arrays, four times the last-level
cache, cost 1-5 s a time on a VM (the host backs fresh memory page by page), 12 starts a
round. Each ``running(duty)`` block is one run of their kernel; it is what ``beside`` takes.
"""
from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
from typing import Dict, Iterator, List, Optional, Sequence

from ..probes.corunner import KINDS, elements_for

LINE_TIMEOUT_S = 60.0      # a co-runner's answer: "ready" after making its arrays, a rate after a stop


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


class NodeTracks:
    """The node's counters read every ``interval_s`` beside the program, in a thread (probes/
    node_sampler.py, the monitor's reads): what ``ceiling trace`` draws under its calls and what
    tells a slow write's cause (the program's own write-back, or another job on the device).
    Entered through ``Instruments.beside``; ``reads`` holds every read, the first at entry and the
    last at exit. A read that fails (a /proc file gone) is skipped; reading never stops the program."""

    def __init__(self, interval_s: float = 0.1, root: str = "/"):
        import threading

        from ..probes.node_sampler import NodeSampler
        self.interval_s = max(0.01, float(interval_s))
        self.sampler = NodeSampler(root)
        self.reads: list = []
        self._stop = threading.Event()
        self._thread: Optional[object] = None
        self.cpu_s = 0.0                     # the thread's own CPU time, stated with the tracks

    def _read(self) -> None:
        try:
            self.reads.append(self.sampler.read())
        except (OSError, ValueError):
            pass

    def _loop(self) -> None:
        import time
        t0 = time.thread_time()
        while not self._stop.wait(self.interval_s):
            self._read()
        self.cpu_s = time.thread_time() - t0

    def __enter__(self) -> "NodeTracks":
        import threading
        self._read()
        self._thread = threading.Thread(target=self._loop, name="ceiling-node-tracks", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._read()
