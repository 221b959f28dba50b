"""The BLAS this process calls, and what in the environment caps it.

A BLAS picks its code path and its thread count when it loads, and several
environment variables overrule both: ``OPENBLAS_CORETYPE=Haswell`` (set on
many machines to work around old OpenBLAS builds) runs AVX2 kernels on an
AVX-512 CPU, ``MKL_ENABLE_INSTRUCTIONS`` / ``MKL_CBWR`` / ``MKL_DEBUG_CPU_TYPE``
fix MKL's, ``*_NUM_THREADS`` below the CPUs cap its threads, an OpenMP
affinity list of one CPU puts every thread on it, a BLAS in ``LD_PRELOAD``
replaces the one programs link. ``env_caps`` reads an environment and
threadpoolctl's description of the loaded libraries (both passed in, so tests
plant them) and returns one ``Cap`` per variable that changes what a BLAS
runs, each saying what it does to ceiling's own DGEMM (``DGEMM``): ``capped``
(its figure is lower for it: no verdict about the node rests on it),
``ran_with`` (it ran under it, its peak counts the same cores or the same
peak), ``overridden`` (ceiling sets the BLAS threads itself through
threadpoolctl, which raises a count the variable lowered), ``not_used``
(meant for a library or runtime ceiling's DGEMM does not call). Variables a
library ignores are no cap. The library's own default (its thread count,
its core type) is never one: only a variable is.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .model import Machine
from .peaks import flop_peak, widest_isa

# Narrow to wide; "avx" is VEX code without 256-bit FMA (Sandy Bridge's separate 256-bit
# add and multiply, the Bulldozer family's 128-bit FMA4), "sse2" 128-bit SSE without FMA.
ISA_RANK = {"scalar": 0, "sse2": 1, "avx": 2, "avx2": 3, "avx512": 4}
ISA_TITLE = {"scalar": "scalar", "sse2": "SSE2", "avx": "AVX", "avx2": "AVX2", "avx512": "AVX-512",
             "neon": "NEON", "sve": "SVE"}
# ISAs whose peak machine.peaks models (FMA at the ISA's width); the others have no modelled peak.
MODELLED_PEAK = ("avx2", "avx512")

# OpenBLAS x86-64 core types -> the ISA of the DGEMM kernel each runs. The names are
# OPENBLAS_CORETYPE's values (matched without case) and what openblas_get_corename()
# returns, which threadpoolctl reports as "architecture". Source: OpenBLAS
# driver/others/dynamic.c (corename[], force_coretype) and kernel/x86_64/KERNEL.<TARGET>
# (DGEMMKERNEL: gemm_kernel_*_sse2/sse3/core2/nehalem/barcelona/penryn/atom.S use 128-bit
# SSE; dgemm_kernel_4x8_sandy.S 256-bit AVX without FMA; dgemm_kernel_8x2_bulldozer.S and
# _piledriver.S 128-bit FMA4/FMA3; dgemm_kernel_4x8_haswell.S 256-bit FMA3, used by ZEN too;
# dgemm_kernel_16x2_skylakex.c AVX-512, which KERNEL.COOPERLAKE and SAPPHIRERAPIDS include).
OPENBLAS_CORETYPE_ISA = {
    **{k: "sse2" for k in ("katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2", "penryn",
                           "dunnington", "nehalem", "athlon", "opteron", "opteron_sse3", "barcelona", "nano",
                           "bobcat")},
    **{k: "avx" for k in ("sandybridge", "bulldozer", "piledriver", "steamroller", "excavator")},
    "haswell": "avx2", "zen": "avx2",
    "skylakex": "avx512", "cooperlake": "avx512", "sapphirerapids": "avx512",
}
# The core type OPENBLAS_CORETYPE would name for each ISA, for the fix.
OPENBLAS_CORETYPE_FOR = {"avx512": "SkylakeX", "avx2": "Haswell"}

# MKL_ENABLE_INSTRUCTIONS values -> ISA. Source: oneMKL Developer Guide, "Instruction Set
# Specific Dispatching on Intel Architectures" (the table of MKL_ENABLE_INSTRUCTIONS values);
# "not available on non-Intel processors".
MKL_ENABLE_ISA = {"SSE4_2": "sse2", "AVX": "avx", "AVX2": "avx2", "AVX2_E1": "avx2", "AVX512": "avx512",
                  "AVX512_E1": "avx512", "AVX512_E2": "avx512", "AVX512_E3": "avx512", "AVX512_E4": "avx512",
                  "AVX512_E5": "avx512"}
# MKL_CBWR branches -> ISA. Source: oneMKL Developer Guide, "Specifying Code Branches": AUTO keeps
# the ISA dispatch; COMPATIBLE is SSE2; branches other than AUTO and COMPATIBLE "are available only
# for Intel processors"; AVX512_MIC and AVX512_MIC_E1 are deprecated, "equivalent to AVX2".
MKL_CBWR_ISA = {"COMPATIBLE": "sse2", "SSE2": "sse2", "SSE3": "sse2", "SSSE3": "sse2", "SSE4_1": "sse2",
                "SSE4_2": "sse2", "AVX": "avx", "AVX2": "avx2", "AVX512": "avx512", "AVX512_E1": "avx512",
                "AVX512_MIC": "avx2", "AVX512_MIC_E1": "avx2"}
# MKL_DEBUG_CPU_TYPE: undocumented; 5 selects the AVX2 code path; MKL 2020 Update 1 and later ignore it.
MKL_DEBUG_ISA = {"5": "avx2"}

# Thread-count variables, and the libraries that read each.
THREAD_VARS = (("OMP_NUM_THREADS", "openmp"), ("OPENBLAS_NUM_THREADS", "openblas"),
               ("GOTO_NUM_THREADS", "openblas"), ("MKL_NUM_THREADS", "mkl"), ("BLIS_NUM_THREADS", "blis"))
LIBRARY_TITLE = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS", "openmp": "OpenMP programs"}
_BLAS_FILE = re.compile(r"(blas|mkl|blis|atlas|armpl|essl)", re.I)

# Cap.dgemm: what the variable does to ceiling's own DGEMM figure.
CAPPED, RAN_WITH, OVERRIDDEN, NOT_USED = "capped", "ran_with", "overridden", "not_used"


@dataclass
class Blas:
    """The BLAS numpy calls and the OpenMP runtimes loaded, as threadpoolctl describes them."""

    api: str = ""                      # "openblas" | "mkl" | "blis" | "" (none seen)
    version: str = ""
    threading_layer: str = ""          # "pthreads" | "openmp" | "intel" | "gnu" | "tbb" | "sequential" | ...
    architecture: str = ""             # OpenBLAS's core type, BLIS's configuration; "" for MKL
    num_threads: Optional[int] = None  # its thread count now
    filepath: str = ""
    openmp: List[str] = field(default_factory=list)   # OpenMP runtimes loaded: "libgomp", "libiomp", "libomp"
    why: str = ""                      # why nothing is known, when api is ""

    @classmethod
    def of(cls, info: Sequence[Mapping[str, Any]], why: str = "") -> "Blas":
        """From threadpoolctl.threadpool_info()'s list (the first BLAS is numpy's: it loaded first)."""
        omp = sorted({str(i.get("prefix") or i.get("internal_api") or "") for i in info
                      if i.get("user_api") == "openmp"} - {""})
        libs = [i for i in info if i.get("user_api") == "blas"]
        if not libs:
            return cls(openmp=omp, why=why or "threadpoolctl sees no BLAS in this process")
        b = libs[0]
        n = b.get("num_threads")
        return cls(api=str(b.get("internal_api") or ""), version=str(b.get("version") or ""),
                   threading_layer=str(b.get("threading_layer") or ""),
                   architecture=str(b.get("architecture") or ""),
                   num_threads=n if isinstance(n, int) and not isinstance(n, bool) else None,
                   filepath=str(b.get("filepath") or ""), openmp=omp)

    def describe(self) -> str:
        if not self.api:
            return f"BLAS unknown: {self.why}"
        parts = [f"{LIBRARY_TITLE.get(self.api, self.api)} {self.version}".strip()]
        if self.architecture:
            parts.append(f"core type {self.architecture}" if self.api == "openblas"
                         else f"configuration {self.architecture}")
        if self.num_threads is not None:
            parts.append(f"{self.num_threads} thread{'s' if self.num_threads != 1 else ''}")
        if self.threading_layer:
            parts.append(f"threading {self.threading_layer}")
        return ", ".join(parts) + " (threadpoolctl)"

    def isa_run(self) -> Optional[str]:
        """The ISA of the DGEMM kernel the library runs, where it says (OpenBLAS's core type)."""
        if self.api == "openblas":
            return OPENBLAS_CORETYPE_ISA.get(self.architecture.strip().lower())
        return None


def snapshot() -> Tuple[List[Dict[str, Any]], str]:
    """threadpoolctl's view of this process after numpy is loaded, and "" or why there is none."""
    try:
        import numpy  # noqa: F401  threadpoolctl only sees libraries already loaded
        from threadpoolctl import threadpool_info
    except ImportError as e:
        return [], f"{e.name or 'a module'} is not installed"
    return list(threadpool_info()), ""


@dataclass
class Cap:
    """One environment variable that changes what a BLAS runs."""

    variable: str
    value: str
    library: str                       # "openblas" | "mkl" | "blis" | "openmp" | "any"
    effect: str                        # "isa" | "threads" | "affinity" | "dynamic" | "wait_policy" | "preload"
    dgemm: str                         # CAPPED | RAN_WITH | OVERRIDDEN | NOT_USED
    what: str                          # what it does, one sentence
    why: str
    fix: str
    isa_run: Optional[str] = None      # effect "isa": the ISA the library runs under it
    isa_node: Optional[str] = None     # the widest ISA this CPU runs
    peak_run_gflops: Optional[float] = None    # effect "isa": DP peak of isa_run on the node's cores
    peak_node_gflops: Optional[float] = None   # ... and of isa_node
    threads: Optional[int] = None      # effect "threads" / "affinity": threads or CPUs it allows
    cpus: Optional[int] = None         # CPUs this process may use
    severity: str = "warn"             # "warn"; "info": set, but it costs nothing here

    def data(self) -> Dict[str, Any]:
        """The structured cause (Finding.data, Metric.context): the words stay in the finding."""
        d = {"cause": "env", **asdict(self)}
        return {k: v for k, v in d.items() if v is not None and k not in ("what", "why", "fix")}


def _ncpus(machine: Machine) -> int:
    return len(machine.affinity) or sum(1 for c in machine.cpus if c.online) or machine.threads or 1


def _loaded(blas: Blas, library: str) -> Optional[bool]:
    """Whether ceiling's DGEMM calls ``library``; None when threadpoolctl saw no BLAS."""
    return None if not blas.api else blas.api == library


def _isa_cap(var: str, value: str, library: str, isa: Optional[str], blas: Blas, machine: Machine,
             fix: str) -> Optional[Cap]:
    """A cap when ``isa`` is narrower than the widest this CPU runs; None otherwise."""
    node = widest_isa(machine)
    if isa is None or node not in ISA_RANK or ISA_RANK[isa] >= ISA_RANK[node]:
        return None
    used = _loaded(blas, library)
    p_node = flop_peak(machine, "dp", isa=node)
    p_run = flop_peak(machine, "dp", isa=isa) if isa in MODELLED_PEAK else None
    lib = LIBRARY_TITLE[library]
    what = f"{var}={value} has {lib} run its {ISA_TITLE[isa]} code on this {ISA_TITLE[node]} CPU"
    if p_run is not None and p_run.known and p_node.known:
        if p_run.value >= p_node.value:       # Zen 4: 2 x 256-bit pipes either way
            what += f", whose {ISA_TITLE[isa]} peak is its {ISA_TITLE[node]} peak ({p_node.value:g} Gflop/s)"
            return Cap(var, value, library, "isa", RAN_WITH if used else NOT_USED, what,
                       why=f"a code path narrower than the CPU's, but this CPU's {ISA_TITLE[isa]} and "
                           f"{ISA_TITLE[node]} peaks are the same: little is lost", fix=fix, isa_run=isa,
                       isa_node=node, peak_run_gflops=p_run.value, peak_node_gflops=p_node.value, severity="info")
        what += (f": a DP peak of {p_run.value:g} Gflop/s instead of {p_node.value:g} "
                 f"({p_run.value / p_node.value:.0%})")
    elif isa not in MODELLED_PEAK:
        what += f" (no FMA at {ISA_TITLE[node]} width: a fraction of the node's peak)"
    who = ("ceiling's DGEMM runs under it" if used else "ceiling's DGEMM calls another BLAS" if used is False
           else "threadpoolctl sees no BLAS here")
    return Cap(var, value, library, "isa", CAPPED if used else NOT_USED, what + f"; {who}",
               why=f"{lib} then never uses the CPU's {ISA_TITLE[node]} units: dense linear algebra (DGEMM, "
                   f"LAPACK, numpy, every program linked to {lib} and started from this environment) runs at "
                   f"the narrower code path's speed, and the node looks slower than it is",
               fix=fix, isa_run=isa, isa_node=node,
               peak_run_gflops=p_run.value if p_run is not None and p_run.known else None,
               peak_node_gflops=p_node.value if p_node.known else None)


def _coretype(env: Mapping[str, str], blas: Blas, machine: Machine) -> Optional[Cap]:
    value = env.get("OPENBLAS_CORETYPE", "").strip()
    if not value:
        return None
    # What the library reports it runs is the truth; the table only places a value it did not load.
    isa = blas.isa_run() if blas.api == "openblas" else OPENBLAS_CORETYPE_ISA.get(value.lower())
    best = OPENBLAS_CORETYPE_FOR.get(widest_isa(machine))
    fix = ("unset OPENBLAS_CORETYPE: OpenBLAS then detects this CPU" + (f" (or set it to {best})" if best else "")
           + "; if it was set to work around an old OpenBLAS that misdetected the CPU, use a newer OpenBLAS")
    return _isa_cap("OPENBLAS_CORETYPE", value, "openblas", isa, blas, machine, fix)


def _intel(machine: Machine) -> bool:
    return machine.vendor == "GenuineIntel"


def _mkl_year(blas: Blas) -> Optional[int]:
    m = re.match(r"(\d{4})", blas.version) if blas.api == "mkl" else None
    return int(m.group(1)) if m else None


def _mkl(env: Mapping[str, str], blas: Blas, machine: Machine) -> List[Cap]:
    out = []
    v = env.get("MKL_ENABLE_INSTRUCTIONS", "").strip()
    if v and _intel(machine):       # "not available on non-Intel processors"
        c = _isa_cap("MKL_ENABLE_INSTRUCTIONS", v, "mkl", MKL_ENABLE_ISA.get(v.upper()), blas, machine,
                     "unset MKL_ENABLE_INSTRUCTIONS: MKL then dispatches the widest code path this CPU runs")
        out.append(c)
    v = env.get("MKL_CBWR", "").strip()
    branch = v.upper().removeprefix("BRANCH=").split(",")[0].strip()
    if branch and (branch == "COMPATIBLE" or _intel(machine)):
        out.append(_isa_cap("MKL_CBWR", v, "mkl", MKL_CBWR_ISA.get(branch), blas, machine,
                            "unset MKL_CBWR (or MKL_CBWR=AUTO) unless you need results reproducible across "
                            f"machines; MKL_CBWR={widest_isa(machine).upper()} keeps them reproducible on "
                            "machines of this ISA"))
    v = env.get("MKL_DEBUG_CPU_TYPE", "").strip()
    year = _mkl_year(blas)
    if v and (year is None or year < 2021):     # MKL 2020 Update 1 and later ignore it
        out.append(_isa_cap("MKL_DEBUG_CPU_TYPE", v, "mkl", MKL_DEBUG_ISA.get(v), blas, machine,
                            "unset MKL_DEBUG_CPU_TYPE: it only ever helped MKL 2020.0 and older on AMD CPUs"))
    return [c for c in out if c is not None]


def _count(v: str) -> Optional[int]:
    first = v.split(",")[0].strip()
    return int(first) if re.fullmatch(r"[0-9]{1,9}", first) and int(first) > 0 else None


def _threads(env: Mapping[str, str], blas: Blas, ncpus: int) -> List[Cap]:
    out = []
    for var, library in THREAD_VARS:
        v = env.get(var, "").strip()
        n = _count(v) if v else None
        if n is None or n >= ncpus:
            continue
        per = "CPU" if n == 1 else f"{n} CPUs"
        fix = (f"unset {var} or set it to {ncpus} (the CPUs this process may use) for one process per node; "
               f"keep it where you run one MPI rank per {per}")
        why = (f"a program started from this environment runs {n} thread{'s' if n > 1 else ''} on "
               f"{ncpus} CPUs: right with one MPI rank per {per}, "
               f"{ncpus - n} CPU{'s' if ncpus - n > 1 else ''} idle otherwise")
        lib = LIBRARY_TITLE[library]
        if library == "openmp":
            what = (f"{var}={v}: OpenMP programs and the BLAS default to {n} thread{'s' if n > 1 else ''} of "
                    f"{ncpus} CPUs; ceiling honours it too unless given --threads, and scales each peak to the "
                    f"cores it ran on, so its efficiencies stay fair but its figures are those of {n} "
                    f"CPU{'s' if n > 1 else ''}, "
                    "not the node's")
            dgemm = RAN_WITH
        elif _loaded(blas, library):
            what = (f"{var}={v} caps {lib} at {n} thread{'s' if n > 1 else ''} of {ncpus} CPUs; ceiling's "
                    f"DGEMM sets {lib}'s thread count itself through threadpoolctl, so its figure is not capped")
            dgemm = OVERRIDDEN
        else:
            what = f"{var}={v} caps {lib} at {n} thread{'s' if n > 1 else ''} of {ncpus} CPUs"
            dgemm = NOT_USED
        out.append(Cap(var, v, library, "threads", dgemm, what, why=why, fix=fix, threads=n, cpus=ncpus))
    return out


def _cpu_list(text: str) -> Optional[set]:
    """GOMP_CPU_AFFINITY's list ("0 3 1-2 4-15:2", commas or blanks); None when unreadable."""
    cpus: set = set()
    for tok in re.split(r"[\s,]+", text.strip()):
        if not tok:
            continue
        m = re.fullmatch(r"([0-9]{1,9})(?:-([0-9]{1,9})(?::([0-9]{1,9}))?)?", tok)
        if not m:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1 or hi - lo > 1 << 16:
            return None
        cpus.update(range(lo, hi + 1, step))
    return cpus or None


def _affinity(env: Mapping[str, str], blas: Blas, ncpus: int) -> List[Cap]:
    if ncpus < 2:
        return []
    omp_blas = blas.threading_layer in ("openmp", "intel", "gnu")
    out = []
    for var, runtimes in (("GOMP_CPU_AFFINITY", ("libgomp", "libiomp", "libomp")),
                          ("KMP_AFFINITY", ("libiomp", "libomp"))):
        v = env.get(var, "").strip()
        if not v:
            continue
        if var == "KMP_AFFINITY":
            m = re.search(r"proclist=\[([^\]]*)\]", v)
            if not m or "explicit" not in v:
                continue
            cpus = _cpu_list(m.group(1).replace("{", " ").replace("}", " "))
        else:
            cpus = _cpu_list(v)
        if cpus is None or len(cpus) != 1:
            continue
        used = omp_blas and any(r in blas.openmp for r in runtimes)
        cpu = next(iter(cpus))
        what = (f"{var}={v} binds every OpenMP thread to CPU {cpu}: N threads share one CPU"
                + ("; ceiling's DGEMM runs its threads in that OpenMP runtime" if used else
                   "; ceiling's DGEMM does not thread with OpenMP here" if blas.api else ""))
        out.append(Cap(var, v, "openmp", "affinity", CAPPED if used else NOT_USED, what,
                       why=f"every thread of an OpenMP program (and of an OpenMP-threaded BLAS) waits for CPU "
                           f"{cpu}: {ncpus} CPUs do the work of one",
                       fix=f"unset {var}, or list one CPU per thread (or use OMP_PLACES=cores OMP_PROC_BIND=close)",
                       threads=1, cpus=ncpus))
    return out


def _runtime(env: Mapping[str, str], blas: Blas) -> List[Cap]:
    out = []
    omp_blas = blas.threading_layer in ("openmp", "intel", "gnu")
    how = RAN_WITH if omp_blas else NOT_USED
    v = env.get("OMP_DYNAMIC", "").strip()
    if v.lower() in ("true", "1", "yes"):
        out.append(Cap("OMP_DYNAMIC", v, "openmp", "dynamic", how,
                       f"OMP_DYNAMIC={v} lets the OpenMP runtime run fewer threads than asked",
                       why="a parallel region may get fewer threads than OMP_NUM_THREADS when the runtime "
                           "judges the node busy, and the run is slower by the threads it withheld",
                       fix="unset OMP_DYNAMIC (or OMP_DYNAMIC=false) for a job that owns its cores"))
    v = env.get("OMP_WAIT_POLICY", "").strip()
    if v.lower() == "passive":
        out.append(Cap("OMP_WAIT_POLICY", v, "openmp", "wait_policy", how,
                       f"OMP_WAIT_POLICY={v} puts idle OpenMP threads to sleep between parallel regions",
                       why="each parallel region then waits for its threads to wake (microseconds to tens of "
                           "microseconds): costly for many short regions and small BLAS calls, not for one "
                           "large DGEMM",
                       fix="unset OMP_WAIT_POLICY (or OMP_WAIT_POLICY=active) for a job that owns its cores; "
                           "keep it passive where cores are shared"))
    return out


def _preload(env: Mapping[str, str], blas: Blas) -> List[Cap]:
    out = []
    for entry in re.split(r"[\s:]+", env.get("LD_PRELOAD", "").strip()):
        if not entry or not _BLAS_FILE.search(os.path.basename(entry)):
            continue
        used = bool(blas.filepath) and os.path.basename(blas.filepath) == os.path.basename(entry)
        what = (f"LD_PRELOAD={entry} puts a BLAS before the one programs link"
                + ("; ceiling's DGEMM measured it" if used else
                   f"; numpy's BLAS here is {os.path.basename(blas.filepath)}, so ceiling's DGEMM is not affected"
                   if blas.filepath else ""))
        out.append(Cap("LD_PRELOAD", entry, "any", "preload", RAN_WITH if used else NOT_USED, what,
                       why="every dynamically linked program started from this environment calls this library's "
                           "BLAS routines instead of its own: a reference BLAS runs DGEMM ten to a hundred times "
                           "slower than an optimised one",
                       fix=f"remove {os.path.basename(entry)} from LD_PRELOAD unless the swap is meant; choose a "
                           "BLAS at link time, with your module system or with FlexiBLAS"))
    return out


def env_caps(env: Mapping[str, str], blas: Blas, machine: Machine) -> List[Cap]:
    """Every variable of ``env`` that changes what a BLAS runs on ``machine``, the ones that cap
    ceiling's DGEMM first. Empty when none does: the library's defaults are never flagged."""
    ncpus = _ncpus(machine)
    caps: List[Cap] = []
    c = _coretype(env, blas, machine)
    if c is not None:
        caps.append(c)
    caps += _mkl(env, blas, machine)
    caps += _threads(env, blas, ncpus)
    caps += _affinity(env, blas, ncpus)
    caps += _runtime(env, blas)
    caps += _preload(env, blas)
    order = {CAPPED: 0, RAN_WITH: 1, OVERRIDDEN: 2, NOT_USED: 3}
    return sorted(caps, key=lambda x: order[x.dgemm])
