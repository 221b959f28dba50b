"""Interrupts: is irqbalance running, and where do device interrupts land."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..sysfs import format_cpulist, parse_uptime
from .base import Probe, check, ok, skipped, warn

CONCENTRATED = 0.5      # one CPU taking more than this share of all device interrupts ...
MIN_CPUS = 4            # ... on a node with more CPUs than this ...
MIN_TOTAL = 10_000      # ... and enough interrupts since boot to mean something
MIN_RATE = 100.0        # device interrupts per second on the compute CPUs worth moving away

# Rows with an IRQ number that are per-CPU nonetheless (each CPU's own timer or
# PMU, inter-processor interrupts, Xen's per-CPU event channels): they cannot be
# moved, so they count as system interrupts.
PER_CPU = re.compile(r"percpu|arch_timer|arm-pmu|arm_pmu|kvm guest|vgic|\bIPI\b|hv_stimer", re.I)


@dataclass
class Row:
    label: str                  # "24", "LOC", ...
    counts: List[int]           # per column of the header, possibly fewer
    desc: str                   # chip, hwirq, trigger and device names

    @property
    def name(self) -> str:
        """The device's name: the last word of the description ("virtio3-tx")."""
        return self.desc.split()[-1][:40] if self.desc.split() else self.label


@dataclass
class Interrupts:
    cpus: List[int]                                   # the CPU of each column
    device: List[Row] = field(default_factory=list)   # numbered IRQs that can be moved
    system: List[Row] = field(default_factory=list)   # LOC, RES, CAL, TLB, NMI, IPIs, per-CPU timers

    def per_cpu(self, rows: List[Row]) -> Dict[int, int]:
        out = {c: 0 for c in self.cpus}
        for r in rows:
            for c, n in zip(self.cpus, r.counts):
                out[c] += n
        return out


def parse_interrupts(text: Optional[str]) -> Optional[Interrupts]:
    """/proc/interrupts (Documentation/filesystems/proc.rst): a header of CPU
    columns (online CPUs only), then one row per source: 'N:' for device IRQs,
    'LOC:', 'RES:', ... for per-CPU system interrupts, 'ERR:'/'MIS:' with a
    single number. None when there is no header."""
    if not text:
        return None
    lines = text.splitlines()
    head = lines[0].split()
    if not head or not all(re.fullmatch(r"CPU\d{1,6}", t) for t in head):
        return None
    table = Interrupts([int(t[3:]) for t in head])
    for line in lines[1:]:
        label, sep, rest = line.partition(":")
        label = label.strip()
        if not sep or not label or len(label) > 16 or " " in label:
            continue
        toks = rest.split()
        counts = []
        for t in toks[:len(table.cpus)]:
            if not t.isdigit() or len(t) > 20:
                break
            counts.append(int(t))
        row = Row(label, counts, " ".join(toks[len(counts):])[:200])
        if label.isdigit() and not PER_CPU.search(row.desc):
            table.device.append(row)
        else:
            table.system.append(row)
    return table


def irqbalance_running(p: Probe) -> Optional[bool]:
    """Whether a process named irqbalance runs (live only; None on a tree)."""
    if not p.live:
        return None
    pids = [n for n in p.listdir("proc") if n.isdigit()][:20000]
    return any(p.read(f"proc/{pid}/comm") == "irqbalance" for pid in pids)


def uptime_s(p: Probe) -> Optional[float]:
    v = parse_uptime(p.read("proc/uptime"))
    return v if v else None       # 0 s: no rates to divide by


@check("irq.balance")
def balance(p: Probe):
    """Where device interrupts land, and whether irqbalance runs
    (/proc/interrupts totals per CPU since boot, /proc/uptime for rates,
    /proc/*/comm for irqbalance when run live).

    Device interrupts (numbered rows: NICs, NVMe, HBAs, virtio) run their
    handlers on whatever CPU they are routed to, stealing time from the
    thread pinned there: a rank that takes them becomes the slowest. Per-CPU
    system interrupts (LOC timer, RES, CAL, TLB shootdowns, IPIs, per-CPU
    timers on Arm) cannot be moved; they are shown apart.

    warn:
    - one CPU takes more than 50% of all device interrupts on a node with more
      than 4 CPUs (and at least 10,000 since boot): the classic 'everything on
      CPU 0' of a node without irqbalance or with a bad affinity setting;
    - irqbalance is not running (live only) and device interrupts reach the
      CPUs this process may use at 100/s or more on average since boot.
    ok otherwise; the busiest device interrupt sources on this process's CPUs
    are named either way.
    skipped: /proc/interrupts absent or without a CPU header.

    Fix: ``systemctl enable --now irqbalance`` (with
    IRQBALANCE_BANNED_CPULIST=compute CPUs to keep them clear), or route the
    busy IRQs to housekeeping cores: ``echo 0 >
    /proc/irq/N/smp_affinity_list`` (root).
    """
    table = parse_interrupts(p.read("proc/interrupts"))
    if table is None:
        return skipped("Interrupts: /proc/interrupts not readable", evidence="no /proc/interrupts or no CPU header")
    up = uptime_s(p)
    dev = table.per_cpu(table.device)
    total = sum(dev.values())
    ncols = len(table.cpus)
    compute = [c for c in p.cpus() if c in dev] or list(table.cpus)
    mine = set(compute)           # membership tested per CPU per IRQ line: a set, not the list
    housekeeping = [c for c in table.cpus if c not in mine]
    balancer = irqbalance_running(p)

    def rate(n: int) -> str:
        return f"{n:,} ({n / up:,.1f}/s)" if up else f"{n:,}"

    ev = [f"device interrupts since boot: {rate(total)} from {len(table.device)} IRQ lines on {ncols} CPUs"
          + ("" if up else " (no /proc/uptime: no rates)")]
    busiest = max(dev, key=lambda c: dev[c]) if dev else None
    share = dev[busiest] / total if total and busiest is not None else 0.0
    if total:
        top = sorted(dev.items(), key=lambda kv: -kv[1])[:4]
        ev.append("busiest CPUs: " + ", ".join(f"CPU{c} {n / total:.0%}" for c, n in top if n))
    on_compute = sorted(((sum(n for c, n in zip(table.cpus, r.counts) if c in mine), r) for r in table.device),
                        key=lambda t: -t[0])
    on_compute = [(n, r) for n, r in on_compute if n][:5]
    compute_total = sum(dev[c] for c in compute)
    ev.append(f"on this process's CPUs ({format_cpulist(compute)}): {rate(compute_total)}" +
              (": " + ", ".join(f"IRQ {r.label} {r.name} {n:,}" for n, r in on_compute) if on_compute else ""))
    sysint = table.per_cpu([r for r in table.system if r.label in ("LOC", "RES", "CAL", "TLB")])
    sys_total = sum(n for c, n in sysint.items() if c in mine)
    if sys_total:
        ev.append(f"per-CPU system interrupts (LOC, RES, CAL, TLB) there: {rate(sys_total)}, not movable")
    ev.append({True: "irqbalance is running", False: "irqbalance is not running (/proc/*/comm)",
               None: "irqbalance: unknown from a recorded tree"}[balancer])
    evidence = "; ".join(ev)
    top_irq = on_compute[0][1].label if on_compute else "N"
    start = {False: "systemctl enable --now irqbalance", True: "check irqbalance's configuration (and any "
             "fixed smp_affinity set by a script)"}.get(balancer, "start irqbalance if it does not run, else check "
                                                       "its configuration")
    if housekeeping:
        fix = (f"{start} with IRQBALANCE_BANNED_CPULIST={format_cpulist(compute)} (keeps the compute CPUs clear), "
               f"or route busy IRQs to the other cores: echo {format_cpulist(housekeeping)} > "
               f"/proc/irq/{top_irq}/smp_affinity_list")
    else:
        fix = (f"{start} to spread them, or keep one housekeeping core out of the job (e.g. CPU {table.cpus[0]}) "
               f"and route busy IRQs there: echo {table.cpus[0]} > /proc/irq/{top_irq}/smp_affinity_list")
    why = ("interrupt handlers steal time from the thread on that CPU: its rank falls behind and every "
           "collective waits for it")
    data = {"irqbalance": balancer, "busiest_cpu": busiest, "top_irq": top_irq if on_compute else None}
    if ncols > MIN_CPUS and total >= MIN_TOTAL and share > CONCENTRATED:
        # irqbalance stopped: start it; running: its configuration (or a fixed affinity) put them there.
        cause = {False: "irqbalance_not_running", True: "irq_affinity"}.get(balancer, "irq_concentrated")
        return warn(f"CPU{busiest} takes {share:.0%} of all device interrupts"
                    + (" (irqbalance not running)" if balancer is False else ""),
                    evidence=evidence, why=why, fix=fix, needs_root=True, cause=cause, data=data)
    compute_rate = compute_total / up if up else None
    if balancer is False and compute_rate is not None and compute_rate >= MIN_RATE:
        return warn(f"irqbalance is not running and device interrupts reach this process's CPUs at "
                    f"{compute_rate:,.0f}/s", evidence=evidence, why=why, fix=fix, needs_root=True,
                    cause="irqbalance_not_running", data=data)
    if not total:
        return ok("No device interrupts counted since boot", evidence=evidence)
    return ok(f"Device interrupts spread: the busiest CPU (CPU{busiest}) takes {share:.0%}", evidence=evidence)
