"""A program on this node's roofline (analysis/app_roofline.py, roofline.of_node and place): the
roof that bounds a point, its share of it and the next roof above; the point from fixture counter
values (probes/perf_flops.py's events through perf_counters.derive), from stated work and from
ceiling_work's records; no point in words. Pure: no program runs here (tests/test_work_api.py runs
them)."""
from __future__ import annotations

import pytest

from ceiling.analysis import app_roofline as A
from ceiling.analysis import roofline as R
from ceiling.probes import perf_counters, perf_flops
from ceiling.probes.interpose_record import parse

# this node's history as store.latest_metrics gives it: (name, value, unit, started, run_id)
ROWS = [("flops.dp.node", 100.0, "Gflop/s", "2026-11-20T10:00:00", "a" * 32),
        ("flops.dp.node.sse2", 50.0, "Gflop/s", "2026-11-20T10:00:00", "a" * 32),
        ("stream.triad", 20.0, "GB/s", "2026-11-21T10:00:00", "b" * 32),
        ("bandwidth.l1", 400.0, "GB/s", "2026-11-21T10:00:00", "b" * 32),
        ("bandwidth.l2", 200.0, "GB/s", "2026-11-21T10:00:00", "b" * 32),
        ("bandwidth.l3", 100.0, "GB/s", "2026-11-21T10:00:00", "b" * 32)]
MACHINE = {"peaks": {"flops.dp.node": {"value": 160.0, "unit": "Gflop/s", "provenance": "2 cores x 4 GHz x 20"}}}


def lookup(prefix):
    return [r for r in ROWS if r[0].startswith(prefix)]


def node():
    return R.of_node(MACHINE, lookup)


def test_the_nodes_roofline_from_its_history_names_each_roofs_run_and_date():
    rl = node()
    assert [r.name for r in rl.compute] == ["flops.dp.node", "peak:flops.dp.node"]
    assert [r.name for r in rl.bandwidth] == ["bandwidth.l1", "bandwidth.l2", "bandwidth.l3", "stream.triad"]
    triad = rl.roof("stream.triad")
    assert triad.value == 20.0 and "stream.triad = 20 GB/s, measured 2026-11-21 (run bbbbbbbbbbbb)" in triad.source
    assert rl.ridge("flops.dp.node", "stream.triad") == pytest.approx(5.0)
    # the missing theoretical memory bandwidth is said, with no bench to run for a peak
    assert any(m.startswith("theoretical memory bandwidth") for m in rl.missing)


def test_a_memory_bound_point_its_share_and_the_next_roof_above():
    p = R.place(node(), 0.5, 4.0)            # DRAM roof at 0.5 flop/B: 10 Gflop/s
    assert p["bound"] == "stream.triad" and p["bound_kind"] == "memory"
    assert p["roof_gflops"] == pytest.approx(10.0) and p["of_roof"] == pytest.approx(0.4)
    assert p["distance"] == pytest.approx(0.6) and p["ridge"] == pytest.approx(5.0)
    assert p["next"]["name"] == "bandwidth.l3" and p["next"]["gflops"] == pytest.approx(50.0)


def test_a_compute_bound_point_has_only_the_theoretical_peak_above():
    p = R.place(node(), 8.0, 90.0)           # past the ridge (5): the measured 100 Gflop/s roof
    assert p["bound_kind"] == "compute" and p["roof_gflops"] == pytest.approx(100.0)
    assert p["of_roof"] == pytest.approx(0.9)
    assert p["next"]["name"] == "peak:flops.dp.node" and not p["next"]["measured"]


def test_between_caches_the_next_roof_is_the_compute_roof_where_cache_roofs_pass_above_it():
    # at 2 flop/B: DRAM 40, L3 200 (above the top compute roof 160: not drawn there), compute 100
    p = R.place(node(), 2.0, 30.0)
    assert p["bound"] == "stream.triad" and p["next"]["name"] == "flops.dp.node"


def test_a_missing_roof_is_named_with_what_measures_it():
    rl = R.of_node({}, lambda prefix: [r for r in ROWS if r[0].startswith(prefix) and r[0] != "stream.triad"])
    p = R.place(rl, 0.5, 4.0)
    assert "bound" not in p and p["missing"] == ["the measured DRAM roof (stream.triad; ceiling bench memory "
                                                 "measures it)"]
    asked = []
    rl = R.of_node({}, lambda prefix: [r for r in ROWS if r[0] != "stream.triad" and r[0].startswith(prefix)],
                   measure=lambda prefix: (asked.append(prefix) or
                                           (("stream.triad (quick)", 10.0, "GB/s", "2026-11-28", ""), "STREAM now")))
    assert asked == ["stream.triad"] and rl.roof("stream.triad").source == "measured now: STREAM now"


# -- the point from hardware counters: fixture values, as a Skylake-X and a Zen 3 would count ------

SKX = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
ZEN3 = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
ZEN5 = "vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"


def test_flop_events_are_opened_only_where_their_codes_are_known():
    assert [e[0] for e in perf_flops.events_for(SKX)[0]] == [
        "fp_arith_inst_retired.scalar_double", "fp_arith_inst_retired.128b_packed_double",
        "fp_arith_inst_retired.256b_packed_double", "fp_arith_inst_retired.512b_packed_double"]
    assert perf_flops.events_for(SKX)[0][2][1:] == (perf_flops.PERF_TYPE_RAW, 0x10C7)
    assert perf_flops.events_for(ZEN3)[0] == (("fp_ret_sse_avx_ops.all", 4, 0xFF03),)
    events, why = perf_flops.events_for(ZEN5)
    assert events == () and "no flop counter known for this CPU (AuthenticAMD family 0x1a model 0x2)" in why


def _events(**counts):
    return {n: {"value": v, "raw": v, "scaled": 1.0, "errno": None, "why": ""} for n, v in counts.items()}


def test_counted_flops_weigh_each_width_and_the_point_uses_the_llc_traffic_as_its_bytes():
    ev = _events(**{"instructions": 10**10, "cycles": 10**10, "LLC-load-misses": 10**8,
                    "fp_arith_inst_retired.scalar_double": 10**8,
                    "fp_arith_inst_retired.256b_packed_double": 10**9,         # 4 flops each
                    "fp_arith_inst_retired.512b_packed_double": 0})
    ev["fp_arith_inst_retired.128b_packed_double"] = {"value": None, "errno": "ENOENT", "why": "no such event"}
    derived, missing = perf_counters.derive(ev, 2.0, (64, "test"))
    assert derived["flops"]["value"] == pytest.approx(1e8 + 4e9)
    assert "not counted: fp_arith_inst_retired.128b_packed_double" in derived["flops"]["note"]
    counters = {"available": True, "derived": derived, "not_derived": missing}
    pts, found, rl = A.conclude(None, None, counters, 2.0, node)
    (p,) = pts
    assert p["source"] == "counters" and p["bytes"] == pytest.approx(6.4e9)          # 1e8 misses x 64 B
    assert p["intensity"] == pytest.approx(4.1e9 / 6.4e9) and p["gflops"] == pytest.approx(2.05)
    assert p["placement"]["bound"] == "stream.triad"
    assert "intensity is an upper bound" in found[0].evidence and found[0].title.startswith(
        "Roofline (hardware counters): memory-bound")


def test_counters_without_flop_events_give_no_point_and_say_what_would():
    # what summary adds where none was asked for: the CPU's words (perf_flops.events_for)
    got = A.counted({"available": True, "derived": {}, "not_derived": {"flops": perf_flops.events_for(ZEN5)[1]}})
    assert got[0] is None and got[1].startswith("the counters give no flops: no flop counter known for this CPU")
    derived, missing = perf_counters.derive(_events(instructions=10, cycles=10, **{"LLC-load-misses": 5}), 1.0,
                                            (64, "test"))
    assert "flops" not in derived and "flops" not in missing          # none asked for: nothing said there
    pts, found, rl = A.conclude(None, None, {"available": True, "derived": derived, "not_derived": missing},
                                1.0, node, bound="cpu")
    assert pts == [] and rl is None
    (f,) = found
    assert f.id == "profile.roofline" and f.status == "skipped"
    assert f.title == "Roofline: no point (on a CPU, compute and memory not told apart)"
    for words in ("--flops N --memory-bytes N", "ceiling_work(flops, bytes)", "FP_ARITH_INST_RETIRED",
                  "hardware counters: no flop event is known for this CPU"):
        assert words in f.evidence


# -- stated work and the program's own ------------------------------------------------------------

WORK_RECORDS = """ceiling-interpose 1
process pid=10 ppid=1 forked=0 host=n1 exe=/a reason=exit signal=0 threads=1 start_ns=1 end_ns=2
module name=work version=1 enabled=1
work calls=3 flops=3000000000 bytes=1000000000 refused=1 threads=1
end pid=10 truncated=0
ceiling-interpose 1
process pid=11 ppid=1 forked=0 host=n1 exe=/a reason=exit signal=0 threads=1 start_ns=1 end_ns=2
module name=work version=1 enabled=1
work calls=1 flops=1000000000 bytes=1000000000 refused=0 threads=1
end pid=11 truncated=0
ceiling-interpose 1
process pid=12 ppid=1 forked=0 host=n1 exe=/a reason=exit signal=0 threads=1 start_ns=1 end_ns=2
module name=work version=1 enabled=1
end pid=12 truncated=0
"""


def test_the_programs_work_is_summed_over_its_processes():
    w = A.recorded(parse(WORK_RECORDS))
    assert w == {"flops": 4e9, "bytes": 2e9, "calls": 4, "refused": 1, "processes": 2}
    assert A.recorded(parse(WORK_RECORDS.split("ceiling-interpose 1\n")[-1].join(["ceiling-interpose 1\n", ""]))) \
        is None


def test_stated_and_recorded_work_are_two_points_each_labelled():
    pts, found, rl = A.conclude({"flops": 2e9, "bytes": 4e9, "work": None}, A.recorded(parse(WORK_RECORDS)),
                                None, 1.0, node)
    assert [p["source"] for p in pts] == ["stated", "ceiling_work"]
    assert [p["intensity"] for p in pts] == [0.5, 2.0]
    stored = R.stored(rl, A.stored_points(pts))
    assert [(x.label, x.intensity, x.value) for x in stored.points] == [
        ("application (--flops --memory-bytes)", 0.5, 2.0), ("application (ceiling_work)", 2.0, 4.0)]
    assert "1 refused" in found[1].evidence
    assert "next roof above: L3 load, measured, 50.0 Gflop/s at this intensity (5x the bound)" in found[0].evidence


def test_flops_without_bytes_and_zero_flops_say_why_there_is_no_point():
    pts, found, _ = A.conclude({"flops": 2e9, "bytes": None, "work": None}, None, None, 1.0, node)
    assert pts == [] and "--flops without --memory-bytes" in found[0].evidence
    pts, found, _ = A.conclude({"flops": 0.0, "bytes": 1e9, "work": None}, None, None, 1.0, node)
    assert "placement" not in pts[0] and "0 flops" in found[0].evidence


def test_counters_with_no_llc_misses_give_no_intensity():
    derived = {"flops": {"value": 1e9, "how": "x", "note": "y"}, "memory_traffic_min_bytes": {"value": 0, "how": "z"}}
    got, why = A.counted({"available": True, "derived": derived, "not_derived": {}})
    assert got is None and "no last-level read misses" in why
