"""The CPU families data file and the cpuid decoding that keys it, against recorded cpuid dumps."""
import pytest

from ceiling.machine import families, isa
from machine_fixtures import cpuid_dump


def test_data_file_loads_and_every_entry_is_checked():
    data = families.load()
    assert len(data["x86"]) >= 15 and len(data["arm"]) >= 5 and data["soc"]
    for e in data["x86"] + data["arm"]:
        assert e["source"], e["name"]                     # every figure says where it is from
        for bits, units in e["fma"].items():
            assert bits % 64 == 0 and units >= 1


def test_unknown_key_in_data_file_is_rejected(tmp_path):
    bad = tmp_path / "f.toml"
    bad.write_text('[[x86]]\nname = "X"\nvendor = "V"\nfamily = 6\nmodels = [1]\nfma_pipes = 2\nsource = "s"\n')
    with pytest.raises(ValueError, match="fma_pipes"):
        families.load(str(bad))


@pytest.mark.parametrize("eax,expect", [
    (0x00A10F11, (0x19, 0x11, 1)),   # Zen 4 Genoa
    (0x00A00F11, (0x19, 0x01, 1)),   # Zen 3 Milan
    (0x000806F8, (6, 0x8F, 8)),      # Sapphire Rapids
    (0x00050654, (6, 0x55, 4)),      # Skylake-SP
    (0x00B20F40, (0x1A, 0x24, 0)),   # Zen 5 Strix Point
    (0x00000F65, (0xF, 0x6, 5)),     # NetBurst (family 0xF, no extended family)
])
def test_decode_signature(eax, expect):
    assert isa.decode_signature(eax) == expect


# (dump, expected family name, FMA map, memory channels per socket)
DUMPS = [
    ("AMD-19h-Zen4-2xEpyc-9654", "Zen 4 (Genoa)", {256: 2}, 12),
    ("AMD-19h-Zen3-2xEpyc-7763", "Zen 3 (Milan)", {256: 2}, 8),
    ("AMD-17h-Zen-2xEpyc-7451", "Zen (Naples)", {128: 2}, 8),
    ("AMD-1Ah-Zen5StrixPoint-RyzenAI9HX370", "Zen 5 (mobile)", {256: 2}, None),
    ("Intel-SapphireRapids-2xXeonMax9460", "Sapphire Rapids", {256: 2, 512: 2}, 8),
    ("Intel-Skylake-2xXeon6140", "Skylake-SP", {256: 2, 512: 2}, 6),
    ("Intel-CascadeLake-2xXeon6230", "Cascade Lake", {256: 2, 512: 2}, 6),
    ("Intel-Haswell-2xXeon-E5-2680v3", "Haswell-EP", {256: 2}, 4),
    ("Intel-Broadwell-2xXeon-E5-2650Lv4", "Broadwell-EP", {256: 2}, 4),
]


@pytest.mark.parametrize("dump,name,fma,channels", DUMPS)
def test_family_from_cpuid_dump(dump, name, fma, channels, tmp_path_factory):
    ident = isa.identify(isa.dump_query(cpuid_dump(dump, tmp_path_factory)))
    fam = families.lookup_x86(ident["vendor"], ident["family"], ident["model"], ident["stepping"], ident["brand"])
    assert fam is not None and fam.name == name
    assert fam.fma == fma and fam.memory_channels == channels
    assert fam.source


def test_old_and_unlisted_cpus_are_unknown(tmp_path_factory):
    for dump in ("Intel-SandyBridge-2xXeon-E5-2650", "AMD-15h-Bulldozer-4xOpteron-6272",
                 "Intel-KnightsLanding-XeonPhi-7210"):
        ident = isa.identify(isa.dump_query(cpuid_dump(dump, tmp_path_factory)))
        assert families.lookup_x86(ident["vendor"], ident["family"], ident["model"], ident["stepping"],
                                   ident["brand"]) is None


def test_leaf16_and_hypervisor_from_dumps(tmp_path_factory):
    q = isa.dump_query(cpuid_dump("Intel-CascadeLake-2xXeon6230", tmp_path_factory))
    assert isa.leaf16_mhz(q) == (2100, 3900)
    assert isa.hypervisor_vendor(q) is None              # bare metal: no hypervisor bit
    amd = isa.dump_query(cpuid_dump("AMD-19h-Zen4-2xEpyc-9654", tmp_path_factory))
    assert isa.leaf16_mhz(amd) == (None, None)           # AMD does not implement leaf 0x16


def test_avx512_fma_units_follow_the_sku():
    gold6 = families.lookup_x86("GenuineIntel", 6, 0x55, 4, "Intel(R) Xeon(R) Gold 6140 CPU @ 2.30GHz")
    gold5122 = families.lookup_x86("GenuineIntel", 6, 0x55, 4, "Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz")
    gold5118 = families.lookup_x86("GenuineIntel", 6, 0x55, 4, "Intel(R) Xeon(R) Gold 5118 CPU @ 2.30GHz")
    unknown = families.lookup_x86("GenuineIntel", 6, 0x55, 4, "Intel(R) Xeon(R) W-2123 CPU @ 3.60GHz")
    assert gold6.fma[512] == 2 and gold5122.fma[512] == 2 and gold5118.fma[512] == 1
    assert 512 not in unknown.fma and unknown.fma_width_bits == 512   # SKU decides: left unknown
    assert "licence" in gold6.avx512_note


def test_arm_cores_and_socs():
    n1 = families.lookup_arm("0x41", "0xd0c")
    assert n1.name == "Neoverse N1" and n1.fma == {128: 2} and n1.memory_channels is None
    g2 = families.lookup_arm("0x41", "0xd0c", "Amazon EC2 c6g.16xlarge")
    assert g2.name == "AWS Graviton2 (Neoverse N1)" and g2.memory_channels == 8 and g2.memory_max_mts == 3200
    v1 = families.lookup_arm("0x41", "0xd40")
    assert v1.fma == {128: 4, 256: 2}
    a64fx = families.lookup_arm("0x46", "0x001")
    assert a64fx.fma == {512: 2} and a64fx.peak_bandwidth_gbs_per_socket == 1024
    assert families.lookup_arm("0x41", "0xfff") is None and families.lookup_arm(None, None) is None


def test_isa_list_and_vector_bits():
    flags = {"sse2", "pni", "sse4_2", "avx", "fma", "avx2", "avx512f", "avx512vl", "avx512bw", "avx512dq",
             "amx_tile", "amx_bf16", "amx_int8", "hypervisor"}
    names = isa.isa_list(flags, "x86_64")
    assert names[:2] == ["sse2", "sse3"] and {"avx512f", "amx_tile", "amx_int8"} <= set(names)
    assert "hypervisor" not in names
    assert isa.vector_bits(names, "x86_64") == 512
    assert isa.kernel_isas(names, "x86_64") == ["scalar", "sse2", "avx2", "avx512"]
    assert isa.vector_bits(["sse2", "avx"], "x86_64") == 256
    arm = isa.isa_list({"fp", "asimd", "sve", "sve2"}, "aarch64")
    assert arm[0] == "neon" and "sve2" in arm
    assert isa.vector_bits(arm, "aarch64", None) == 128 and isa.vector_bits(arm, "aarch64", 512) == 512
    assert isa.sve_default_bits("32\n") == 256 and isa.sve_default_bits("") is None
