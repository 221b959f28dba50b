"""Per-file I/O of a profiled program: the interposer's "file" lines (csrc/interpose/files.c)
merged over its processes, and what they say.

A file is (host, absolute path), as Darshan's record id is the path: the processes of one
node that use one path add up into one entry, a file deleted and created again under its
path stays one entry that counts the re-creations, and two records of one path made by two
threads at once merge. Each entry has its opens, the requests and bytes read and written,
the time inside those calls (opens and closes, reads, writes, fsync), how many accesses did
not follow the previous one (random) and how many started off the file system's block
(unaligned), which processes used it and how many of them had it open at once (from each
process's first open and last close), the O_SYNC, O_DSYNC and O_DIRECT opens and the time of
the writes through them, and what was mapped (mmap). The pattern findings name a file only
where it matters: it took at least ``FILE_SHARE`` of the program's time in I/O calls and at
least ``MIN_FILE_S``; the synchronous-open, mapping and io_uring/AIO findings say what the
calls' counts leave out. The records are typed already (probes/interpose_record.py checks
them when it reads; interpose_lines.File is a file line), and a path is keyed by its bytes.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..probes.interpose_lines import File, FilesSummary, Record
from ..results.model import OK, WARN, Finding

SHOWN = 20                   # files kept in the JSON (by time, then bytes); the rest are summed
FILE_SHARE = 0.10            # a finding names a file that took this share of the I/O calls' time
MIN_FILE_S = 0.01            # ... and at least this long
MIN_REQUESTS = 100           # a pattern needs this many requests to be one
RANDOM_SHARE = 0.5           # random: at least half the requests did not follow the previous one
UNALIGNED_SHARE = 0.5        # unaligned: at least half started off a block
MAPPED_BYTES = 1 << 20       # a mapping finding names files with at least this much mapped
SUMS = ("opens", "meta_ns", "reads", "read_bytes", "read_ns", "writes", "write_bytes", "write_ns", "random",
        "unaligned",
        "syncs", "sync_ns", "flagged_writes", "flagged_write_ns", "maps", "map_bytes", "recreated")
# files.c's stdio part of reads and writes (library calls) and what the streams' buffers asked of the kernel
STDIO = ("stdio_reads", "stdio_read_bytes", "stdio_writes", "stdio_write_bytes", "stdio_kernel_reads",
         "stdio_kernel_read_bytes", "stdio_kernel_writes", "stdio_kernel_write_bytes")
APIS = ((1, "POSIX"), (2, "stdio"), (4, "MPI-IO"))
OFLAGS = ((2, "O_SYNC"), (1, "O_DSYNC"), (4, "O_DIRECT"))      # files.c's oflags bits
MAP_PROT = ((1, "read"), (2, "write"), (4, "shared"))         # files.c's map_prot bits


def summarise(records: Sequence[Record]) -> Dict[str, Any]:
    """{"count": files, "lost": files without a record, "capacity": records a process can hold,
    "shown": [file, ...] (the SHOWN that took the most time), "rest": {"files", "bytes", "time_s"}
    of the others, "async": {"io_uring": processes, "aio": processes} that set up I/O no wrapper
    counts, "flagged": [file, ...] opened O_SYNC, O_DSYNC or O_DIRECT, "mapped": [file, ...]
    mapped with mmap (both by bytes, at most SHOWN)}; {} when no record has file lines (an
    interposer without the module, or no interposer)."""
    merged: Dict[Tuple, Dict[str, Any]] = {}
    lost, seen, capacity = 0, False, 0
    async_ = {"io_uring": 0, "aio": 0}
    for rec in records:
        if not rec.has("file"):
            continue
        seen = True
        proc = rec.process
        host = proc.host if proc.host is not None else ""
        who = (host, proc.pid)
        # glibc's exit writes the buffers still pending after the record; _exit, a signal or an exec loses them
        flushed = proc.reason == "exit" and proc.by not in ("_exit", "_Exit")
        for ln in rec.iter("file"):
            if isinstance(ln, FilesSummary):
                lost += ln.lost or 0
                capacity = ln.max or capacity
                for k in async_:
                    async_[k] += 1 if getattr(ln, k) else 0
                continue
            if not isinstance(ln, File) or ln.path is None:
                continue
            # the path's bytes, not its text: two names that differ in bytes that are not UTF-8 are two files
            key = (host, getattr(ln.path, "raw", ln.path))
            f = merged.setdefault(key, {"path": str(ln.path), "host": host,
                                        "blksize": ln.blksize or 0, "api": 0, "extent": 0, "oflags": 0,
                                        "map_prot": 0, "processes": {}, "kernel": True,
                                        **{k: 0 for k in SUMS + STDIO}})
            for k in SUMS:
                f[k] += getattr(ln, k) or 0
            # an older interposer's line (file module version 2) has no stdio_ keys: its requests are unknown
            f["kernel"] = f["kernel"] and all(getattr(ln, k) is not None for k in STDIO)
            for k in STDIO:
                f[k] += getattr(ln, k) or 0
            if flushed:
                f["stdio_kernel_writes"] += ln.stdio_pending_writes or 0
                f["stdio_kernel_write_bytes"] += ln.stdio_pending_write_bytes or 0
            for k in ("api", "oflags", "map_prot"):
                f[k] |= getattr(ln, k) or 0
            f["extent"] = max(f["extent"], ln.extent or 0)
            _interval(f["processes"], who, ln)
    if not seen:
        return {}
    files = [_entry(f) for f in merged.values()]
    files.sort(key=lambda f: (-f["time_s"], -(f["read_bytes"] + f["write_bytes"]), f["path"]))
    rest = files[SHOWN:]
    by_bytes = sorted(files, key=lambda f: (-f["write_bytes"], -f["map_bytes"], f["path"]))
    return {"count": len(files), "lost": lost, "capacity": capacity, "shown": files[:SHOWN],
            "rest": {"files": len(rest), "bytes": sum(f["read_bytes"] + f["write_bytes"] for f in rest),
                     "time_s": sum(f["time_s"] for f in rest)},
            "async": async_,
            "flagged": [f for f in by_bytes if f["oflags"]][:SHOWN],
            "mapped": sorted((f for f in files if f["maps"]), key=lambda f: (-f["map_bytes"], f["path"]))[:SHOWN]}


def _interval(processes: Dict[Tuple, List], who: Tuple, ln: File) -> None:
    """Adds a record's open interval and writes to its process's (a process's two records of one
    path, made by two threads at once, are one): [first open, last close, writes], None for a time
    the record does not have (MPI_File_open's records, an older interposer's)."""
    first, last = ln.first_open_ns or None, ln.last_close_ns or None
    if first is not None and last is None:
        last = first                       # opened and closed by calls no wrapper saw
    p = processes.get(who)
    if p is None:
        processes[who] = [first, last, ln.writes or 0]
        return
    p[0] = None if p[0] is None or first is None else min(p[0], first)
    p[1] = None if p[1] is None or last is None else max(p[1], last)
    p[2] += ln.writes or 0


def at_once(processes: Dict[Tuple, List]) -> Tuple[int, int]:
    """(the most processes that had the file open at one time, the most of them at a time one of
    them wrote): intervals overlap when one's first open is before the other's last close; a
    process whose times are unknown is taken to overlap every other."""
    spans = list(processes.values())

    def overlaps(a: List, b: List) -> bool:
        return a[0] is None or b[0] is None or (a[0] <= b[1] and b[0] <= a[1])
    most = max((sum(1 for q in spans if overlaps(p, q)) for p in spans), default=0)
    writing = max((sum(1 for q in spans if overlaps(p, q)) for p in spans if p[2]), default=0)
    return most, writing


def _entry(f: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: v for k, v in f.items() if k not in ("processes", "api", "oflags", "map_prot", "kernel") + STDIO
           and not k.endswith("_ns")}
    # the requests that reached the kernel (what strace counts): the POSIX calls, and in place of the stdio
    # calls what their buffers sent (estimated from the buffers, stdio.c; exact where fully buffered)
    for k in ("reads", "read_bytes", "writes", "write_bytes"):
        out["kernel_" + k] = (f[k] - f["stdio_" + k] + f["stdio_kernel_" + k]) if f["kernel"] else None
    for k in ("meta", "read", "write", "sync", "flagged_write"):
        out[f"{k}_s"] = f[f"{k}_ns"] / 1e9
    out["time_s"] = out["meta_s"] + out["read_s"] + out["write_s"] + out["sync_s"]
    out["processes"] = len(f["processes"])
    out["at_once"], out["writers_at_once"] = at_once(f["processes"])
    out["api"] = [name for bit, name in APIS if f["api"] & bit]
    out["oflags"] = [name for bit, name in OFLAGS if f["oflags"] & bit]
    out["mapped"] = [name for bit, name in MAP_PROT if f["map_prot"] & bit]
    return out


def requests(f: Dict[str, Any]) -> int:
    return f["reads"] + f["writes"]


def describe(f: Dict[str, Any]) -> str:
    """One file in words: what it moved, in what requests, how fast and in what pattern."""
    parts = [f"{f['opens']} opens ({f['meta_s']:.3g} s in opens and closes)"] if f["opens"] else []
    for k, verb in (("read", "read"), ("write", "written")):
        n, b = f[f"{k}s"], f[f"{k}_bytes"]
        kn, kb = f.get(f"kernel_{k}s"), f.get(f"kernel_{k}_bytes")
        if n and kn is not None and kb is not None and (kn, kb) != (n, b):
            # stdio calls: the library calls, and what their buffers sent the kernel
            size = f"{kb / kn / 1024:.3g} KiB" if kn else "-"
            parts.append(f"{b / 1e6:.4g} MB {verb} in {n} call{'s' * (n != 1)}, {kn} request{'s' * (kn != 1)} "
                         f"of {size} to the kernel ({f[f'{k}_s']:.3g} s)")
        elif n:
            parts.append(f"{b / 1e6:.4g} MB {verb} in {n} requests of {b / n / 1024:.3g} KiB "
                         f"({f[f'{k}_s']:.3g} s)")
    if f["syncs"]:
        parts.append(f"{f['syncs']} fsync ({f['sync_s']:.3g} s)")
    if f.get("recreated"):
        parts.append(f"deleted and created again {f['recreated']} times")
    n = requests(f)
    if n:
        parts.append(f"{f['random'] / n:.0%} random")
        if f["blksize"]:
            parts.append(f"{f['unaligned'] / n:.0%} off its {f['blksize']} B blocks")
    who = f"{f['processes']} processes" if f["processes"] > 1 else "1 process"
    if f["processes"] > 1:
        who += f", at most {f['at_once']} at once"
    return f"{f['path']}: " + ", ".join(parts or ["opened only"]) + f"; {who} ({'+'.join(f['api']) or '-'})"


# The per-file patterns: (id, title, which files, why, fix).
PATTERNS = (
    ("profile.file.random", "Random access",
     lambda f: requests(f) >= MIN_REQUESTS and f["random"] >= RANDOM_SHARE * requests(f),
     "Requests that do not follow one another defeat the file system's read-ahead and write-behind; each one "
     "pays a seek or a round trip, so small random requests reach a small part of the storage's bandwidth.",
     "Sort or batch the accesses by offset; read the needed range whole in large requests; with MPI-IO, "
     "collective calls let the library aggregate."),
    ("profile.file.unaligned", "Requests off the file system's blocks",
     lambda f: f["blksize"] >= 4096 and requests(f) >= MIN_REQUESTS and f["unaligned"] >= UNALIGNED_SHARE * requests(f),
     "A write that starts inside a block makes the file system read and rewrite the partial blocks at its ends; "
     "on a parallel file system a request across a stripe boundary takes two servers and two locks.",
     "Start requests at multiples of the block (st_blksize) and size them in multiples of it: pad records, or "
     "gather them into aligned buffers."),
    ("profile.file.shared", "One file written by several processes at once",
     lambda f: f["writers_at_once"] > 1,
     "Writers of one file contend for its locks and metadata; parallel file systems serialise overlapping or "
     "unaligned extents between clients.",
     "Give each writer its own aligned region (or its own file), or write through collective MPI-IO with "
     "aggregators."),
)


def findings(summary: Dict[str, Any], io_s: float) -> List[Finding]:
    """Random access, unaligned requests and files shared by writers (PATTERNS), for the files
    that took a large share of ``io_s`` (the program's seconds inside I/O calls)."""
    if not summary or io_s <= 0:
        return []
    big = [f for f in summary["shown"] if f["time_s"] >= max(MIN_FILE_S, FILE_SHARE * io_s)]
    out = []
    for fid, title, match, why, fix in PATTERNS:
        hit = [f for f in big if match(f)]
        if hit:
            out.append(Finding(id=fid, status=WARN, title=f"{title}: {_names(hit)}",
                               evidence="; ".join(describe(f) for f in hit), why=why, fix=fix,
                               data={"files": [f["path"] for f in hit]}))
    return out


def busiest(summary: Dict[str, Any], io_s: float) -> str:
    """"; busiest file: ..." for the I/O finding's evidence, or "" when no file stands out."""
    if not summary or not summary.get("shown") or io_s <= 0:
        return ""
    f = summary["shown"][0]
    if f["time_s"] < FILE_SHARE * io_s:
        return ""
    return f"; busiest file ({f['time_s'] / io_s:.0%} of that time): {describe(f)}"


def _names(files: List[Dict[str, Any]]) -> str:
    names = [f["path"].rsplit("/", 1)[-1] or f["path"] for f in files[:3]]
    return ", ".join(names) + (f" and {len(files) - 3} more" if len(files) > 3 else "")


def run_seconds(records: Sequence[Record]) -> float:
    """The run's time as the records see it: on each node, from the first process's start to the
    last one's end (CLOCK_MONOTONIC, comparable on a node); the longest node's."""
    spans: Dict[str, List[int]] = {}
    for rec in records:
        p = rec.process
        if p.start_ns and (p.end_ns or 0) >= p.start_ns:
            sp = spans.setdefault(p.host if p.host is not None else "", [p.start_ns, p.end_ns])
            sp[0], sp[1] = min(sp[0], p.start_ns), max(sp[1], p.end_ns)
    return max(((b - a) / 1e9 for a, b in spans.values()), default=0.0)


def uncounted(summary: Dict[str, Any], run_s: float) -> List[Finding]:
    """What the calls' counts leave out or hide: files opened O_SYNC, O_DSYNC or O_DIRECT (and the
    share of the run their writes took), files read through mappings, io_uring and Linux AIO."""
    if not summary:
        return []
    out = []
    flagged = [f for f in summary.get("flagged", []) if f["writes"] or f["reads"]]
    if flagged:
        took = sum(f["flagged_write_s"] for f in flagged)
        share = took / run_s if run_s > 0 else None
        heavy = share is not None and share >= FILE_SHARE and took >= MIN_FILE_S
        words = "; ".join(
            f"{f['path']} ({'+'.join(f['oflags'])}): {f['flagged_writes']} synchronous writes of "
            f"{f['write_bytes'] / max(f['writes'], 1) / 1024:.3g} KiB took {f['flagged_write_s']:.3g} s"
            for f in flagged[:5])
        of_run = f"{share:.0%} of the run's {run_s:.3g} s" if share is not None else "a share of the run unknown"
        direct_only = all(f["oflags"] == ["O_DIRECT"] for f in flagged)
        out.append(Finding(
            id="profile.file.sync_open", status=WARN if heavy else OK,
            title=f"Files opened {'/'.join(sorted({o for f in flagged for o in f['oflags']}))}: {_names(flagged)}; "
                  f"their writes took {of_run}",
            evidence=words + (f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""),
            why=("O_SYNC and O_DSYNC make every write wait until the device has the data (a journal commit, a "
                 "cache flush): a small write costs a device round trip, often 0.1-10 ms, instead of a memory copy. "
                 "O_DIRECT skips the page cache: every request goes to the device as it is, with no read-ahead "
                 "or write-behind."),
            fix=("Drop O_DIRECT, or make each request large (1 MiB or more, aligned) with several in flight."
                 if direct_only else
                 "Open without O_SYNC/O_DSYNC and call fsync (or fdatasync) once where durability is needed (at "
                 "the end, at a checkpoint); if every write must be durable, batch into fewer, larger writes "
                 "(e.g. dd oflag=dsync bs=4M rather than bs=4k)."),
            data={"files": [f["path"] for f in flagged], "flagged_write_s": took, "run_s": run_s}))
    mapped = [f for f in summary.get("mapped", []) if f["map_bytes"] >= MAPPED_BYTES]
    if mapped:
        out.append(Finding(
            id="profile.file.mapped", status=OK,
            title=f"Files read through memory mappings: {_names(mapped)} "
                  f"({sum(f['map_bytes'] for f in mapped) / 1e6:.4g} MB mapped)",
            evidence="; ".join(f"{f['path']}: {f['maps']} mmap of {f['map_bytes'] / 1e6:.4g} MB "
                               f"({'+'.join(f['mapped']) or '-'})" for f in mapped[:5]),
            why="Reads and writes through a mapping are page faults, not counted as reads or writes: the I/O "
                "counts and the read time of these files leave them out (the time is the program's own, on or "
                "off a CPU, in the split above).",
            fix="Nothing to fix: to see that I/O, compare major page faults (the profile's /proc figures, "
                "or `perf stat -e major-faults`) with the mapped bytes.",
            data={"files": [f["path"] for f in mapped], "bytes": [f["map_bytes"] for f in mapped]}))
    seen = [(k, n) for k, n in (summary.get("async") or {}).items() if n]
    if seen:
        names = {"io_uring": "io_uring", "aio": "Linux AIO (io_submit)"}
        out.append(Finding(
            id="profile.file.async", status=WARN,
            title=f"I/O through {' and '.join(names[k] for k, _ in seen)}: present, not counted",
            evidence="; ".join(f"{names[k]} set up in {n} process(es)" for k, n in seen),
            why="io_uring and Linux AIO submit and complete I/O through system calls of their own "
                "(io_uring_enter, io_submit, or none with a polling ring) that no wrapper sees: the I/O "
                "counts, bytes and times here leave that I/O out, so a program waiting on it looks idle.",
            fix="Read its I/O from the kernel: the profile's /proc/PID/io figures, `iostat -x 1` on the "
                "device, or `perf trace -s` for io_uring_enter and io_getevents time.",
            data=dict(seen)))
    return out


def conclude(summary: Dict[str, Any], io: Dict[str, Dict[str, int]], records: Sequence[Record]
             ) -> List[Finding]:
    """What the per-file ``summary`` says: the patterns of the files that took a large share of the
    time inside I/O calls (``io``: analysis/profile_io.io_calls), and what the calls' counts leave
    out over the run the ``records`` span. The busiest file is named in the I/O finding itself
    (analysis/profile.py gives ``busiest`` to it)."""
    if not summary:
        return []
    io_s = sum(io.get(c, {}).get("ns", 0) for c in ("read", "write", "meta", "sync")) / 1e9
    return findings(summary, io_s) + uncounted(summary, run_seconds(records))
