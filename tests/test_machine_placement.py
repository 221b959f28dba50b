"""Placement plans: compact, scatter, node:N, the OpenMP environment, and bad requests."""
import pytest

from ceiling.errors import BadValueError
from ceiling.machine import detect
from ceiling.machine.model import Cpu, Machine, NumaNode
from ceiling.machine.placement import parse_places, plan
from machine_fixtures import fsroot


def two_socket_smt():
    """2 sockets x 4 cores x 2 threads, Linux numbering: CPU c and c+8 are siblings; socket = (c % 8) // 4."""
    cpus = []
    for i in range(16):
        core = i % 8
        cpus.append(Cpu(id=i, core=core, socket=core // 4, node=core // 4, smt=i // 8, l3=core // 4))
    nodes = [NumaNode(n, [c.id for c in cpus if c.node == n], None, [10, 21] if n == 0 else [21, 10]) for n in (0, 1)]
    return Machine(sockets=2, cores=8, threads=16, smt=2, cpus=cpus, nodes=nodes, affinity=list(range(16)))


def test_compact_one_thread_per_core_first():
    m = two_socket_smt()
    assert plan(m, 4, env={}) == [0, 1, 2, 3]                      # socket 0's cores
    assert plan(m, 8, env={}) == [0, 1, 2, 3, 4, 5, 6, 7]          # every core once
    assert plan(m, 10, env={}) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]   # then siblings
    assert plan(m, None, env={}) == list(range(16))                # default: every allowed CPU


def test_scatter_round_robin_over_domains():
    m = two_socket_smt()
    assert plan(m, 4, "scatter", env={}) == [0, 4, 1, 5]
    assert plan(m, 10, "scatter", env={})[8:] == [8, 12]


def test_node_policy():
    m = two_socket_smt()
    assert plan(m, 2, "node:1", env={}) == [4, 5]
    assert plan(m, None, "node:1", env={}) == [4, 5, 6, 7, 12, 13, 14, 15]
    with pytest.raises(BadValueError, match="node:7"):
        plan(m, 1, "node:7", env={})


def test_only_cpus_in_affinity():
    m = two_socket_smt()
    m.affinity = [2, 3, 10, 11]
    assert plan(m, None, env={}) == [2, 3, 10, 11]
    assert plan(m, 2, env={}) == [2, 3]
    with pytest.raises(BadValueError, match="more than the 4 CPUs"):
        plan(m, 5, env={})
    assert plan(m, 6, env={}, oversubscribe=True) == [2, 3, 10, 11, 2, 3]


@pytest.mark.parametrize("n", [0, -1])
def test_bad_thread_counts(n):
    with pytest.raises(BadValueError, match="at least 1"):
        plan(two_socket_smt(), n, env={})


def test_unknown_policy():
    with pytest.raises(BadValueError, match="unknown"):
        plan(two_socket_smt(), 2, "round-robin", env={})


def test_omp_num_threads_is_the_default_count():
    m = two_socket_smt()
    assert plan(m, None, env={"OMP_NUM_THREADS": "3"}) == [0, 1, 2]
    assert plan(m, None, env={"OMP_NUM_THREADS": "2,4"}) == [0, 1]
    assert plan(m, 5, env={"OMP_NUM_THREADS": "3"}) == [0, 1, 2, 3, 4]     # an explicit count wins
    with pytest.raises(BadValueError, match="OMP_NUM_THREADS"):
        plan(m, None, env={"OMP_NUM_THREADS": "many"})


@pytest.mark.parametrize("places,expect", [
    ("{0},{2}", [[0], [2]]),
    ("{0:4}", [[0, 1, 2, 3]]),
    ("{0:2}:3:4", [[0, 1], [4, 5], [8, 9]]),
    ("{0,8},{1,9}", [[0, 8], [1, 9]]),
    ("{0:4:2}", [[0, 2, 4, 6]]),
    ("cores(2)", [[0, 8], [1, 9]]),
    ("sockets", [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]]),
])
def test_parse_places(places, expect):
    assert parse_places(places, two_socket_smt()) == expect


def test_omp_places_and_proc_bind():
    m = two_socket_smt()
    assert plan(m, 2, env={"OMP_PLACES": "{0},{2}"}) == [0, 2]
    assert plan(m, None, env={"OMP_PLACES": "{0},{2}"}) == [0, 2]
    assert plan(m, 2, env={"OMP_PLACES": "cores", "OMP_PROC_BIND": "spread"}) == [0, 4]
    assert plan(m, 2, env={"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}) == [0, 1]
    assert plan(m, 4, env={"OMP_PLACES": "sockets", "OMP_PROC_BIND": "spread"}) == [0, 1, 4, 5]
    assert plan(m, 2, env={"OMP_PLACES": "threads", "OMP_PROC_BIND": "false"}) == [0, 1]   # binding off: our policy
    assert plan(m, 2, env={"OMP_PROC_BIND": "spread"}) == [0, 4]
    # An explicit policy other than the default wins over the environment.
    assert plan(m, 2, "node:1", env={"OMP_PLACES": "{0},{2}"}) == [4, 5]
    with pytest.raises(BadValueError, match="more than the 2 CPUs in OMP_PLACES"):
        plan(m, 3, env={"OMP_PLACES": "{0},{2}"})
    with pytest.raises(BadValueError, match="no place"):
        plan(m, 1, env={"OMP_PLACES": "{40},{41}"})
    with pytest.raises(BadValueError, match="cannot read"):
        plan(m, 1, env={"OMP_PLACES": "{0"})


def test_plan_on_a_recorded_cgroup_tree(tmp_path_factory):
    m = detect(fsroot("16em64t-4s2ca2c-cpusetreorder", tmp_path_factory), measure=False)
    p = plan(m, None, env={})
    assert sorted(p) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]
    assert len(plan(m, 4, "scatter", env={})) == 4
    with pytest.raises(BadValueError):
        plan(m, 12, env={})
