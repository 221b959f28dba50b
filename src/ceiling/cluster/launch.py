"""How this process was started, read from the environment the launcher
leaves: which launcher and whose MPI, this process's rank, the world's size,
its rank and their number on this node, the node's index, the job's id, and
this rank's node name. The one place that knows the launchers' variables:
``ceiling profile`` (one rank of a wrapped launch or not), cluster mode and
``bench`` (rank, size, the launcher named in ``Run.job``), the CLI (which rank
prints an error) and ``library.launcher_mismatch`` (whose mpirun started a
rank of the wrong MPI) all ask :func:`launch`. Nothing here imports mpi4py
or starts MPI at import, so the CLI can ask before anything decides MPI's
thread level; :func:`abort_in_place` (run as ``python -m
ceiling.cluster.launch``) is the one piece that does, in a process of its own.

The table, ``LAUNCHERS``, is data: a row per launcher, with the variables it
leaves for the rank, the size, the rank and number on this node, the node's
index and the job's id (the first of each that is set). The first row whose
marks are set wins. The order is the precedence, and why:

1. LSF's jsrun: under jsrun a rank also carries Open MPI's and PMIx's
   variables (IBM Spectrum MPI is an Open MPI), jsrun's own name it.
2. Open MPI's mpirun (and prterun), 3. MVAPICH's mpirun_rsh (its mpispawn
   sets MV2_COMM_WORLD_* and PMI_ID), 4. Hydra (the mpiexec of MPICH, Intel
   MPI and MVAPICH: PMI_RANK with MPI_LOCALNRANKS or HYDI_CONTROL_FD, which
   no other PMI server sets). An MPI launcher runs inside a resource
   manager's allocation, its daemons often started by it (mpirun's orted and
   Hydra's proxies through srun on other nodes; mpirun in a batch script),
   so its ranks carry the resource manager's variables too, and those number
   the daemons or the batch shell, not the ranks. The MPI launcher's come
   first. Intel MPI's ranks carry Hydra's variables; its I_MPI_* are
   settings a user or a module exports, set with or without a launch, so
   they name no launcher.
5. Flux: a Flux instance runs as a job of Slurm, LSF or PBS (``srun flux
   start``), its tasks carrying that job's variables; its cray-pals plugin
   sets PALS_*, and its PMI server PMI_* or PMIX_*.
6. A Slurm job step (srun): SLURM_PROCID with SLURM_STEP_ID. A batch
   script's shell has SLURM_PROCID=0 and no SLURM_STEP_ID (slurmstepd sets
   it for srun's steps only): it is no task of srun, and its SLURM_NTASKS
   is the job's, not a world this process is part of. srun's MPI plugins
   set PALS_* and PMI_* (--mpi=cray_shasta), PMI_* (pmi2) or PMIX_* (pmix)
   beside its own, so srun comes before those.
7. Cray PALS (PBS's mpiexec on HPE Cray EX): PALS_RANKID, with Cray PMI's
   PMI_SIZE.
8. Any other PMI-1/2 server (MPICH's gforker, a PMI job of any MPICH):
   PMI_RANK or PMI_SIZE. 9. Any other PMIx server: PMIX_RANK, no size in
   the environment (MPI knows it once initialised).

One case the order cannot decide: an MPI launcher run inside a rank of
another MPI's launcher (mpirun inside a Hydra rank, or the reverse) leaves
both sets; the table takes the earlier row, and the answer names the other
as outranked. ``Launch.why`` says which row matched, on which variables,
and which other rows' variables were there and why they lost.
"""
from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

Vars = Tuple[str, ...]


@dataclass(frozen=True)
class Launcher:
    """A row of the table: one launcher and the variables it leaves in each process it starts."""
    name: str                 # as Run.job.launcher shows it
    mpi: str                  # whose MPI joins its job: "Open MPI", "MPICH" (its family: MPICH, Intel MPI,
                              # MVAPICH), "" for a resource manager's launcher (any MPI that speaks its PMI)
    marks: Vars               # any of these set: this launcher started the process
    rank: Vars = ()
    size: Vars = ()
    local_rank: Vars = ()     # this process's rank among the job's processes on this node
    local_size: Vars = ()     # how many of the job's processes run on this node
    node: Vars = ()           # this node's index among the job's nodes
    job: Vars = ()            # the job's (or step's) id
    needs: Vars = ()          # these must also hold a whole number (Slurm: the step's id)
    place: str = ""           # why the row stands where it does, for Launch.why


JSRUN = Launcher(
    "jsrun (LSF)", "", ("JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE"), ("JSM_NAMESPACE_RANK",),
    ("JSM_NAMESPACE_SIZE",), ("JSM_NAMESPACE_LOCAL_RANK",), ("JSM_NAMESPACE_LOCAL_SIZE",), (), ("LSB_JOBID",),
    place="jsrun's ranks carry Open MPI's and PMIx's variables too (Spectrum MPI is an Open MPI): jsrun's "
          "name them")
OPEN_MPI = Launcher(
    "mpirun (Open MPI)", "Open MPI", ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK",),
    ("OMPI_COMM_WORLD_SIZE",), ("OMPI_COMM_WORLD_LOCAL_RANK",), ("OMPI_COMM_WORLD_LOCAL_SIZE",), (),
    ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"),
    place="an MPI launcher's variables number its ranks; a resource manager's beside them number the "
          "launcher's daemons or the shell that ran it")
MVAPICH = Launcher(
    "mpirun_rsh (MVAPICH)", "MPICH", ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"), ("MV2_COMM_WORLD_RANK",),
    ("MV2_COMM_WORLD_SIZE",), ("MV2_COMM_WORLD_LOCAL_RANK",), ("MV2_COMM_WORLD_LOCAL_SIZE",),
    place=OPEN_MPI.place)
HYDRA = Launcher(
    "mpiexec (Hydra, PMI)", "MPICH", ("MPI_LOCALNRANKS", "HYDI_CONTROL_FD"), ("PMI_RANK",), ("PMI_SIZE",),
    ("MPI_LOCALRANKID",), ("MPI_LOCALNRANKS",), (), ("PMI_JOBID",), needs=("PMI_RANK",),
    place=OPEN_MPI.place)
FLUX = Launcher(
    "flux run (Flux)", "", ("FLUX_TASK_RANK",), ("FLUX_TASK_RANK",), ("FLUX_JOB_SIZE",), ("FLUX_TASK_LOCAL_ID",),
    (), (), ("FLUX_JOB_ID",),
    place="Flux runs as a job of Slurm, LSF or PBS, and its plugins set PALS_*, PMI_* or PMIX_* for the MPI")
SLURM = Launcher(
    "srun (Slurm)", "", ("SLURM_PROCID",), ("SLURM_PROCID",), ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"),
    ("SLURM_LOCALID",), ("SLURM_STEP_TASKS_PER_NODE",), ("SLURM_NODEID",), ("SLURM_JOB_ID", "SLURM_STEP_ID"),
    needs=("SLURM_STEP_ID",),
    place="srun's MPI plugins set PALS_* and PMI_* (cray_shasta), PMI_* (pmi2) or PMIX_* (pmix) for the MPI")
PALS = Launcher(
    "mpiexec (Cray PALS)", "", ("PALS_RANKID",), ("PALS_RANKID", "PMI_RANK"), ("PMI_SIZE",),
    ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"), ("PMI_LOCAL_SIZE",), ("PALS_NODEID",), ("PALS_APID",),
    place="PALS sets Cray PMI's PMI_* for the MPI")
PMI = Launcher(
    "a PMI launcher", "MPICH", ("PMI_RANK", "PMI_SIZE", "PMI_ID"), ("PMI_RANK", "PMI_ID"), ("PMI_SIZE",),
    ("PMI_LOCAL_RANK",), ("PMI_LOCAL_SIZE",), (), ("PMI_JOBID",),
    place="a PMI server leaves the size, which PMIx does not")
PMIX = Launcher(
    "a PMIx launcher", "", ("PMIX_RANK",), ("PMIX_RANK",), (), (), (), (), ("PMIX_NAMESPACE",),
    place="")

LAUNCHERS: Tuple[Launcher, ...] = (JSRUN, OPEN_MPI, MVAPICH, HYDRA, FLUX, SLURM, PALS, PMI, PMIX)
MPI_LAUNCHERS = (OPEN_MPI, MVAPICH, HYDRA)
SINGLETON = "none (singleton)"


@dataclass(frozen=True)
class Launch:
    """How this process was started: the answer of the table for one environment."""
    launcher: str                       # the row's name, SINGLETON when none matched
    mpi: str = ""                       # the row's: whose MPI joins this job ("" any, or no launcher)
    rank: Optional[int] = 0             # None: launched, and the launcher did not say (or said nonsense)
    size: Optional[int] = 1             # None: launched, size not in the environment (ask MPI)
    local_rank: Optional[int] = None
    local_size: Optional[int] = None
    node: Optional[int] = None          # this node's index among the job's
    job: str = ""
    why: str = ""                       # which row matched, on which variables, and what it outranked
    variables: Dict[str, str] = field(default_factory=dict)   # the matched row's variables as set
    outranked: Tuple[str, ...] = ()     # other rows whose marks were set too

    @property
    def launched(self) -> bool:
        return self.launcher != SINGLETON

    def one_of_several(self) -> Optional[Tuple[int, Optional[int]]]:
        """(rank, size) when this process is one rank of a launch of more than one (size None:
        the launcher does not say how many); None for a process alone (no launcher, or a world
        of one: mpirun -n 1, srun -n 1) or when the launcher gave no rank."""
        if not self.launched or self.rank is None or self.size == 1:
            return None
        return self.rank, self.size

    def to_dict(self) -> Dict[str, object]:
        return {"launcher": self.launcher, "mpi": self.mpi, "rank": self.rank, "size": self.size,
                "local_rank": self.local_rank, "local_size": self.local_size, "node": self.node, "job": self.job,
                "why": self.why, "variables": dict(self.variables), "outranked": list(self.outranked)}


def _whole(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def _tasks_on_node(value: str, node: Optional[int]) -> Optional[int]:
    """Slurm's tasks per node ("2(x3),1": 2 on each of the first three nodes, 1 on the fourth)
    for node ``node``; None when the list is not of that form or does not reach the node."""
    if node is None:
        return None
    left = node
    for part in value.split(","):
        n, paren, times = part.partition("(x")
        k = _whole(times[:-1]) if paren and times.endswith(")") else None if paren else 1
        if _whole(n) is None or k is None:
            return None
        if left < k:
            return int(n)
        left -= k
    return None


def _matches(row: Launcher, env: Mapping[str, str]) -> bool:
    return any(k in env for k in row.marks) and all(_whole(env.get(k)) is not None for k in row.needs)


def _shown(row: Launcher, env: Mapping[str, str]) -> Dict[str, str]:
    keys = dict.fromkeys(row.marks + row.needs + row.rank + row.size + row.local_rank + row.local_size
                         + row.node + row.job)
    return {k: env[k] for k in keys if k in env}


def _listed(variables: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in variables.items())


def _outranked(row: Launcher, other: Launcher, theirs: Mapping[str, str]) -> str:
    if row in MPI_LAUNCHERS and other in MPI_LAUNCHERS:
        reason = ("one MPI launcher ran inside a rank of the other, which the environment does not tell: the earlier "
                  "row is taken")
    elif other in (PMI, PMIX) and row not in (PMI, PMIX):
        reason = f"the interface {row.name} serves its processes"
    else:
        reason = row.place
    return f"outranked: {other.name} ({_listed(theirs)}): {reason}"


def launch(env: Optional[Mapping[str, str]] = None) -> Launch:
    """The table's answer for ``env`` (this process's environment by default)."""
    env = os.environ if env is None else env
    matched = [row for row in LAUNCHERS if _matches(row, env)]
    notes = []
    if "SLURM_PROCID" in env and SLURM not in matched:
        notes.append(f"SLURM_PROCID={env['SLURM_PROCID']} without a job step (no SLURM_STEP_ID): a batch "
                     "script's shell, not a task of srun")
    if not matched:
        return Launch(SINGLETON, why="; ".join(["no launcher's variables: a process alone (MPI_Init makes it a "
                                                "world of one)"] + notes))
    row, rest = matched[0], matched[1:]

    def first(keys: Vars) -> Optional[str]:
        return next((env[k] for k in keys if k in env), None)

    def number(keys: Vars) -> Optional[int]:
        value = first(keys)
        if value is not None and _whole(value) is None:
            notes.append(f"{next(k for k in keys if k in env)}={value!r} is not a whole number")
        return _whole(value)

    rank, size, node, local_rank = number(row.rank), number(row.size), number(row.node), number(row.local_rank)
    if rank is not None and size is not None and rank >= size:
        notes.append(f"rank {rank} is not below size {size}: the size is not taken")
        size = None
    counts = first(row.local_size)
    local_size = _tasks_on_node(counts, node) if counts and not counts.isdigit() else _whole(counts)
    shown = _shown(row, env)
    why = [f"{row.name}: {_listed(shown)}"]
    for other in rest:
        theirs = {k: v for k, v in _shown(other, env).items() if k not in shown}
        if theirs:
            why.append(_outranked(row, other, theirs))
    job = ".".join(env[k] for k in row.job if k in env) if row is SLURM else (first(row.job) or "")
    return Launch(row.name, row.mpi, rank, size, local_rank, local_size, node, job, "; ".join(why + notes), shown,
                  tuple(o.name for o in rest))


def node_name() -> str:
    """This rank's node: $CEILING_NODE_NAME when set, else the host name.

    Setting CEILING_NODE_NAME differently per rank makes ranks on one
    machine stand in for several nodes (tests, and trying the multi-node
    code on a laptop); such "nodes" share one host, and ceiling says so.
    """
    return os.environ.get("CEILING_NODE_NAME") or socket.gethostname()


def launched_size(env: Optional[Mapping[str, str]] = None) -> int:
    """How many processes the launcher started, from the environment it leaves,
    without initialising MPI: 1 when no launcher did, 0 when one did but did not
    say how many (ask MPI)."""
    got = launch(env)
    return (got.size or 0) if got.launched else 1


def launched_rank(env: Optional[Mapping[str, str]] = None) -> int:
    """This process's rank as the launcher numbered it (0 without a launcher)."""
    return launch(env).rank or 0


def launcher_in_use(env: Optional[Mapping[str, str]] = None) -> str:
    """How this process was started, from the environment the launcher leaves."""
    return launch(env).launcher


def wrapped_rank(env: Optional[Mapping[str, str]] = None) -> Optional[Tuple[int, Optional[int]]]:
    """(rank, size) when this ceiling is one rank of a launch of several (mpirun -n N ceiling
    profile -- ./app, srun ceiling profile -- ./app); size None where the launcher does not
    say how many. None otherwise (Launch.one_of_several)."""
    return launch(env).one_of_several()


# What abort_in_place's process exits with when it ended nothing (else MPI_Abort's code, or the signal
# the launcher ended the job with)
NOT_THE_LAUNCHERS_MPI = 3
A_WORLD_OF_ONE = 4
NO_MPI4PY = 5


def abort_in_place(code: int, mpi: str) -> int:
    """Join the job this process's launcher started and end it with MPI_Abort(``code``): run by
    ``ceiling profile`` in a process of its own (python -m ceiling.cluster.launch CODE MPI) where
    a rank's program cannot start, so the other ranks do not wait in MPI_Init for it. Only where
    mpi4py's MPI is the launcher's (``mpi``: Launch.mpi; "" for either); its MPI_Init finding no
    job to join (a world of one: the launcher speaks a PMI this MPI does not, as srun --mpi=pmix
    to MPICH) ends nothing, since aborting that ends only itself. Returns the exit status when it
    could not (NOT_THE_LAUNCHERS_MPI, A_WORLD_OF_ONE, NO_MPI4PY)."""
    try:
        import mpi4py
    except ImportError:
        return NO_MPI4PY
    mpi4py.rc.initialize = mpi4py.rc.finalize = False
    from mpi4py import MPI
    ompi = "Open MPI" in MPI.Get_library_version()
    if mpi and (mpi == "Open MPI") != ompi:
        return NOT_THE_LAUNCHERS_MPI
    MPI.Init()
    if MPI.COMM_WORLD.Get_size() == 1:
        return A_WORLD_OF_ONE
    MPI.COMM_WORLD.Abort(code)
    return code


def end_the_job(code: int, timeout_s: float) -> str:
    """Run abort_in_place in a process of its own for this process's launch: "" when it ended the
    job (MPI_Abort's code, or a signal: the launcher ending the job), else why not, in words."""
    import subprocess
    try:
        r = subprocess.run([sys.executable, "-m", "ceiling.cluster.launch", str(code), launch().mpi],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=timeout_s, close_fds=False)    # the launcher's PMI descriptor is MPI's way in
    except OSError as err:
        return err.strerror or str(err)
    except subprocess.TimeoutExpired:
        return f"its MPI_Init did not return in {timeout_s:g} s"
    return ("" if r.returncode == code or r.returncode < 0 else
            "its MPI is not the launcher's" if r.returncode == NOT_THE_LAUNCHERS_MPI else
            "its MPI_Init found no job to join" if r.returncode == A_WORLD_OF_ONE else
            "mpi4py is not installed" if r.returncode == NO_MPI4PY else
            f"it exited {r.returncode}: {r.stderr.decode(errors='replace').strip()[-200:]}")


if __name__ == "__main__":
    sys.exit(abort_in_place(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""))
