"""The trace's recording under MPI (issue 28): each rank's events carry its world rank, and a send its
peer and bytes. A real 2-rank ping-pong built with the mpicc of mpi4py's library, launched by its launcher."""
import subprocess

import numpy as np

from ceiling.probes import interpose_events as IE
from ceiling.probes.interpose_names import names
from ceiling.results import events as E
from mpiutil import needs_mpi, run_env
from test_interpose import LIB, NEEDS_LIB

pytestmark = [needs_mpi, NEEDS_LIB]
CALL = {c.fn: c.id for c in names().calls}

PINGPONG = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    int rank;
    char buf[1000] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3; i++) {
        if (rank == 0) {
            MPI_Send(buf, 1000, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(buf, 1000, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 1000, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 500, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


def test_a_ping_pong_gives_each_rank_its_sends_and_receives_with_peer_tag_and_bytes(mpi_setup, tmp_path):
    tmp, found = mpi_setup
    (tmp_path / "pp.c").write_text(PINGPONG)
    r = subprocess.run([found["mpicc"], "-O1", "-o", str(tmp_path / "pp"), str(tmp_path / "pp.c")],
                       capture_output=True, text=True, timeout=120, env=run_env(tmp))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "rec"
    out.mkdir()
    env = run_env(tmp, LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out / "rec.%p"), CEILING_TRACE_DIR=str(out),
                  OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("PYTHONFAULTHANDLER", None)
    r = subprocess.run([*found["argv2"], str(tmp_path / "pp")], capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stderr
    ev, _ = IE.read_dir(str(out))
    sends = ev.select((ev.kind == E.MPI_P2P) & (ev.call == CALL["MPI_Send"]))
    by_rank = {int(k): sends.select(sends.rank == k) for k in set(sends.rank)}
    assert set(by_rank) == {0, 1}
    assert list(by_rank[0].peer) == [1, 1, 1] and list(by_rank[0].nbytes) == [1000] * 3
    assert list(by_rank[1].peer) == [0, 0, 0] and list(by_rank[1].nbytes) == [500] * 3
    recvs = ev.select(ev.call == CALL["MPI_Recv"])
    assert len(recvs) == 6
    r0, r1 = recvs.select(recvs.rank == 0), recvs.select(recvs.rank == 1)
    assert list(r0.peer) == [1] * 3 and list(r0.tag) == [8] * 3 and list(r0.nbytes) == [500] * 3   # ANY_SOURCE
    assert list(r1.peer) == [0] * 3 and list(r1.tag) == [7] * 3 and list(r1.nbytes) == [1000] * 3
    assert list(by_rank[0].tag) == [7] * 3 and list(by_rank[1].tag) == [8] * 3
    assert set(sends.offset) == {-1}
    assert int(np.sum(ev.call[ev.kind == E.MPI_COLL] == CALL["MPI_Barrier"])) == 2
    assert {p.rank for p in ev.processes.values()} >= {0, 1}


def test_ceiling_trace_of_an_mpi_job_gives_each_rank_a_lane_and_each_message_an_arrow(mpi_setup, tmp_path):
    """`ceiling trace -- mpiexec -n 2 ./pp`: one ceiling outside the job records both ranks; the
    Perfetto file's sends start arrows that the receives end (6 messages), the run keeps a lane
    per rank and the profile's MPI counts."""
    import json
    import sys
    perfetto_read = __import__("pytest").importorskip("perfetto_read", reason="needs the perfetto package")
    tmp, found = mpi_setup
    (tmp_path / "pp.c").write_text(PINGPONG)
    r = subprocess.run([found["mpicc"], "-O1", "-o", str(tmp_path / "pp"), str(tmp_path / "pp.c")],
                       capture_output=True, text=True, timeout=120, env=run_env(tmp))
    assert r.returncode == 0, r.stderr
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json", str(out),
                        "--trace", str(pf), "--", *found["argv2"], str(tmp_path / "pp")], capture_output=True,
                       text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    (rec,) = [f for f in doc["findings"] if f["id"] == "trace.recorded"]
    assert rec["status"] == "ok" and "6 MPI messages" in rec["evidence"], rec["evidence"]
    assert [k for k in rec["data"]["timeline"]["lanes"] if k >= 0] == [0, 1]
    tr = perfetto_read.read(pf)
    started = {f for s in tr.slices for f in s.flows}
    ended = {f for s in tr.slices for f in s.ends_flows}
    assert len(started) == 6 and started == ended
