"""ceiling profile with Slurm's srun, both ways the README gives: `ceiling profile -- srun
-n 2 ./app` (express: the ranks are started by slurmstepd, not as srun's children, so
ceiling's sampler never sees them; their records do, proc lines included) and `srun -n 2
ceiling profile -- ./app` (each rank wrapped: SLURM_PROCID and SLURM_STEP_NUM_TASKS name
the rank, and every record is gathered to rank 0's at MPI_Finalize).

Skipped where srun cannot start a job step here within 30 s (no Slurm, no controller, no
free node): CI has no Slurm. With one (a single-node slurmctld and slurmd suffice), these
run the MPI that mpi4py loads through srun's PMI-2 plugin (--mpi=pmi2)."""
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


SRUN, WHY = _srun()
needs_srun = pytest.mark.skipif(SRUN is None, reason=WHY)
STEP = ["-n", "2", "--mpi=pmi2", "-t", "5"]


def _env(tmp):
    # srun passes the environment on to the ranks (the interposer's variables among it)
    return run_env(tmp, NO_COLOR="1")


@needs_srun
@needs_mpi
@NEEDS_LIB
def test_srun_as_the_launcher_of_a_profiled_job(app, tmp_path):  # noqa: F811
    exe, found, tmp = app
    out = tmp_path / "p.json"
    r = run_or_show([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                     str(out), "--", SRUN, *STEP, str(exe), "pingpong", "500", "64", "0"], _env(tmp))
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["environment"]["profile"]
    per = {x["rank"]: x for x in prof["mpi"]["per_rank"]}
    assert sorted(per) == [0, 1] and prof["mpi"]["size"] == 2
    for rank in (0, 1):
        assert per[rank]["classes"]["send"]["calls"] == 500 and per[rank]["classes"]["send"]["bytes"] == 500 * 64
        assert per[rank]["cpu"], per[rank]
    # the ranks are slurmstepd's children, not srun's: their threads come from their records
    assert prof["from_records"]["processes"] == 2, prof["from_records"]
    assert prof["threads"] >= 2 and prof["shares"], prof


@needs_srun
@needs_mpi
@NEEDS_LIB
def test_srun_wraps_each_rank_and_rank_0_reports_them_all(app, tmp_path):  # noqa: F811
    exe, found, tmp = app
    out = tmp_path / "p.json"
    r = run_or_show([SRUN, *STEP, sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure",
                     "--save-json", str(out), "--", str(exe), "pingpong", "500", "64", "0"], _env(tmp))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Where the time went") == 1, r.stderr
    prof = json.loads(out.read_text())["environment"]["profile"]
    assert prof["wrapped"] == {"rank": 0, "size": 2}
    assert sorted(x["rank"] for x in prof["mpi"]["per_rank"]) == [0, 1]
    assert prof["from_records"]["processes"] == 1, prof["from_records"]
