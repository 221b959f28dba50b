"""The terminal page of ``ceiling profile``: how the program ended, where its time
went (on a CPU, waiting for a CPU, off any CPU; min / mean / max over its
threads), the bound with its evidence, the findings, and what profiling cost."""
from __future__ import annotations

from typing import List, Optional, Tuple

from ..results.model import Run
from ..results.profile import Profile, Supervisor  # noqa: F401 (Supervisor: a type in supervisors_text)
from ..results.profile_cost import Overhead
from ..results.profile_mpi import Mpi, MpiRank
from ..results.profile_run import Comparison, FileRecord, Files, IoClass, Launch, Sampler  # noqa: F401
from . import terminal as T


def _n(v, spec: str) -> str:
    """``v`` formatted by ``spec``, or "unknown" (right-aligned as asked) where a figure was not
    recorded (a document may hold null where a number was not finite)."""
    if v is None:
        width = "".join(c for c in spec if c.isdigit() or c == ".").split(".")[0] if spec[:1] == ">" else ""
        return format("?", f">{width}") if width else "unknown"
    return format(v, spec)


@T._printable_run
def render(run: Run, *, color: bool = False, width: int = 100) -> str:
    st = T._Style(color)
    app = run.application
    verb = "trace" if any(f.id == "trace.recorded" for f in run.findings) else "profile"
    lines = [st(f"ceiling {run.tool_version} {verb} - {run.host} - {run.started.replace('T', ' ')}", "bold")]

    def fact(key: str, text: str) -> None:
        lines.extend(T._wrap(text, width, " " * 12, f"  {key:<10}"))

    if app is None:
        return "\n".join(lines + ["  no program was run"])
    prof = app.profile or Profile()
    fact("Command", " ".join(app.command))
    ended = (f"killed by {app.signal}" if app.signal else
             f"exit {app.exit_status}" if app.exit_status is not None else "did not finish")
    fact("Ended", f"{ended} after {app.wall_s:.3g} s" if app.wall_s is not None else ended)
    said = signals_text(prof.launch)
    if said:
        fact("Signals", said)
    m = {x.name: x for x in run.metrics}
    cpus = prof.cpus
    if "app.cpu.user" in m:
        used = m.get("app.cpu.used")
        fact("CPU time", f"user {_n(m['app.cpu.user'].value, '.3g')} s, system {_n(m['app.cpu.system'].value, '.3g')} s"
             + (f": {used.value:.2f} of the {cpus} CPUs it may use, on average" if used and used.value is not None
                else "")
             + (f"; peak resident memory {_n(m['app.rss.peak'].value, '.4g')} MiB" if "app.rss.peak" in m else ""))
    def mb(name: str) -> str:
        return f"{m[name].value:.4g}" if name in m and m[name].value is not None else "-"
    if "app.io.read" in m or "app.io.write" in m:
        fact("I/O", f"read {mb('app.io.read')} MB, wrote {mb('app.io.write')} MB through system calls"
             + (f" ({mb('app.io.read_device')} MB and {mb('app.io.write_device')} MB at the device)"
                if "app.io.read_device" in m or "app.io.write_device" in m else ""))
    calls = io_calls_text(prof.io_calls)
    if calls:
        fact("I/O calls", calls)
    if run.partial:
        lines.append(st(f"  PARTIAL: {run.partial_reason}", "yellow"))

    lines += ["", *_breakdown(run, prof, st)]
    if prof.files and prof.files.shown:
        lines += ["", *_files(prof.files, st, width)]
    if prof.mpi:
        lines += ["", *_mpi(prof.mpi, st, width)]
    if prof.wrapped:
        lines.extend(T._wrap(wrapped_text(prof), width, "   ", "  "))
    if prof.regions or prof.regions_lost:
        lines += ["", st("Regions (ceiling_region_begin/end)", "bold")]
        for text in regions_text(prof):
            lines.extend(T._wrap(text, width, "    ", "  "))
    if prof.ceilings:
        lines += ["", st("Against this node's ceilings", "bold")]
        for c in prof.ceilings:
            lines.extend(T._wrap(ceiling_text(c), width, "    ", "  "))
    for b in run.analysis.bounds[:3]:
        lines.append("")
        share = f" ({b.share:.0%} of the time)" if b.share is not None else ""
        lines.extend(T._wrap(f"Bound: {b.bound}{share} - {b.evidence}", width, "    ", "  "))
    if run.findings:
        lines += ["", T.findings(run, color=color, width=width)]
    lines += ["", *T._wrap(cost_text(run, prof), width, "    ", "  ")]
    return "\n".join(lines)


REGIONS_SHOWN = 10


def regions_text(prof: Profile) -> List[str]:
    """One line per named region, the longest first (REGIONS_SHOWN of them): its calls and its
    time from begin to end summed over threads and processes (thread-seconds: 16 threads in a
    region for 1 s are 16 s), per process, and the most in one process."""
    out = []
    for g in prof.regions[:REGIONS_SHOWN]:
        per = g.ns / max(g.processes, 1) / 1e9
        out.append(f"{g.name}: {g.calls} call{'s' if g.calls != 1 else ''}, {g.ns / 1e9:.4g} thread-seconds in "
                   f"{g.processes} process{'es' if g.processes != 1 else ''} ({per:.4g} s per process; "
                   f"at most {g.max_ns / 1e9:.4g} s in one)")
    if len(prof.regions) > REGIONS_SHOWN:
        out.append(f"and {len(prof.regions) - REGIONS_SHOWN} more in the JSON")
    if prof.regions_lost:
        out.append(f"{prof.regions_lost} more region name{'s' if prof.regions_lost != 1 else ''} past the "
                   "interposer's table of 128 per process: not counted")
    return out


def io_calls_text(io: "dict[str, IoClass]") -> str:
    """The interposer's I/O calls by class (analysis/profile_io.io_calls), one clause each:
    the storage classes, then ``other`` (pipes, terminals, sockets, /dev/null); "" for none."""
    parts = []
    for cls in ("read", "write", "meta", "sync", "copy", "other"):
        x = io.get(cls)
        if not x or not x.calls:
            continue
        mb = f", {x.bytes / 1e6:.4g} MB" if cls in ("read", "write", "copy", "other") else ""
        name = "other (not storage)" if cls == "other" else cls
        parts.append(f"{name} {x.calls}{mb}, {x.ns / 1e9:.3g} s")
    return "; ".join(parts)


def supervisors_text(sup: "List[Supervisor]") -> str:
    """The processes whose waiting for their children was left out of the split
    (analysis/profile_supervisors.py), the first four named."""
    named = ", ".join(f"{x.process}'s {x.waited_s:.3g} s" for x in sup[:4]) + (
        f" and {len(sup) - 4} more" if len(sup) > 4 else "")
    one = len(sup) == 1
    return (f"left out: {named} waiting while {'its' if one else 'their'} children ran (on a CPU under 10% of it); "
            f"what {'it' if one else 'they'} did alone, before, between and after, is counted")


def signals_text(launch: "Optional[Launch]") -> str:
    """The signals ceiling got, in words: while the program ran (passed on to it or not) and,
    noted only, before it started or after it ended; "" for none."""
    if launch is None:
        return ""
    during = []
    for x in launch.signals:
        how = ("passed on to the program" if x.passed_on else
               "sent to the process group: the program had it" if x.sent_to == "the process group" else
               f"not passed on: {x.why}" if x.why else "not passed on")
        during.append(f"{x.signal} ({how})")
    outside = [f"{x.signal} {x.when}" for x in launch.signals_outside]
    parts = ([f"while it ran: {', '.join(during)}"] if during else []) + (
        [f"outside its run, noted only (nothing was stopped): {', '.join(outside)}"] if outside else [])
    return "; ".join(parts)


def wrapped_text(prof: Profile) -> str:
    """What a report made by rank 0's ceiling covers, when every rank ran under one."""
    rec = prof.from_records
    split = ("the split above is rank 0's process, sampled, and the other ranks' threads as the kernel counted "
             f"them at their MPI_Finalize ({rec.processes} process(es), {rec.threads} thread(s))"
             if rec and rec.processes else "the split above is rank 0's process only")
    if rec and rec.without_proc_lines:
        split += f"; {rec.without_proc_lines} process(es) sent no thread times"
    size = prof.wrapped.size if prof.wrapped else None     # None: the launcher did not say how many (PMIx)
    return (f"(each {f'of the {size} ranks' if size else 'rank'} ran under a ceiling of its own; this is rank 0's: the "
            f"MPI and I/O figures are every rank's, gathered at MPI_Finalize; {split})")


def _breakdown(run: Run, prof: Profile, st) -> List[str]:
    shares = prof.shares
    if not shares:
        return ["  Where the time went: unknown (the program ended before the first sample of /proc)"]
    per = prof.per_thread
    n = prof.threads or 0
    out = [st(f"Where the time went ({prof.thread_seconds or 0:.3g} thread-seconds over {n} "
              f"thread{'s' if n != 1 else ''}; per thread min / mean / max)", "bold")]
    for key, words in (("on_cpu", "on a CPU"), ("runq", "waiting for a CPU"), ("off_cpu", "off any CPU")):
        p = getattr(per, key) if per else None
        spread = f"{_n(p.min, '.0%')} / {_n(p.mean, '.0%')} / {_n(p.max, '.0%')}" if p else "-"
        out.append(f"  {words:<20} {_n(getattr(shares, key), '>5.0%')}   {spread}")
    if prof.launchers:
        out.append(f"  (left out: {', '.join(prof.launchers)}, which only started and waited for the others)")
    if prof.supervisors:
        out.append(f"  ({supervisors_text(prof.supervisors)})")
    if prof.idle_threads:
        idle = prof.idle_threads
        out.append(f"  (left out: {len(idle)} idle helper thread{'s' if len(idle) != 1 else ''} (on a CPU under 1% "
                   f"of their life: {', '.join(idle[:4])}{', ...' if len(idle) > 4 else ''}))")
    if prof.schedstat is False:
        out.append("  (this kernel reports no run-queue delays (schedstats): waiting for a CPU is counted as off "
                   "any CPU)")
    if prof.unsampled_cpu_s:
        out.append(f"  ({prof.unsampled_cpu_s:.3g} s of CPU time from threads that lived between two samples: "
                   "counted on a CPU, from the exit rusage)")
    return out


FILE_ROWS = 5               # files on the terminal page (the HTML report shows all the JSON keeps)


def file_requests(f: FileRecord) -> Tuple[int, int]:
    """(requests, bytes) of a file that reached the kernel: its POSIX calls, and for its stdio
    calls what their buffers sent; a record of an older interposer has only its calls."""
    if None in (f.kernel_reads, f.kernel_writes, f.kernel_read_bytes, f.kernel_write_bytes):
        return f.reads + f.writes, f.read_bytes + f.write_bytes
    return f.kernel_reads + f.kernel_writes, f.kernel_read_bytes + f.kernel_write_bytes


def file_cells(f: FileRecord) -> List[str]:
    """A file's row, as the terminal and the HTML table show it: seconds, MB the program read and
    wrote, its read and write calls, the requests they made of the kernel and their mean size,
    the calls' random and unaligned shares, processes."""
    n = f.reads + f.writes
    req, sent = file_requests(f)
    return [_n(f.time_s, ".3g"), f"{f.read_bytes / 1e6:.4g}", f"{f.write_bytes / 1e6:.4g}", str(n), str(req),
            f"{sent / req / 1024:.3g}" if req else "-", f"{f.random / n:.0%}" if n else "-",
            f"{f.unaligned / n:.0%}" if n and f.blksize else "-", str(f.processes)]


FILE_HEADS = ("seconds", "read MB", "written MB", "calls", "requests", "KiB/req", "random", "unaligned", "procs")


def file_notes(files: Files, rows: int) -> List[str]:
    """What the file table leaves out."""
    out = []
    listed = len(files.shown) - rows
    if listed > 0:
        out.append(f"{listed} more file(s) in the HTML report and the JSON")
    rest = files.rest
    if rest and rest.files:
        out.append(f"{'and ' if listed > 0 else ''}{rest.files} more with less time, summed: "
                   f"{rest.bytes / 1e6:.4g} MB in {_n(rest.time_s, '.3g')} s")
    if files.lost:
        cap = f"over the interposer's {files.capacity} per process" if files.capacity else "no room left"
        out.append(f"{files.lost} file(s) had no record ({cap}): their I/O is in the totals only")
    return out


def _files(files: Files, st, width: int) -> List[str]:
    shown = files.shown[:FILE_ROWS]
    out = [st(f"Files ({len(shown)} of {files.count}, by time inside their calls: open, read, write, fsync, close)",
              "bold"),
           *T._wrap("calls: the program's reads and writes (POSIX and stdio); requests: those that reached the "
                    "kernel (for stdio, what its buffers sent, estimated), KiB/req their mean size; random: calls "
                    "not where the previous one ended; unaligned: calls off the file system's block", width, "  ",
                    "  "),
           "  " + " ".join(f"{h:>{max(7, len(h))}}" for h in FILE_HEADS) + "  path"]
    for f in shown:
        out.append("  " + " ".join(f"{c:>{max(7, len(h))}}" for c, h in zip(file_cells(f), FILE_HEADS))
                   + f"  {f.path}")
    out += [f"  ({n})" for n in file_notes(files, len(shown))]
    return out


def ceiling_text(c: Comparison) -> str:
    """One comparison of analysis/profile_ceilings.py in words."""
    prog = f"{c.program:.4g} {c.unit}" if c.program is not None else "unknown"
    head = f"{c.what}: {prog} ({c.program_how})"
    if c.ceiling is None:
        return f"{head}; {c.why}"
    if c.ratio is not None:              # a time: the program's is this many times the node's
        return f"{head}, {c.ratio:.3g}x this node's {c.ceiling:.4g} {c.unit} ({c.source})"
    share = f", {c.share:.0%} of it" if c.share is not None else ""
    return f"{head}; this node: {c.ceiling:.4g} {c.unit}{share} ({c.source})"


MAX_RANK_ROWS = 16           # more ranks than this: the table shows the extremes only


def mpi_rank_rows(mpi: Mpi) -> List[MpiRank]:
    """The ranks a table shows: all of them, or beyond MAX_RANK_ROWS the three with the most
    and the three with the least time outside MPI (where imbalance shows)."""
    per = mpi.per_rank
    if len(per) <= MAX_RANK_ROWS:
        return per
    by = sorted(per, key=lambda r: r.run_s - r.mpi_s)
    return by[:3] + by[-3:]


def rank_cpu(r: MpiRank) -> tuple:
    """A rank's threads on a CPU and waiting for one, as shares of their lives ("-" unknown)."""
    cpu = r.cpu
    return tuple(f"{getattr(cpu, k):.0%}" if cpu and getattr(cpu, k) is not None else "-"
                 for k in ("on_cpu", "runq"))


def mpi_headline(mpi: Mpi) -> str:
    sh = mpi.share
    eff = [f"{words} {v:.0%}" for v, words in ((mpi.load_balance, "load balance"),
                                                 (mpi.communication_efficiency, "communication efficiency"),
                                                 (mpi.parallel_efficiency, "parallel efficiency"))
           if v is not None]
    library = " ".join(str(mpi.library or mpi.family or "").split(",")[0].split())
    start = mpi.startup_s.mean if mpi.startup_s else None
    start = f"; MPI_Init + MPI_Finalize {start:.3g} s per rank, outside the run" if isinstance(start, float) else ""
    unknown = mpi.finalize_unknown.ranks if mpi.finalize_unknown else []
    if start and unknown:
        start += (f" (MPI_Finalize counted, its time unknown, for rank{'s' if len(unknown) != 1 else ''} "
                  f"{', '.join(map(str, unknown[:8]))}{', ...' if len(unknown) > 8 else ''}: gathered inside it)")
    return (f"{mpi.ranks} rank(s) of {mpi.size}, {library}: "
            f"inside MPI {_n(sh.mean if sh else 0, '.0%')} of their run (min {_n(sh.min if sh else 0, '.0%')}, max "
            f"{_n(sh.max if sh else 0, '.0%')})" + (f"; {', '.join(eff)} (POP)" if eff else "") + start)


def _mpi(mpi: Mpi, st, width: int) -> List[str]:
    out = [st("MPI", "bold")]
    out += T._wrap(mpi_headline(mpi), width, "    ", "  ")
    rows = mpi_rank_rows(mpi)
    out.append(f"  {'rank':>6} {'run s':>8} {'in MPI':>7} {'p2p s':>8} {'wait s':>8} {'coll s':>8} {'MPI-IO s':>9}"
               f" {'on CPU':>7} {'CPU wait':>8}")
    for r in rows:
        g = r.groups
        share = r.mpi_s / r.run_s if r.run_s and r.mpi_s is not None else None
        on, runq = rank_cpu(r)
        out.append(f"  {r.rank:>6} {_n(r.run_s, '>8.3g')} {_n(share, '>7.0%')} {_n(g.get('p2p', 0), '>8.3g')} "
                   f"{_n(g.get('wait', 0), '>8.3g')} {_n(g.get('coll', 0), '>8.3g')} {_n(g.get('io', 0), '>9.3g')} "
                   f"{on:>7} {runq:>8}")
    if len(rows) < len(mpi.per_rank):
        out.append(f"  (the 3 ranks with the most and the 3 with the least time outside MPI, of {mpi.ranks})")
    top = [f for f in mpi.functions if f.fn not in ("MPI_Init", "MPI_Init_thread")][:5]
    if top:
        out += T._wrap("Top calls (all ranks): " + "; ".join(
            f"{f.fn} {f.ns / 1e9:.3g} s in {f.calls} calls"
            + (f", {f.bytes / f.calls / 1024:.3g} KiB per call" if f.bytes and f.calls else "")
            for f in top), width, "    ", "  ")
    return out


def cost_text(run: Run, prof: Optional[Profile] = None) -> str:
    """What profiling cost, in one paragraph (the terminal page and the HTML section)."""
    prof = prof or (run.application.profile if run.application else None) or Profile()
    s = prof.sampler or Sampler()
    share = s.share_of_one_cpu
    parts = [f"Cost of profiling: the /proc sampler used {s.cpu_s or 0:.3g} s of CPU"
             + (f" ({share:.2%} of one CPU over the run)" if share is not None else "")
             + f", {prof.samples or 0} samples at {s.interval_s or 0:g} s"]
    ip = prof.interposer
    ov = (run.application.overhead if run.application else None) or Overhead()
    if ip and ip.used:
        text = (f"the interposer wrote {ip.records} record(s) (modules: "
                f"{', '.join(ip.modules) or 'none'}) and counted {ov.calls or 0} POSIX and stdio calls")
        if ov.per_call_ns is not None:
            frac = ov.fraction
            per = (f"{ov.per_call_ns:.3g} ns per call" if ov.per_call_ns >= 1 else
                   "under 1 ns per call (below what the calibration resolves: the two ways' difference was noise)")
            text += (f"; at {per} (measured before the run: {ov.how}) "
                     f"they cost about {ov.interposer_s or 0:.3g} s"
                     + (f", {frac:.2%} of the run in its busiest process" if frac is not None else ""))
        elif ov.why:
            text += f"; its cost per call is unknown: {ov.why}"
        if ov.mpi_calls:
            text += (f"; and {ov.mpi_calls} MPI calls, each with a datatype-size query more than an I/O call "
                     "(benchmarks/profile_overhead.py measures a barrier loop)")
        parts.append(text)
    elif ip:
        parts.append(f"no interposer: {ip.why}")
    ex = prof.experiments
    if ex and not ex.times_s:      # not run (the program failed)
        parts.append(f"--experiments: {ex.why or 'not run'}")
    elif ex:
        # the working-set runs too: the default page size's, and the other's where its data lies beyond the cache
        runs = sum(len(v) for v in ex.times_s.values()) + (1 if ex.footprint else 0) + (1 if ex.footprint_pages else 0)
        parts.append(f"--experiments: the program ran {runs} more times beside co-runners on CPU(s) "
                     f"{','.join(str(c) for c in ex.corunner_cpus)}, {ex.cost_s or 0:.3g} s in all"
                     + (f" ({ex.why})" if ex.why else ""))
        sc = ex.scaling
        if sc and sc.counts:
            runs = sum(len(v) for v in sc.times_s.values())
            parts.append(f"and {runs} times with OMP_NUM_THREADS = {', '.join(str(n) for n in sc.counts)}, "
                         f"{sc.cost_s or 0:.3g} s" + (f" ({sc.why})" if sc.why else ""))
    plain = ov.uninstrumented
    if plain and plain.slowdown is not None:
        spread = plain.spread
        parts.append(f"--overhead: the program alone took {plain.wall_s:.3g} s, profiled "
                     f"{plain.profiled_wall_s:.3g} s ({plain.slowdown:+.1%}"
                     + (f"; pairs {spread.min:+.1%} to {spread.max:+.1%}, medians of {plain.rounds} "
                        "interleaved runs each" if spread else "") + ")")
    elif plain:
        parts.append(f"--overhead: not measured ({plain.why})")
    return "; ".join(parts)
