"""The MPI side of `ceiling profile` (verbs/profile.py): which rank of an MPI launch this
ceiling is, and how a rank that cannot report still ends its job. Starting and watching
the program is observe/'s; what its records say about the processes (other ranks,
launchers, processes that left the tree or wrote no record) is analysis/profile_run.py's."""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Tuple

from ..errors import CeilingError

RANK_VARIABLES = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"))


def launched_rank(environ=None) -> Optional[Tuple[int, int]]:
    """(rank, size) when this ceiling is one rank of an MPI launch (mpirun -n N ceiling
    profile -- ./app, srun ceiling profile -- ./app): the launcher's variables for its
    ranks (MPICH's Hydra and Intel MPI: PMI_*; Open MPI: OMPI_COMM_WORLD_*; a Slurm job
    step: SLURM_PROCID with the step's task count, not a batch script's), with more
    than one rank. None otherwise."""
    env = os.environ if environ is None else environ
    if "SLURM_PROCID" in env and not str(env.get("SLURM_STEP_ID", "")).isdigit():
        env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    for rank, size in RANK_VARIABLES:
        r, n = str(env.get(rank, "")), str(env.get(size, ""))
        if r.isdigit() and n.isdigit() and int(n) > 1 and int(r) < int(n):
            return int(r), int(n)
    return None


ABORT_WAIT_S = 60          # a program that has not reached MPI_Init by then is killed


def end_job(exe: str, cmd: List[str], e: CeilingError, refused: str) -> None:
    """A wrapped rank 0 that cannot report: the other ranks' programs wait in MPI_Init for
    rank 0's, which would never come (MPICH's Hydra and srun do not end a job when one of
    its processes exits with an error), so the job would hang. Rank 0's program is started
    with the interposer told to call MPI_Abort as soon as its MPI_Init returns, which ends
    every rank (csrc/interpose/mpi.c, mpi_abort_if_asked). Without the interposer (a static
    or setuid program: ``refused`` says why) nothing can be done but say so."""
    import subprocess
    from .. import core
    say = f"ceiling: {e}"
    lib = core.interpose_library_path()
    why = f"the interposer is not built ({lib} is missing)" if not lib.exists() else refused
    if why:
        print(f"{say}\nceiling: the other ranks may wait in MPI_Init for rank 0; it cannot end the job ({why}): "
              "stop it with Ctrl-C or scancel", file=sys.stderr, flush=True)
        return
    print(f"{say}\nceiling: ending the MPI job: rank 0's program is started only to call MPI_Abort once its "
          "MPI_Init returns (the other ranks wait there for it)", file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEILING_INTERPOSE_")}
    env["LD_PRELOAD"] = " ".join(filter(None, [str(lib), env.get("LD_PRELOAD", "")]))
    env["CEILING_INTERPOSE_ABORT"] = str(e.exit_code)
    try:
        # close_fds=False: the launcher's PMI descriptor (Hydra's PMI_FD) is the program's way in
        subprocess.run(cmd, executable=exe, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=ABORT_WAIT_S, close_fds=False)
    except (OSError, subprocess.TimeoutExpired):
        pass


# Run by ceiling's own Python when a rank's program cannot start at all: mpi4py's MPI joins
# the job and aborts it, where it is the launcher's family (argv[2]: ompi, mpich or "" for
# either); else it exits 3 without touching MPI, and 4 where its MPI_Init found no job to
# join (a world of one: the launcher speaks a PMI its MPI does not, as srun --mpi=pmix to
# MPICH), since aborting that ends only itself.
_ABORT_WITH_MPI4PY = """
import sys
import mpi4py
mpi4py.rc.initialize = mpi4py.rc.finalize = False
from mpi4py import MPI
ompi = "Open MPI" in MPI.Get_library_version()
if sys.argv[2] and (sys.argv[2] == "ompi") != ompi:
    sys.exit(3)
MPI.Init()
if MPI.COMM_WORLD.Get_size() == 1:
    sys.exit(4)
MPI.COMM_WORLD.Abort(int(sys.argv[1]))
"""


def abort_job(e: CeilingError, rank: int) -> None:
    """A wrapped rank whose program cannot start (not found on this node, not executable):
    the other ranks' programs wait in MPI_Init for it, and neither MPICH's Hydra nor srun
    ends a job for one process's exit status. There is no program to call MPI_Abort, so
    ceiling's own mpi4py joins the job in its place and aborts it, where its MPI is the
    launcher's (Open MPI's mpirun ends such a job itself). Else it can only say so."""
    import subprocess
    family = "ompi" if "OMPI_COMM_WORLD_RANK" in os.environ else "mpich" if "PMI_RANK" in os.environ else ""
    print(f"ceiling: rank {rank}: {e}\nceiling: ending the MPI job: the other ranks' programs would wait in "
          "MPI_Init for this one's; ceiling's own MPI (mpi4py) calls MPI_Abort in its place",
          file=sys.stderr, flush=True)
    try:
        r = subprocess.run([sys.executable, "-c", _ABORT_WITH_MPI4PY, str(e.exit_code), family],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=ABORT_WAIT_S, close_fds=False)
        # MPI_Abort's code, or a signal (the launcher ending the job), is what a helper that ended
        # the job returns, if this ceiling is not killed first; anything else ended nothing
        why = ("" if r.returncode == e.exit_code or r.returncode < 0 else
               "its MPI is not the launcher's" if r.returncode == 3 else
               "its MPI_Init found no job to join" if r.returncode == 4 else
               "mpi4py is not installed" if b"ModuleNotFoundError" in r.stderr else
               f"it exited {r.returncode}: {r.stderr.decode(errors='replace').strip()[-200:]}")
    except OSError as err:
        why = err.strerror
    except subprocess.TimeoutExpired:
        why = f"its MPI_Init did not return in {ABORT_WAIT_S} s"
    if why and family == "ompi":          # started by Open MPI's mpirun, which ends the job for a failed rank
        print(f"ceiling: it could not ({why}); Open MPI's mpirun ends the job for this rank's exit status",
              file=sys.stderr, flush=True)
    elif why:
        print(f"ceiling: it could not ({why}); the other ranks may wait in MPI_Init: stop the job with Ctrl-C "
              "or scancel", file=sys.stderr, flush=True)
