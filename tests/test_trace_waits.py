"""The MPI wait states and phases (analysis/trace_waits.py) on synthetic events: Scalasca's
definitions with exact numbers, messages paired by order per channel, the waits that close an
imbalanced phase said once, and the figures set against a ping-pong curve or said unknown.
tests/test_trace_waits_mpi.py plants the same in real programs."""
import pytest

from ceiling.analysis.trace_waits import NetworkCeilings, network_ceilings, wait_findings
from ceiling.probes.interpose_names import names
from ceiling.results.events import MPI_COLL, MPI_OTHER, MPI_P2P, MPI_WAIT, REGION, Comm, Events

MS = 1_000_000
CALLS = names().calls
ID = {c.fn: i for i, c in enumerate(CALLS)}
KIND = {"MPI_Send": MPI_P2P, "MPI_Ssend": MPI_P2P, "MPI_Recv": MPI_P2P, "MPI_Irecv": MPI_P2P, "MPI_Wait": MPI_WAIT,
        "MPI_Barrier": MPI_COLL, "MPI_Allreduce": MPI_COLL, "MPI_Bcast": MPI_COLL, "MPI_Init": MPI_OTHER,
        "MPI_Finalize": MPI_OTHER}


def call(rank, fn, ts_ms, dur_ms, peer=-1, tag=-1, comm=0, nbytes=0):
    return dict(rank=rank, pid=1000 + rank, tid=1000 + rank, kind=KIND[fn], call=ID[fn], ts=int(ts_ms * MS),
                dur=int(dur_ms * MS), peer=peer, tag=tag, comm=comm, nbytes=nbytes)


def run(rows, nranks=2, end_ms=1000, regions=()):
    """The rows between each rank's MPI_Init at 0 and its MPI_Finalize at end_ms (the run: end_ms)."""
    span = [call(r, "MPI_Init", 0, 0) for r in range(nranks)] + [call(r, "MPI_Finalize", end_ms, 0)
                                                                  for r in range(nranks)]
    return Events.from_rows(span + rows, calls=CALLS, comms=[Comm("MPI_COMM_WORLD")], regions=list(regions))


def one(fs, fid):
    assert [f.id for f in fs] == [fid], [(f.id, f.title) for f in fs]
    return fs[0]


def test_late_sender_loses_send_enter_minus_receive_enter():
    ev = run([call(0, "MPI_Send", 500, 0.001, peer=1, tag=7, nbytes=1000),
              call(1, "MPI_Recv", 100, 401, peer=0, tag=7, nbytes=1000)])
    f = one(wait_findings([ev]), "trace.mpi.late_sender")
    assert f.data["time_lost_s"] == pytest.approx(0.4)
    assert f.data["windows"] == [[0.1, 0.5]]
    (site,) = f.data["sites"]
    assert (site["rank"], site["call"], site["peer"], site["comm"], site["count"]) == (1, "MPI_Recv", 0,
                                                                                       "MPI_COMM_WORLD", 1)
    assert "unknown" in f.evidence and f.data["network_us"] is None


def test_a_late_sender_met_in_the_wait_of_an_irecv_and_one_wait_named_per_posted_receive():
    # rank 1 posts two MPI_Irecv from rank 0 (tag 7) at 50 and 60 ms and waits for each: the first wait
    # (100 ms) for a send at 500 ms, the second (600 ms) for one at 550 ms, already there; an unnamed
    # wait (a send's) pairs with nothing
    ev = run([call(1, "MPI_Irecv", 50, 0.01, peer=0, tag=7, nbytes=1000),
              call(1, "MPI_Irecv", 60, 0.01, peer=0, tag=7, nbytes=1000),
              call(1, "MPI_Wait", 70, 1),
              call(1, "MPI_Wait", 100, 401, peer=0, tag=7),
              call(1, "MPI_Wait", 600, 0.01, peer=0, tag=7),
              call(0, "MPI_Send", 500, 0.001, peer=1, tag=7, nbytes=1000),
              call(0, "MPI_Send", 550, 0.001, peer=1, tag=7, nbytes=1000)])
    f = one(wait_findings([ev]), "trace.mpi.late_sender")
    assert f.data["time_lost_s"] == pytest.approx(0.4) and f.data["windows"] == [[0.1, 0.5]]
    (site,) = f.data["sites"]
    assert (site["rank"], site["call"], site["peer"], site["count"]) == (1, "MPI_Wait", 0, 1)


def test_a_receive_entered_after_its_send_began_is_no_late_sender():
    ev = run([call(0, "MPI_Send", 100, 0.001, peer=1, tag=7), call(1, "MPI_Recv", 100.5, 0.01, peer=0, tag=7)])
    assert wait_findings([ev]) == []


def test_late_receiver_of_a_synchronous_send_and_an_eager_send_that_never_waited():
    ev = run([call(0, "MPI_Ssend", 100, 300, peer=1, tag=3), call(1, "MPI_Recv", 350, 50, peer=0, tag=3),
              # an eager send returns at once: its 1 us caps what it lost to its late receive
              call(0, "MPI_Send", 500, 0.001, peer=1, tag=4), call(1, "MPI_Recv", 900, 0.01, peer=0, tag=4)])
    f = one(wait_findings([ev]), "trace.mpi.late_receiver")
    assert f.data["time_lost_s"] == pytest.approx(0.25 + 1e-6)
    assert f.data["sites"][0]["call"] == "MPI_Ssend" and f.data["sites"][0]["time_lost_s"] == pytest.approx(0.25)


def test_messages_pair_in_order_per_channel_and_an_unequal_channel_is_not_paired():
    # tag 1: two messages; the second receive waits 200 ms for the second send (the first not at all)
    rows = [call(0, "MPI_Send", 100, 0.001, peer=1, tag=1), call(0, "MPI_Send", 400, 0.001, peer=1, tag=1),
            call(1, "MPI_Recv", 150, 1, peer=0, tag=1), call(1, "MPI_Recv", 200, 200.001, peer=0, tag=1),
            # tag 2: two receives posted (MPI_Irecv) for three sends: which send fed which receive is unknown
            call(0, "MPI_Send", 600, 0.001, peer=1, tag=2), call(0, "MPI_Send", 601, 0.001, peer=1, tag=2),
            call(0, "MPI_Send", 602, 0.001, peer=1, tag=2), call(1, "MPI_Irecv", 500, 0.001, peer=0, tag=2),
            call(1, "MPI_Recv", 500.1, 102, peer=0, tag=2)]
    f = one(wait_findings([run(rows)]), "trace.mpi.late_sender")
    assert f.data["time_lost_s"] == pytest.approx(0.2) and f.data["calls"] == 1
    assert f.data["windows"] == [[0.2, 0.4]]


def test_wait_at_barrier_is_each_ranks_enter_to_the_last_enter():
    ev = run([call(0, "MPI_Barrier", 100, 501), call(1, "MPI_Barrier", 200, 401), call(2, "MPI_Barrier", 600, 1)],
             nranks=3)
    f = one(wait_findings([ev]), "trace.mpi.barrier")
    assert f.data["time_lost_s"] == pytest.approx(0.9)
    assert {s["rank"]: s["time_lost_s"] for s in f.data["sites"]} == pytest.approx({0: 0.5, 1: 0.4})
    assert f.data["windows"] == [[0.1, 0.6]]


def test_wait_at_an_nxn_collective_and_a_rooted_one_that_is_neither():
    ev = run([call(0, "MPI_Allreduce", 100, 301, nbytes=8), call(1, "MPI_Allreduce", 400, 1, nbytes=8),
              call(0, "MPI_Bcast", 500, 1), call(1, "MPI_Bcast", 500, 1)])
    f = one(wait_findings([ev]), "trace.mpi.nxn")
    assert f.data["time_lost_s"] == pytest.approx(0.3) and f.data["sites"][0]["call"] == "MPI_Allreduce"
    # a rooted collective's wait is another pattern (Scalasca's late broadcast), not said here
    assert wait_findings([run([call(0, "MPI_Bcast", 500, 201), call(1, "MPI_Bcast", 700, 1)])]) == []


def test_collectives_on_two_communicators_pair_on_their_own():
    ev = run([call(0, "MPI_Barrier", 100, 1, comm=0), call(1, "MPI_Barrier", 100, 1, comm=0),
              call(0, "MPI_Barrier", 200, 301, comm=1), call(1, "MPI_Barrier", 500, 1, comm=1)])
    ev.comms.append(Comm("communicator 0000abcd"))
    f = one(wait_findings([ev]), "trace.mpi.barrier")
    assert f.data["time_lost_s"] == pytest.approx(0.3)
    assert f.data["sites"][0]["comm"] == "communicator 0000abcd"


def _phases(slow_ms):
    """Six barriers on 2 ranks, five phases of 100 ms, rank 1 computing slow_ms more in the third."""
    rows, t = [], {0: 0.0, 1: 0.0}
    for k in range(6):
        enter = {r: t[r] for r in (0, 1)}
        last = max(enter.values())
        for r in (0, 1):
            rows.append(call(r, "MPI_Barrier", enter[r], last - enter[r] + 1))
            t[r] = last + 1 + (100 + (slow_ms if k == 2 and r == 1 else 0) if k < 5 else 0)
    return run(rows, end_ms=2000)


def test_imbalance_in_one_phase_of_five_is_said_once_with_its_phase_named():
    f = one(wait_findings([_phases(300)]), "trace.mpi.phase_imbalance")
    assert f.data["worst"] == "between MPI_Barrier #3 and MPI_Barrier #4 on MPI_COMM_WORLD"
    (p,) = f.data["phases"]
    assert p["compute_s"] == pytest.approx({"0": 0.1, "1": 0.4})
    assert p["imbalance"] == pytest.approx(1.6) and p["slowest_rank"] == 1
    # what it cost: rank 0's wait at the barrier that closes it (not said again as a wait at barrier)
    assert f.data["time_lost_s"] == pytest.approx(0.3)
    assert f.data["windows"] == [[pytest.approx(0.203), pytest.approx(0.603)]]


def test_balanced_phases_raise_nothing():
    assert wait_findings([_phases(0)]) == []


def test_a_late_sender_inside_a_phase_is_not_said_again_as_the_phase():
    rows = [call(0, "MPI_Barrier", 0, 1), call(1, "MPI_Barrier", 0, 1),
            call(0, "MPI_Send", 400, 0.001, peer=1, tag=7), call(1, "MPI_Recv", 1, 399.001, peer=0, tag=7),
            call(0, "MPI_Barrier", 400.001, 0.1), call(1, "MPI_Barrier", 400.001, 0.1)]
    assert [f.id for f in wait_findings([run(rows)])] == ["trace.mpi.late_sender"]


def test_a_user_regions_instances_are_phases():
    ev = run([dict(rank=0, pid=1000, tid=1000, kind=REGION, call=0, ts=100 * MS, dur=100 * MS),
              dict(rank=1, pid=1001, tid=1001, kind=REGION, call=0, ts=100 * MS, dur=300 * MS)], regions=["solve"])
    f = one(wait_findings([ev]), "trace.mpi.phase_imbalance")
    assert f.data["worst"] == "region 'solve' #1" and f.data["time_lost_s"] == pytest.approx(0.2)
    assert f.data["imbalance"] == pytest.approx(1.5)


def test_below_five_percent_of_the_run_nothing_is_said():
    ev = run([call(0, "MPI_Send", 140, 0.001, peer=1, tag=7), call(1, "MPI_Recv", 100, 40.001, peer=0, tag=7)])
    assert wait_findings([ev]) == []                        # 40 ms of a 1 s run
    assert [f.id for f in wait_findings([run(ev_rows_late(60))])] == ["trace.mpi.late_sender"]


def ev_rows_late(ms):
    return [call(0, "MPI_Send", 100 + ms, 0.001, peer=1, tag=7), call(1, "MPI_Recv", 100, ms + 0.001, peer=0, tag=7)]


def test_a_wait_set_against_the_ping_pong_curve():
    net = NetworkCeilings(latency_us=2.0, bandwidth_mbs=1000.0, source="test")
    ev = run([dict(r, nbytes=1000) for r in ev_rows_late(400)])
    f = one(wait_findings([ev], net), "trace.mpi.late_sender")
    assert f.data["network_us"] == pytest.approx(3.0)          # 2 us + 1000 B / 1000 MB/s
    assert f.data["wait_over_network"] == pytest.approx(400e3 / 3.0, rel=1e-6)
    assert "not the network" in f.evidence and "3 µs" in f.evidence


def test_the_curve_from_the_history():
    rows = {"net.pingpong.latency.": [("net.pingpong.latency.same-node", 0.4, "µs", "2026-11-01T00:00", "r1"),
                                      ("net.pingpong.latency.same-node", 0.9, "µs", "2026-10-01T00:00", "r0")],
            "net.pingpong.bandwidth.": [("net.pingpong.bandwidth.same-node", 5.0, "GB/s", "2026-11-01T00:00", "r1")]}
    net = network_ceilings(lambda prefix: rows.get(prefix, []))
    assert (net.latency_us, net.bandwidth_mbs) == (0.4, 5000.0)
    assert net.message_us(5000) == pytest.approx(1.4)
    assert network_ceilings(lambda prefix: []).latency_us is None


def test_no_mpi_no_finding():
    assert wait_findings([Events.from_rows([dict(ts=0, dur=5, rank=-1, kind=1, call=0)], calls=CALLS)]) == []


def test_a_wait_inside_an_io_findings_window_is_said_there_once():
    from ceiling.results.model import WARN, Finding
    ev = run([call(0, "MPI_Barrier", 100, 501), call(1, "MPI_Barrier", 600, 1)])
    writer = Finding(id="profile.io.single_writer", status=WARN, title="", data={"windows": [[0.1, 0.6]]})
    assert wait_findings([ev], said_before=[writer]) == []
    elsewhere = Finding(id="trace.io.serialized", status=WARN, title="", data={"windows": [[0.7, 0.9]]})
    assert [f.id for f in wait_findings([ev], said_before=[elsewhere])] == ["trace.mpi.barrier"]
