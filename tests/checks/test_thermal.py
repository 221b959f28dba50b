"""thermal.throttle_events and thermal.throttling_now on fake and recorded /sys trees.

The fake trees follow the kernel's layout: per-CPU counters in
/sys/devices/system/cpu/cpuN/thermal_throttle/ as described in
Documentation/ABI/testing/sysfs-devices-system-cpu (core_throttle_count,
core_throttle_max_time_ms, core_throttle_total_time_ms, package_throttle_*,
core_power_limit_count, package_power_limit_count; arch/x86/kernel/cpu/mce/
therm_throt.c creates them), each file one decimal number and a newline.
"""
import time
from pathlib import Path

import pytest


from ceiling import machine
from ceiling.checks import base, thermal
from ceiling.machine.model import Clocks, Cpu, Machine
from machine_fixtures import fsroot
from checkutil import write

TT = "sys/devices/system/cpu/cpu{}/thermal_throttle"


def run(check_id, m, root, live=None):
    p = base.Probe.of(m, str(root))
    if live is not None:
        p.live = live
    return base.run_one(base.REGISTRY[check_id], p, strict=True)


def intel_2s(**kw) -> Machine:
    """2 sockets x 2 cores x 2 threads, numbered as Intel machines are: first
    threads of every core, then their siblings (cpu4 is cpu0's sibling)."""
    cpus = [Cpu(id=i, core=i % 4, socket=(i % 4) // 2, node=(i % 4) // 2, smt=i // 4) for i in range(8)]
    return Machine(arch="x86_64", vendor="GenuineIntel", sockets=2, cores=4, threads=8, smt=2, cpus=cpus,
                   affinity=list(range(8)), **kw)


def counters(root: Path, cpu: int, **vals) -> None:
    for name in ("core_throttle_count", "core_throttle_max_time_ms", "core_throttle_total_time_ms",
                 "package_throttle_count", "package_throttle_max_time_ms", "package_throttle_total_time_ms",
                 "core_power_limit_count", "package_power_limit_count"):
        write(root, f"{TT.format(cpu)}/{name}", f"{vals.get(name, 0)}\n")


def healthy_tree(root: Path) -> Path:
    for cpu in range(8):
        counters(root, cpu)
    write(root, "proc/uptime", "269443.52 1071234.40\n")  # 3 d 2 h
    return root


# ---- since boot ----------------------------------------------------------------

def test_all_zero_is_ok_and_says_since_boot(tmp_path):
    f = run("thermal.throttle_events", intel_2s(), healthy_tree(tmp_path))
    assert f.status == "ok" and "since boot" in f.title
    assert "up 3 d 2 h" in f.evidence and "8 CPUs, 4 cores, 2 packages" in f.evidence


def test_counters_are_deduplicated_per_core_and_package(tmp_path):
    root = healthy_tree(tmp_path)
    # Core 1 (socket 0) throttled: both its threads, cpu1 and cpu5, show the same core counter.
    for cpu in (1, 5):
        counters(root, cpu, core_throttle_count=120, core_throttle_total_time_ms=4500, core_throttle_max_time_ms=90)
    # Package 1 throttled: every CPU of socket 1 (cpus 2, 3, 6, 7) shows the same package counter.
    for cpu in (2, 3, 6, 7):
        counters(root, cpu, package_throttle_count=7, package_throttle_total_time_ms=310)
    f = run("thermal.throttle_events", intel_2s(), root)
    assert f.status == "warn"
    assert f.title == "Thermal throttling since boot: 127 events"       # 120 + 7, not 240 + 28
    assert "socket 0: package 0 thermal, package 0 power-limit, cores 120 thermal (4500 ms)" in f.evidence
    assert "socket 1: package 7 thermal (310 ms)" in f.evidence
    assert "worst cores: core 1 (CPU 1,5) on socket 0: 120 thermal (4500 ms)" in f.evidence
    assert "since boot, up 3 d 2 h" in f.evidence and f.fix and f.why
    # thermal events: cooling is the cause, not the power cap
    assert f.data["cause"] == "thermal" and "fans" in f.fix and "power cap" not in f.fix


def test_power_limit_only(tmp_path):
    root = healthy_tree(tmp_path)
    for cpu in (0, 1, 4, 5):
        counters(root, cpu, package_power_limit_count=3000)
    counters(root, 0, package_power_limit_count=3000, core_power_limit_count=12)
    counters(root, 4, package_power_limit_count=3000, core_power_limit_count=12)
    f = run("thermal.throttle_events", intel_2s(), root)
    assert f.status == "warn" and f.title == "Power-limit throttling since boot: 3012 events"
    assert "core 0 (CPU 0,4) on socket 0: 12 power-limit" in f.evidence
    assert f.data["cause"] == "power_limit" and "power cap" in f.fix and "fans" not in f.fix


def test_absent_in_a_vm_or_on_amd(tmp_path):
    write(tmp_path, "sys/devices/system/cpu/cpu0/online", "1\n")
    f = run("thermal.throttle_events", intel_2s(virtualized="KVM"), tmp_path)
    assert f.status == "skipped" and "not exposed" in f.title and "AMD" in f.why


def test_garbled_counters_are_skipped(tmp_path):
    for cpu in range(2):
        for name in ("core_throttle_count", "package_throttle_count"):
            write(tmp_path, f"{TT.format(cpu)}/{name}", "n/a\n")
    f = run("thermal.throttle_events", intel_2s(), tmp_path)
    assert f.status == "skipped" and "not readable" in f.title


def test_no_uptime_says_unknown(tmp_path):
    root = healthy_tree(tmp_path)
    (root / "proc/uptime").write_text("garbage")
    f = run("thermal.throttle_events", intel_2s(), root)
    assert f.status == "ok" and "uptime unknown" in f.evidence


def test_cpu_outside_the_topology_counts_alone(tmp_path):
    root = healthy_tree(tmp_path)
    counters(root, 9, core_throttle_count=5)
    f = run("thermal.throttle_events", intel_2s(), root)
    assert f.status == "warn" and "5 events" in f.title and "cpu9: 5 thermal" in f.evidence


def test_recorded_machine_with_one_hot_core(tmp_path_factory):
    """A recorded 4-socket Xeon with core_throttle_count 237 on CPU 13 (and 0 elsewhere)."""
    root = fsroot("40intel64-4n10c+pci-conflicts", tmp_path_factory, full=True)
    m = machine.detect(str(root), measure=False)
    f = run("thermal.throttle_events", m, root)
    assert f.status == "warn" and f.title == "Thermal throttling since boot: 237 events"
    assert "(CPU 13)" in f.evidence and ": 237 thermal" in f.evidence


@pytest.mark.parametrize("name", ["16em64t-4s2c2t", "32em64t-2n8c+dax+nvme+mic+dimms"])
def test_recorded_machines_without_events(name, tmp_path_factory):
    """16em64t has the old single 'count' file per CPU; 32em64t the core/package split."""
    root = fsroot(name, tmp_path_factory, full=True)
    m = machine.detect(str(root), measure=False)
    f = run("thermal.throttle_events", m, root)
    assert f.status == "ok", f.evidence
    assert f"{m.threads} CPUs, {m.cores} cores, {m.sockets} packages" in f.evidence


# ---- now -------------------------------------------------------------------------

def now_machine(**clk) -> Machine:
    m = intel_2s()
    m.clocks = Clocks(base_ghz=clk.get("base"), base_source="cpufreq base_frequency",
                      max_ghz=clk.get("max"), max_source="cpufreq cpuinfo_max_freq")
    return m


def fake_clock(monkeypatch, all_ghz, single_ghz, during=None, seconds=0.0):
    calls = []

    def measure(cpus, **kw):
        calls.append((list(cpus), kw))
        if during:
            during()
        if seconds:
            time.sleep(seconds)
        return {"measured_all_ghz": all_ghz, "measured_single_ghz": single_ghz, "measured_method": "fake"}
    monkeypatch.setattr(thermal, "measure_clock", measure)
    return calls


def test_counters_rising_under_load_fail(tmp_path, monkeypatch):
    root = healthy_tree(tmp_path)
    calls = fake_clock(monkeypatch, 2.5, 3.6, during=lambda: [
        counters(root, cpu, package_throttle_count=4, package_throttle_total_time_ms=180) for cpu in (2, 3, 6, 7)])
    f = run("thermal.throttling_now", now_machine(base=2.4, max=3.7), root, live=True)
    assert f.status == "fail" and f.title.startswith("Throttling now: 4 thermal events during")
    assert "socket 1: package 4 thermal (180 ms)" in f.evidence
    assert f.data["cause"] == thermal.ROSE and "cooling" in f.fix
    assert calls and calls[0][0] == list(range(8)) and calls[0][1]["reps"] == thermal.WINDOW_REPS


def test_all_core_clock_below_base_fails(tmp_path, monkeypatch):
    root = healthy_tree(tmp_path)
    for cpu in range(8):
        write(root, f"sys/devices/system/cpu/cpu{cpu}/cpufreq/base_frequency", "2400000\n")
    fake_clock(monkeypatch, 2.0, 3.6)
    f = run("thermal.throttling_now", now_machine(base=2.4, max=3.7), root, live=True)
    assert f.status == "fail" and "2.00 GHz under load, 17% below the 2.40 GHz base clock" in f.title
    assert "all-core clock 2.00 GHz = 83% of base 2.40 GHz (cpufreq base_frequency)" in f.evidence
    assert "no thermal_throttle counter rose" in f.evidence
    assert f.data["cause"] == thermal.BELOW_BASE and "cooling" in f.fix and f.needs_root


def test_below_base_in_a_vm_is_a_warning(tmp_path, monkeypatch):
    fake_clock(monkeypatch, 2.0, 3.6)
    m = now_machine(base=2.4, max=3.7)
    m.virtualized = "KVM"
    f = run("thermal.throttling_now", m, tmp_path, live=True)
    assert f.status == "warn" and "KVM VM" in f.title
    # the host sets a VM's clock: no cooling or BMC advice for the guest
    assert f.data["cause"] == thermal.HYPERVISOR and "dedicated" in f.fix and "cooling" not in f.fix
    assert not f.needs_root
    assert "counters: no readable thermal_throttle counters" in f.evidence


def test_below_base_with_competing_load_is_a_warning(tmp_path, monkeypatch):
    root = healthy_tree(tmp_path)
    write(root, "proc/pressure/cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n"
                                     "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    # Other tasks waited 1 s for a CPU during a window of about 0.05 s: far over 10%.
    fake_clock(monkeypatch, 2.0, 3.6, seconds=0.05, during=lambda: write(
        root, "proc/pressure/cpu", "some avg10=50.00 avg60=0.00 avg300=0.00 total=2000000\n"))
    f = run("thermal.throttling_now", now_machine(base=2.4, max=3.7), root, live=True)
    assert f.status == "warn" and "competing load" in f.title
    assert f.data["cause"] == thermal.CONTENDED_LOAD and "idle node" in f.fix and "cooling" not in f.fix
    assert "of the window (/proc/pressure/cpu)" in f.evidence


def test_one_core_below_max_warns(tmp_path, monkeypatch):
    fake_clock(monkeypatch, 2.6, 2.8)
    f = run("thermal.throttling_now", now_machine(base=2.4, max=3.7), healthy_tree(tmp_path), live=True)
    assert f.status == "warn" and "one core reaches 2.80 GHz, 24% below the 3.70 GHz maximum" in f.title


def test_healthy_under_load(tmp_path, monkeypatch):
    fake_clock(monkeypatch, 2.6, 3.6)
    f = run("thermal.throttling_now", now_machine(base=2.4, max=3.7), healthy_tree(tmp_path), live=True)
    assert f.status == "ok", f.title
    assert "108% of base 2.40 GHz" in f.evidence and "97% of max 3.70 GHz" in f.evidence


def test_best_of_window_and_earlier_measurement(tmp_path, monkeypatch):
    """A window slowed by a moment of load does not count when the machine's measurement was fine."""
    fake_clock(monkeypatch, 1.2, 3.6)
    m = now_machine(base=2.4, max=3.7)
    m.clocks.measured_all_ghz, m.clocks.measured_single_ghz = 2.7, 3.5
    f = run("thermal.throttling_now", m, healthy_tree(tmp_path), live=True)
    assert f.status == "ok" and "all-core clock 2.70 GHz" in f.evidence


def test_hybrid_cpu_compares_with_the_lowest_base(tmp_path, monkeypatch):
    root = healthy_tree(tmp_path)
    for cpu in range(8):
        write(root, f"sys/devices/system/cpu/cpu{cpu}/cpufreq/base_frequency", "2400000\n" if cpu < 4 else "1800000\n")
    fake_clock(monkeypatch, 2.0, 4.6)
    f = run("thermal.throttling_now", now_machine(base=2.4, max=4.8), root, live=True)
    assert f.status == "ok" and "base 1.80 GHz" in f.evidence and "range 1.80-2.40 GHz" in f.evidence


def test_cpu_quota_is_not_judged(tmp_path, monkeypatch):
    fake_clock(monkeypatch, 0.5, 3.6)
    m = now_machine(base=2.4, max=3.7)
    m.cgroup = {"cpu_quota_cpus": 2.0}
    f = run("thermal.throttling_now", m, healthy_tree(tmp_path), live=True)
    assert f.status == "ok" and "cgroup CPU quota of 2 CPUs for 8 allowed CPUs" in f.evidence


def test_nothing_to_compare_is_skipped(tmp_path, monkeypatch):
    from ceiling.errors import CoreError

    def broken(cpus, **kw):
        raise CoreError("libceiling_core not found")
    monkeypatch.setattr(thermal, "measure_clock", broken)
    f = run("thermal.throttling_now", now_machine(), tmp_path, live=True)
    assert f.status == "skipped" and "no busy window (CoreError: libceiling_core not found)" in f.evidence


def test_now_is_skipped_on_a_recorded_tree(tmp_path):
    f = run("thermal.throttling_now", now_machine(base=2.4), healthy_tree(tmp_path))
    assert f.status == "skipped" and "recorded tree" in f.title


def test_now_on_this_machine_does_not_crash():
    m = machine.detect("/", measure=False)
    f = run("thermal.throttling_now", m, "/")
    assert f.status in ("ok", "warn", "fail", "skipped") and f.evidence


# ---- garbage in, never a traceback -------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(max_examples=80, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(name=st.sampled_from(["core_throttle_count", "package_throttle_count", "count",
                                        "core_throttle_total_time_ms", "core_power_limit_count"]),
                  content=st.one_of(st.binary(max_size=40), st.text(max_size=40)),
                  uptime=st.one_of(st.binary(max_size=30), st.text(max_size=30)),
                  psi=st.text(max_size=60))
def test_random_counter_contents_never_crash(tmp_path_factory, monkeypatch, name, content, uptime, psi):
    root = tmp_path_factory.mktemp("fuzz")
    healthy_tree(root)
    for cpu in (0, 4, 2):
        f = root / TT.format(cpu) / name
        f.write_bytes(content) if isinstance(content, bytes) else f.write_text(content)
    up = root / "proc/uptime"
    up.write_bytes(uptime) if isinstance(uptime, bytes) else up.write_text(uptime)
    write(root, "proc/pressure/cpu", psi)
    fake_clock(monkeypatch, 2.6, 3.6)
    for cid in ("thermal.throttle_events", "thermal.throttling_now"):
        f = run(cid, now_machine(base=2.4, max=3.7), root, live=True)
        assert f.status in ("ok", "warn", "fail", "skipped")
