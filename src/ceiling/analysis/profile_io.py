"""What the interposer's I/O modules counted, as the profile's I/O classes, and the I/O bound:
pure functions over the typed records (probes/interpose_record.py, interpose_lines.py).

Request sizes and counts are those that reached the kernel: the POSIX module's calls, and the
stdio module's estimate of what the streams' buffers sent (csrc/interpose/stdio.c); the stdio
calls themselves are library calls, said beside them. Calls on pipes, sockets, terminals and
/dev/null are not storage and stay out of the storage classes.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..probes.interpose_lines import FnCalls, IOClass, KernelRequests, MpiCounts, Record, StreamClass
from ..results.analysis import Bound
from ..results.model import LOWER, WARN, Finding, Metric

IO_BOUND = 0.30            # inside I/O calls this share of the threads' time: I/O-bound
SMALL_IO = 64 * 1024       # mean request below this: small requests
IO_CLASSES = ("read", "write", "meta", "sync", "copy")    # storage; "other" is not


IO_KEYS_PER_CLASS = ("calls", "errors", "bytes", "ns", "random", "library_calls", "estimated")


def io_calls(records: Sequence[Record]) -> Dict[str, Dict[str, int]]:
    """The interposer's I/O counts summed over every process's record: class -> {calls, errors,
    bytes, ns, random, library_calls, estimated}; {} when no record has an I/O module's lines.

    Storage classes (read, write, meta, sync, copy) count what reached the kernel on files:
    ``calls`` and ``bytes`` of read and write are requests to the kernel, the POSIX module's
    exactly and, for stdio, the module's estimate from the streams' buffers (``estimated`` of
    the calls, csrc/interpose/stdio.c; the buffers still pending when a process exited normally
    are one request each); ``library_calls`` are the stdio calls (fwrite, fprintf, fflush, ...)
    that made them, whose time is in ``ns``. ``copy``: copy_file_range and sendfile between two
    files (a read of one and a write of the other, their bytes once); those from a file to a pipe
    or socket are reads, the other way writes. ``other``: calls on pipes, sockets, terminals and
    /dev/null, POSIX and stdio: not storage, in no storage class. The modules never count the same
    call: glibc's stdio reaches the kernel without the POSIX wrappers."""
    out: Dict[str, Dict[str, int]] = {}

    def add(cls: str, line: Any, **keys: str) -> None:
        tot = out.setdefault(cls, dict.fromkeys(IO_KEYS_PER_CLASS, 0))
        for to, frm in keys.items():
            v = getattr(line, frm, None)
            tot[to] += v if isinstance(v, int) else 0

    plain = dict(calls="calls", errors="errors", bytes="bytes", ns="ns", random="random")
    for rec in records:
        exited = rec.process.reason == "exit"
        for line in rec.of("posix", IOClass):
            cls = str(line.class_)
            if cls in IO_CLASSES:
                add(cls, line, **plain)
            elif cls in ("other_read", "other_write"):
                add("other", line, **plain)
        for line in rec.iter("stdio"):
            if not isinstance(line, (StreamClass, KernelRequests)):
                continue
            cls = str(line.class_)
            if cls in ("read", "write"):
                add(cls, line, library_calls="calls", errors="errors", ns="ns")
            elif cls == "flush":
                add("write", line, library_calls="calls", errors="errors", ns="ns")
            elif cls == "meta":
                add("meta", line, calls="calls", errors="errors", ns="ns")
            elif cls in ("kernel_read", "kernel_write") or (cls == "pending" and exited):
                add("read" if cls == "kernel_read" else "write", line, calls="requests", estimated="requests",
                    bytes="bytes")
            elif cls in ("other_read", "other_write", "other_flush"):
                add("other", line, library_calls="calls", errors="errors", bytes="bytes", ns="ns")
        for line in rec.of("copy", StreamClass):
            cls = str(line.class_)
            if cls in ("read", "write", "copy", "other"):
                add(cls, line, calls="calls", errors="errors", bytes="bytes", ns="ns")
    return out


def intercepted_calls(records: Sequence[Record], modules: Sequence[str] = ("posix", "stdio", "copy")) -> int:
    """Every call the given modules' wrappers counted (their "fn" lines), whatever its class:
    what the interposer's cost per call multiplies."""
    return sum(line.calls for rec in records for m in modules for line in rec.iter(m)
               if isinstance(line, (FnCalls, MpiCounts)) and line.fn is not None and isinstance(line.calls, int))


def _io_part(c: str, x: Dict[str, int], secs: float) -> str:
    """One class of io_calls in words: the kernel requests, and the stdio calls they came from."""
    if c not in ("read", "write"):
        return f"{c} {secs:.3g} s in {x['calls']} calls" + (f", {x['bytes'] / 1e6:.4g} MB" if c == "copy" else "")
    words = f"{c} {secs:.3g} s in {x['calls']} requests to the kernel"
    if x["calls"]:
        words += f", {x['bytes'] / x['calls'] / 1024:.3g} KiB per request"
    if x.get("library_calls"):
        words += (f" ({x.get('estimated', 0)} of them estimated from the buffers of {x['library_calls']} stdio "
                  "calls)")
    return words


def io_bound(io: Dict[str, Dict[str, int]], thread_s: float, wall_s: float, busiest: str = ""
             ) -> Tuple[List[Bound], List[Finding], List[Metric]]:
    """The time the program spent inside its I/O calls on files (the interposer's clock), by
    class; request sizes are those that reached the kernel (io_calls). ``busiest``: the file
    that took most of that time, in words for the finding's evidence (profile_files.busiest)."""
    secs = {c: io[c]["ns"] / 1e9 for c in IO_CLASSES if c in io}
    total = sum(secs.values())
    metrics = [_m(f"app.io.{c}.time", secs[c], "s",
                  context={"calls": io[c]["calls"], "bytes": io[c]["bytes"], "errors": io[c]["errors"],
                           **({"library_calls": io[c]["library_calls"], "estimated": io[c]["estimated"]}
                              if io[c].get("library_calls") else {})}) for c in IO_CLASSES if c in io]
    if not thread_s or total <= 0:
        return [], [], metrics
    share = min(1.0, total / thread_s)
    parts = [_io_part(c, io[c], secs[c]) for c in IO_CLASSES
             if c in io and (io[c]["calls"] or io[c].get("library_calls"))]
    words = f"{share:.0%} of the threads' time inside I/O calls on files ({total:.3g} s: {'; '.join(parts)})"
    data = {"share": share, "seconds": secs}
    bounds, findings = [], []
    if share < IO_BOUND:
        return [], [], metrics
    worst = max(secs, key=lambda c: secs[c])
    bounds.append(Bound("application", "io", share, words, dict(data, by=worst)))
    findings.append(Finding(
        id="profile.io", status=WARN, title=f"Inside I/O calls {share:.0%} of the time, most in {worst}",
        evidence=words + busiest,
        why="Time in I/O calls is time the program does not compute; the storage, the request size or "
            "the pattern sets its pace.",
        fix={"meta": "Open, stat and close less often (keep files open, fewer and larger files).",
             "sync": "fsync less often (once per file or checkpoint, not per write).",
             }.get(worst, "Larger requests, fewer calls, and I/O overlapped with computation (a writer thread, "
                          "asynchronous or collective I/O)."), data=data))
    for c in ("read", "write"):
        x = io.get(c)
        if x and x["calls"] and x["bytes"] / x["calls"] < SMALL_IO and secs[c] >= 0.25 * total:
            findings.append(Finding(
                id=f"profile.io.small_{c}s", status=WARN,
                title=f"Small {c}s: {x['calls']} requests of {x['bytes'] / x['calls'] / 1024:.3g} KiB on average "
                      "reached the kernel",
                evidence=words, why="Each request costs a system call and, on a parallel file system, a round trip; "
                                     "small requests reach a fraction of the storage's bandwidth.",
                fix="Buffer into requests of 1 MiB or more (a larger stdio buffer with setvbuf, an aggregation "
                    "layer, MPI-IO collective buffering).",
                data={"calls": x["calls"], "bytes": x["bytes"], "library_calls": x.get("library_calls", 0)}))
    return bounds, findings, metrics


def _m(name: str, value: float, unit: str, context: Dict[str, Any]) -> Metric:
    return Metric.measured(name, [value], unit, better=LOWER, context=context)
