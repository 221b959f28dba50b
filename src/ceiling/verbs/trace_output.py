"""What ``ceiling trace`` adds after the program (verbs/trace.py; verbs/profile.py calls
``conclude`` when the run is a trace): the Perfetto trace and/or the OTF2 archive written from the
event files, the time line's findings (refining the profile's where they say when; the MPI wait
states and phases, analysis/trace_waits.py), its bins kept in the run, the event files removed."""
from __future__ import annotations

import argparse
import os
import shutil
from typing import Optional


def conclude(obs, run, args: argparse.Namespace, history, wrapped=None) -> None:
    """After the program: the Perfetto trace and/or OTF2 archive written (``args.trace_path``, a
    verbs/trace_paths.TracePaths), the time line's findings and bins added to ``run``, the event files
    removed (verbs/profile.py calls it for ``ceiling trace``). A program the interposer could not
    reach (static, setuid) gets a trace of the node's counters alone, said; a trace that cannot be
    written (a full disk) is said, and the profile is kept."""
    import time

    from ..analysis.trace_bins import DOC_BINS, bins_doc, lane_pids, split_off_cpu, timeline_bins
    from ..analysis.trace_cost import cost_text, recording_cost
    from ..analysis.trace_patterns import StorageCeilings, trace_findings
    from ..analysis.trace_waits import network_ceilings, wait_findings
    from ..probes import interpose_events
    from ..probes.node_sampler import counter_tracks
    from ..probes.proc_sampler import process_tracks
    from ..report.exporters.otf2 import write_otf2
    from ..report.exporters.perfetto import write_perfetto
    from ..results import events as E
    from ..results.model import FAIL, OK, WARN, Finding
    part, where = obs.interposer, obs.interposer.trace_dir
    node = getattr(args, "trace_node", None)
    why = ""
    ranks = gathered(where, wrapped, getattr(args, "trace_share", None)) if wrapped and where else None
    try:
        # the event files as chunks read again at each pass (the Perfetto trace, the OTF2 archive, the
        # anti-patterns, the wait states, the bins): one thread's events in memory at a time
        events = interpose_events.EventSource(where) if part.used and where and os.path.isdir(where) else []
        reading = events.reading if events else None
        if not events:
            why = ("the interposer could not be put in: " + part.why if part.why else
                   "the interposer recorded no event")
        # the node's counters on the events' clock, or from the program's start where there are none
        t0 = events.t0_ns if events else int(obs.start_s * 1e9)
        counters = counter_tracks(node.reads, t0, node.interval_s) if node is not None else None
        # the program's processes' own tracks (CPUs, RSS, read and write bytes/s) in the trace files; the run and
        # its HTML keep them summed over the processes ("program ...": one set, whatever the ranks)
        sampled = getattr(obs, "sampled", None)
        per, total = process_tracks(sampled, t0, set(events.plan.ids.values()) if events else None) \
            if sampled is not None else ([], [])
        kept = E.Counters((counters.tracks if counters else []) + total,
                          counters.interval_s if counters else getattr(sampled, "interval_s", 0.0))
        counters = E.Counters(kept.tracks + per, kept.interval_s) if kept.tracks or per else None
        meta = {"command": " ".join(obs.command), "host": obs.host}
        if node is not None:
            meta["node counters"] = (f"every {node.interval_s:g} s from /proc (disks, network, CPU, PSI), "
                                     f"{len(node.reads)} reads, {node.cpu_s:.3g} s of CPU")
        if per:
            meta["process counters"] = (f"each process's CPUs in use, RSS and read and write bytes/s to storage, "
                                        f"every {sampled.interval_s:g} s from /proc ({len(per)} tracks)")
        if why:
            meta["no events"] = why
        clocks = _clocks_said(reading)
        if clocks:
            meta["clocks"] = clocks
        # the recording's own cost: its events x the cost of one measured on this node, and its write-outs
        cost = recording_cost(events.per_process() if events else {}, part.event_cost, obs.wall_s)
        meta["recording cost"] = cost_text(cost)
        meta["recording cost s"] = cost["total_s"] if "total_s" in cost else "unknown"
        base = events or [E.Events.empty(t0, time.time_ns() - (time.monotonic_ns() - t0))]
        paths = args.trace_path
        summary = otf2 = None
        failed = []
        if paths.perfetto:
            try:
                summary = write_perfetto(paths.perfetto, base, counters, meta)
            except OSError as e:
                failed.append(f"{paths.perfetto}: {e.strerror or e}")
        if paths.otf2:
            known = events.plan.proc_rank.values() if events else []     # every process's rank, from the plan
            world = max([wrapped[1] if wrapped else 0] + [r + 1 for r in known])
            try:
                otf2 = write_otf2(paths.otf2, base, counters, meta, ranks=world,
                                  library=getattr(args, "otf2_library", None))
            except OSError as e:
                failed.append(f"{paths.otf2}: {e.strerror or e}")
        # the time outside calls: computing or waiting, per sample (per thread where the sampler kept its series)
        pids = lane_pids(events) if events else {}

        def split(b):
            if b is None or not obs.sampled.series:
                return b
            return split_off_cpu(b, obs.sampled.series, pids, events.t0_ns, obs.sampled.interval_s,
                                 obs.sampled.thread_series, events)
        found = trace_findings(events, counters, _ceilings(history, StorageCeilings), split) if events else []
        found += wait_findings(events, network_ceilings(history), found) if events else []
        bins = split(timeline_bins(events, DOC_BINS) if events else None)
    finally:
        if where:
            shutil.rmtree(where, ignore_errors=True)
    _refine(run.findings, found)
    # t0_monotonic_ns: the origin of every *_s of the time line's findings, on rank 0's node's CLOCK_MONOTONIC
    data = {"timeline": bins_doc(bins) if bins is not None else None, "counters": kept.doc(),
            "t0_monotonic_ns": events.t0_ns if events else None,
            "cost": cost, **({"clocks": reading.clocks.doc()} if reading is not None and reading.clocks else {})}
    if summary is None and otf2 is None:
        run.findings.append(Finding(
            id="trace.recorded", status=FAIL, title="The trace could not be written: " + "; ".join(failed),
            evidence=f"{sum(n for n, _ in events.per_process().values()) if events else 0:,} events read; the "
                     "profile above is whole, the time line's findings "
                     f"and bins are kept in this run. {cost_text(cost)}",
            why="Without the file there is nothing to open in Perfetto or Vampir.",
            fix="Free space where --trace points, or point it elsewhere (--max-size bounds the events)",
            data=data))
        return
    first = summary or otf2
    dropped = first.dropped
    torn = interpose_events.torn_note(reading) if reading is not None else ""
    said = (f"{first.events:,} events of {first.processes} process(es), {first.threads} thread(s)"
            + (f": {summary.slices:,} calls and regions, {summary.flows:,} MPI messages; {summary.bytes:,} bytes in "
               f"{summary.path}" if summary else "")
            + (f"{'. ' if summary else ': '}{_otf2_said(otf2)}" if otf2 else "")
            + (f"; {dropped:,} events dropped by the limits (the profile counts them)" if dropped
               else "; nothing dropped")
            + (f"; {torn}" if torn else "")
            + (f". {ranks['said']}" if ranks else "")
            + (f". {clocks[0].upper()}{clocks[1:]}" if clocks else "")
            + f". {cost_text(cost)}"
            + (f"; no calls: {why}, so the trace holds the node's counters alone" if why else "")
            + (f". Not written: {'; '.join(failed)}" if failed else ""))
    written = [f"{x.path} ({x.bytes / 1e6:.3g} MB)" for x in (summary, otf2) if x is not None]
    opened = ([] if summary is None else
              ["Open the Perfetto file at https://ui.perfetto.dev (or with trace_processor): one track per rank and "
               "thread, every recorded call a slice with its file, bytes and offset, MPI messages as arrows, the "
               "node's counters underneath."]) + \
             ([] if otf2 is None else
              [f"{otf2.path} is an OTF2 archive, the format of Score-P, Vampir and Scalasca (otf2-print lists its "
               "records): a location per rank and thread, every call an Enter/Leave with its I/O operation or MPI "
               "message, the node's counters as metrics."])
    run.findings.append(Finding(
        id="trace.recorded", status=WARN if failed else OK,
        title=f"Trace written: {' and '.join(written)}" + (" - the node's counters only" if why else "")
        + (f"; not written: {'; '.join(failed)}" if failed else ""),
        evidence=said, why=" ".join(opened),
        fix="Free space where --trace points, or point it elsewhere" if failed else "",
        data={"path": first.path, "bytes": first.bytes, "events": first.events, "dropped": dropped,
              "processes": first.processes, "threads": first.threads,
              "tracer_s": (summary.tracer_ns if summary else _tracer_ns(events)) / 1e9,
              "formats": [f for f, x in (("perfetto", summary), ("otf2", otf2)) if x is not None],
              **({"otf2": _otf2_doc(otf2)} if otf2 else {}),
              **({"ranks": {k: v for k, v in ranks.items() if k != "said"}} if ranks else {}), **data}))


def _otf2_said(s) -> str:
    """The OTF2 archive in one clause: its size and what its records hold, and where libotf2 came from."""
    left = ([f"{s.unpaired:,} MPI sends or receives with no partner known get no message record"] if s.unpaired else [])
    return (f"OTF2 archive {s.path}: {s.bytes:,} bytes, {s.records:,} records ({s.enters:,} calls and regions, "
            f"{s.sends:,} MPI sends and {s.recvs:,} receives, {s.collectives:,} collectives, {s.io_ops:,} I/O "
            f"operations of {s.io_bytes:,} bytes, {s.metrics:,} counter samples)"
            + (f"; {'; '.join(left)}" if left else "") + f"; written with libotf2 ({s.library})")


def _otf2_doc(s) -> dict:
    return {k: getattr(s, k) for k in ("path", "directory", "bytes", "records", "enters", "sends", "recvs", "unpaired",
                                       "collectives", "io_ops", "io_bytes", "msg_bytes", "metrics", "clipped",
                                       "library")}


def _clocks_said(reading) -> str:
    """How the nodes' clocks were put on one time line (probes/interpose_clocks.py), where it matters: a trace
    with MPI ranks or more than one node (one process's trace has one clock by construction)."""
    c = reading.clocks if reading is not None else None
    if c is None or not c.nodes or (len(c.nodes) == 1 and not any(n.ranks for n in c.nodes)):
        return ""
    return c.said()


def _tracer_ns(events) -> int:
    """The recorder's own write-out time over every event file (EventSource.per_process)."""
    return sum(t for _, t in events.per_process().values()) if events else 0


def gathered(where: str, wrapped, share) -> dict:
    """A wrapped launch's rank 0 (``mpirun -n N ceiling trace``): which ranks' event files its
    interposer received at MPI_Finalize (csrc/interpose/mpi_trace.c's trace-gathered lines), what
    could not be written, and what is not in the trace by construction: what the other ranks
    recorded after their MPI_Finalize (each one's ceiling says how many on its standard error)."""
    got: dict = {}
    try:
        with open(os.path.join(where, "trace-gathered")) as f:
            for line in f:
                kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
                if kv.get("rank", "").isdigit():
                    got[int(kv["rank"])] = {k: int(v) for k, v in kv.items() if k != "rank" and v.isdigit()}
    except OSError:
        pass
    size = wrapped[1]
    missing = [r for r in range(1, size) if r not in got]
    unwritten = sum(v.get("unwritten", 0) for v in got.values())
    words = [f"rank 0 received the event files of {len(got)} of the {size - 1} other rank(s) at their MPI_Finalize"]
    if missing:
        words.append(f"not those of rank(s) {', '.join(map(str, missing[:16]))}"
                     + (f" and {len(missing) - 16} more" if len(missing) > 16 else "")
                     + " (not every rank reached MPI_Finalize under ceiling within 30 s, or it ended before)")
    if unwritten:
        words.append(f"{unwritten:,} bytes of them could not be written here (a full disk?) and are not in the trace")
    if size > 1:
        words.append(f"what the {size - 1} other rank(s) recorded after their MPI_Finalize (its end, their exit, "
                     "any child process still running) cannot reach rank 0 and is not in the trace: each rank's "
                     "ceiling says how many events on its standard error")
    if share:
        words.append(f"--max-size was shared out: {share[0]:,} bytes of events per rank, {share[1]} ranks")
    return {"received": sorted(got), "missing": missing, "unwritten_bytes": unwritten, "size": size,
            "said": "; ".join(words)}


def left_behind(obs, rank: int, paths=None) -> None:
    """A wrapped rank other than 0: its events went to rank 0's ceiling at MPI_Finalize (trace-sent
    lists what was sent); what it recorded after (its MPI_Finalize's end, its exit, a child still
    running then) or everything, if nothing was sent, is counted and said on standard error, and its
    directory removed. Where nothing was sent (its program died before MPI_Finalize: the launcher
    then stops the job, rank 0's ceiling with it), its own events are kept as a Perfetto trace of
    their own beside the one asked for (``paths``, verbs/trace_paths.TracePaths: -rank<R> before its
    extension), said on the same line."""
    import sys

    import numpy as np

    from ..probes import interpose_events as IE
    where = obs.interposer.trace_dir
    if not where or not os.path.isdir(where):
        return
    try:
        sent: dict = {}
        try:
            with open(os.path.join(where, "trace-sent")) as f:
                for line in f:
                    name, _, n = line.rstrip("\n").rpartition(" ")
                    if n.isdigit():
                        sent[name] = int(n)
            sent_list = True
        except OSError:
            sent_list = False
        late = 0
        for path in IE.event_files(where):
            at = max(sent.get(os.path.basename(path), 0), IE.HEADER_BYTES)
            try:
                with open(path, "rb") as f:
                    f.seek(at)
                    raw = f.read()
            except OSError:
                continue
            ev = np.frombuffer(raw[:len(raw) - len(raw) % IE.EVENT.itemsize], dtype=IE.EVENT)
            late += int(np.sum(np.isin(ev["kind"], (IE.EV_CALL, IE.EV_INSTANT, IE.EV_REGION))))
        line = (f"ceiling: rank {rank}: {late} event(s) recorded after its MPI_Finalize (its end, the exit) are "
                "not in rank 0's trace" if sent_list and late else "" if sent_list else
                f"ceiling: rank {rank}: its {late} event(s) did not reach rank 0's trace (its program did not "
                "reach MPI_Finalize with every rank under ceiling trace)")
        if not sent_list and late:
            line += _own_trace(where, rank, paths)
        if line:
            sys.stderr.write(line + "\n")           # one write: the ranks' lines share the launcher's stderr
            sys.stderr.flush()
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _own_trace(where: str, rank: int, paths) -> str:
    """A rank's own events as a Perfetto trace beside the one asked for (``paths.perfetto``, or the OTF2
    archive's directory name with .pftrace): "; kept in PATH", or why not, for its line."""
    from ..errors import StoreError
    from ..probes import interpose_events as IE
    from ..report.exporters.perfetto import write_perfetto
    asked = (paths.perfetto or (paths.otf2 and paths.otf2.rstrip("/") + ".pftrace")) if paths is not None else None
    if not asked:
        return ""
    root, ext = os.path.splitext(asked)
    out = f"{root}-rank{rank}{ext or '.pftrace'}"
    try:
        s = write_perfetto(out, IE.EventSource(where), None, {"rank": rank, "kept": "this rank's own events: its "
                           "program did not reach MPI_Finalize, so they never went to rank 0's trace"})
    except (OSError, StoreError) as e:
        return f"; they could not be kept in {out}: {getattr(e, 'strerror', None) or e}"
    return f"; kept in {out} ({s.events:,} events)"


def _ceilings(history, cls):
    """This node's storage ceilings from the history's newest rows (the best of each kind)."""
    def best(prefix: str) -> Optional[float]:
        vals = [r[1] for r in history(prefix) if isinstance(r[1], (int, float))]
        return max(vals) if vals else None
    meta = [v for v in (best("storage.md.create"), best("storage.md.stat"), best("storage.md.unlink")) if v]
    return cls(write_mbs=best("storage.seq.write."), read_mbs=best("storage.seq.read."),
               meta_ops=min(meta) if meta else None, source="this node's history (ceiling bench storage)")


def _refine(findings: list, found: list) -> None:
    """The time line's findings into the run: one that refines a whole-run finding of the profile
    (``data["refines"]``: the single writer) takes its place, keeping the profile's id."""
    for f in found:
        old = (f.data or {}).get("refines")
        at = next((i for i, g in enumerate(findings) if old and g.id == old), None)
        if at is None:
            findings.append(f)
        else:
            f.data = {**(findings[at].data or {}), **f.data}
            f.id = old
            findings[at] = f
