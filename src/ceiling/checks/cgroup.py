"""Containers and cgroups: CPU and memory limits, and a CPU mask narrower than the node."""
from __future__ import annotations

import os

from ..sysfs import format_cpulist
from .base import Probe, check, ok, skipped, warn

GIB = 2 ** 30


@check("cgroup.cpu_quota")
def cpu_quota(p: Probe):
    """CPU bandwidth quota of this process's cgroup (v2 cpu.max, v1 cpu.cfs_quota_us).

    warn: the quota, in CPUs (quota / period), is below the number of CPUs
    this process may run on. Threads beyond the quota are stopped for the rest
    of every scheduling period (100 ms by default): all-core results drop,
    and barriers and MPI waits stretch by up to a period.

    Fix: run with as many threads as the quota allows, or ask for an
    allocation whose CPU count matches its quota (container --cpus, Slurm
    with ConstrainCores and no CPU bandwidth limit).
    """
    m = p.machine
    quota = m.cgroup.get("cpu_quota_cpus") if m.cgroup else None
    n = len(m.affinity) or m.threads
    src = (m.cgroup.get("sources") or {}).get("cpu_quota_cpus", "") if m.cgroup else ""
    if quota is None:
        return ok("No CPU quota on this process's cgroup", evidence=f"{n} CPUs in this process's affinity")
    if quota + 1e-9 < n:
        return warn(f"CPU quota ({quota:g} CPUs) is below the CPUs this process sees ({n})",
                    evidence=f"cgroup quota {quota:g} CPUs ({src}); affinity {n} CPUs",
                    why="threads beyond the quota are throttled every scheduling period: all-core results drop and "
                        "jitter",
                    fix="run with as many threads as the quota, or ask for a larger allocation", cause="cpu_quota",
                    data={"quota_cpus": quota, "affinity_cpus": n})
    return ok(f"CPU quota ({quota:g} CPUs) covers the CPUs this process sees", evidence=f"{n} CPUs; {src}")


@check("cgroup.memory_limit")
def memory_limit(p: Probe):
    """Memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes).

    warn: a limit below the node's memory. Applications and libraries that
    size themselves from /proc/meminfo (which shows the whole node) are then
    killed by the OOM killer, and benchmark sizes must stay under the limit
    (ceiling's own sizes do).

    Fix: ask the batch system for more memory (--mem, --mem-per-cpu), or run
    the container with a larger --memory.
    """
    m = p.machine
    limit = m.cgroup.get("memory_limit_bytes") if m.cgroup else None
    total = m.mem_total_bytes
    if limit is None:
        return ok("No memory limit on this process's cgroup",
                  evidence=f"node memory {total / GIB:.1f} GiB" if total else "")
    src = (m.cgroup.get("sources") or {}).get("memory_limit_bytes", "")
    ev = f"limit {limit / GIB:.1f} GiB ({src})"
    if total is None:
        return ok(f"cgroup memory limit: {limit / GIB:.1f} GiB", evidence=ev + "; node memory unknown")
    ev += f"; node memory {total / GIB:.1f} GiB"
    if limit < 0.95 * total:
        return warn(f"Memory is limited to {limit / GIB:.1f} GiB of the node's {total / GIB:.1f} GiB", evidence=ev,
                    why="codes that size their buffers from /proc/meminfo see the whole node and get OOM-killed",
                    fix="request more memory (--mem / --mem-per-cpu, or the container's --memory)",
                    cause="memory_limit", data={"limit_bytes": limit, "node_bytes": total})
    return ok(f"cgroup memory limit ({limit / GIB:.1f} GiB) covers the node's memory", evidence=ev)


@check("cgroup.affinity")
def affinity(p: Probe):
    """CPU mask of this process (sched_getaffinity, cgroup cpuset) against the node's online CPUs.

    warn: this process may run on fewer CPUs than the node has online.
    Threads started without explicit pinning then share the allowed CPUs,
    and node-level figures (all-core flop/s, STREAM) cover only those CPUs.
    This is expected inside a job step bound to part of a node (srun
    --cpu-bind, taskset, a container's --cpuset-cpus); it is a problem when
    the job believes it owns the node.

    Fix, by cause (data["cause"]): the cgroup's cpuset is narrower than the
    node (cgroup_cpuset: the allocation or container was given those CPUs):
    request the whole node (srun --exclusive, --cpus-per-task, the
    container's --cpuset-cpus); the cpuset covers the node but this
    process's own mask does not (affinity_mask: a launcher binding or
    taskset): check the binding (srun --cpu-bind=verbose, mpirun
    --report-bindings) and bind wider; no allocation changes that.
    """
    m = p.machine
    online = sorted(c.id for c in m.cpus if c.online)
    if not m.affinity:
        return skipped("CPU mask: not known for a recorded tree", evidence="no affinity recorded")
    allowed = sorted(m.affinity)
    ev = f"allowed CPUs {format_cpulist(allowed)} ({len(allowed)}); online {format_cpulist(online)} ({len(online)})"
    if m.cgroup and m.cgroup.get("cpuset"):
        ev += f"; cgroup cpuset {m.cgroup['cpuset']}"
    if len(set(allowed) & set(online)) < len(online):
        cpuset = (m.cgroup or {}).get("cpuset_cpus")
        if cpuset and len(set(cpuset) & set(online)) < len(online):
            cause, fix = "cgroup_cpuset", ("the job's cgroup holds only these CPUs: request the whole node "
                                           "(srun --exclusive, more --cpus-per-task, or the container's --cpuset-cpus)")
        else:
            cause, fix = "affinity_mask", ("the cgroup allows every CPU but this process's mask does not (a launcher "
                                           "binding or taskset): check it with srun --cpu-bind=verbose or mpirun "
                                           "--report-bindings and bind to more CPUs")
        return warn(f"This process may use {len(allowed)} of the node's {len(online)} CPUs", evidence=ev,
                    why="unpinned threads share the allowed CPUs, and node-level figures cover only them",
                    fix=fix, cause=cause, data={"allowed": len(allowed), "online": len(online)})
    return ok(f"This process may use all {len(online)} online CPUs", evidence=ev)


CONTAINER_MARKS = (
    ("/.dockerenv", "Docker"),
    ("/run/.containerenv", "Podman"),
    ("/.singularity.d", "Apptainer/Singularity"),
)
CGROUP_MARKS = (("kubepods", "Kubernetes"), ("docker", "Docker"), ("containerd", "containerd"),
                ("libpod", "Podman"), ("lxc", "LXC"), ("machine.slice", "systemd-nspawn"))


def marks(p: Probe):
    """(mark, runtime) of the container marks in the tree: marker files, /proc/1/cgroup."""
    found = [(mark, name) for mark, name in CONTAINER_MARKS if p.exists(mark)]
    cg = p.read("proc/1/cgroup") or ""
    for key, name in CGROUP_MARKS:
        if key in cg:
            found.append((f"/proc/1/cgroup mentions {key}", name))
            break
    return found


@check("cgroup.container")
def container(p: Probe):
    """Container runtime, if any (marker files, /proc/1/cgroup, $container, Apptainer variables).

    ok either way: a container is not a fault. Said because inside one the
    CPU, memory and device limits are the container's, /sys and /proc may
    show the host's hardware while the limits are narrower, and MPI and
    InfiniBand need the host's devices and libraries passed in (--device,
    bind mounts, or Apptainer's host MPI).
    """
    found = marks(p)
    if p.live:
        env = os.environ.get("container")
        if env:
            found.append((f"$container={env}", env))
        for var in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
            if os.environ.get(var):
                found.append((f"${var}", "Apptainer/Singularity"))
    if not found:
        return ok("Not in a container",
                  evidence="no container marker files, nothing in /proc/1/cgroup or the environment")
    runtime = found[0][1]
    return ok(f"Running in a container ({runtime})", evidence="; ".join(mark for mark, _ in found),
              why="limits are the container's; MPI and InfiniBand need the host's devices and libraries passed in")
