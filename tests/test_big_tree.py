"""Large nodes are read in linear time (issue 11, item 6): every CPU list is parsed
once per distinct text, never once per CPU, and no per-CPU copy of a shared set is
kept. Counted, not timed: benchmarks/big_tree.py times 10,000 CPUs."""
from __future__ import annotations

import pytest

from ceiling import sysfs
from ceiling.checks import run_checks
from ceiling.machine import detect, topology
from ceiling.sysfs import Root

from big_tree import make_tree

N = 512


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    base = tmp_path_factory.mktemp("big")
    return (make_tree(base / "real", N, nodes=4, cores_per_l3=8),
            make_tree(base / "flat", N, nodes=4, all_share=True))


def _counting(monkeypatch):
    calls = {"bits": 0}
    for name in ("parse_cpumask", "parse_cpulist"):
        real = getattr(sysfs, name)

        def counted(text, _real=real):
            out = _real(text)
            calls["bits"] += len(out)
            return out
        monkeypatch.setattr(topology, name, counted)
    return calls


def test_a_realistic_large_node_is_read_right(trees):
    m = detect(Root(trees[0]), measure=False, config=False)
    assert m.threads == N and m.sockets == 2 and m.cores == N // 2
    l3 = next(c for c in m.caches if c.level == 3)
    assert l3.instances == N // 2 // 8 and l3.cpus_per_instance == 16
    assert sorted({c.smt for c in m.cpus}) == [0, 1]


@pytest.mark.parametrize("which", [0, 1])
def test_cpu_lists_cost_what_they_hold_once(trees, which, monkeypatch):
    """The sum of the sizes of every set parsed: about one per CPU per distinct list.
    Before, each of the N CPUs parsed its N-wide lists again (N * N * 6 on the flat tree)."""
    calls = _counting(monkeypatch)
    detect(Root(trees[which]), measure=False, config=False)
    assert calls["bits"] <= 12 * N, calls


def test_checks_on_a_large_node_finish_and_judge_interrupts(trees):
    m = detect(Root(trees[1]), measure=False, config=False)
    found = {f.id: f for f in run_checks(m, str(trees[1]))}
    assert found["irq.balance"].status == "ok" and f"on {N} CPUs" in found["irq.balance"].evidence
