"""DIMM population from dmidecode text and raw SMBIOS records; what happens without root."""
import pytest

from ceiling.machine import detect, dmi
from ceiling.sysfs import Root
from machine_fixtures import fsroot, local

GIB = 1024 ** 3


def rows(name):
    return dmi.parse_dmidecode(local("dmidecode", name).read_text())


def test_two_socket_sixteen_ddr4_3200_dimms():
    r = rows("2s-16dimm-ddr4-3200.txt")
    assert len(r) == 32 and sum(x["populated"] for x in r) == 16
    first = r[0]
    assert first["locator"] == "P1-DIMMA1" and first["bank_locator"] == "P0_Node0_Channel0_Dimm0"
    assert (first["size_bytes"], first["type"], first["speed_mts"], first["configured_mts"], first["rank"]) == \
        (32 * GIB, "DDR4", 3200, 3200, 2)
    assert r[1]["populated"] is False and r[1]["size_bytes"] is None and r[1]["speed_mts"] is None
    s = dmi.summarize(r)
    assert s["populated"] == 16 and s["slots"] == 32 and s["total_bytes"] == 512 * GIB
    assert s["mts"] == 3200 and s["types"] == ["DDR4"]
    assert s["channels_by_socket"] == {0: 8, 1: 8}


def test_cpu_style_locators_and_the_slowest_configured_speed():
    s = dmi.summarize(rows("2s-12dimm-ddr4-cpu-locators.txt"))
    assert s["channels_by_socket"] == {1: 6, 2: 6}
    assert s["mts"] == 2666                   # configured speed, below the DIMMs' rated 2933


def test_locators_without_channels_leave_channels_unknown():
    s = dmi.summarize(rows("dell-locators-no-channel.txt"))
    assert s["populated"] == 4 and s["mts"] == 2933
    assert s["channels_by_socket"] is None and "'A1'" in s["channels_reason"]


def test_vm_dimm_without_speed():
    s = dmi.summarize(rows("qemu-guest.txt"))
    assert s["populated"] == 1 and s["total_bytes"] == 24 * GIB
    assert s["mts"] is None and s["mts_reason"]


@pytest.mark.parametrize("locator,bank,expect", [
    ("P1-DIMMA1", "P0_Node0_Channel3_Dimm0", (0, "0.3")),
    ("DIMM 1", "P0 CHANNEL A", (0, "A")),
    ("CPU2_DIMM_F1", "NODE 2", (2, "F")),
    ("PROC 1 DIMM 1", "Not Specified", None),
    ("A1", "Not Specified", None),
])
def test_channel_of(locator, bank, expect):
    assert dmi.channel_of({"locator": locator, "bank_locator": bank}) == expect


def test_permission_denied_without_root():
    err = local("dmidecode", "permission-denied.stderr").read_text()
    got, why, src, cause = dmi.read_dimms(Root("/nonexistent-root"), runner=lambda: (1, "# dmidecode 3.3\n", err))
    assert got is None and why.startswith("dmidecode needs root (") and "Permission denied" in why
    assert cause == dmi.NOT_ROOT


def test_no_smbios_tables_is_not_a_permission_problem():
    """What dmidecode 3.4 prints as root in a VM without firmware tables (Firecracker)."""
    got, why, _, cause = dmi.read_dimms(Root("/nonexistent-root"), runner=lambda: (
        1, "# dmidecode 3.4\nScanning /dev/mem for entry point.\n", "/dev/mem: No such file or directory\n"))
    assert got is None and why.startswith("no SMBIOS/DMI tables") and "root" not in why and cause == dmi.NO_TABLES


def test_dmidecode_not_installed(tmp_path):
    """Missing dmidecode is worth installing only where the kernel found SMBIOS tables."""
    got, why, _, cause = dmi.read_dimms(Root(tmp_path), runner=lambda: (127, "", ""))
    assert got is None and "not installed" in why and why.startswith("no SMBIOS/DMI tables") and cause == dmi.NO_TABLES
    (tmp_path / "sys/firmware/dmi/tables").mkdir(parents=True)
    (tmp_path / "sys/firmware/dmi/tables/smbios_entry_point").write_bytes(b"_SM3_")
    got, why, _, cause = dmi.read_dimms(Root(tmp_path), runner=lambda: (127, "", ""))
    assert got is None and why == "dmidecode is not installed" and cause == dmi.TOOL_MISSING


def test_detect_live_reports_why_dimms_are_unknown(monkeypatch, tmp_path):
    err = local("dmidecode", "permission-denied.stderr").read_text()
    monkeypatch.setattr(dmi, "run_dmidecode", lambda: (1, "", err))
    monkeypatch.setattr(dmi, "_from_sysfs", lambda root: (None, None))
    m = detect("/", measure=False, config=False)
    assert m.dimms is None and m.unknowns["dimms"].startswith("dmidecode needs root")
    assert not m.peaks["membw.node"].known and "dmidecode needs root" in m.peaks["membw.node"].provenance


def test_recorded_dmidecode_feeds_the_memory_peak(tmp_path_factory, tmp_path):
    """A recorded tree with dmidecode output: 16 channels x 3200 MT/s x 8 B = 409.6 GB/s."""
    import shutil
    src = fsroot("32intel64-2p8co2t+8ve", tmp_path_factory)
    root = tmp_path / "tree"
    root.mkdir()
    for d in ("proc", "sys"):
        (root / d).symlink_to(src / d)
    shutil.copy(local("dmidecode", "2s-16dimm-ddr4-3200.txt"), root / dmi.RECORDED)
    m = detect(root, measure=False)
    assert m.memory_mts == 3200 and m.memory_channels_populated == 16
    p = m.peaks["membw.node"]
    assert p.value == pytest.approx(409.6)
    assert "16 populated channels" in p.provenance and "3200 MT/s" in p.provenance
    assert m.peaks["membw.domain"].value == pytest.approx(204.8)    # 2 NUMA domains


def test_raw_smbios_records(tmp_path_factory):
    root = Root(fsroot("32em64t-2n8c+dax+nvme+mic+dimms", tmp_path_factory))
    got, why, src, cause = dmi.read_dimms(root)
    assert why is None and cause == "" and "SMBIOS type 17" in src and len(got) == 24
    s = dmi.summarize(got)
    assert s["populated"] == 8 and s["types"] == ["DDR3"] and s["mts"] == 1600
    assert s["total_bytes"] == 32 * GIB
    assert got[0]["locator"] == "DIMM_A1" and got[0]["part_number"] == "HMT351R7CFR8C-PB"
    assert dmi.read_system(root)["sys_vendor"] == "Dell"


def test_parse_smbios17_extended_size_and_speed():
    # 84-byte type 17 record: size 0x7FFF -> extended size 65536 MB; speed 0xFFFF -> extended 8800 MT/s.
    raw = bytearray(0x5C)
    raw[0], raw[1] = 17, 0x5C
    raw[0x0C:0x0E] = (0x7FFF).to_bytes(2, "little")
    raw[0x10], raw[0x12] = 1, 0x22
    raw[0x15:0x17] = (0xFFFF).to_bytes(2, "little")
    raw[0x1C:0x20] = (65536).to_bytes(4, "little")
    raw[0x20:0x22] = (6400).to_bytes(2, "little")
    raw[0x54:0x58] = (8800).to_bytes(4, "little")
    r = dmi.parse_smbios17(bytes(raw) + b"DIMM_A1\0\0")
    assert r["size_bytes"] == 64 * GIB and r["type"] == "DDR5"
    assert r["speed_mts"] == 8800 and r["configured_mts"] == 6400 and r["locator"] == "DIMM_A1"


def test_a_truncated_smbios_record_is_read_not_crashed_on():
    from ceiling.machine.dmi import parse_smbios17
    d = parse_smbios17(bytes([17, 0x28]) + bytes(0x13))     # declares 0x28 bytes, holds 0x15
    assert d is not None and d["size_bytes"] is None and not d["populated"]
