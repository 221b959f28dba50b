"""What observing a program gives: a typed observation, as a bench gives a result.

``Instruments`` says what to watch the program with; ``Observation`` is what was seen: how
it ended (the launch's ``Exit``: status, wait4's rusage, its /proc/PID/io at exit, the
signals ceiling got), its processes and threads as the /proc sampler saw them (``Sampled``:
their CPU time, run-queue delay and lifetime, the split's inputs), the hardware counters,
the interposer's records (I/O calls by class, files, MPI calls per rank) with what reading
them skipped and what the interposer cost, and the load that competed meanwhile. Nothing
in it is analysed: analysis/profile_run.py says what it means.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, ContextManager, Dict, List, Optional, Sequence, Tuple

from ..probes.interpose_record import Records
from ..probes.launch import Exit, signal_name
from ..probes.proc_sampler import Sampled
from ..results.model import Finding


@dataclass
class TraceLimits:
    """``ceiling trace``'s recording: the interposer's per-event channel on, with its limits (each applied
    in C, never silently: what a limit cut is counted per reason in the event files, the record's counts
    stay whole). 0 or empty: no such limit."""

    directory: str = ""                  # the event files' directory; "": a fresh 0700 one, kept after the run
    max_bytes: int = 0                   # event bytes for the whole run, all processes together
    calls: Sequence[str] = ()            # keep only these calls or classes (calls.def's names: "write", "META")
    exclude: Sequence[str] = ()          # drop these calls or classes
    min_duration_ns: int = 0             # drop calls shorter than this
    max_per_call: int = 0                # keep the first N events of each call per thread (Vampir's filter)
    window_s: Optional[Tuple[float, float]] = None   # (start, end) seconds after the program was started,
                                                     # for every process of the run alike
    buffer_events: int = 0               # events per thread buffer (0: the interposer's 4096)

    def env(self, directory: str) -> Dict[str, str]:
        """The interposer's environment for these limits (csrc/interpose/interpose.h, CEILING_TRACE_*)."""
        e = {"CEILING_TRACE_DIR": directory}
        if self.max_bytes:
            e["CEILING_TRACE_MAX_BYTES"] = str(int(self.max_bytes))
        if self.calls:
            e["CEILING_TRACE_CALLS"] = ",".join(self.calls)
        if self.exclude:
            e["CEILING_TRACE_EXCLUDE"] = ",".join(self.exclude)
        if self.min_duration_ns:
            e["CEILING_TRACE_MIN_NS"] = str(int(self.min_duration_ns))
        if self.max_per_call:
            e["CEILING_TRACE_MAX_PER_CALL"] = str(int(self.max_per_call))
        if self.window_s:
            # the origin: now, as the program starts (the wall clock: every node of a job reads one)
            e["CEILING_TRACE_WINDOW"] = f"{self.window_s[0]!r}:{self.window_s[1]!r}@{time.time_ns()}"
        if self.buffer_events:
            e["CEILING_TRACE_BUFFER"] = str(int(self.buffer_events))
        return e


@dataclass
class Instruments:
    """What a program is watched with, and how it is run."""

    interval_s: float = 0.1              # between two readings of /proc; 0: no sampler
    interpose: bool = True               # the LD_PRELOAD interposer, where the loader lets it in
    counters: bool = True                # hardware counters opened on it before its exec
    cost: str = "before"                 # the interposer's cost per call: "before" the program, "after", "" never
    gather: bool = False                 # every MPI rank's record to rank 0's at MPI_Finalize (a wrapped launch)
    competing: bool = True               # the load of other processes during the run (checks/load.py)
    discard_output: bool = False         # standard input, output and error to /dev/null (a rerun)
    env: Optional[Dict[str, str]] = None     # the program's environment; None: ceiling's own
    # A re-run (observe/detached.py): in a session and process group of its own, forked from Python
    # without ceiling-launch or its signal rule (Ctrl-C reaches ceiling only, whose KeyboardInterrupt
    # kills the group), its input /dev/null; no hardware counters (they are opened through the launch)
    own_group: bool = False
    deadline_s: Optional[float] = None   # own_group: past this its process group is killed and Overdue raised
    look: Any = None                     # own_group: called with its process group every look.wait_s seconds
                                         # while it runs (probes/rerun.Footprint: its working set)
    output: Optional[str] = None         # own_group: its standard output and error to this file (scale --metric)
    no_thp: bool = False                 # transparent huge pages off for it (PR_SET_THP_DISABLE)
    # companions: context managers entered, in order, before the program starts and left after it
    # ended (observe/companions.CoRunners.running: co-runners working beside it)
    beside: Sequence[ContextManager] = ()
    trace: Optional[TraceLimits] = None  # per-event recording (``ceiling trace``); None: counts only (profile)


@dataclass
class Interposer:
    """The LD_PRELOAD interposer's part: whether it was put in (``why`` not), its records
    (typed, probes/interpose_lines.Record: one per process image, probes/interpose_record.latest),
    the bytes of its record files
    (``written``: the program's processes wrote them), the record directory the program
    removed (``removed``), its measured cost per call and the dynamic loader's reads of it per
    process image (``loader``; both probes/interpose_cost.py, measured once per build), and what
    the kernel read to execute each recorded image's program (``exec_reads``: {exe: {"rchar",
    "syscr"} or None}, probes/exec_reads.py, from its ELF headers after the run)."""

    used: bool = False
    why: str = ""
    library: str = ""
    records: Records = field(default_factory=Records)
    written: int = 0
    removed: str = ""
    cost: Dict[str, Any] = field(default_factory=dict)
    loader: Dict[str, Any] = field(default_factory=dict)
    # Instruments.trace: what recording one event costs (probes/trace_cost.py: "per_event_ns", "how" or "why"),
    # measured when the per-call cost is; {} when not tracing or not measured (a rank other than 0)
    event_cost: Dict[str, Any] = field(default_factory=dict)
    exec_reads: Dict[str, Any] = field(default_factory=dict)
    # Instruments.trace: the event files' directory (kept; the records are copied beside them so that the
    # reader names the files), "" when not tracing
    trace_dir: str = ""

    def events(self):
        """(results/events.Events, probes/interpose_events.Reading) of a traced run's event files."""
        from ..probes import interpose_events
        return interpose_events.read_dir(self.trace_dir)

    def event_chunks(self):
        """The same as chunks (one Events per thread file, sharing tables): bounded memory."""
        from ..probes import interpose_events
        return interpose_events.iter_chunks(self.trace_dir)


@dataclass
class Observation:
    """One run of a program, as its instruments saw it."""

    command: List[str]
    exe: str
    pid: int                             # the program's first process
    started: str                         # ISO 8601 UTC
    finished: str
    wall_s: float                        # from its start to its end (wait4), monotonic
    start_s: float                       # time.monotonic() at its start
    ended: Exit                          # status, rusage, I/O at exit, signals ceiling got
    sampled: Sampled                     # its processes and threads, from /proc
    counters: Dict[str, Any]             # probes/perf_counters.summary; {"available": False, "why"} without
    interposer: Interposer
    competing: List[Finding]             # other load meanwhile (checks/load.compare's warnings)
    host: str                            # this node's name, as the records name their host
    cpus: int                            # CPUs ceiling (and so the program) may use
    wrapped: Optional[Tuple[int, int]] = None    # (rank, size) when ceiling is one rank of an MPI launch
    unreached: Dict[str, str] = field(default_factory=dict)   # exe -> why LD_PRELOAD cannot reach it
    machine: Any = None                  # the node's model (machine/), where the caller gave one
    overhead_s: float = 0.0              # ceiling's own time inside ``observe`` after the program ended

    @property
    def signal(self) -> str:
        """The signal that ended the program ("SIGKILL"), "" when it exited."""
        st = self.ended.status
        if not os.WIFSIGNALED(st):
            return ""
        return signal_name(os.WTERMSIG(st))

    @property
    def exit_status(self) -> Optional[int]:
        return None if os.WIFSIGNALED(self.ended.status) else os.WEXITSTATUS(self.ended.status)

    @property
    def returncode(self) -> int:
        """As subprocess says it: the exit status, or -N when signal N ended it."""
        return os.waitstatus_to_exitcode(self.ended.status)

    @property
    def code(self) -> int:
        """As the shell says it: the exit status, or 128 + N when signal N ended it."""
        st = self.ended.status
        return 128 + os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)

    @property
    def interruption(self) -> str:
        """The first signal ceiling got that asks a program to end, in words ("" for none)."""
        return interruption(self.ended.signals)


class Overdue(Exception):
    """A program run with a deadline (Instruments.deadline_s) passed it; its process group was killed."""


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
