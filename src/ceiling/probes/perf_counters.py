"""A program's hardware and software counters, through perf_event_open(2) (``ceiling profile``).

/proc tells how long a program was on a CPU, not what it did there: whether
its cycles retired instructions or waited for memory. The PMU's counters tell
that, and the kernel hands them to an unprivileged user for his own processes
(within perf_event_paranoid). This module calls the system call itself through
ctypes: no perf binary, no package, the same code on every node.

What is counted: the whole process tree of one program, from its exec to its
end. Each event is opened on the child's pid before it execs, disabled, with
``enable_on_exec`` (counting starts at the exec, not in our fork) and
``inherit`` (every process and thread it starts gets a copy, whose count the
kernel adds to ours when it exits: read after wait4, the totals are complete).
Events are opened one by one, never as a group: the kernel refuses
PERF_FORMAT_GROUP with inherit. When more hardware events are asked for than
the PMU has counters, the kernel time-shares them; each reading carries the
time enabled and the time running, and the count is scaled by their ratio
(reported as ``scaled``, 1.0 when the event was never multiplexed).

Because the counters must exist before the exec, the program is started here
(``spawn``): it is forked, from ceiling-launch (probes/launch.py) where that is
built, else from this process, and waits on a pipe while the counters are
opened on its pid; then it execs. An exec failure comes back as subprocess
reports it. The program keeps our standard streams and every inheritable
descriptor (an MPI launcher's PMI fds), and gets SIGPIPE and SIGXFSZ back at
their defaults, as subprocess.Popen(close_fds=False) does. ``Spawned.wait``
reaps it and gives its exit status, rusage and I/O totals at its exit.

Absent counters are a normal case (a VM without a virtual PMU, a paranoid
kernel): each event says in words why it is missing, and a figure is derived
only from events that counted. CEILING_NO_COUNTERS=1 turns it all off. The
floating-point operations retired are raw events of the CPUs whose codes are
known (probes/perf_flops.py), opened beside these where the CPU is one of them. The
struct and constants follow include/uapi/linux/perf_event.h; checks/perf.py
opens its test counters through ``perf_event_open`` here.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..sysfs import Root
from . import launch, perf_flops

SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "riscv64": 241}   # arch/*/syscall tables; asm-generic for the last two
PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, PERF_TYPE_HW_CACHE = 0, 1, 3
# The attribute's bit fields, one u64 on little-endian CPUs (bit 0 = the first field).
ATTR_DISABLED, ATTR_INHERIT = 1 << 0, 1 << 1
ATTR_EXCLUDE_KERNEL, ATTR_EXCLUDE_HV, ATTR_ENABLE_ON_EXEC = 1 << 5, 1 << 6, 1 << 12
FORMAT_TOTAL_TIME_ENABLED, FORMAT_TOTAL_TIME_RUNNING = 1 << 0, 1 << 1
PERF_FLAG_FD_CLOEXEC = 1 << 3
IOC_ENABLE, IOC_DISABLE, IOC_RESET = 0x2400, 0x2401, 0x2403   # _IO('$', 0), _IO('$', 1), _IO('$', 3)
CACHE_LL, CACHE_OP_READ, CACHE_RESULT_MISS = 2, 0, 1


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to sig_data: PERF_ATTR_SIZE_VER7, 128 bytes.
    Older kernels accept a larger struct whose extra bytes are zero."""

    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),   # the bit fields: disabled, ...
                ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
                ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
                ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
                ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
                ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
                ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
                ("aux_sample_size", ctypes.c_uint32), ("reserved_3", ctypes.c_uint32),
                ("sig_data", ctypes.c_uint64)]


ATTR_SIZE = ctypes.sizeof(PerfEventAttr)   # 128

# (name as perf stat spells it, type, config); task-clock counts nanoseconds, the rest events.
SOFTWARE = (("task-clock", PERF_TYPE_SOFTWARE, 1), ("context-switches", PERF_TYPE_SOFTWARE, 3),
            ("cpu-migrations", PERF_TYPE_SOFTWARE, 4), ("page-faults", PERF_TYPE_SOFTWARE, 2))
HARDWARE = (("cycles", PERF_TYPE_HARDWARE, 0), ("instructions", PERF_TYPE_HARDWARE, 1),
            ("cache-references", PERF_TYPE_HARDWARE, 2), ("cache-misses", PERF_TYPE_HARDWARE, 3),
            ("branch-instructions", PERF_TYPE_HARDWARE, 4), ("branch-misses", PERF_TYPE_HARDWARE, 5),
            ("stalled-cycles-frontend", PERF_TYPE_HARDWARE, 7), ("stalled-cycles-backend", PERF_TYPE_HARDWARE, 8),
            ("LLC-load-misses", PERF_TYPE_HW_CACHE, CACHE_LL | CACHE_OP_READ << 8 | CACHE_RESULT_MISS << 16))
EVENTS = SOFTWARE + HARDWARE

KERNEL_ONLY = ("context-switches", "cpu-migrations")   # raised with kernel registers: exclude_kernel hides them
OFF_VARIABLE = "CEILING_NO_COUNTERS"

ERRNO_MEANING = {
    errno.ENOENT: "the CPU exposes no such hardware event: no PMU, usual in a VM without a virtual PMU",
    errno.EOPNOTSUPP: "the PMU cannot do this: no counter or interrupt support, usual in VMs",
    errno.ENODEV: "no such PMU on this CPU",
    errno.EACCES: "not allowed: perf_event_paranoid or missing CAP_PERFMON",
    errno.EPERM: "not allowed: perf_event_paranoid, missing CAP_PERFMON, or a container's seccomp profile "
                 "blocking perf_event_open",
    errno.ENOSYS: "no perf_event_open here: a kernel without perf events, a filtered system call, or an "
                  "architecture ceiling does not know",
    errno.EINVAL: "the kernel rejected the request: an old kernel or an unsupported attribute",
    errno.EBUSY: "the counters are taken by the NMI watchdog, another profiler or the hypervisor",
    errno.EMFILE: "out of file descriptors",
}


@functools.lru_cache(maxsize=1)
def _syscall():
    fn = ctypes.CDLL(None, use_errno=True).syscall
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_ulong]
    return fn


def perf_event_open(attr: PerfEventAttr, pid: int, cpu: int = -1, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC, machine: Optional[str] = None) -> int:
    """perf_event_open(2): the event's file descriptor, or OSError with the kernel's errno
    (ENOSYS on an architecture whose system call number is not known here)."""
    nr = SYSCALL_NR.get(machine or platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    try:
        syscall = _syscall()
    except (OSError, AttributeError):
        raise OSError(errno.ENOSYS, "no syscall() in the C library") from None
    fd = syscall(nr, ctypes.addressof(attr), pid, cpu, group_fd, flags)
    if fd < 0:
        err = ctypes.get_errno() or errno.EINVAL
        raise OSError(err, os.strerror(err))
    return fd


def errno_name(err: int) -> str:
    return errno.errorcode.get(err, str(err))


def reason(err: int, paranoid: Optional[int]) -> str:
    """Why one event did not open, in words."""
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return "the CPU or the hypervisor exposes no such counter (a VM without a virtual PMU?)"
    if err in (errno.EACCES, errno.EPERM):
        level = "unknown" if paranoid is None else str(paranoid)
        text = (f"not allowed at perf_event_paranoid={level} (2: own processes, user space only; 3 and above: "
                "nothing); CAP_PERFMON or a lower perf_event_paranoid would allow it")
        return text + (", unless a container's seccomp profile blocks perf_event_open" if err == errno.EPERM else "")
    if err in (errno.EMFILE, errno.ENFILE):
        return "out of file descriptors: each counter takes one (raise ulimit -n)"
    return ERRNO_MEANING.get(err, os.strerror(err))


def turned_off(counters: bool = True, environ: Optional[Mapping[str, str]] = None) -> str:
    """Why no counter is to be opened at all ("" when they are wanted)."""
    if (os.environ if environ is None else environ).get(OFF_VARIABLE, "") not in ("", "0"):
        return f"hardware counters turned off ({OFF_VARIABLE})"
    return "" if counters else "hardware counters turned off (counters=False)"


def paranoid_level(root: Root) -> Optional[int]:
    return root.read_int("proc/sys/kernel/perf_event_paranoid")


@dataclass
class Event:
    """One event: open (fd) or not (errno and why)."""

    name: str
    type: int
    config: int
    fd: Optional[int] = None
    errno: Optional[int] = None
    why: str = ""


@dataclass
class Counters:
    """The events opened on one program, read and closed by its parent after wait4."""

    events: List[Event]
    paranoid: Optional[int]
    user_only: bool                       # exclude_kernel and exclude_hv were set

    @property
    def opened(self) -> List[Event]:
        return [e for e in self.events if e.fd is not None]

    def read(self) -> Dict[str, dict]:
        """Each event's record (see ``record``); the failed ones with their errno."""
        return {e.name: record(e, _read(e.fd) if e.fd is not None else None, self.user_only) for e in self.events}

    def close(self) -> None:
        for e in self.events:
            if e.fd is not None:
                os.close(e.fd)
                e.fd = None


def _read(fd: int) -> Optional[Tuple[int, int, int]]:
    """(count, time enabled ns, time running ns) from a read_format TOTAL_TIME_ENABLED|RUNNING fd."""
    try:
        data = os.read(fd, 24)
    except OSError:
        return None
    return struct.unpack("=QQQ", data) if len(data) == 24 else None


def open_counters(pid: int, events: Sequence[Tuple[str, int, int]] = EVENTS, root: Optional[Root] = None,
                  machine: Optional[str] = None) -> Counters:
    """Open every event on ``pid`` and its future descendants, disabled until its next exec.
    An event that fails is kept with its errno; the others are open regardless."""
    paranoid = paranoid_level(root or Root("/"))
    user_only = paranoid is None or paranoid >= 2
    out = []
    for name, typ, config in events:
        attr = PerfEventAttr(type=typ, size=ATTR_SIZE, config=config,
                             read_format=FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
                             flags=ATTR_DISABLED | ATTR_INHERIT | ATTR_ENABLE_ON_EXEC |
                             (ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV if user_only else 0))
        ev = Event(name, typ, config)
        try:
            ev.fd = perf_event_open(attr, pid, machine=machine)
        except OSError as e:
            ev.errno = e.errno or errno.EINVAL
            ev.why = reason(ev.errno, paranoid)
        out.append(ev)
    return Counters(out, paranoid, user_only)


def record(ev: Event, reading: Optional[Tuple[int, int, int]], user_only: bool) -> dict:
    """One event's JSON record: ``value`` the count scaled to the whole time enabled,
    ``raw`` as read, ``scaled`` the share of that time it was on the PMU (running / enabled)."""
    out = {"value": None, "raw": None, "scaled": None, "errno": None, "why": ev.why}
    if ev.errno is not None:
        out["errno"] = errno_name(ev.errno)
        return out
    if reading is None:
        out["why"] = "the counter could not be read back"
        return out
    raw, enabled, running = reading
    out.update(raw=raw, enabled_ns=enabled, running_ns=running)
    if enabled == 0:
        out["why"] = "never enabled: the program did not run after its exec"
    elif running == 0:
        out["why"] = "never on the PMU: more events than counters, and this one never got a turn"
    else:
        out["scaled"] = running / enabled
        out["value"] = raw if running == enabled else round(raw * enabled / running)
        if running < enabled:
            out["why"] = f"multiplexed: counted {running / enabled:.0%} of the time, scaled up"
    if user_only and ev.name in KERNEL_ONLY and out["value"] == 0:
        out["value"], out["why"] = None, ("not countable in user space only (perf_event_paranoid >= 2): the kernel "
                                          "records these in kernel mode, so the 0 read means nothing")
    return out


def line_bytes(root: Root) -> Tuple[Optional[int], str]:
    """The last-level cache's line size in bytes and where it came from."""
    base = "sys/devices/system/cpu/cpu0/cache"
    best: Tuple[int, Optional[int]] = (-1, None)
    for idx in root.listdir(base):
        if re.fullmatch(r"index\d+", idx):
            level, line = root.read_int(f"{base}/{idx}/level"), root.read_int(f"{base}/{idx}/coherency_line_size")
            if level is not None and line and level > best[0]:
                best = (level, line)
    if best[1]:
        return best[1], f"/{base}: L{best[0]} coherency_line_size"
    for name in ("SC_LEVEL3_CACHE_LINESIZE", "SC_LEVEL2_CACHE_LINESIZE", "SC_LEVEL1_DCACHE_LINESIZE"):
        try:
            value = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if value > 0:
            return value, f"sysconf({name})"
    return None, "no cache-line size in sysfs or sysconf"


def _value(events: Dict[str, dict], name: str) -> Optional[int]:
    return (events.get(name) or {}).get("value")


def _missing(events: Dict[str, dict], *names: str) -> str:
    """Why the first of ``names`` that has no value has none."""
    for n in names:
        rec = events.get(n)
        if rec is None:
            return f"{n} not asked for"
        if rec.get("value") is None:
            code = f" ({rec['errno']})" if rec.get("errno") else ""
            return f"{n} not counted{code}: {rec.get('why') or 'no value'}"
    return ""


def _ratio(events: Dict[str, dict], top: str, bottom: str, times: float = 1.0) -> Tuple[Optional[float], str]:
    why = _missing(events, top, bottom)
    if why:
        return None, why
    if not _value(events, bottom):
        return None, f"{bottom} counted 0"
    return times * _value(events, top) / _value(events, bottom), ""


def derive(events: Dict[str, dict], wall_s: Optional[float] = None,
           line: Tuple[Optional[int], str] = (None, "")) -> Tuple[Dict[str, dict], Dict[str, str]]:
    """The figures that follow from the counts (each only when its inputs were counted) and,
    for the others, why not: (derived, not_derived)."""
    done: Dict[str, dict] = {}
    missing: Dict[str, str] = {}

    def put(name: str, value: Optional[float], why: str, **how: str) -> None:
        if value is None:
            missing[name] = why
        else:
            done[name] = {"value": value, **how}

    put("ipc", *_ratio(events, "instructions", "cycles"), how="instructions / cycles")
    put("backend_stall_share", *_ratio(events, "stalled-cycles-backend", "cycles"),
        how="stalled-cycles-backend / cycles: the share of cycles the back end (often memory) stalled")
    put("llc_load_misses_per_kilo_instruction", *_ratio(events, "LLC-load-misses", "instructions", 1000.0),
        how="1000 x LLC-load-misses / instructions")
    if wall_s is None or wall_s <= 0:
        put("cpu_utilisation", None, "no wall time given")
    else:
        clock = _value(events, "task-clock")
        put("cpu_utilisation", None if clock is None else clock / 1e9 / wall_s, _missing(events, "task-clock"),
            how="task-clock / wall time: CPUs kept busy on average")
    got = perf_flops.derive(events, _value, _missing)
    if got is not None:
        put("flops", *got[:2], **got[2])
    size, source = line
    misses = _value(events, "LLC-load-misses")
    if misses is None or not size:
        put("memory_traffic_min_bytes", None,
            _missing(events, "LLC-load-misses") or f"cache-line size unknown: {source}")
    else:
        note = "lower bound: counts read misses only, no prefetches or writebacks"
        put("memory_traffic_min_bytes", misses * size, "", how=f"LLC-load-misses x {size} B line ({source})", note=note)
        if wall_s and wall_s > 0:
            put("memory_bandwidth_min_bytes_per_s", misses * size / wall_s, "",
                how="memory_traffic_min_bytes / wall time", note=note)
    return done, missing


def _in_vm(root: Root) -> bool:
    cpuinfo = root.read("proc/cpuinfo") or ""
    return bool(root.read("sys/hypervisor/type")) or bool(re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M))


def hardware_verdict(events: Dict[str, dict], hypervisor: Optional[str] = None,
                     in_vm: bool = False) -> Tuple[bool, str]:
    """(whether hardware counters counted, and if not the one statement of what is missing and why).
    ``hypervisor``: its name when the caller knows it (Machine.hypervisor)."""
    hw = [n for n, t, _ in HARDWARE if n in events]
    if any(_value(events, n) for n in hw):
        return True, ""
    if not hw:
        return False, "no hardware counters asked for"
    lost = "compute and memory cannot be told apart from counters"
    first = next((n for n in hw if events[n].get("errno")), None)
    if first is None:
        return False, f"no hardware counters: {', '.join(hw[:2])} opened but counted nothing " \
                      f"(a hypervisor's stub PMU?); {lost}"
    rec = events[first]
    why = rec["why"]
    if rec["errno"] in ("ENOENT", "EOPNOTSUPP", "ENODEV"):
        why = (f"this {hypervisor} guest has no virtual PMU" if hypervisor else
               "this virtual machine has no virtual PMU" if in_vm else "this CPU exposes no PMU to Linux")
    return False, f"no hardware counters: the {first} event cannot be opened ({rec['errno']}): {why}; {lost}"


def summary(events: Dict[str, dict], paranoid: Optional[int], user_only: Optional[bool],
            wall_s: Optional[float] = None, hypervisor: Optional[str] = None, root: Optional[Root] = None,
            why: str = "") -> dict:
    """The JSON-ready result: {available, why, events, derived, not_derived, paranoid, user_only}.
    ``available``: hardware counters counted; ``why`` says what is missing when they did not
    (given: nothing was opened, for that reason)."""
    root = root or Root("/")
    out = {"available": False, "why": why, "events": events, "derived": {}, "not_derived": {},
           "paranoid": paranoid, "user_only": user_only}
    if not why:
        out["available"], out["why"] = hardware_verdict(events, hypervisor, bool(hypervisor) or _in_vm(root))
        out["derived"], out["not_derived"] = derive(events, wall_s, line_bytes(root))
        if "flops" not in out["derived"] and "flops" not in out["not_derived"]:      # none asked for: why
            out["not_derived"]["flops"] = perf_flops.events_for(root.read("proc/cpuinfo") or "")[1]
    return out


# -- starting the program ------------------------------------------------------------

@dataclass
class Spawned:
    """A started program: its pid, its counters (None when none could be opened, and
    ``why`` then says why), and the events tried, for the record."""

    pid: int
    counters: Optional[Counters]
    why: str = ""
    tried: List[Event] = field(default_factory=list)
    paranoid: Optional[int] = None
    launched: Optional[launch.Launched] = None      # started from ceiling-launch; None: forked from here

    def wait(self, watch: Optional[launch.Watch] = None) -> launch.Exit:
        """Until the program ends (``watch``: the signals ceiling gets meanwhile, passed on by
        the rule of probes/launch.py); its exit status, rusage and I/O totals. Then ``finish``."""
        if self.launched is not None:
            return self.launched.wait(watch)
        return launch.wait_direct(self.pid, watch)

    def finish(self, wall_s: Optional[float] = None, hypervisor: Optional[str] = None,
               root: Optional[Root] = None) -> dict:
        """Read every counter and close them: call after the program was reaped (wait4),
        when the counts of its whole tree have been summed. See ``summary``."""
        if self.counters is None:
            events = {e.name: record(e, None, True) for e in self.tried}
            return summary(events, self.paranoid, None, wall_s, hypervisor, root, why=self.why)
        try:
            events = self.counters.read()
        finally:
            self.counters.close()
        return summary(events, self.counters.paranoid, self.counters.user_only, wall_s, hypervisor, root)

    def close(self) -> None:
        if self.counters is not None:
            self.counters.close()


def spawn(argv: Sequence[str], executable: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
          counters: bool = True, events: Optional[Sequence[Tuple[str, int, int]]] = None,
          launcher: Optional[str] = None) -> Spawned:
    """Start ``argv`` (``executable`` or argv[0], searched in env's PATH when it has no
    slash) with the counters opened on it, counting from its exec; from ceiling-launch
    (``launcher``, else the one built beside the core, where it is), else forked from here.
    The caller reaps it (``Spawned.wait``) and then calls ``finish``. Raises OSError with
    the exec's errno when the program cannot be started (nothing is left behind then)."""
    argv = list(argv)
    if not argv:
        raise ValueError("spawn: empty argv")
    if events is None:                       # the usual events, and this CPU's flop events where known
        events = EVENTS + perf_flops.events_for(Root("/").read("proc/cpuinfo") or "")[0]
    exe = executable or argv[0]
    env = dict(os.environ if env is None else env)
    off = turned_off(counters)
    if launcher is None:
        from .. import core
        built = core.launcher_path()
        launcher = str(built) if os.access(built, os.X_OK) else ""
    held: List[Counters] = []

    def before_exec(pid: int) -> Optional[Counters]:
        if not off:
            held.append(open_counters(pid, events))
        return held[0] if held else None
    try:
        if launcher:
            try:
                child, opened = launch.start(launcher, argv, exe, env, before_exec)
                return _spawned(child.pid, opened, off, child)
            except launch.LauncherFailed:
                pass                          # the launcher itself did not run: as without it
        pid, opened = launch.fork(argv, exe, env, before_exec)
    except BaseException:
        for c in held:
            c.close()
        raise
    return _spawned(pid, opened, off, None)


def _spawned(pid: int, opened: Optional[Counters], off: str, launched: Optional[launch.Launched]) -> Spawned:
    if opened is not None and not opened.opened:
        first = opened.events[0] if opened.events else None
        why = ("no events asked for" if first is None else
               f"no counter could be opened: {first.name}: {errno_name(first.errno)} ({first.why})")
        return Spawned(pid, None, why, opened.events, opened.paranoid, launched)
    return Spawned(pid, opened, off, [], opened.paranoid if opened else paranoid_level(Root("/")), launched)
