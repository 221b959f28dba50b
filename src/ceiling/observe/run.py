"""Observing a program: start it with its instruments, wait, and say what was seen
(observe/model.py's Observation).

The order is the measurement's. Before the program: the interposer's cost per call (not
beside it), the LD_PRELOAD environment and a private record directory, the competing load's
first reading. The program is forked from ceiling-launch with the hardware counters opened
on it before its exec (probes/perf_counters.py, probes/launch.py); the /proc sampler
watches its tree (probes/proc_sampler.py); ceiling survives the signals of launch.WATCHED
meanwhile and passes on only those sent to it alone. After it: the competing load's second
reading, the machine (when the caller has not detected it before), the counters read and
closed, the records read back and the directory removed, and, for rank 0 of a wrapped MPI
launch, the interposer's cost (the other ranks would wait in MPI_Init while it is measured
before). Nothing is analysed here.

A re-run (Instruments.own_group: --experiments) is started instead in a process group of its
own (observe/detached.py): no ceiling-launch and no signal rule, since Ctrl-C at the terminal
reaches ceiling alone, whose KeyboardInterrupt kills the group; a deadline kills it too
(Overdue), and a look (probes/rerun.Footprint) reads its pages while it runs. Companions
(Instruments.beside: the co-runners of observe/companions.py) are entered before either kind
of program starts and left after it ended, so its wall time lies inside their run.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Callable, List, Optional

from ..files.private import make_dir, remove_tree
from ..probes import interpose_record
from ..probes.launch import Exit, Watch
from ..probes.perf_counters import spawn, summary
from ..probes.proc_sampler import ProcSampler, Sampled
from ..results.model import utcnow
from . import detached
from .model import Instruments, Interposer, Observation, interruption
from .preload import preload_refused

COMPETING_MIN_S = 0.2      # a shorter run's tick counts (10 ms) say too little about other processes


def observe(cmd: List[str], exe: str, tools: Optional[Instruments] = None,
            machine: Optional[Callable[[], object]] = None, wrapped=None) -> Observation:
    """Run ``cmd`` (``exe``: its resolved path) watched by ``tools`` until it ends.
    ``machine``: the node's model, asked for after the program (its hypervisor names why
    counters are missing); ``wrapped``: (rank, size) when this ceiling is one rank of an MPI
    launch. Raises OSError when the program cannot be started (nothing is left behind), Overdue
    when one with a deadline passed it (its process group killed), and whatever stopped it
    meanwhile (KeyboardInterrupt) with its group killed, where it runs in a group of its own."""
    tools = tools or Instruments()
    if tools.own_group and tools.counters:
        raise ValueError("observe: hardware counters are opened through the launch, which a program in a process "
                         "group of its own does not have (counters=False)")
    if not tools.own_group and (tools.deadline_s or tools.look is not None):
        raise ValueError("observe: a deadline or a look needs the program in a process group of its own "
                         "(own_group=True)")
    env = dict(os.environ if tools.env is None else tools.env)
    lib, part, tmp = _interposer(exe, tools, env)
    competing = None
    if tools.competing:
        from ..checks.load import Competing
        competing = Competing()
    try:
        with contextlib.ExitStack() as beside:
            for companion in tools.beside:          # started before it (a co-runner's "go"), left after its end
                beside.enter_context(companion)
            started = utcnow()
            t0 = time.monotonic()
            if tools.own_group:
                child = None
                pid, ended, sampler, wall = _in_group(cmd, exe, env, tools, t0)
            else:
                with Watch() as watch:
                    with _discarded(tools.discard_output), detached.thp_disabled(tools.no_thp):
                        child = spawn(cmd, exe, env, counters=tools.counters)
                    pid = child.pid
                    sampler = ProcSampler(pid, tools.interval_s).start() if tools.interval_s > 0 else None
                    ended = child.wait(watch)
                wall = time.monotonic() - t0
    except BaseException:
        remove_tree(tmp)
        raise
    t1 = time.monotonic()
    sampled = sampler.stop() if sampler else Sampled(interval_s=0.0)
    busy = competing.stop(set(sampled.processes), COMPETING_MIN_S, hidden_own=_hidden_own(exe, sampled)) \
        if competing else []
    m = machine() if machine else None
    hypervisor = getattr(m, "virtualized", None)
    counters = (child.finish(wall, hypervisor=hypervisor) if child else
                summary({}, None, None, wall, hypervisor, why="not opened: the program ran in a process group "
                                                               "of its own (a re-run)"))
    finished = utcnow()
    if tmp:
        # a job script's rm -rf $TMPDIR/* may have taken the directory with the records: said, not raised
        part.removed = "" if os.path.isdir(tmp) else tmp
        try:
            part.written = record_bytes(tmp)
            part.records = interpose_record.latest(interpose_record.read_dir(tmp))
            if part.trace_dir and os.path.isdir(tmp):
                _keep_records(tmp, part.trace_dir)
        finally:
            remove_tree(tmp)
        part.exec_reads = _exec_reads(part.records, os.uname().nodename)
    if part.used and tools.cost == "after":
        # Not when the job was stopped: the launcher kills rank 0's ceiling soon after the other
        # ranks' ceilings exit, and the report comes first
        stopped = interruption(ended.signals)
        part.cost = ({"why": f"not measured: the job was {stopped.split(' ')[0]}"} if stopped else
                     _measure(lib))
        if tools.trace is not None:
            part.event_cost = dict(part.cost) if stopped else _event_cost(lib)
    unreached = {p.exe: preload_refused(p.exe) for p in sampled.processes.values() if p.exe}
    return Observation(command=list(cmd), exe=exe, pid=pid, started=started, finished=finished, wall_s=wall,
                       start_s=t0,
                       ended=ended, sampled=sampled, counters=counters, interposer=part, competing=busy,
                       host=os.uname().nodename, cpus=len(os.sched_getaffinity(0)), wrapped=wrapped,
                       unreached=unreached, machine=m, overhead_s=time.monotonic() - t1)


IN_GROUP = ("forked from ceiling's Python in a session and process group of its own (a re-run); wait4 rusage; "
            "/proc/PID/io not read")


SRUN_HIDDEN = ("srun started the program's tasks under slurmstepd, outside ceiling's process tree, so their CPU "
               "time cannot be told from other load")


def _hidden_own(exe: str, sampled: Sampled) -> str:
    """Why the program's own processes may run outside the tree the sampler follows (``SRUN_HIDDEN``
    when it was srun, or started one), else ""."""
    if os.path.basename(exe) == "srun" or any(p.comm == "srun" for p in sampled.processes.values()):
        return SRUN_HIDDEN
    return ""


def _in_group(cmd: List[str], exe: str, env: dict, tools: Instruments, t0: float):
    """(pid, Exit, sampler or None, wall s): the program run in a process group of its own
    (observe/detached.py), its deadline and look kept; on any exception its group is killed and
    the sampler stopped before it goes on."""
    p = detached.start(cmd, exe, env, tools.discard_output, tools.no_thp, tools.output)
    sampler = ProcSampler(p.pid, tools.interval_s).start() if tools.interval_s > 0 else None
    try:
        status, ru, wall = detached.wait(p, t0, tools.deadline_s, tools.look)
    except BaseException:
        if sampler:
            sampler.stop()
        raise
    return p.pid, Exit(status, ru.ru_utime, ru.ru_stime, ru.ru_maxrss * 1024, {}, "not read (a re-run)",
                       how=IN_GROUP), sampler, wall


def _interposer(exe: str, tools: Instruments, env: dict):
    """(library, Interposer, record directory or ""): the LD_PRELOAD environment put into
    ``env`` where the interposer can reach the program, its cost measured before it."""
    from .. import core
    lib = core.interpose_library_path()
    why = ("--no-interpose" if not tools.interpose else
           f"the interposer is not built ({lib} is missing)" if not lib.exists() else preload_refused(exe))
    if why:
        return lib, Interposer(used=False, why=why, library=str(lib)), ""
    part = Interposer(used=True, library=str(lib))
    if tools.cost == "before":
        part.cost = _measure(lib)                   # before the program, not beside it
        part.loader = _loader_reads(lib)            # what taking it off the exit totals needs
        if tools.trace is not None:
            part.event_cost = _event_cost(lib)      # what one recorded event costs, stated on the trace
    tmp = make_dir("ceiling-profile-")              # 0700, in a $TMPDIR no one else can swap it in
    env["LD_PRELOAD"] = " ".join(filter(None, [str(lib), env.get("LD_PRELOAD", "")]))
    env["CEILING_INTERPOSE_OUT"] = os.path.join(tmp, "interpose.%p")
    if tools.gather:
        env["CEILING_INTERPOSE_GATHER"] = "1"       # every rank's record to rank 0's at MPI_Finalize
    if tools.trace is not None:
        part.trace_dir = tools.trace.directory or make_dir("ceiling-trace-")
        os.makedirs(part.trace_dir, mode=0o700, exist_ok=True)     # a directory given that is not there yet
        env.update(tools.trace.env(part.trace_dir))
    return lib, part, tmp


def _keep_records(tmp: str, trace_dir: str) -> None:
    """The records beside the event files (their file lines name the events' files)."""
    import shutil
    with os.scandir(tmp) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                shutil.copyfile(e.path, os.path.join(trace_dir, e.name))


def _measure(lib) -> dict:
    from ..probes.interpose_cost import measure
    return measure(lib)


def _exec_reads(records, host: str) -> dict:
    """What the kernel read to execute each program this host's records ran (not a child of
    fork: it runs its parent's image), by its path."""
    from ..probes.exec_reads import exec_reads
    exes = {r.process.exe for r in records if r.process.host == host and not r.process.forked and r.process.exe}
    return {exe: exec_reads(exe) for exe in sorted(exes)}


def _event_cost(lib) -> dict:
    from ..probes.trace_cost import measure
    return measure(lib)


def _loader_reads(lib) -> dict:
    from ..probes.interpose_cost import loader_reads
    return loader_reads(lib)


@contextlib.contextmanager
def _discarded(discard: bool):
    """Standard input, output and error on /dev/null while the program is started (it
    inherits them), ceiling's own put back after."""
    if not discard:
        yield
        return
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        yield
    finally:
        for fd, old in zip((0, 1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(null)


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
