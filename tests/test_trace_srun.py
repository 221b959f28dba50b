"""`ceiling trace` with Slurm's srun, both launch forms (issue 28): `ceiling trace -- srun -n 2 ./app`
(express: slurmstepd starts the ranks, each writes its own event files, ceiling reads them all) and
`srun -n 2 ceiling trace -- ./app` (wrapped: each rank's ceiling records its rank from SLURM_PROCID, the
interposer sends every rank's event files to rank 0's at MPI_Finalize). The same two-rank ping-pong with
three writes per rank as tests/test_trace_wrapped_mpi.py, built with the mpicc of mpi4py's library.

Skipped with the reason where srun cannot start a step of that MPI here (see tests/test_profile_srun.py:
no Slurm, no controller, or the --mpi plugin that MPI needs does not load; CI starts a single-node Slurm
with scripts/slurm-test-node.sh)."""
import subprocess
import sys

import pytest

from mpiutil import build_mpi, needs_mpi, run_env
from test_interpose import NEEDS_LIB
from test_profile_srun import PLUGIN, _srun
from test_trace_wrapped_mpi import PINGPONG, recorded

pytestmark = [needs_mpi, NEEDS_LIB]


@pytest.fixture(scope="module")
def pp(mpi_setup, tmp_path_factory):
    tmp, found = mpi_setup
    d = tmp_path_factory.mktemp("srun")
    return build_mpi(found, tmp, d, "pp", PINGPONG), found, tmp


@pytest.fixture(scope="module")
def step(pp):
    """srun and its options for a two-rank step of the MPI that mpi4py loads; a skip saying why not."""
    exe, found, tmp = pp
    srun, why = _srun()
    if srun is None:
        pytest.skip(why)
    plugin = PLUGIN.get(found["family"])
    if plugin is None:
        pytest.skip(f"srun's --mpi plugin for {found['family']} {found['version']} is not known here")
    r = subprocess.run([srun, f"--mpi={plugin}", "-n", "1", "-t", "1", "true"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        pytest.skip(f"{found['family']} needs srun --mpi={plugin}, which does not start here: "
                    f"{r.stderr.strip()[:200]}")
    return [srun, "-n", "2", f"--mpi={plugin}", "-t", "5"]


def _run(pp, argv):
    exe, found, tmp = pp
    env = run_env(tmp, NO_COLOR="1")
    env.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)


def _check(rec, pf, tmp_path, measured):
    # every rank's lane, the messages, the clocks block: measured against rank 0's in the wrapped launch only (an
    # express launch never measures them: a rank without the interposer would hang in the sync, mpi_clock.c)
    assert [k for k in rec["data"]["timeline"]["lanes"] if k >= 0] == [0, 1], rec["data"]["timeline"]["lanes"]
    assert "6 MPI messages" in rec["evidence"], rec["evidence"]
    clocks = rec["data"]["clocks"]
    assert clocks["nodes"] == 1 and clocks["measured_ranks"] == measured, clocks
    assert clocks.get("one_clock_checks", 0) == len(measured) and not clocks.get("one_clock_outside_error"), clocks
    perfetto_read = pytest.importorskip("perfetto_read", reason="needs the perfetto package")
    tr = perfetto_read.read(pf)
    perfetto_read.check_nesting(tr)
    names = {d.process.process_name for d in tr.tracks.values() if d.HasField("process")}
    assert {n.split(" (")[0] for n in names} >= {"rank 0", "rank 1"}, names
    started = {f for s in tr.slices for f in s.flows}
    assert len(started) == 6 and started == {f for s in tr.slices for f in s.ends_flows}
    writes = [str(s.args.get("file")) for s in tr.slices if s.name == "write"]
    for rank in (0, 1):
        assert sum(w == str(tmp_path / f"out-{rank}") for w in writes) == 3, writes


def test_srun_as_the_launcher_of_a_traced_job_gives_every_ranks_events(pp, step, tmp_path):
    exe = pp[0]
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    r = _run(pp, [sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json", str(out),
                  "--trace", str(pf), "--", *step, str(exe), str(tmp_path), "3"])
    assert r.returncode == 0, r.stderr
    doc, rec = recorded(out)
    assert rec["status"] == "ok", rec
    _check(rec, pf, tmp_path, [])
    per = {x["rank"]: x for x in doc["application"]["profile"]["mpi"]["per_rank"]}
    assert sorted(per) == [0, 1], per


def test_srun_wraps_each_rank_in_ceiling_trace_and_rank_0_writes_one_trace(pp, step, tmp_path):
    exe = pp[0]
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    r = _run(pp, [*step, sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json",
                  str(out), "--trace", str(pf), "--", str(exe), str(tmp_path), "3"])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Where the time went") == 1, r.stderr
    doc, rec = recorded(out)
    assert rec["data"]["ranks"] == {"received": [1], "missing": [], "unwritten_bytes": 0, "size": 2}, rec["data"]
    _check(rec, pf, tmp_path, [0, 1])
    assert doc["application"]["profile"]["wrapped"] == {"rank": 0, "size": 2}
    per = {x["rank"]: x for x in doc["application"]["profile"]["mpi"]["per_rank"]}
    assert sorted(per) == [0, 1], per
    assert not list(tmp_path.glob("*.pftrace"))[1:]
