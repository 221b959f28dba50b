"""placement.stability: the verdict on given probe medians, the choice of the CPU
pair, and one short real run through the registry. No timing is asserted."""
import os

import pytest

from ceiling.checks import base, placement
from ceiling.machine.model import Cpu, Machine
from ceiling.results.model import OK, SKIPPED, WARN

CPUS = sorted(os.sched_getaffinity(0))


def smt_machine():
    """2 sockets x 2 cores x 2 threads, Linux numbering: siblings are n and n+4."""
    cpus = []
    for cid in range(8):
        core, smt = cid % 4, cid // 4
        cpus.append(Cpu(id=cid, core=core, socket=core // 2, node=core // 2, smt=smt, l2=core, l3=core // 2))
    return Machine(hostname="smt", sockets=2, cores=4, threads=8, smt=2, cpus=cpus, affinity=list(range(8)))


# -- the verdict ---------------------------------------------------------------------

def test_stable_pair_is_ok():
    f = placement.judge((0, 1), [31.2, 30.4, 33.9, 30.0, 32.5], "l3", span_s=0.46,
                        spreads=[(29, 40), (28, 35), (30, 90), (29, 33), (30, 41)])
    assert f.status == OK
    assert f.title == "Placement is stable: 30-34 ns between CPUs 0 and 1 over 5 probes"
    assert "CPUs 0 and 1 (l3): one-way latency, median of each of 5 probes: 31, 30, 34, 30, 32 ns" in f.evidence
    assert "max/min 1.13 (warn above 1.5), over 0.46 s" in f.evidence
    assert "range within probes: 29-40, 28-35, 30-90" in f.evidence


def test_pair_that_jumps_warns():
    # what this project's VM showed: the same pair at ~30 ns, then ~140 ns
    f = placement.judge((2, 5), [30.0, 141.0, 32.0, 137.0, 29.0], "cross_socket", virtualized="KVM")
    assert f.status == WARN
    assert f.title == "Placement is unstable: the same CPU pair measured between 29 and 141 ns (4.9x)"
    assert "CPUs 2 and 5 (cross socket)" in f.evidence
    assert "30, 141, 32, 137, 29 ns" in f.evidence
    assert "max/min 4.86" in f.evidence and "KVM guest" in f.evidence
    assert "pinned vCPUs" in f.fix and f.why


@pytest.mark.parametrize("vals,status", [([100, 150], OK), ([100, 151], WARN), ([100, 100.0], OK)])
def test_threshold_is_one_and_a_half(vals, status):
    assert placement.judge((0, 1), vals).status == status


@pytest.mark.parametrize("vals", [[], [42.0], [0.0, 40.0], [None, 40.0]])
def test_too_few_probes_is_skipped(vals):
    f = placement.judge((0, 1), vals)
    assert f.status == SKIPPED and "too few valid probes" in f.title


# -- the pair -------------------------------------------------------------------------

def test_pair_prefers_another_physical_core():
    m = smt_machine()
    assert placement.pick_pair(m, [0, 4, 1, 5]) == (0, 1)     # 4 is 0's SMT sibling
    assert placement.pick_pair(m, [0, 4]) == (0, 4)           # only siblings: take them
    assert placement.pick_pair(m, [3, 7, 2]) == (3, 2)
    assert placement.pick_pair(m, [6]) is None
    assert placement.pick_pair(Machine(), [8, 9]) == (8, 9)   # no topology: the first two


def test_one_cpu_is_skipped():
    m = Machine(hostname="one", cpus=[Cpu(id=0, core=0, socket=0, node=0, smt=0)], affinity=[0])
    f = base.run_one(base.REGISTRY["placement.stability"], base.Probe.of(m, "/"), strict=True)
    assert f.status == SKIPPED and "needs two CPUs" in f.title


def test_skipped_on_a_recorded_tree(tmp_path):
    f = base.run_one(base.REGISTRY["placement.stability"], base.Probe.of(smt_machine(), str(tmp_path)),
                     strict=True)
    assert f.status == SKIPPED and "recorded tree" in f.title


# -- a real run -----------------------------------------------------------------------

@pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs in this process's affinity")
def test_real_run_returns_a_finding():
    m = Machine(hostname="live", cpus=[Cpu(id=c, core=c, socket=0, node=0, smt=0) for c in CPUS],
                affinity=CPUS)
    p = base.Probe.of(m, "/", base.Options(stability_probes=3))
    f = base.run_one(base.REGISTRY["placement.stability"], p, strict=True)
    assert f.id == "placement.stability"
    assert f.status in (OK, WARN), f
    assert f"CPUs {CPUS[0]} and {CPUS[1]} (socket): one-way latency, median of each of 3 probes: " in f.evidence
    medians = f.evidence.split("probes: ", 1)[1].split(" ns", 1)[0].split(", ")
    assert len(medians) == 3 and all(float(x) > 0 for x in medians)
    ratio = float(f.evidence.split("max/min ", 1)[1].split()[0])
    assert ratio >= 1.0 and (f.status == WARN) == (ratio > 1.5) or abs(ratio - 1.5) < 0.01
