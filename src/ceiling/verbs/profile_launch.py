"""The launch side of `ceiling profile` (verbs/profile.py): which rank of an MPI launch this
ceiling is, which processes' records come from outside the program's tree (other ranks,
ranks a launcher's daemon started) or are a launcher's own, which processes left the tree or
wrote no record, the signals ceiling got, and how a rank that cannot report still ends its job."""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Set, Tuple

from ..errors import CeilingError

RANK_VARIABLES = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"))


def launched_rank(environ=None) -> Optional[Tuple[int, int]]:
    """(rank, size) when this ceiling is one rank of an MPI launch (mpirun -n N ceiling
    profile -- ./app, srun ceiling profile -- ./app): the launcher's variables for its
    ranks (MPICH's Hydra and Intel MPI: PMI_*; Open MPI: OMPI_COMM_WORLD_*; a Slurm job
    step: SLURM_PROCID with the step's task count, not a batch script's), with more
    than one rank. None otherwise."""
    env = os.environ if environ is None else environ
    if "SLURM_PROCID" in env and not str(env.get("SLURM_STEP_ID", "")).isdigit():
        env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    for rank, size in RANK_VARIABLES:
        r, n = str(env.get(rank, "")), str(env.get(size, ""))
        if r.isdigit() and n.isdigit() and int(n) > 1 and int(r) < int(n):
            return int(r), int(n)
    return None


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


# Run by ceiling's own Python when a rank's program cannot start at all: mpi4py's MPI joins
# the job and aborts it, where it is the launcher's family (argv[2]: ompi, mpich or "" for
# either); else it exits 3 without touching MPI, and 4 where its MPI_Init found no job to
# join (a world of one: the launcher speaks a PMI its MPI does not, as srun --mpi=pmix to
# MPICH), since aborting that ends only itself.
_ABORT_WITH_MPI4PY = """
import sys
import mpi4py
mpi4py.rc.initialize = mpi4py.rc.finalize = False
from mpi4py import MPI
ompi = "Open MPI" in MPI.Get_library_version()
if sys.argv[2] and (sys.argv[2] == "ompi") != ompi:
    sys.exit(3)
MPI.Init()
if MPI.COMM_WORLD.Get_size() == 1:
    sys.exit(4)
MPI.COMM_WORLD.Abort(int(sys.argv[1]))
"""


def abort_job(e: CeilingError, rank: int) -> None:
    """A wrapped rank whose program cannot start (not found on this node, not executable):
    the other ranks' programs wait in MPI_Init for it, and neither MPICH's Hydra nor srun
    ends a job for one process's exit status. There is no program to call MPI_Abort, so
    ceiling's own mpi4py joins the job in its place and aborts it, where its MPI is the
    launcher's (Open MPI's mpirun ends such a job itself). Else it can only say so."""
    import subprocess
    family = "ompi" if "OMPI_COMM_WORLD_RANK" in os.environ else "mpich" if "PMI_RANK" in os.environ else ""
    print(f"ceiling: rank {rank}: {e}\nceiling: ending the MPI job: the other ranks' programs would wait in "
          "MPI_Init for this one's; ceiling's own MPI (mpi4py) calls MPI_Abort in its place",
          file=sys.stderr, flush=True)
    try:
        r = subprocess.run([sys.executable, "-c", _ABORT_WITH_MPI4PY, str(e.exit_code), family],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=ABORT_WAIT_S, close_fds=False)
        # MPI_Abort's code, or a signal (the launcher ending the job), is what a helper that ended
        # the job returns, if this ceiling is not killed first; anything else ended nothing
        why = ("" if r.returncode == e.exit_code or r.returncode < 0 else
               "its MPI is not the launcher's" if r.returncode == 3 else
               "its MPI_Init found no job to join" if r.returncode == 4 else
               "mpi4py is not installed" if b"ModuleNotFoundError" in r.stderr else
               f"it exited {r.returncode}: {r.stderr.decode(errors='replace').strip()[-200:]}")
    except OSError as err:
        why = err.strerror
    except subprocess.TimeoutExpired:
        why = f"its MPI_Init did not return in {ABORT_WAIT_S} s"
    if why and family == "ompi":          # started by Open MPI's mpirun, which ends the job for a failed rank
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


def without_own_io(io: Optional[dict], records: list, written: int, host: Optional[str],
                   loader: Optional[dict] = None) -> Tuple[Optional[dict], dict]:
    """The program's exit totals (/proc/PID/io) less what the interposer did inside it: the
    records it wrote (``written``); what it read itself (/proc/self files at each record, the
    "self_read" and "self_reads" of each image's record on ``host``; None: not known which
    records are this tree's, as in a wrapped launch, so none taken off); and what the dynamic
    loader read to load it into each of those images, before any of its code ran (``loader``:
    interpose_cost.loader_reads, measured per build; without a figure, nothing, and the reason
    is said; not for a child of fork, which runs its parent's image: the record's "forked"). With
    the interposer, a program that reads a few KiB read two or three times that; the kernel counts
    both alike. The second value says what was taken off ({} for nothing)."""
    if not io:
        return io, {}
    mine = [] if host is None else [r for r in records if r.get("process", {}).get("host") == host]
    read = sum(int(r.get("end", {}).get("self_read") or 0) for r in mine)
    calls = sum(int(r.get("end", {}).get("self_reads") or 0) for r in mine)
    per = loader or {}
    # the loader ran once per image it loaded, not in a child of fork (the parent's image goes on)
    images = sum(1 for r in mine if not r.get("process", {}).get("forked"))
    by_loader = int(per.get("rchar") or 0) * images
    loader_calls = int(per.get("syscr") or 0) * images
    if not (read or written or by_loader):
        return io, {}
    out = dict(io)
    if "rchar" in out:
        out["rchar"] = max(0, out["rchar"] - read - by_loader)
    if "syscr" in out:
        out["syscr"] = max(0, out["syscr"] - calls - loader_calls)
    if "wchar" in out:
        out["wchar"] = max(0, out["wchar"] - written)
    said = {"read_bytes": read, "read_calls": calls, "written_bytes": written,
            "how": "the interposer's own reads of /proc/self and sysfs (its records' self_read) and its record "
                   "files' sizes, taken off rchar and wchar"}
    if images:
        said["loader"] = {"images": images, "read_bytes": by_loader, "read_calls": loader_calls,
                          "per_image_bytes": per.get("rchar"), "per_image_calls": per.get("syscr"),
                          "how": ("the dynamic loader's reads of the interposer's ELF header, once per process "
                                  "image that wrote a record (not a child of fork without exec), taken off rchar and "
                                  "syscr; per image: "
                                  + str(per.get("how")) if per.get("rchar") is not None else
                                  "not taken off: " + str(per.get("why") or "not measured") +
                                  "; rchar keeps the loader's reads of the interposer's ELF header, once per image")}
    return out, said
