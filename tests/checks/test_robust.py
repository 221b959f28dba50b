"""No file content crashes a check: random, binary, truncated or out-of-range
contents of any file a check reads give a Finding, never a traceback.

Each check first runs on a real recorded node (a 2-socket Xeon with
thermal_throttle, cpuidle and cpufreq, plus EDAC and /proc files added in
real formats) through a probe that records which files it read. Hypothesis
then picks one (check, file) pair and replaces that file's bytes. Live checks
(this process, measured now) are left out: they read this node, not a tree.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ceiling import machine as machine_mod  # noqa: E402
from ceiling.checks import REGISTRY, base, load_all  # noqa: E402
from ceiling.results.model import FAIL, OK, SKIPPED, WARN, Finding  # noqa: E402

from machine_fixtures import Recording, fsroot  # noqa: E402

load_all()

TREE = "32em64t-2n8c+dax+nvme+mic+dimms"

# Files the recorded tree lacks, in the kernel's formats, so that their parsers are reached too.
EXTRA = {
    "proc/meminfo": None,   # present in the tree
    "proc/uptime": "35125.73 69960.44\n",
    "proc/loadavg": "0.52 0.58 0.59 1/389 12345\n",
    "proc/sys/kernel/osrelease": "5.14.0-362.8.1.el9_3.x86_64\n",
    "proc/sys/kernel/perf_event_paranoid": "2\n",
    "proc/sys/kernel/numa_balancing": "1\n",
    "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n",
    "proc/buddyinfo": ("Node 0, zone      DMA      1      0      0      1      2      1      1      0      1      1    "
                       "  3\n"
                       "Node 0, zone   Normal  21005  10320   4311   1203    512    233     97     41     20     12   "
                       "3011\n"
                       "Node 1, zone   Normal  15120   8120   3011    903    412    133     57     21     10      2   "
                       "2811\n"),
    "proc/interrupts": ("            CPU0       CPU1       CPU2       CPU3\n"
                        "   0:         37          0          0          0   IO-APIC    2-edge      timer\n"
                        "  24:    1523345          0          0          0   PCI-MSI 524288-edge      mlx5_comp0\n"
                        "  25:          0     235233          0          0   PCI-MSI 524289-edge      nvme0q1\n"
                        " LOC:    9712310    8733421    8811223    8822211   Local timer interrupts\n"
                        " RES:      12331      11123       9911      10012   Rescheduling interrupts\n"),
    "proc/softirqs": ("                    CPU0       CPU1       CPU2       CPU3\n"
                      "          HI:          1          0          0          0\n"
                      "       TIMER:     512331     433221     422112     421113\n"
                      "      NET_RX:      81233       1212        923        812\n"),
    "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    "sys/devices/system/clocksource/clocksource0/current_clocksource": "tsc\n",
    "sys/devices/system/clocksource/clocksource0/available_clocksource": "tsc hpet acpi_pm\n",
    "sys/devices/system/cpu/intel_pstate/no_turbo": "0\n",
    "sys/devices/system/cpu/smt/control": "on\n",
    "sys/devices/system/cpu/smt/active": "1\n",
    "sys/devices/system/cpu/vulnerabilities/spectre_v2": "Mitigation: Enhanced IBRS, IBPB: conditional, RSB filling\n",
    "sys/devices/system/cpu/vulnerabilities/mds": "Not affected\n",
    "sys/devices/system/edac/mc/mc0/mc_name": "Skylake Socket#0 IMC#0\n",
    "sys/devices/system/edac/mc/mc0/ce_count": "3\n",
    "sys/devices/system/edac/mc/mc0/ue_count": "0\n",
    "sys/devices/system/edac/mc/mc0/ce_noinfo_count": "0\n",
    "sys/devices/system/edac/mc/mc0/ue_noinfo_count": "0\n",
    "sys/devices/system/edac/mc/mc0/seconds_since_reset": "35100\n",
    "sys/devices/system/edac/mc/mc0/dimm0/dimm_label": "CPU_SrcID#0_MC#0_Chan#0_DIMM#0\n",
    "sys/devices/system/edac/mc/mc0/dimm0/dimm_location": "channel 0 slot 0\n",
    "sys/devices/system/edac/mc/mc0/dimm0/dimm_ce_count": "3\n",
    "sys/devices/system/edac/mc/mc0/dimm0/dimm_ue_count": "0\n",
    "sys/devices/system/edac/mc/mc0/dimm0/size": "32768\n",
    "var/log/mcelog": ("Hardware event. This is not a software error.\nMCE 0\nCPU 3 BANK 7 \n"
                       "STATUS 8c00004000010090 MCGSTATUS 0\nMCGCAP 1000c14 APICID 6 SOCKETID 0 \n"),
}


class Recorder(Recording, base.Probe):
    """A probe that remembers every file it read and can swap one file's bytes."""


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = fsroot(TREE, tmp_path_factory, full=True)
    for rel, text in EXTRA.items():
        if text is not None:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    m = machine_mod.detect(str(root), measure=False)
    pairs: List[Tuple[str, str]] = []
    originals: Dict[str, bytes] = {}
    for c in base.select():
        if c.live:
            continue
        p = Recorder(root, m)
        f = base.run_one(c, p, strict=True)
        assert f.status in (OK, WARN, FAIL, SKIPPED)
        for rel in p.seen:
            pairs.append((c.id, rel))
            originals[rel] = (root / rel).read_bytes()
    return root, m, pairs, originals


def test_the_tree_reaches_the_parsers(node):
    """The fuzzing below is only as good as the files the checks really parse."""
    _, _, pairs, _ = node
    read = {rel for _, rel in pairs}
    for rel in ("proc/meminfo", "proc/buddyinfo", "proc/interrupts", "sys/kernel/mm/transparent_hugepage/enabled",
                "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count",
                "sys/devices/system/cpu/cpu0/cpuidle/state0/name",
                "sys/devices/system/edac/mc/mc0/ce_count", "var/log/mcelog",
                "sys/devices/system/clocksource/clocksource0/current_clocksource",
                "proc/sys/kernel/osrelease", "proc/sys/kernel/perf_event_paranoid"):
        assert rel in read, f"no check parsed {rel}"


def mangle(original: bytes):
    """Strategies for one file's replacement bytes."""
    return st.one_of(
        st.just(b""),
        st.binary(max_size=200),
        st.text(max_size=200).map(lambda t: t.encode("utf-8")),
        st.integers(0, max(0, len(original))).map(lambda n: original[:n]),       # truncated
        st.sampled_from([b"-1\n", b"99999999999999999999999\n", b"nan\n", b"0\n", b"max\n", b"\x00\x00",
                         b"Node 0, zone\n", b"CPU0 CPU1\n 1: a b c\n", b"[]\n"]),
        st.lists(st.sampled_from(original.split() or [b"x"]), max_size=30).map(b" ".join),   # shuffled words
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_no_content_crashes_a_check(node, data):
    root, m, pairs, originals = node
    check_id, rel = data.draw(st.sampled_from(pairs), label="check, file")
    content = data.draw(mangle(originals[rel]), label="content")
    p = Recorder(root, m)
    p.swap[rel] = content
    f = base.run_one(REGISTRY[check_id], p, strict=True)    # strict: an exception fails the test
    assert isinstance(f, Finding) and f.status in (OK, WARN, FAIL, SKIPPED)
    assert f.title


def test_every_file_absent(node):
    """Each file a check reads, taken away on its own."""
    root, m, pairs, _ = node
    for check_id, rel in pairs:
        p = Recorder(root, m)
        p.swap[rel] = None
        f = base.run_one(REGISTRY[check_id], p, strict=True)
        assert f.status in (OK, WARN, FAIL, SKIPPED), (check_id, rel)
