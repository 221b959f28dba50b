"""Where a profiled program's time went, and what bound it: pure functions over
what the /proc sampler saw (probes/proc_sampler.py) and the exit rusage.

Every thread's lifetime is split three ways: on a CPU (schedstat's run time, else
user + system ticks), runnable but waiting for a CPU (schedstat's run-queue
delay), and off any CPU (the rest: blocked in I/O, waiting on a lock, a message
or a condition, sleeping). The program's shares are thread-seconds summed over
its threads, so a program of eight threads that each wait half the time is
"waiting" however busy its main thread is. A process that waits for its children
while they run (blocked in wait4, or polling with sleeps: a shell, make, mpirun,
fio's main process while its job writes) is their supervisor: that time is left
out, since its waiting is their running, and what it did alone (its start-up
before its first child, its work between and after them) stays, so the split is
that of the critical path; the bound's evidence then names each process's share.
CPU time the sampler did not see
(threads that began and ended between two samples) comes from wait4's rusage,
which is exact for the whole tree, and is counted on a CPU.

Without hardware counters, time on a CPU is one class ("cpu"): compute and
memory cannot be told apart from /proc (counters or the sensitivity experiments
of a later increment can).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..probes.interpose_lines import ProcSummary, Record, Task
from ..probes.proc_sampler import Sampled
from . import profile_competing, profile_counters, profile_files
from ..results.analysis import Bound
from ..results.model import LOWER, OK, SKIPPED, WARN, Finding, Metric
from .profile_counters import NO_COUNTERS, NO_COUNTERS_TITLE  # noqa: F401 (the "cpu" bound's words)
from .profile_io import intercepted_calls, io_bound, io_calls  # noqa: F401 (the verb imports them from here)
from .profile_supervisors import LAUNCHER_ON, critical_path, launchers, supervisors  # noqa: F401 (as above)

OVERSUBSCRIBED = 0.20       # waiting for a CPU this share of the time: too many threads for the CPUs
ON_CPU = 0.60               # on a CPU this share of the time: CPU-bound
OFF_CPU = 0.50              # off any CPU this share: waiting (I/O, locks, messages, sleep)
MIN_LIFE_S = 1e-3           # a thread seen this briefly says nothing about shares
SURE_SAMPLES = 5            # fewer samples than this: the split is a rough one


@dataclass
class Rusage:
    """wait4's figures for the program and every child it waited for, and its /proc/PID/io
    read once at its exit (as a zombie, probes/launch.py): its own bytes and those of every
    descendant it waited for, each once. ``io`` None: not read; the sampled values stand in."""

    user_s: float
    system_s: float
    maxrss_bytes: int
    io: Optional[Dict[str, int]] = None


@dataclass
class Split:
    """One thread's (or the program's) lifetime, seconds, three ways."""

    life_s: float
    on_s: float
    runq_s: float

    @property
    def off_s(self) -> float:
        return max(0.0, self.life_s - self.on_s - self.runq_s)

    def shares(self) -> Dict[str, float]:
        life = self.life_s or 1.0
        return {"on_cpu": self.on_s / life, "runq": self.runq_s / life, "off_cpu": self.off_s / life}


IDLE_HELPER = 0.01          # a thread other than its process's first, on a CPU under this share of its life
MINOR_HELPER = 0.10         # ... or under this share of its life and of its process's busiest thread's CPU time


def idle_helpers(s: Sampled, leave_out: Sequence[int] = ()) -> List[str]:
    """Threads that did nothing the whole time they were seen: not their process's first
    thread, on a CPU under IDLE_HELPER of their life (an MPI progress thread, an event loop,
    a pool never given work), or under MINOR_HELPER of it while a thread of their process used
    ten times their CPU (OpenBLAS's pool beside a one-threaded numpy loop spins a few tens of
    ms when made, then sleeps: counted, the loop came out "waiting"). Left out of the split,
    where they would count as the program waiting; threads that shared the work stay. Named
    "pid/tid comm"."""
    cpu = {k: t.on_cpu_s if t.on_cpu_s is not None else t.user_s + t.system_s for k, t in s.threads.items()}
    busiest: Dict[int, float] = {}
    for (pid, _), on in cpu.items():
        busiest[pid] = max(busiest.get(pid, 0.0), on)
    out = []
    for (pid, tid), t in sorted(s.threads.items()):
        life, on = t.last_s - t.first_s, cpu[(pid, tid)]
        if pid not in leave_out and tid != pid and life > 0 and (
                on < IDLE_HELPER * life or (on < MINOR_HELPER * life and on < MINOR_HELPER * busiest[pid])):
            out.append(f"{pid}/{tid} {t.comm}")
    return out


def splits(s: Sampled, wall_s: float, leave_out: Sequence[int] = (), idle: Sequence[str] = (),
           supervised: Sequence[int] = ()) -> List[Tuple[str, Split]]:
    """Per sampled thread: ("pid/tid comm", its split). A thread's lifetime runs from its
    start to the last sample that saw it, at most the program's wall time. Processes in
    ``leave_out`` and threads named in ``idle`` are left out; the threads of processes in
    ``supervised`` keep only their time outside the intervals that began with a child alive."""
    out = []
    for (pid, tid), t in sorted(s.threads.items()):
        if pid in leave_out or f"{pid}/{tid} {t.comm}" in idle:
            continue
        life = min(max(t.last_s - t.first_s, 0.0), wall_s) if wall_s else t.last_s - t.first_s
        on = t.on_cpu_s if t.on_cpu_s is not None else t.user_s + t.system_s
        runq = t.runq_s or 0.0
        if pid in supervised:
            life, on = max(0.0, life - t.with_children_s), max(0.0, on - t.with_children_on_s)
            runq = max(0.0, runq - t.with_children_runq_s)
        life = max(life, on + runq)       # a last sample just before the end
        out.append((f"{pid}/{tid} {t.comm}", Split(life, on, runq)))
    return out


def record_threads(rec: Record) -> Tuple[List[Tuple[str, Split]], List[str], float]:
    """A process's threads from its interposer record's proc lines (csrc/interpose/proc.c: the
    threads alive when the record was written, with the kernel's run and run-queue times), for a
    process the sampler did not watch (a rank wrapped by a ceiling of its own, on any node):
    ("pid/tid", its split) per thread, the idle helpers among them (left out, as
    ``idle_helpers``), and the CPU seconds of its threads that had ended by then (the process
    line's utime + stime less the live threads'), which count on a CPU. Empty without proc lines."""
    tasks = [ln for ln in rec.of("proc", Task) if isinstance(ln.task, int)]
    if not tasks:
        return [], [], 0.0
    pid = rec.process.pid
    out, idle = [], []
    for ln in tasks:
        life, on, runq = ((getattr(ln, k) or 0) / 1e9 for k in ("life_ns", "run_ns", "runq_ns"))
        name = f"{pid}/{ln.task}"
        if ln.task != pid and life > 0 and on < IDLE_HELPER * life:
            idle.append(name)
            continue
        out.append((name, Split(max(life, on + runq), on, runq)))
    proc = rec.process
    cpu = ((proc.utime_us or 0) + (proc.stime_us or 0)) / 1e6
    return out, idle, max(0.0, cpu - sum(ln.run_ns or 0 for ln in tasks) / 1e9)


def last_images(records: Sequence[Record]) -> Tuple[List[Record], int]:
    """One record per process (host, pid) of ``records``: its last image's (the latest start_ns;
    one written before an exec is followed by the new image's), and how many earlier images were
    folded into it. The figures a process carries across exec (utime_us and stime_us, its main
    thread's run time, maxrss and rchar/wchar in its proc lines) are the last image's, which hold
    the earlier ones': summed, they would count its CPU time twice. Its life starts with its first
    image (start_ns is that image's). I/O and MPI calls are per image: they are summed from every
    record elsewhere (io_calls, profile_mpi)."""
    groups: Dict[tuple, List[Record]] = {}
    for rec in records:
        p = rec.process
        groups.setdefault((p.host, p.pid), []).append(rec)
    out, folded = [], 0
    for recs in groups.values():
        if len(recs) == 1:
            out.append(recs[0])
            continue
        starts = [r.process.start_ns if r.process.start_ns is not None else 0 for r in recs]
        last = recs[starts.index(max(starts))]
        last = replace(last, process=replace(last.process, start_ns=min(starts)))
        out.append(last)
        folded += len(recs) - 1
    return out, folded


def record_split(rec: Record) -> Optional[Split]:
    """One process's split from its record (``record_threads`` summed, the ended threads' CPU
    on a CPU); None without proc lines."""
    threads, _, unseen = record_threads(rec)
    if not threads:
        return None
    return Split(sum(sp.life_s for _, sp in threads) + unseen, sum(sp.on_s for _, sp in threads) + unseen,
                 sum(sp.runq_s for _, sp in threads))


def conclude(s: Sampled, ru: Optional[Rusage], wall_s: float, cpus: int,
             io: Optional[Dict[str, Dict[str, int]]] = None, mpi: Optional[tuple] = None,
             counters: Optional[Dict[str, Any]] = None, leave_out: Sequence[int] = (),
             others: Sequence[Record] = (), competing: Sequence[Finding] = (),
             files: Optional[Dict[str, Any]] = None, verdict: Optional[Dict[str, Any]] = None
             ) -> Tuple[List[Metric], List[Bound], List[Finding], Dict[str, Any]]:
    """(metrics, bounds, findings, breakdown) of one profiled program (``io``: io_calls of the
    interposer's records, when it counted; ``mpi``: analysis/profile_mpi.conclude of them;
    ``counters``: what probes/perf_counters.py counted; ``leave_out``: launchers known
    otherwise, as MPI ranks' ancestors; ``others``: records of the program's processes the
    sampler did not watch, whose threads join the split from their proc lines (a process's
    images before an exec are folded into its last: ``last_images``); ``competing``:
    checks/load.compare's warnings over the program's run, other processes named with their
    share of a CPU; ``files``: analysis/profile_files.summarise of the records, whose busiest
    file the I/O finding names; ``verdict``: analysis/profile_counters.classify's on the time on
    a CPU, given to the "cpu" bound once the bounds are final; without it, the bound says the
    counters cannot tell compute from memory)."""
    waiters = sorted(set(launchers(s, wall_s)) | {p for p in leave_out if p in s.processes})
    sup = {p: x for p, x in supervisors(s).items() if p not in waiters}
    idle = idle_helpers(s, waiters)
    per = [(name, sp) for name, sp in splits(s, wall_s, waiters, set(idle), set(sup)) if sp.life_s >= MIN_LIFE_S]
    # CPU time the sampler saw and left out on purpose (launchers, idle helpers, supervisors while
    # they waited) is not CPU time it missed: only the rest of the exit rusage is added below
    cpu = {k: t.on_cpu_s if t.on_cpu_s is not None else t.user_s + t.system_s for k, t in s.threads.items()}
    seen_on = sum(sp.on_s for _, sp in per) + sum(x["cpu_s"] for x in sup.values()) + sum(
        on for (pid, tid), on in cpu.items() if pid in waiters or f"{pid}/{tid} {s.threads[(pid, tid)].comm}" in idle)
    exact_cpu = ru.user_s + ru.system_s if ru else None
    unseen = max(0.0, exact_cpu - seen_on) if exact_cpu is not None else 0.0
    others, folded = last_images(others)
    from_records = {"processes": 0, "threads": 0, "without_proc_lines": 0, "earlier_images": folded}
    for rec in others:
        threads, rec_idle, rec_unseen = record_threads(rec)
        if not threads:
            from_records["without_proc_lines"] += 1
            continue
        host = rec.process.host if rec.process.host is not None else ""
        threads = [(f"{n} {host}".rstrip(), sp) for n, sp in threads if sp.life_s >= MIN_LIFE_S]
        per += threads
        idle += [f"{n} {host}".rstrip() for n in rec_idle]
        unseen += rec_unseen
        from_records["processes"] += 1
        from_records["threads"] += len(threads)
    total = Split(sum(sp.life_s for _, sp in per) + unseen, sum(sp.on_s for _, sp in per) + unseen,
                  sum(sp.runq_s for _, sp in per))
    shares = total.shares() if total.life_s > 0 else {}
    spread = {k: _spread([sp.shares()[k] for _, sp in per]) for k in ("on_cpu", "runq", "off_cpu")} if per else {}
    breakdown = {"thread_seconds": round(total.life_s, 6), "shares": shares, "per_thread": spread,
                 "threads": len(per), "unsampled_cpu_s": round(unseen, 6), "samples": s.samples,
                 "launchers": [f"{pid} {s.processes[pid].comm}" for pid in waiters], "idle_threads": idle,
                 "supervisors": [dict(process=f"{pid} {s.processes[pid].comm}", **x) for pid, x in sorted(sup.items())],
                 "schedstat": s.schedstat, "cpus": cpus, "from_records": from_records,
                 "sampler": {"interval_s": s.interval_s, "cpu_s": round(s.cost_cpu_s, 6),
                             "share_of_one_cpu": s.cost_cpu_s / wall_s if wall_s else None}}

    metrics = [_m("app.wall", wall_s, "s")]
    if ru:
        # the CPU time, peak memory and I/O of the processes the sampler did not watch, from their records
        procs = [rec.process for rec in others]
        summaries = [ln for rec in others for ln in rec.of("proc", ProcSummary)]
        user = ru.user_s + sum(p.utime_us or 0 for p in procs) / 1e6
        system = ru.system_s + sum(p.stime_us or 0 for p in procs) / 1e6
        rss = max([ru.maxrss_bytes] + [(ln.maxrss_kb or 0) * 1024 for ln in summaries])
        ctx = {"cpus": cpus, "processes_from_records": len(others)} if others else {"cpus": cpus}
        # CPUs in use on average: the watched tree's CPU over the wall time, and each other process's
        # over its own life (their lives need not match the program's: a rank waits in MPI_Init for
        # the others to start)
        used = (ru.user_s + ru.system_s) / wall_s if wall_s else None
        for p in procs:
            life = ((p.end_ns or 0) - (p.start_ns or 0)) / 1e9
            if used is not None and life > 0:
                used += ((p.utime_us or 0) + (p.stime_us or 0)) / 1e6 / life
        metrics += [_m("app.cpu.user", user, "s", context=ctx), _m("app.cpu.system", system, "s", context=ctx),
                    _m("app.cpu.used", used, "CPUs", context=ctx),
                    _m("app.rss.peak", rss / 2**20, "MiB", context=ctx)]
    if total.life_s > 0:
        for key, name in (("on_cpu", "app.time.on_cpu"), ("runq", "app.time.runq"), ("off_cpu", "app.time.off_cpu")):
            metrics.append(_m(name, shares[key] * 100, "%", context={"per_thread": spread.get(key, {}),
                                                                    "threads": len(per)}))
    io_totals = _io_totals(s, others, ru)
    for key, name in (("rchar", "app.io.read"), ("wchar", "app.io.write"),
                      ("read_bytes", "app.io.read_device"), ("write_bytes", "app.io.write_device")):
        if key in io_totals:
            metrics.append(_m(name, io_totals[key] / 1e6, "MB", context={"source": _io_source(key, ru)}))

    sure = "high" if s.samples >= SURE_SAMPLES and s.schedstat else "low"
    conc = profile_competing.concurrency(s, cpus)
    breakdown["runnable"] = conc
    bounds, findings, pending = _bounds(total, shares, per, s, ru, wall_s, cpus, sure, io_totals, conc, competing)
    if io_totals:
        breakdown["io_totals"] = io_totals          # device figures for analysis/profile_ceilings.py
    if competing:
        breakdown["competing_load"] = [{"title": f.title, "evidence": f.evidence, **f.data} for f in competing]
    if io:
        breakdown["io_calls"] = io
        io_s = sum(io.get(c, {}).get("ns", 0) for c in ("read", "write", "meta", "sync")) / 1e9
        b, f, m = io_bound(io, total.life_s, wall_s, profile_files.busiest(files or {}, io_s))
        # Time inside I/O calls cuts across the split: a thread waits for the device off any CPU, and
        # copies and walks the file system on one, in system time. So at most the system time of the
        # I/O time was on a CPU: what is left on a CPU outside I/O is on - min(io, system); where that
        # (or the waiting outside I/O) falls under its threshold, that part is the I/O's, not a bound.
        system = ru.system_s / total.life_s if ru and total.life_s else shares.get("on_cpu", 0.0)
        if b and b[0].share >= 0.8 * shares.get("off_cpu", 0.0):
            bounds = [x for x in bounds if x.bound != "waiting"]
            findings = [x for x in findings if x.id != "profile.waiting"]
        if b and (b[0].share >= 0.8 * shares.get("on_cpu", 0.0) or
                  shares.get("on_cpu", 0.0) - min(b[0].share, system) < ON_CPU):
            bounds = [x for x in bounds if x.bound != "cpu"]
            findings = [x for x in findings if x.id not in ("profile.cpu", "profile.single_thread")]
        bounds, findings, metrics = b + bounds, f + findings, metrics + m
        bounds.sort(key=lambda x: -(x.share or 0.0))
        pending = pending and any(x.bound == "cpu" for x in bounds)
    outside_mpi = ""
    if mpi and mpi[3]:
        metrics, bounds, findings, outside_mpi = _with_mpi(mpi, shares, metrics, bounds, findings)
        pending = pending and bool(outside_mpi)       # the split's "cpu" bound outlived MPI's share
        breakdown["mpi"] = mpi[3]
    counted = verdict is not None and bool((counters or {}).get("available"))
    bounds, findings, decided = profile_counters.settle(bounds, findings, verdict, counted, pending, outside_mpi)
    if decided and counted:
        breakdown["counters_verdict"] = decided
    if counters:
        breakdown["counters"] = counters
        metrics, findings = metrics + _counter_metrics(counters), findings + _counter_findings(counters)
    if sup:
        words = critical_path(s, sup, per)
        for x in bounds:
            x.evidence += words
    return metrics, bounds, findings, breakdown


def _with_mpi(mpi: tuple, shares: Dict[str, float], metrics, bounds, findings):
    """MPI time cuts across the split as I/O time does, and more: MPI libraries poll by
    default, so a rank waiting for a message is on a CPU. The ranks' time in MPI (a share of
    their life, as the split's) is taken from their time on a CPU first (the rest from off
    any CPU); MPI_Init and MPI_Finalize, mostly waiting for the other ranks and the launcher,
    from off any CPU first. The CPU bound keeps only what is left, and goes when that is under
    ON_CPU; the waiting bound likewise under OFF_CPU. The fourth value: the share outside MPI
    in words, for the "cpu" bound's evidence (analysis/profile_counters.settle)."""
    m, b, f, summary = mpi
    life = summary.get("life_share") or {}
    in_mpi = (life.get("mpi") or summary.get("share") or {}).get("mean", 0.0)
    startup = (life.get("startup") or {}).get("mean", 0.0)
    on, off = shares.get("on_cpu", 0.0), shares.get("off_cpu", 0.0)
    off_left = max(0.0, off - max(0.0, in_mpi - on))
    outside_off = max(0.0, off_left - startup)
    outside_on = max(0.0, on - in_mpi - max(0.0, startup - off_left))
    kept, clause = [], ""
    for x in bounds:
        if x.bound == "cpu":
            if outside_on < ON_CPU:
                continue
            x, clause = replace(x, share=outside_on), f"; outside MPI: {outside_on:.0%}"
        if x.bound == "waiting" and outside_off < OFF_CPU:
            continue
        kept.append(x)
    dropped = {x.bound for x in bounds} - {x.bound for x in kept}
    gone = {"cpu": ("profile.cpu", "profile.single_thread"), "waiting": ("profile.waiting",)}
    findings = [x for x in findings if not any(x.id in gone[k] for k in dropped)]
    bounds = sorted(b + kept, key=lambda x: -(x.share or 0.0))
    if not bounds:
        kind, share = max((("cpu", outside_on), ("waiting", outside_off), ("mpi", in_mpi)), key=lambda x: x[1])
        bounds = [Bound("application", kind, share,
                        f"no class dominates: on a CPU outside MPI {outside_on:.0%}, off any CPU outside MPI "
                        f"{outside_off:.0%}, inside MPI {in_mpi:.0%} of the ranks' time",
                        {"on_cpu_outside_mpi": outside_on, "off_cpu_outside_mpi": outside_off, "mpi": in_mpi})]
    return metrics + m, bounds, f + findings, clause


COUNTER_METRICS = (("ipc", "app.counters.ipc", "instructions/cycle"),
                   ("llc_load_misses_per_kilo_instruction", "app.counters.llc_mpki", "misses/1000 instructions"),
                   ("backend_stall_share", "app.counters.backend_stalls", "%"),
                   ("memory_bandwidth_min_bytes_per_s", "app.counters.memory_bandwidth_min", "GB/s"))


def _counter_metrics(counters: Dict[str, Any]) -> List[Metric]:
    out = []
    derived = counters.get("derived") or {}
    for key, name, unit in COUNTER_METRICS:
        d = derived.get(key)
        if not d or d.get("value") is None:
            continue
        v = d["value"] * 100 if unit == "%" else d["value"] / 1e9 if unit == "GB/s" else d["value"]
        out.append(Metric.measured(name, [v], unit, better=LOWER,
                                   context={"how": d.get("how", ""), **({"note": d["note"]} if d.get("note") else {})}))
    return out


def _counter_findings(counters: Dict[str, Any]) -> List[Finding]:
    if counters.get("available"):
        return []
    return [Finding(id="profile.counters", status=SKIPPED,
                    title="Hardware counters: not available, so compute and memory are not told apart",
                    evidence=counters.get("why", ""),
                    why="Cycles, instructions and cache misses say whether time on a CPU is spent computing or "
                        "waiting for memory; without them the profile rests on /proc and the interposer.",
                    fix="On bare metal, or a VM with a virtual PMU (KVM: -cpu host,pmu=on; VMware: vPMC), with "
                        "kernel.perf_event_paranoid <= 2 or CAP_PERFMON.",
                    data={"why": counters.get("why", "")})]


def _bounds(total: Split, shares: Dict[str, float], per, s: Sampled, ru: Optional[Rusage], wall_s: float,
            cpus: int, sure: str, io: Dict[str, int], conc: Optional[Dict[str, Any]] = None,
            competing: Sequence[Finding] = ()) -> Tuple[List[Bound], List[Finding], bool]:
    """The bounds of the split. Waiting for a CPU is the program's own oversubscription only
    where its runnable threads outnumbered its CPUs at the same samples; otherwise other load
    held the CPUs (named from ``competing``), that time counts as wanting a CPU (the "cpu"
    bound takes on + runq), and a finding says the split is disturbed. The third value: whether
    there is a "cpu" bound whose words wait for the counters' (analysis/profile_counters.settle)."""
    if not shares:
        why = "the program ended before the first sample" if not s.threads else "no thread lived long enough"
        return ([Bound("application", "unknown", None, why)],
                profile_competing.findings(competing, None, {}, conc or {}), False)
    conc = conc or {"cpus": cpus, "samples": 0}
    on, runq, off = shares["on_cpu"], shares["runq"], shares["off_cpu"]
    threads = len(per)
    own = profile_competing.own_oversubscription(conc, shares) if runq >= OVERSUBSCRIBED else None
    cpus = conc.get("cpus") or cpus
    at_once = (f", at most {conc['max']} runnable at once (mean {conc['mean']:.2g})" if conc.get("samples") else "")
    words = (f"{threads} thread{'s' if threads != 1 else ''}{at_once} on {cpus} CPU{'s' if cpus != 1 else ''} for "
             f"{wall_s:.3g} s: on a CPU {on:.0%}, waiting for a CPU {runq:.0%}, off any CPU {off:.0%} of their "
             f"time ({total.life_s:.3g} thread-seconds; {s.samples} samples, confidence {sure})")
    data = {"shares": shares, "threads": threads, "cpus": cpus, "confidence": sure, "runnable": conc}
    bounds, findings = [], []
    # the wait is not the program's own threads': they never outnumbered its CPUs, or no sample
    # saw them runnable while other processes are known to have competed
    others = runq >= OVERSUBSCRIBED and (own is False or (own is None and bool(competing)))
    if runq >= OVERSUBSCRIBED and not others:
        bounds.append(Bound("application", "oversubscribed", runq, words, data))
        findings.append(profile_competing.oversubscribed(runq, own, conc, cpus, words + _switches(s), data))
    findings += profile_competing.findings(competing, others and runq, shares, conc)
    demand = on + runq if others else on        # waiting for a CPU others held: time it wanted one
    if demand >= ON_CPU:
        bounds.append(Bound("application", "cpu", demand,
                            words + (f"; waiting for a CPU {runq:.0%} that other load held" if others else ""),
                            data))
        findings.append(Finding(
            id="profile.cpu", status=OK,
            title=(f"Wanted a CPU {demand:.0%} of the time (on one {on:.0%}, waiting for one other load held "
                   f"{runq:.0%}): CPU-bound" if others else f"On a CPU {on:.0%} of the time: CPU-bound"),
            evidence=words, data=data))
        if threads == 1 and cpus > 1:
            findings.append(Finding(
                id="profile.single_thread", status=WARN,
                title=f"One thread did the work on a node where the program may use {cpus} CPUs",
                evidence=words,
                why="A CPU-bound program on one thread leaves the other CPUs idle.",
                fix="Parallelise it (OpenMP, threads, MPI ranks) or run several instances at once.", data=data))
    if off >= OFF_CPU:
        bounds.append(Bound("application", "waiting", off, words, data))
        findings.append(Finding(
            id="profile.waiting", status=WARN,
            title=f"Off any CPU {off:.0%} of the time: blocked or sleeping (I/O, locks, messages, sleep)",
            evidence=words + _switches(s) + _io_words(io, wall_s),
            why="Time off the CPU is time the program waits for something; which thing, /proc does not "
                "say: the I/O and MPI interposer does.",
            fix="Find what it waits for: I/O (its read and write volume above), a lock, MPI messages, or "
                "sleeps; overlap the wait with work or remove it.", data=data))
    if not bounds:
        kinds = (("cpu", demand), ("waiting", off)) if others else \
            (("cpu", on), ("waiting", off), ("oversubscribed", runq))
        kind, share = max(kinds, key=lambda x: x[1])
        bounds.append(Bound("application", kind, share, words + "; no class dominates", data))
    bounds.sort(key=lambda b: -(b.share or 0.0))
    return bounds, findings, demand >= ON_CPU


def _switches(s: Sampled) -> str:
    vol = sum(p.voluntary for p in s.processes.values())
    inv = sum(p.involuntary for p in s.processes.values())
    return f"; context switches: {vol} voluntary (blocking), {inv} involuntary (preempted)" if vol or inv else ""


def _io_words(io: Dict[str, int], wall_s: float) -> str:
    if "rchar" not in io:
        return ""
    words = (f"; read {io['rchar'] / 1e6:.3g} MB and wrote {io.get('wchar', 0) / 1e6:.3g} MB through system calls "
             f"({io.get('read_bytes', 0) / 1e6:.3g} MB and {io.get('write_bytes', 0) / 1e6:.3g} MB at the device")
    cached = io["rchar"] - io.get("read_bytes", io["rchar"])
    if "read_bytes" in io and cached > 0:
        words += (f"; the rest of the reads, {cached / 1e6:.3g} MB, came from the page cache or from pipes, "
                  "sockets and terminals")
    return words + ")"


IO_KEYS = ("rchar", "wchar", "read_bytes", "write_bytes")


def _io_totals(s: Sampled, others: Sequence[Record] = (), ru: Optional[Rusage] = None) -> Dict[str, int]:
    """The program's /proc/PID/io read at its exit (``ru.io``: every process of its tree that
    was waited for, each once), else the last sample of each sampled process summed (which
    misses what came after the last sample and counts a reaped child twice: the kernel adds
    it to its parent's); and, from their records' proc lines, the processes the sampler did
    not watch. proc.c writes the four keys together: a record with some of them lost the
    others to damage, and those totals are unknown (left out)."""
    out: Dict[str, int] = {}
    unknown = set()
    records = [{k: getattr(ln, k) for k in IO_KEYS if getattr(ln, k) is not None}
               for rec in others for ln in rec.of("proc", ProcSummary)]
    mine = [{k: v for k, v in ru.io.items() if k in IO_KEYS}] if ru is not None and ru.io else \
        [p.io for p in s.processes.values()]
    for io in mine + records:
        for k, v in io.items():
            out[k] = out.get(k, 0) + v
    for io in records:
        if io:
            unknown.update(set(IO_KEYS) - set(io))
    return {k: v for k, v in out.items() if k not in unknown}


def _io_source(key: str, ru: Optional[Rusage]) -> str:
    """How an I/O total was taken, in words: rchar/wchar count the bytes of read and write
    system calls (the page cache included), read_bytes/write_bytes those sent to a device."""
    what = "system-call bytes" if key in ("rchar", "wchar") else "device bytes"
    if ru is not None and ru.io:
        return f"/proc/PID/io {key} ({what}) of the program read once at its exit, every descendant it waited for " \
               "included"
    return f"/proc/PID/io {key} ({what}), each process's last sample summed (not read at the exit)"


def _spread(vals: List[float]) -> Dict[str, float]:
    return {"min": min(vals), "mean": sum(vals) / len(vals), "max": max(vals)} if vals else {}


def _m(name: str, value: Optional[float], unit: str, context: Optional[Dict[str, Any]] = None) -> Metric:
    if value is None:
        return Metric(name=name, value=None, unit=unit, better=LOWER, context=context or {})
    return Metric.measured(name, [value], unit, better=LOWER, context=context or {})
