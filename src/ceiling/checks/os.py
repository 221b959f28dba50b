"""Kernel and OS: the kernel's age against the CPU's, the clock source, and
CPU vulnerability mitigations in force."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

from .base import Probe, check, ok, skipped, warn

# Mainline release month of each kernel series (the day Linus tagged vX.Y),
# from kernel.org's release history (https://www.kernel.org/category/releases.html,
# the tags in git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git) as
# summarised in Wikipedia's "Linux kernel version history". A series newer
# than the last entry was released after it: the last date is then a lower
# bound. An older series missing from the table is 'unknown'.
KERNEL_RELEASES: Dict[str, str] = {
    "2.6.32": "2009-12",
    "3.0": "2011-07", "3.1": "2011-10", "3.2": "2012-01", "3.3": "2012-03", "3.4": "2012-05",
    "3.5": "2012-07", "3.6": "2012-09", "3.7": "2012-12", "3.8": "2013-02", "3.9": "2013-04",
    "3.10": "2013-06", "3.11": "2013-09", "3.12": "2013-11", "3.13": "2014-01", "3.14": "2014-03",
    "3.15": "2014-06", "3.16": "2014-08", "3.17": "2014-10", "3.18": "2014-12", "3.19": "2015-02",
    "4.0": "2015-04", "4.1": "2015-06", "4.2": "2015-08", "4.3": "2015-11", "4.4": "2016-01",
    "4.5": "2016-03", "4.6": "2016-05", "4.7": "2016-07", "4.8": "2016-10", "4.9": "2016-12",
    "4.10": "2017-02", "4.11": "2017-04", "4.12": "2017-07", "4.13": "2017-09", "4.14": "2017-11",
    "4.15": "2018-01", "4.16": "2018-04", "4.17": "2018-06", "4.18": "2018-08", "4.19": "2018-10",
    "4.20": "2018-12",
    "5.0": "2019-03", "5.1": "2019-05", "5.2": "2019-07", "5.3": "2019-09", "5.4": "2019-11",
    "5.5": "2020-01", "5.6": "2020-03", "5.7": "2020-05", "5.8": "2020-08", "5.9": "2020-10",
    "5.10": "2020-12", "5.11": "2021-02", "5.12": "2021-04", "5.13": "2021-06", "5.14": "2021-08",
    "5.15": "2021-10", "5.16": "2022-01", "5.17": "2022-03", "5.18": "2022-05", "5.19": "2022-07",
    "6.0": "2022-10", "6.1": "2022-12", "6.2": "2023-02", "6.3": "2023-04", "6.4": "2023-06",
    "6.5": "2023-08", "6.6": "2023-10", "6.7": "2024-01", "6.8": "2024-03", "6.9": "2024-05",
    "6.10": "2024-07", "6.11": "2024-09", "6.12": "2024-11", "6.13": "2025-01", "6.14": "2025-03",
    "6.15": "2025-05", "6.16": "2025-07", "6.17": "2025-09", "6.18": "2025-11",
}

# Distribution kernels that carry years of backported hardware support.
DISTRO_MARKERS = ((r"\.el\d+", "Red Hat Enterprise Linux family"), (r"-default$|\.g[0-9a-f]+-default", "SUSE"),
                  (r"-azure|-aws|-gcp|-oracle|-generic|-nvidia|-lowlatency", "Ubuntu"), (r"-amd64$|-arm64$", "Debian"),
                  (r"\.fc\d+", "Fedora"), (r"\.uek|uek\.", "Oracle UEK"))


def kernel_release(p: Probe) -> Tuple[Optional[str], str]:
    """The running kernel's release string and where it was read."""
    rel = p.read("proc/sys/kernel/osrelease")
    if rel:
        return rel.split()[0][:80], "/proc/sys/kernel/osrelease"
    version = p.read("proc/version")
    m = re.match(r"Linux version (\S+)", version or "")
    if m:
        return m.group(1)[:80], "/proc/version"
    if p.live:
        return os.uname().release, "uname"
    return None, ""


def series(release: str) -> Optional[str]:
    """'5.14.0-427.el9.x86_64' -> '5.14'; '2.6.32-754.el6' -> '2.6.32'; junk -> None."""
    m = re.match(r"(\d{1,2})\.(\d{1,3})(?:\.(\d{1,4}))?", release)
    if not m:
        return None
    if m.group(1) == "2" and m.group(2) == "6" and m.group(3):
        return f"2.6.{int(m.group(3))}"
    return f"{int(m.group(1))}.{int(m.group(2))}"


def version(ser: str) -> Tuple[int, ...]:
    """'6.18' -> (6, 18); '2.6.32' -> (2, 6, 32): series compare in release order."""
    return tuple(int(x) for x in ser.split("."))


@check("os.kernel_age")
def kernel_age(p: Probe):
    """The kernel's mainline release date against the CPU's launch year
    (/proc/sys/kernel/osrelease, else /proc/version, else uname; the launch
    year from ceiling's CPU families data file).

    A kernel released before the CPU came out lacks what that CPU needs from
    it: topology and scheduler support (cache and die layout, hybrid cores),
    power management (idle and frequency drivers), the PMU (no hardware
    counters for profilers) and errata work-arounds.

    warn: the kernel series was released in an earlier year than the CPU was
    launched. Distribution kernels (RHEL, SLES, Ubuntu HWE) backport support
    for new CPUs into old version numbers, so such a kernel may be fine:
    check the vendor's hardware certification for this CPU.
    ok: the kernel is from the CPU's launch year or later (both dates shown).
    A series newer than ceiling's table (after 6.18) is at least as new as
    the table's last release date, and is judged with that date.
    skipped: the kernel series is older than or missing from ceiling's table
    (3.0 to 6.18 and 2.6.32), a newer series is dated only by the table's last
    date and that is before the CPU's launch year, or the CPU's launch year
    is unknown.

    Fix: a kernel (or distribution release) that supports the CPU: a newer
    distribution minor release, or its hardware-enablement kernel.
    """
    rel, src = kernel_release(p)
    if rel is None:
        return skipped("Kernel age: kernel version unknown", evidence="no /proc/sys/kernel/osrelease or /proc/version")
    ser = series(rel)
    date = KERNEL_RELEASES.get(ser or "")
    last = list(KERNEL_RELEASES)[-1]
    newer = date is None and ser is not None and version(ser) > version(last)
    if newer:
        date = KERNEL_RELEASES[last]   # released after the table's last series: at least that new
    year = p.machine.cpu_facts.get("launch_year")
    cpu = p.machine.cpu_facts.get("name") or p.machine.model_name or "this CPU"
    distro = next((name for pat, name in DISTRO_MARKERS if re.search(pat, rel)), None)
    ev = f"kernel {rel} ({src})"
    if date is None:
        return skipped(f"Kernel age: release date of {ser or rel} not in ceiling's table",
                       evidence=ev + f"; table covers 2.6.32 and 3.0 to {last}")
    when = f"after {date}" if newer else date
    ev += (f"; Linux {ser} is newer than {last} ({date}), the last series in ceiling's table, so it was released "
           f"after {date}" if newer else f"; Linux {ser} released {date}")
    if distro:
        ev += f"; a distribution kernel ({distro}), which carries backports"
    if not isinstance(year, int):
        return skipped(f"Kernel age: Linux {ser} ({when}); launch year of {cpu} unknown",
                       evidence=ev + "; CPU not in the families data file", why="nothing to compare the kernel with")
    ev += f"; {cpu} launched {year}"
    if newer and int(date[:4]) < year:
        return skipped(f"Kernel age: Linux {ser} is newer than ceiling's table; {cpu} launched {year}",
                       evidence=ev, why=f"the kernel is known only to be newer than {date}, which is before the CPU")
    if int(date[:4]) < year:
        maybe = f" ({distro} kernels backport support: may be fine)" if distro else ""
        return warn(f"Kernel Linux {ser} ({date}) is older than the CPU ({cpu}, {year}){maybe}", evidence=ev,
                    why="a kernel older than the CPU may lack its topology, power-management, PMU and errata support; "
                        "distribution kernels (RHEL, SLES) backport such support, so it may be fine",
                    fix="check the distribution's support for this CPU, or use a newer kernel "
                        "(hardware-enablement kernel or distribution release)", needs_root=True, cause="old_kernel")
    return ok(f"Kernel Linux {ser} ({when}) is not older than the CPU ({year})", evidence=ev)


# Clock sources whose reads stay in user space (vDSO) and those that trap to
# the kernel or the hypervisor (Documentation/timers/timekeeping.rst, and
# arch/*/kernel/vdso: tsc, arm_arch_timer, kvm-clock and Hyper-V's TSC page
# provide vDSO clock modes).
FAST_CLOCKS = {"tsc": "x86 TSC", "arch_sys_counter": "Arm generic timer", "kvm-clock": "KVM paravirtual clock",
               "hyperv_clocksource_tsc_page": "Hyper-V TSC page", "timebase": "POWER timebase",
               "riscv_clocksource": "RISC-V timer", "tod": "s390 TOD clock"}
SLOW_CLOCKS = {"hpet": "HPET (memory-mapped I/O read)", "acpi_pm": "ACPI PM timer (port I/O read)",
               "xen": "Xen paravirtual clock", "hyperv_clocksource_msr": "Hyper-V MSR (traps to the hypervisor)",
               "jiffies": "jiffies (tick resolution)", "refined-jiffies": "jiffies (tick resolution)",
               "pit": "i8253 PIT"}


@check("os.clocksource")
def clocksource(p: Probe):
    """The kernel's clock source
    (/sys/devices/system/clocksource/clocksource0/current_clocksource and
    available_clocksource).

    clock_gettime, gettimeofday and MPI_Wtime read the clock source. With
    tsc (x86), arch_sys_counter (Arm), kvm-clock or Hyper-V's TSC page a read
    is a few tens of nanoseconds in user space (vDSO); with hpet, acpi_pm,
    xen or an MSR-based clock it becomes a system call or a trap costing
    about a microsecond: timer-heavy codes, tracing and every profiler slow
    down, and fine-grained timings lose resolution.

    ok: a fast clock source. warn: hpet, acpi_pm, xen, hyperv MSR, jiffies,
    pit (the kernel usually falls back to these after marking the TSC
    unstable: look for 'clocksource: Marking clocksource tsc as unstable' in
    dmesg). skipped: file absent, or a clock source ceiling does not know.

    Fix: boot with ``clocksource=tsc tsc=reliable`` where the TSC is
    invariant (constant_tsc, nonstop_tsc), or ``echo tsc >
    /sys/devices/system/clocksource/clocksource0/current_clocksource``
    (root).
    """
    base = "sys/devices/system/clocksource/clocksource0"
    cur = p.read(f"{base}/current_clocksource")
    avail = (p.read(f"{base}/available_clocksource") or "").split()
    if cur is None:
        return skipped("Clock source: not exposed", evidence=f"no /{base}/current_clocksource")
    name = cur.split()[0][:40]
    ev = f"current_clocksource={name}" + (f"; available: {' '.join(a[:40] for a in avail[:12])}" if avail else "")
    if name in FAST_CLOCKS:
        return ok(f"Clock source is {name} ({FAST_CLOCKS[name]}): reads stay in user space", evidence=ev)
    if name in SLOW_CLOCKS:
        better = [a for a in avail if a in FAST_CLOCKS]
        fix = (f"echo {better[0]} > /{base}/current_clocksource, or boot with clocksource={better[0]}"
               + (" tsc=reliable if the TSC is invariant" if better[0] == "tsc" else "")
               if better else
               "no fast clock source is offered: boot with clocksource=tsc tsc=reliable if the CPU's TSC is invariant "
               "(constant_tsc, nonstop_tsc), after checking dmesg for why it was marked unstable")
        return warn(f"Clock source is {name} ({SLOW_CLOCKS[name]}): every timer read is a system call", evidence=ev,
                    why="clock_gettime and MPI_Wtime cost about 1 µs instead of ~20 ns: timer-heavy codes, tracing "
                        "and every profiler slow down",
                    fix=fix, needs_root=True, cause="fast_clock_not_selected" if better else "no_fast_clock",
                    data={"clocksource": name, "fast_available": better})
    return skipped(f"Clock source '{name}': ceiling does not know whether its reads are fast", evidence=ev)


# Mitigations with a known run-time cost on system calls, interrupts, context
# switches or vector code (Documentation/admin-guide/hw-vuln/*.rst).
COSTLY = {
    "meltdown": "PTI switches page tables on every kernel entry and exit",
    "spectre_v2": "IBRS / retpolines slow indirect branches, mostly in the kernel",
    "retbleed": "IBRS or return thunks on every kernel return",
    "spec_rstack_overflow": "safe-RET / IBPB on kernel entry (AMD Zen)",
    "mds": "VERW clears CPU buffers on every kernel exit",
    "tsx_async_abort": "VERW clears CPU buffers on every kernel exit",
    "mmio_stale_data": "VERW clears CPU buffers on every kernel exit",
    "l1tf": "L1D flush on VM entry (virtualization hosts)",
    "gather_data_sampling": "microcode slows AVX gather instructions",
    "reg_file_data_sampling": "VERW clears register files on kernel exit (Atom cores)",
    "indirect_target_selection": "indirect branch thunks in the kernel",
    "vmscape": "IBPB on exits to user-space VMMs",
}


@check("os.mitigations")
def mitigations(p: Probe):
    """CPU vulnerability mitigations in force
    (/sys/devices/system/cpu/vulnerabilities/*, /proc/cmdline).

    Informational, always ok: lists the mitigations in force and the
    vulnerabilities marked 'Vulnerable'. Codes that make many system calls,
    take many interrupts or do much I/O (small messages, metadata-heavy I/O,
    many threads waking and sleeping) pay for some of them: PTI (meltdown),
    IBRS and return thunks (spectre_v2, retbleed, SRSO), buffer clearing with
    VERW (mds, tsx_async_abort, mmio_stale_data), L1D flushes (l1tf, on
    virtualization hosts); the Downfall microcode (gather_data_sampling)
    slows AVX gathers in vectorised loops. Compute loops that stay in user
    space pay almost nothing.
    If the kernel command line has mitigations=off, the finding says so.
    skipped: the directory is absent (kernels before 4.15, or non-x86/Arm
    kernels without the interface).

    Fix (only where the site's security policy allows it, e.g. single-tenant
    compute nodes): boot with ``mitigations=off``; root.
    """
    base = "sys/devices/system/cpu/vulnerabilities"
    names = [n for n in p.listdir(base) if re.fullmatch(r"[A-Za-z0-9_]{1,64}", n)]
    if not names:
        return skipped("CPU vulnerability mitigations: not exposed",
                       evidence=f"/{base} is empty or unreadable" if p.exists(base) else
                       f"no /{base} (kernel before 4.15, or no such interface on this architecture)")
    in_force: List[str] = []
    vulnerable: List[str] = []
    unknown: List[str] = []
    for n in names:
        v = p.read(f"{base}/{n}")
        if v is None:
            unknown.append(n)
            continue
        v = " ".join(v.split())[:120]
        if v.startswith("Not affected"):
            continue
        if v.startswith("Vulnerable"):
            vulnerable.append(f"{n} ({v})")
        elif v.startswith("Mitigation") or v.startswith("KVM: Mitigation"):
            in_force.append(n)
        else:
            unknown.append(f"{n} ({v})")
    off = "mitigations=off" in (p.read("proc/cmdline") or "").split()
    costly = [n for n in in_force if n in COSTLY]
    ev_parts = [f"{len(names)} entries in /{base}"]
    if in_force:
        ev_parts.append("mitigated: " + ", ".join(in_force))
    if vulnerable:
        ev_parts.append("vulnerable: " + "; ".join(vulnerable))
    if unknown:
        ev_parts.append("other: " + "; ".join(unknown))
    if costly:
        ev_parts.append("with a run-time cost: " + "; ".join(f"{n}: {COSTLY[n]}" for n in costly))
    ev_parts.append("kernel command line has mitigations=off" if off else
                    "mitigations not switched off on the command line")
    title = (f"CPU mitigations switched off (mitigations=off); {len(vulnerable)} vulnerable" if off else
             f"CPU mitigations: {len(in_force)} in force, {len(vulnerable)} vulnerable")
    return ok(title, evidence="; ".join(ev_parts),
              why="" if off or not costly else
              "system-call-, interrupt- and I/O-heavy codes pay for some mitigations (PTI, IBRS/return thunks, "
              "VERW buffer clearing); compute loops in user space pay almost nothing",
              fix="" if off or not costly else
              "mitigations=off on the kernel command line, only where the site's security policy allows it",
              needs_root=bool(costly) and not off)
