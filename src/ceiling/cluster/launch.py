"""How this process was started, read from the environment the launcher
leaves: this rank's node, its rank and the world's size, the launcher's
name. Nothing here imports mpi4py or starts MPI, so the CLI can ask before
anything decides MPI's thread level (cli.py: which rank prints an error;
app.py: whether ``bench storage`` runs on several processes).
"""
from __future__ import annotations

import os
import socket
from typing import Dict, Optional, Sequence, Tuple


def node_name() -> str:
    """This rank's node: $CEILING_NODE_NAME when set, else the host name.

    Setting CEILING_NODE_NAME differently per rank makes ranks on one
    machine stand in for several nodes (tests, and trying the multi-node
    code on a laptop); such "nodes" share one host, and ceiling says so.
    """
    return os.environ.get("CEILING_NODE_NAME") or socket.gethostname()


# What launchers leave in each process's environment, in order of trust: Open MPI, Hydra
# (MPICH, Intel MPI) and other PMI-1/2 launchers (srun --mpi=pmi2 among them), PMIx (rank
# only: a PMIx server puts no size in the environment, seen under srun --mpi=pmix), then
# Slurm's own, told from an sbatch script's shell (SLURM_PROCID without a job step) by
# SLURM_STEP_ID.
_RANK_KEYS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
_SIZE_KEYS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_SLURM_RANK, _SLURM_SIZE = ("SLURM_PROCID",), ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")


def _launched(env: Optional[Dict[str, str]]) -> Tuple[Optional[int], Optional[int]]:
    env = os.environ if env is None else env
    in_step = "SLURM_PROCID" in env and "SLURM_STEP_ID" in env

    def first(keys: Sequence[str]) -> Optional[int]:
        return next((int(env[k]) for k in keys if env.get(k, "").isdigit()), None)

    rank = first(_RANK_KEYS + (_SLURM_RANK if in_step else ()))
    size = first(_SIZE_KEYS + (_SLURM_SIZE if in_step else ()))
    return rank, size


def launched_size(env: Optional[Dict[str, str]] = None) -> int:
    """How many processes the launcher started, from the environment it leaves,
    without initialising MPI: 1 when no launcher did, 0 when one did but did not
    say how many (ask MPI)."""
    rank, size = _launched(env)
    if size is not None:
        return size
    return 1 if rank is None else 0


def launched_rank(env: Optional[Dict[str, str]] = None) -> int:
    """This process's rank as the launcher numbered it (0 without a launcher)."""
    return _launched(env)[0] or 0


def launcher_in_use() -> str:
    """How this process was started, from the environment the launcher leaves."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return "mpirun (Open MPI)"
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return "srun (Slurm)"
    if "PMI_FD" in env or "PMI_PORT" in env or "HYDI_CONTROL_FD" in env or "MPI_LOCALNRANKS" in env:
        return "mpiexec (Hydra, PMI)"
    if "PMIX_RANK" in env:
        return "a PMIx launcher"
    if "PMI_RANK" in env:
        return "a PMI launcher"
    return "none (singleton)"
