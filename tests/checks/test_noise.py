"""noise.os: the selfish-detour probe (csrc/kernels/noise.c), the interrupt and
softirq deltas, the verdict on given windows, and one live run that must find
the noise of a busy co-runner pinned on the same CPU. No timing is asserted
beyond "a CPU shared half-and-half loses much more than 20% of its time".
"""
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings, strategies as st

from ceiling import core
from ceiling.checks import base, noise
from ceiling.errors import CoreError
from ceiling.machine.model import Cpu, Machine
from ceiling.results.model import OK, SKIPPED, WARN

CPUS = sorted(os.sched_getaffinity(0))


def live_machine(cpus):
    return Machine(hostname="live", cpus=[Cpu(id=c, core=c, socket=0, node=0, smt=0) for c in CPUS],
                   affinity=list(cpus))


# -- the C probe -------------------------------------------------------------------

def test_probe_sanity_on_one_cpu():
    cpu = CPUS[-1]
    before = os.sched_getaffinity(0)
    r = core.noise_detour([cpu], 0.2, threshold_ns=1000, top=4)
    assert r.valid, r.msg
    assert os.sched_getaffinity(0) == before               # the caller's mask is put back
    (c,) = r.cpus
    assert c.cpu == cpu and c.ran_on == cpu
    assert c.reads > 0 and 0 < c.window_s
    assert 0 <= c.detour_s <= c.window_s                    # detours fit in the window
    assert 0 < c.min_gap_s <= c.max_gap_s
    assert 0.0 <= c.fraction <= 1.0
    assert len(c.top) <= 4 and len(c.top) <= c.detours
    lengths = [g[1] for g in c.top]
    assert lengths == sorted(lengths, reverse=True)         # longest first
    assert all(g > 1000e-9 for g in lengths)                # only gaps over the threshold
    assert sum(lengths) <= c.detour_s + 1e-12
    assert all(0 <= g[0] <= c.window_s + c.start_s + 1e-6 for g in c.top)   # offsets inside the window
    if c.top:
        assert c.max_gap_s == pytest.approx(lengths[0])


def test_probe_all_cpus_in_one_window():
    r = core.noise_detour(CPUS, 0.1, top=2)
    assert r.valid, r.msg
    assert [c.cpu for c in r.cpus] == CPUS
    assert [c.ran_on for c in r.cpus] == CPUS
    assert all(c.reads > 0 for c in r.cpus)


def test_threshold_zero_means_one_microsecond():
    r = core.noise_detour(CPUS[:1], 0.05, threshold_ns=0, top=3)
    assert r.valid and r.threshold_ns == 1000
    assert all(g[1] > 1000e-9 for g in r.cpus[0].top)


@pytest.mark.parametrize("kw", [dict(duration_s=0.0), dict(duration_s=-1.0), dict(top=5000),
                                dict(threshold_ns=-5)])
def test_probe_rejects_bad_parameters(kw):
    args = dict(cpus=CPUS[:1], duration_s=0.01, threshold_ns=1000, top=2)
    args.update(kw)
    with pytest.raises(CoreError, match="invalid parameter"):
        core.noise_detour(**args)


def test_probe_reports_a_cpu_it_cannot_pin():
    bad = max(set(range(1024)) - set(CPUS), default=None)     # a CPU outside this process's mask
    if bad is None:
        pytest.skip("every CPU id below 1024 is in this process's mask")
    with pytest.raises(CoreError, match=f"CPU {bad}"):
        core.noise_detour([bad], 0.01)
    with pytest.raises(CoreError):
        core.noise_detour([], 0.01)


# -- live: a busy co-runner on the same CPU is noise, and is named ----------------

SPIN = "import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"


def test_finds_a_busy_co_runner_on_the_same_cpu():
    cpu = CPUS[-1]
    hog = subprocess.Popen([sys.executable, "-c", SPIN.format(cpu=cpu)])
    try:
        time.sleep(0.3)                          # started, pinned and spinning
        assert hog.poll() is None
        p = base.Probe.of(live_machine([cpu]), "/", base.Options(noise_s=0.5))
        w = noise.measure(p, [cpu], 0.5)
        f = noise.judge(w)
    finally:
        hog.kill()
        hog.wait()
    (c,) = w.result.cpus
    assert w.result.valid, w.result.msg
    assert c.fraction > 0.2, c                   # CFS shares the CPU about half and half
    pids = [x[0] for x in w.procs]
    assert hog.pid in pids, w.procs              # the co-runner is named among the processes that ran
    share = dict((x[0], x[2]) for x in w.procs)[hog.pid]
    assert share > 0.1
    assert f.status == WARN
    assert f"CPU {cpu}" in f.title
    assert f"CPU {cpu} {100 * c.fraction:.2f}%" in f.evidence          # per-CPU fractions, pasteable
    named = [x[0] for x in w.procs if x[2] >= 0.01][:noise.TOP_SOURCES]
    if hog.pid in named:
        assert f"pid {hog.pid} (python" in f.evidence
        # the cause is the co-runner, and the fix names it instead of kernel parameters
        assert f"pid {hog.pid} (python" in f.fix
    assert f.data["cause"] == noise.COMPETING and "nohz_full" not in f.fix
    assert f.fix and f.why


def test_the_check_runs_through_the_registry():
    cpu = CPUS[0]
    p = base.Probe.of(live_machine([cpu]), "/", base.Options(noise_s=0.2))
    f = base.run_one(base.REGISTRY["noise.os"], p, strict=True)
    assert f.id == "noise.os" and f.status in (OK, WARN)
    assert f"noise per CPU over 0.2 s (detour time / window): CPU {cpu} " in f.evidence
    assert "probe: detour = gap between clock reads >" in f.evidence
    assert "interrupts" in f.evidence and "softirqs" in f.evidence


def test_skipped_on_a_recorded_tree_and_when_disabled(tmp_path):
    c = base.REGISTRY["noise.os"]
    f = base.run_one(c, base.Probe.of(live_machine(CPUS), str(tmp_path)), strict=True)
    assert f.status == SKIPPED and "recorded tree" in f.title
    f = base.run_one(c, base.Probe.of(live_machine(CPUS), "/", base.Options(noise_s=0)), strict=True)
    assert f.status == SKIPPED and "not measured" in f.title
    empty = Machine(hostname="none")
    f = base.run_one(c, base.Probe.of(empty, "/"), strict=True)
    assert f.status == SKIPPED and "no CPU" in f.title


# -- /proc/interrupts and /proc/softirqs ------------------------------------------
# Formats as the kernel prints them (fs/proc/interrupts.c -> show_interrupts(),
# arch_show_interrupts(); fs/proc/softirqs.c; Documentation/filesystems/proc.rst,
# "1.2 Kernel data": /proc/interrupts and /proc/softirqs). Header: the online CPUs.

X86_BEFORE = """\
           CPU0       CPU1       CPU2       CPU3
  0:         22          0          0          0   IO-APIC   2-edge      timer
  8:          0          0          1          0   IO-APIC   8-edge      rtc0
 36:          0    1211522          0          5   PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
124:        100        200        300        400   PCI-MSI 524288-edge      nvme0q1
NMI:          0          0          0          0   Non-maskable interrupts
LOC:    2209708    1217178    1000000    1000000   Local timer interrupts
RES:     141305      97792         10         10   Rescheduling interrupts
ERR:          0
MIS:          0
"""
X86_AFTER = """\
           CPU0       CPU1       CPU2       CPU3
  0:         22          0          0          0   IO-APIC   2-edge      timer
  8:          0          0          1          0   IO-APIC   8-edge      rtc0
 36:          0    1213522          0          5   PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
124:        150        200        330        400   PCI-MSI 524288-edge      nvme0q1
NMI:          0          0          0          0   Non-maskable interrupts
LOC:    2210208    1217678    1000250    1000250   Local timer interrupts
RES:     141300      97800         10         10   Rescheduling interrupts
ERR:          0
MIS:          0
"""
# An older kernel (3.10, RHEL 7): the chip and the trigger in one column.
OLD_X86 = """\
           CPU0       CPU1
  0:        141          0   IO-APIC-edge      timer
 16:         26          0   IO-APIC-fasteoi   ehci_hcd:usb1, uhci_hcd:usb2
LOC:    1000000    2000000   Local timer interrupts
"""
# arm64 with a GICv3 (NVIDIA Grace, Ampere Altra).
ARM = """\
           CPU0       CPU1
 11:      51000      52000     GICv3  27 Level     arch_timer
 14:          0          0     GICv3  23 Level     arm-pmu
IPI0:       100        200       Rescheduling interrupts
IPI1:        10         20       Function call interrupts
Err:          0
"""
SOFTIRQS_BEFORE = """\
                    CPU0       CPU1       CPU2       CPU3
          HI:          0          0          0          0
       TIMER:     157418     191727        100        100
      NET_RX:       5661       7788          0          0
       BLOCK:          0    1211476          0          0
       SCHED:     209582     302570         50         50
         RCU:     424262     580902          7          7
"""
SOFTIRQS_AFTER = """\
                    CPU0       CPU1       CPU2       CPU3
          HI:          0          0          0          0
       TIMER:     157918     191827        150        100
      NET_RX:       5661       7788          0          0
       BLOCK:          0    1213476          0          0
       SCHED:     209583     302570         50         50
         RCU:     424262     580902         17          7
"""


def test_parse_interrupts_x86():
    c = noise.parse_counts(X86_BEFORE.strip())           # Probe.read strips the text
    assert c["36"] == ("PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0", {0: 0, 1: 1211522, 2: 0, 3: 5})
    assert c["LOC"][1] == {0: 2209708, 1: 1217178, 2: 1000000, 3: 1000000}
    assert c["LOC"][0] == "Local timer interrupts"
    assert c["ERR"] == ("", {0: 0})                      # short row: one column only
    assert noise.source_name("36", c["36"][0]) == "IRQ 36 (virtio1-req.0)"
    assert noise.source_name("124", c["124"][0]) == "IRQ 124 (nvme0q1)"
    assert noise.source_name("LOC", c["LOC"][0]) == "LOC (Local timer interrupts)"


def test_parse_interrupts_old_kernel_and_arm():
    c = noise.parse_counts(OLD_X86)
    assert noise.source_name("16", c["16"][0]) == "IRQ 16 (ehci_hcd:usb1, uhci_hcd:usb2)"
    assert noise.source_name("0", c["0"][0]) == "IRQ 0 (timer)"
    a = noise.parse_counts(ARM)
    assert a["11"][1] == {0: 51000, 1: 52000}
    assert noise.source_name("11", a["11"][0]) == "IRQ 11 (arch_timer)"
    assert noise.source_name("IPI0", a["IPI0"][0]) == "IPI0 (Rescheduling interrupts)"


def test_interrupt_deltas_on_the_compute_cpus():
    b, a = noise.parse_counts(X86_BEFORE), noise.parse_counts(X86_AFTER)
    d = noise.deltas(b, a, [0, 2])                       # CPU 1 and 3 are not ours
    assert [(s.name, s.count) for s in d] == [
        ("LOC (Local timer interrupts)", 750),           # 500 + 250
        ("IRQ 124 (nvme0q1)", 80),                       # 50 + 30
    ]
    assert d[0].per_cpu == {0: 500, 2: 250}
    # CPU 1 sees the virtio queue; RES went backwards on CPU 0 (hotplug) and counts 0.
    d1 = {s.name: s.count for s in noise.deltas(b, a, [0, 1])}
    assert d1["IRQ 36 (virtio1-req.0)"] == 2000
    assert d1["RES (Rescheduling interrupts)"] == 8
    assert noise.deltas(b, a, []) == []


def test_softirq_deltas():
    b, a = noise.parse_counts(SOFTIRQS_BEFORE.strip()), noise.parse_counts(SOFTIRQS_AFTER.strip())
    d = noise.deltas(b, a, [0, 1, 2, 3])
    assert [(s.name, s.count) for s in d] == [("BLOCK", 2000), ("TIMER", 650), ("RCU", 10), ("SCHED", 1)]
    assert d[1].per_cpu == {0: 500, 1: 100, 2: 50}


@pytest.mark.parametrize("text", [None, "", "garbage", "CPU0 CPU1", "  0: 1 2 timer",
                                  "CPUx CPU1\n 0: 1 2", "CPU0\n:: 5\nLOC: x y\nTIMER: 7 8 9"])
def test_parse_garbage(text):
    c = noise.parse_counts(text)
    assert all(isinstance(v[1], dict) for v in c.values())
    noise.deltas(c, c, [0, 1])


def test_garbled_counters_are_left_out():
    c = noise.parse_counts("CPU0 CPU1\nLOC: 12 junk Local timer\nTIMER: 5")
    assert c["LOC"] == ("junk Local timer", {0: 12})
    assert c["TIMER"] == ("", {0: 5})


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.text(max_size=400), st.lists(st.integers(0, 8), max_size=4))
def test_parsers_never_crash(before, after, cpus):
    for t in (before, after, X86_BEFORE[:len(before)], SOFTIRQS_AFTER[:len(after)]):
        noise.parse_counts(t)
    b = noise.parse_counts(X86_BEFORE[:len(before)] + before)
    a = noise.parse_counts(X86_AFTER[:len(after)] + after)
    for s in noise.deltas(b, a, cpus):
        assert s.count > 0 and s.name


# -- the verdict on given windows ---------------------------------------------------

def cpu_result(cpu, detour_s, top=(), window_s=2.0, min_gap_s=25e-9):
    top = tuple(sorted(top, key=lambda g: -g[1]))
    return core.NoiseCPU(cpu, cpu, 50_000_000, max(len(top), 1 if detour_s else 0), detour_s, window_s,
                         min_gap_s, max((g[1] for g in top), default=min_gap_s), 1e-6, top)


def window(cpus, valid=True, procs=(), irqs=(), softirqs=()):
    r = core.NoiseResult(2.0, 1000, tuple(cpus), valid, "" if valid else "noise: thread 0: no clock read")
    return noise.Window(r, 2.0, irqs=list(irqs), softirqs=list(softirqs), procs=list(procs))


QUIET = [cpu_result(0, 0.002, [(0.1, 20e-6), (1.5, 8e-6)]), cpu_result(1, 0.0004, [(0.7, 12e-6)])]
LOC = noise.Source("LOC (Local timer interrupts)", 500, {0: 250, 1: 250})
NVME = noise.Source("IRQ 124 (nvme0q1)", 9000, {1: 9000}, irq="124")


def test_quiet_node_is_ok():
    f = noise.judge(window(QUIET, irqs=[LOC], softirqs=[noise.Source("TIMER", 400, {0: 200, 1: 200})]))
    assert f.status == OK
    assert f.title == "OS noise 0.10% at most (CPU 0), largest detour 20 µs (CPU 0)"
    assert "CPU 0 0.10%, CPU 1 0.02%" in f.evidence
    assert "CPU 0: 20 8.0 (2 detours)" in f.evidence
    assert "LOC (Local timer interrupts) 500 [250/s]" in f.evidence
    assert "softirqs on these CPUs: TIMER 400 [200/s]" in f.evidence
    assert "one read costs 25 ns" in f.evidence
    # the per-CPU figures are also structured data, matching the words
    assert [c["cpu"] for c in f.data["cpus"]] == [0, 1]
    assert f.data["cpus"][0]["fraction"] == pytest.approx(0.001) and f.data["cpus"][0]["detours"] == 2


def test_noisy_cpu_warns_and_names_the_sources():
    cpus = [cpu_result(0, 0.001), cpu_result(1, 0.05, [(0.3, 400e-6), (0.9, 300e-6)])]
    procs = [(4242, "telegraf", 0.03), (17, "kworker/1:1", 0.002)]
    f = noise.judge(window(cpus, procs=procs, irqs=[NVME, LOC]))
    assert f.status == WARN and f.needs_root
    assert f.title == "OS noise above 1% on 1 of 2 CPUs (CPU 1 2.50%)"
    assert "IRQ 124 (nvme0q1) 9000 [4500/s, most on CPU 1]" in f.evidence
    assert "pid 4242 (telegraf) 3% of a CPU" in f.evidence
    assert "kworker" not in f.evidence                      # below 1% of a CPU
    assert "smp_affinity" in f.fix


def test_one_long_detour_warns():
    cpus = [cpu_result(0, 0.0030, [(1.2, 2.5e-3)]), cpu_result(1, 0.0001, [(0.1, 50e-6)])]
    f = noise.judge(window(cpus))
    assert f.status == WARN
    assert f.title == "detours over 1 ms (CPU 0 2.5 ms)"
    assert "CPU 0: 2500 (1 detour)" in f.evidence


def test_invalid_probe_and_unreadable_files():
    assert noise.judge(window(QUIET, valid=False)).status == SKIPPED
    w = window(QUIET)
    w.irqs = None
    w.softirqs = None
    w.procs_note = "cannot read /proc/stat"
    f = noise.judge(w)
    assert f.status == OK
    assert "interrupts: not readable" in f.evidence and "softirqs: not readable" in f.evidence
    assert "cannot read /proc/stat" in f.evidence


# -- the fix follows the cause the evidence shows ---------------------------------------
# Issue 34: noise from python3 at 54% of a CPU was answered with IRQ affinity and nohz_full.

NOISY1 = [cpu_result(0, 0.0004), cpu_result(1, 1.08, [(0.3, 4e-3)])]      # CPU 1 loses 54%


def test_noise_from_another_process_names_it_and_says_to_move_it():
    f = noise.judge(window(NOISY1, procs=[(4242, "python3", 0.54)], irqs=[LOC]))
    assert f.status == WARN and f.data["cause"] == noise.COMPETING and f.data["causes"] == [noise.COMPETING]
    assert f.data["processes"] == [{"pid": 4242, "comm": "python3", "cpu_share": 0.54}]
    assert "pid 4242 (python3, 54% of a CPU)" in f.fix and "srun --exclusive" in f.fix
    assert "nohz_full" not in f.fix and "smp_affinity" not in f.fix and not f.needs_root


def test_noise_from_device_interrupts_moves_them():
    cpus = [cpu_result(0, 0.0004), cpu_result(1, 0.05, [(0.3, 400e-6)])]
    f = noise.judge(window(cpus, irqs=[NVME, LOC]))
    assert f.data["cause"] == noise.INTERRUPTS and f.data["interrupts"][0]["irq"] == "124"
    assert "echo 0 > /proc/irq/124/smp_affinity_list" in f.fix and f.needs_root
    assert "nohz_full" not in f.fix and "srun --exclusive" not in f.fix


def test_noise_from_the_kernel_itself_calls_for_nohz_full():
    """No process of note, only the timer tick and a kernel thread: housekeeping."""
    w = window(NOISY1, procs=[(17, "kworker/1:1", 0.3), (4242, "telegraf", 0.005)], irqs=[LOC])
    w.kernel_pids = {17}
    f = noise.judge(w)
    assert f.data["cause"] == noise.KERNEL and f.data["kernel_threads"][0]["comm"] == "kworker/1:1"
    assert "nohz_full=1" in f.fix and f.needs_root
    assert "kill" not in f.fix and "smp_affinity" not in f.fix


def test_kernel_noise_on_the_boot_cpu_is_not_for_nohz_full():
    cpus = [cpu_result(0, 1.08, [(0.3, 4e-3)]), cpu_result(1, 0.0004)]
    f = noise.judge(window(cpus, irqs=[LOC]))
    assert f.data["cause"] == noise.KERNEL and "nohz_full" not in f.fix and "off CPU 0" in f.fix
    assert not f.needs_root


def test_a_small_process_does_not_explain_large_noise():
    f = noise.judge(window(NOISY1, procs=[(4242, "telegraf", 0.02)]))
    assert f.data["cause"] == noise.KERNEL and "telegraf" not in f.fix


def test_unexplained_noise_in_a_vm_is_the_hosts():
    f = noise.judge(window(NOISY1, irqs=[LOC]), virtualized="KVM")
    assert f.data["cause"] == noise.HYPERVISOR and "dedicated (pinned) vCPUs" in f.fix
    assert "nohz_full" not in f.fix and not f.needs_root


def test_a_process_and_interrupts_both_named_process_first():
    f = noise.judge(window(NOISY1, procs=[(4242, "python3", 0.54)], irqs=[noise.Source("IRQ 124 (nvme0q1)", 9000,
                                                                                          {1: 9000}, irq="124")]))
    assert f.data["causes"] == [noise.COMPETING, noise.INTERRUPTS]
    assert f.fix.index("python3") < f.fix.index("/proc/irq/124") and f.needs_root
    # every CPU that took them is measured: one is to be kept out of the job for them
    assert "keep one CPU out of the job (e.g. CPU 1) and route them there: echo 1 > /proc/irq/124" in f.fix
