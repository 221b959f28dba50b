"""The launch side of `ceiling profile` (verbs/profile.py): which rank of an MPI launch this
ceiling is (``launched_rank``, from cluster/launch.py's launcher table), which processes'
records come from outside the program's tree (other ranks, ranks a launcher's daemon
started) or are a launcher's own, which processes left the tree or wrote no record, the
signals ceiling got, and how a rank that cannot report still ends its job."""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Set, Tuple

from ..cluster.launch import wrapped_rank as launched_rank  # noqa: F401 - profile.py's name; the table is there
from ..errors import CeilingError


def unwatched(records: list, root: int, sampled: Set[int] = frozenset(), everyone: Optional[list] = None) -> list:
    """Of ``records``, those of processes outside ``root``'s tree on this host (the ranks other
    ceilings wrapped, here or on other nodes; ranks that srun's slurmstepd started): what
    neither this ceiling's sampler nor its wait4 rusage covered. A process is in the tree when
    its ppid chain, through the records of ``everyone`` (the launchers' own included: a rank
    under mpiexec's proxy), reaches ``root``, or when the sampler saw it."""
    here = os.uname().nodename
    parent = {r["process"].get("pid"): r["process"].get("ppid") for r in (everyone or records)
              if r.get("process", {}).get("host") == here}
    out = []
    for r in records:
        p = r.get("process", {})
        pid, seen = p.get("pid"), set()
        if p.get("host") == here:
            if pid in sampled:
                continue
            while pid is not None and pid != root and pid not in seen:
                seen.add(pid)
                pid = parent.get(pid)
            if pid == root:
                continue
        out.append(r)
    return out


TERMINATING = {"SIGHUP": "hung up", "SIGINT": "interrupted", "SIGQUIT": "quit", "SIGTERM": "terminated"}


def interruption(signals: List[dict]) -> str:
    """The first signal ceiling got that asks a program to end, in words ("" for none: a
    SIGUSR1 or SIGALRM alone leaves the profile whole)."""
    for s in signals:
        name = s["signal"]
        if name not in TERMINATING:
            continue
        if name == "SIGINT" and not s.get("passed_on"):
            return "interrupted (Ctrl-C)"          # the terminal's (or any sender's) to the whole group
        to = ("passed on to the program" if s.get("passed_on") else
              "sent to the process group" if s.get("sent_to") == "the process group" else "not passed on")
        return f"{TERMINATING[name]} ({name}, {to})"
    return ""


def preloaded(sampled, preload_refused) -> List[Tuple[int, str]]:
    """(pid, comm) of the processes the sampler saw that should have written a record: not
    ceiling's launcher, not one that left the tree (it may still run), not a program the
    loader does not preload (static, setuid: preload_refused)."""
    return [(p.pid, p.comm) for p in sorted(sampled.processes.values(), key=lambda p: p.pid)
            if p.comm != "ceiling-launch" and not p.left and not (p.exe and preload_refused(p.exe))]


def launcher_image(rec: dict, waiters: set, sampled) -> bool:
    """Whether ``rec`` is a launcher's own (its I/O the launcher's, not the program's): its pid
    is one of ``waiters`` and, where the sampler saw which program that pid ran first, the record
    is that program's image. A shell that execs the program (sh -c 'sleep 1; exec ./app') keeps
    its pid, and the sampler judges the pid a launcher by the shell's waiting: the program's
    image, with another exe, is the program's."""
    p = rec.get("process", {})
    if p.get("pid") not in waiters:
        return False
    seen = sampled.processes.get(p.get("pid"))
    return not (seen and seen.exe and p.get("exe") and p.get("exe") != seen.exe)


def left_tree(sampled):
    """A finding when processes of the program left its tree alive (orphaned, reparented to
    init or a subreaper): no one in the tree waited for them, so their CPU time, memory and
    I/O are not in the exact totals taken at the program's exit."""
    from ..results.model import WARN, Finding
    gone = [p for p in sampled.processes.values() if p.left]
    if not gone:
        return None
    names = [f"{p.pid} {p.comm}" for p in sorted(gone, key=lambda p: p.pid)]
    return Finding(id="profile.left_tree", status=WARN,
                   title=f"{len(gone)} process(es) left the program's tree while it ran (orphaned): their I/O, "
                         "CPU time and memory are not in the totals",
                   evidence="seen by the /proc sampler, then alive with a parent outside the tree: " +
                            ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else ""),
                   why="The totals are read when the program ends and hold every process it, or its children, "
                       "waited for; a process started in the background and not waited for (a daemon, "
                       "`cmd &` without `wait`) is counted by no one.",
                   fix="Have the program wait for what it starts (a shell script: `wait` at its end).",
                   data={"processes": names})


ABORT_WAIT_S = 60          # a program that has not reached MPI_Init by then is killed


def end_job(exe: str, cmd: List[str], e: CeilingError, refused: str) -> None:
    """A wrapped rank 0 that cannot report: the other ranks' programs wait in MPI_Init for
    rank 0's, which would never come (MPICH's Hydra and srun do not end a job when one of
    its processes exits with an error), so the job would hang. Rank 0's program is started
    with the interposer told to call MPI_Abort as soon as its MPI_Init returns, which ends
    every rank (csrc/interpose/mpi.c, mpi_abort_if_asked). Without the interposer (a static
    or setuid program: ``refused`` says why) nothing can be done but say so."""
    import subprocess
    from .. import core
    say = f"ceiling: {e}"
    lib = core.interpose_library_path()
    why = f"the interposer is not built ({lib} is missing)" if not lib.exists() else refused
    if why:
        print(f"{say}\nceiling: the other ranks may wait in MPI_Init for rank 0; it cannot end the job ({why}): "
              "stop it with Ctrl-C or scancel", file=sys.stderr, flush=True)
        return
    print(f"{say}\nceiling: ending the MPI job: rank 0's program is started only to call MPI_Abort once its "
          "MPI_Init returns (the other ranks wait there for it)", file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CEILING_INTERPOSE_")}
    env["LD_PRELOAD"] = " ".join(filter(None, [str(lib), env.get("LD_PRELOAD", "")]))
    env["CEILING_INTERPOSE_ABORT"] = str(e.exit_code)
    try:
        # close_fds=False: the launcher's PMI descriptor (Hydra's PMI_FD) is the program's way in
        subprocess.run(cmd, executable=exe, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=ABORT_WAIT_S, close_fds=False)
    except (OSError, subprocess.TimeoutExpired):
        pass


def abort_job(e: CeilingError, rank: int) -> None:
    """A wrapped rank whose program cannot start (not found on this node, not executable):
    the other ranks' programs wait in MPI_Init for it, and neither MPICH's Hydra nor srun
    ends a job for one process's exit status. There is no program to call MPI_Abort, so
    ceiling's own mpi4py joins the job in its place and aborts it, where its MPI is the
    launcher's (cluster/launch.py, end_the_job; Open MPI's mpirun ends such a job itself).
    Else it can only say so."""
    from ..cluster.launch import OPEN_MPI, end_the_job, launch
    print(f"ceiling: rank {rank}: {e}\nceiling: ending the MPI job: the other ranks' programs would wait in "
          "MPI_Init for this one's; ceiling's own MPI (mpi4py) calls MPI_Abort in its place",
          file=sys.stderr, flush=True)
    why = end_the_job(e.exit_code, ABORT_WAIT_S)
    if why and launch().launcher == OPEN_MPI.name:   # Open MPI's mpirun ends the job for a failed rank
        print(f"ceiling: it could not ({why}); Open MPI's mpirun ends the job for this rank's exit status",
              file=sys.stderr, flush=True)
    elif why:
        print(f"ceiling: it could not ({why}); the other ranks may wait in MPI_Init: stop the job with Ctrl-C "
              "or scancel", file=sys.stderr, flush=True)


def record_bytes(tmp: str) -> int:
    """The bytes of the interposer's record files in ``tmp``: written by the program's processes
    (by rank 0's for every rank, in a wrapped launch), so in its wchar, and not its own I/O."""
    total = 0
    try:
        with os.scandir(tmp) as it:
            for e in it:
                if e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
    except OSError:
        pass
    return total


def without_own_io(io: Optional[dict], records: list, written: int, host: Optional[str]
                   ) -> Tuple[Optional[dict], dict]:
    """The program's exit totals (/proc/PID/io) less what the interposer did inside it: the
    records it wrote (``written``) and what it read itself (/proc/self files at each record, the
    "self_read" of each image's record on ``host``; None: not known which records are this
    tree's, as in a wrapped launch, so none taken off). With the interposer, a program that reads
    a few KiB read two or three times that; the kernel counts both alike. The second value says
    what was taken off ({} for nothing)."""
    if not io:
        return io, {}
    read = 0 if host is None else sum(
        int(r.get("end", {}).get("self_read") or 0) for r in records if r.get("process", {}).get("host") == host)
    if not (read or written):
        return io, {}
    out = dict(io)
    if "rchar" in out:
        out["rchar"] = max(0, out["rchar"] - read)
    if "wchar" in out:
        out["wchar"] = max(0, out["wchar"] - written)
    return out, {"read_bytes": read, "written_bytes": written,
                 "how": "the interposer's own reads of /proc/self and sysfs (its records' self_read) and its record "
                        "files' sizes, taken off rchar and wchar"}
