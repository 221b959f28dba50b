"""Profiling support: perf_event_paranoid, and whether hardware counters open here."""
from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
from typing import Dict, List, Optional, Tuple

from ..probes.perf_counters import (ATTR_DISABLED, ATTR_EXCLUDE_HV, ATTR_EXCLUDE_KERNEL, ATTR_SIZE,  # noqa: F401
                                    ERRNO_MEANING, IOC_DISABLE, IOC_ENABLE, IOC_RESET, PERF_TYPE_HARDWARE,
                                    SYSCALL_NR, PerfEventAttr, perf_event_open)
from .base import Probe, check, ok, skipped, warn

# What an unprivileged user may do at each level
# (Documentation/admin-guide/sysctl/kernel.rst, perf_event_paranoid; levels 3
# and 4 come from Debian's, Ubuntu's and Android's patches).
PARANOID = {
    -1: "everything: all events, CPU-wide and per process, kernel and user, raw tracepoints",
    0: "CPU-wide and per-process counting of kernel and user code, but no raw tracepoints",
    1: "per-process counting of kernel and user code; no CPU-wide (system, uncore) counting",
    2: "per-process counting of user-space code only",
    3: "nothing: perf_event_open is refused without CAP_PERFMON (distribution patch)",
}
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38


def privileged(p: Probe) -> Optional[bool]:
    """Whether this process has CAP_PERFMON or CAP_SYS_ADMIN (what the kernel's
    perfmon_capable() asks); None when it cannot tell (a recorded tree)."""
    if not p.live:
        return None
    for line in p.lines("proc/self/status"):
        if line.startswith("CapEff:"):
            try:
                caps = int(line.split()[1], 16)
            except (IndexError, ValueError):
                break
            return bool(caps >> CAP_PERFMON & 1 or caps >> CAP_SYS_ADMIN & 1)
    return os.geteuid() == 0


def paranoid_level(text: Optional[str]) -> Optional[int]:
    try:
        return int((text or "").split()[0])
    except (IndexError, ValueError):
        return None


def allowed(level: int) -> str:
    return PARANOID[max(-1, min(level, 3))]


@check("perf.paranoid")
def paranoid(p: Probe):
    """What unprivileged profiling may do (/proc/sys/kernel/perf_event_paranoid).

    -1: everything; 0: CPU-wide and per-process events, kernel and user, but
    no raw tracepoints; 1: per-process, kernel and user code; 2: per-process,
    user-space code only; 3 and 4 (Debian, Ubuntu, Android patches): no
    perf_event_open at all without CAP_PERFMON.

    warn: level 2 or higher for a user without CAP_PERFMON / CAP_SYS_ADMIN
    (on a recorded tree: for an unprivileged user). Profilers (perf, VTune,
    PAPI, LIKWID's perf_event backend) then lose the time spent in
    the kernel (system calls, page faults, MPI progress in drivers),
    system-wide counting, and the uncore counters that measure memory
    bandwidth. At level 1 uncore and system-wide counting still need 0.
    ok: level 1 or lower, or a privileged user.
    skipped: the file is absent (no perf events in this kernel, or /proc/sys
    hidden in a container).

    Fix: ``sysctl kernel.perf_event_paranoid=1`` (0 for uncore and
    system-wide counting; persist it in /etc/sysctl.d/), or give the profiler
    CAP_PERFMON (``setcap cap_perfmon+ep``); root.
    """
    text = p.read("proc/sys/kernel/perf_event_paranoid")
    level = paranoid_level(text)
    if level is None:
        return skipped("perf_event_paranoid: not readable",
                       evidence="no /proc/sys/kernel/perf_event_paranoid" if text is None
                       else f"perf_event_paranoid holds {text[:40]!r}, not a number",
                       why="no perf events in this kernel, or /proc/sys hidden in a container")
    return paranoid_verdict(level, privileged(p))


def paranoid_verdict(level: int, priv: Optional[bool]):
    ev = f"perf_event_paranoid={level}: unprivileged users get {allowed(level)}"
    if priv:
        return ok(f"Profiling: this user may use every event (CAP_PERFMON/CAP_SYS_ADMIN); perf_event_paranoid={level}",
                  evidence=ev + "; this process is privileged")
    who = "this user" if priv is False else "an unprivileged user"
    if level >= 2:
        lost = ("kernel time, system-wide counting and uncore (memory-bandwidth) counters" if level == 2 else
                "all hardware counters and sampling")
        return warn(f"Profiling restricted for {who}: perf_event_paranoid={level}", evidence=ev,
                    why=f"profilers lose {lost}: time in system calls, page faults and drivers is invisible, "
                        "and memory bandwidth cannot be measured",
                    fix="sysctl kernel.perf_event_paranoid=1 (0 for uncore and system-wide counting; persist in "
                        "/etc/sysctl.d/), or setcap cap_perfmon+ep on the profiler", needs_root=True,
                    cause="paranoid", data={"level": level})
    note = "; uncore and system-wide counting need 0 or CAP_PERFMON" if level == 1 else ""
    return ok(f"Profiling allowed for {who}: perf_event_paranoid={level}", evidence=ev + note)


# -- perf_event_open ---------------------------------------------------------------
# The binding lives with the program's counters (probes/perf_counters.py); a check opens
# its test counters on this process through it.

HW_EVENTS = (("cycles", 0), ("instructions", 1))   # PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS


def _busy(n: int = 200_000) -> int:
    s = 0
    for i in range(n):
        s += i * i
    return s


def count_hw(config: int, machine: Optional[str] = None) -> Tuple[Optional[int], Optional[int]]:
    """Open one hardware counter on this process (user space only), count a
    short busy loop, close it: (count, None) or (None, errno)."""
    attr = PerfEventAttr(type=PERF_TYPE_HARDWARE, size=ATTR_SIZE, config=config,
                         flags=ATTR_DISABLED | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV)
    try:
        fd = perf_event_open(attr, 0, machine=machine)   # pid 0 = this process, any CPU
    except OSError as e:
        return None, e.errno or errno.EINVAL
    try:
        fcntl.ioctl(fd, IOC_RESET, 0)
        fcntl.ioctl(fd, IOC_ENABLE, 0)
        _busy()
        fcntl.ioctl(fd, IOC_DISABLE, 0)
        data = os.read(fd, 8)
        if len(data) != 8:
            return None, errno.EIO
        return struct.unpack("=Q", data)[0], None
    except OSError as e:
        return None, e.errno or errno.EIO
    finally:
        os.close(fd)


CORE_PMUS = re.compile(r"^(cpu|cpu_core|cpu_atom|cpum_cf|armv[789].*|arm_cortex.*|riscv-pmu.*)$")
UNCORE_PMUS = re.compile(r"^(uncore_.*|amd_df|amd_l3|amd_umc.*|arm_cmn.*|arm_dsu.*|arm_cspmu.*|nvidia_.*|hisi_.*|"
                         r"dmc620.*|cxl_pmu.*|arm_smmuv3.*)$")


def pmu_verdict(pmus: List[str], counts: Dict[str, Tuple[Optional[int], Optional[int]]], paranoid: Optional[int]):
    """The finding from the PMUs listed in sysfs and the counters' outcome."""
    core = [n for n in pmus if CORE_PMUS.match(n)]
    uncore = [n for n in pmus if UNCORE_PMUS.match(n)]
    ev = [f"/sys/bus/event_source/devices: {', '.join(pmus[:20]) or 'none'}" + (" …" if len(pmus) > 20 else ""),
          f"core PMU: {', '.join(core) or 'none'}", f"uncore PMUs: {len(uncore)}"]
    if paranoid is not None:
        ev.append(f"perf_event_paranoid={paranoid}")
    parts, errs = [], {}
    for name, (value, err) in counts.items():
        if err is None:
            parts.append(f"{name} {value:,}")
        else:
            errs[name] = err
    for err in dict.fromkeys(errs.values()):
        names = ", ".join(n for n, e in errs.items() if e == err)
        parts.append(f"{names}: {errno.errorcode.get(err, str(err))} ({ERRNO_MEANING.get(err, os.strerror(err))})")
    ev.append("perf_event_open on this process: " + "; ".join(parts))
    evidence = "; ".join(ev)
    good = {n: v for n, (v, e) in counts.items() if e is None}
    if counts and not errs and all(v > 0 for v in good.values()):
        if good.get("cycles") and "instructions" in good:
            # Only shows the counters count plausibly; says nothing about the user's code.
            evidence += (f"; sanity check that the counters count: {good['instructions'] / good['cycles']:.2f} "
                         f"instructions per cycle on the test loop")
        return ok(f"Hardware counters work: {' and '.join(good)} counted", evidence=evidence,
                  why="perf stat/record, LIKWID, PAPI and VTune can count cycles, instructions, cache misses and "
                      "the like on this node" +
                      ("; uncore PMUs are present for memory-bandwidth counting" if uncore else ""))
    why = ("profilers lose the hardware counters: perf stat/record, LIKWID and PAPI cannot count cycles, instructions, "
           "cache misses or memory bandwidth (LIKWID's and PAPI's hardware groups fail, perf record falls back to "
           "timer sampling); only timings remain")
    if errs:
        err = next(iter(errs.values()))
        if err in (errno.EACCES, errno.EPERM) and paranoid is not None and paranoid >= 3:
            # Levels 3 and up refuse every unprivileged perf_event_open: the sysctl is the cause.
            cause, fix = "paranoid", ("sysctl kernel.perf_event_paranoid=2 or lower (root), or CAP_PERFMON for "
                                      "the profiler")
        elif err in (errno.EACCES, errno.EPERM) and paranoid is not None:
            # The level allows counting one's own process, so something else refuses: a container's
            # seccomp profile or a security module.
            cause, fix = "denied", (f"perf_event_paranoid={paranoid} allows it, so a container's seccomp profile or a "
                                    f"security module refuses perf_event_open: docker --cap-add PERFMON (or a seccomp "
                                    f"profile that allows it)")
        elif err in (errno.EACCES, errno.EPERM):
            cause, fix = "denied", ("sysctl kernel.perf_event_paranoid=2 or lower (root), CAP_PERFMON for the "
                                    "profiler, "
                                    "or in a container a seccomp profile that allows perf_event_open (docker --cap-add "
                                    "PERFMON)")
        elif err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
            cause, fix = "no_pmu", ("enable the virtual PMU in the hypervisor (KVM/libvirt: <pmu state='on'/> or -cpu "
                                    "host,pmu=on; VMware: 'virtualize CPU performance counters'), or profile on bare "
                                    "metal")
        else:
            cause, fix = "open_failed", "see the error above; perf stat -e cycles true shows the same from the shell"
        return warn(f"Hardware counters cannot be opened here ({errno.errorcode.get(err, str(err))})",
                    evidence=evidence, why=why, fix=fix, needs_root=cause != "open_failed", cause=cause,
                    data={"errno": errno.errorcode.get(err, str(err))})
    if not counts:
        return skipped("Hardware counters: not tried", evidence=evidence)
    return warn("Hardware counters open but count nothing", evidence=evidence,
                why=why + " (the counters are exposed but do not count: often a hypervisor's stub PMU)",
                fix="enable a real virtual PMU in the hypervisor, or profile on bare metal", needs_root=True,
                cause="stub_pmu")


@check("perf.pmu", live=True)
def pmu(p: Probe):
    """Hardware performance counters: the PMUs in /sys/bus/event_source/devices
    (cpu, cpu_core/cpu_atom on hybrid Intel, armv8_pmuv3* on Arm, and uncore
    PMUs such as uncore_imc, amd_df, arm_cmn) and a real perf_event_open(2)
    of CPU cycles and instructions on this process, user space only, counting
    a short loop.

    warn: the counters cannot be opened (the errno and what it means: ENOENT
    or EOPNOTSUPP: no PMU, usual in VMs; EACCES or EPERM:
    perf_event_paranoid, CAP_PERFMON, or a container's seccomp profile), or
    they open but count nothing. Profilers then lose the hardware counters:
    perf stat and perf record, LIKWID and PAPI cannot count cycles,
    instructions, cache misses or memory bandwidth (perf record falls back to
    timer-based sampling, LIKWID's and PAPI's hardware groups fail); only
    timings remain.
    ok: both counted (the evidence shows instructions per cycle of the test
    loop, only as a sanity check that the counters count).
    skipped on a recorded tree: it opens counters on this process now.

    Fix: in a VM enable the virtual PMU (KVM/libvirt ``<pmu state='on'/>``,
    QEMU ``-cpu host,pmu=on``, VMware 'virtualize CPU performance counters');
    for permission errors lower perf_event_paranoid or grant CAP_PERFMON.
    """
    pmus = p.listdir("sys/bus/event_source/devices")
    counts = {}
    for name, config in HW_EVENTS:
        counts[name] = count_hw(config)
    return pmu_verdict(pmus, counts, paranoid_level(p.read("proc/sys/kernel/perf_event_paranoid")))
