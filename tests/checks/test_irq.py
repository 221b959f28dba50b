"""irq.balance: /proc/interrupts parsing and the verdicts, on fake trees.

The recorded trees hold no /proc/interrupts, so the fakes follow the format of
Documentation/filesystems/proc.rst ("1.2 ... /proc/interrupts") as x86
(IO-APIC, PCI-MSI) and Arm GICv3 kernels print it: a header of online CPUs,
numbered device rows with one count per CPU, then LOC/RES/CAL/TLB/... (x86)
or IPI0..IPI6 (Arm) rows, and ERR/MIS with a single number.
"""

from pathlib import Path

from ceiling.checks import base, irq
from ceiling.machine.model import Cpu, Machine
from checkutil import write


def node(n=8, affinity=None) -> Machine:
    cpus = [Cpu(id=i, core=i, socket=i // (n // 2), node=i // (n // 2), smt=0) for i in range(n)]
    return Machine(arch="x86_64", sockets=2, cores=n, threads=n, cpus=cpus,
                   affinity=list(affinity if affinity is not None else range(n)))


def run(m, root, live=None):
    p = base.Probe.of(m, str(root))
    if live is not None:
        p.live = live           # a fake tree read as if it were this node
    return base.run_one(base.REGISTRY["irq.balance"], p, strict=True)


def table(rows, ncpu=8):
    head = "".join(f"{'CPU' + str(i):>11}" for i in range(ncpu))
    out = ["    " + head]
    for label, counts, desc in rows:
        out.append(f"{label:>4}:" + "".join(f"{c:>11}" for c in counts) + f"   {desc}")
    return "\n".join(out) + "\n"


X86_SYSTEM = [("NMI", [12] * 8, "Non-maskable interrupts"), ("LOC", [9_000_000] * 8, "Local timer interrupts"),
              ("RES", [20_000] * 8, "Rescheduling interrupts"), ("CAL", [5_000] * 8, "Function call interrupts"),
              ("TLB", [3_000] * 8, "TLB shootdowns")]

ALL_ON_CPU0 = [("0", [37, 0, 0, 0, 0, 0, 0, 0], "IO-APIC    2-edge      timer"),
               ("24", [4_523_345, 0, 0, 0, 0, 0, 0, 0], "PCI-MSI 524288-edge      mlx5_comp0@pci:0000:3b:00.0"),
               ("25", [1_235_233, 0, 0, 0, 0, 0, 0, 0], "PCI-MSI 1048576-edge      nvme0q1"),
               ("26", [12, 0, 0, 0, 0, 0, 0, 0], "PCI-MSI 1048577-edge      nvme0q2")]


def with_tail(text):
    return text + "ERR:          0\nMIS:          0\n"


def test_parse_x86_rows_apart():
    t = irq.parse_interrupts(with_tail(table(ALL_ON_CPU0 + X86_SYSTEM)))
    assert t.cpus == list(range(8))
    assert [r.label for r in t.device] == ["0", "24", "25", "26"]
    assert [r.label for r in t.system] == ["NMI", "LOC", "RES", "CAL", "TLB", "ERR", "MIS"]
    assert t.device[1].name == "mlx5_comp0@pci:0000:3b:00.0" and t.device[2].counts[0] == 1_235_233
    assert t.system[-1].counts == [0]                      # MIS: one number only
    assert t.per_cpu(t.device)[0] == 37 + 4_523_345 + 1_235_233 + 12


def test_parse_arm_gic_per_cpu_rows_are_system():
    text = ("           CPU0       CPU1       CPU2       CPU3\n"
            " 11:    4812331    4733221    4722112    4721113     GICv3  27 Level     arch_timer\n"
            " 12:          0          0          0          0     GICv3  23 Level     arm-pmu\n"
            " 48:      91233          0          0          0     ITS-MSI 524288 Edge      nvme0q0\n"
            "IPI0:     12331      11123       9911      10012       Rescheduling interrupts\n"
            "IPI1:       331        123        911        112       Function call interrupts\n"
            "Err:          0\n")
    t = irq.parse_interrupts(text)
    assert [r.label for r in t.device] == ["48"]
    assert {"11", "12", "IPI0", "IPI1", "Err"} == {r.label for r in t.system}


def test_parse_short_rows_and_garbage():
    t = irq.parse_interrupts("  CPU0 CPU1 CPU2\n 5: 10 20\n 6: x y z\n junk line\n 7:\n")
    assert t.device[0].counts == [10, 20] and t.per_cpu(t.device) == {0: 10, 1: 20, 2: 0}
    assert t.device[1].counts == [] and t.device[1].name == "z"
    assert irq.parse_interrupts("no header\n 5: 1 2\n") is None
    assert irq.parse_interrupts(None) is None


def test_everything_on_cpu0_warns(tmp_path):
    write(tmp_path, "proc/interrupts", with_tail(table(ALL_ON_CPU0 + X86_SYSTEM)))
    write(tmp_path, "proc/uptime", "100000.00 790000.00\n")
    f = run(node(), tmp_path)
    assert f.status == "warn" and f.title == "CPU0 takes 100% of all device interrupts"
    assert "device interrupts since boot: 5,758,627 (57.6/s) from 4 IRQ lines on 8 CPUs" in f.evidence
    assert "IRQ 24 mlx5_comp0@pci:0000:3b:00.0 4,523,345" in f.evidence
    assert "per-CPU system interrupts (LOC, RES, CAL, TLB) there: 72,224,000 (722.2/s), not movable" in f.evidence
    assert "irqbalance: unknown from a recorded tree" in f.evidence
    # Every CPU is this process's: no banned list (that would leave IRQs nowhere), one housekeeping core instead.
    assert "echo 0 > /proc/irq/24/smp_affinity_list" in f.fix and "BANNED" not in f.fix and f.needs_root
    # a recorded tree cannot say whether irqbalance runs: neither "start it" nor "its configuration" alone
    assert f.data["cause"] == "irq_concentrated" and f.data["irqbalance"] is None
    assert "start irqbalance if it does not run" in f.fix


def spread_rows():
    return [(str(24 + i), [50_000 if c == i else 0 for c in range(8)], f"PCI-MSI {i}-edge mlx5_comp{i}")
            for i in range(8)]


def test_spread_is_ok(tmp_path):
    write(tmp_path, "proc/interrupts", table(spread_rows() + X86_SYSTEM))
    f = run(node(), tmp_path)
    assert f.status == "ok" and f.title == "Device interrupts spread: the busiest CPU (CPU0) takes 12%"
    assert "no /proc/uptime: no rates" in f.evidence


def test_few_cpus_or_few_interrupts_do_not_warn(tmp_path):
    rows = [("24", [900, 0, 0, 0], "PCI-MSI 0-edge virtio0-input.0")]
    write(tmp_path, "proc/interrupts", table(rows, ncpu=4))
    assert run(node(4), tmp_path).status == "ok"                 # 4 CPUs: not > 4
    write(tmp_path, "proc/interrupts", table([("24", [900] + [0] * 7, "PCI-MSI 0-edge eth0")]))
    assert run(node(), tmp_path).status == "ok"                  # 900 since boot: too few to mean anything


def test_sources_on_this_process_cpus_are_named(tmp_path):
    write(tmp_path, "proc/interrupts", table(spread_rows()))
    f = run(node(affinity=[6, 7]), tmp_path)
    assert f.status == "ok"
    assert "on this process's CPUs (6-7): 100,000: IRQ 30 mlx5_comp6 50,000, IRQ 31 mlx5_comp7 50,000" in f.evidence


def test_fix_routes_to_the_cpus_this_process_does_not_use(tmp_path):
    rows = [("24", [0] * 6 + [800_000, 0], "PCI-MSI 0-edge nvme0q3"), ("25", [1000] * 8, "PCI-MSI 1-edge eth0")]
    write(tmp_path, "proc/interrupts", table(rows))
    f = run(node(affinity=[6, 7]), tmp_path)
    assert f.status == "warn" and f.title == "CPU6 takes 99% of all device interrupts"
    assert "echo 0-5 > /proc/irq/24/smp_affinity_list" in f.fix
    assert "IRQBALANCE_BANNED_CPULIST=6-7" in f.fix


def test_live_without_irqbalance_and_busy_compute_cpus_warns(tmp_path):
    write(tmp_path, "proc/interrupts", table(spread_rows()))
    write(tmp_path, "proc/uptime", "1000.0 7000.0\n")            # 400/s in all
    write(tmp_path, "proc/1/comm", "systemd\n")
    write(tmp_path, "proc/812/comm", "sshd\n")
    f = run(node(), tmp_path, live=True)
    assert f.status == "warn" and "irqbalance is not running" in f.title and "400/s" in f.title
    assert "systemctl enable --now irqbalance" in f.fix
    assert f.data["cause"] == "irqbalance_not_running" and f.data["irqbalance"] is False
    write(tmp_path, "proc/733/comm", "irqbalance\n")
    f = run(node(), tmp_path, live=True)
    assert f.status == "ok" and "irqbalance is running" in f.evidence


def test_absent_is_skipped(tmp_path):
    f = run(node(), tmp_path)
    assert f.status == "skipped" and "/proc/interrupts" in f.title


def test_live_reads_this_nodes_interrupts_and_processes():
    f = base.run_one(base.REGISTRY["irq.balance"], base.Probe.of(node(2, affinity=[]), "/"), strict=True)
    try:
        header = Path("/proc/interrupts").read_text().splitlines()[0]
    except (OSError, IndexError):
        assert f.status == "skipped" and "/proc/interrupts" in f.title
        return
    # One column per online CPU in the header; live, irqbalance is looked up in /proc/*/comm.
    assert f" IRQ lines on {len(header.split())} CPUs" in f.evidence
    assert "irqbalance is running" in f.evidence or "irqbalance is not running (/proc/*/comm)" in f.evidence


# ---- no content crashes the check ---------------------------------------------------------

import pytest  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

LINES = st.sampled_from(["  CPU0 CPU1 CPU2 CPU3 CPU4 CPU5 CPU6 CPU7", " 24: 1 2 3 4 5 6 7 8 PCI-MSI 0-edge eth0",
                         " 25: 99999999999999999999999 0 PCI-MSI 1-edge nvme0q1", "LOC: 5 5 5 5 5 5 5 5 Local timer",
                         "ERR: 0", " 7:", ":", " x: y", "CPU0", " 11: 1 1 1 1 1 1 1 1 GICv3 27 Level arch_timer"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                         st.lists(LINES, max_size=12).map(lambda ls: "\n".join(ls).encode())),
       uptime=st.sampled_from([b"", b"0 0\n", b"-5 1\n", b"inf 1\n", b"nan\n", b"1e400 1\n", b"12.5 3\n"]),
       live=st.booleans())
def test_no_content_crashes_the_irq_check(tmp_path, content, uptime, live):
    write(tmp_path, "proc/1/comm", "systemd\n")
    (tmp_path / "proc/interrupts").write_bytes(content)
    (tmp_path / "proc/uptime").write_bytes(uptime)
    f = run(node(), tmp_path, live=live)
    assert f.status in ("ok", "warn", "skipped") and f.title
