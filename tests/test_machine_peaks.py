"""Peaks: the flop/cycle rules per ISA, the clock each peak uses, and unknown-with-reason."""
import pytest

from ceiling.machine import detect
from ceiling.machine.model import Clocks, Cpu, Machine, NumaNode
from ceiling.machine.peaks import compute_peaks, flop_peak, flop_per_cycle
from machine_fixtures import fsroot


def machine(fma, width=None, isa=("sse2", "avx", "fma", "avx2"), cores=4, sockets=1, nodes=1, arch="x86_64",
            sve=None, microarch="Test", **clk):
    cpus = [Cpu(id=i, core=i, socket=i * sockets // cores, node=i * nodes // cores, smt=0) for i in range(cores)]
    m = Machine(arch=arch, microarch=microarch, model_name="Test CPU", sockets=sockets, cores=cores, threads=cores,
                cpus=cpus, isa=list(isa), sve_vector_bits=sve, fma_units_by_bits=dict(fma),
                fma_width_bits=width or (max(fma) if fma else None), affinity=list(range(cores)),
                nodes=[NumaNode(n, [c.id for c in cpus if c.node == n], None, []) for n in range(nodes)],
                clocks=Clocks(**clk))
    return m


@pytest.mark.parametrize("fma,width,isa,prec,expect", [
    ({256: 2}, None, "avx2", "dp", 16),            # Haswell .. Zen 3
    ({256: 2}, None, "avx2", "sp", 32),
    ({256: 2}, None, "sse2", "dp", 8),
    ({256: 2}, None, "scalar", "dp", 4),
    ({256: 2}, None, "avx512", "dp", 16),          # Zen 4: 512-bit in two passes
    ({256: 2, 512: 2}, None, "avx512", "dp", 32),  # Skylake-SP Gold 6
    ({256: 2, 512: 1}, None, "avx512", "dp", 16),  # Skylake-SP Silver
    ({256: 2, 512: 1}, None, "avx2", "dp", 16),    # ... still two 256-bit FMAs
    ({256: 2}, 512, "avx512", "dp", None),         # SKU decides: unknown
    ({128: 2}, None, "avx2", "dp", 8),             # Zen: AVX2 split in 128-bit halves
    ({128: 4, 256: 2}, None, "neon", "dp", 16),    # Neoverse V1
    ({128: 4, 256: 2}, None, "sve", "dp", 16),
    ({512: 2}, None, "sve", "dp", 32),             # A64FX
    ({512: 2}, None, "neon", "dp", 8),
    ({}, None, "avx2", "dp", None),                # not in the data file
])
def test_flop_per_cycle(fma, width, isa, prec, expect):
    sve = 256 if fma == {128: 4, 256: 2} else 512 if fma == {512: 2} else None
    m = machine(fma, width, sve=sve)
    got, why = flop_per_cycle(m, prec, isa)
    assert got == expect, why
    if expect is None:
        assert "config" in why                      # says how to supply the figure


def test_sve_without_vector_length_is_unknown():
    m = machine({128: 2}, arch="aarch64", isa=("neon", "sve"))
    got, why = flop_per_cycle(m, "dp", "sve")
    assert got is None and "vector length" in why


def test_clock_choice_and_provenance():
    m = machine({256: 2}, cores=4, measured_single_ghz=3.7, measured_all_ghz=3.2, max_ghz=4.0, max_source="cpufreq")
    one = flop_peak(m, "dp", 1)
    assert one.value == pytest.approx(3.7 * 16) and "one core busy" in one.provenance
    node = flop_peak(m, "dp")
    assert node.value == pytest.approx(4 * 3.2 * 16)
    assert node.provenance.startswith("4 cores × 3.20 GHz (measured, all cores busy) × 16 DP flop/cycle (2 × 256-bit "
                                      "FMA")
    assert "Test" in node.provenance and "avx2" in node.provenance
    two = flop_peak(m, "dp", 2)
    assert two.value == pytest.approx(2 * 3.2 * 16) and "fewer busy cores may clock higher" in two.provenance
    assert flop_peak(m, "sp", 4, isa="sse2").value == pytest.approx(4 * 3.2 * 16)
    assert not flop_peak(m, "dp", 4, isa="avx512").known                    # this CPU has no AVX-512


def test_unmeasured_uses_the_max_clock_and_says_so():
    m = machine({256: 2}, max_ghz=3.5, max_source="cpufreq cpuinfo_max_freq")
    p = flop_peak(m, "dp")
    assert p.value == pytest.approx(4 * 3.5 * 16) and "not measured" in p.provenance


def test_no_clock_no_peak():
    p = flop_peak(machine({256: 2}), "dp")
    assert p.value is None and p.provenance.startswith("unknown: clock unknown")


def test_domain_peaks_use_the_largest_domain_and_its_clock():
    m = machine({256: 2}, cores=8, sockets=2, nodes=2, measured_single_ghz=3.5, measured_all_ghz=3.0,
                measured_domain_ghz=3.2)
    m.memory_channels, m.memory_mts = 8, 3200
    m.sources["memory_mts"] = "dmidecode -t memory"
    peaks = compute_peaks(m)
    assert set(peaks) == {"flops.dp.core", "flops.sp.core", "flops.dp.node", "flops.sp.node",
                          "flops.dp.domain", "flops.sp.domain", "membw.domain", "membw.node"}
    assert m.peaks is peaks
    assert peaks["flops.dp.domain"].value == pytest.approx(4 * 3.2 * 16)
    assert "NUMA node 0" in peaks["flops.dp.domain"].provenance
    assert peaks["membw.node"].value == pytest.approx(2 * 8 * 3200 * 8 / 1000)
    assert "every channel assumed populated" in peaks["membw.node"].provenance
    assert peaks["membw.domain"].value == pytest.approx(8 * 3200 * 8 / 1000)


def test_memory_peak_unknown_without_speed():
    m = machine({256: 2})
    m.memory_channels = 8
    m.unknowns["dimms"] = "dmidecode needs root (/dev/mem: Permission denied)"
    p = compute_peaks(m)["membw.node"]
    assert p.value is None and "dmidecode needs root" in p.provenance and "config" in p.provenance


def test_avx512_note_in_provenance():
    m = machine({256: 2, 512: 2}, isa=("sse2", "avx", "fma", "avx2", "avx512f", "avx512vl", "avx512bw", "avx512dq"),
                measured_all_ghz=2.0, measured_single_ghz=2.5)
    m.cpu_facts = {"avx512_note": "heavy AVX-512 code lowers the clock"}
    p = flop_peak(m, "dp")
    assert p.value == pytest.approx(4 * 2.0 * 32) and "lowers the clock" in p.provenance and "avx512" in p.provenance


def test_fixture_peaks_are_unknown_with_reasons(tmp_path_factory):
    arm = detect(fsroot("128arm-2pa2n8cluster4co", tmp_path_factory), measure=False)
    assert not arm.peaks["flops.dp.node"].known
    assert "FMA pipes per core unknown" in arm.peaks["flops.dp.node"].provenance
    assert "no SMBIOS memory records" in arm.peaks["membw.node"].provenance
    amd = detect(fsroot("48amd64-4pa2n6c-sparse", tmp_path_factory), measure=False)
    assert "not in the CPU families data file" in amd.peaks["flops.dp.node"].provenance
    hsw = detect(fsroot("offline-cpu0-node0", tmp_path_factory), measure=False)
    assert hsw.peaks["flops.dp.node"].provenance.startswith("unknown: clock unknown")


def test_a_clock_measured_beside_other_processes_keeps_the_peak_and_says_so():
    quiet = machine({256: 2}, measured_all_ghz=3.2)
    busy = machine({256: 2}, measured_all_ghz=3.2,
                   measured_disturbed="other processes shared the CPUs (all CPUs: the threads waited 48%)")
    q, b = flop_peak(quiet, "dp"), flop_peak(busy, "dp")
    assert b.value == q.value == pytest.approx(4 * 3.2 * 16)
    assert "shared the CPUs" not in q.provenance
    assert "other processes shared the CPUs while it was measured" in b.provenance
    assert "own CPU time" in b.provenance
