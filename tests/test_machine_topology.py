"""detect() on recorded machines: sockets, cores, SMT, NUMA, caches, ISA, offline CPUs, cgroups."""
from collections import Counter

import pytest

from ceiling.machine import detect
from ceiling.sysfs import format_cpulist, parse_cpulist, parse_cpumask, parse_size
from ceiling.machine.cpuinfo import nominal_ghz, parse as parse_cpuinfo
from machine_fixtures import fsroot

KIB, MIB = 1024, 1024 ** 2


def caches(m):
    """(level, type) -> (size, instances, cpus per instance), data and unified only."""
    return {(c.level, c.type): (c.size_bytes, c.instances, c.cpus_per_instance) for c in m.caches}


# ---- small formats ----------------------------------------------------------

@pytest.mark.parametrize("text,ids", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("", []), (None, []), ("5", [5]),
    ("0-6:2", [0, 2, 4, 6]), ("0-3\n", [0, 1, 2, 3]), ("junk", []), ("3-1", []),
])
def test_parse_cpulist(text, ids):
    assert parse_cpulist(text) == ids


def test_cpulist_round_trip():
    ids = [0, 1, 2, 5, 7, 8, 9, 64]
    assert format_cpulist(ids) == "0-2,5,7-9,64"
    assert parse_cpulist(format_cpulist(ids)) == ids


def test_parse_cpumask_multiword():
    assert parse_cpumask("00000000,00000011") == [0, 4]
    assert parse_cpumask("00000001,00000000") == [32]
    assert parse_cpumask("") == [] and parse_cpumask("zz") == []


@pytest.mark.parametrize("text,value", [("32K", 32 * KIB), ("5118K", 5118 * KIB), ("16 GB", 16 * 1024 ** 3),
                                         ("16384 MB", 16 * 1024 ** 3), ("1M", MIB), ("x", None), ("", None)])
def test_parse_size(text, value):
    assert parse_size(text) == value


def test_nominal_ghz_from_brand_string():
    assert nominal_ghz("Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz") == 2.1
    assert nominal_ghz("ZXD D4600@1800MHz") == 1.8
    assert nominal_ghz("AMD EPYC 7763 64-Core Processor") is None


def test_cpuinfo_arm_and_x86_dialects():
    arm = parse_cpuinfo("processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\n"
                        "CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n")
    assert (arm.arch, arm.vendor, arm.implementer, arm.part) == ("aarch64", "ARM", "0x41", "0xd40")
    assert {"asimd", "sve"} <= arm.flags
    x86 = parse_cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
                        "model name\t: Intel(R) Xeon(R)  Platinum 8480+\nstepping\t: 8\ncpu MHz\t\t: 2000.000\n"
                        "flags\t\t: fpu lm sse2 avx2 avx512f amx_tile\n")
    assert (x86.arch, x86.family, x86.model, x86.stepping) == ("x86_64", 6, 143, 8)
    assert x86.model_name == "Intel(R) Xeon(R) Platinum 8480+" and x86.mhz == {0: 2000.0}
    assert parse_cpuinfo("").arch == "" and parse_cpuinfo(None).flags == set()


# ---- recorded machines --------------------------------------------------------

def test_two_socket_xeon_cascade_lake_snc(tmp_path_factory):
    """2 x Xeon Gold 6230 (20 cores, SMT2), sub-NUMA clustering: 4 NUMA nodes."""
    m = detect(fsroot("memorysidecaches", tmp_path_factory), measure=False)
    assert (m.arch, m.vendor, m.family, m.model, m.stepping) == ("x86_64", "GenuineIntel", 6, 0x55, 7)
    assert (m.sockets, m.cores, m.threads, m.smt) == (2, 40, 80, 2)
    assert m.microarch == "Cascade Lake"
    assert [n.id for n in m.nodes] == [0, 1, 2, 3]
    assert [len(n.cpus) for n in m.nodes] == [20, 20, 20, 20]
    assert m.nodes[0].distances == [10, 21, 11, 21]       # node 2 is the other half of socket 0
    assert all(m.cpu(c).socket == 0 for c in m.nodes[0].cpus + m.nodes[2].cpus)
    assert all(m.cpu(c).socket == 1 for c in m.nodes[1].cpus + m.nodes[3].cpus)
    assert m.nodes[0].mem_bytes > 300 * 1024 ** 3
    cs = caches(m)
    assert cs[(1, "data")] == (32 * KIB, 40, 2)
    assert cs[(2, "unified")] == (1024 * KIB, 40, 2)
    assert cs[(3, "unified")] == (28160 * KIB, 2, 40)
    assert m.last_level_cache_bytes() == 28160 * KIB and m.total_llc_bytes() == 2 * 28160 * KIB
    assert {"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"} <= set(m.isa)
    assert m.vector_bits == 512
    assert m.clocks.base_ghz == 2.1 and "model name" in m.clocks.base_source
    # SMT siblings share a core, an L2, and the socket's L3.
    sib = [c for c in m.cpus if c.core == m.cpu(0).core]
    assert sorted(c.id for c in sib) == [0, 40] and sorted(c.smt for c in sib) == [0, 1]
    assert m.cpu(0).l2 == m.cpu(40).l2 and m.cpu(0).l3 == m.cpu(2).l3 != m.cpu(1).l3
    assert m.virtualized is None


def test_two_socket_skylake_silver(tmp_path_factory):
    m = detect(fsroot("32intel64-2p8co2t+8ve", tmp_path_factory), measure=False)
    assert (m.sockets, m.cores, m.threads, m.smt) == (2, 16, 32, 2)
    assert m.microarch == "Skylake-SP"
    assert m.fma_units_by_bits == {256: 2, 512: 1}        # Silver: one 512-bit FMA unit
    assert [n.distances for n in m.nodes] == [[10, 21], [21, 10]]
    assert caches(m)[(3, "unified")] == (11264 * KIB, 2, 16)


def test_four_socket_amd_two_nodes_per_socket(tmp_path_factory):
    """4 x Opteron 6276: 8 NUMA nodes, Bulldozer modules reported as 2-thread cores."""
    m = detect(fsroot("64amd64-4s2n4ca2co", tmp_path_factory), measure=False)
    assert (m.sockets, m.cores, m.threads, m.smt) == (4, 32, 64, 2)
    assert len(m.nodes) == 8 and all(len(n.cpus) == 8 for n in m.nodes)
    assert m.nodes[0].distances == [10, 16, 16, 22, 16, 22, 16, 22]
    cs = caches(m)
    assert cs[(1, "data")] == (16 * KIB, 64, 1)
    assert cs[(1, "instruction")] == (64 * KIB, 32, 2)   # shared by the module
    assert cs[(3, "unified")] == (6 * MIB, 8, 8)
    assert m.microarch == "" and "not in the CPU families data file" in m.unknowns["microarch"]


def test_sparse_numa_node_ids(tmp_path_factory):
    m = detect(fsroot("48amd64-4pa2n6c-sparse", tmp_path_factory), measure=False)
    assert [n.id for n in m.nodes] == [0, 1, 2, 33, 34, 45, 72, 73]
    assert len({c.node for c in m.cpus}) == 8 and m.cpu(47).node == 73
    assert all(len(n.distances) == 8 and n.distances[i] == 10 for i, n in enumerate(m.nodes))
    assert m.clocks.max_ghz == 1.7 and m.clocks.max_source == "cpufreq cpuinfo_max_freq"
    assert m.clocks.current_source.startswith("cpufreq")


def test_arm_128_cores_clusters(tmp_path_factory):
    """2 x Kunpeng 920 (HiSilicon TaiShan v110): 128 cores, 4 nodes, clusters of 4."""
    m = detect(fsroot("128arm-2pa2n8cluster4co", tmp_path_factory), measure=False)
    assert (m.arch, m.vendor, m.implementer, m.part) == ("aarch64", "HiSilicon", "0x48", "0xd01")
    assert (m.sockets, m.cores, m.threads, m.smt) == (2, 128, 128, 1)
    assert [n.distances for n in m.nodes][0] == [10, 16, 32, 33]
    assert Counter(c.cluster for c in m.cpus).most_common(1)[0][1] == 4
    assert len({c.cluster for c in m.cpus}) == 32
    cs = caches(m)
    assert cs[(1, "data")] == (64 * KIB, 128, 1) and cs[(3, "unified")] == (32 * MIB, 4, 32)
    assert "neon" in m.isa and "asimd" in m.isa and "sve" not in m.isa
    assert m.vector_bits == 128
    assert m.microarch == "TaiShan v110 (Kunpeng 920)" and m.memory_channels == 8
    assert m.fma_units is None                                # not documented: unknown, not guessed


def test_smt_tree_four_sockets(tmp_path_factory):
    m = detect(fsroot("16em64t-4s2c2t", tmp_path_factory), measure=False)
    assert (m.sockets, m.cores, m.threads, m.smt) == (4, 8, 16, 2)
    assert all(sorted(Counter(c.core for c in m.cpus).values()) == [2] * 8 for _ in [0])
    assert len(m.nodes) == 1 and m.nodes[0].cpus == list(range(16))


def test_offline_cpus(tmp_path_factory):
    m = detect(fsroot("16em64t-4s2c2t-offlines", tmp_path_factory), measure=False)
    offline = sorted(c.id for c in m.cpus if not c.online)
    assert len(offline) == 4 and m.threads == 12
    assert set(m.affinity).isdisjoint(offline)
    assert all(m.cpu(c).core == -1 for c in offline if m.cpu(c).socket == -1)


def test_offline_cpus_and_missing_node_dir(tmp_path_factory):
    m = detect(fsroot("offline-cpu0-node0", tmp_path_factory), measure=False)
    assert m.threads == 17 and sorted(c.id for c in m.cpus if c.online) == list(range(4, 21))
    assert {n.id for n in m.nodes} == {0, 1}
    n0 = next(n for n in m.nodes if n.id == 0)
    assert n0.mem_bytes is None and "nodes.0" in m.unknowns
    assert m.microarch == "Haswell-EP" and m.affinity == list(range(4, 21))


def test_cgroup_v1_cpuset_limits_affinity(tmp_path_factory):
    m = detect(fsroot("16amd64-8n2c-cpusets", tmp_path_factory), measure=False)
    assert m.cgroup["cpuset"] == "0-6,12-15" and m.cgroup["version"] == "v1"
    # CPU 4 is offline, so it is not in the affinity even though the cpuset names it.
    assert m.affinity == [0, 1, 2, 3, 5, 6, 12, 13, 14, 15]
    assert "cpuset" in m.sources["affinity"]


def test_cgroup_v2_cpuset_from_slurm_step(tmp_path_factory):
    m = detect(fsroot("32amd64-4s2n4c-cgroup2", tmp_path_factory), measure=False)
    assert m.cgroup["cpuset_cpus"] == [0, 1, 2, 3, 4, 5] and m.cgroup["version"] == "v2"
    assert m.cgroup["sources"]["cpuset"].endswith("step_0/cpuset.cpus.effective")
    assert m.affinity == [0, 1, 2, 3, 4, 5] and m.threads == 32


def test_fake_many_numa_nodes(tmp_path_factory):
    m = detect(fsroot("fakecpuid1f-64intel64-2p4d2n2c2t", tmp_path_factory), measure=False)
    assert len(m.nodes) == 16 and all(len(n.distances) == 16 for n in m.nodes)
    assert (m.cores, m.threads, m.smt) == (32, 64, 2)
    assert m.virtualized == "KVM/QEMU"           # "hypervisor" flag + QEMU in DMI
    assert m.vector_bits == 128


def test_missing_everything_does_not_crash(tmp_path):
    (tmp_path / "proc").mkdir()
    m = detect(tmp_path, measure=True)
    assert m.cpus == [] and m.threads == 0
    assert "topology" in m.unknowns and "cpuinfo" in m.unknowns
    assert not m.peaks["flops.dp.node"].known and m.peaks["flops.dp.node"].provenance.startswith("unknown")
    assert "recorded tree" in m.clocks.measured_method


def test_describe_is_short(tmp_path_factory):
    m = detect(fsroot("memorysidecaches", tmp_path_factory), measure=False)
    lines = m.describe()
    assert 4 <= len(lines) <= 10 and "Cascade Lake" in lines[0] and "2 sockets, 40 cores, 80 threads" in lines[1]


def test_cpumask_junk_is_empty_and_linear():
    # "-1" once looped forever (a negative int never shifts to 0) until memory ran out
    assert parse_cpumask("-1") == [] and parse_cpumask("0x3") == [] and parse_cpumask("g") == []
    assert parse_cpumask("00000000,0000000f") == [0, 1, 2, 3]
    assert parse_cpumask("f" * 20000) == []                 # more bits than any kernel has CPUs
    assert len(parse_cpumask("f" * 2048)) == 8192
