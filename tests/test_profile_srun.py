"""ceiling profile with Slurm's srun, both ways the README gives: `ceiling profile -- srun
-n 2 ./app` (express: the ranks are started by slurmstepd, not as srun's children, so
ceiling's sampler never sees them; their records do, proc lines included) and `srun -n 2
ceiling profile -- ./app` (each rank wrapped: SLURM_PROCID and SLURM_STEP_NUM_TASKS name
the rank, and every record is gathered to rank 0's at MPI_Finalize).

Skipped where srun cannot start a job step here within 30 s (no Slurm, no controller, no
free node); CI sets up a single-node slurmctld and slurmd first (scripts/slurm-test-node.sh).
The ranks run the MPI that mpi4py loads, through the srun plugin that MPI speaks: PMI-2
(--mpi=pmi2) for MPICH (the wheel refuses PMIx: "unsupported PMI version"), PMIx
(--mpi=pmix) for Open MPI (Debian's 4.1 has no PMI-2 client: its ranks abort in MPI_Init).
Another MPI, or a Slurm without that plugin (Debian's PMIx plugin loads only with
libpmix-dev installed), is skipped with the reason."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from mpiutil import needs_mpi, run_env
from test_interpose import NEEDS_LIB
from test_profile_mpi import app, run_or_show  # noqa: F401 - app is the fixture this module uses


def _srun():
    srun = shutil.which("srun")
    if srun is None:
        return None, "no srun on PATH"
    try:
        r = subprocess.run([srun, "-n", "1", "-t", "1", "true"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return None, "srun -n 1 true did not finish within 30 s (no controller answering, or no free node)"
    if r.returncode != 0:
        return None, f"srun -n 1 true failed: {r.stderr.strip()[:200]}"
    return srun, ""


@pytest.fixture(scope="module")
def srun():
    """srun, once it has started a step here; a skip saying why not. Asked by the tests that run,
    not when the module is collected: every pytest process collects it, and a Slurm without a
    controller answers only after its own timeout (9 s here)."""
    path, why = _srun()
    if path is None:
        pytest.skip(why)
    return path

# srun's MPI plugin for each family of the library mpi4py loads (mpiutil.PROBE's "family"):
# the two tried (the MPICH wheel 5.0.2, Debian's Open MPI 4.1.4; Slurm 22.05)
PLUGIN = {"MPICH": "pmi2", "Open MPI": "pmix"}


@pytest.fixture(scope="module")
def step(srun, app):  # noqa: F811
    """srun's options for a two-rank step of the MPI that mpi4py loads; a skip where
    this Slurm cannot start that MPI's ranks (the plugin is missing or does not load)."""
    exe, found, tmp = app
    plugin = PLUGIN.get(found["family"])
    if plugin is None:
        pytest.skip(f"srun's --mpi plugin for {found['family']} {found['version']} is not known here "
                    f"(tried: {', '.join(PLUGIN)})")
    try:
        r = subprocess.run([srun, f"--mpi={plugin}", "-n", "1", "-t", "1", "true"], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        pytest.skip(f"srun --mpi={plugin} did not start a one-task step in 60 s")
    if r.returncode != 0:
        pytest.skip(f"{found['family']} needs srun --mpi={plugin}, which does not start here: "
                    f"{r.stderr.strip()[:200]}")
    return ["-n", "2", f"--mpi={plugin}", "-t", "5"]


def _env(tmp):
    # srun passes the environment on to the ranks (the interposer's variables among it)
    return run_env(tmp, NO_COLOR="1")


@needs_mpi
@NEEDS_LIB
def test_srun_as_the_launcher_of_a_profiled_job(srun, app, step, tmp_path):  # noqa: F811
    exe, found, tmp = app
    out = tmp_path / "p.json"
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                     str(out), "--", srun, *step, str(exe), "pingpong", "500", "64", "0"], _env(tmp))
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["application"]["profile"]
    per = {x["rank"]: x for x in prof["mpi"]["per_rank"]}
    assert sorted(per) == [0, 1] and prof["mpi"]["size"] == 2
    for rank in (0, 1):
        assert per[rank]["classes"]["send"]["calls"] == 500 and per[rank]["classes"]["send"]["bytes"] == 500 * 64
        assert per[rank]["cpu"], per[rank]
    # the ranks are slurmstepd's children, not srun's: their threads come from their records
    assert prof["from_records"]["processes"] == 2, prof["from_records"]
    assert prof["threads"] >= 2 and prof["shares"], prof


@needs_mpi
@NEEDS_LIB
def test_srun_wraps_each_rank_and_rank_0_reports_them_all(srun, app, step, tmp_path):  # noqa: F811
    exe, found, tmp = app
    out = tmp_path / "p.json"
    r = run_or_show([srun, *step, sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure",
                     "--save-json", str(out), "--", str(exe), "pingpong", "500", "64", "0"], _env(tmp))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Where the time went") == 1, r.stderr
    prof = json.loads(out.read_text())["application"]["profile"]
    assert prof["wrapped"] == {"rank": 0, "size": 2}
    assert sorted(x["rank"] for x in prof["mpi"]["per_rank"]) == [0, 1]
    assert prof["from_records"]["processes"] == 1, prof["from_records"]
