"""mem.pressure, mem.hugepages and mem.population on fake and recorded trees.

/proc/meminfo, /proc/buddyinfo and /sys/kernel/mm/hugepages follow the
kernel's formats (Documentation/filesystems/proc.rst "meminfo" and
"buddyinfo"; Documentation/admin-guide/mm/hugetlbpage.rst; /sys/kernel/mm/
transparent_hugepage/hpage_pmd_size in admin-guide/mm/transhuge.rst). DIMM
records are dmidecode outputs in tests/fixtures/machines/dmidecode.
"""
import copy
from pathlib import Path

import pytest


from ceiling import machine as machine_mod
from ceiling.checks import base, mem
from ceiling.machine import dmi
from ceiling.machine.model import Cpu, Machine
from ceiling.sysfs import Root
from machine_fixtures import fsroot, local
from checkutil import write

KB, GIB = 1024, 1024 ** 3


def machine(**kw) -> Machine:
    cpus = [Cpu(id=i, core=i % 4, socket=(i % 4) // 2, node=(i % 4) // 2, smt=i // 4) for i in range(8)]
    return Machine(arch="x86_64", sockets=2, cores=4, threads=8, cpus=cpus, **kw)


def run(check_id, root, m=None, live=None):
    p = base.Probe.of(m or machine(), str(root))
    if live is not None:
        p.live = live
    return base.run_one(base.REGISTRY[check_id], p, strict=True)


def meminfo(root: Path, total_kb, free_kb, avail_kb=None, swap_total_kb=0, swap_free_kb=0, huge=(0, 0, 0), hps_kb=2048):
    lines = [f"MemTotal:       {total_kb} kB", f"MemFree:        {free_kb} kB"]
    if avail_kb is not None:
        lines.append(f"MemAvailable:   {avail_kb} kB")
    lines += ["Buffers:          683968 kB", "Cached:         16945057 kB", f"SwapTotal:      {swap_total_kb} kB",
              f"SwapFree:       {swap_free_kb} kB", "AnonHugePages:     22528 kB", f"HugePages_Total:   {huge[0]}",
              f"HugePages_Free:    {huge[1]}", f"HugePages_Rsvd:    {huge[2]}", "HugePages_Surp:        0",
              f"Hugepagesize:       {hps_kb} kB", "DirectMap1G:    534773760 kB"]
    write(root, "proc/meminfo", "\n".join(lines) + "\n")


# ---- pressure ------------------------------------------------------------------------

def test_pressure_ok_on_a_recorded_node(tmp_path_factory):
    """32 GiB node with 4 GiB swap, 5.8 MiB of it in use: under both thresholds."""
    root = fsroot("32em64t-2n8c+dax+nvme+mic+dimms", tmp_path_factory)
    f = run("mem.pressure", root)
    assert f.status == "ok" and "MemAvailable unknown" in f.evidence      # a kernel before 3.14
    assert "swap 5.8 MiB used of 4.0 GiB" in f.evidence and "5.8 MiB of swap in use" in f.title


def test_pressure_swap_in_use(tmp_path):
    meminfo(tmp_path, 527_000_000, 300_000_000, 400_000_000, swap_total_kb=16_000_000, swap_free_kb=13_900_000)
    f = run("mem.pressure", tmp_path)
    assert f.status == "warn" and f.title == "Memory pressure: 2.0 GiB of swap in use"
    assert "swapoff -a" in f.fix and f.needs_root


def test_pressure_small_vm_swap_above_one_percent(tmp_path):
    """4 GiB VM: 60 MiB of swap is over 1% of memory though under 256 MiB."""
    meminfo(tmp_path, 4_000_000, 2_000_000, 3_000_000, swap_total_kb=1_000_000, swap_free_kb=1_000_000 - 61_440)
    f = run("mem.pressure", tmp_path)
    assert f.status == "warn" and "60 MiB of swap in use" in f.title


def test_pressure_little_available(tmp_path):
    meminfo(tmp_path, 100 * 1024 * 1024, 1 * 1024 * 1024, 5 * 1024 * 1024)
    f = run("mem.pressure", tmp_path)
    assert f.status == "warn" and "only 5% of memory available (5 GiB of 100 GiB)" in f.title
    assert "no swap configured" in f.evidence and not f.needs_root


def test_pressure_healthy(tmp_path):
    meminfo(tmp_path, 100 * 1024 * 1024, 80 * 1024 * 1024, 90 * 1024 * 1024, swap_total_kb=8_000_000,
            swap_free_kb=8_000_000)
    f = run("mem.pressure", tmp_path)
    assert f.status == "ok" and f.title == "Memory: 90 GiB of 100 GiB available, no swap in use"


def test_pressure_without_meminfo(tmp_path):
    assert run("mem.pressure", tmp_path).status == "skipped"


# ---- huge pages ---------------------------------------------------------------------

def buddy(root: Path, rows) -> None:
    """rows: (node, zone, [free blocks of order 0..10])."""
    write(root, "proc/buddyinfo", "".join(
        f"Node {n}, zone {z:>8} " + " ".join(f"{c:6d}" for c in counts) + " \n" for n, z, counts in rows))


HEALTHY_BUDDY = [(0, "DMA", [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 3]),
                 (0, "DMA32", [1, 2, 4, 2, 5, 4, 3, 3, 4, 2, 752]),
                 (0, "Normal", [143, 891, 764, 2051, 1203, 1665, 671, 159, 119, 224, 2000]),
                 (1, "Normal", [200, 300, 100, 50, 20, 10, 5, 2, 1, 40, 1500])]
# Free memory in small pieces: nothing at order 9 or above on node 1, little on node 0.
FRAGMENTED_BUDDY = [(0, "Normal", [900000, 400000, 200000, 100000, 40000, 9000, 2000, 500, 100, 10, 2]),
                    (1, "Normal", [800000, 300000, 150000, 80000, 30000, 5000, 1000, 200, 50, 0, 0])]


def free_kb(rows, page=4096):
    return sum(c << i for _, _, counts in rows for i, c in enumerate(counts)) * page // KB


def test_hugepages_obtainable(tmp_path):
    buddy(tmp_path, HEALTHY_BUDDY)
    meminfo(tmp_path, 200 * 1024 * 1024, free_kb(HEALTHY_BUDDY))
    write(tmp_path, "sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "2097152\n")
    f = run("mem.hugepages", tmp_path)
    big = sum(c << i for _, _, counts in HEALTHY_BUDDY for i, c in enumerate(counts) if i >= 9)
    frac = big * 4096 / (free_kb(HEALTHY_BUDDY) * KB)
    assert 0.25 < frac < 0.995
    assert f.status == "ok" and f.title == f"Huge pages obtainable: {frac:.0%} of free memory is in blocks of ≥ 2 MiB"
    assert "order 9 with 4 KiB pages, assumed on a recorded tree" in f.evidence
    assert "per node: node 0 " in f.evidence and "no hugetlbfs pool" in f.evidence


def test_hugepages_fragmented(tmp_path):
    buddy(tmp_path, FRAGMENTED_BUDDY)
    meminfo(tmp_path, 200 * 1024 * 1024, free_kb(FRAGMENTED_BUDDY))
    f = run("mem.hugepages", tmp_path)
    big = (10 * 512 + 2 * 1024) * 4096         # node 0's order-9 and order-10 blocks
    assert f.status == "warn" and "free memory is fragmented: only 0.1% of it" in f.title
    assert f"({mem._size(big)} of " in f.title
    assert "echo 1 > /proc/sys/vm/compact_memory" in f.fix and f.needs_root
    assert "(Hugepagesize; order 9" in f.evidence      # no hpage_pmd_size: the meminfo figure


def test_hugetlbfs_pool_unused(tmp_path):
    """A 1 GiB-page pool of 40 pages on a 256 GiB node, 30 free and none reserved: 30 GiB (12%) unused."""
    buddy(tmp_path, HEALTHY_BUDDY)
    meminfo(tmp_path, 256 * 1024 * 1024, free_kb(HEALTHY_BUDDY))
    for size, n, free, rsvd in ((2048, 512, 512, 512), (1048576, 40, 30, 0)):
        d = f"sys/kernel/mm/hugepages/hugepages-{size}kB"
        for name, v in (("nr_hugepages", n), ("free_hugepages", free), ("resv_hugepages", rsvd),
                        ("surplus_hugepages", 0), ("nr_overcommit_hugepages", 0)):
            write(tmp_path, f"{d}/{name}", f"{v}\n")
    f = run("mem.hugepages", tmp_path)
    assert f.status == "warn" and "a hugetlbfs pool holds 30 GiB unused (12% of memory)" in f.title
    assert "hugetlbfs pool of 512 × 2 MiB (1 GiB): 512 free, 512 reserved" in f.evidence   # all reserved: in use
    assert "nr_hugepages" in f.fix


def test_hugetlbfs_pool_from_meminfo(tmp_path):
    meminfo(tmp_path, 64 * 1024 * 1024, 10 * 1024 * 1024, huge=(4096, 4000, 0))
    f = run("mem.hugepages", tmp_path)
    assert f.status == "warn" and "holds 7.8 GiB unused (12% of memory)" in f.title
    assert "fragmentation: /proc/buddyinfo not readable" in f.evidence


def test_arm_64k_pages_live(tmp_path, monkeypatch):
    """Arm with 64 KiB pages: 512 MiB huge pages are order 13 (buddyinfo has 14 orders there)."""
    rows = [(0, "Normal", [10, 5, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 30])]
    buddy(tmp_path, rows)
    meminfo(tmp_path, 500 * 1024 * 1024, free_kb(rows, page=65536), hps_kb=524288)
    write(tmp_path, "sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "536870912\n")
    monkeypatch.setattr(mem.os, "sysconf", lambda name: 65536)
    f = run("mem.hugepages", tmp_path, live=True)
    assert f.status == "ok" and "blocks of ≥ 512 MiB" in f.title
    assert "order 13 with 64 KiB pages, this process's page size" in f.evidence
    assert "15 GiB of " in f.evidence                     # 30 blocks of 512 MiB


def test_arm_64k_pages_recorded_is_not_judged(tmp_path):
    """On a recorded tree the base page is assumed 4 KiB: order 17 is beyond what buddyinfo lists."""
    rows = [(0, "Normal", [10, 5, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 30])]
    buddy(tmp_path, rows)
    meminfo(tmp_path, 500 * 1024 * 1024, free_kb(rows, page=65536), hps_kb=524288)
    f = run("mem.hugepages", tmp_path)
    assert f.status == "ok" and "fragmentation not judged" in f.title
    assert "order 17 with 4 KiB pages (assumed on a recorded tree), but /proc/buddyinfo lists orders 0-13" in f.evidence


def test_hugepages_nothing_readable(tmp_path):
    assert run("mem.hugepages", tmp_path).status == "skipped"


def test_hugepages_live_on_this_machine():
    m = machine_mod.detect("/", measure=False)
    f = run("mem.hugepages", "/", m)
    assert f.status in ("ok", "warn", "skipped") and "this process's page size" in f.evidence


# ---- DIMM population ---------------------------------------------------------------

def dimms(name):
    return dmi.parse_dmidecode(local("dmidecode", name).read_text())


def pop_machine(rows, channels=8, total=503 * GIB, **kw) -> Machine:
    return machine(dimms=rows, memory_channels=channels, mem_total_bytes=total,
                   sources={"dimms": "dmidecode -t memory", "memory_channels": "CPU families data file: test"}, **kw)


def test_population_balanced(tmp_path):
    f = run("mem.population", tmp_path, pop_machine(dimms("2s-16dimm-ddr4-3200.txt")))
    assert f.status == "ok", f.title
    assert f.title == "Memory population: 16 × 32 GiB DDR4 at 3200 MT/s, every channel populated alike"
    assert "installed 512 GiB, visible 503 GiB (MemTotal, 98%)" in f.evidence
    assert "16 channels populated (socket 0: 8, socket 1: 8" in f.evidence and "1 DIMM per channel" in f.evidence


def test_population_empty_channels(tmp_path):
    """The same 16 DIMMs on a CPU with 12 channels per socket: 8 of 24 channels empty."""
    f = run("mem.population", tmp_path, pop_machine(dimms("2s-16dimm-ddr4-3200.txt"), channels=12))
    assert f.status == "warn" and "8 of 24 memory channels empty (socket 0: 8 of 12; socket 1: 8 of 12)" in f.title


def test_population_socket_without_dimms(tmp_path):
    rows = [r for r in dimms("2s-16dimm-ddr4-3200.txt") if not r["bank_locator"].startswith("P1")]
    f = run("mem.population", tmp_path, pop_machine(rows, total=250 * GIB))
    assert f.status == "warn" and "8 of 16 memory channels empty" in f.title
    assert "1 socket(s) without any DIMM" in f.title


def test_population_mixed_and_slow_dimms(tmp_path):
    """12 x 16 GiB: some rated 2933, some 2666, all configured at 2666."""
    f = run("mem.population", tmp_path, pop_machine(dimms("2s-12dimm-ddr4-cpu-locators.txt"), channels=6,
                                                    total=187 * GIB))
    assert f.status == "warn"
    assert "mixed DIMM speeds (" in f.title and "DIMMs run below their rated speed (2666 of 2933 MT/s)" in f.title
    assert "12 channels populated" in f.evidence and "mixed DIMM sizes" not in f.title


def test_population_mirroring_hides_memory(tmp_path):
    f = run("mem.population", tmp_path, pop_machine(dimms("2s-16dimm-ddr4-3200.txt"), total=251 * GIB))
    assert f.status == "warn" and "only 251 GiB of 512 GiB installed is visible (49%)" in f.title


def test_population_mixed_sizes_and_unbalanced_channels(tmp_path):
    rows = copy.deepcopy(dimms("2s-16dimm-ddr4-3200.txt"))
    pop = [r for r in rows if r["populated"]]
    pop[0]["size_bytes"] = 64 * GIB                      # one 64 GiB DIMM among 32 GiB ones
    extra = dict(pop[1], locator="P1-DIMMB2", bank_locator="P0_Node0_Channel1_Dimm1")
    rows.append(extra)                                   # a second DIMM in socket 0's channel 1
    f = run("mem.population", tmp_path, pop_machine(rows, total=580 * GIB))
    assert f.status == "warn"
    assert "mixed DIMM sizes (16 × 32 GiB, 1 × 64 GiB)" in f.title
    assert "unbalanced: 15 channels with 1 DIMM, 1 channels with 2 DIMMs" in f.title
    assert "unequal memory per socket (socket 0: 320 GiB, socket 1: 256 GiB)" in f.title


def test_population_without_channel_names(tmp_path):
    f = run("mem.population", tmp_path, pop_machine(dimms("dell-locators-no-channel.txt"), channels=8, total=62 * GIB))
    assert f.status == "warn" and "run below their rated speed (2933 of 3200 MT/s)" in f.title
    assert "channels: DIMM locators do not name socket and channel" in f.evidence


def test_population_raw_smbios_on_a_recorded_node(tmp_path_factory):
    """A Dell with 8 x 4 GiB DDR3-1600 read from /sys/firmware/dmi/entries/17-*/raw."""
    root = fsroot("32em64t-2n8c+dax+nvme+mic+dimms", tmp_path_factory)
    m = machine_mod.detect(str(root), measure=False)
    f = run("mem.population", root, m)
    assert f.status == "ok", f.title
    assert f.title.startswith("Memory population: 8 × 4 GiB DDR3 at 1600 MT/s")
    assert "installed 32 GiB, visible 31.3 GiB (MemTotal, 98%)" in f.evidence and "channels:" in f.evidence


@pytest.mark.parametrize("cause,is_root,reason,fix_has,fix_lacks,needs_root", [
    # not root: the records are root's; root reads them itself, no dmidecode needed
    (dmi.NOT_ROOT, False, "dmidecode needs root (/dev/mem: Permission denied)", "run ceiling as root", "install", True),
    # root, dmidecode missing, tables there: install the package, never "run as root"
    (dmi.TOOL_MISSING, True, "dmidecode is not installed", "install dmidecode", "root", True),
    # not root and dmidecode missing: both steps
    (dmi.TOOL_MISSING, False, "dmidecode is not installed", "install dmidecode", "", True),
    # no tables (a VM, a container): nothing to fix, and no sudo
    (dmi.NO_TABLES, True, "no SMBIOS/DMI tables on this system (/dev/mem: No such file or directory)", "", "sudo",
     False),
    (dmi.NO_RECORDS, False, "dmidecode lists no memory devices", "", "sudo", False),
    # root refused anyway: a container, not a missing sudo
    (dmi.NOT_ROOT, True, "/sys/firmware/dmi/entries/17-*/raw: permission denied", "on the host", "sudo", False),
])
def test_population_fix_follows_why_the_records_are_missing(tmp_path, cause, is_root, reason, fix_has, fix_lacks,
                                                             needs_root):
    """The issue's case: as root with dmidecode missing it said 'needs root: run sudo'."""
    m = pop_machine(None)
    m.unknowns["dimms"], m.dimms_unread = reason, cause
    p = base.Probe.of(m, str(tmp_path), is_root=is_root)
    f = base.run_one(base.REGISTRY["mem.population"], p, strict=True)
    assert f.status == "skipped" and f.evidence == reason
    expect = {dmi.NOT_ROOT: "denied_to_root"}.get(cause, cause) if is_root else cause
    assert f.data["cause"] == expect
    assert fix_has in f.fix and (not fix_lacks or fix_lacks not in f.fix) and f.needs_root is needs_root
    if not fix_has:
        assert f.fix == "" and "nothing to fix" in f.why


def test_population_root_without_dmidecode_on_this_tree(tmp_path, monkeypatch):
    """Through the machine model: root, dmidecode missing, and no SMBIOS tables exported
    (this is what a Firecracker VM looks like): nothing to install."""
    monkeypatch.setattr(dmi, "run_dmidecode", lambda: (127, "", ""))
    rows, why, _, cause = dmi.read_dimms(Root(tmp_path), runner=dmi.run_dmidecode)
    m = pop_machine(rows)
    m.unknowns["dimms"], m.dimms_unread = why, cause
    f = base.run_one(base.REGISTRY["mem.population"], base.Probe.of(m, str(tmp_path), is_root=True), strict=True)
    assert f.data["cause"] == dmi.NO_TABLES and "install" not in f.fix and "sudo" not in f.fix + f.why


def test_population_in_a_vm(tmp_path):
    f = run("mem.population", tmp_path, pop_machine(dimms("qemu-guest.txt"), virtualized="KVM"))
    assert f.status == "skipped" and "VM" in f.title


def test_population_no_populated_slot(tmp_path):
    rows = [r for r in dimms("2s-16dimm-ddr4-3200.txt") if not r["populated"]]
    assert run("mem.population", tmp_path, pop_machine(rows)).status == "skipped"


# ---- garbage in, never a traceback -------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
SETTINGS = dict(max_examples=80, deadline=None,
                suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
blob = st.one_of(st.binary(max_size=200), st.text(max_size=200))


@hypothesis.settings(**SETTINGS)
@hypothesis.given(target=st.sampled_from(["proc/meminfo", "proc/buddyinfo",
                                          "sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
                                          "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                                          "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"]),
                  content=blob, live=st.booleans())
def test_random_memory_files(tmp_path_factory, target, content, live):
    root = tmp_path_factory.mktemp("mem")
    buddy(root, HEALTHY_BUDDY)
    meminfo(root, 200 * 1024 * 1024, free_kb(HEALTHY_BUDDY), 150 * 1024 * 1024, 1000, 10)
    write(root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "10\n")
    f = root / target
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content)
    for cid in ("mem.pressure", "mem.hugepages"):
        assert run(cid, root, live=live).status in ("ok", "warn", "skipped")


# What the dmidecode and SMBIOS parsers produce: a non-negative integer or None.
dimm_value = st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 40))


@hypothesis.settings(**SETTINGS)
@hypothesis.given(rows=st.lists(st.fixed_dictionaries({
    "locator": st.one_of(st.sampled_from(["CPU1_DIMM_A1", "P1-DIMMA1", "A1", ""]), st.text(max_size=10)),
    "bank_locator": st.one_of(st.sampled_from(["P0_Node0_Channel0_Dimm0", "P1 CHANNEL B", "NODE 1"]),
                              st.text(max_size=10)),
    "populated": st.booleans(), "size_bytes": dimm_value, "type": st.sampled_from(["DDR4", "DDR5", ""]),
    "speed_mts": dimm_value, "configured_mts": dimm_value}), max_size=6),
    channels=st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
    total=st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 42)))
def test_random_dimm_rows(tmp_path_factory, rows, channels, total):
    root = tmp_path_factory.mktemp("dimm")
    f = run("mem.population", root, pop_machine(rows, channels=channels, total=total))
    assert f.status in ("ok", "warn", "skipped")
