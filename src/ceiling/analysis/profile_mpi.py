"""The MPI part of a profile: pure functions over the interposer's mpi lines
(csrc/interpose/mpi.c documents them), one record per rank.

Per rank, the time between MPI_Init's return and the call of MPI_Finalize is
its run; inside it, time in MPI calls by group (point-to-point, waiting for
non-blocking requests, collectives, MPI-IO) and the rest, outside MPI, is the
rank's own work ("useful" in the POP Centre of Excellence's terms). The job's
figures are POP's:

    load balance              = mean(useful) / max(useful)
    communication efficiency  = max(useful) / runtime
    parallel efficiency       = load balance x communication efficiency

where runtime is the longest rank's run plus its MPI_Finalize (a rank that
finishes early waits in MPI_Finalize for the others, so every rank's run and
Finalize add up to about the same). Bounds: "imbalance" when load balance is
poor (the others wait for the slowest rank: the time that costs is max - mean
of useful over runtime); "mpi_latency" or "mpi_bandwidth" when MPI time is a
large share with the ranks balanced, by where that time went: messages under
SMALL_MESSAGE bytes (and barriers) are latency, larger ones bandwidth.

MPI_Init and MPI_Finalize are the runtime's start-up and shut-down (the
launcher, PMIx, the fabric's wire-up; Open MPI 5 takes about a second on one
node): outside the run, they are said apart (a finding past STARTUP of the
ranks' life) and given, with the time in MPI, as shares of each rank's life
(its main thread's), the unit of the /proc split that profile.py weighs them
against.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..probes.interpose_lines import Hist, IOClass, MpiCounts, MpiHead, Peer, Record, StreamClass, Task
from ..results.analysis import Bound
from ..results.model import HIGHER, LOWER, WARN, Finding, Metric
from .profile import record_split

# One-sided transfers count with point-to-point, their synchronisation (fences, locks, flushes)
# with waiting: that is where the transfers complete and ranks wait for each other.
GROUPS = {"send": "p2p", "recv": "p2p", "sendrecv": "p2p", "post": "p2p", "wait": "wait", "coll": "coll",
          "icoll": "coll", "io_meta": "io", "io_read": "io", "io_write": "io", "io_sync": "io", "rma": "p2p",
          "rma_sync": "wait"}
GROUP_WORDS = {"p2p": "point-to-point", "wait": "waiting for requests", "coll": "collectives", "io": "MPI-IO"}
BUCKETS = ("lt1k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k",
           "1m", "2m", "4m", "8m", "16m", "32m", "ge64m")
SMALL_MESSAGE = 16 * 1024   # below this a message's time is mostly latency (IMB PingPong's bend on most networks)
SMALL_BUCKETS = BUCKETS[:5]  # lt1k .. 8k: every bucket entirely under SMALL_MESSAGE
MPI_BOUND = 0.30            # ranks in MPI this share of their run: an MPI bound
IMBALANCED = 0.85           # load balance below this: imbalance (POP flags under 0.8-0.85)
STARTUP = 0.25              # MPI_Init + MPI_Finalize this share of the ranks' life: said


def ranks(records: Sequence[Record]) -> List[Dict[str, Any]]:
    """Per process that initialised MPI (its record has an mpi line with init_ns), sorted by
    rank: the rank's run, its MPI time by group and function, bytes, histograms, peers."""
    out = []
    for rec in records:
        head = next(iter(rec.of("mpi", MpiHead)), None)
        if head is None or not head.init_ns:
            continue
        proc = rec.process
        end = head.finalize_ns or proc.end_ns or 0
        counts = rec.of("mpi", MpiCounts)
        classes = {str(ln.class_): ln for ln in counts if ln.class_ is not None}
        groups: Dict[str, float] = {}
        for cls, ln in classes.items():
            g = GROUPS.get(cls)
            if g:
                groups[g] = groups.get(g, 0.0) + (ln.ns or 0) / 1e9
        fns = {str(ln.fn): ln for ln in counts if ln.fn is not None}
        writes = [ln for m in ("posix", "stdio") for ln in rec.iter(m)
                  if isinstance(ln, (IOClass, StreamClass)) and ln.class_ == "write"]
        run_s = max(0.0, (end - head.init_ns) / 1e9)
        init_s = sum(fns[f].ns or 0 for f in ("MPI_Init", "MPI_Init_thread") if f in fns) / 1e9
        # a record taken inside MPI_Finalize (the checkpoint, all rank 0 receives of a gathered
        # rank) has the call but not its time: unknown (None), counted as 0 in the sums
        inside = proc.reason == "checkpoint" and bool(head.finalize_ns)
        finalize_s = None if inside else ((fns["MPI_Finalize"].ns or 0) if "MPI_Finalize" in fns else 0) / 1e9
        main = next((ln for ln in rec.of("proc", Task) if ln.task == proc.pid), None)
        io_write = classes.get("io_write")
        out.append({
            "rank": head.rank if head.rank is not None else -1, "size": head.size if head.size is not None else -1,
            "ended": _ended(proc) if not head.finalize_ns else None,
            "host": proc.host if proc.host is not None else "",
            "pid": proc.pid, "family": head.family if head.family is not None else "unknown",
            "library": head.library if head.library is not None else "",
            "run_s": run_s, "finalize_s": finalize_s, "init_s": init_s,
            # the main thread's life (proc.c), at least MPI's three parts when it is not known
            "life_s": max(((main.life_ns or 0) if main else 0) / 1e9, init_s + run_s + (finalize_s or 0.0)),
            "groups": groups, "mpi_s": sum(groups.values()),
            "classes": {c: {k: getattr(ln, k) or 0 for k in ("calls", "ns", "bytes")} for c, ln in classes.items()},
            "functions": {f: {k: getattr(ln, k) or 0 for k in ("calls", "ns", "bytes")} for f, ln in fns.items()},
            **{kind: {str(h.of): [h.buckets.get(b, 0) for b in BUCKETS] for h in rec.of("mpi", Hist)
                      if h.kind == kind and h.of is not None} for kind in ("hist", "hist_ns", "hist_bytes")},
            "peers": {ln.peer: {"calls": ln.calls or 0, "bytes": ln.bytes or 0}
                      for ln in rec.of("mpi", Peer) if isinstance(ln.peer, int)},
            "threads": proc.threads if proc.threads is not None else 1,
            "cpu": _cpu_shares(rec),
            "write_bytes": sum(ln.bytes or 0 for ln in writes) + ((io_write.bytes or 0) if io_write else 0),
            "write_s": (sum(ln.ns or 0 for ln in writes) + ((io_write.ns or 0) if io_write else 0)) / 1e9,
        })
    return sorted(out, key=lambda r: (r["rank"] if isinstance(r["rank"], int) else -1, r["pid"] or 0))


def _cpu_shares(rec: Record) -> Optional[Dict[str, float]]:
    """Where a rank's threads' lives went, as its record's proc lines say; None without them."""
    sp = record_split(rec)
    return {k: round(v, 4) for k, v in sp.shares().items()} if sp else None


def launcher_pids(records: Sequence[Record]) -> List[int]:
    """Processes that started MPI ranks without being one (mpiexec, hydra_pmi_proxy, orted,
    srun, a wrapping shell): the ancestors of every rank, by the ppid in the records. Their
    I/O is the launcher's control traffic, not the program's."""
    parent = {r.process.pid: r.process.ppid for r in records}
    rank_pids = {r["pid"] for r in ranks(records)}
    out = set()
    for pid in rank_pids:
        up = parent.get(pid)
        while up in parent and up not in rank_pids and up not in out:
            out.add(up)
            up = parent.get(up)
    return sorted(p for p in out if isinstance(p, int))


def _spread(vals: List[float]) -> Dict[str, float]:
    return {"min": min(vals), "mean": sum(vals) / len(vals), "max": max(vals)} if vals else {}


def _small_share(rs: Sequence[Dict[str, Any]]) -> Optional[float]:
    """The share of MPI communication time spent on messages under SMALL_MESSAGE: blocking
    calls by their histogram's time; a wait's time split as the requests it completes were
    posted (by count); barriers are small (0 bytes)."""
    small = total = 0.0
    for r in rs:
        for kind in ("p2p", "coll"):
            ns = r["hist_ns"].get(kind, [])
            small += sum(ns[:len(SMALL_BUCKETS)])
            total += sum(ns)
        wait = r["groups"].get("wait", 0.0) * 1e9
        posted = r["hist"].get("post", [])
        if wait and sum(posted):
            small += wait * sum(posted[:len(SMALL_BUCKETS)]) / sum(posted)
            total += wait
    return small / total if total > 0 else None


def _ended(proc) -> Optional[str]:
    """How a process that never called MPI_Finalize ended, from its record's reason; None where the record
    was not its last (a checkpoint, an exec: the process went on)."""
    if proc.reason == "signal":
        from ..probes.launch import signal_name
        return f"killed by {signal_name(proc.signal) if proc.signal else 'a signal'}"
    if proc.reason == "exit":
        return f"ended by {proc.by}()" if proc.by else "ended by exit()"
    return None


def _died(rs) -> Optional[Finding]:
    """The ranks that ended without MPI_Finalize, each named with how (a crash, an abort, an early exit): in an
    express launch the launcher then kills the others, and a rank killed by SIGKILL leaves no record."""
    gone = [r for r in rs if r["ended"]]
    if not gone:
        return None
    said = "; ".join(f"rank {r['rank']} (pid {r['pid']}{' on ' + r['host'] if r['host'] else ''}) {r['ended']} "
                     f"{r['run_s']:.3g} s after MPI_Init" for r in gone[:16])
    return Finding(
        id="profile.mpi.rank_ended", status=WARN,
        title=f"{len(gone)} rank{'s' if len(gone) != 1 else ''} ended without MPI_Finalize: "
              + ", ".join(str(r["rank"]) for r in gone[:16]) + (" ..." if len(gone) > 16 else ""),
        evidence=said + "; its counts and events are those up to its end",
        why="A rank that ends before MPI_Finalize (a crash, MPI_Abort, exit() in an error path) ends the job: "
            "the launcher stops the others, and their figures stop where they were killed.",
        fix="Look at that rank's standard error and exit status first: the job's status is its.",
        data={"ranks": [{"rank": r["rank"], "pid": r["pid"], "host": r["host"], "how": r["ended"]} for r in gone]})


def conclude(records: Sequence[Record], wrapped: Optional[Tuple[int, int]] = None
             ) -> Tuple[List[Metric], List[Bound], List[Finding], Dict[str, Any]]:
    """(metrics, bounds, findings, the "mpi" part of the breakdown); all empty when no
    process of the program initialised MPI. ``wrapped``: (rank, size) when ceiling wraps
    each rank (mpirun -n N ceiling profile -- ./app), where a missing rank is one that
    never reached MPI_Finalize, the gather's place, rather than one on another node."""
    rs = ranks(records)
    if not rs:
        return [], [], [], {}
    useful = [max(0.0, r["run_s"] - r["mpi_s"]) for r in rs]
    runtime = max(r["run_s"] + (r["finalize_s"] or 0.0) for r in rs)
    share = [min(1.0, r["mpi_s"] / r["run_s"]) if r["run_s"] else 0.0 for r in rs]
    lb = (sum(useful) / len(useful)) / max(useful) if max(useful) > 0 else None
    ce = max(useful) / runtime if runtime > 0 else None
    pe = lb * ce if lb is not None and ce is not None else None
    groups = {g: sum(r["groups"].get(g, 0.0) for r in rs) for g in GROUP_WORDS}
    expected = max((r["size"] for r in rs if isinstance(r["size"], int)), default=-1)
    small = _small_share(rs)
    startup = [r["init_s"] + (r["finalize_s"] or 0.0) for r in rs]
    life = {"mpi": _spread([r["mpi_s"] / r["life_s"] if r["life_s"] else 0.0 for r in rs]),
            "startup": _spread([st / r["life_s"] if r["life_s"] else 0.0 for st, r in zip(startup, rs)])}
    summary = {
        "ranks": len(rs), "size": expected, "family": rs[0]["family"], "library": rs[0]["library"],
        "runtime_s": runtime, "share": _spread(share), "groups_s": groups, "life_share": life,
        "startup_s": _spread(startup),
        "load_balance": lb, "communication_efficiency": ce, "parallel_efficiency": pe,
        "small_message_share": small,
        "per_rank": [{k: r[k] for k in ("rank", "host", "pid", "run_s", "mpi_s", "groups", "init_s",
                                        "finalize_s", "life_s", "classes", "peers", "threads", "cpu")} for r in rs],
        "functions": _functions(rs), "hist": _hist(rs),
    }
    unknown = [r["rank"] for r in rs if r["finalize_s"] is None]
    if unknown:
        summary["finalize_unknown"] = {
            "ranks": unknown,
            "why": "their records were gathered to rank 0 inside MPI_Finalize: the call is counted, its time is "
                   "not (0 in the sums; their run ends when MPI_Finalize was called)"}
    ctx = {"ranks": len(rs), "per_rank": _spread(share)}
    metrics = [_m("app.mpi.time", sum(share) / len(share) * 100, "%", ctx)]
    for name, v in (("app.mpi.load_balance", lb), ("app.mpi.communication_efficiency", ce),
                    ("app.mpi.parallel_efficiency", pe)):
        if v is not None:
            metrics.append(_m(name, v * 100, "%", {"ranks": len(rs), "method": "POP (mean/max of time outside MPI)"},
                              HIGHER))
    bounds, findings = _bounds(rs, share, useful, runtime, lb, small, groups)
    findings += _single_writer(rs, share) + _startup(rs, life["startup"])
    died = _died(rs)
    if died is not None:
        findings.append(died)
    if 0 < len(rs) < expected and wrapped:
        findings.append(_not_gathered(rs, expected))
    elif 0 < len(rs) < expected:
        findings.append(Finding(
            id="profile.mpi.ranks_missing", status=WARN,
            title=f"{len(rs)} of {expected} ranks were profiled: the others ran on other nodes or left no record",
            evidence=f"MPI_COMM_WORLD has {expected} ranks; records came from ranks "
                     f"{', '.join(str(r['rank']) for r in rs)}",
            why="An express launch (ceiling profile -- mpirun ...) sees the ranks started on this node only"
                + ("; and a rank killed with SIGKILL (as a launcher stops a job once one rank has died) leaves no "
                   "record." if died is not None else "."),
            fix="Wrap every rank instead: mpirun -n N ceiling profile -- ./app (or srun ceiling profile -- ./app).",
            data={"seen": len(rs), "size": expected}))
    return metrics, bounds, findings, summary


def _not_gathered(rs, expected: int) -> Finding:
    """Wrapped ranks gather their records to rank 0 inside MPI_Finalize: a rank missing from
    them did not get there under ceiling."""
    seen = {r["rank"] for r in rs}
    missing = [k for k in range(expected) if k not in seen]
    names = ", ".join(map(str, missing[:20])) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
    return Finding(
        id="profile.mpi.ranks_missing", status=WARN,
        title=f"{len(missing)} of {expected} ranks did not report (rank{'s' if len(missing) != 1 else ''} {names}): "
              "the figures are of the others",
        evidence=f"MPI_COMM_WORLD has {expected} ranks; records came from ranks "
                 f"{', '.join(str(r['rank']) for r in rs)}",
        why="Each rank's ceiling sends its counts to rank 0 inside MPI_Finalize. A rank is missing when the job "
            "was stopped or a rank killed before every rank reached it, or when not every rank reached it under "
            "ceiling within 30 s (the interposer says so on that rank's standard error).",
        fix="Let the job reach MPI_Finalize (profile a shorter case); check that every rank runs under ceiling "
            "and that the launcher passes LD_PRELOAD on.",
        data={"seen": len(rs), "size": expected, "missing": missing})


def _bounds(rs, share, useful, runtime, lb, small, groups) -> Tuple[List[Bound], List[Finding]]:
    mean_share = sum(share) / len(share)
    words = (f"{len(rs)} rank{'s' if len(rs) != 1 else ''} inside MPI {mean_share:.0%} of their run on average "
             f"(min {min(share):.0%}, max {max(share):.0%}); " +
             ", ".join(f"{GROUP_WORDS[g]} {s:.3g} s" for g, s in groups.items() if s > 0))
    bounds: List[Bound] = []
    findings: List[Finding] = []
    slow = max(range(len(rs)), key=lambda i: useful[i])
    fast = min(range(len(rs)), key=lambda i: useful[i])
    data = {"mpi_share": mean_share, "load_balance": lb, "small_message_share": small}
    lost = (max(useful) - sum(useful) / len(useful)) / runtime if runtime > 0 else 0.0
    if len(rs) > 1 and lb is not None and lb < IMBALANCED:
        ev = (f"load balance {lb:.0%} (mean / max of the time outside MPI): rank {rs[slow]['rank']} worked "
              f"{useful[slow]:.3g} s, rank {rs[fast]['rank']} {useful[fast]:.3g} s and waited in MPI "
              f"{share[fast]:.0%} of its run; {words}")
        bounds.append(Bound("application", "imbalance", lost, ev, dict(data, slowest=rs[slow]["rank"])))
        findings.append(Finding(
            id="profile.mpi.imbalance", status=WARN,
            title=f"Load imbalance: rank {rs[slow]['rank']} works {useful[slow] / max(useful[fast], 1e-9):.3g}x "
                  f"as long as rank {rs[fast]['rank']}; the others wait for it in MPI",
            evidence=ev,
            why="Every rank waits for the slowest at the next collective or message: the job runs at the pace "
                "of its most loaded rank.",
            fix="Balance the work (domain decomposition by cost, not size; dynamic scheduling), or look for "
                "what only the slowest rank does (I/O on rank 0, a serial section).", data=data))
    comm = mean_share - lost
    if comm >= MPI_BOUND:
        kind = "mpi_latency" if small is not None and small >= 0.5 else "mpi_bandwidth"
        what = (f"{small:.0%} of the communication time in messages under {SMALL_MESSAGE // 1024} KiB"
                if small is not None else "message sizes unknown")
        bounds.append(Bound("application", kind, comm, f"{words}; {what}", data))
        findings.append(Finding(
            id=f"profile.{kind}", status=WARN,
            title=(f"MPI latency: {mean_share:.0%} of the ranks' time in MPI, mostly small messages"
                   if kind == "mpi_latency" else
                   f"MPI bandwidth: {mean_share:.0%} of the ranks' time in MPI, mostly large messages"),
            evidence=f"{words}; {what}",
            why=("Each small message costs the network's latency whatever its size; many of them add up."
                 if kind == "mpi_latency" else
                 "Large messages move at the interconnect's bandwidth; the volume sets the time."),
            fix=("Aggregate small messages, overlap them with computation (non-blocking calls), or use fewer, "
                 "larger collectives; compare with the node's ping-pong latency ('ceiling bench network')."
                 if kind == "mpi_latency" else
                 "Send less (compression, a coarser exchange), overlap transfers with computation, or place ranks "
                 "that talk most on the same node; compare with 'ceiling bench network'."), data=data))
    return bounds, findings


def _startup(rs, share: Dict[str, float]) -> List[Finding]:
    """MPI's start-up and shut-down, when they are a large part of the ranks' life: what the
    figures of the run leave out."""
    if not share or share["mean"] < STARTUP:
        return []
    init = _spread([r["init_s"] for r in rs])
    fin = _spread([r["finalize_s"] for r in rs if r["finalize_s"] is not None])
    life = _spread([r["life_s"] for r in rs])
    known = [r["rank"] for r in rs if r["finalize_s"] is not None]
    fin_words = (f"MPI_Finalize {fin['mean']:.3g} s" if len(known) == len(rs) else
                 f"MPI_Finalize {fin['mean']:.3g} s (rank{'s' if len(known) != 1 else ''} "
                 f"{', '.join(map(str, known))}; the others' time in it is unknown: their records were "
                 "gathered inside it)" if known else "MPI_Finalize of unknown time (the records were gathered "
                 "inside it)")
    ev = (f"MPI_Init {init['mean']:.3g} s and {fin_words} per rank on average (MPI_Init "
          f"{init['min']:.3g}-{init['max']:.3g} s), of ranks that lived {life['mean']:.3g} s: "
          f"{share['mean']:.0%} of their life (min {share['min']:.0%}, max {share['max']:.0%}); "
          f"the run between them {sum(r['run_s'] for r in rs) / len(rs):.3g} s per rank")
    return [Finding(
        id="profile.mpi.startup", status=WARN,
        title=f"MPI start-up and shut-down: {share['mean']:.0%} of the ranks' life, the MPI runtime's, "
              f"not the program's",
        evidence=ev,
        why="MPI_Init waits until every rank is launched and wired up (the launcher, PMIx, the fabric's address "
            "exchange), MPI_Finalize until all are done: a cost fixed per job, not the program's work. The time "
            "in MPI and the bounds above are of the run between them; a short run is mostly start-up.",
        fix="Profile a run several times longer than the start-up (more steps, a larger case). Where start-up "
            "itself costs too much at scale, look at the launch: srun --mpi=pmix or the MPI's own launcher, "
            "and the fabric's wire-up (its version, its settings for connecting on demand).",
        data={"startup_share": share["mean"], "init_s": init["mean"], "finalize_s": fin.get("mean")})]


SINGLE_WRITER = 0.9          # one rank writing this share of the job's bytes
WRITER_MIN_BYTES = 1 << 20   # below this much written, who writes does not matter


def _single_writer(rs, share) -> List[Finding]:
    """One rank writes (nearly) everything while the others wait in MPI: the pattern that
    serialises a parallel program's output (rank 0 gathers and writes)."""
    total = sum(r["write_bytes"] for r in rs)
    if len(rs) < 2 or total < WRITER_MIN_BYTES:
        return []
    i = max(range(len(rs)), key=lambda k: rs[k]["write_bytes"])
    w = rs[i]
    if w["write_bytes"] < SINGLE_WRITER * total:
        return []
    others = [share[k] for k in range(len(rs)) if k != i]
    wait = sum(others) / len(others)
    # a run of 0 s: MPI_Init's and MPI_Finalize's times out of order (a damaged record)
    of_run = f" ({w['write_s'] / w['run_s']:.0%} of its run)" if w["run_s"] > 0 else ""
    words = (f"rank {w['rank']} wrote {w['write_bytes'] / total:.0%} of the {total / 1e6:.4g} MB the job wrote, "
             f"{w['write_s']:.3g} s inside its write calls{of_run}; the other "
             f"ranks were inside MPI {wait:.0%} of their run on average")
    return [Finding(
        id="profile.io.single_writer", status=WARN,
        title=f"A single writer: rank {w['rank']} writes {w['write_bytes'] / total:.0%} of the bytes",
        evidence=words,
        why="One rank's I/O runs at one client's bandwidth while the others wait; a parallel file system "
            "needs many writers to reach its bandwidth.",
        fix="Write per rank (a file each, or each its part of one file) or with collective MPI-IO "
            "(MPI_File_write_at_all), so that every rank, or one per node, writes.",
        data={"rank": w["rank"], "share": w["write_bytes"] / total, "bytes": total, "others_in_mpi": wait})]


def _functions(rs) -> List[Dict[str, Any]]:
    tot: Dict[str, Dict[str, float]] = {}
    for r in rs:
        for f, x in r["functions"].items():
            t = tot.setdefault(f, {"calls": 0, "ns": 0, "bytes": 0})
            for k in t:
                t[k] += x.get(k, 0)
    return [dict(fn=f, **x) for f, x in sorted(tot.items(), key=lambda kv: -kv[1]["ns"])]


def _hist(rs) -> Dict[str, Dict[str, List[int]]]:
    out: Dict[str, Dict[str, List[int]]] = {}
    for key in ("hist", "hist_ns", "hist_bytes"):
        for r in rs:
            for kind, vals in r[key].items():
                acc = out.setdefault(kind, {}).setdefault(key, [0] * len(BUCKETS))
                for i, v in enumerate(vals):
                    acc[i] += v
    return out


def _m(name: str, value: float, unit: str, context: Dict[str, Any], better: str = LOWER) -> Metric:
    return Metric.measured(name, [value], unit, better=better, context=context)
