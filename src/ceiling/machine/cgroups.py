"""The limits a cgroup puts on this process: CPU set, CPU quota, memory.

Both hierarchies are read: v2 (cpuset.cpus.effective, cpu.max, memory.max)
and v1 (cpuset.cpus or the old noprefix "cpus", cpu.cfs_quota_us /
cpu.cfs_period_us, memory.limit_in_bytes). Where this process sits is read
from /proc/self/cgroup (or /proc/self/cpuset on old kernels), the
hierarchies' mount points from /proc/mounts, all relative to the root.
A quota or memory limit set on a parent cgroup applies too, so the smallest
along the path is taken.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..sysfs import Root, format_cpulist, parse_cpulist

# A v1 memory limit at or above this is "no limit" (the kernel's page-rounded LONG_MAX).
_UNLIMITED = 1 << 60


def _mounts(root: Root) -> List[Tuple[str, str, List[str]]]:
    """(mount point, fs type, options) of every cgroup-like mount."""
    out = []
    for line in (root.read("proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2", "cpuset"):
            out.append((parts[1].replace("\\040", " "), parts[2], parts[3].split(",")))
    return out


def _self_paths(root: Root) -> Tuple[Dict[str, str], Optional[str]]:
    """Controller -> cgroup path for v1; and the v2 path."""
    v1: Dict[str, str] = {}
    v2: Optional[str] = None
    for line in (root.read("proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, ctrls, path = parts
        if hid == "0" and ctrls == "":
            v2 = path
        for c in ctrls.split(","):
            if c:
                v1[c] = path
    cpuset = root.read("proc/self/cpuset")
    if cpuset and "cpuset" not in v1:
        v1.setdefault("cpuset", cpuset)
        if v2 is None:
            v2 = cpuset
    return v1, v2


def _dirs(root: Root, mount: str, path: str) -> List[str]:
    """Directories from the process's cgroup up to the hierarchy's root, leaf first.

    In a container the mount may already be the process's cgroup (the path
    then does not exist under it), so the mount itself is always a candidate.
    """
    path = "/" + path.strip("/") if path and path != "/" else ""
    out = []
    while True:
        d = mount.rstrip("/") + path
        if root.exists(d):
            out.append(d)
        if not path:
            break
        path = path.rsplit("/", 1)[0]
    return out or [mount]


def _first(root: Root, dirs: List[str], names: Tuple[str, ...]) -> Tuple[Optional[str], str]:
    for d in dirs:
        for n in names:
            v = root.read(f"{d}/{n}")
            if v is not None and v != "":
                return v, f"{d}/{n}"
    return None, ""


def read(root: Root) -> Dict[str, Any]:
    """The cgroup limits that apply to this process; keys are absent where nothing limits."""
    mounts = _mounts(root)
    v1_paths, v2_path = _self_paths(root)
    out: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    versions = set()

    v2_mounts = [m for m, t, _ in mounts if t == "cgroup2"]
    v1_by_ctrl: Dict[str, Tuple[str, bool]] = {}
    for m, t, opts in mounts:
        if t == "cpuset":
            v1_by_ctrl.setdefault("cpuset", (m, True))
        elif t == "cgroup":
            for c in ("cpuset", "cpu", "memory"):
                if c in opts:
                    v1_by_ctrl.setdefault(c, (m, "noprefix" in opts))

    # cpuset
    cpus_text = None
    if "cpuset" in v1_by_ctrl:
        m, noprefix = v1_by_ctrl["cpuset"]
        dirs = _dirs(root, m, v1_paths.get("cpuset", "/"))
        names = ("cpuset.effective_cpus", "cpus", "cpuset.cpus") if noprefix else ("cpuset.effective_cpus",
                                                                                   "cpuset.cpus")
        cpus_text, src = _first(root, dirs[:1], names)
        if cpus_text:
            versions.add("v1")
            sources["cpuset"] = src
    if cpus_text is None:
        for m in v2_mounts:
            dirs = _dirs(root, m, v2_path or "/")
            cpus_text, src = _first(root, dirs[:1], ("cpuset.cpus.effective", "cpuset.cpus"))
            if cpus_text:
                versions.add("v2")
                sources["cpuset"] = src
                break
    if cpus_text:
        cpus = parse_cpulist(cpus_text)
        if cpus:
            out["cpuset"] = format_cpulist(cpus)
            out["cpuset_cpus"] = cpus

    # CPU quota, in CPUs' worth of time (2.0 = two CPUs).
    quotas: List[Tuple[float, str]] = []
    for m in v2_mounts:
        for d in _dirs(root, m, v2_path or "/"):
            v = root.read(f"{d}/cpu.max")
            if v:
                parts = v.split()
                if parts[0] != "max" and len(parts) >= 1:
                    try:
                        period = float(parts[1]) if len(parts) > 1 else 100000.0
                        quotas.append((float(parts[0]) / period, f"{d}/cpu.max"))
                        versions.add("v2")
                    except ValueError:
                        pass
    if "cpu" in v1_by_ctrl:
        m, _ = v1_by_ctrl["cpu"]
        for d in _dirs(root, m, v1_paths.get("cpu", "/")):
            q = root.read_int(f"{d}/cpu.cfs_quota_us")
            p = root.read_int(f"{d}/cpu.cfs_period_us")
            if q is not None and q > 0 and p:
                quotas.append((q / p, f"{d}/cpu.cfs_quota_us"))
                versions.add("v1")
    if quotas:
        q, src = min(quotas)
        out["cpu_quota_cpus"] = round(q, 3)
        sources["cpu_quota_cpus"] = src

    # Memory limit.
    limits: List[Tuple[int, str]] = []
    for m in v2_mounts:
        for d in _dirs(root, m, v2_path or "/"):
            v = root.read(f"{d}/memory.max")
            if v and v != "max" and v.isdigit():
                limits.append((int(v), f"{d}/memory.max"))
                versions.add("v2")
    if "memory" in v1_by_ctrl:
        m, _ = v1_by_ctrl["memory"]
        for d in _dirs(root, m, v1_paths.get("memory", "/")):
            v = root.read_int(f"{d}/memory.limit_in_bytes")
            if v is not None and 0 < v < _UNLIMITED:
                limits.append((v, f"{d}/memory.limit_in_bytes"))
                versions.add("v1")
    if limits:
        v, src = min(limits)
        out["memory_limit_bytes"] = v
        sources["memory_limit_bytes"] = src

    if versions:
        out["version"] = "+".join(sorted(versions))
    elif v2_mounts or v1_by_ctrl:
        out["version"] = "v2" if v2_mounts and not v1_by_ctrl else "v1" if not v2_mounts else "v1+v2"
    if sources:
        out["sources"] = sources
    return out
