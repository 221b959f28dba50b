"""Per-file I/O of a profiled program: the interposer's "file" lines (csrc/interpose/files.c)
merged over its processes, and what they say.

A file is (host, device, inode): the processes of one node that use one file add up into
one entry, and two records of one file made by two threads at once merge. Each entry
has its opens, the requests and bytes read and written, the time inside those calls (opens
and closes, reads, writes, fsync),
how many accesses did not follow the previous one (random) and how many started off
the file system's block (unaligned), and which processes used it. The findings name a
file only where it matters: it took at least ``FILE_SHARE`` of the program's time in
I/O calls and at least ``MIN_FILE_S``. The records' values have their types already
(probes/interpose_record.py checks them when it reads).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..results.model import WARN, Finding

SHOWN = 20                   # files kept in the JSON (by time, then bytes); the rest are summed
FILE_SHARE = 0.10            # a finding names a file that took this share of the I/O calls' time
MIN_FILE_S = 0.01            # ... and at least this long
MIN_REQUESTS = 100           # a pattern needs this many requests to be one
RANDOM_SHARE = 0.5           # random: at least half the requests did not follow the previous one
UNALIGNED_SHARE = 0.5        # unaligned: at least half started off a block
SUMS = ("opens", "meta_ns", "reads", "read_bytes", "read_ns", "writes", "write_bytes", "write_ns", "random", "unaligned",
        "syncs", "sync_ns")
APIS = ((1, "POSIX"), (2, "stdio"), (4, "MPI-IO"))


def summarise(records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """{"count": files, "lost": files without a record, "capacity": records a process can hold,
    "shown": [file, ...] (the SHOWN that took
    the most time), "rest": {"files", "bytes", "time_s"} of the others}; {} when no record has
    file lines (an interposer without the module, or no interposer)."""
    merged: Dict[Tuple, Dict[str, Any]] = {}
    lost, seen, capacity = 0, False, 0
    for rec in records:
        lines = rec.get("lines", {}).get("file")
        if lines is None:
            continue
        seen = True
        proc = rec.get("process", {})
        who = (proc.get("host", ""), proc.get("pid"))
        for ln in lines:
            if "files" in ln:
                lost += ln.get("lost", 0)
                capacity = ln.get("max", 0) or capacity
                continue
            if "dev" not in ln or "ino" not in ln:
                continue
            key = (proc.get("host", ""), ln["dev"], ln["ino"])
            f = merged.setdefault(key, {"path": ln.get("path", ""), "host": proc.get("host", ""),
                                        "blksize": ln.get("blksize", 0), "api": 0, "extent": 0,
                                        "processes": set(), **{k: 0 for k in SUMS}})
            for k in SUMS:
                f[k] += ln.get(k, 0)
            f["api"] |= ln.get("api", 0)
            f["extent"] = max(f["extent"], ln.get("extent", 0))
            f["processes"].add(who)
    if not seen:
        return {}
    files = [_entry(f) for f in merged.values()]
    files.sort(key=lambda f: (-f["time_s"], -(f["read_bytes"] + f["write_bytes"]), f["path"]))
    rest = files[SHOWN:]
    return {"count": len(files), "lost": lost, "capacity": capacity, "shown": files[:SHOWN],
            "rest": {"files": len(rest), "bytes": sum(f["read_bytes"] + f["write_bytes"] for f in rest),
                     "time_s": sum(f["time_s"] for f in rest)}}


def _entry(f: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: v for k, v in f.items() if k not in ("processes", "api") and not k.endswith("_ns")}
    for k in ("meta", "read", "write", "sync"):
        out[f"{k}_s"] = f[f"{k}_ns"] / 1e9
    out["time_s"] = out["meta_s"] + out["read_s"] + out["write_s"] + out["sync_s"]
    out["processes"] = len(f["processes"])
    out["api"] = [name for bit, name in APIS if f["api"] & bit]
    return out


def requests(f: Dict[str, Any]) -> int:
    return f["reads"] + f["writes"]


def describe(f: Dict[str, Any]) -> str:
    """One file in words: what it moved, in what requests, how fast and in what pattern."""
    parts = [f"{f['opens']} opens ({f['meta_s']:.3g} s in opens and closes)"] if f["opens"] else []
    for k, verb in (("read", "read"), ("write", "written")):
        n, b = f[f"{k}s"], f[f"{k}_bytes"]
        if n:
            parts.append(f"{b / 1e6:.4g} MB {verb} in {n} requests of {b / n / 1024:.3g} KiB "
                         f"({f[f'{k}_s']:.3g} s)")
    if f["syncs"]:
        parts.append(f"{f['syncs']} fsync ({f['sync_s']:.3g} s)")
    n = requests(f)
    if n:
        parts.append(f"{f['random'] / n:.0%} random")
        if f["blksize"]:
            parts.append(f"{f['unaligned'] / n:.0%} off its {f['blksize']} B blocks")
    who = f"{f['processes']} processes" if f["processes"] > 1 else "1 process"
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
    ("profile.file.shared", "One file written by several processes",
     lambda f: f["processes"] > 1 and f["writes"] > 0,
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


def apply(breakdown: Dict[str, Any], findings_: List[Finding], records: Sequence[Dict[str, Any]]) -> None:
    """Add the per-file summary to a profile's breakdown ("files"), its findings to findings_,
    and the busiest file to the evidence of the I/O finding (analysis/profile.py's)."""
    summary = summarise(records)
    if not summary:
        return
    breakdown["files"] = summary
    io = breakdown.get("io_calls") or {}
    io_s = sum(io.get(c, {}).get("ns", 0) for c in ("read", "write", "meta", "sync")) / 1e9
    more = busiest(summary, io_s)
    for f in findings_:
        if f.id == "profile.io" and more:
            f.evidence += more
    findings_.extend(findings(summary, io_s))
