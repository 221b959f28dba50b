"""A profiled program's rates beside this node's measured ceilings, with advice in
plain words tied to both numbers.

The ceilings come from the history: the newest value this node stored of each
(`ceiling bench storage`, `bench network`, `bench memory`, or `ceiling run`),
named with its run and date, so a user can tell how old it is. What is compared:

- I/O: only device traffic against the device: of the bytes the program's read or
  write calls moved on files, what reached the device (/proc/PID/io read_bytes,
  write_bytes of the whole tree; the rest the page cache served or absorbed), over
  the time inside those calls, against the node's sequential bandwidth (the best
  layout of the newest run). Close to it: the storage is the limit (said only
  where the device figures are known); far below with small requests (the
  calls' own rate, cache or not): the requests are; far below with large ones:
  something else (a busy or remote file system, random access). Findings only
  where the I/O calls took IO_SHARE of the threads' time: a program on a CPU
  that reads its input at the storage's pace is not limited by it.
- MPI: the mean time of a blocking point-to-point call carrying a small message
  (under 16 KiB) against the node's one-way ping-pong latency (the best
  placement: ranks of one node); of a large one, its bytes over its time against
  the ping-pong bandwidth plateau. Many times the latency means the ranks wait
  for each other (a late sender), not for the network.
- Memory: the counters' lower bound of the traffic (last-level read misses x line)
  against STREAM Triad.

A storage or memory ceiling the history lacks is measured quickly after the
program ended (``measure``: bench/quick_ceiling.py: one stream in the
directory the program wrote to; STREAM as `bench memory --quick`) and said to
be that; an MPI ceiling the history lacks (it needs two ranks) is said, with
the command that measures it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..results.model import OK, WARN, Finding

Row = Tuple[str, Optional[float], str, str, str]     # name, value, unit, started, run_id
Lookup = Callable[[str], Sequence[Row]]
Measure = Callable[[str], Tuple[Optional[Row], str]]    # prefix -> (row measured now, how; or None, why not)

TO_MBS = {"MB/s": 1.0, "MiB/s": 1.048576, "GB/s": 1000.0, "GiB/s": 1073.741824}
NEAR = 0.7            # a rate at this share of the ceiling or more: at the ceiling
FAR = 0.2             # below this share: far from it
WAITING = 3.0         # small-message time above this many one-way latencies: waiting, not the network
SMALL_BUCKETS = 5     # lt1k .. 8k: the histogram's buckets under 16 KiB
MIN_IO_BYTES = 1 << 20   # less moved than this, or for less time, says nothing about the storage
MIN_IO_NS = 10_000_000
MIN_MESSAGES = 100       # fewer small messages than this: no figure against the latency
IO_SHARE = 0.10          # I/O calls on files under this share of the threads' time: no I/O finding here
ABOVE = 1.25             # faster than the device by this much: the page cache, not the device, took it
DEVICE_KEY = {"read": "read_bytes", "write": "write_bytes"}


def _best(rows: Sequence[Row], lowest: bool = False) -> Optional[Row]:
    """Of the newest run's rows, the best (highest, or lowest for a latency)."""
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return None
    newest = max(r[3] for r in rows)
    rows = [r for r in rows if r[3] == newest]
    return min(rows, key=lambda r: r[1]) if lowest else max(rows, key=lambda r: r[1])


def _source(row: Row) -> str:
    return f"{row[0]} = {row[1]:.4g} {row[2]}, measured {row[3][:10]} (run {row[4][:12]})"


_ASK = object()


def compare(breakdown: Dict[str, Any], lookup: Lookup, measure: Optional[Measure] = None,
            memory: Any = _ASK) -> Tuple[List[Dict[str, Any]], List[Finding]]:
    """(comparisons, findings): one comparison per figure the program has, with the node's
    ceiling for it or why there is none; ``measure`` is asked for a storage or memory ceiling
    the history lacks. ``memory``: ``memory_traffic``'s comparison, when it was made before."""
    out: List[Dict[str, Any]] = []
    findings: List[Finding] = []
    io = breakdown.get("io_calls") or {}
    totals = breakdown.get("io_totals") or {}
    thread_s = breakdown.get("thread_seconds")
    io_s = sum((io.get(c) or {}).get("ns", 0) for c in ("read", "write", "meta", "sync", "copy")) / 1e9
    io_share = io_s / thread_s if thread_s else None
    for cls, prefix in (("write", "storage.seq.write."), ("read", "storage.seq.read.")):
        x = io.get(cls) or {}
        if x.get("bytes", 0) < MIN_IO_BYTES or x.get("ns", 0) < MIN_IO_NS:
            continue                     # a printf or a config file read: no rate worth a ceiling
        secs = x["ns"] / 1e9
        calls_rate = x["bytes"] / secs / 1e6
        size = x["bytes"] / x["calls"] if x.get("calls") else 0.0
        how = f"{x['calls']} requests of {size / 1024:.3g} KiB on average, {secs:.3g} s inside them"
        device = totals.get(DEVICE_KEY[cls])
        c = {"what": f"I/O {cls}", "unit": "MB/s", "through_calls": calls_rate, "io_share": io_share}
        if device is None:
            c.update(program=calls_rate, program_how=f"{x['bytes'] / 1e6:.4g} MB in {how}; what the page cache "
                                                     "served is not known (no /proc/PID/io)")
        else:
            moved = min(device, x["bytes"])
            cache = "served" if cls == "read" else "absorbed"
            c.update(program=moved / secs / 1e6, device_bytes=moved, page_cache_bytes=x["bytes"] - moved,
                     program_how=f"{moved / 1e6:.4g} MB at the device of the {x['bytes'] / 1e6:.4g} MB its {cls} "
                                 f"calls moved ({DEVICE_KEY[cls]}; the page cache {cache} "
                                 f"{(x['bytes'] - moved) / 1e6:.4g} MB), {how}")
            if moved < MIN_IO_BYTES:
                c.update(ceiling=None, why=f"the page cache {cache} the {cls}s: too little reached the device "
                                           "to compare with the storage")
                out.append(c)
                continue
        row, quick = _best(lookup(prefix)), ""
        if row is None and measure is not None:
            row, quick = measure(prefix)
        out.append(_against(c, row, "ceiling bench storage --dir DIR (DIR where the program writes)", quick=quick))
        f = _io_advice(cls, c, size, device is not None) if io_share is None or io_share >= IO_SHARE else None
        if f:
            findings.append(f)
    mpi = breakdown.get("mpi") or {}
    hist = (mpi.get("hist") or {}).get("p2p") or {}
    calls, ns = hist.get("hist") or [], hist.get("hist_ns") or []
    if sum(calls[:SMALL_BUCKETS]) >= MIN_MESSAGES:
        t = sum(ns[:SMALL_BUCKETS]) / sum(calls[:SMALL_BUCKETS]) / 1e3
        c = {"what": "MPI small messages", "program": t, "unit": "µs",
             "program_how": f"mean time of {sum(calls[:SMALL_BUCKETS])} blocking point-to-point calls under 16 KiB"}
        out.append(_against(c, _best(lookup("net.pingpong.latency."), lowest=True),
                            "mpirun -n 2 ceiling bench network", lower_is_better=True))
        f = _latency_advice(c)
        if f:
            findings.append(f)
    big = sum(calls[SMALL_BUCKETS + 3:])                  # 64 KiB and larger
    if big and sum(ns[SMALL_BUCKETS + 3:]):
        c = {"what": "MPI large messages", "unit": "MB/s", "program": None,
             "program_how": f"{big} blocking point-to-point calls of 64 KiB or more"}
        moved = sum((hist.get("hist_bytes") or [])[SMALL_BUCKETS + 3:])
        if moved:
            c["program"] = moved / (sum(ns[SMALL_BUCKETS + 3:]) / 1e9) / 1e6
            out.append(_against(c, _best(lookup("net.pingpong.bandwidth.")), "mpirun -n 2 ceiling bench network"))
    if memory is _ASK:
        memory = memory_traffic(breakdown.get("counters") or {}, lookup, measure)
    if memory:
        out.append(memory)
    return out, findings


def memory_traffic(counters: Dict[str, Any], lookup: Lookup, measure: Optional[Measure] = None
                   ) -> Optional[Dict[str, Any]]:
    """The program's memory traffic (the counters' lower bound) against this node's STREAM Triad,
    or None without that figure. Needs nothing but the counters, so the counters' verdict on the
    time on a CPU (analysis/profile_counters.classify) can rest on it before the bounds are made;
    ``compare`` then lists it last."""
    derived = counters.get("derived") or {}
    mem = (derived.get("memory_bandwidth_min_bytes_per_s") or {}).get("value")
    if not mem:
        return None
    c = {"what": "memory traffic (a lower bound)", "program": mem / 1e6, "unit": "MB/s",
         "program_how": "last-level cache read misses x line size, over the run"}
    row, quick = _best(lookup("stream.triad")), ""
    if row is None and measure is not None:
        row, quick = measure("stream.triad")
    return _against(c, row, "ceiling bench memory", quick=quick)


def _against(c: Dict[str, Any], row: Optional[Row], how: str, lower_is_better: bool = False,
             quick: str = "") -> Dict[str, Any]:
    """c with the ceiling from row; quick: how row was measured now (row given) or why it could
    not be (row None)."""
    if row is None:
        c["ceiling"] = None
        c["why"] = (f"not measured on this node: run '{how}' once, then profile again"
                    + (f" (a quick measurement was not possible: {quick})" if quick else ""))
        return c
    value = row[1] if c["unit"] == "µs" else row[1] * TO_MBS.get(row[2], float("nan"))
    c["ceiling"], c["source"] = value, (f"{row[0]} = {row[1]:.4g} {row[2]}, {quick}" if quick else _source(row))
    c["quick"] = bool(quick)
    if c["program"] is not None and value:
        c["share"] = value / c["program"] if lower_is_better else c["program"] / value
        if lower_is_better and c["program"]:
            # A time is said as a multiple of the ceiling, as its finding says it ("1.45x this
            # node's MPI latency"), not as the share the ceiling is of it ("69% of it").
            c["ratio"] = c["program"] / value
    return c


def _io_advice(cls: str, c: Dict[str, Any], size: float, device_known: bool) -> Optional[Finding]:
    """At the ceiling: the device's rate near it (never said without device figures, nor above
    it: there the page cache took the bytes); far below: the calls' own rate, cache or not."""
    share = c.get("share")
    if share is None:
        return None
    calls_share = c["through_calls"] / c["ceiling"] if c.get("ceiling") else share
    words = (f"the program {cls}s at {c['program']:.4g} MB/s inside its {cls} calls ({c['program_how']}); this "
             f"node's storage: {c['ceiling']:.4g} MB/s ({c['source']})")
    if c.get("io_share") is not None:
        words += f"; I/O calls took {c['io_share']:.0%} of the threads' time"
    if device_known and NEAR <= share <= ABOVE:
        return Finding(id=f"profile.ceiling.io_{cls}", status=OK,
                       title=f"I/O {cls}s run at {share:.0%} of this node's measured storage bandwidth",
                       evidence=words, why="At the ceiling, faster code does not help: only less data, faster "
                                           "storage or I/O overlapped with computation do.",
                       data={"share": share})
    if calls_share < FAR:
        small = size < 64 * 1024
        return Finding(
            id=f"profile.ceiling.io_{cls}", status=WARN,
            title=f"I/O {cls}s reach {calls_share:.0%} of this node's storage bandwidth"
                  + (f", in requests of {size / 1024:.3g} KiB" if small else ""),
            evidence=words,
            why=("Small requests pay a system call and a round trip each; the storage's bandwidth needs large ones."
                 if small else "Large requests far below the storage's bandwidth: random access, a busy or remote "
                               "file system, or synchronous writes."),
            fix=(f"Buffer into requests of 1 MiB or more: at {size / 1024:.3g} KiB the program moves "
                 f"{c['through_calls']:.3g} MB/s where the storage moves {c['ceiling']:.3g} MB/s." if small else
                 "Check the file system's load now ('ceiling check'), write sequentially, and fsync less often."),
            data={"share": calls_share, "request_bytes": size})
    return None


def _latency_advice(c: Dict[str, Any]) -> Optional[Finding]:
    share = c.get("share")
    if share is None:
        return None
    ratio = c["program"] / c["ceiling"] if c["ceiling"] else None
    words = (f"a small message takes the program {c['program']:.3g} µs per blocking call; this node's one-way "
             f"ping-pong latency is {c['ceiling']:.3g} µs ({c['source']})")
    if ratio is not None and ratio > WAITING:
        return Finding(id="profile.ceiling.mpi_waiting", status=WARN,
                       title=f"Small messages take {ratio:.3g}x this node's MPI latency: the ranks wait for each "
                             "other, not for the network",
                       evidence=words, why="A receive posted before its message is sent waits for the sender: "
                                           "the time is the other rank's work (a late sender), not latency.",
                       fix="Balance the work between the ranks that exchange, or post the receive early "
                           "(MPI_Irecv) and compute before waiting for it.", data={"ratio": ratio})
    return Finding(id="profile.ceiling.mpi_latency", status=OK,
                   title=f"Small messages take {ratio:.3g}x this node's MPI latency: the network's latency "
                         "is the limit",
                   evidence=words, why="At the latency, a message cannot be faster: there can only be fewer.",
                   fix="Send fewer, larger messages (aggregate), or overlap them with computation.",
                   data={"ratio": ratio})
