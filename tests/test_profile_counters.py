"""Compute or memory from hardware counters (analysis/profile_counters.py), on counts made
up for each case: this machine's guest has no PMU, so the rule is tested on the figures
probes/perf_counters.derive would give, and the no-counter path on the real thing."""
from __future__ import annotations

import pytest

from ceiling.analysis import profile_counters
from ceiling.analysis.profile import NO_COUNTERS, NO_COUNTERS_TITLE
from ceiling.results.analysis import Bound
from ceiling.results.model import OK, Finding


def counters(ipc=None, stall=None, mpki=None, available=True):
    derived = {k: {"value": v} for k, v in (("ipc", ipc), ("backend_stall_share", stall),
                                            ("llc_load_misses_per_kilo_instruction", mpki)) if v is not None}
    return {"available": available, "why": "" if available else "no PMU", "derived": derived}


def memory(share):
    return [{"what": "memory traffic (a lower bound)", "program": 20000.0 * share, "unit": "MB/s",
             "ceiling": 20000.0, "share": share, "source": "stream.triad = 20 GB/s, measured 2026-11-20"}]


def cpu_bound():
    """The split's "cpu" bound and finding as analysis/profile.py makes them, before the counters' word."""
    return ([Bound("application", "cpu", 0.95, "1 thread on 2 CPUs: on a CPU 95%", {"threads": 1})],
            [Finding(id="profile.cpu", status=OK, title="On a CPU 95% of the time: CPU-bound")])


def apply(c, ceilings, bounds, findings):
    """The counters' verdict given to the bound (settle), and its finding last, as analysis/profile_run.py does."""
    v = profile_counters.classify(c, ceilings)
    bounds, findings, got = profile_counters.settle(bounds, findings, v, bool(c.get("available")), pending=True)
    if got and got.get("bound"):
        findings = findings + [profile_counters.finding(got)]
    return bounds, findings, got


@pytest.mark.parametrize("c, ceilings, bound, by, sure", [
    (counters(ipc=0.6, stall=0.7, mpki=30), memory(0.85), "memory", "bandwidth", "medium"),   # near STREAM
    (counters(ipc=0.6, stall=0.7, mpki=30), memory(0.65), "memory", "bandwidth", "low"),      # within 20 %
    (counters(ipc=0.3, stall=0.8, mpki=25), memory(0.05), "memory", "latency", "medium"),     # stalls, no traffic
    (counters(ipc=0.3, stall=0.8, mpki=25), [], "memory", "latency", "medium"),               # no STREAM needed
    (counters(ipc=2.8, stall=0.1, mpki=0.05), memory(0.01), "compute", None, "medium"),
    (counters(ipc=1.1, stall=0.1, mpki=0.05), [], "compute", None, "low"),
])
def test_each_bound_is_told_from_the_counters(c, ceilings, bound, by, sure):
    v = profile_counters.classify(c, ceilings)
    assert (v["bound"], v["by"], v["confidence"]) == (bound, by, sure)
    bounds, findings = cpu_bound()
    bounds, findings, got = apply(c, ceilings, bounds, findings)
    (b,) = bounds
    assert b.bound == bound and b.share == 0.95 and "cannot be told apart" not in b.evidence
    assert "hardware counters: " + profile_counters.WHAT[by] in b.evidence and b.data["counters"]["by"] == by
    assert [f.id for f in findings] == ["profile.counters.bound"]


def test_counters_between_the_rules_say_so_instead_of_no_counters():
    c = counters(ipc=0.7, stall=0.3, mpki=2.0)
    bounds, findings, v = apply(c, memory(0.2), *cpu_bound())
    assert v["bound"] is None and "between the rules" in v["why"]
    (b,) = bounds
    assert b.bound == "cpu" and NO_COUNTERS not in b.evidence and "counters do not decide" in b.evidence
    assert findings[0].title.endswith(profile_counters.UNDECIDED_TITLE)


def test_a_missing_counter_is_named():
    v = profile_counters.classify(counters(ipc=0.7), [])
    assert v["bound"] is None and "back-end stalls, last-level misses" in v["why"]


def test_without_counters_the_bound_says_it_cannot_tell():
    b2, f2, v = apply(counters(available=False), [], *cpu_bound())
    assert [b.evidence for b in b2] == ["1 thread on 2 CPUs: on a CPU 95%" + NO_COUNTERS] and v["why"] == "no PMU"
    assert [f.title for f in f2] == [f"On a CPU 95% of the time: CPU-bound {NO_COUNTERS_TITLE}"]


def test_the_share_outside_mpi_is_kept_with_a_verdict():
    bounds, findings = cpu_bound()
    (b,), _, _ = profile_counters.settle(bounds, findings, profile_counters.classify(counters(available=False), []),
                                         False, pending=True, mpi="; outside MPI: 95%")
    assert b.evidence.endswith(NO_COUNTERS + "; outside MPI: 95%")
    v = profile_counters.classify(counters(ipc=2.8, stall=0.1, mpki=0.05), [])
    (b,), _, _ = profile_counters.settle(bounds, findings, v, True, pending=True, mpi="; outside MPI: 95%")
    assert "; outside MPI: 95%; hardware counters: computation" in b.evidence


def test_settling_leaves_what_it_was_given_alone():
    bounds, findings = cpu_bound()
    apply(counters(ipc=0.6, stall=0.7, mpki=30), memory(0.85), bounds, findings)
    assert (bounds, findings) == cpu_bound()


def test_a_bound_other_than_cpu_is_left_alone():
    bounds = [Bound("application", "io", 0.6, "io")]
    assert apply(counters(ipc=3, mpki=0.01), [], bounds, []) == (bounds, [], None)
