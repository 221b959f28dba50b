"""The MPI world: mpi4py's MPI.COMM_WORLD, MPI initialised at the thread
level ceiling measures with, or one clear error when there is no MPI.
"""
from __future__ import annotations

import os
import sys

from ..errors import MPIUnavailableError

INSTALL_HINT = "pip install mpi4py mpich (or the project's mpi extra), then: mpirun -n 2 ceiling bench network"


def world(level: str = "funneled"):
    """mpi4py's MPI.COMM_WORLD (initialising MPI), or MPIUnavailableError.

    MPI is initialised with MPI_THREAD_FUNNELED by default, not mpi4py's
    MPI_THREAD_MULTIPLE: IMB and OSU call MPI_Init, and MPICH's locks for
    MPI_THREAD_MULTIPLE add about 4 µs to every small collective (measured:
    Allreduce of 8 B 0.7 µs funneled, 5 µs multiple, on one VM). The storage
    bench asks for "serialized": its agreement points are called from the
    thread that runs the I/O while the main thread waits (neither MPICH nor
    Open MPI takes locks below MULTIPLE). The first call decides;
    MPI4PY_RC_THREAD_LEVEL, when set, wins; the level granted is recorded
    (library.library().thread_level).

    Without mpi4py or any MPI library: MPIUnavailableError (exit code 10),
    one line saying what to install. Started by the launcher of another MPI
    (Open MPI's mpirun for MPICH, Hydra's mpiexec for Open MPI): the same, naming
    the launcher to use, before MPI_Init (library.launcher_mismatch). Once a watchdog runs (cluster/watchdog.py),
    the communicator returned has a deadline on every wait.
    """
    try:
        import mpi4py
        if "mpi4py.MPI" not in sys.modules:
            # Initialised below, after the launcher is checked: MPI_Init of a library under
            # another MPI's launcher aborts the process with a page of internal errors.
            mpi4py.rc.initialize = False
            mpi4py.rc.finalize = True
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MPIUnavailableError(f"MPI is not available ({why}): {INSTALL_HINT}") from None
    if not MPI.Is_initialized():
        from .library import launcher_mismatch
        from .stop import everywhere
        wrong = launcher_mismatch(MPI)
        if wrong:
            raise everywhere(MPIUnavailableError(wrong))
        want = (os.environ.get("MPI4PY_RC_THREAD_LEVEL") or level).lower()
        MPI.Init_thread(getattr(MPI, _LEVELS.get(want, "THREAD_FUNNELED")))
    from .watchdog import wrap
    return wrap(MPI.COMM_WORLD)


_LEVELS = {"single": "THREAD_SINGLE", "funneled": "THREAD_FUNNELED", "serialized": "THREAD_SERIALIZED",
           "multiple": "THREAD_MULTIPLE"}
