"""The one launcher table (cluster/launch.py), fed environments recorded from real launches
(tests/fixtures/launch/*.env: MPICH's and Debian's Hydra, Open MPI's mpirun, srun with each
of its MPI plugins, an sbatch script's shell, and the launchers run inside each other) and
environments built from what the other launchers' sources set (jsrun, Flux, MVAPICH's
mpispawn, Cray PALS, srun --mpi=cray_shasta), each with the answer a user would give.

`ceiling profile` and cluster mode had a table each, in different orders; each case here is
also asked through both callers' entry points (profile's launched_rank, cluster mode's
launched_rank, launched_size and launcher_in_use), which must agree with the table. The old
copies failed eight of them: Hydra under srun (its proxies' job step) named as srun; Flux,
jsrun and PALS named as Hydra, Open MPI or "a PMI launcher"; MVAPICH's ranks seen as no
launch by both, and a PMIx launch without a size (Flux's PMIx plugin, prterun) as a launch
by cluster mode and as none by profile."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpiutil import FakeMPI, needs_mpi

FIXTURES = Path(__file__).parent / "fixtures" / "launch"

HYDRA, OPEN_MPI, SLURM, NONE = "mpiexec (Hydra, PMI)", "mpirun (Open MPI)", "srun (Slurm)", "none (singleton)"


def recorded(name: str) -> dict:
    lines = (FIXTURES / f"{name}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _slurm_step(**more) -> dict:
    return {"SLURM_JOB_ID": "812", "SLURM_STEP_ID": "3", "SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8",
            "SLURM_NTASKS": "8", "SLURM_NODEID": "2", "SLURM_LOCALID": "1", "SLURM_STEP_TASKS_PER_NODE": "3(x2),2",
            **more}


# name: (environment, launcher, rank, size, local rank, local size, node index, a phrase of the why)
CASES = {
    # recorded here (tests/fixtures/launch: each file says how)
    "hydra": (recorded("hydra"), HYDRA, 1, 2, 1, 2, None, "HYDI_CONTROL_FD=7"),
    "openmpi": (recorded("openmpi"), OPEN_MPI, 1, 2, 1, 2, None, "OMPI_COMM_WORLD_RANK=1"),
    "srun": (recorded("srun"), SLURM, 1, 2, 1, 2, 0, "SLURM_STEP_ID=0"),
    "srun-pmi2": (recorded("srun-pmi2"), SLURM, 1, 2, 1, 2, 0, "outranked: a PMI launcher (PMI_RANK=1"),
    "srun-pmix": (recorded("srun-pmix"), SLURM, 1, 2, 1, 2, 0, "outranked: a PMIx launcher (PMIX_RANK=1"),
    # SLURM_PROCID=0 and SLURM_NTASKS=2, and no srun: a process alone
    "sbatch-shell": (recorded("sbatch-shell"), NONE, 0, 1, None, None, None, "a batch script's shell"),
    "sbatch-openmpi": (recorded("sbatch-openmpi"), OPEN_MPI, 1, 2, 1, 2, None, "a batch script's shell"),
    # Hydra's proxy is a one-task srun step: SLURM_PROCID=0 of 1 numbers the proxy (old: "srun (Slurm)")
    "sbatch-hydra": (recorded("sbatch-hydra"), HYDRA, 1, 2, 1, 2, None, "outranked: srun (Slurm) (SLURM_PROCID=0"),
    "srun-openmpi": (recorded("srun-openmpi"), OPEN_MPI, 1, 2, 1, 2, None, "outranked: srun (Slurm)"),
    "srun-hydra": (recorded("srun-hydra"), HYDRA, 1, 2, 1, 2, None, "outranked: srun (Slurm)"),
    # the outer Hydra's PMI_RANK=0 of 1 is inherited: the inner launcher's variables win
    "openmpi-in-hydra": (recorded("openmpi-in-hydra"), OPEN_MPI, 1, 2, 1, 2, None,
                         "outranked: mpiexec (Hydra, PMI)"),
    # built from what each launcher's source sets
    # jsrun (LSF): JSM_NAMESPACE_*, with the Open MPI and PMIx variables Spectrum MPI's ranks may carry
    "jsrun": ({"JSM_NAMESPACE_RANK": "1", "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_LOCAL_RANK": "1",
               "JSM_NAMESPACE_LOCAL_SIZE": "2", "LSB_JOBID": "4711", "OMPI_COMM_WORLD_RANK": "1",
               "OMPI_COMM_WORLD_SIZE": "4", "PMIX_RANK": "1"}, "jsrun (LSF)", 1, 4, 1, 2, None,
              "outranked: mpirun (Open MPI)"),
    # Flux's job shell (src/shell/task.c) and its simple PMI server (PMI_FD, PMI_RANK, PMI_SIZE)
    "flux-pmi": ({"FLUX_TASK_RANK": "1", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "4", "FLUX_JOB_NNODES": "2",
                  "FLUX_JOB_ID": "f2ZzDbCkkDwd", "PMI_FD": "3", "PMI_RANK": "1", "PMI_SIZE": "4"},
                 "flux run (Flux)", 1, 4, 1, None, None, "FLUX_TASK_RANK=1"),
    # Flux's PMIx plugin: no PMI_SIZE (old: cluster mode saw a launch of unknown size, profile none)
    "flux-pmix": ({"FLUX_TASK_RANK": "1", "FLUX_TASK_LOCAL_ID": "1", "FLUX_JOB_SIZE": "4", "FLUX_JOB_NNODES": "2",
                   "FLUX_JOB_ID": "f2ZzDbCkkDwd", "PMIX_RANK": "1", "PMIX_NAMESPACE": "f2ZzDbCkkDwd"},
                  "flux run (Flux)", 1, 4, 1, None, None, "outranked: a PMIx launcher"),
    # MVAPICH's mpirun_rsh: its mpispawn sets these and PMI_ID (old: no launch for either copy)
    "mvapich": ({"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "4", "MV2_COMM_WORLD_LOCAL_RANK": "1",
                 "MV2_COMM_WORLD_LOCAL_SIZE": "2", "PMI_ID": "1"}, "mpirun_rsh (MVAPICH)", 1, 4, 1, 2, None,
                "MV2_COMM_WORLD_RANK=1"),
    # Cray PALS: PALS_* and Cray PMI's PMI_* (the set Slurm's cray_shasta plugin writes to stand in for it)
    "pals": ({"PALS_RANKID": "1", "PALS_NODEID": "0", "PALS_LOCAL_RANKID": "1", "PALS_APID": "a1b2",
              "PMI_RANK": "1", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "2", "PMI_JOBID": "a1b2"},
             "mpiexec (Cray PALS)", 1, 4, 1, 2, 0, "outranked: a PMI launcher"),
    # srun --mpi=cray_shasta on the third node of a step of 3, 3 and 2 tasks
    "srun-cray-shasta": (_slurm_step(PALS_RANKID="5", PALS_NODEID="2", PALS_LOCAL_RANKID="1", PALS_APID="812.3",
                                     PMI_RANK="5", PMI_SIZE="8", PMI_LOCAL_RANK="1", PMI_LOCAL_SIZE="2"),
                         SLURM, 5, 8, 1, 2, 2, "outranked: mpiexec (Cray PALS)"),
    # mpirun -n 1: a launch, and a world of one
    "openmpi-alone": ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}, OPEN_MPI, 0, 1, None, None, None,
                      "OMPI_COMM_WORLD_SIZE=1"),
    # a PMIx server that leaves no size (prterun for a program of no MPI it knows)
    "pmix-alone": ({"PMIX_RANK": "1", "PMIX_NAMESPACE": "prterun-vm-1@1"}, "a PMIx launcher", 1, None, None, None,
                   None, "PMIX_RANK=1"),
    "nothing": ({}, NONE, 0, 1, None, None, None, "no launcher's variables"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_table_names_the_launcher_and_this_processs_place(name):
    from ceiling.cluster.launch import launch
    env, launcher, rank, size, local_rank, local_size, node, phrase = CASES[name]
    got = launch(env)
    assert (got.launcher, got.rank, got.size, got.local_rank, got.local_size, got.node) == (
        launcher, rank, size, local_rank, local_size, node), got.why
    assert phrase in got.why, got.why


@pytest.mark.parametrize("name", sorted(CASES))
def test_profile_and_cluster_mode_give_the_same_answer(name, monkeypatch):
    """Through the entry points both had before the table (old code runs this test too)."""
    from ceiling.cluster.launch import launched_rank, launched_size, launcher_in_use
    from ceiling.verbs.profile import launched_rank as profile_rank
    env, launcher, rank, size, *_ = CASES[name]
    monkeypatch.setattr(os, "environ", dict(env))
    launched = launcher != NONE
    assert launcher_in_use() == launcher
    assert launched_rank() == (rank or 0)
    assert launched_size() == ((size or 0) if launched else 1)
    assert profile_rank() == ((rank, size) if launched and size != 1 else None)


def test_slurm_tasks_per_node_is_read_for_this_node():
    from ceiling.cluster.launch import launch
    assert launch(_slurm_step(SLURM_NODEID="0")).local_size == 3
    assert launch(_slurm_step(SLURM_NODEID="2")).local_size == 2
    assert launch(_slurm_step(SLURM_NODEID="3")).local_size is None           # past the list: not known
    assert launch(_slurm_step(SLURM_STEP_TASKS_PER_NODE="3(x2")).local_size is None
    assert launch(_slurm_step()).job == "812.3"


def test_values_that_are_no_numbers_are_unknown_and_said_so():
    from ceiling.cluster.launch import launch
    got = launch({"PMI_RANK": "x", "PMI_SIZE": "2"})
    assert (got.launcher, got.rank, got.size) == ("a PMI launcher", None, 2)
    assert "PMI_RANK='x' is not a whole number" in got.why
    got = launch({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "4"})
    assert (got.rank, got.size) == (5, None) and "rank 5 is not below size 4" in got.why
    # a step id that is no number is no srun step (slurmstepd writes it with %d)
    assert launch({"SLURM_PROCID": "0", "SLURM_STEP_ID": "batch", "SLURM_NTASKS": "8"}).launcher == NONE
    assert launch({"SLURM_PROCID": "0", "SLURM_STEP_ID": "٣"}).launcher == NONE        # digits, not ASCII ones


def test_whose_launcher_it_was_comes_from_the_table():
    """library.launcher_mismatch asks the table which MPI's launcher started the rank: srun's PMI-2
    descriptor is no Hydra (the old check named Hydra for PMI_FD), and a resource manager's
    launcher serves either MPI."""
    from ceiling.cluster.library import launcher_mismatch
    ompi, mpich = FakeMPI("Open MPI", (4, 1, 4)), FakeMPI("MPICH", (5, 0, 2))
    assert launcher_mismatch(ompi, recorded("srun-pmi2")) is None
    assert launcher_mismatch(mpich, recorded("srun-pmix")) is None
    assert launcher_mismatch(ompi, CASES["flux-pmi"][0]) is None
    assert launcher_mismatch(ompi, recorded("hydra")).startswith(f"this process was started by {HYDRA}, but")
    assert launcher_mismatch(mpich, recorded("srun-openmpi")).startswith(f"this process was started by {OPEN_MPI}")
    assert launcher_mismatch(mpich, recorded("hydra")) is None


def _abort_in_place(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "OMPI_", "SLURM_", "HYDI_", "MPI_LOCAL", "FLUX_"))}
    return subprocess.run([sys.executable, "-m", "ceiling.cluster.launch", *args], env=env, capture_output=True,
                          text=True, timeout=120)


@needs_mpi
def test_the_abort_helper_is_module_code_that_touches_no_mpi_of_another_launcher():
    """What `ceiling profile` runs where a rank's program cannot start (verbs/profile_launch.abort_job),
    now module code: told the launcher is Open MPI's while mpi4py loads another MPI (or the reverse),
    it exits NOT_THE_LAUNCHERS_MPI without starting MPI; with no job to join (no launcher here), its
    MPI_Init gives a world of one, which it does not abort."""
    from ceiling.cluster.launch import A_WORLD_OF_ONE, NOT_THE_LAUNCHERS_MPI
    probe = subprocess.run([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False\n"
                            "from mpi4py import MPI; print('Open MPI' in MPI.Get_library_version())"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"mpi4py loads no MPI here: {probe.stderr.strip()[-200:]}")
    other = "MPICH" if probe.stdout.strip() == "True" else "Open MPI"
    r = _abort_in_place("9", other)
    assert r.returncode == NOT_THE_LAUNCHERS_MPI, r.stderr
    r = _abort_in_place("9", "")
    assert r.returncode == A_WORLD_OF_ONE, r.stderr
