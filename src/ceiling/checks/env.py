"""The environment the node runs in: a VM or bare metal; variables that cap a BLAS."""
from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any, Dict, Mapping

from ..machine import blas
from ..machine.model import Machine
from ..results.model import Finding
from .base import Probe, check, ok, warn


@check("env.virtualized")
def virtualized(p: Probe):
    """Virtual machine or bare metal (the cpuid hypervisor bit, DMI vendor).

    warn: a VM. The hypervisor decides the clock, where virtual CPUs run on
    physical cores (and whether that changes), how guest memory maps to host
    pages, and which other guests share the hardware: topology and peaks may
    differ from the host's, and figures vary with the host's load.

    Fix: for reference numbers run on bare metal, or with dedicated, pinned
    vCPUs and huge-page-backed guest memory.
    """
    m = p.machine
    if m.virtualized:
        return warn(f"Running in a virtual machine ({m.virtualized})", evidence=f"hypervisor: {m.virtualized}",
                    why="the hypervisor decides clocks, placement of virtual CPUs on physical cores, and memory "
                        "layout: "
                        "topology and peaks may differ from the host's, and other guests compete for the same hardware",
                    fix="for reference numbers run on bare metal, or with dedicated (pinned) vCPUs",
                    cause="virtual_machine", data={"hypervisor": m.virtualized})
    return ok("Bare metal (no hypervisor flag)")


@check("env.blas", live=True)
def blas_env(p: Probe):
    """Environment variables that cap a BLAS's code path or its threads.

    Reads this process's environment and what threadpoolctl reports of the
    BLAS numpy loaded (its core type, threads, threading layer):
    OPENBLAS_CORETYPE (a core type narrower than this CPU: Haswell or Zen
    kernels, AVX2, on an AVX-512 CPU), MKL_ENABLE_INSTRUCTIONS, MKL_CBWR and
    MKL_DEBUG_CPU_TYPE (a narrower MKL code path), OMP_NUM_THREADS,
    OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, MKL_NUM_THREADS, BLIS_NUM_THREADS
    below the CPUs this process may use, OMP_DYNAMIC=true,
    OMP_WAIT_POLICY=passive, GOMP_CPU_AFFINITY or an explicit KMP_AFFINITY
    proclist of one CPU, and a BLAS in LD_PRELOAD. The library's defaults
    are not flagged: only a variable is.

    warn: one of them is set. The finding says what it does to ceiling's own
    DGEMM: capped (its figure is lower for it, and no verdict about the node
    rests on it), ran with it (its peak counts the same cores), overridden
    (ceiling sets the BLAS threads itself through threadpoolctl), or not used
    (a library this process does not call; your programs may). A narrower
    ISA whose peak equals the CPU's widest (AVX2 on Zen 4) is said, not warned.

    Fix: the finding's, chosen from the variable: most often unset it.
    """
    info, why = blas.snapshot()
    return judge_blas(os.environ, blas.Blas.of(info, why), p.machine)


def judge_blas(env: Mapping[str, str], lib: "blas.Blas", machine: Machine) -> Finding:
    """The env.blas finding for an environment and a BLAS as threadpoolctl describes it."""
    caps = blas.env_caps(env, lib, machine)
    shown = [c for c in caps if c.severity == "warn"]
    evidence = "; ".join([c.what for c in caps] + [lib.describe()])
    data: Dict[str, Any] = {"blas": asdict(lib), "causes": [c.data() for c in caps]}
    if not shown:
        f = ok("No environment variable caps the BLAS's code path or threads", evidence=evidence)
        f.data = data
        return f
    first = shown[0]
    more = len(shown) - 1
    title = first.what.split(";")[0] + (f" (and {more} more setting{'s' if more > 1 else ''})" if more else "")
    fixes = list(dict.fromkeys(c.fix for c in shown))
    f = warn(title, evidence=evidence, why=first.why, fix="; ".join(fixes))
    f.data = {**first.data(), **data}
    return f
