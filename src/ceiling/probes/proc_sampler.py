"""What a running program does, read from /proc by its parent (``ceiling profile``).

Per thread of the program and of every process it starts: time on a CPU (user
and system from /proc/PID/task/TID/stat, nanoseconds from .../schedstat), time
waiting for a CPU (schedstat's run-queue delay: runnable, not running), and its
lifetime; per process: voluntary and involuntary context switches and the peak
resident set (status), and the bytes it read and wrote (io: ``rchar``/``wchar``
at the system call, ``read_bytes``/``write_bytes`` at the block layer). Node-wide:
/proc/stat's CPU times and the pressure (PSI) totals at start and end.

A process's threads also keep what they did over the intervals between two samples that
began with a child of the process alive (``with_children_*``): how long, and how much of it on
a CPU and waiting for one. A parent that waits for its children (wait4, or a polling loop of
sleeps, as fio's main process, make, a shell, mpirun) hardly runs then; what it did before
its first child and after its last is its own work (analysis/profile_supervisors.py).

A process seen in the tree that later runs on outside it (orphaned: its parent
ended without waiting for it, and it was reparented) is marked ``left``: the
exact totals taken at the program's exit (probes/launch.py) do not hold it.

The counters are cumulative, so a sample keeps only each thread's latest values:
a thread that ends between two samples keeps what the last one saw (its last
tenth of a second is lost; the parent's wait4 rusage gives the exact user and
system totals of the whole tree). Processes are found through the kernel's
``children`` lists (CONFIG_PROC_CHILDREN), else by a scan of /proc for their
parent pid.

Over time, per process (``Sampled.series``, for the trace's time line: analysis/trace_bins.py
splits the time outside intercepted calls into computing and waiting with it): at each sample,
the CPU time of all its threads so far (schedstat's, else user + system: a closed thread keeps
its last values) and its threads alive, from its start (0 CPU). At most ``SERIES_POINTS`` points
a process: past it every other point is let go, so a long run keeps a coarser series, never a
growing one (the values are cumulative: a coarser series is still exact at its points). The same
per thread (``Sampled.thread_series``, at most ``THREAD_SERIES_POINTS``): its CPU time so far.

Where the node has more than one NUMA node: each thread's CPU time per node (the node of the CPU it
was on at each sample takes the CPU time since the one before), and each process's private memory
per node from /proc/PID/numa_maps (probes/numa_maps.py: at most every 10 s a process, each read
timed, since it holds the process's mmap lock), for analysis/profile_numa.py.

Cost: one sample reads three small files per thread and two per process. The
sampler measures its own CPU time and stretches its interval so that its CPU
time since the start stays under ``BUDGET`` of one CPU (128 threads at 10 Hz
would cost about 4 %).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..sysfs import parse_cpulist, stat_fields
from . import numa_maps

BUDGET = 0.01            # at most this share of one CPU spent sampling
SERIES_POINTS = 4096     # points kept a process in Sampled.series (halved past it)
THREAD_SERIES_POINTS = 1024   # points kept a thread in Sampled.thread_series (halved past it)
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PSI = ("cpu", "io", "memory")


@dataclass
class ThreadSample:
    pid: int
    tid: int
    comm: str
    user_s: float = 0.0
    system_s: float = 0.0
    on_cpu_s: Optional[float] = None     # schedstat field 1; None where the kernel has no schedstats
    runq_s: Optional[float] = None       # schedstat field 2: runnable, waiting for a CPU
    first_s: float = 0.0                 # monotonic seconds: first seen (its start, when read)
    last_s: float = 0.0                  # monotonic seconds: last seen alive
    with_children_s: float = 0.0         # over intervals that began with a child of its process alive: seconds,
    with_children_on_s: float = 0.0      # ... on a CPU then (the same clock as on_cpu_s, else user + system),
    with_children_runq_s: float = 0.0    # ... and waiting for a CPU then
    cpu_by_node: Dict[int, float] = field(default_factory=dict)   # NUMA node -> CPU s there (several nodes only)


@dataclass
class ProcessSample:
    pid: int
    ppid: int
    comm: str                            # as last seen (after an exec, the new image's)
    exe: str = ""                        # as first seen
    voluntary: int = 0                   # context switches it asked for (blocking, sleeping)
    involuntary: int = 0                 # preemptions: another task took its CPU
    rss_peak_bytes: int = 0              # VmHWM
    io: Dict[str, int] = field(default_factory=dict)   # /proc/PID/io fields; {} when unreadable
    parent: bool = False                 # had a child of its own at some sample (a shell, mpirun, a launcher)
    start_ticks: int = 0                 # stat's starttime: the same process, not a reused pid
    left: bool = False                   # left the tree alive (orphaned, reparented): no one in it waited for it
    cpus_allowed: List[int] = field(default_factory=list)   # Cpus_allowed_list at its latest sample
    numa: Optional[numa_maps.Placement] = None   # its private memory per NUMA node, latest read (several nodes)


@dataclass
class Sampled:
    """What the sampler saw, for analysis/profile.py."""

    threads: Dict[Tuple[int, int], ThreadSample] = field(default_factory=dict)
    processes: Dict[int, ProcessSample] = field(default_factory=dict)
    samples: int = 0
    interval_s: float = 0.0              # the interval asked for
    cost_cpu_s: float = 0.0              # the sampler's own CPU time
    schedstat: bool = True               # the kernel reports run-queue delays
    node_cpu: Dict[str, Tuple[float, float]] = field(default_factory=dict)   # /proc/stat field -> (start, end) s
    psi: Dict[str, Tuple[float, float]] = field(default_factory=dict)        # "cpu some" -> (start, end) s
    runnable: List[int] = field(default_factory=list)   # per sample: the program's threads in state R then
    # per process over time: (monotonic s, CPU s of its threads so far, threads alive), from its start
    series: Dict[int, List[Tuple[float, float, int]]] = field(default_factory=dict)
    # per thread over time: (monotonic s, CPU s so far), from its start; the trace sets each thread's time outside
    # its calls against its own CPU time (analysis/trace_bins.split_off_cpu)
    thread_series: Dict[Tuple[int, int], List[Tuple[float, float]]] = field(default_factory=dict)
    # per process over time: (monotonic s, RSS bytes, read_bytes, write_bytes so far: /proc/PID/io's, None where it
    # cannot be read), the trace's process counter tracks (``process_tracks``)
    usage: Dict[int, List[Tuple[float, Optional[int], Optional[int], Optional[int]]]] = field(default_factory=dict)
    numa_nodes: int = 0                  # NUMA nodes with CPUs: numa_maps read and CPU time per node kept where > 1


class ProcSampler:
    """Samples ``pid`` and its descendants every ``interval_s`` on a thread of its own."""

    def __init__(self, pid: int, interval_s: float = 0.1, proc: str = "/proc",
                 cpu_node: Optional[Dict[int, int]] = None):
        """``cpu_node``: CPU -> NUMA node (default: /sys's, where ``proc`` is /proc; none elsewhere)."""
        self.pid, self.interval_s, self.proc = pid, interval_s, proc
        self.out = Sampled(interval_s=interval_s)
        if cpu_node is None:
            cpu_node = numa_maps.cpu_nodes() if proc == "/proc" else {}
        self.cpu_node = cpu_node
        self.out.numa_nodes = len(set(cpu_node.values()))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ceiling-sampler", daemon=True)
        self._boot = _boot_monotonic()
        self._ended: set = set()             # seen, then gone: not looked for again
        self._had_children: Dict[int, bool] = {}   # pid -> it had a child at the last sample
        self._running = 0
        self._cpu_sum: Dict[int, float] = {}     # pid -> CPU seconds of every thread of it seen so far

    def start(self) -> "ProcSampler":
        self.out.node_cpu = {k: (v, v) for k, v in _node_cpu(self.proc).items()}
        self.out.psi = {k: (v, v) for k, v in _psi(self.proc).items()}
        self._thread.start()
        return self

    def stop(self) -> Sampled:
        """One last sample (the program may already be gone), then the figures."""
        self._stop.set()
        self._thread.join()
        end = _node_cpu(self.proc)
        self.out.node_cpu = {k: (s, end.get(k, s)) for k, (s, _) in self.out.node_cpu.items()}
        psi = _psi(self.proc)
        self.out.psi = {k: (s, psi.get(k, s)) for k, (s, _) in self.out.psi.items()}
        return self.out

    def _loop(self) -> None:
        t_cpu0, t0 = time.thread_time(), time.monotonic()
        while True:
            c0 = time.thread_time()
            self.sample()
            now = time.thread_time()
            # The next sample no sooner than keeps all the CPU time this thread has used, with the
            # last sample's once more for the one taken at the stop, under BUDGET of the time since
            # the start: the cost reported is then under it whenever the program ends.
            wait = max(self.interval_s, (now - t_cpu0 + now - c0) / BUDGET - (time.monotonic() - t0))
            if self._stop.wait(wait):
                break
        self.sample()
        self.out.cost_cpu_s = time.thread_time() - t_cpu0

    def sample(self) -> None:
        now = time.monotonic()
        self.out.samples += 1
        self._running = 0
        tree = self._tree()
        for pid, parent in tree:
            self._process(pid, now)
            if parent and pid in self.out.processes:
                self.out.processes[pid].parent = True
        self._had_children = dict(tree)
        self.out.runnable.append(self._running)
        inside = {pid for pid, _ in tree}
        for p in self.out.processes.values():
            if p.pid != self.pid and not p.left and p.pid not in inside and p.pid not in self._ended:
                where = self._parent_now(p)
                if where is None:
                    self._ended.add(p.pid)
                else:
                    p.left = where not in inside

    def _parent_now(self, p: ProcessSample) -> Optional[int]:
        """The parent of ``p`` now, or None when it ended (and was reaped; its pid may be another
        process's now: the start time says). ``p`` was seen in the tree and is not in it: with a
        parent outside, it was orphaned and reparented, and neither the wait4 rusage nor the
        /proc/PID/io read at the program's exit holds it."""
        try:
            with open(f"{self.proc}/{p.pid}/stat", "rb") as f:
                fields = stat_fields(f.read(4096))
            ppid, start = int(fields[1]), int(fields[19])
        except (OSError, ValueError, IndexError):
            return None
        return ppid if start == p.start_ticks else None

    def _tree(self) -> List[Tuple[int, bool]]:
        """The program's pid and its descendants alive now, each with whether it has children."""
        seen: Dict[int, bool] = {}
        todo = [self.pid]
        scanned: Optional[Dict[int, List[int]]] = None
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            kids = _children(self.proc, pid)
            if kids is None:                     # no children lists: one scan of /proc per sample
                if scanned is None:
                    scanned = _parents(self.proc)
                kids = scanned.get(pid, [])
            seen[pid] = bool(kids)
            todo.extend(kids)
        return list(seen.items())

    def _process(self, pid: int, now: float) -> None:
        base = f"{self.proc}/{pid}"
        try:
            tids = [int(t) for t in os.listdir(f"{base}/task") if t.isdigit()]
        except OSError:
            return                               # ended since it was listed
        p = self.out.processes.get(pid)
        status = _status(f"{base}/status")
        if p is None and status:
            try:
                exe = os.readlink(f"{base}/exe")
            except OSError:
                exe = ""
            p = self.out.processes[pid] = ProcessSample(pid, int(status.get("PPid", "0") or 0),
                                                        status.get("Name", "?"), exe)
            try:
                with open(f"{base}/stat", "rb") as f:
                    p.start_ticks = int(stat_fields(f.read(4096))[19])
            except (OSError, ValueError, IndexError):
                pass
        if p is not None and status:
            p.comm = status.get("Name", p.comm)            # its latest image's: a forked shell execs the command
            p.voluntary = int(status.get("voluntary_ctxt_switches", p.voluntary) or 0)
            p.involuntary = int(status.get("nonvoluntary_ctxt_switches", p.involuntary) or 0)
            hwm = status.get("VmHWM", "")
            if hwm.endswith("kB"):
                p.rss_peak_bytes = max(p.rss_peak_bytes, int(hwm[:-2]) * 1024)
            p.cpus_allowed = parse_cpulist(status.get("Cpus_allowed_list")) or p.cpus_allowed
            io = _io(f"{base}/io")
            if io:
                p.io = io
            rss = status.get("VmRSS", "")
            pts = self.out.usage.setdefault(pid, [])
            pts.append((now, int(rss[:-2]) * 1024 if rss.endswith("kB") else None, io.get("read_bytes"),
                        io.get("write_bytes")))
            if len(pts) > SERIES_POINTS:
                pts[:] = pts[:-1:2] + pts[-1:]
        for tid in tids:
            self._thread_sample(pid, tid, now)
        if p is not None:
            self._series(pid, now, len(tids))
            if self.out.numa_nodes > 1:
                self._numa(p, now)

    def _numa(self, p: ProcessSample, now: float) -> None:
        """Its numa_maps once it is ``FIRST_S`` old, then at most every ``EVERY_S``."""
        age = now - (p.start_ticks / TICK - self._boot) if p.start_ticks else now
        if age < numa_maps.FIRST_S or (p.numa is not None and now - p.numa.at_s < numa_maps.EVERY_S):
            return
        p.numa = numa_maps.read(self.proc, p.pid, p.numa, now) or p.numa

    def _series(self, pid: int, now: float, alive: int) -> None:
        pts = self.out.series.get(pid)
        if pts is None:
            main = self.out.threads.get((pid, pid))
            pts = self.out.series[pid] = [(min(main.first_s, now) if main else now, 0.0, 1)]
        pts.append((now, self._cpu_sum.get(pid, 0.0), alive))
        if len(pts) > SERIES_POINTS:
            pts[:] = pts[:-1:2] + pts[-1:]

    def _thread_sample(self, pid: int, tid: int, now: float) -> None:
        base = f"{self.proc}/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat", "rb") as f:
                fields = stat_fields(f.read(4096))
        except (OSError, ValueError):
            return
        key = (pid, tid)
        t = self.out.threads.get(key)
        before = (t.last_s, _cpu(t), t.runq_s or 0.0) if t is not None else None
        was = _cpu(t) if t is not None else 0.0
        if t is None:
            # stat fields after the comm, counted from state (field 3): utime 14, stime 15, starttime 22
            comm = _comm(f"{base}/comm")
            start = int(fields[19]) / TICK - self._boot if len(fields) > 19 else now
            t = self.out.threads[key] = ThreadSample(pid, tid, comm, first_s=min(max(start, 0.0), now) or now)
        if len(fields) > 12:
            t.user_s, t.system_s = int(fields[11]) / TICK, int(fields[12]) / TICK
        if fields and fields[0] == b"R":         # running or runnable: wants a CPU now
            self._running += 1
        t.last_s = now
        try:
            with open(f"{base}/schedstat", "rb") as f:
                run_ns, wait_ns, *_ = f.read(256).split()
            t.on_cpu_s, t.runq_s = int(run_ns) / 1e9, int(wait_ns) / 1e9
        except (OSError, ValueError):
            self.out.schedstat = False
        self._cpu_sum[pid] = self._cpu_sum.get(pid, 0.0) + max(0.0, _cpu(t) - was)
        pts = self.out.thread_series.get(key)
        if pts is None:
            pts = self.out.thread_series[key] = [(min(t.first_s, now), 0.0)]
        pts.append((now, _cpu(t)))
        if len(pts) > THREAD_SERIES_POINTS:
            pts[:] = pts[:-1:2] + pts[-1:]
        if self.out.numa_nodes > 1 and len(fields) > 36:      # field 39, processor: the CPU it was last on
            node = self.cpu_node.get(int(fields[36]), -1)
            t.cpu_by_node[node] = t.cpu_by_node.get(node, 0.0) + max(0.0, _cpu(t) - was)
        if before is not None and self._had_children.get(pid):
            t.with_children_s += now - before[0]
            t.with_children_on_s += max(0.0, _cpu(t) - before[1])
            t.with_children_runq_s += max(0.0, (t.runq_s or 0.0) - before[2])


def process_tracks(sampled: Sampled, t0_ns: int, pids=None):
    """The trace's counter tracks of the program's processes (results/events.Track, scope "process"), and the
    same summed over them (scope "node", named "program ..."): CPUs in use (its CPU time over each interval
    between two samples), RSS, and read and write bytes/s to the storage layer (/proc/PID/io's read_bytes
    and write_bytes: what its disks see of it, beside the node's disk tracks), each rate placed at its
    interval's end, in ns since ``t0_ns`` (CLOCK_MONOTONIC). ``pids``: only these processes (the trace's);
    a process sampled once has its RSS and no rate. Returns (per process, summed)."""
    import numpy as np

    from ..results.events import Track
    per: list = []
    summed: Dict[Tuple[str, str], Dict[int, float]] = {}

    def add(pid: int, name: str, unit: str, pts: List[Tuple[int, float]]) -> None:
        if not pts or (unit == "B/s" and not any(v for _, v in pts)):      # moved nothing: left out
            return
        per.append(Track(name, unit, "process", np.array([t for t, _ in pts], np.int64),
                         np.array([v for _, v in pts], np.float64), pid=pid))
        acc = summed.setdefault((name, unit), {})
        for t, v in pts:
            acc[t] = acc.get(t, 0.0) + v
    for pid in sorted(set(sampled.series) | set(sampled.usage)):
        if pids is not None and pid not in pids:
            continue
        cpu = sampled.series.get(pid, [])
        add(pid, "cpu", "CPUs", [(int(round(b[0] * 1e9)) - t0_ns, max(0.0, b[1] - a[1]) / (b[0] - a[0]))
                                 for a, b in zip(cpu, cpu[1:]) if b[0] > a[0] and b[0] * 1e9 >= t0_ns])
        use = sampled.usage.get(pid, [])
        add(pid, "rss", "B", [(int(round(t * 1e9)) - t0_ns, float(r)) for t, r, _, _ in use
                              if r is not None and t * 1e9 >= t0_ns])
        for k, name in ((2, "read bytes/s"), (3, "write bytes/s")):
            add(pid, name, "B/s", [(int(round(b[0] * 1e9)) - t0_ns, max(0, b[k] - a[k]) / (b[0] - a[0]))
                                   for a, b in zip(use, use[1:]) if b[0] > a[0] and a[k] is not None
                                   and b[k] is not None and b[0] * 1e9 >= t0_ns])
    total = [Track(f"program {name}", unit, "node", np.array(sorted(acc), np.int64),
                   np.array([acc[t] for t in sorted(acc)], np.float64)) for (name, unit), acc in summed.items()]
    return per, total


def _cpu(t: ThreadSample) -> float:
    return t.on_cpu_s if t.on_cpu_s is not None else t.user_s + t.system_s


def _boot_monotonic() -> float:
    """How CLOCK_MONOTONIC relates to the clock of /proc's starttime (seconds since boot):
    starttime / TICK - this = the monotonic second a task started."""
    try:
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return up - time.monotonic()
    except (OSError, ValueError, IndexError):
        return 0.0


def _children(proc: str, pid: int) -> Optional[List[int]]:
    """Children of every thread of ``pid``; None when the kernel has no children lists."""
    try:
        tids = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return []
    out: List[int] = []
    for tid in tids:
        try:
            with open(f"{proc}/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"{proc}/{pid}/task/{tid}"):
                continue                          # the thread ended
            return None
        except (OSError, ValueError):
            continue
    return out


def _parents(proc: str) -> Dict[int, List[int]]:
    """ppid -> pids, from a scan of every /proc/PID/stat."""
    out: Dict[int, List[int]] = {}
    for d in os.listdir(proc):
        if not d.isdigit():
            continue
        try:
            with open(f"{proc}/{d}/stat", "rb") as f:
                fields = stat_fields(f.read(4096))
            out.setdefault(int(fields[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _status(path: str) -> Dict[str, str]:
    try:
        with open(path, errors="replace") as f:
            return {k: v.strip() for k, _, v in (line.partition(":") for line in f)}
    except OSError:
        return {}


def _comm(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _io(path: str) -> Dict[str, int]:
    """/proc/PID/io as numbers; {} where it cannot be read (another user's process, no
    CONFIG_TASK_IO_ACCOUNTING)."""
    try:
        with open(path) as f:
            return {k: int(v) for k, _, v in (line.partition(":") for line in f) if v.strip().isdigit()}
    except (OSError, ValueError):
        return {}


def _node_cpu(proc: str) -> Dict[str, float]:
    """The node's CPU seconds by state, summed over CPUs (/proc/stat's first line)."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    try:
        with open(f"{proc}/stat") as f:
            first = f.readline().split()
        return {n: int(v) / TICK for n, v in zip(names, first[1:])}
    except (OSError, ValueError):
        return {}


def _psi(proc: str) -> Dict[str, float]:
    """Pressure stall totals, seconds: "cpu some", "io some", "io full", ...; {} without PSI."""
    out: Dict[str, float] = {}
    for res in PSI:
        try:
            with open(f"{proc}/pressure/{res}") as f:
                for line in f:
                    kind, *kv = line.split()
                    total = dict(x.split("=", 1) for x in kv if "=" in x).get("total")
                    if total is not None:
                        out[f"{res} {kind}"] = int(total) / 1e6
        except (OSError, ValueError):
            continue
    return out
