"""perf.paranoid on fake trees, perf.pmu live on this node, and the decision logic apart.

/proc/sys/kernel/perf_event_paranoid holds one integer
(Documentation/admin-guide/sysctl/kernel.rst). The perf_event_attr layout is
include/uapi/linux/perf_event.h.
"""
import errno
import os
import platform
from pathlib import Path

from ceiling.checks import base, perf
from ceiling.machine.model import Machine
from checkutil import write

PARANOID = "proc/sys/kernel/perf_event_paranoid"


def run(check_id, root, m=None):
    return base.run_one(base.REGISTRY[check_id], base.Probe.of(m or Machine(), str(root)), strict=True)


# ---- perf.paranoid ---------------------------------------------------------------

def test_paranoid_2_warns_for_an_unprivileged_user(tmp_path):
    write(tmp_path, PARANOID, "2\n")
    f = run("perf.paranoid", tmp_path)
    assert f.status == "warn" and f.title == "Profiling restricted for an unprivileged user: perf_event_paranoid=2"
    assert "per-process counting of user-space code only" in f.evidence
    assert "kernel time, system-wide counting and uncore" in f.why
    assert "perf_event_paranoid=1" in f.fix and f.needs_root


def test_paranoid_distribution_levels_lose_everything(tmp_path):
    for level in ("3", "4"):
        write(tmp_path, PARANOID, level + "\n")
        f = run("perf.paranoid", tmp_path)
        assert f.status == "warn" and "all hardware counters" in f.why and "CAP_PERFMON" in f.evidence


def test_paranoid_permissive_levels_are_ok(tmp_path):
    for level, words in (("-1", "everything"), ("0", "no raw tracepoints"), ("1", "no CPU-wide")):
        write(tmp_path, PARANOID, level + "\n")
        f = run("perf.paranoid", tmp_path)
        assert f.status == "ok" and words in f.evidence, level
    assert "uncore and system-wide counting need 0" in f.evidence     # level 1


def test_paranoid_absent_or_garbled_is_skipped(tmp_path):
    assert run("perf.paranoid", tmp_path).status == "skipped"
    write(tmp_path, PARANOID, "two\n")
    f = run("perf.paranoid", tmp_path)
    assert f.status == "skipped" and "'two'" in f.evidence


def test_paranoid_privileged_user_is_ok():
    f = perf.paranoid_verdict(3, True)
    assert f.status == "ok" and "CAP_PERFMON" in f.title
    f = perf.paranoid_verdict(2, False)
    assert f.status == "warn" and "this user" in f.title


def test_paranoid_live_reads_this_node_and_process():
    probe = base.Probe.of(Machine(), "/")
    f = base.run_one(base.REGISTRY["perf.paranoid"], probe, strict=True)
    try:
        level = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        assert f.status == "skipped" and "perf_event_paranoid" in f.evidence
        return
    assert f.evidence.startswith(f"perf_event_paranoid={level}: unprivileged users get {perf.allowed(level)}")
    priv = perf.privileged(probe)
    assert priv is not None                        # live: CapEff from /proc/self/status, else the uid
    assert f.status == ("ok" if priv or level < 2 else "warn")
    assert ("this process is privileged" in f.evidence) == bool(priv)


# ---- perf_event_open ---------------------------------------------------------------

def test_attr_layout_matches_the_uapi_header():
    A = perf.PerfEventAttr
    assert perf.ATTR_SIZE == 128                         # PERF_ATTR_SIZE_VER7
    assert (A.config.offset, A.sample_period.offset, A.flags.offset) == (8, 16, 40)
    assert (A.wakeup_events.offset, A.bp_type.offset, A.config1.offset, A.config2.offset) == (48, 52, 56, 64)
    assert (A.sample_regs_intr.offset, A.aux_watermark.offset, A.sample_max_stack.offset) == (96, 104, 108)
    assert (A.aux_sample_size.offset, A.sig_data.offset) == (112, 120)
    assert perf.ATTR_EXCLUDE_KERNEL == 1 << 5 and perf.ATTR_EXCLUDE_HV == 1 << 6 and perf.ATTR_DISABLED == 1


def test_count_hw_returns_a_count_or_an_errno():
    for _, config in perf.HW_EVENTS:
        value, err = perf.count_hw(config)
        assert (value is None) != (err is None)
        assert err is None or isinstance(err, int)
    assert perf.count_hw(0, machine="sparc64") == (None, errno.ENOSYS)


def no_core_pmu() -> bool:
    try:
        names = os.listdir("/sys/bus/event_source/devices")
    except OSError:
        return True
    return not any(perf.CORE_PMUS.match(n) for n in names)


def test_pmu_live_gives_a_finding():
    m = Machine(arch=platform.machine())
    f = base.run_one(base.REGISTRY["perf.pmu"], base.Probe.of(m, "/"), strict=True)
    assert f.status in ("ok", "warn", "skipped") and f.title
    assert "perf_event_open on this process" in f.evidence
    if no_core_pmu() and platform.machine() in perf.SYSCALL_NR:
        # This development VM: no core PMU in sysfs, so the hardware events cannot open.
        assert f.status == "warn" and "cannot be opened" in f.title
        assert "core PMU: none" in f.evidence
        assert "ENOENT" in f.evidence or "EOPNOTSUPP" in f.evidence or "ENODEV" in f.evidence
        assert "LIKWID" in f.why and "only timings remain" in f.why


def test_pmu_on_a_tree_is_skipped(tmp_path):
    f = run("perf.pmu", tmp_path)
    assert f.status == "skipped" and "recorded tree" in f.title


# ---- decision logic -------------------------------------------------------------------

SKX = ["breakpoint", "cpu", "cstate_core", "intel_pt", "msr", "power", "software", "tracepoint",
       "uncore_imc_0", "uncore_imc_1", "uncore_cha_0", "uprobe"]


def test_verdict_counters_work():
    f = perf.pmu_verdict(SKX, {"cycles": (1_000_000, None), "instructions": (2_500_000, None)}, 1)
    assert f.status == "ok"
    assert f.title == "Hardware counters work: cycles and instructions counted"
    assert "sanity check that the counters count: 2.50 instructions per cycle" in f.evidence
    assert "profile" not in f.why and "LIKWID" in f.why
    assert "core PMU: cpu" in f.evidence and "uncore PMUs: 3" in f.evidence
    assert "cycles 1,000,000" in f.evidence and "memory-bandwidth" in f.why


def test_verdict_vm_without_pmu():
    pmus = ["breakpoint", "msr", "software", "tracepoint", "uprobe"]
    f = perf.pmu_verdict(pmus, {"cycles": (None, errno.ENOENT), "instructions": (None, errno.ENOENT)}, 2)
    assert f.status == "warn" and "(ENOENT)" in f.title
    assert "core PMU: none" in f.evidence and "no PMU" in f.evidence
    assert "virtual PMU" in f.fix and "perf stat/record, LIKWID and PAPI cannot count cycles" in f.why


def test_verdict_permission_denied_names_paranoid_and_seccomp():
    f = perf.pmu_verdict(SKX, {"cycles": (None, errno.EACCES), "instructions": (None, errno.EACCES)}, 3)
    assert f.status == "warn" and "EACCES" in f.title and "perf_event_paranoid=3" in f.evidence
    assert "perf_event_paranoid" in f.fix
    f = perf.pmu_verdict(SKX, {"cycles": (None, errno.EPERM)}, 2)
    assert "seccomp" in f.evidence and "seccomp" in f.fix


def test_verdict_counters_that_count_nothing():
    f = perf.pmu_verdict(["cpu", "software"], {"cycles": (0, None), "instructions": (0, None)}, 2)
    assert f.status == "warn" and "count nothing" in f.title


def test_verdict_arm_pmu_names():
    f = perf.pmu_verdict(["armv8_pmuv3_0", "arm_cmn_0", "software"],
                         {"cycles": (10, None), "instructions": (12, None)}, None)
    assert f.status == "ok" and "core PMU: armv8_pmuv3_0" in f.evidence and "uncore PMUs: 1" in f.evidence


# ---- no content crashes a check ---------------------------------------------------------

import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=100, deadline=None)
@given(content=st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode),
                         st.sampled_from([b"-99999999999999999999\n", b"99999999999999999999\n", b"0x2\n"])))
def test_no_content_crashes_paranoid(content):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "proc/sys/kernel").mkdir(parents=True)
        (Path(d) / PARANOID).write_bytes(content)
        f = run("perf.paranoid", d)
        assert f.status in ("ok", "warn", "skipped") and f.title


@settings(max_examples=100, deadline=None)
@given(pmus=st.lists(st.text(max_size=20), max_size=30),
       counts=st.dictionaries(st.sampled_from(["cycles", "instructions"]),
                              st.one_of(st.tuples(st.integers(0, 2 ** 64 - 1), st.none()),
                                        st.tuples(st.none(), st.integers(1, 200)))),
       level=st.one_of(st.none(), st.integers(-5, 10)))
def test_verdict_never_crashes(pmus, counts, level):
    f = perf.pmu_verdict(pmus, counts, level)
    assert f.status in ("ok", "warn", "skipped") and f.title
