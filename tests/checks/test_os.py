"""os.kernel_age, os.clocksource and os.mitigations on recorded and fake trees.

Fake files follow the kernel's formats: /proc/sys/kernel/osrelease (one line,
the release string), /sys/devices/system/clocksource/clocksource0/
{current,available}_clocksource (Documentation/ABI/testing/sysfs-devices-system-cpu
and Documentation/timers/timekeeping.rst: names separated by spaces), and
/sys/devices/system/cpu/vulnerabilities/* (Documentation/admin-guide/hw-vuln/:
"Not affected", "Vulnerable...", "Mitigation: ...").
"""

from pathlib import Path

from ceiling.checks import base
from ceiling.checks import os as oscheck
from ceiling.machine.model import Machine
from checkutil import run, tree, write

CS = "sys/devices/system/clocksource/clocksource0"
VULN = "sys/devices/system/cpu/vulnerabilities"


def cpu(name="Sapphire Rapids", year=2023) -> Machine:
    facts = {"name": name, "launch_year": year} if year else {}
    return Machine(arch="x86_64", vendor="GenuineIntel", model_name="Intel(R) Xeon(R) Platinum 8480+",
                   cpu_facts=facts)


# ---- os.kernel_age ----------------------------------------------------------------

def test_table_covers_3_10_to_6_18_in_order():
    keys = list(oscheck.KERNEL_RELEASES)
    for v in ["3.10", "4.18", "5.14", "6.18"] + [f"6.{i}" for i in range(19)]:
        assert v in oscheck.KERNEL_RELEASES, v
    dates = list(oscheck.KERNEL_RELEASES.values())
    assert dates == sorted(dates) and len(set(keys)) == len(keys)
    assert oscheck.KERNEL_RELEASES["6.1"] == "2022-12" and oscheck.KERNEL_RELEASES["3.10"] == "2013-06"


def test_series_parsing():
    assert oscheck.series("5.14.0-427.13.1.el9_4.x86_64") == "5.14"
    assert oscheck.series("2.6.32-754.35.1.el6.x86_64") == "2.6.32"
    assert oscheck.series("6.8.0-45-generic") == "6.8"
    assert oscheck.series("vmlinuz") is None


def test_old_rhel_kernel_on_new_cpu_warns_with_backport_note(tmp_path):
    write(tmp_path, "proc/sys/kernel/osrelease", "4.18.0-553.el8_10.x86_64\n")
    f = run("os.kernel_age", cpu(), tmp_path)
    assert f.status == "warn"
    assert f.title.startswith("Kernel Linux 4.18 (2018-08) is older than the CPU (Sapphire Rapids, 2023)")
    assert "Red Hat" in f.title and "backport" in f.why
    assert "kernel 4.18.0-553.el8_10.x86_64 (/proc/sys/kernel/osrelease)" in f.evidence


def test_new_kernel_is_ok_with_both_dates(tmp_path):
    write(tmp_path, "proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    f = run("os.kernel_age", cpu(), tmp_path)
    assert f.status == "ok" and "Linux 6.8 (2024-03)" in f.title and "(2023)" in f.title


def test_kernel_of_the_launch_year_is_ok(tmp_path):
    write(tmp_path, "proc/sys/kernel/osrelease", "6.2.0\n")
    assert run("os.kernel_age", cpu(), tmp_path).status == "ok"


def test_kernel_newer_than_the_table_is_at_least_its_last_date(tmp_path):
    last = list(oscheck.KERNEL_RELEASES)[-1]
    date = oscheck.KERNEL_RELEASES[last]
    write(tmp_path, "proc/sys/kernel/osrelease", "7.3.0\n")
    f = run("os.kernel_age", cpu(), tmp_path)
    assert f.status == "ok" and f.title == f"Kernel Linux 7.3 (after {date}) is not older than the CPU (2023)"
    assert f"newer than {last} ({date})" in f.evidence
    write(tmp_path, "proc/sys/kernel/osrelease", "6.19.0-rc1\n")
    assert run("os.kernel_age", cpu(), tmp_path).status == "ok"
    # Newer than the table but the table's date is before the CPU: only "unknown" is honest.
    write(tmp_path, "proc/sys/kernel/osrelease", "7.3.0\n")
    f = run("os.kernel_age", cpu(year=int(date[:4]) + 1), tmp_path)
    assert f.status == "skipped" and "newer than ceiling's table" in f.title


def test_unknown_kernel_or_cpu_year_is_skipped(tmp_path):
    write(tmp_path, "proc/sys/kernel/osrelease", "2.6.18-419.el5\n")
    f = run("os.kernel_age", cpu(), tmp_path)
    assert f.status == "skipped" and "2.6.18" in f.title
    write(tmp_path, "proc/sys/kernel/osrelease", "6.6.30\n")
    f = run("os.kernel_age", cpu(year=None), tmp_path)
    assert f.status == "skipped" and "launch year" in f.title and "2023-10" in f.title


def test_no_version_on_a_tree_is_skipped(tmp_path):
    assert run("os.kernel_age", cpu(), tmp_path).status == "skipped"
    write(tmp_path, "proc/sys/kernel/osrelease", "\x00garbage\n")
    assert run("os.kernel_age", cpu(), tmp_path).status == "skipped"


def test_recorded_centos7_on_skylake(tmp_path_factory):
    # /proc/version only: "Linux version 3.10.0-1160.15.2.el7.x86_64 ..."
    m, root = tree("32intel64-2p8co2t+8ve", tmp_path_factory)
    f = run("os.kernel_age", m, root)
    assert f.status == "warn" and "Linux 3.10 (2013-06)" in f.title and "2017" in f.title
    assert "(/proc/version)" in f.evidence and "Red Hat" in f.evidence


def test_live_reads_this_kernel():
    # Every kernel in the table or newer than it is from 2009 or later.
    m = Machine(cpu_facts={"launch_year": 2009})
    f = base.run_one(base.REGISTRY["os.kernel_age"], base.Probe.of(m, "/"), strict=True)
    release = Path("/proc/sys/kernel/osrelease").read_text().split()[0]
    assert f"kernel {release} (/proc/sys/kernel/osrelease)" in f.evidence
    assert f.status == "ok" and f"Linux {oscheck.series(release)} " in f.title


# ---- os.clocksource ---------------------------------------------------------------

def clocks(root, current, available):
    write(root, f"{CS}/current_clocksource", current + "\n")
    write(root, f"{CS}/available_clocksource", available + " \n")


def test_clocksource_tsc_and_arm_are_ok(tmp_path):
    clocks(tmp_path, "tsc", "tsc hpet acpi_pm")
    f = run("os.clocksource", cpu(), tmp_path)
    assert f.status == "ok" and f.evidence == "current_clocksource=tsc; available: tsc hpet acpi_pm"
    clocks(tmp_path, "arch_sys_counter", "arch_sys_counter")
    assert run("os.clocksource", cpu(), tmp_path).status == "ok"
    clocks(tmp_path, "kvm-clock", "kvm-clock tsc acpi_pm")
    assert run("os.clocksource", cpu(), tmp_path).status == "ok"


def test_clocksource_hpet_warns_and_offers_tsc(tmp_path):
    clocks(tmp_path, "hpet", "tsc hpet acpi_pm")
    f = run("os.clocksource", cpu(), tmp_path)
    assert f.status == "warn" and "hpet" in f.title
    assert "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource" in f.fix
    assert "clocksource=tsc" in f.fix and f.needs_root
    assert f.data == {"cause": "fast_clock_not_selected", "clocksource": "hpet", "fast_available": ["tsc"]}


def test_clocksource_acpi_pm_without_tsc(tmp_path):
    clocks(tmp_path, "acpi_pm", "hpet acpi_pm")
    f = run("os.clocksource", cpu(), tmp_path)
    assert f.status == "warn" and "unstable" in f.fix
    assert f.data["cause"] == "no_fast_clock" and "echo" not in f.fix


def test_clocksource_unknown_or_absent_is_skipped(tmp_path):
    assert run("os.clocksource", cpu(), tmp_path).status == "skipped"
    clocks(tmp_path, "sun4v_stick", "sun4v_stick")
    f = run("os.clocksource", cpu(), tmp_path)
    assert f.status == "skipped" and "sun4v_stick" in f.title


# ---- os.mitigations ----------------------------------------------------------------

def test_mitigations_recorded_grace(tmp_path_factory):
    m, root = tree("nvidia-dgx-gb10", tmp_path_factory)
    f = run("os.mitigations", m, root)
    assert f.status == "ok" and f.title == "CPU mitigations: 3 in force, 0 vulnerable"
    assert "mitigated: spec_store_bypass, spectre_v1, spectre_v2" in f.evidence
    assert "spectre_v2: IBRS" in f.evidence and "mitigations=off" in f.fix


def test_mitigations_recorded_vulnerable_listed(tmp_path_factory):
    m, root = tree("fakeheteromemtiers", tmp_path_factory)
    f = run("os.mitigations", m, root)
    assert f.status == "ok" and "2 vulnerable" in f.title
    assert "mds (Vulnerable: Clear CPU buffers attempted, no microcode" in f.evidence
    assert "meltdown: PTI" in f.evidence


def test_mitigations_off_on_the_command_line(tmp_path):
    write(tmp_path, f"{VULN}/meltdown", "Vulnerable\n")
    write(tmp_path, f"{VULN}/spectre_v2", "Vulnerable; IBPB: disabled; STIBP: disabled\n")
    write(tmp_path, f"{VULN}/l1tf", "Not affected\n")
    write(tmp_path, "proc/cmdline", "BOOT_IMAGE=/vmlinuz ro mitigations=off\n")
    f = run("os.mitigations", cpu(), tmp_path)
    assert f.status == "ok" and f.title.startswith("CPU mitigations switched off (mitigations=off); 2 vulnerable")
    assert not f.fix


def test_mitigations_absent_or_empty_is_skipped(tmp_path, tmp_path_factory):
    assert run("os.mitigations", cpu(), tmp_path).status == "skipped"
    m, root = tree("32intel64-2p8co2t+8ve", tmp_path_factory)    # the directory recorded empty
    f = run("os.mitigations", m, root)
    assert f.status == "skipped" and "empty" in f.evidence


# ---- no content crashes a check ---------------------------------------------------------

import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

FUZZED = ["proc/sys/kernel/osrelease", "proc/version", f"{CS}/current_clocksource", f"{CS}/available_clocksource",
          f"{VULN}/spectre_v2", f"{VULN}/mds", "proc/cmdline"]
CONTENT = st.one_of(st.binary(max_size=160), st.text(max_size=160).map(str.encode),
                    st.sampled_from([b"", b"99.99999999999\n", b"2.6\n", b"2.6.999999\n", b"Linux version \n",
                                     b"Vulnerable\n", b"Mitigation:\n", b"mitigations=off\n", b"\x00\x00"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rel=st.sampled_from(FUZZED), content=CONTENT)
def test_no_content_crashes_an_os_check(tmp_path, rel, content):
    root = tmp_path / "t"
    if not root.exists():
        write(root, "proc/sys/kernel/osrelease", "5.14.0-427.el9.x86_64\n")
        write(root, "proc/version", "Linux version 5.14.0-427.el9.x86_64 (mockbuild@x) #1 SMP\n")
        clocks(root, "tsc", "tsc hpet acpi_pm")
        write(root, f"{VULN}/spectre_v2", "Mitigation: Enhanced IBRS\n")
        write(root, f"{VULN}/mds", "Not affected\n")
        write(root, "proc/cmdline", "ro quiet\n")
    f = root / rel
    old = f.read_bytes()
    f.write_bytes(content)
    try:
        for cid in ("os.kernel_age", "os.clocksource", "os.mitigations"):
            finding = run(cid, cpu(), root)
            assert finding.status in ("ok", "warn", "fail", "skipped") and finding.title
            assert "\n" not in finding.title
    finally:
        f.write_bytes(old)
