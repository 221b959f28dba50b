"""The MPI side of `ceiling profile` (verbs/profile.py): which rank of an MPI launch this
ceiling is (``launched_rank``, from cluster/launch.py's launcher table), and how a rank that
cannot report still ends its job. Starting and watching the program is observe/'s; what its
records say about the processes (other ranks, launchers, processes that left the tree or
wrote no record) is analysis/profile_run.py's."""
from __future__ import annotations

import os
import sys
from typing import List

from ..cluster.launch import wrapped_rank as launched_rank  # noqa: F401 - profile.py's name; the table is there
from ..errors import CeilingError


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


def abort_job(e: CeilingError, rank: int) -> None:
    """A wrapped rank whose program cannot start (not found on this node, not executable):
    the other ranks' programs wait in MPI_Init for it, and neither MPICH's Hydra nor srun
    ends a job for one process's exit status. There is no program to call MPI_Abort, so
    ceiling's own mpi4py joins the job in its place and aborts it, where its MPI is the
    launcher's (cluster/launch.py, end_the_job; Open MPI's mpirun ends such a job itself).
    Else it can only say so."""
    from ..cluster.launch import OPEN_MPI, end_the_job, launch
    print(f"ceiling: rank {rank}: {e}\nceiling: ending the MPI job: the other ranks' programs would wait in "
          "MPI_Init for this one's; ceiling's own MPI (mpi4py) calls MPI_Abort in its place",
          file=sys.stderr, flush=True)
    why = end_the_job(e.exit_code, ABORT_WAIT_S)
    if why and launch().launcher == OPEN_MPI.name:   # Open MPI's mpirun ends the job for a failed rank
        print(f"ceiling: it could not ({why}); Open MPI's mpirun ends the job for this rank's exit status",
              file=sys.stderr, flush=True)
    elif why:
        print(f"ceiling: it could not ({why}); the other ranks may wait in MPI_Init: stop the job with Ctrl-C "
              "or scancel", file=sys.stderr, flush=True)
