"""numa.domains and numa.memory_balance on recorded and fake trees.

Fake trees follow Documentation/ABI/stable/sysfs-devices-node: one
/sys/devices/system/node/nodeN directory per domain with cpulist and meminfo,
whose lines read "Node N MemTotal:  123456 kB" (drivers/base/node.c).
"""
from pathlib import Path


from ceiling.checks import base, numa  # noqa: F401  (registers the checks)
from ceiling.machine.model import Cpu, Machine, NumaNode
from checkutil import run, tree, write

NODE = "sys/devices/system/node"
GIB_KB = 1024 * 1024


def epyc(sockets=2, nodes_per_socket=1, cores=8, virtualized=None) -> Machine:
    """AMD EPYC 7003 (Milan): per-socket memory controllers, NPS1 by default."""
    nn = sockets * nodes_per_socket
    per = cores // nn
    cpus = [Cpu(id=i, core=i, socket=i // (cores // sockets), node=i // per, smt=0) for i in range(cores)]
    nodes = [NumaNode(n, [c.id for c in cpus if c.node == n], 64 * 2 ** 30, []) for n in range(nn)]
    return Machine(arch="x86_64", vendor="AuthenticAMD", family=0x19, model=0x01, sockets=sockets, cores=cores,
                   threads=cores, cpus=cpus, nodes=nodes, affinity=list(range(cores)), virtualized=virtualized,
                   cpu_facts={"name": "Zen 3 (Milan)", "launch_year": 2021})


def one_domain(m: Machine) -> Machine:
    m.nodes = [NumaNode(0, [c.id for c in m.cpus], 128 * 2 ** 30, [10])]
    return m


def meminfo(root: Path, node: int, total_kb: int, free_kb: int, cpus: str = "") -> None:
    write(root, f"{NODE}/node{node}/cpulist", cpus + "\n")
    write(root, f"{NODE}/node{node}/meminfo",
          f"Node {node} MemTotal:       {total_kb} kB\n"
          f"Node {node} MemFree:        {free_kb} kB\n"
          f"Node {node} MemUsed:        {total_kb - free_kb} kB\n"
          f"Node {node} HugePages_Total:     0\n")


# ---- numa.domains ------------------------------------------------------------------

def test_domains_two_sockets_one_domain_warns(tmp_path):
    write(tmp_path, f"{NODE}/node0/cpulist", "0-7\n")
    f = run("numa.domains", one_domain(epyc()), tmp_path)
    assert f.status == "warn" and f.title.startswith("One NUMA domain on 2 sockets: NUMA is off")
    assert "2 sockets, 1 NUMA domain with CPUs: node0 CPUs 0-7" in f.evidence
    assert "BIOS" in f.fix and f.needs_root
    assert f.data["cause"] == "node_interleaving" and "numa=off" not in f.fix


def test_domains_numa_off_on_the_command_line(tmp_path):
    write(tmp_path, "proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro numa=off quiet\n")
    f = run("numa.domains", one_domain(epyc()), tmp_path)
    assert f.status == "warn" and "numa=off" in f.evidence and "numa=off" in f.fix
    assert f.data["cause"] == "numa_off_kernel" and "BIOS" not in f.fix
    assert "no sys/devices/system/node" in f.evidence


def test_domains_vm_virtual_sockets_ok(tmp_path):
    f = run("numa.domains", one_domain(epyc(virtualized="KVM")), tmp_path)
    assert f.status == "ok" and "2 virtual sockets (KVM guest)" in f.title


def test_domains_nps4_is_sub_numa_clustering(tmp_path):
    f = run("numa.domains", epyc(nodes_per_socket=4), tmp_path)
    assert f.status == "ok" and "8 NUMA domains on 2 sockets" in f.title and "4 per socket" in f.title


def test_domains_recorded(tmp_path_factory):
    m, root = tree("40intel64-4n10c+pci-conflicts", tmp_path_factory)
    assert run("numa.domains", m, root).title == "4 NUMA domains on 4 sockets"
    m, root = tree("64amd64-4s2n4ca2co", tmp_path_factory)
    f = run("numa.domains", m, root)
    assert f.status == "ok" and "8 NUMA domains on 4 sockets" in f.title and "2 per socket" in f.title


def test_domains_front_side_bus_xeon_is_uniform(tmp_path_factory):
    # A 2008 Xeon 5400 (Core 2, family 6 model 15): memory behind the chipset, one domain is right.
    m, root = tree("8em64t-2s2ca2c", tmp_path_factory)
    f = run("numa.domains", m, root)
    assert f.status == "ok" and "front-side-bus" in f.title


def test_domains_recorded_vm(tmp_path_factory):
    m, root = tree("2pa-pcidomain32bits", tmp_path_factory)
    f = run("numa.domains", m, root)
    assert f.status == "ok" and "virtual sockets" in f.title


def test_domains_memory_only_nodes_named(tmp_path_factory):
    m, root = tree("fakeheteromemtiers", tmp_path_factory)
    f = run("numa.domains", m, root)
    assert f.status == "ok" and "plus 4 memory-only" in f.title
    assert "memory-only domains node4 (512 MiB), node6 (384 MiB), node8 (384 MiB), node9 (384 MiB)" in f.evidence


# ---- numa.memory_balance ---------------------------------------------------------------

def test_balance_recorded_short_node_warns(tmp_path_factory):
    m, root = tree("64amd64-4s2n4ca2co", tmp_path_factory)
    f = run("numa.memory_balance", m, root)
    assert f.status == "warn"
    assert f.title == "Memory unbalanced across NUMA domains: node5 has 8.0 GiB (53% of the mean)"
    assert "node0 16.0 GiB, 15.3 GiB free" in f.evidence and "mean of domains with CPUs 15.0 GiB" in f.evidence
    assert "dmidecode" in f.fix
    assert f.data["cause"] == "domain_short" and "drop_caches" not in f.fix


def test_balance_recorded_even_is_ok(tmp_path_factory):
    m, root = tree("40intel64-4n10c+pci-conflicts", tmp_path_factory)
    f = run("numa.memory_balance", m, root)
    assert f.status == "ok" and "node3 128.0 GiB, 92.4 GiB free" in f.evidence


def test_balance_recorded_memoryless_cpu_nodes(tmp_path_factory):
    m, root = tree("fakememinitiators-1np2c+1npp+gi", tmp_path_factory)
    f = run("numa.memory_balance", m, root)
    assert f.status == "warn" and "node0 has no memory" in f.title and "node3 has no memory" in f.title
    assert "memory-only (not compared)" in f.evidence


def test_balance_recorded_missing_meminfo_is_skipped(tmp_path_factory):
    m, root = tree("offline-cpu0-node0", tmp_path_factory)
    f = run("numa.memory_balance", m, root)
    assert f.status == "skipped" and "unreadable for node0" in f.evidence


def test_balance_one_node_full_while_other_free(tmp_path):
    meminfo(tmp_path, 0, 64 * GIB_KB, 40 * GIB_KB, "0-3")
    meminfo(tmp_path, 1, 64 * GIB_KB, 2 * GIB_KB, "4-7")
    f = run("numa.memory_balance", epyc(), tmp_path)
    assert f.status == "warn" and "node1 has 3% free while node0 has 62% free" in f.title
    assert "drop_caches" in f.fix
    assert f.data["cause"] == "domain_full" and "dmidecode" not in f.fix


def test_balance_even_and_free_is_ok(tmp_path):
    meminfo(tmp_path, 0, 64 * GIB_KB, 60 * GIB_KB, "0-3")
    meminfo(tmp_path, 1, 63 * GIB_KB, 60 * GIB_KB, "4-7")
    f = run("numa.memory_balance", epyc(), tmp_path)
    assert f.status == "ok" and "node1 63.0 GiB, 60.0 GiB free" in f.evidence


def test_balance_garbled_meminfo_is_skipped(tmp_path):
    write(tmp_path, f"{NODE}/node0/meminfo", "Node 0 MemTotal: lots\n")
    meminfo(tmp_path, 1, 64 * GIB_KB, 60 * GIB_KB, "4-7")
    f = run("numa.memory_balance", epyc(), tmp_path)
    assert f.status == "skipped" and "node0" in f.evidence


def test_balance_one_domain_is_skipped(tmp_path):
    assert run("numa.memory_balance", one_domain(epyc()), tmp_path).status == "skipped"


def test_node_meminfo_ignores_other_nodes_lines(tmp_path):
    write(tmp_path, f"{NODE}/node1/meminfo", "Node 0 MemTotal: 5 kB\nNode 1 MemTotal: 7 kB\nNode 1 MemFree:\n")
    p = base.Probe.of(epyc(), str(tmp_path))
    assert numa.node_meminfo(p, 1) == {"MemTotal": 7 * 1024}


# ---- no content crashes a check ---------------------------------------------------------

import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

FUZZED = [f"{NODE}/node1/meminfo", f"{NODE}/node0/meminfo", "proc/cmdline", "proc/cpuinfo"]
CONTENT = st.one_of(st.binary(max_size=160), st.text(max_size=160).map(str.encode),
                    st.sampled_from([b"", b"Node 1 MemTotal: 99999999999999999999999 kB\n",
                                     b"Node 1 MemTotal: 0 kB\nNode 1 MemFree: 5 kB\n", b"Node 1 MemFree: 1 kB\n",
                                     b"numa=off numa=off\n", b"\x00\x00"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rel=st.sampled_from(FUZZED), content=CONTENT)
def test_no_content_crashes_a_numa_check(tmp_path, rel, content):
    root = tmp_path / "t"
    if not root.exists():
        meminfo(root, 0, 64 * GIB_KB, 60 * GIB_KB, "0-3")
        meminfo(root, 1, 64 * GIB_KB, 60 * GIB_KB, "4-7")
        write(root, "proc/cmdline", "ro quiet\n")
        write(root, "proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\n")
    f = root / rel
    old = f.read_bytes()
    f.write_bytes(content)
    try:
        for m in (epyc(), one_domain(epyc())):
            for cid in ("numa.balancing", "numa.domains", "numa.memory_balance"):
                finding = run(cid, m, root)
                assert finding.status in ("ok", "warn", "fail", "skipped") and finding.title
    finally:
        f.write_bytes(old)
