"""Resource limits of this process that matter to HPC codes (ulimit)."""
from __future__ import annotations

import resource
from typing import Optional

from .base import Probe, check, ok, warn
from .cgroup import marks

INF = resource.RLIM_INFINITY
MIB = 2 ** 20


# Which limit is low (data["cause"]): a soft limit the user raises in the job script, or a
# hard limit only root raises. The fix differs, so the two are never offered together.
SOFT, HARD = "soft_limit", "hard_limit"


def _box(p: Probe) -> str:
    """The container runtime this runs in, "" on a host: a container's limits are set where it starts."""
    found = marks(p)
    return found[0][1] if found else ""


def _hard(p: Probe, ulimit: str, host_fix: str) -> str:
    """The fix for a low hard limit: the container's --ulimit, or the host's limits.conf."""
    box = _box(p)
    return f"the {box} container's hard limit: start it with --ulimit {ulimit}" if box else host_fix


def _fmt(v: int, unit: int = 1024, name: str = "KiB") -> str:
    return "unlimited" if v == INF else f"{v // unit} {name}"


def _limits(which: int, unit: int = 1024, name: str = "KiB") -> str:
    soft, hard = resource.getrlimit(which)
    return f"soft {_fmt(soft, unit, name)}, hard {_fmt(hard, unit, name)}"


@check("limits.memlock", live=True)
def memlock(p: Probe):
    """Locked-memory limit (ulimit -l, RLIMIT_MEMLOCK).

    warn: the soft limit is below 64 MiB. InfiniBand / RoCE MPI (verbs, UCX,
    libfabric) registers - pins - its communication buffers; with a low limit
    MPI fails to start, or falls back to slow copy paths.

    Fix: where only the soft limit is low (soft_limit), ``ulimit -l
    unlimited`` (or up to the hard limit) in the job script; else (hard_limit)
    ``* - memlock unlimited`` in /etc/security/limits.conf, and
    LimitMEMLOCK=infinity in the batch daemon's systemd unit (slurmd
    propagates its own limits to jobs) (root).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    ev = "ulimit -l: " + _limits(resource.RLIMIT_MEMLOCK)
    if soft != INF and soft < 64 * MIB:
        why = "InfiniBand/RDMA MPI registers (pins) its buffers: a low limit makes MPI fail or fall back to slow paths"
        if hard == INF or hard >= 64 * MIB:       # only the soft limit is low: the user raises it
            return warn("Locked-memory limit is low", evidence=ev, why=why, cause=SOFT,
                        fix="ulimit -l " + ("unlimited" if hard == INF else str(hard // 1024)) + " in the job script")
        return warn("Locked-memory limit is low", evidence=ev, why=why, cause=HARD, needs_root=not _box(p),
                    fix=_hard(p, "memlock=-1:-1", "set 'memlock unlimited' in /etc/security/limits.conf (and "
                                                  "LimitMEMLOCK=infinity for slurmd)"))
    return ok("Locked-memory limit allows RDMA registration", evidence=ev)


@check("limits.stack", live=True)
def stack(p: Probe):
    """Stack size limit (ulimit -s, RLIMIT_STACK) of the main thread.

    warn: the soft limit is below 8 MiB, the common default. Fortran
    automatic arrays and temporaries, and C variable-length arrays, live on
    the stack: a small limit crashes codes with a segmentation fault that
    looks like a bug in the application. OpenMP worker threads take their
    stack from OMP_STACKSIZE instead, which the evidence shows when set.

    Fix: ``ulimit -s unlimited`` (or a larger value) in the job script; the
    hard limit bounds it (raising that needs root).
    """
    import os
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    ev = "ulimit -s: " + _limits(resource.RLIMIT_STACK)
    if os.environ.get("OMP_STACKSIZE"):
        ev += f"; OMP_STACKSIZE={os.environ['OMP_STACKSIZE']}"
    if soft != INF and soft < 8 * MIB:
        why = ("automatic arrays and temporaries (Fortran) and VLAs (C) live on the stack: large ones crash "
               "with a segmentation fault")
        if hard == INF or hard > soft:            # the user can raise it, as far as the hard limit
            return warn(f"Stack limit is small ({_fmt(soft)})", evidence=ev, why=why, cause=SOFT,
                        fix="ulimit -s " + ("unlimited" if hard == INF else str(hard // 1024)) + " in the job script")
        return warn(f"Stack limit is small ({_fmt(soft)})", evidence=ev, why=why, cause=HARD, needs_root=not _box(p),
                    fix=_hard(p, "stack=-1:-1", "the hard limit is as low: raise 'stack' in /etc/security/limits.conf "
                                                "(and LimitSTACK= for the batch daemon), then ulimit -s unlimited in "
                                                "the job script"))
    return ok(f"Stack limit: {_fmt(soft)}", evidence=ev)


@check("limits.nofile", live=True)
def nofile(p: Probe):
    """Open-files limit (ulimit -n, RLIMIT_NOFILE).

    warn: the soft limit is below 4096. Each MPI peer can take sockets and
    shared-memory files, and I/O libraries open one file per process or per
    variable: large jobs fail with EMFILE ("Too many open files").

    Fix: ``ulimit -n`` up to the hard limit in the job script; raise the hard
    limit in /etc/security/limits.conf (root).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ev = f"ulimit -n: soft {_fmt(soft, 1, 'files')}, hard {_fmt(hard, 1, 'files')}"
    if soft != INF and soft < 4096:
        raise_ok: Optional[bool] = hard == INF or hard >= 4096
        return warn(f"Open-files limit is low ({soft})", evidence=ev,
                    why="MPI connections, shared-memory segments and file-per-process I/O need many descriptors: "
                        "large jobs fail with 'Too many open files'",
                    fix=("ulimit -n " + (str(hard) if hard != INF else "65536") + " in the job script") if raise_ok
                    else _hard(p, "nofile=65536:65536", "the hard limit is as low: raise 'nofile' in "
                                                        "/etc/security/limits.conf, then ulimit -n in the job script"),
                    needs_root=not raise_ok and not _box(p), cause=SOFT if raise_ok else HARD)
    return ok(f"Open-files limit: {_fmt(soft, 1, 'files')}", evidence=ev)


@check("limits.core", live=True)
def core(p: Probe):
    """Core-dump size limit (ulimit -c) and where cores go (kernel.core_pattern).

    warn: unlimited core size with cores written to the working directory.
    A crash of a large job then writes one core file per process, each as
    large as the process's memory, to the (often shared, parallel) file
    system: minutes of I/O and a full quota. A pipe to systemd-coredump or
    abrt (core_pattern starting with '|') is fine, and so is an absolute
    path (core_pattern starting with '/', e.g. /var/crash/core.%p): cores
    then go to that directory, not the working one. ok otherwise, saying
    whether a crash would leave a core to debug, and where.

    Fix: ``ulimit -c 0`` in job scripts that do not need cores, or point
    kernel.core_pattern at local disk (root).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    pattern = p.read("proc/sys/kernel/core_pattern")
    ev = "ulimit -c: " + _limits(resource.RLIMIT_CORE)
    if pattern is not None:
        ev += f"; core_pattern: {pattern}"
    piped = pattern is not None and pattern.startswith("|")
    # An absolute pattern names its own directory (the last '/' ends it).
    where = (pattern[:pattern.rindex("/")] or "/") if pattern is not None and pattern.startswith("/") else None
    if soft == INF and not piped and where is None:
        return warn("Core dumps are unlimited and written to the working directory", evidence=ev,
                    why="a crashing job writes one core file per process, each as large as its memory, "
                        "often to the shared file system",
                    fix="ulimit -c 0 in job scripts that do not need core files", cause="cores_to_working_directory")
    size = "unlimited" if soft == INF else f"up to {_fmt(soft)}"
    state = ("off" if soft == 0 else "piped to a collector" if piped
             else f"{size}, written to {where}" if where is not None else size)
    return ok(f"Core dumps: {state}", evidence=ev)
