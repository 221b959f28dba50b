"""The trace's recording under MPI (issue 28): each rank's events carry its world rank, and a send its
peer and bytes. A real 2-rank ping-pong built with the mpicc of mpi4py's library, launched by its launcher."""
import subprocess

import numpy as np

from ceiling.probes import interpose_events as IE
from ceiling.probes.interpose_names import names
from ceiling.results import events as E
from mpiutil import build_mpi, needs_mpi, run_env
from test_interpose import LIB, NEEDS_LIB

pytestmark = [needs_mpi, NEEDS_LIB]
CALL = {c.fn: c.id for c in names().calls}

# Three round trips between ranks 0 and 1 (6 messages, tags 7 and 8), a barrier, the end: the body
# of the ping-pongs here and in test_trace_wrapped_mpi (``rank`` and a 1000-byte ``buf`` declared).
PINGPONG_LOOP = r"""    for (int i = 0; i < 3; i++) {
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

PINGPONG = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    int rank;
    char buf[1000] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
""" + PINGPONG_LOOP


def traced(mpi_setup, tmp_path, source: str, name: str):
    """``source`` built with mpi4py's mpicc and run on two ranks under the interposer, tracing: its events."""
    tmp, found = mpi_setup
    build_mpi(found, tmp, tmp_path, name, source)
    out = tmp_path / "rec"
    out.mkdir()
    env = run_env(tmp, LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out / "rec.%p"), CEILING_TRACE_DIR=str(out),
                  OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("PYTHONFAULTHANDLER", None)
    r = subprocess.run([*found["argv2"], str(tmp_path / name)], capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stderr
    return IE.read_dir(str(out))[0]


def test_a_ping_pong_gives_each_rank_its_sends_and_receives_with_peer_tag_and_bytes(mpi_setup, tmp_path):
    ev = traced(mpi_setup, tmp_path, PINGPONG, "pp")
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
    # launched without ceiling's wrapping (no CEILING_INTERPOSE_GATHER): no rank adds the clocks' sync
    _, reading = IE.read_dir(str(tmp_path / "rec"))
    assert reading.clocks.syncs == [] and reading.clocks.said() == "clocks: one clock (every process on one node)"


def test_ceiling_trace_of_an_mpi_job_gives_each_rank_a_lane_and_each_message_an_arrow(mpi_setup, tmp_path):
    """`ceiling trace -- mpiexec -n 2 ./pp`: one ceiling outside the job records both ranks; the
    Perfetto file's sends start arrows that the receives end (6 messages), the run keeps a lane
    per rank and the profile's MPI counts."""
    import json
    import sys
    perfetto_read = __import__("pytest").importorskip("perfetto_read", reason="needs the perfetto package")
    tmp, found = mpi_setup
    build_mpi(found, tmp, tmp_path, "pp", PINGPONG)
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
    # an express launch never measures the clocks (a rank without the interposer would hang in the sync)
    assert rec["data"]["clocks"]["measured_ranks"] == [] and rec["data"]["clocks"]["nodes"] == 1
    assert "Clocks: one clock (every process on one node). " in rec["evidence"], rec["evidence"]
    tr = perfetto_read.read(pf)
    started = {f for s in tr.slices for f in s.flows}
    ended = {f for s in tr.slices for f in s.ends_flows}
    assert len(started) == 6 and started == ended


COMMS = r"""
#include <mpi.h>
#include <string.h>
int main(int argc, char **argv)
{
    int w, s;
    char buf[1000];
    memset(buf, 1, sizeof buf);
    MPI_Comm sub, dup;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &w);
    /* halves {0, 2} and {1, 3}, ordered backwards: sub rank 0 is world 2 (or 3), sub rank 1 world 0 (or 1) */
    MPI_Comm_split(MPI_COMM_WORLD, w % 2, -w, &sub);
    MPI_Comm_rank(sub, &s);
    if (s == 0) {
        MPI_Send(buf, 1000, MPI_BYTE, 1, 11, sub);
        MPI_Recv(buf, 1000, MPI_BYTE, 1, 12, sub, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, 1000, MPI_BYTE, MPI_ANY_SOURCE, 11, sub, MPI_STATUS_IGNORE);
        MPI_Send(buf, 300, MPI_BYTE, 0, 12, sub);
    }
    MPI_Bcast(buf, 10, MPI_BYTE, 1, sub);
    MPI_Comm_dup(sub, &dup);
    if (s == 0)
        MPI_Send(buf, 200, MPI_BYTE, 1, 21, dup);
    else
        MPI_Recv(buf, 200, MPI_BYTE, 0, 21, dup, MPI_STATUS_IGNORE);
    MPI_Comm_free(&dup);
    /* an intercommunicator between the halves (leaders: sub rank 0, world 2 and 3): its peers are remote ranks */
    MPI_Comm inter;
    MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, w % 2 ? 2 : 3, 99, &inter);
    if (w % 2 == 0)
        MPI_Send(buf, 8, MPI_BYTE, s, 31, inter);
    else
        MPI_Recv(buf, 8, MPI_BYTE, MPI_ANY_SOURCE, 31, inter, MPI_STATUS_IGNORE);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&sub);
    MPI_Reduce(buf, buf + 100, 4, MPI_CHAR, MPI_MAX, 3, MPI_COMM_WORLD);
    /* MPI-IO: an explicit offset, the individual pointer twice, an offset through a view of ints at 4096 */
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at(fh, (MPI_Offset)w * 100, buf, 100, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 1000 + (MPI_Offset)w * 200, MPI_SEEK_SET);
    MPI_File_write(fh, buf, 50, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_write(fh, buf, 50, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_set_view(fh, 4096, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    MPI_File_write_at_all(fh, (MPI_Offset)w * 10, buf, 4, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
"""


def test_peers_roots_and_mpi_io_files_are_named_on_every_communicator(mpi_setup, tmp_path):
    """On a communicator from MPI_Comm_split (its ranks in another order than the world's), its
    MPI_Comm_dup and an intercommunicator between the halves: each send, receive (MPI_ANY_SOURCE
    too) and the Bcast's root are world ranks, and the profile counts the sends by world rank; the
    MPI-IO calls name their file (the file table's path; MPI_File_open's too) and the byte where each starts: an
    explicit offset, the individual pointer, a view's."""
    tmp, found = mpi_setup
    build_mpi(found, tmp, tmp_path, "comms", COMMS)
    out, data = tmp_path / "rec", tmp_path / "data.bin"
    out.mkdir()
    env = run_env(tmp, LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out / "rec.%p"), CEILING_TRACE_DIR=str(out),
                  OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("PYTHONFAULTHANDLER", None)
    r = subprocess.run([*found["argv4"], str(tmp_path / "comms"), str(data)], capture_output=True, text=True,
                       timeout=180, env=env)
    assert r.returncode == 0, r.stderr
    ev, _ = IE.read_dir(str(out))

    def of(fn, rank, on_inter=False):
        return ev.select((ev.call == CALL[fn]) & (ev.rank == rank) & ((ev.tag == 31) == on_inter))

    # sub rank 0 is world 2 (color 0) and world 3 (color 1); sub rank 1 is world 0 and world 1
    first, second = {2: 0, 3: 1}, {0: 2, 1: 3}
    for w, to in first.items():
        s = of("MPI_Send", w)
        assert list(zip(s.peer, s.tag)) == [(to, 11), (to, 21)], (w, list(s.peer))
        rv = of("MPI_Recv", w)
        assert list(zip(rv.peer, rv.tag, rv.nbytes)) == [(to, 12, 300)], (w, list(rv.peer))
    for w, frm in second.items():
        rv = of("MPI_Recv", w)                               # the first with MPI_ANY_SOURCE, the second on dup
        assert list(zip(rv.peer, rv.tag, rv.nbytes)) == [(frm, 11, 1000), (frm, 21, 200)], (w, list(rv.peer))
        assert list(of("MPI_Send", w).peer) == [frm]
    # the intercommunicator: sub rank s of {0, 2} sends to remote rank s of {1, 3}, received with ANY_SOURCE
    assert {w: list(of("MPI_Send", w, True).peer) for w in (0, 2)} == {0: [1], 2: [3]}
    assert {w: list(of("MPI_Recv", w, True).peer) for w in (1, 3)} == {1: [0], 3: [2]}
    for w in range(4):
        assert list(of("MPI_Bcast", w).peer) == [w % 2], w    # root: sub rank 1, world 0 or 1
        assert list(of("MPI_Reduce", w).peer) == [3], w
    # the profile's sends by world rank: both of world 2's sub-communicator sends went to world 0
    rec2 = [p.read_text() for p in out.iterdir() if p.name.startswith("rec.") and "mpi rank=2 " in p.read_text()]
    assert len(rec2) == 1
    assert "mpi peer=0 calls=2 bytes=1200 " in rec2[0], [ln for ln in rec2[0].splitlines() if "peer=" in ln]
    # MPI-IO: the file the table names, the byte where each call starts
    path = str(data.resolve())
    for w in range(4):
        io = ev.select((ev.rank == w) & np.isin(ev.kind, E.IO_KINDS) & np.isin(
            ev.call, [CALL[f] for f in ("MPI_File_write_at", "MPI_File_write", "MPI_File_write_at_all")]))
        assert [ev.files[f] for f in io.file] == [path] * 4, (w, list(io.file), ev.files)
        assert list(zip(io.offset, io.nbytes)) == [(w * 100, 100), (1000 + w * 200, 50), (1050 + w * 200, 50),
                                                   (4096 + 40 * w, 16)], (w, list(io.offset))
        meta = ev.select((ev.rank == w) & np.isin(ev.call, [CALL[f] for f in ("MPI_File_open", "MPI_File_seek",
                                                                                "MPI_File_close")]))
        assert [ev.files[f] for f in meta.file] == [path] * 3


TWO_COMMS = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    int rank;
    char a[100] = {0}, b[200] = {0};
    MPI_Comm A, B;
    MPI_Request req[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &A);
    MPI_Comm_dup(MPI_COMM_WORLD, &B);
    if (rank == 0) {            /* the same ranks and tag on both: only the communicator tells them apart */
        MPI_Isend(a, 100, MPI_BYTE, 1, 7, A, &req[0]);
        MPI_Isend(b, 200, MPI_BYTE, 1, 7, B, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    } else if (rank == 1) {     /* received in the other order */
        MPI_Recv(b, 200, MPI_BYTE, 0, 7, B, MPI_STATUS_IGNORE);
        MPI_Recv(a, 100, MPI_BYTE, 0, 7, A, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&A);
    MPI_Comm_free(&B);
    MPI_Finalize();
    return 0;
}
"""


def test_a_send_and_its_receive_share_their_communicator_where_ranks_and_tag_do_not_tell(mpi_setup, tmp_path):
    """Two dups of the world carry a message each from rank 0 to 1 with tag 7, received in the other
    order: paired by ranks and tag alone, the first send would meet the first receive (100 bytes
    sent, 200 received). The events carry each message's communicator, the same on both sides."""
    ev = traced(mpi_setup, tmp_path, TWO_COMMS, "two")
    sends = ev.select(ev.call == CALL["MPI_Isend"])
    recvs = ev.select(ev.call == CALL["MPI_Recv"])
    assert list(sends.nbytes) == [100, 200] and list(recvs.nbytes) == [200, 100]
    assert list(sends.tag) == [7, 7] and list(recvs.tag) == [7, 7]
    sent = {int(n): int(c) for n, c in zip(sends.nbytes, sends.comm)}
    got = {int(n): int(c) for n, c in zip(recvs.nbytes, recvs.comm)}
    assert sent == got and sent[100] != sent[200] and min(sent.values()) >= 0, (sent, got)
    names = [ev.comms[sent[100]].name, ev.comms[sent[200]].name]
    assert all(n.startswith("communicator ") for n in names), names      # neither is MPI_COMM_WORLD


IDUP = r"""
#include <mpi.h>
int main(int argc, char **argv)
{
    int w, s;
    char buf[100] = {0};
    MPI_Comm sub, dup, fromg = MPI_COMM_NULL;
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &w);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -w, &sub);          /* sub rank 0 is world 1, sub rank 1 world 0 */
    MPI_Comm_idup(sub, &dup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Comm_rank(dup, &s);
    if (s == 0)
        MPI_Send(buf, 40, MPI_BYTE, 1, 5, dup);
    else
        MPI_Recv(buf, 40, MPI_BYTE, 0, 5, dup, MPI_STATUS_IGNORE);
#if MPI_VERSION >= 4
    MPI_Group g;                                          /* MPI 4: the world's group, backwards, as a communicator */
    int back[2] = {1, 0};
    MPI_Group world_g;
    MPI_Comm_group(MPI_COMM_WORLD, &world_g);
    MPI_Group_incl(world_g, 2, back, &g);
    MPI_Comm_create_from_group(g, "ceiling.test", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &fromg);
    MPI_Comm_rank(fromg, &s);
    if (s == 0)
        MPI_Send(buf, 60, MPI_BYTE, 1, 6, fromg);
    else
        MPI_Recv(buf, 60, MPI_BYTE, 0, 6, fromg, MPI_STATUS_IGNORE);
    MPI_Group_free(&g);
    MPI_Group_free(&world_g);
    MPI_Comm_free(&fromg);
#endif
    MPI_Comm_free(&dup);
    MPI_Comm_free(&sub);
    MPI_Finalize();
    return 0;
}
"""


def test_a_non_blocking_duplicate_and_a_communicator_from_a_group_name_their_peers_by_world_rank(mpi_setup, tmp_path):
    """MPI_Comm_idup's communicator (its parent's members, noted at the call) and MPI 4's
    MPI_Comm_create_from_group's (where the MPI has it): on both, world 1 is rank 0 and sends to world 0."""
    ev = traced(mpi_setup, tmp_path, IDUP, "idup")
    for tag, size in ((5, 40), (6, 60)):
        sends = ev.select((ev.call == CALL["MPI_Send"]) & (ev.tag == tag))
        recvs = ev.select((ev.call == CALL["MPI_Recv"]) & (ev.tag == tag))
        if tag == 6 and not len(sends):
            continue                                          # an MPI 3 library: no MPI_Comm_create_from_group
        assert list(zip(sends.rank, sends.peer, sends.nbytes)) == [(1, 0, size)], (tag, list(sends.peer))
        assert list(zip(recvs.rank, recvs.peer)) == [(0, 1)], (tag, list(recvs.peer))
        assert sends.comm[0] == recvs.comm[0] and sends.comm[0] >= 0
        assert ev.comms[int(sends.comm[0])].world_ranks == [1, 0], ev.comms[int(sends.comm[0])]
