"""detect("/") on the machine the tests run on: it works, and it measures a clock.

No timing is asserted: the machine is shared. Only that the figures exist,
are plausible in kind, and agree with what the OS says.
"""
import os
import platform

import pytest

from ceiling import core
from ceiling.errors import CoreError
from ceiling.machine import detect, isa
from ceiling.machine.clocks import measure_clock


def _core_has(kernel: str) -> bool:
    try:
        core.find(kernel)
        return True
    except CoreError:
        return False


def test_detect_live_without_measuring():
    m = detect("/", measure=False, config=False)
    allowed = sorted(os.sched_getaffinity(0))
    assert m.threads == os.cpu_count() or m.threads >= len(allowed)
    assert m.affinity == allowed and m.cores >= 1 and m.sockets >= 1 and len(m.nodes) >= 1
    assert sorted(c for n in m.nodes for c in n.cpus) == sorted(c.id for c in m.cpus if c.online)
    assert m.arch == platform.machine() and m.mem_total_bytes > 0
    assert m.clocks.measured_all_ghz is None and "not measured" in m.clocks.measured_method
    assert set(m.peaks) >= {"flops.dp.node", "membw.node"}
    for p in m.peaks.values():
        assert p.known or p.provenance.startswith("unknown")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="cpuid is x86 only")
def test_cpuid_binding_agrees_with_cpuinfo():
    try:
        q = core.cpuid
        ident = isa.identify(q)
    except CoreError as e:
        pytest.skip(f"C core without cpuid: {e}")
    m = detect("/", measure=False, config=False)
    assert ident["vendor"] == m.vendor
    assert (ident["family"], ident["model"], ident["stepping"]) == (m.family, m.model, m.stepping)
    if "hypervisor" in open("/proc/cpuinfo").read().split():
        assert m.virtualized


@pytest.mark.slow
def test_measured_clock_on_this_machine():
    if not _core_has("clock_add"):
        pytest.skip("the C core has no clock_add kernel")
    m = detect("/", measure=True, config=False)
    c = m.clocks
    assert c.measured_single_ghz and c.measured_all_ghz, c.measured_method
    assert 0.05 < c.measured_all_ghz < 10 and 0.05 < c.measured_single_ghz < 10
    assert set(c.measured_per_cpu_ghz) <= set(m.affinity)
    assert "clock_add" in c.measured_method
    node = m.peaks["flops.dp.node"]
    if node.known:
        assert "measured" in node.provenance
    else:   # no family data, or a family whose widest FMA count depends on the SKU (Cascade Lake's AVX-512)
        assert not m.fma_units_by_bits or "depends on the SKU" in node.provenance, node.provenance


def test_measure_clock_validates_its_arguments():
    with pytest.raises(ValueError):
        measure_clock([])


def test_without_the_clock_kernel_the_clock_is_unknown_not_an_error(monkeypatch):
    from ceiling.machine import clocks

    def missing():
        raise CoreError("no kernel named 'clock_add' in the C core")
    monkeypatch.setattr(clocks, "_kernel", missing)
    m = detect("/", measure=True, config=False)
    assert m.clocks.measured_all_ghz is None
    assert "CoreError" in m.unknowns["clocks.measured"] and "clock_add" in m.clocks.measured_method
    node = m.peaks["flops.dp.node"]
    assert node.known == bool(m.clocks.max_ghz and m.fma_units_by_bits)
