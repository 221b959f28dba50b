"""The jobs on a node, each read from its cgroup (Slurm's, v1 and v2), or one command's process tree
(``ceiling monitor -- CMD``): the same ``JobRead`` for both, turned into rates by ``job_rates``.

Slurm's layouts (tests/fixtures/slurm_cgroups/README.md says where they come from):

- cgroup v2 (cgroup/v2 plugin): ``<root>/system.slice/slurmstepd.scope/job_<id>/step_<n>/...``
  (``<nodename>_slurmstepd.scope`` with several slurmd per host). The job's directory holds the job's
  totals: ``cpuset.cpus.effective``, ``memory.current``, ``memory.peak`` (Linux 5.19+), ``io.stat``
  (rbytes, wbytes per device), ``cpu.stat`` (usage_usec). Its owner is root: the user is the owner
  of a process in one of its steps (``cgroup.procs`` -> /proc/PID/status Uid).
- cgroup v1: ``<root>/<controller>/slurm/uid_<uid>/job_<id>/step_<n>/`` per controller (``slurm_<nodename>``
  with several slurmd): ``cpuset/…/cpuset.cpus``, ``memory/…/memory.usage_in_bytes`` and
  ``memory.max_usage_in_bytes``, ``cpuacct/…/cpuacct.usage`` (ns), ``blkio/…/blkio.throttle.io_service_bytes``.
  The user is the ``uid_<uid>`` directory.

A job's cgroup may go between listing and reading it (the job ended): it is left out of that
sample, which is normal. Slurm reuses a job id (a requeued job, ids wrapping at MaxJobId): a job is
its id together with its cgroup directory's inode and change time (``JobRead.key``), so a new
directory under an old id is a new job, with no rate against the old one.
"""
from __future__ import annotations

import glob
import os
import pwd
import re
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

_JOB = re.compile(r"^job_(\d+)$")


@dataclass
class JobRead:
    """One read of one job: cumulative counters and levels (None: not readable here)."""

    job_id: str                   # Slurm's job id; "cmd-PID" for monitor -- CMD
    key: str                      # job_id plus its cgroup's identity: a reused id is another key
    kind: str                     # "slurm-v2", "slurm-v1", "command"
    t: float                      # monotonic seconds
    uid: Optional[int] = None
    user: str = ""
    cpus: Optional[int] = None    # CPUs it may run on
    cpu_list: str = ""            # the cpuset, as the kernel writes it ("0-3,8")
    cpu_s: Optional[float] = None  # CPU seconds used so far (user + system)
    mem_bytes: Optional[int] = None
    mem_peak_bytes: Optional[int] = None
    read_bytes: Optional[int] = None   # storage I/O (blkio / io.stat; /proc/PID/io for a command)
    write_bytes: Optional[int] = None
    path: str = ""


def _read(path: str) -> str:
    with open(path, errors="replace") as f:      # a garbled file is figures missing, never a traceback
        return f.read()


def _int(path: str) -> Optional[int]:
    try:
        return int(_read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def count_cpus(cpu_list: str) -> Optional[int]:
    """CPUs in a list such as '0-3,8'; None for an empty or malformed one."""
    n = 0
    for part in cpu_list.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            n += (int(hi) - int(lo) + 1) if hi else (int(lo) >= 0)
        except ValueError:
            return None
    return n or None


def _identity(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_ino}:{st.st_ctime_ns}"


def _user(uid: Optional[int]) -> str:
    if uid is None:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return ""


def slurm_jobs(cgroup_root: str = "/sys/fs/cgroup", proc: str = "/proc") -> List[JobRead]:
    """Every Slurm job on the node now, v2 and v1 (a hybrid host may have both; none: [])."""
    return _v2(cgroup_root, proc) + _v1(cgroup_root)


def _v2(root: str, proc: str) -> List[JobRead]:
    out = []
    dirs = sorted(set(glob.glob(os.path.join(root, "system.slice", "*slurmstepd.scope", "job_*"))
                      + glob.glob(os.path.join(root, "*slurmstepd.scope", "job_*"))))
    for d in dirs:
        m = _JOB.match(os.path.basename(d))
        if not m:
            continue
        try:
            r = JobRead(m.group(1), f"{m.group(1)}@{_identity(d)}", "slurm-v2", time.monotonic(), path=d)
            r.cpu_list = _read(os.path.join(d, "cpuset.cpus.effective")).strip() if os.path.exists(
                os.path.join(d, "cpuset.cpus.effective")) else ""
        except FileNotFoundError:
            continue                              # the job ended between listing and reading
        except OSError:
            r = JobRead(m.group(1), m.group(1), "slurm-v2", time.monotonic(), path=d)
        r.cpus = count_cpus(r.cpu_list)
        r.mem_bytes = _int(os.path.join(d, "memory.current"))
        r.mem_peak_bytes = _int(os.path.join(d, "memory.peak"))
        try:
            for line in _read(os.path.join(d, "cpu.stat")).splitlines():
                k, _, v = line.partition(" ")
                if k == "usage_usec":
                    r.cpu_s = int(v) / 1e6
        except (OSError, ValueError):
            pass
        try:
            rb = wb = 0
            for line in _read(os.path.join(d, "io.stat")).splitlines():
                kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
                rb += int(kv.get("rbytes", 0))
                wb += int(kv.get("wbytes", 0))
            r.read_bytes, r.write_bytes = rb, wb
        except (OSError, ValueError):
            pass
        r.uid = _uid_of_procs(d, proc)
        r.user = _user(r.uid)
        if not os.path.isdir(d):
            continue                              # gone while read: its figures may be half
        out.append(r)
    return out


def _uid_of_procs(d: str, proc: str) -> Optional[int]:
    for dirpath, _, files in os.walk(d):
        if "cgroup.procs" not in files:
            continue
        try:
            pids = _read(os.path.join(dirpath, "cgroup.procs")).split()
        except OSError:
            continue
        for pid in pids:
            try:
                for line in _read(os.path.join(proc, pid, "status")).splitlines():
                    if line.startswith("Uid:"):
                        return int(line.split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return None


def _v1(root: str) -> List[JobRead]:
    by: Dict[str, JobRead] = {}
    for d in sorted(glob.glob(os.path.join(root, "*", "slurm*", "uid_*", "job_*"))):
        m = _JOB.match(os.path.basename(d))
        controller = os.path.relpath(d, root).split(os.sep)[0]
        if not m or os.path.islink(os.path.join(root, controller)):
            continue                              # cpuacct -> cpu,cpuacct: read once
        jid = m.group(1)
        uid_dir = os.path.basename(os.path.dirname(d))
        try:
            ident = _identity(d)
        except OSError:
            continue
        r = by.get(jid)
        if r is None:
            uid = int(uid_dir[4:]) if uid_dir[4:].isdigit() else None
            r = by[jid] = JobRead(jid, f"{jid}@{ident}", "slurm-v1", time.monotonic(), uid=uid, user=_user(uid),
                                  path=d)
        if controller == "memory" or "memory" in controller.split(","):
            r.key = f"{jid}@{ident}"              # the memory cgroup names the job (every v1 node has one)
            r.mem_bytes = _int(os.path.join(d, "memory.usage_in_bytes"))
            r.mem_peak_bytes = _int(os.path.join(d, "memory.max_usage_in_bytes"))
        if "cpuset" in controller.split(","):
            try:
                r.cpu_list = _read(os.path.join(d, "cpuset.cpus")).strip()
                r.cpus = count_cpus(r.cpu_list)
            except OSError:
                pass
        if "cpuacct" in controller.split(","):
            ns = _int(os.path.join(d, "cpuacct.usage"))
            r.cpu_s = ns / 1e9 if ns is not None else None
        if "blkio" in controller.split(","):
            try:
                rb = wb = 0
                for line in _read(os.path.join(d, "blkio.throttle.io_service_bytes")).splitlines():
                    f = line.split()
                    if len(f) == 3 and f[1] == "Read":
                        rb += int(f[2])
                    elif len(f) == 3 and f[1] == "Write":
                        wb += int(f[2])
                r.read_bytes, r.write_bytes = rb, wb
            except (OSError, ValueError):
                pass
    return [r for r in by.values() if os.path.isdir(r.path)]


def command_tree(pid: int, proc: str = "/proc") -> Optional[JobRead]:
    """``monitor -- CMD``: the process ``pid`` and its descendants now, summed (None: it is gone).
    CPU time counts each live process's own and its reaped children's (cutime, cstime), so a child
    that ended is counted once, in its parent."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    parents: Dict[int, List[int]] = {}
    stats: Dict[int, Tuple[float, int]] = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            st = _read(os.path.join(proc, name, "stat"))
        except OSError:
            continue
        f = st[st.rfind(")") + 2:].split()
        try:
            ppid = int(f[1])
            cpu = sum(int(x) for x in f[11:15]) / tick
            rss = int(f[21]) * page
        except (ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(name))
        stats[int(name)] = (cpu, rss)
    if pid not in stats:
        return None
    r = JobRead(f"cmd-{pid}", f"cmd-{pid}", "command", time.monotonic(), uid=os.getuid(), user=_user(os.getuid()),
                cpu_s=0.0, mem_bytes=0, read_bytes=0, write_bytes=0)
    todo = [pid]
    readable_io = True
    while todo:
        p = todo.pop()
        cpu, rss = stats.get(p, (0.0, 0))
        r.cpu_s += cpu                            # type: ignore[operator]
        r.mem_bytes += rss                        # type: ignore[operator]
        try:
            io = dict(line.split(": ") for line in _read(os.path.join(proc, str(p), "io")).splitlines())
            r.read_bytes += int(io.get("read_bytes", 0))    # type: ignore[operator]
            r.write_bytes += int(io.get("write_bytes", 0))  # type: ignore[operator]
        except (OSError, ValueError):
            readable_io = False
        todo.extend(parents.get(p, []))
    if not readable_io:
        r.read_bytes = r.write_bytes = None
    try:
        r.cpu_list = _read(os.path.join(proc, str(pid), "status")).split("Cpus_allowed_list:")[1].split()[0]
        r.cpus = count_cpus(r.cpu_list)
    except (OSError, IndexError):
        pass
    return r


def job_rates(a: Optional[JobRead], b: JobRead) -> Dict[str, float]:
    """One job's figures over the interval (levels from ``b``; rates only against the same job)."""
    out: Dict[str, float] = {}
    if b.cpus is not None:
        out["cpus"] = float(b.cpus)
    if b.mem_bytes is not None:
        out["mem"] = float(b.mem_bytes)
    if b.mem_peak_bytes is not None:
        out["mem_peak"] = float(b.mem_peak_bytes)
    if a is None or a.key != b.key or b.t <= a.t:
        return out
    dt = b.t - a.t
    for name, x, y in (("cpu_busy", a.cpu_s, b.cpu_s), ("read_Bps", a.read_bytes, b.read_bytes),
                       ("write_Bps", a.write_bytes, b.write_bytes)):
        if x is not None and y is not None and y >= x:
            out[name] = (y - x) / dt              # cpu_busy: CPUs kept busy on average
    return out
