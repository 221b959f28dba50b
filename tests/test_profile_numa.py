"""Remote memory (issue 29): numa_maps read (probes/numa_maps.py), the sampler's CPU time per NUMA node and
its reads where the node has more than one (probes/proc_sampler.py), and the findings
(analysis/profile_numa.py). This machine has one NUMA node: a recorded numa_maps rewritten as a
two-socket machine prints it (tests/fixtures/numa_maps/README.md), and a CPU -> node map given to the
sampler, stand in for the second."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.analysis.profile_numa import remote_memory
from ceiling.probes import numa_maps
from ceiling.probes.numa_maps import Placement
from ceiling.probes.proc_sampler import ProcessSample, ProcSampler, Sampled, ThreadSample

FIX = Path(__file__).parent / "fixtures" / "numa_maps"
MIB = 1 << 20


def test_private_pages_per_node_with_files_left_out_and_huge_pages_at_their_size():
    p = numa_maps.parse((FIX / "two_sockets.numa_maps").read_text())
    assert p.by_node == {0: 758 * 4096 + 4 * 2 * MIB, 1: (51392 + 400) * 4096}
    assert p.total == 11_493_376 + 212_140_032
    assert p.files_bytes > 8 * 2 * MIB          # the libraries' pages and the file-backed huge pages


def test_the_recorded_one_node_file_is_all_on_node_0():
    p = numa_maps.parse((FIX / "one_node.numa_maps").read_text())
    assert set(p.by_node) == {0} and p.by_node[0] >= 200 * MIB


def test_garbled_items_are_skipped_and_the_rest_kept():
    p = numa_maps.parse("7f00 default anon=x N0=12 Nx=3 N1=bad kernelpagesize_kB=?? junk\n\n7f01\n"
                        "7f02 default N2=1 kernelpagesize_kB=2048\n")
    assert p.by_node == {0: 12 * 4096, 2: 2 * MIB}


def test_cpu_nodes_from_a_sys_tree(tmp_path):
    for n, cpus in ((0, "0-3,8-11"), (1, "4-7,12-15")):
        d = tmp_path / "devices" / "system" / "node" / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
    (tmp_path / "devices" / "system" / "node" / "possible").write_text("0-1\n")
    got = numa_maps.cpu_nodes(str(tmp_path))
    assert got == {**{c: 0 for c in (0, 1, 2, 3, 8, 9, 10, 11)}, **{c: 1 for c in (4, 5, 6, 7, 12, 13, 14, 15)}}
    assert numa_maps.cpu_nodes(str(tmp_path / "none")) == {}


HOG = """
import sys, time
b = bytearray(96 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    pass
"""


def _sampled(cpu_node, seconds=1.6):
    p = subprocess.Popen([sys.executable, "-c", HOG, str(seconds)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        s = ProcSampler(p.pid, 0.05, cpu_node=cpu_node).start()
        p.wait(timeout=60)
        return p.pid, s.stop()
    finally:
        p.kill()
        p.wait()


def test_the_sampler_reads_a_live_process_where_the_cpus_span_two_nodes():
    # this machine's CPUs given to two nodes: the real numa_maps (all on node 0 here), timed; each thread's
    # CPU time by the node of the CPU it was on at each sample
    ncpu = os.cpu_count() or 1
    pid, out = _sampled({c: c % 2 for c in range(max(ncpu, 2))})
    assert out.numa_nodes == 2
    where = out.processes[pid].numa
    assert where is not None and where.reads >= 1 and where.read_s > 0
    assert where.by_node.get(0, 0) >= 96 * MIB
    threads = [t for (p, _), t in out.threads.items() if p == pid]
    by_node = sum(sum(t.cpu_by_node.values()) for t in threads)
    on_cpu = sum((t.on_cpu_s if t.on_cpu_s is not None else t.user_s + t.system_s) for t in threads)
    assert by_node == pytest.approx(on_cpu, rel=1e-6) and by_node > 0.5


def test_one_node_reads_no_numa_maps():
    pid, out = _sampled({0: 0, 1: 0}, seconds=1.2)
    assert out.numa_nodes == 1 and out.processes[pid].numa is None
    assert all(not t.cpu_by_node for t in out.threads.values())


def _run(cpu_s_by_node, mem_by_node, nodes=2, comm="solver"):
    s = Sampled(numa_nodes=nodes)
    s.processes[100] = ProcessSample(100, 1, comm, numa=Placement(dict(mem_by_node), at_s=5.0, reads=2,
                                                                   read_s=0.004))
    for i, (node, cpu) in enumerate(cpu_s_by_node.items()):
        s.threads[(100, 100 + i)] = ThreadSample(100, 100 + i, comm, cpu_by_node={node: cpu})
    return s


def _lookup(rows):
    return lambda prefix: [r for r in rows if r[0].startswith(prefix)]


def test_memory_on_the_other_socket_is_remote_with_the_nodes_measured_factor():
    s = _run({0: 6.0}, {1: 3 << 30, 0: 100 * MIB})
    (f,) = remote_memory(s, _lookup([("latency.numa_factor", 1.9, "x", "2026-11-20T10:00:00Z", "abcdef123456789")]))
    assert f.id == "profile.numa.remote_memory" and f.data["case"] == "elsewhere"
    assert f.data["local_share"] == pytest.approx(100 / (3 * 1024 + 100), abs=1e-4)
    assert "97% of solver's memory" in f.title and "ran on node 0" in f.evidence
    assert "1.9x" in f.why and "2026-11-20" in f.why and "read 2 time(s), 4 ms" in f.evidence


def test_memory_on_one_node_while_threads_ran_on_both_is_first_touch():
    s = _run({0: 4.0, 1: 4.0}, {0: 2 << 30, 1: 10 * MIB})
    (f,) = remote_memory(s)
    assert f.data["case"] == "one_node" and f.data["node"] == 0 and f.data["share_elsewhere"] == 0.5
    assert "is not measured on this node" in f.why and "first" in f.why


@pytest.mark.parametrize("cpu, mem, nodes", [
    ({0: 4.0, 1: 4.0}, {0: 1 << 30, 1: 1 << 30}, 2),     # spread like its threads
    ({0: 6.0}, {0: 2 << 30, 1: 50 * MIB}, 2),             # local
    ({0: 6.0}, {1: 32 * MIB}, 2),                         # too little memory to say
    ({0: 0.2}, {1: 2 << 30}, 2),                          # too little CPU time to say
    ({0: 6.0}, {1: 2 << 30}, 1),                          # one NUMA node: not read at all
])
def test_nothing_is_said_where_nothing_is_remote_or_too_little_is_known(cpu, mem, nodes):
    assert remote_memory(_run(cpu, mem, nodes)) == []


def test_a_process_never_read_says_nothing():
    s = _run({0: 6.0}, {})
    s.processes[100].numa = None
    assert remote_memory(s) == []
