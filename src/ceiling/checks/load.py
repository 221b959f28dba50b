"""Competing load: is anything else using the CPUs while we measure?

A benchmark that shares the node with another busy process reports lower and
noisier figures, and nothing in the figures themselves says why. So a sample
of the node's CPU accounting is taken before and after each measurement, and
the difference names who else ran: per process from /proc/[pid]/stat, and for
the whole node from /proc/stat (which also catches processes that started and
ended inside the interval, other containers, interrupts, and the hypervisor's
steal time in a VM).

``sample`` is cheap enough to call around every benchmark (one read of each
/proc/[pid]/stat, a few milliseconds for hundreds of processes); ``compare``
is a pure function of two samples; ``check_idle`` is the quick check before a
run starts. Every reader takes ``root`` so that tests can point it at a small
fixture tree instead of the live /proc.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from ..results.model import OK, SKIPPED, WARN, Finding
from ..sysfs import stat_fields
from .base import Probe, check

OTHER_CPU_WARN = 0.10     # other processes using this fraction of one CPU on average: warn
STEAL_WARN = 0.10         # hypervisor steal, in CPUs, above which a VM's host is busy
LOADAVG_PER_CPU_WARN = 0.5  # 1-minute load average per CPU before the start that is "busy"
TOP = 5                   # consumers named in the evidence
MIN_SHARE = 0.01          # a process below 1% of a CPU is not worth naming

FINDING_ID = "load.competing"
WHY = "they take cycles and memory bandwidth from the benchmark: results are lower and noisier"
FIX = "run on an idle node / exclusive allocation, e.g. srun --exclusive"

# What made the node busy (Finding.data["cause"], every one in data["causes"]) and the fix each
# calls for: another process or a busy node is yours to avoid; steal is the host's; another
# user's processes and memory held on your allocation are leftovers for the admin.
COMPETING, BUSY_BEFORE, STEAL = "competing_process", "load_before", "hypervisor_steal"
MEMORY_HELD, OTHER_USER = "memory_held", "other_user"
# What each cause adds to the fix; the causes that are this node's load share FIX, said once.
FIXES = {
    COMPETING: "stop or move the processes named in the evidence if they are yours",
    MEMORY_HELD: "end the processes holding memory if they are yours (named in the evidence)",
    STEAL: "the VM's host gives this VM's CPUs to other guests: ask for dedicated (pinned) vCPUs or another "
           "host; nothing inside the VM changes it",
    OTHER_USER: "another user's processes run on your allocation: ask the admin to end them (leftovers of an "
                "earlier job; a batch-system epilogue should clean them up)",
}


def fix_for(causes: List[str]) -> str:
    """The fix for ``causes``: what each adds, with the idle-node advice once for the node's own load."""
    local = [FIXES[c] for c in dict.fromkeys(causes) if c in (COMPETING, MEMORY_HELD)]
    if any(c in (COMPETING, BUSY_BEFORE, MEMORY_HELD) for c in causes):
        local = [", or ".join(["; ".join(local), FIX]) if local else FIX]
    return "; ".join(local + [FIXES[c] for c in dict.fromkeys(causes) if c in (STEAL, OTHER_USER)])


@dataclass(frozen=True)
class ProcTimes:
    """CPU time of one process, from /proc/[pid]/stat."""

    pid: int
    comm: str
    cpu_ticks: int       # utime + stime of all its threads, in clock ticks
    start_ticks: int     # start time after boot, clock ticks (tells a reused pid apart)
    rss_pages: int = 0   # resident set, in pages
    uid: Optional[int] = None   # owner (of /proc/[pid]), None when not known
    child_ticks: int = 0         # cutime + cstime: children it has waited for (a compiler it ran)
    ppid: int = 0                # parent; KTHREADD for a kernel thread


KTHREADD = 2           # the kernel threads' parent (pid 2 on Linux)
MIN_INTERVAL_S = 0.5   # shortest interval whose tick counts mean something


@dataclass
class LoadSample:
    """The node's CPU accounting at one moment."""

    available: bool = True
    reason: str = ""                        # why not available
    monotonic_s: float = 0.0
    uptime_s: Optional[float] = None        # /proc/uptime; the interval clock
    clk_tck: int = 100                      # clock ticks per second (USER_HZ)
    loadavg: Optional[Tuple[float, float, float]] = None   # 1, 5, 15 minutes
    running: Optional[int] = None           # runnable tasks now (this one included)
    tasks: Optional[int] = None             # tasks in the system
    ncpus: Optional[int] = None             # CPUs listed in /proc/stat
    busy_ticks: Optional[int] = None        # all CPUs: user+nice+system+irq+softirq
    steal_ticks: Optional[int] = None       # all CPUs: time the hypervisor gave to someone else
    own_pid: int = 0
    own_ticks: Optional[int] = None         # this process, all threads, and the children it waited for
    procs: Dict[int, ProcTimes] = field(default_factory=dict)   # every other process
    unreadable: int = 0                     # processes whose stat could not be read (hidepid)


def _read(path: str) -> bytes:
    # os.open/os.read: no buffered file object per process, which matters for hundreds of them.
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _parse_pid_stat(pid: int, data: bytes) -> ProcTimes:
    lp, rp = data.index(b"("), data.rindex(b")")
    rest = stat_fields(data)
    # rest[0] is field 3 (state); utime, stime, cutime, cstime, starttime are fields 14-17, 22.
    return ProcTimes(pid, data[lp + 1:rp].decode("utf-8", "replace"),
                     int(rest[11]) + int(rest[12]), int(rest[19]), rss_pages=max(0, int(rest[21])),
                     child_ticks=int(rest[13]) + int(rest[14]), ppid=int(rest[1]))


def _read_pid(proc: str, pid: int) -> Optional[ProcTimes]:
    try:
        t = _parse_pid_stat(pid, _read(f"{proc}/{pid}/stat"))
    except (OSError, ValueError, IndexError):
        return None
    try:
        return dataclasses.replace(t, uid=os.stat(f"{proc}/{pid}").st_uid)
    except OSError:
        return t


def sample(root: str = "/", pid: Optional[int] = None) -> LoadSample:
    """Read loadavg, node CPU time and every other process's CPU time.

    ``pid`` is this process (default ``os.getpid()``); it is kept apart as ``own_ticks``
    and not listed in ``procs``. Threads are not separate entries: /proc lists thread
    group leaders only, and their stat sums all threads.
    """
    own = os.getpid() if pid is None else pid
    proc = os.path.join(root, "proc")
    s = LoadSample(monotonic_s=time.monotonic(), own_pid=own)
    try:
        s.clk_tck = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        stat = _read_all(f"{proc}/stat")
    except OSError as e:
        return LoadSample(available=False, reason=f"cannot read {proc}/stat: {e.strerror or e}",
                          monotonic_s=s.monotonic_s, own_pid=own)
    ncpus = 0
    for line in stat.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            s.busy_ticks = f[0] + f[1] + f[2] + f[5] + f[6]   # guest time is inside user already
            s.steal_ticks = f[7]
        elif line.startswith("cpu") and line[3:4].isdigit():
            ncpus += 1
    s.ncpus = ncpus or None
    try:
        s.uptime_s = float(_read_all(f"{proc}/uptime").split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        la = _read_all(f"{proc}/loadavg").split()
        s.loadavg = (float(la[0]), float(la[1]), float(la[2]))
        running, tasks = la[3].split("/")
        s.running, s.tasks = int(running), int(tasks)
    except (OSError, ValueError, IndexError):
        pass
    try:
        entries = [e.name for e in os.scandir(proc) if e.name.isdigit()]
    except OSError as e:
        entries = []
        s.reason = f"cannot list {proc}: {e.strerror or e}"
    for name in entries:
        p = int(name)
        t = _read_pid(proc, p)
        if t is None:
            if os.path.exists(f"{proc}/{name}"):   # gone meanwhile is normal; hidden is not
                s.unreadable += 1
            continue
        if p == own:
            s.own_ticks = t.cpu_ticks + t.child_ticks
        else:
            s.procs[p] = t
    if s.own_ticks is None:
        t = _read_pid(proc, own)
        s.own_ticks = t.cpu_ticks + t.child_ticks if t else None
    return s


def _read_all(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def _interval_s(before: LoadSample, after: LoadSample) -> float:
    if before.uptime_s is not None and after.uptime_s is not None and after.uptime_s > before.uptime_s:
        return after.uptime_s - before.uptime_s
    return after.monotonic_s - before.monotonic_s


def consumers(before: LoadSample, after: LoadSample, own_pids: Iterable[int] = ()
              ) -> List[Tuple[int, str, float]]:
    """(pid, command, share of one CPU) of every other process that ran, largest first."""
    elapsed = _interval_s(before, after)
    if elapsed <= 0:
        return []
    hz = after.clk_tck
    skip = {before.own_pid, after.own_pid, *own_pids}
    out = []
    for pid, p in after.procs.items():
        if pid in skip:
            continue
        q = before.procs.get(pid)
        if q is not None and q.start_ticks == p.start_ticks:
            ticks = p.cpu_ticks - q.cpu_ticks
        elif before.uptime_s is not None and p.start_ticks / hz >= before.uptime_s:
            ticks = p.cpu_ticks          # started inside the interval: all its time is in it
        else:
            continue                     # existed before but was not seen: its share is unknown
        if ticks > 0:
            out.append((pid, p.comm, ticks / hz / elapsed))
    out.sort(key=lambda c: (-c[2], c[0]))
    return out


def compare(before: LoadSample, after: LoadSample, ncpus: int, own_pids: Iterable[int] = (),
            check_loadavg: bool = True, min_interval_s: float = MIN_INTERVAL_S, hidden_own: str = "") -> List[Finding]:
    """The "load.competing" finding for the interval between two samples.

    ``own_pids``: processes that belong to this measurement (helpers, other ranks of the
    same job). ``check_loadavg``: also warn when the 1-minute load average before the
    interval was at least half the CPU count; pass False between the steps of one run,
    where the load average mostly remembers ceiling's own previous step. ``hidden_own``: why
    the measurement's own processes may be among those not visible here (srun's tasks run under
    slurmstepd, outside the tree): then only the processes named count as other load, and the
    node's busy time beyond them is said, with that reason, not counted.
    """
    if not (before.available and after.available):
        reason = before.reason or after.reason
        return [Finding(FINDING_ID, SKIPPED, "Competing load not checked", evidence=reason, why=WHY)]
    own_pids = set(own_pids)
    elapsed = _interval_s(before, after)
    if elapsed <= 0 or elapsed < min_interval_s:
        # CPU time is counted in clock ticks (10 ms): shorter intervals give noise, not evidence.
        return [Finding(FINDING_ID, SKIPPED, "Competing load not checked",
                        evidence=f"the interval ({elapsed:.2f} s) is too short to judge", why=WHY)]
    hz = after.clk_tck
    top = consumers(before, after, own_pids)
    procs_cpus = sum(c[2] for c in top)
    node_cpus = None
    if None not in (before.busy_ticks, after.busy_ticks, before.own_ticks, after.own_ticks) \
            and before.own_pid == after.own_pid:
        mine = after.own_ticks - before.own_ticks
        # Ours: this process, the other ranks, and the short-lived children they ran and
        # waited for (the MPI compiler wrapper), which no process listing catches.
        mine += sum(after.procs[p].cpu_ticks + after.procs[p].child_ticks
                    - before.procs[p].cpu_ticks - before.procs[p].child_ticks for p in own_pids
                    if p in after.procs and p in before.procs)
        node_cpus = max(0.0, (after.busy_ticks - before.busy_ticks - mine) / hz / elapsed)
    # Per-process sums miss short-lived processes and other containers; node totals miss
    # nothing but name no one. The larger of the two is what the benchmark competed with.
    other = procs_cpus if hidden_own else max(procs_cpus, node_cpus or 0.0)
    steal = None
    if before.steal_ticks is not None and after.steal_ticks is not None:
        steal = (after.steal_ticks - before.steal_ticks) / hz / elapsed

    problems, causes = [], []
    if other >= OTHER_CPU_WARN:
        problems.append(f"Other processes used {other:.2f} CPUs during the measurement")
        causes.append(COMPETING)
    busy_before = (check_loadavg and before.loadavg is not None and ncpus > 0
                   and before.loadavg[0] >= LOADAVG_PER_CPU_WARN * ncpus)
    if busy_before:
        problems.append(f"Load average {before.loadavg[0]:.2f} on {ncpus} CPUs before the start")
        causes.append(BUSY_BEFORE)
    if steal is not None and steal >= STEAL_WARN:
        problems.append(f"The hypervisor took {steal:.2f} CPUs from this VM (steal time)")
        causes.append(STEAL)

    ev = [f"other processes used {other:.2f} CPUs on average over {elapsed:.2f} s"]
    named = [c for c in top if c[2] >= MIN_SHARE][:TOP]
    if named:
        ev.append("top: " + ", ".join(f"pid {pid} ({comm}) {share:.0%} of a CPU"
                                      for pid, comm, share in named))
    if node_cpus is not None and node_cpus > procs_cpus + OTHER_CPU_WARN / 2:
        ev.append(f"{node_cpus - procs_cpus:.2f} CPUs in processes not visible here, not counted: {hidden_own}"
                  if hidden_own else f"{node_cpus - procs_cpus:.2f} CPUs of it in processes not visible here "
                  f"(short-lived, other containers, interrupts)")
    if before.loadavg is not None:
        ev.append("load average before " + " ".join(f"{x:.2f}" for x in before.loadavg)
                  + f" ({ncpus} CPUs)")
    if steal:
        ev.append(f"steal {steal:.2f} CPUs")
    if before.unreadable or after.unreadable:
        ev.append(f"{max(before.unreadable, after.unreadable)} processes not readable (hidepid)")
    title = _sentence(problems) if problems else "No competing load during the measurement"
    data = {"cause": causes[0], "causes": causes,
            "processes": [{"pid": pid, "comm": comm, "cpu_share": share} for pid, comm, share in named]} \
        if causes else {}
    return [Finding(FINDING_ID, WARN if problems else OK, title, evidence="; ".join(ev),
                    why=WHY, fix=fix_for(causes), data=data)]


OTHER_USER_MIN_UID = 1000   # below: system accounts (daemons), not people
MEM_WARN = 0.05             # other processes holding this share of memory: warn


def _memory_and_users(s: LoadSample, after: LoadSample, own_uid: int
                      ) -> Tuple[List[str], List[str], List[str]]:
    """(problems, evidence, causes) about memory held by others and other users' processes."""
    problems, ev, causes = [], [], []
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError):
        return problems, ev, causes
    big = sorted((p for p in after.procs.values()), key=lambda p: -p.rss_pages)
    held = sum(p.rss_pages for p in after.procs.values()) * page
    top = [p for p in big[:TOP] if p.rss_pages * page >= 0.01 * total]
    if top:
        ev.append("largest memory: " + ", ".join(f"pid {p.pid} ({p.comm}) {p.rss_pages * page / 2**30:.1f} GiB"
                                                for p in top))
    if total and held >= MEM_WARN * total:
        problems.append(f"Other processes hold {held / 2**30:.1f} GiB ({held / total:.0%} of memory)")
        causes.append(MEMORY_HELD)
    users: Dict[int, List[ProcTimes]] = {}
    for p in after.procs.values():
        if p.uid is not None and p.uid >= OTHER_USER_MIN_UID and p.uid != own_uid and p.uid != 65534:
            users.setdefault(p.uid, []).append(p)
    if users:
        def name(uid: int) -> str:
            try:
                import pwd
                return pwd.getpwuid(uid).pw_name
            except (KeyError, ImportError):
                return f"uid {uid}"
        ran = {p.pid for p in after.procs.values()
               if p.pid in s.procs and p.cpu_ticks > s.procs[p.pid].cpu_ticks}
        parts = []
        for uid, procs in sorted(users.items(), key=lambda kv: -len(kv[1])):
            busy = [p for p in procs if p.pid in ran]
            parts.append(f"{name(uid)}: {len(procs)} processes" + (f", {len(busy)} running" if busy else ""))
            if busy:
                problems.append(f"Processes of another user ({name(uid)}) are running")
                if OTHER_USER not in causes:
                    causes.append(OTHER_USER)
        ev.append("other users' processes: " + "; ".join(parts[:TOP]))
    return problems, ev, causes


@check("load.competing", live=True)
def competing(p: Probe) -> Finding:
    """Competing load: other processes using the CPUs or the memory of this node now.

    Samples the node's CPU accounting (/proc/stat, every /proc/[pid]/stat:
    CPU time, resident memory, owner) twice, a quarter of a second apart,
    and reads the load average.

    warn: other processes used 0.1 CPU or more between the samples; the
    1-minute load average is at least half the allowed CPUs; in a VM, the
    hypervisor took 0.1 CPU or more (steal time); other processes hold 5% or
    more of the node's memory; or processes of another user (uid >= 1000)
    ran. The top consumers are named with pid, command and share of a CPU
    or GiB. During ``ceiling run`` the CPU sample is also taken around every
    benchmark, and a finding names who ran.

    Why: other work takes cycles, memory and memory bandwidth from the
    benchmark or the application; results are lower and noisier, and
    nothing in the figures themselves says why. Another user's processes on
    a node allocated to you are often the remains of an earlier job.

    Fix, by cause (data["cause"], all in data["causes"]): other processes
    or a busy node (competing_process, load_before, memory_held): stop yours,
    or an idle node or an exclusive allocation (``srun --exclusive``); steal
    time (hypervisor_steal): dedicated vCPUs or another host, nothing inside
    the VM; another user's processes (other_user): ask the admin to clean up
    stray processes of earlier jobs.
    """
    return check_idle(len(p.cpus()) or 1)


def _sentence(parts: List[str]) -> str:
    """Problems joined into one title: "Other processes used ...; the hypervisor took ..."."""
    return "; ".join(p if i == 0 else p[:1].lower() + p[1:] for i, p in enumerate(parts))


def check_idle(ncpus: int, interval_s: float = 0.25, root: str = "/") -> Finding:
    """The load.competing finding now: two samples ``interval_s`` apart, plus memory
    held by other processes and other users' processes (see ``competing``)."""
    before = sample(root)
    time.sleep(interval_s)
    after = sample(root)
    f = compare(before, after, ncpus, min_interval_s=0.0)[0]
    if f.status == OK:
        f.title = "The node is idle"
    if f.status == SKIPPED:
        return f
    problems, ev, causes = _memory_and_users(before, after, os.getuid())
    if ev:
        f.evidence = "; ".join([f.evidence] + ev)
    if problems:
        f.title = _sentence(([f.title] if f.status == WARN else []) + problems)
        f.status = WARN
        causes = f.data.get("causes", []) + causes
        f.data = {**f.data, "cause": causes[0], "causes": causes}
        f.fix = fix_for(causes)
    return f


class Competing:
    """The competing load (``compare``'s findings at warn or fail: other processes named with
    their share of a CPU, or the hypervisor's steal) of the interval from its making to
    ``stop``; empty when nothing competed. A measurement's own processes are this process's
    waited-for children (reaped before the interval ends) and ``own`` pids: not competition."""

    def __init__(self):
        self._before = sample()

    def stop(self, own: Iterable[int] = (), min_interval_s: Optional[float] = None,
             hidden_own: str = "") -> List[Finding]:
        after = sample()
        shortest = MIN_INTERVAL_S if min_interval_s is None else min_interval_s
        return [f for f in compare(self._before, after, len(os.sched_getaffinity(0)), own_pids=own,
                                   check_loadavg=False, min_interval_s=shortest, hidden_own=hidden_own)
                if f.status in ("warn", "fail")]


@contextlib.contextmanager
def competing_during():
    """``Competing`` around the interval inside, as a list filled on leaving."""
    found: List[Finding] = []
    watch = Competing()
    try:
        yield found
    finally:
        found.extend(watch.stop())
