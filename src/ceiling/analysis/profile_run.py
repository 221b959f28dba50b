"""What one observed run of a program says (observe/'s Observation in, ``Analysed`` out):
the chain of the profile's analysis steps, each a function of what came before.

1. Which records are the program's: a launcher's own (mpirun, srun, a shell that waited) and
   the ranks' ancestors are not; processes outside the sampled tree (ranks other ceilings
   wrapped, ranks a launcher's daemon started) join the split from their records
   (``unwatched``); the interposer's own I/O comes off the exit totals (``without_own_io``).
2. The split and the bound (analysis/profile.py ``conclude``), with the I/O calls
   (profile_io.py) and MPI calls (profile_mpi.py) that cut across it.
3. What the launch and the records say: processes that left the tree, records unread or
   skipped, processes that wrote no record.
4. Per file (profile_files.py), the program's rates against this node's ceilings
   (profile_ceilings.py: the history, or a quick measurement the caller allows), then the
   hardware counters' verdict on time on a CPU (profile_counters.py), memory on other NUMA nodes
   than its threads (profile_numa.py), then what watching cost; and the work the program stated
   (ceiling_work, app_roofline.recorded), summed over its processes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from ..observe.model import Observation
from ..probes import interpose_record
from ..probes.interpose_lines import File, Record, Region, Work
from ..results.analysis import Bound
from ..results.model import WARN, Finding, Metric
from . import app_roofline, profile_counters, profile_files, profile_numa, profile_regions
from .profile import Rusage, conclude, intercepted_calls, io_calls, launchers
from .profile_ceilings import compare, memory_traffic
from .profile_mpi import conclude as mpi_conclude, launcher_pids


@dataclass
class Analysed:
    """What the analysis of one observation gives: the run's metrics, bounds and findings,
    the profile the reports read (run.environment["profile"]), the cost of watching
    (Application.overhead), and why the profile covers only part of the run ("" whole)."""

    metrics: List[Metric] = field(default_factory=list)
    bounds: List[Bound] = field(default_factory=list)
    findings: List[Finding] = field(default_factory=list)
    profile: Dict[str, Any] = field(default_factory=dict)
    overhead: Dict[str, Any] = field(default_factory=dict)
    partial_reason: str = ""
    work: Optional[Dict[str, Any]] = None      # what the program stated with ceiling_work (app_roofline.recorded)


def analyse(obs: Observation, history, quick=None) -> Analysed:
    """``history``: prefix -> this node's stored metrics (analysis/profile_ceilings.Lookup);
    ``quick``: an object whose ``bind(profile)`` gives profile_ceilings' measure for the
    ceilings the history lacks, for a program with the profile's "io_calls" and "files", and
    whose ``ceilings`` says afterwards what it measured (None: nothing measured)."""
    ended, sampled, wall, wrapped = obs.ended, obs.sampled, obs.wall_s, obs.wrapped
    part = obs.interposer
    records = part.records
    io, own_io = without_own_io(ended.io, records, part.written, None if wrapped else obs.host, part.loader,
                                part.exec_reads)
    # mpirun's, srun's or a shell's own I/O (the launcher's control messages) is not the program's
    starters = set(launcher_pids(records))               # every image of an MPI rank's ancestor
    waiters = set(launchers(sampled, wall)) | starters
    # ... but a process judged a launcher by its waiting alone that read or wrote files (git gc's git repack,
    # between its short children, writes info/refs) did the program's work: its records stay
    own = [r for r in records if r.process.pid not in starters and
           (not launcher_image(r, waiters, sampled) or moved_file_data(r))]
    # processes this ceiling's sampler and rusage never saw (the ranks other ceilings wrapped; ranks a
    # launcher's daemon started, as srun's slurmstepd): their threads from their records
    others = unwatched(own, obs.pid, set(sampled.processes), records, obs.host)
    calls, files = io_calls(own), profile_files.summarise(own)
    # the counters' verdict on the time on a CPU rests on the memory traffic against STREAM alone:
    # reached before the bounds, so that each bound is made once, with its words
    measure = quick.bind({"io_calls": calls, "files": files}) if quick else None
    memory = memory_traffic(obs.counters, history, measure)
    verdict = profile_counters.classify(obs.counters, [memory] if memory else [])
    metrics, bounds, findings, breakdown = conclude(sampled, Rusage(ended.user_s, ended.system_s, ended.maxrss_bytes,
                                                           io or None),
                                                    wall, obs.cpus, calls, mpi_conclude(own, wrapped),
                                                    obs.counters, sorted(waiters), others, obs.competing, files,
                                                    verdict)
    breakdown["launch"] = ended.describe()
    if own_io:
        breakdown["launch"]["interposer_io"] = own_io      # taken off the totals
    left = left_tree(sampled)
    if left:
        breakdown["launch"]["left_tree"] = left.data["processes"]
        findings.append(left)
    breakdown["interposer"] = ({"used": False, "why": part.why} if not part.used else
                               {"used": True, "records": len(records),
                                "modules": sorted({n for r in records for n in r.modules}),
                                "skipped": records.counts()})
    findings.extend(interpose_record.findings(records, part.removed))
    if part.used and not part.removed and not (wrapped and wrapped[0] != 0):
        gone = interpose_record.unrecorded(preloaded(sampled, lambda exe: obs.unreached.get(exe, "")), records)
        if gone:
            findings.append(gone)
    if wrapped:
        breakdown["wrapped"] = {"rank": wrapped[0], "size": wrapped[1]}
    if files:
        breakdown["files"] = files
    regions, regions_lost = profile_regions.summarise(own)
    if regions or regions_lost:
        breakdown["regions"], breakdown["regions_lost"] = regions, regions_lost
    findings.extend(profile_files.conclude(files, breakdown.get("io_calls") or {}, own))
    breakdown["ceilings"], more = compare(breakdown, history, quick and quick.bind(breakdown), memory)
    findings.extend(more)
    if quick and quick.ceilings:
        breakdown["quick_ceilings"] = dict(quick.ceilings)
    if (breakdown.get("counters_verdict") or {}).get("bound"):
        findings.append(profile_counters.finding(breakdown["counters_verdict"]))
    findings.extend(profile_numa.remote_memory(sampled, history))
    busiest = max((intercepted_calls([r]) + intercepted_calls([r], ("mpi",)) for r in own), default=0)
    overhead = watching_cost(part.cost, breakdown, wall, intercepted_calls(records),
                             intercepted_calls(records, ("mpi",)), busiest)
    partial, sig = obs.interruption, obs.signal
    if partial or sig in ("SIGINT", "SIGTERM"):
        partial = (partial or f"the program ended by {sig}") + ": the profile covers the time until then"
    return Analysed(metrics, bounds, findings, breakdown, overhead, partial, app_roofline.recorded(own))


def watching_cost(cost: dict, breakdown: dict, wall: float, calls: int, mpi_calls: int, busiest: int) -> dict:
    """What watching cost: the interposer's measured ns per call times the calls it counted in
    every process, launchers included; the slowdown the program saw is that of its busiest
    process (the others ran beside it): its calls times the cost over the wall time. And the
    sampler's CPU."""
    per = cost.get("per_call_ns")
    out = {"per_call_ns": per, "calls": calls, "mpi_calls": mpi_calls,
           "sampler_cpu_s": breakdown["sampler"]["cpu_s"],
           "sampler_share_of_one_cpu": breakdown["sampler"]["share_of_one_cpu"]}
    if per is not None:
        out["interposer_s"] = per * calls / 1e9
        out["busiest_calls"] = busiest
        out["fraction"] = per * busiest / 1e9 / wall if wall else None
        out["how"] = cost.get("how", "")
    elif cost:
        out["why"] = cost.get("why", "")
    return out


def unwatched(records: list, root: int, sampled: Set[int] = frozenset(), everyone: Optional[list] = None,
              host: Optional[str] = None) -> list:
    """Of ``records``, those of processes outside ``root``'s tree on this host (the ranks other
    ceilings wrapped, here or on other nodes; ranks that srun's slurmstepd started): what
    neither this ceiling's sampler nor its wait4 rusage covered. A process is in the tree when
    its ppid chain, through the records of ``everyone`` (the launchers' own included: a rank
    under mpiexec's proxy), reaches ``root``, or when the sampler saw it. ``host``: this node's name (os.uname's)."""
    here = host or os.uname().nodename
    parent = {r.process.pid: r.process.ppid for r in (everyone or records) if r.process.host == here}
    out = []
    for r in records:
        p = r.process
        pid, seen = p.pid, set()
        if p.host == here:
            if pid in sampled:
                continue
            while pid is not None and pid != root and pid not in seen:
                seen.add(pid)
                pid = parent.get(pid)
            if pid == root:
                continue
        out.append(r)
    return out




def preloaded(sampled, preload_refused) -> List[Tuple[int, str]]:
    """(pid, comm) of the processes the sampler saw that should have written a record: not
    ceiling's launcher, not one that left the tree (it may still run), not a program the
    loader does not preload (static, setuid: preload_refused)."""
    return [(p.pid, p.comm) for p in sorted(sampled.processes.values(), key=lambda p: p.pid)
            if p.comm != "ceiling-launch" and not p.left and not (p.exe and preload_refused(p.exe))]


def moved_file_data(rec: Record) -> bool:
    """Whether the record's process read or wrote a file (its file lines), or named a region or stated
    its work (ceiling_region_begin/end, ceiling_work): work of the program's, which a launcher's own
    calls (PATH lookups, control messages on pipes and sockets) are not. A program that forks and
    waits for its child is judged a launcher by its waiting: its regions were lost with it."""
    return any(ln.reads or ln.writes for ln in rec.of("file", File) if ln.path is not None) or \
        bool(rec.of("region", Region)) or bool(rec.of("work", Work))


def launcher_image(rec: Record, waiters: set, sampled) -> bool:
    """Whether ``rec`` is a launcher's own (its I/O the launcher's, not the program's): its pid
    is one of ``waiters`` and, where the sampler saw which program that pid ran first, the record
    is that program's image. A shell that execs the program (sh -c 'sleep 1; exec ./app') keeps
    its pid, and the sampler judges the pid a launcher by the shell's waiting: the program's
    image, with another exe, is the program's."""
    p = rec.process
    if p.pid not in waiters:
        return False
    seen = sampled.processes.get(p.pid)
    return not (seen and seen.exe and p.exe and p.exe != seen.exe)


def left_tree(sampled):
    """A finding when processes of the program left its tree alive (orphaned, reparented to
    init or a subreaper): no one in the tree waited for them, so their CPU time, memory and
    I/O are not in the exact totals taken at the program's exit."""
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




def without_own_io(io: Optional[dict], records: list, written: int, host: Optional[str],
                   loader: Optional[dict] = None, execs: Optional[dict] = None) -> Tuple[Optional[dict], dict]:
    """The program's exit totals (/proc/PID/io) less what the interposer did inside it: the
    records it wrote (``written``); what it read itself (/proc/self files at each record, the
    "self_read" and "self_reads" of each image's record on ``host``; None: not known which
    records are this tree's, as in a wrapped launch, so none taken off); and what the dynamic
    loader read to load it into each of those images, before any of its code ran (``loader``:
    interpose_cost.loader_reads, measured per build; without a figure, nothing, and the reason
    is said; not for a child of fork, which runs its parent's image: the record's "forked"). With
    the interposer, a program that reads a few KiB read two or three times that; the kernel counts
    both alike. Also taken off, so that the totals are what the program's system calls moved: what
    the kernel read to execute each of those images (``execs``: {exe: {"rchar", "syscr"} or None},
    probes/exec_reads.py; ~1.6 KB and 5 calls for a dynamically linked program). The second value
    says what was taken off ({} for nothing)."""
    if not io:
        return io, {}
    mine = [] if host is None else [r for r in records if r.process.host == host]
    read = sum(int(r.end.self_read or 0) for r in mine if r.end is not None)
    calls = sum(int(r.end.self_reads or 0) for r in mine if r.end is not None)
    per = loader or {}
    # the loader ran once per image it loaded, not in a child of fork (the parent's image goes on)
    images = sum(1 for r in mine if not r.process.forked)
    by_loader = int(per.get("rchar") or 0) * images
    loader_calls = int(per.get("syscr") or 0) * images
    ran = [(execs or {}).get(r.process.exe) for r in mine if not r.process.forked]
    by_exec = sum(int(e["rchar"]) for e in ran if e)
    exec_calls = sum(int(e["syscr"]) for e in ran if e)
    if not (read or written or by_loader or by_exec):
        return io, {}
    out = dict(io)
    if "rchar" in out:
        out["rchar"] = max(0, out["rchar"] - read - by_loader - by_exec)
    if "syscr" in out:
        out["syscr"] = max(0, out["syscr"] - calls - loader_calls - exec_calls)
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
    if by_exec:
        unknown = sum(1 for e in ran if not e)
        said["exec"] = {"images": len(ran) - unknown, "read_bytes": by_exec, "read_calls": exec_calls,
                        "how": "what the kernel read to execute each recorded image's program (its first 256 bytes, "
                               "its ELF program headers, its interpreter's path, ELF header and program headers: "
                               "no system call of the program), taken off rchar and syscr"
                               + (f"; not for {unknown} image(s) whose program is not an ELF file that could be read"
                                  if unknown else "")}
    return out, said
