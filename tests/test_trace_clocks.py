"""The trace's clock maps (probes/interpose_clocks.py) on measurements made up to the ns: which map a node
gets from its MPI_Init and MPI_Finalize measurements, and what the page says. The real measurements and
the reader on a real recording: tests/test_trace_clocks_mpi.py."""
import numpy as np
import pytest

from ceiling.probes import interpose_clocks as C

B, R = ("boot", 2), ("boot", 1)


def sync(phase, at_ns, offset_ns, rtt_ns=2000, rank=1):
    return C.Sync(rank, phase, at_ns, offset_ns, rtt_ns, 0, 50_000)


def test_two_measurements_that_resolve_the_drift_are_interpolated_and_extrapolated_on_one_line():
    # rank 0's clock = t - 5 s - 20 ppm (t - 1000 s), measured 60 s apart with 1 µs errors
    def true(t):
        return t - 5_000_000_000 - (t - 1_000_000_000_000) * 20e-6
    a, b = 1_000_000_000_000, 1_060_000_000_000
    m = C.clock_map(sync(0, a, int(true(a) - a)), sync(1, b, int(true(b) - b)))
    assert m.slope == pytest.approx(-20e-6) and m.unresolved_ppm == 0
    t = np.array([a - 10_000_000_000, a, a + 30_000_000_000, b, b + 5_000_000_000], np.int64)
    assert np.abs(m.apply(t) - true(t)).max() <= 1


def test_two_measurements_too_close_to_resolve_the_drift_give_the_better_ones_constant_offset():
    # 0.1 ms apart with 1 µs errors: the 4 ns difference is noise, not 40 ppm of drift
    m = C.clock_map(sync(0, 10_000_000, -700, rtt_ns=2000), sync(1, 10_100_000, -696, rtt_ns=1500))
    assert m.slope == 0 and m.offset_ns == -696 and m.unresolved_ppm == pytest.approx(1750 / 100_000 * 1e6)
    c = C.align({R: (["a"], [0]), B: (["b"], [1])}, {B: [sync(0, 10_000_000, -700, 2000),
                                                         sync(1, 10_100_000, -696, 1500)]}, R)
    assert "drift not resolved on 1 node(s) (the two measurements too close together to tell it from ±1.8e+04 " \
           "ppm: a constant offset used)" in c.said()


def test_one_measurement_gives_a_constant_offset_and_none_leaves_the_node_unaligned_and_said():
    assert C.clock_map(None, sync(1, 5, -42)) == C.ClockMap(-42, 5)
    assert C.clock_map(None, None) is None
    c = C.align({R: (["a"], [0]), B: (["b"], [1]), ("host", "c"): (["c"], [2])},
                {B: [sync(0, 100, 3000, rtt_ns=800), sync(0, 100, 9000, rtt_ns=5000)]}, R)
    assert c.map_of(B) == C.ClockMap(3000, 100)                      # the least round trip's
    assert c.map_of(("host", "c")) is None and c.map_of(R) is None
    said = c.said()
    assert said.startswith("clocks: 2 nodes aligned to rank 0's at MPI_Init or MPI_Finalize only (no drift "
                           "measured); offsets +3 … +3 µs; residual error ≤ 0.4 µs (half the best round trip); "
                           "1 node(s) not aligned to rank 0's clock (c): no clock measurement"), said
    assert c.doc()["not_aligned"] == ["c"] and c.doc()["error_ns"] == 400


def test_a_measurement_on_rank_0s_own_clock_outside_its_stated_error_is_said():
    c = C.align({R: (["a"], [0, 1, 2])}, {R: [sync(0, 10, 900, rtt_ns=2000, rank=1),
                                              sync(0, 10, 1500, rtt_ns=2000, rank=2)]}, R)
    assert [s.rank for s in c.outside] == [2]
    assert "1 of 2 measurement(s) of ranks on rank 0's node (one clock, offset truly 0) lie outside their stated " \
           "error (rank 2: +1.5 µs, error ≤ 1 µs): the residual error may be understated" in c.said()
