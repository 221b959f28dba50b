"""The node inventory that cluster mode compares across nodes: every key always present,
values as the node reads them, "unknown" (never an exception) for what cannot be read.

Recorded trees (hwloc's linux-fsroot) for what real machines write; small synthetic
trees for each rule the recorded ones do not exercise."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

import pytest

from ceiling.machine import detect
from ceiling.machine import inventory as inv
from ceiling.machine.dmi import parse_dmidecode
from ceiling.machine.inventory import KEYS, TITLES, inventory
from ceiling.machine.model import Cpu, Machine, NumaNode
from ceiling.sysfs import Root
from machine_fixtures import Recording, fsroot, local

GIB, MIB = 1 << 30, 1 << 20
CPU = "sys/devices/system/cpu"

TREES = ("16em64t-4s2c2t", "32em64t-2n8c+dax+nvme+mic+dimms", "20em64t-hybrid-1p6c2t+2ca4co1t",
         "nvidia-dgx-gb10", "128arm-2pa2n8cluster4co", "40intel64-2g2n4c+pcilocality",
         "32intel64-2p8co2t+8ve", "2arm-2c", "20s390-2g6s4c", "256ppc-8n8s4t", "4fake-4gr1nu1pu")


def write(root: Path, files: Dict[str, str]) -> Path:
    """A synthetic tree: each relative path with its text."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def one(key: str, files: Dict[str, str], tmp_path: Path, m: Optional[Machine] = None) -> str:
    """The value of one key for a synthetic tree (and a bare Machine unless given)."""
    return inventory(m or Machine(), str(write(tmp_path, files)))[key]


def two_cpus(smt: int = 1) -> Machine:
    return Machine(smt=smt, cpus=[Cpu(id=i, core=i // smt, socket=0, node=0, smt=i % smt) for i in range(2)])


# ---- shape -----------------------------------------------------------------

def test_every_key_has_a_title():
    assert set(TITLES) == set(KEYS) and len(set(KEYS)) == len(KEYS)
    assert all(TITLES[k] for k in KEYS)


@pytest.mark.parametrize("name", TREES)
def test_every_key_is_present_for_a_recorded_tree(name, tmp_path_factory):
    root = fsroot(name, tmp_path_factory)
    got = inventory(detect(root, measure=False, config=False), str(root))
    assert tuple(got) == KEYS
    assert all(isinstance(v, str) and v and v == v.strip() for v in got.values()), got


def test_an_empty_tree_is_unknown_everywhere(tmp_path):
    got = inventory(detect(tmp_path, measure=False, config=False), str(tmp_path))
    assert tuple(got) == KEYS
    assert got == {k: "none" if k == "interconnect" else "unknown" for k in KEYS}


def test_two_nodes_that_cannot_read_a_fact_agree(tmp_path):
    a = inventory(Machine(), str(write(tmp_path / "a", {"proc/cmdline": "quiet\n"})))
    b = inventory(Machine(), str(write(tmp_path / "b", {"proc/cmdline": "ro quiet\n"})))
    assert a == b and a["kernel"] == "unknown" and a["mitigations"] == "default"


# ---- recorded machines ----------------------------------------------------

@pytest.mark.parametrize("name, expect", [
    ("32em64t-2n8c+dax+nvme+mic+dimms", {
        "bios": "1.0.30 (08/06/2012)", "cpu": "Intel(R) Xeon(R) CPU E5-2680 0 @ 2.70GHz",
        "governor": "performance", "numa": "2 NUMA node(s)", "memory": "31 GiB",
        "dimms": "8 x 4 GiB DDR3 1600 MT/s",                  # from its raw SMBIOS type 17 records
        "smt": "1 thread(s) per core",                         # no smt/control in a 2013 kernel
        "interconnect": "mlx4_0 56 Gb/sec (4X FDR) ACTIVE",    # scif0 has no ports: not listed
        "microcode": "unknown", "turbo": "unknown"}),
    ("20em64t-hybrid-1p6c2t+2ca4co1t", {
        "governor": "powersave",                               # cpuN/cpufreq -> ../cpufreq/policyN
        "turbo": "on", "smt": "on", "microcode": "0x4119", "mitigations": "default",
        "bios": "V70 Ver. 01.02.03 (09/13/2023)", "numa": "1 NUMA node(s)"}),
    ("nvidia-dgx-gb10", {"turbo": "off", "smt": "notsupported", "governor": "performance",
                         "microcode": "unknown", "mitigations": "default"}),
    ("128arm-2pa2n8cluster4co", {"smt": "notimplemented", "bios": "0.86 (07/19/2019)",
                                 "numa": "4 NUMA node(s)", "interconnect": "none"}),
    ("40intel64-2g2n4c+pcilocality", {"interconnect": "qib0 40 Gb/sec (4X QDR) ACTIVE",
                                      "governor": "none (no cpufreq)"}),
    ("32intel64-2p8co2t+8ve", {"turbo": "on", "smt": "on", "microcode": "0x2006a0a", "bios": "unknown"}),
])
def test_recorded_values(name, expect, tmp_path_factory):
    root = fsroot(name, tmp_path_factory)
    got = inventory(detect(root, measure=False, config=False), str(root))
    assert {k: got[k] for k in expect} == expect


# ---- each key on a synthetic tree -------------------------------------------

def test_kernel_release(tmp_path):
    assert one("kernel", {"proc/sys/kernel/osrelease": "6.1.0-18-amd64\n"}, tmp_path) == "6.1.0-18-amd64"


@pytest.mark.parametrize("files, expect", [
    ({"etc/os-release": 'NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'},
     "Debian GNU/Linux 12 (bookworm)"),
    ({"usr/lib/os-release": "PRETTY_NAME='Rocky Linux 9.3 (Blue Onyx)'\n"}, "Rocky Linux 9.3 (Blue Onyx)"),
    ({"etc/os-release": "NAME=Foo\n", "usr/lib/os-release": "PRETTY_NAME=Foo-OS\n"}, "Foo-OS"),
    ({"etc/os-release": 'PRETTY_NAME="A"\n', "usr/lib/os-release": "PRETTY_NAME=B\n"}, "A"),
    ({"etc/os-release": 'PRETTY_NAME="Say \\"hi\\" for \\$5"\n'}, 'Say "hi" for $5'),
    ({"etc/os-release": "# PRETTY_NAME=commented\nID=x\n"}, "unknown"),
    ({}, "unknown"),
])
def test_os_pretty_name_and_its_fallback(files, expect, tmp_path):
    assert one("os", files, tmp_path) == expect


@pytest.mark.parametrize("system, expect", [
    ({"bios_version": "2.19.1", "bios_date": "03/12/2024"}, "2.19.1 (03/12/2024)"),
    ({"bios_version": "2.19.1"}, "2.19.1"),
    ({"bios_date": "03/12/2024"}, "unknown version (03/12/2024)"),
    ({}, "unknown"),
])
def test_bios(system, expect, tmp_path):
    assert one("bios", {}, tmp_path, Machine(system=system)) == expect


def test_cpu_model(tmp_path):
    assert one("cpu", {}, tmp_path, Machine(model_name="AMD EPYC 9654 96-Core Processor")) == \
        "AMD EPYC 9654 96-Core Processor"


@pytest.mark.parametrize("codes, expect", [
    (["0xb000040", "0xb000040"], "0xb000040"),
    (["0xb000040", "0xb000038", "0xb000040"], "0xb000038, 0xb000040"),
    ([], "unknown"),                                           # Arm: no microcode line
])
def test_microcode_distinct_values_sorted(codes, expect, tmp_path):
    blocks = [f"processor\t: {i}\nmodel name\t: X\n" + (f"microcode\t: {c}\n" if c else "")
              for i, c in enumerate(codes or [None])]
    assert one("microcode", {"proc/cpuinfo": "\n".join(blocks)}, tmp_path) == expect


def test_governors_differing_per_cpu(tmp_path):
    files = {f"{CPU}/cpu{i}/cpufreq/scaling_governor": g + "\n"
             for i, g in enumerate(["performance", "ondemand", "performance", "ondemand"])}
    assert one("governor", files, tmp_path) == "ondemand, performance"


def test_no_cpufreq_and_unreadable_governor(tmp_path):
    for c in ("cpu0", "cpu1", "cpufreq", "smt"):       # not cpuN: no CPU of its own
        (tmp_path / "a" / CPU / c).mkdir(parents=True)
    assert inventory(Machine(), str(tmp_path / "a"))["governor"] == "none (no cpufreq)"
    (tmp_path / "a" / CPU / "cpu1" / "cpufreq").mkdir()
    assert inventory(Machine(), str(tmp_path / "a"))["governor"] == "unknown"


@pytest.mark.parametrize("files, expect", [
    ({"intel_pstate/no_turbo": "1\n"}, "off"),
    ({"intel_pstate/no_turbo": "0\n"}, "on"),
    ({"cpufreq/boost": "1\n"}, "on"),
    ({"cpufreq/boost": "0\n"}, "off"),
    ({"intel_pstate/no_turbo": "1\n", "cpufreq/boost": "1\n"}, "off"),    # intel_pstate first
    ({"intel_pstate/no_turbo": "junk\n", "cpufreq/boost": "1\n"}, "on"),
    ({"cpufreq/boost": "2\n"}, "unknown"),
    ({}, "unknown"),
])
def test_turbo(files, expect, tmp_path):
    assert one("turbo", {f"{CPU}/{k}": v for k, v in files.items()}, tmp_path) == expect


@pytest.mark.parametrize("control", ["on", "off", "forceoff", "notsupported", "notimplemented"])
def test_smt_control(control, tmp_path):
    assert one("smt", {f"{CPU}/smt/control": control + "\n"}, tmp_path, two_cpus(2)) == control


def test_smt_from_the_model_without_smt_control(tmp_path):
    assert one("smt", {}, tmp_path / "a", two_cpus(2)) == "2 thread(s) per core"
    assert one("smt", {}, tmp_path / "b", Machine()) == "unknown"       # no CPU known: no figure


def test_numa_nodes(tmp_path):
    nodes = [NumaNode(id=i, cpus=[i], mem_bytes=None, distances=[]) for i in range(2)]
    assert one("numa", {}, tmp_path, Machine(nodes=nodes)) == "2 NUMA node(s)"
    assert one("numa", {}, tmp_path, Machine()) == "unknown"


@pytest.mark.parametrize("nbytes, expect", [
    (256 * GIB - 20 * MIB, "256 GiB"),          # rounded, not floored: reserved memory differs by node
    (256 * GIB + 20 * MIB, "256 GiB"),
    (int(251.6 * GIB), "252 GiB"),
    (int(251.4 * GIB), "251 GiB"),
    (512 * MIB, "512 MiB"),
    (None, "unknown"),
])
def test_memory_whole_gib(nbytes, expect, tmp_path):
    assert one("memory", {}, tmp_path, Machine(mem_total_bytes=nbytes)) == expect


def dimm(size_gib: Optional[int], kind: str = "DDR5", mts: Optional[int] = 4800, conf: Optional[int] = None):
    return {"locator": "A1", "populated": size_gib is not None, "size_bytes": size_gib and size_gib * GIB,
            "type": kind if size_gib else "", "speed_mts": mts, "configured_mts": conf}


@pytest.mark.parametrize("rows, expect", [
    ([dimm(16)] * 16 + [dimm(None)] * 8, "16 x 16 GiB DDR5 4800 MT/s"),
    ([dimm(32, "DDR4", 3200, 2933)] * 2, "2 x 32 GiB DDR4 2933 MT/s"),      # the configured speed
    ([dimm(16)] * 4 + [dimm(32)] * 2, "2 x 32 GiB DDR5 4800 MT/s + 4 x 16 GiB DDR5 4800 MT/s"),
    ([dimm(24, "RAM", None)], "1 x 24 GiB RAM"),
    ([dimm(None)] * 4, "none populated (4 slots)"),
    (None, "unknown"),
])
def test_dimms(rows, expect, tmp_path):
    assert one("dimms", {}, tmp_path, Machine(dimms=rows)) == expect


def test_dimms_from_recorded_dmidecode(tmp_path):
    rows = parse_dmidecode(local("dmidecode", "2s-16dimm-ddr4-3200.txt").read_text())
    assert one("dimms", {}, tmp_path, Machine(dimms=rows)) == "16 x 32 GiB DDR4 3200 MT/s"


@pytest.mark.parametrize("text, expect", [
    ("always [madvise] never\n", "madvise"),
    ("[always] madvise never\n", "always"),
    ("always madvise [never]\n", "never"),
    ("madvise\n", "madvise"),
])
def test_thp_selected_word(text, expect, tmp_path):
    assert one("thp", {"sys/kernel/mm/transparent_hugepage/enabled": text}, tmp_path) == expect


@pytest.mark.parametrize("cmdline, expect", [
    ("BOOT_IMAGE=/vmlinuz-6.1.0 root=/dev/sda1 ro mitigations=off quiet\n", "off"),
    ("BOOT_IMAGE=/vmlinuz-6.1.0 root=/dev/sda1 ro quiet\n", "default"),
    ("mitigations=auto,nosmt\n", "auto,nosmt"),
    ("mitigations=off mitigations=auto\n", "auto"),              # the last one counts, as in the kernel
    ("nomitigations=off\n", "default"),
])
def test_mitigations_from_the_command_line(cmdline, expect, tmp_path):
    assert one("mitigations", {"proc/cmdline": cmdline}, tmp_path) == expect


def ib_port(dev: str, port: str, rate: Optional[str], state: Optional[str]) -> Dict[str, str]:
    base = f"sys/class/infiniband/{dev}/ports/{port}"
    return {**({f"{base}/rate": rate + "\n"} if rate else {}), **({f"{base}/state": state + "\n"} if state else {})}


def test_an_infiniband_port(tmp_path):
    files = ib_port("mlx5_0", "1", "100 Gb/sec (4X EDR)", "4: ACTIVE")
    assert one("interconnect", files, tmp_path) == "mlx5_0 100 Gb/sec (4X EDR) ACTIVE"


def test_several_infiniband_ports(tmp_path):
    files = {**ib_port("mlx5_1", "1", "200 Gb/sec (4X HDR)", "1: DOWN"),
             **ib_port("mlx5_0", "1", "100 Gb/sec (4X EDR)", "4: ACTIVE"),
             **ib_port("mlx5_0", "2", None, None)}
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/2").mkdir(parents=True)     # a port that says nothing
    assert one("interconnect", files, tmp_path) == \
        "mlx5_0:1 100 Gb/sec (4X EDR) ACTIVE; mlx5_0:2 rate unknown state unknown; mlx5_1 200 Gb/sec (4X HDR) DOWN"


def test_no_infiniband(tmp_path):
    assert one("interconnect", {}, tmp_path / "a") == "none"
    (tmp_path / "b" / "sys/class/infiniband").mkdir(parents=True)      # ib_core loaded, no adapter
    assert one("interconnect", {}, tmp_path / "b") == "none"


# ---- reading ---------------------------------------------------------------

def test_values_are_kept_as_read(tmp_path):
    """Stripped, nothing else: a terminal escape is escaped where it is printed, not here."""
    got = one("os", {"etc/os-release": 'PRETTY_NAME="\x1b[31mRed OS\x1b[0m"\n'}, tmp_path)
    assert got == "\x1b[31mRed OS\x1b[0m"
    assert one("kernel", {"proc/sys/kernel/osrelease": "  6.8.0\t\n"}, tmp_path) == "6.8.0"


def test_a_fifo_is_unknown_not_waited_on(tmp_path):
    (tmp_path / "proc").mkdir()
    os.mkfifo(tmp_path / "proc" / "cmdline")
    assert inventory(Machine(), str(tmp_path))["mitigations"] == "unknown"


class Recorder(Recording, Root):
    """sysfs.Root that remembers what it read, and can swap a file's bytes."""


FULL = {"proc/sys/kernel/osrelease": "6.1.0-18-amd64\n", "etc/os-release": 'PRETTY_NAME="Debian 12"\n',
        "proc/cpuinfo": "processor\t: 0\nmicrocode\t: 0x1\n", f"{CPU}/cpu0/cpufreq/scaling_governor": "performance\n",
        f"{CPU}/intel_pstate/no_turbo": "0\n", f"{CPU}/smt/control": "on\n",
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
        "proc/cmdline": "ro mitigations=off\n", **ib_port("mlx5_0", "1", "100 Gb/sec (4X EDR)", "4: ACTIVE")}


def test_every_file_is_read_through_sysfs_root(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(inv, "Root", lambda root: made.append(Recorder(root)) or made[-1])
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail(f"open{a} outside sysfs.Root"))
    got = inventory(Machine(), str(write(tmp_path, FULL)))
    assert "unknown" not in [got[k] for k in ("kernel", "os", "microcode", "governor", "turbo", "smt", "thp",
                                              "mitigations", "interconnect")]
    assert len(made) == 1 and set(made[0].seen) == set(FULL)


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

GARBAGE = st.one_of(st.none(), st.just(b""), st.binary(max_size=200),
                    st.text(max_size=200).map(lambda t: t.encode("utf-8")),
                    st.sampled_from([b"[]\n", b"[\n", b"]x[\n", b"mitigations=\n", b"=\n", b'PRETTY_NAME="\n',
                                     b"microcode\t:\n", b"\x00\x00", b"4:\n", b":\n"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_file_content_raises(tmp_path_factory, data):
    """Any file read replaced by garbage (or made unreadable): still every key, a string each."""
    root = str(write(tmp_path_factory.getbasetemp() / "inventory-full", FULL))
    rel = data.draw(st.sampled_from(sorted(FULL)))
    swap = {rel: data.draw(GARBAGE)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inv, "Root", lambda r: Recorder(r, swap=swap))
        got = inventory(two_cpus(2), root)
    assert tuple(got) == KEYS and all(isinstance(v, str) and v for v in got.values())
