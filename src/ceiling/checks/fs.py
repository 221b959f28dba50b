"""File systems a job writes to: home, temporary space, the working directory, /dev/shm."""
from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..machine.storage import mount_of
from .base import Probe, check, fail, ok, warn
from .cgroup import marks

GIB, MIB = 2 ** 30, 2 ** 20
WARN_USED, FAIL_USED = 0.90, 0.98
WARN_FREE, FAIL_FREE = 1 * GIB, 100 * MIB
FAIL_INODES = 0.02
SHM_WARN = 1 * GIB

# fs.space's causes (data["cause"]) and the fix each calls for.
READ_ONLY, NO_PERMISSION, FULL, NO_INODES = "read_only_mount", "no_permission", "full", "out_of_inodes"
FIXES = {
    READ_ONLY: "a read-only mount is the admin's (often a file system remounted read-only after an error): report it",
    NO_PERMISSION: "write where you own the directory (point TMPDIR at node-local scratch), or fix its permissions",
    FULL: "free space or ask for a larger quota; point TMPDIR at node-local scratch",
    NO_INODES: "delete small files you no longer need (count them: find DIR -xdev -type f | wc -l) or ask for a "
               "larger inode quota",
}


def _places() -> List[Tuple[str, str]]:
    """(label, path) of the directories a job writes to, each once."""
    out, seen = [], set()
    for label, path in (("home", os.path.expanduser("~")), ("tmp", os.environ.get("TMPDIR") or "/tmp"),
                        ("working directory", os.getcwd())):
        real = os.path.realpath(path)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            out.append((label, path))
    return out


def _fmt(b: float) -> str:
    return f"{b / GIB:.1f} GiB" if b >= GIB else f"{b / MIB:.0f} MiB"


def _mount_of(path: str) -> Optional[Tuple[str, str]]:
    """(mount point, type) holding ``path``: the machine model's reading of /proc/self/mountinfo."""
    m = mount_of(path)
    return (m.mount_point, m.fstype) if m is not None else None


@check("fs.space", live=True)
def space(p: Probe):
    """Free space, free inodes and writability of home, $TMPDIR (or /tmp) and the working directory.

    fail: a directory is read-only or not writable by this user, under 100
    MiB or 2% of its space is free, or under 2% of its inodes. warn: over
    90% used or under 1 GiB free. Each directory is named with its mount
    point and file-system type.

    Why: a full or read-only file system makes a job fail late - at its
    first checkpoint or output - after the allocation's time is spent, and
    many tools (compilers, MPI, Python) write to $TMPDIR and home first.

    Fix, by cause (data["cause"]): full or nearly full: clean up or ask for
    a larger quota, point TMPDIR at node-local scratch; out of inodes: delete
    small files or ask for a larger inode quota; not writable: write where
    you own the directory; a read-only mount: ask the admin (it can be a
    file-system error remount).
    """
    worst, lines = "ok", []
    problems = []
    by_dev = {}
    for label, path in _places():
        try:
            dev = os.stat(path).st_dev
        except OSError:
            dev = path
        by_dev.setdefault(dev, []).append((label, path))
    for group in by_dev.values():
        label, path = group[0]
        names = ", ".join(f"{lb} {pa}" for lb, pa in group)
        try:
            st = os.statvfs(path)
        except OSError as e:
            lines.append(f"{names}: statvfs failed ({e.strerror})")
            continue
        mnt = _mount_of(path)
        where = names + (f" on {mnt[0]} ({mnt[1]})" if mnt else "")
        total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        used = 1 - st.f_bfree / st.f_blocks if st.f_blocks else 0.0
        inodes = st.f_favail / st.f_files if st.f_files else None
        text = f"{where}: {_fmt(free)} free of {_fmt(total)} ({used:.0%} used)"
        if inodes is not None:
            text += f", {inodes:.0%} inodes free"
        lines.append(text)
        for label, path in group:
            if bool(st.f_flag & os.ST_RDONLY):
                problems.append(("fail", f"{label} {path} is not writable (read-only mount)", READ_ONLY))
            elif not os.access(path, os.W_OK):
                problems.append(("fail", f"{label} {path} is not writable", NO_PERMISSION))
        if total and (free < FAIL_FREE or used > FAIL_USED):
            problems.append(("fail", f"{names} full ({_fmt(free)} free)", FULL))
        elif inodes is not None and inodes < FAIL_INODES:
            problems.append(("fail", f"{names} out of inodes ({inodes:.1%} free)", NO_INODES))
        elif total and (free < WARN_FREE or used > WARN_USED):
            problems.append(("warn", f"{names} nearly full ({used:.0%} used, {_fmt(free)} free)", FULL))
    if not lines:
        return ok("No directory to check", evidence="home, tmp and the working directory are not directories")
    why = "a full or read-only file system fails a job late, at its first checkpoint or output"
    causes = list(dict.fromkeys(c for _, _, c in problems))
    fix = "; ".join(FIXES[c] for c in causes)
    if any(s == "fail" for s, _, _ in problems):
        worst = "fail"
    elif problems:
        worst = "warn"
    if worst == "ok":
        return ok("Home, tmp and the working directory are writable with room to spare", evidence="; ".join(lines))
    title = "; ".join(t for _, t, _ in problems)
    return (fail if worst == "fail" else warn)(title, evidence="; ".join(lines), why=why, fix=fix,
                                               cause=causes[0], data={"causes": causes})


@check("fs.shm", live=True)
def shm(p: Probe):
    """Size of /dev/shm, where MPI keeps its intra-node shared-memory segments.

    warn: /dev/shm is missing, read-only or smaller than 1 GiB (Docker's
    default is 64 MiB). MPI's shared-memory transport (Open MPI's sm/vader,
    MPICH's nemesis/posix, UCX's posix/sysv) then fails or falls back to
    the network stack for ranks on the same node: intra-node latency grows
    several times and bandwidth drops.

    Fix: in a container (data["container"]), the container's own option:
    ``docker run --shm-size=8g`` / Kubernetes an emptyDir with medium
    Memory; on a host, mount or remount /dev/shm (root).
    """
    box = [name for _, name in marks(p)]
    data = {"container": box[0] if box else None}
    try:
        st = os.statvfs("/dev/shm")
    except OSError as e:
        return warn("/dev/shm is missing", evidence=f"statvfs /dev/shm: {e.strerror}",
                    why="MPI's intra-node shared-memory transport needs it",
                    fix=f"start the {box[0]} container with a /dev/shm (--shm-size=8g)" if box
                    else "mount -t tmpfs tmpfs /dev/shm", needs_root=not box, cause="shm_missing", data=data)
    total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    ev = f"/dev/shm: {_fmt(free)} free of {_fmt(total)}" + (f"; in a {box[0]} container" if box else "")
    if st.f_flag & os.ST_RDONLY or not os.access("/dev/shm", os.W_OK):
        return warn("/dev/shm is not writable", evidence=ev, why="MPI's shared-memory transport cannot create segments",
                    fix=(f"start the {box[0]} container with a writable /dev/shm" if box
                         else "mount -o remount,rw /dev/shm"), needs_root=not box, cause="shm_not_writable", data=data)
    if total < SHM_WARN:
        return warn(f"/dev/shm is small ({_fmt(total)})", evidence=ev,
                    why="MPI shared-memory segments for many ranks do not fit: intra-node messages fall back to slower "
                        "paths",
                    fix=("docker run --shm-size=8g (or the runtime's equivalent; Kubernetes: an emptyDir with medium "
                         "Memory)" if box else "mount -o remount,size=8G /dev/shm"),
                    needs_root=not box, cause="shm_small", data=data)
    return ok(f"/dev/shm: {_fmt(total)}", evidence=ev)
