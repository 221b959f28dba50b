"""cpu.clock, cpu.turbo, cpu.governor, cpu.epp, cpu.cstates, cpu.smt and cpu.consistency on recorded and fake trees.

Fake trees follow the kernel's sysfs layout: cpufreq files per CPU in
/sys/devices/system/cpu/cpuN/cpufreq/ (Documentation/admin-guide/pm/cpufreq.rst;
energy_performance_preference from intel_pstate.rst and amd-pstate.rst),
cpuidle in /sys/devices/system/cpu/cpuidle/current_driver and
cpuN/cpuidle/stateK/{name,latency,disable} (Documentation/admin-guide/pm/cpuidle.rst),
SMT in /sys/devices/system/cpu/smt/{control,active} and the online/offline/present
lists (Documentation/ABI/testing/sysfs-devices-system-cpu). Each file is one
value and a newline, as the kernel writes it.
"""
from pathlib import Path


from ceiling.checks import base, cpu, thermal
from ceiling.machine.model import Clocks, Cpu, Machine
from checkutil import run, tree, write

CPU = "sys/devices/system/cpu"


def intel_2s(offline=(), **kw) -> Machine:
    """2 sockets x 2 cores x 2 threads, numbered as Intel machines are (cpu4 is cpu0's sibling)."""
    cpus = [Cpu(id=i, core=i % 4, socket=(i % 4) // 2, node=(i % 4) // 2, smt=i // 4, online=i not in offline)
            for i in range(8)]
    return Machine(arch="x86_64", vendor="GenuineIntel", sockets=2, cores=4, threads=8 - len(offline), smt=2,
                   cpus=cpus, affinity=[i for i in range(8) if i not in offline], **kw)


def amd_2s() -> Machine:
    """2 sockets x 4 cores, no SMT (an EPYC with SMT off in the BIOS)."""
    cpus = [Cpu(id=i, core=i, socket=i // 4, node=i // 4, smt=0) for i in range(8)]
    return Machine(arch="x86_64", vendor="AuthenticAMD", sockets=2, cores=8, threads=8, smt=1, cpus=cpus,
                   affinity=list(range(8)))


def cpufreq(root: Path, cpus, governor="performance", epp=None, smax=3500000, cmax=3500000, smin=800000,
            cmin=800000, driver="intel_pstate"):
    for c in cpus:
        base_ = f"{CPU}/cpu{c}/cpufreq"
        write(root, f"{base_}/scaling_governor", f"{governor}\n")
        write(root, f"{base_}/scaling_driver", f"{driver}\n")
        write(root, f"{base_}/scaling_max_freq", f"{smax}\n")
        write(root, f"{base_}/cpuinfo_max_freq", f"{cmax}\n")
        write(root, f"{base_}/scaling_min_freq", f"{smin}\n")
        write(root, f"{base_}/cpuinfo_min_freq", f"{cmin}\n")
        if epp is not None:
            write(root, f"{base_}/energy_performance_preference", f"{epp}\n")
            write(root, f"{base_}/energy_performance_available_preferences",
                  "default performance balance_performance balance_power power\n")


def idle(root: Path, cpus, states, driver="intel_idle"):
    """states: (name, latency µs, disabled)."""
    write(root, f"{CPU}/cpuidle/current_driver", f"{driver}\n")
    write(root, f"{CPU}/cpuidle/current_governor_ro", "menu\n")
    for c in cpus:
        for k, (name, lat, dis) in enumerate(states):
            d = f"{CPU}/cpu{c}/cpuidle/state{k}"
            write(root, f"{d}/name", f"{name}\n")
            write(root, f"{d}/latency", f"{lat}\n")
            write(root, f"{d}/disable", f"{int(dis)}\n")
            write(root, f"{d}/usage", "1234\n")


# ---- cpu.clock (measured all-core clock against the base clock) --------------------

def clocked(all_ghz, base=None, max_ghz=None, current=None, single=None) -> Machine:
    m = amd_2s()
    m.clocks = Clocks(base_ghz=base, base_source="cpufreq base_frequency" if base else "",
                      max_ghz=max_ghz, max_source="cpufreq cpuinfo_max_freq" if max_ghz else "",
                      current_ghz=current, current_source="/proc/cpuinfo" if current else "",
                      measured_all_ghz=all_ghz, measured_single_ghz=single, measured_method="dependent add chain")
    return m


def test_clock_at_base_is_ok(tmp_path):
    f = run("cpu.clock", clocked(2.40, base=2.45, max_ghz=3.5), tmp_path)
    assert f.status == "ok" and f.title == "Cores run at 2.40 GHz under load"
    assert "base clock of 2.45 GHz (cpufreq base_frequency)" in f.evidence


def test_clock_above_base_is_turbo_and_ok(tmp_path):
    f = run("cpu.clock", clocked(3.0, base=2.0, single=3.5), tmp_path)
    assert f.status == "ok" and "50% above the 2.00 GHz base clock (turbo" in f.title
    assert "3.50 GHz on one core" in f.evidence


def test_clock_below_base_warns_at_the_throttling_threshold(tmp_path):
    # 2.25 / 2.4 = 94%: under the 95% of base that thermal.throttling_now also uses.
    assert cpu.ALL_BELOW_BASE is thermal.ALL_BELOW_BASE == 0.95
    f = run("cpu.clock", clocked(2.25, base=2.4), tmp_path)
    assert f.status == "warn" and f.title == "Cores run 6% below the base clock under load"
    assert run("cpu.clock", clocked(2.30, base=2.4), tmp_path).status == "ok"


def test_clock_without_base_is_skipped_not_compared_with_turbo(tmp_path):
    # AMD/Arm: only the single-core maximum (turbo) and an idle sample are known.
    f = run("cpu.clock", clocked(3.0, max_ghz=3.5, current=1.5), tmp_path)
    assert f.status == "skipped" and "no base clock" in f.title
    assert "maximum 3.50 GHz (cpufreq cpuinfo_max_freq)" in f.evidence and "current 1.50 GHz" in f.evidence
    assert "turbo" in f.why


def test_clock_not_measured_is_skipped(tmp_path):
    f = run("cpu.clock", clocked(None, base=2.4), tmp_path)
    assert f.status == "skipped" and f.title == "Clock under load: not measured"


# ---- cpu.turbo ----------------------------------------------------------------------

def test_turbo_intel_enabled_and_disabled(tmp_path):
    write(tmp_path, f"{CPU}/intel_pstate/no_turbo", "0\n")
    f = run("cpu.turbo", intel_2s(), tmp_path)
    assert f.status == "ok" and f.evidence == "intel_pstate/no_turbo=0"
    write(tmp_path, f"{CPU}/intel_pstate/no_turbo", "1\n")
    f = run("cpu.turbo", intel_2s(), tmp_path)
    assert f.status == "warn" and f.title == "Turbo/boost is disabled" and f.needs_root
    # the switch that is off is the one named
    assert f.data["cause"] == "intel_pstate_no_turbo" and "intel_pstate/no_turbo" in f.fix and "boost" not in f.fix


def test_turbo_cpufreq_boost(tmp_path):
    write(tmp_path, f"{CPU}/cpufreq/boost", "0\n")
    f = run("cpu.turbo", amd_2s(), tmp_path)
    assert f.status == "warn" and f.evidence == "cpufreq/boost=0"
    assert f.data["cause"] == "cpufreq_boost_off" and "cpufreq/boost" in f.fix and "no_turbo" not in f.fix
    write(tmp_path, f"{CPU}/cpufreq/boost", "1\n")
    assert run("cpu.turbo", amd_2s(), tmp_path).status == "ok"


def test_turbo_not_exposed_is_skipped(tmp_path):
    f = run("cpu.turbo", amd_2s(), tmp_path)
    assert f.status == "skipped" and "no intel_pstate/no_turbo and no cpufreq/boost" in f.evidence


# ---- cpu.governor (evidence names the CPUs and the driver) ------------------------

def test_governor_recorded_amd_ondemand(tmp_path_factory):
    m, root = tree("32amd64-4s2n4c-cgroup2", tmp_path_factory)
    f = run("cpu.governor", m, root)
    assert f.status == "warn"
    assert f.evidence == "ondemand on CPUs 0-31 (driver powernow-k8)"


def test_governor_causes(tmp_path):
    """A power-saving governor is a setting to change; no cpufreq (a VM) is nothing to fix."""
    f = run("cpu.governor", intel_2s(), tmp_path)
    assert f.status == "skipped" and f.data["cause"] == "no_cpufreq" and not f.fix
    cpufreq(tmp_path, range(8), governor="powersave")
    f = run("cpu.governor", intel_2s(), tmp_path)
    assert f.data == {"cause": "power_saving_governor", "governors": ["powersave"]} and "performance" in f.fix


def test_governor_mixed_names_both_groups(tmp_path):
    cpufreq(tmp_path, range(4))
    cpufreq(tmp_path, range(4, 8), governor="powersave")
    f = run("cpu.governor", intel_2s(), tmp_path)
    assert f.status == "warn" and "performance on CPUs 0-3; powersave on CPUs 4-7" in f.evidence


# ---- cpu.epp ------------------------------------------------------------------------

def test_epp_performance_everywhere_is_ok(tmp_path):
    cpufreq(tmp_path, range(8), epp="performance")
    f = run("cpu.epp", intel_2s(), tmp_path)
    assert f.status == "ok" and f.evidence == "performance on CPUs 0-7 (driver intel_pstate)"


def test_epp_balance_power_on_some_cpus_warns(tmp_path):
    cpufreq(tmp_path, range(4), epp="performance")
    cpufreq(tmp_path, range(4, 8), epp="balance_power", governor="powersave")
    f = run("cpu.epp", intel_2s(), tmp_path)
    assert f.status == "warn" and "4 of 8 CPUs" in f.title
    assert "balance_power on CPUs 4-7" in f.evidence and f.needs_root
    assert "energy_performance_preference" in f.fix


def test_epp_raw_numbers_read_back(tmp_path):
    # A raw value written by an admin reads back as a number; 0 is performance.
    cpufreq(tmp_path, range(8), epp="0", driver="amd-pstate-epp")
    assert run("cpu.epp", amd_2s(), tmp_path).status == "ok"
    cpufreq(tmp_path, range(8), epp="200", driver="amd-pstate-epp")
    f = run("cpu.epp", amd_2s(), tmp_path)
    assert f.status == "warn" and "raw 200 on CPUs 0-7 (driver amd-pstate-epp)" in f.evidence


def test_epp_absent_is_skipped(tmp_path):
    cpufreq(tmp_path, range(8), driver="acpi-cpufreq")
    f = run("cpu.epp", intel_2s(), tmp_path)
    assert f.status == "skipped" and "energy_performance_preference" in f.evidence


def test_epp_recorded_laptop_balance_performance(tmp_path_factory):
    m, root = tree("20em64t-hybrid-1p6c2t+2ca4co1t", tmp_path_factory)
    f = run("cpu.epp", m, root)
    assert f.status == "warn" and "20 of 20 CPUs" in f.title
    assert f.evidence == "balance_performance on CPUs 0-19 (driver intel_pstate)"


def test_epp_recorded_grace_cppc_value(tmp_path_factory):
    # cppc_cpufreq has only energy_performance_preference_val; 0 means performance.
    m, root = tree("nvidia-dgx-gb10", tmp_path_factory)
    f = run("cpu.epp", m, root)
    assert f.status == "ok" and f.evidence == "performance on CPUs 0-19 (driver cppc_cpufreq)"


# ---- cpu.cstates ---------------------------------------------------------------------

def test_cstates_recorded_nehalem_c6_warns(tmp_path_factory):
    m, root = tree("40intel64-4n10c+pci-conflicts", tmp_path_factory)
    f = run("cpu.cstates", m, root)
    assert f.status == "warn"
    assert f.title == "Deep C-states enabled: NHM-C6 with 200 µs exit latency on 40 of 40 CPUs"
    assert "idle driver intel_idle" in f.evidence and "NHM-C3 20 µs" in f.evidence
    assert "cpupower idle-set -D 50" in f.fix and f.needs_root
    # the boot parameter of the idle driver in use, not the other one
    assert f.data["cause"] == "deep_cstates" and "intel_idle.max_cstate=1" in f.fix and "processor." not in f.fix


def test_cstates_recorded_acpi_idle_c2_c3(tmp_path_factory):
    m, root = tree("32em64t-2n8c+dax+nvme+mic+dimms", tmp_path_factory)
    f = run("cpu.cstates", m, root)
    assert f.status == "warn" and "93 µs" in f.title and "16 of 16 CPUs" in f.title
    assert "acpi_idle" in f.evidence
    assert f.data["driver"] == "acpi_idle" and "processor.max_cstate=1" in f.fix and "intel_idle" not in f.fix


def test_cstates_amd_acpi_c2_disabled_is_ok(tmp_path):
    idle(tmp_path, range(8), [("POLL", 0, False), ("C1", 1, False), ("C2", 400, True)], driver="acpi_idle")
    f = run("cpu.cstates", amd_2s(), tmp_path)
    assert f.status == "ok" and "C2 400 µs (disabled)" in f.evidence


def test_cstates_deep_state_on_some_cpus_named(tmp_path):
    idle(tmp_path, range(8), [("POLL", 0, False), ("C1", 2, False), ("C1E", 10, False), ("C6", 170, True)])
    idle(tmp_path, [6, 7], [("POLL", 0, False), ("C1", 2, False), ("C1E", 10, False), ("C6", 170, False)])
    f = run("cpu.cstates", intel_2s(), tmp_path)
    assert f.status == "warn" and "C6 with 170 µs exit latency on 2 of 8 CPUs" in f.title
    assert "C6 (170 µs) on CPUs 6-7" in f.evidence


def test_cstates_missing_disable_file_means_enabled(tmp_path):
    idle(tmp_path, range(8), [("C1", 3, False), ("C3", 80, False)])
    for c in range(8):
        (tmp_path / f"{CPU}/cpu{c}/cpuidle/state1/disable").unlink()
    assert run("cpu.cstates", intel_2s(), tmp_path).status == "warn"


def test_cstates_vm_haltpoll_is_ok(tmp_path):
    idle(tmp_path, range(8), [("POLL", 0, False), ("haltpoll idle", 1, False)], driver="haltpoll")
    f = run("cpu.cstates", intel_2s(), tmp_path)
    assert f.status == "ok" and "haltpoll" in f.evidence


def test_cstates_no_cpuidle_is_skipped_and_none_driver_ok(tmp_path):
    assert run("cpu.cstates", intel_2s(), tmp_path).status == "skipped"
    write(tmp_path, f"{CPU}/cpuidle/current_driver", "none\n")
    f = run("cpu.cstates", intel_2s(), tmp_path)
    assert f.status == "ok" and "HLT" in f.title


def test_cstates_driver_without_states_is_skipped(tmp_path_factory):
    m, root = tree("32intel64-2p8co2t+8ve", tmp_path_factory)
    f = run("cpu.cstates", m, root)
    assert f.status == "skipped" and "intel_idle" in f.title


def test_cstates_garbled_latency_is_not_a_number(tmp_path):
    idle(tmp_path, range(8), [("C1", 2, False), ("C6", 133, False)])
    for c in range(8):
        write(tmp_path, f"{CPU}/cpu{c}/cpuidle/state1/latency", "lots\n")
    f = run("cpu.cstates", intel_2s(), tmp_path)
    assert f.status == "ok" and "C6 ? µs" in f.evidence


# ---- cpu.smt --------------------------------------------------------------------------

def test_smt_on_is_informational(tmp_path_factory):
    m, root = tree("20em64t-hybrid-1p6c2t+2ca4co1t", tmp_path_factory)
    f = run("cpu.smt", m, root)
    assert f.status == "ok" and f.title == "SMT is on (2 threads per core)"
    assert "smt/control=on" in f.evidence and "OMP_PLACES=cores" in f.why


def test_smt_recorded_offline_siblings_warn(tmp_path_factory):
    m, root = tree("16em64t-4s2c2t-offlines", tmp_path_factory)
    f = run("cpu.smt", m, root)
    assert f.status == "warn" and "2 cores have siblings offline" in f.title
    assert "CPUs 6,10 run with fewer than 2 threads per core" in f.evidence
    assert "offline CPUs 2,5,13-14" in f.evidence


def test_smt_states(tmp_path):
    m = amd_2s()
    for control, active, title in (("off", 0, "SMT is off"), ("forceoff", 0, "SMT is off (forced"),
                                   ("notsupported", 0, "SMT: not available")):
        write(tmp_path, f"{CPU}/smt/control", f"{control}\n")
        write(tmp_path, f"{CPU}/smt/active", f"{active}\n")
        f = run("cpu.smt", m, tmp_path)
        assert f.status == "ok" and f.title.startswith(title), control


def test_smt_on_with_a_sibling_offline(tmp_path):
    write(tmp_path, f"{CPU}/smt/control", "on\n")
    write(tmp_path, f"{CPU}/smt/active", "1\n")
    write(tmp_path, f"{CPU}/present", "0-7\n")
    write(tmp_path, f"{CPU}/offline", "5\n")
    f = run("cpu.smt", intel_2s(offline=(5,)), tmp_path)
    assert f.status == "warn" and "CPU 1 run with fewer than 2" in f.evidence


# ---- cpu.consistency --------------------------------------------------------------------

def test_consistency_uniform_is_ok(tmp_path):
    cpufreq(tmp_path, range(8), epp="performance")
    f = run("cpu.consistency", intel_2s(), tmp_path)
    assert f.status == "ok" and f.title == "All 8 online CPUs have the same clock settings"
    assert "hardware maximum 3.50 GHz" in f.evidence


def test_consistency_cap_names_cpus_and_cap(tmp_path):
    cpufreq(tmp_path, range(4))
    cpufreq(tmp_path, range(4, 8), smax=2000000)
    f = run("cpu.consistency", intel_2s(), tmp_path)
    assert f.status == "warn"
    assert "CPUs 4-7 capped at 2.00 GHz (hardware maximum 3.50 GHz)" in f.evidence
    assert f.data["cause"] == "capped" and "-u MAX" in f.fix and "online" not in f.fix and "-d MIN" not in f.fix


def test_consistency_min_clock_differs_governor_epp_left_to_their_checks(tmp_path):
    cpufreq(tmp_path, range(6), epp="performance")
    cpufreq(tmp_path, (6, 7), governor="powersave", epp="power", smin=2000000)
    f = run("cpu.consistency", intel_2s(), tmp_path)
    assert f.status == "warn"
    assert "minimum clock differs: at the hardware minimum on CPUs 0-5; raised to 2.00 GHz on CPUs 6-7" in f.evidence
    # cpu.governor and cpu.epp warn about these; consistency does not say it again.
    assert "governor" not in f.evidence and "energy-performance" not in f.evidence
    assert f.data["cause"] == "min_clock_differs" and "-d MIN" in f.fix and "-u MAX" not in f.fix


def test_consistency_ignores_governor_and_epp_differences(tmp_path):
    cpufreq(tmp_path, range(6), epp="performance")
    cpufreq(tmp_path, (6, 7), governor="powersave", epp="power")
    assert run("cpu.consistency", intel_2s(), tmp_path).status == "ok"
    assert run("cpu.governor", intel_2s(), tmp_path).status == "warn"
    assert run("cpu.epp", intel_2s(), tmp_path).status == "warn"


def test_consistency_recorded_offline_cpus(tmp_path_factory):
    m, root = tree("offline-cpu0-node0", tmp_path_factory)
    f = run("cpu.consistency", m, root)
    # CPUs missing from a node with SMT on: a node to drain (issue 10, item 6)
    assert f.status == "fail" and "CPUs 0-3,21-23 offline" in f.title
    assert "offline=0-3,21-191" in f.evidence and "present=0-23" in f.evidence
    assert f.data["cause"] == "cpus_offline" and "cpuN/online" in f.fix and "frequency-set" not in f.fix


def test_consistency_offline_siblings_with_smt_off_only_warn(tmp_path_factory, tmp_path):
    import shutil
    m, root = tree("offline-cpu0-node0", tmp_path_factory)
    copy = tmp_path / "t"
    import os
    import stat

    def regular_only(src, dst):          # the recorded tree holds FIFOs and devices: never open them
        if stat.S_ISREG(os.lstat(src).st_mode):
            shutil.copy2(src, dst)
    shutil.copytree(root, copy, symlinks=True, copy_function=regular_only)
    (copy / "sys/devices/system/cpu/smt").mkdir(parents=True, exist_ok=True)
    (copy / "sys/devices/system/cpu/smt/control").write_text("off\n")
    f = run("cpu.consistency", m, copy)
    assert f.status == "warn" and "SMT is switched off" in f.evidence
    # siblings offline by design: nothing to bring online unless SMT should be on
    assert f.data["cause"] == "smt_off" and "cpuN/online" not in f.fix and "smt/control" in f.fix


def test_consistency_possible_but_absent_cpus_are_not_offline(tmp_path_factory):
    # offline=16-127 there: CPUs the kernel could hold, not CPUs switched off.
    m, root = tree("32em64t-2n8c+dax+nvme+mic+dimms", tmp_path_factory)
    f = run("cpu.consistency", m, root)
    assert f.status == "ok" and "16 online CPUs" in f.evidence


def test_consistency_hybrid_core_types_are_not_inconsistent(tmp_path_factory):
    m, root = tree("nvidia-dgx-gb10", tmp_path_factory)
    f = run("cpu.consistency", m, root)
    assert f.status == "ok"
    assert "hardware maxima differ by core type: 2.81 GHz on CPUs 0-4,10-14; 3.90 GHz on CPUs 5-9,15-19" in f.evidence


def test_consistency_without_cpufreq(tmp_path):
    f = run("cpu.consistency", amd_2s(), tmp_path)
    assert f.status == "ok" and "no cpufreq to compare" in f.evidence


def test_cpulist_is_bounded():
    assert cpu.cpulist("0-3,8") == [0, 1, 2, 3, 8]
    assert cpu.cpulist("0-99999999") == [] and cpu.cpulist("junk") == [] and cpu.cpulist(None) == []


def test_explanations_written():
    for cid in ("cpu.clock", "cpu.epp", "cpu.cstates", "cpu.smt", "cpu.consistency"):
        text = base.REGISTRY[cid].explain
        assert "warn" in text and "Fix" in text, cid


# ---- no content crashes a check ---------------------------------------------------------

import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

FUZZED = [f"{CPU}/cpu5/cpufreq/{n}" for n in ("scaling_governor", "energy_performance_preference",
                                              "scaling_max_freq", "cpuinfo_max_freq", "scaling_min_freq",
                                              "cpuinfo_min_freq", "scaling_driver")] + \
         [f"{CPU}/cpu5/cpuidle/state1/{n}" for n in ("name", "latency", "disable")] + \
         [f"{CPU}/cpuidle/current_driver", f"{CPU}/smt/control", f"{CPU}/smt/active", f"{CPU}/offline",
          f"{CPU}/present"]
CONTENT = st.one_of(st.binary(max_size=120), st.text(max_size=120).map(str.encode),
                    st.sampled_from([b"", b"-1\n", b"0\n", b"99999999999999999999999999\n", b"0x10\n", b"1_0\n",
                                     b"0-4294967295\n", b"3-1\n", b"nan\n", b"\x00\x00"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rel=st.sampled_from(FUZZED), content=CONTENT)
def test_no_content_crashes_a_cpu_check(tmp_path, rel, content):
    root = tmp_path / "t"
    if not root.exists():
        cpufreq(root, range(8), epp="performance")
        idle(root, range(8), [("POLL", 0, False), ("C1", 2, False), ("C6", 133, False)])
        write(root, f"{CPU}/smt/control", "on\n")
        write(root, f"{CPU}/smt/active", "1\n")
        write(root, f"{CPU}/offline", "\n")
        write(root, f"{CPU}/present", "0-7\n")
    f = root / rel
    old = f.read_bytes()
    f.write_bytes(content)
    try:
        for m in (intel_2s(), intel_2s(offline=(1,))):
            for cid in ("cpu.governor", "cpu.turbo", "cpu.epp", "cpu.cstates", "cpu.smt", "cpu.consistency"):
                finding = run(cid, m, root)
                assert finding.status in ("ok", "warn", "fail", "skipped") and finding.title
                assert "\n" not in finding.title
    finally:
        f.write_bytes(old)
