"""What ``ceiling trace`` adds after the program (verbs/trace.py; verbs/profile.py calls
``conclude`` when the run is a trace): the Perfetto trace written from the event files, the
time line's findings (refining the profile's where they say when), its bins kept in the run,
the event files removed."""
from __future__ import annotations

import argparse
import os
import shutil
from typing import Optional


def conclude(obs, run, args: argparse.Namespace, history) -> None:
    """After the program: the Perfetto trace written, the time line's findings and bins added to
    ``run``, the event files removed (verbs/profile.py calls it for ``ceiling trace``)."""
    from ..analysis.trace_bins import DOC_BINS, bins_doc, timeline_bins
    from ..analysis.trace_patterns import StorageCeilings, trace_findings
    from ..probes import interpose_events
    from ..probes.node_sampler import counter_tracks
    from ..report.exporters.perfetto import write_perfetto
    from ..results.model import OK, SKIPPED, Finding
    part = obs.interposer
    where = part.trace_dir
    try:
        if not part.used or not where or not os.path.isdir(where):
            why = part.why or "the interposer wrote no events"
            run.findings.append(Finding(id="trace.recorded", status=SKIPPED, title="No events were recorded: " + why,
                                        evidence=f"{obs.command[0] if obs.command else ''}: {why}; the profile "
                                                 "rests on /proc alone, and no trace was written"))
            return
        chunks = lambda: (ev for ev, _ in interpose_events.iter_chunks(where))    # noqa: E731 (read twice)
        events = [ev for ev in chunks()]
        node = getattr(args, "trace_node", None)
        counters = (counter_tracks(node.reads, events[0].t0_ns, node.interval_s) if node is not None and events
                    else None)
        meta = {"command": " ".join(obs.command), "host": obs.host}
        if node is not None:
            meta["node counters"] = (f"every {node.interval_s:g} s from /proc (disks, network, CPU, PSI), "
                                     f"{len(node.reads)} reads, {node.cpu_s:.3g} s of CPU")
        summary = write_perfetto(args.trace_path, events or chunks(), counters, meta)
        found = trace_findings(events, counters, _ceilings(history, StorageCeilings))
        bins = timeline_bins(events, DOC_BINS)
        _, reading = next(iter(interpose_events.iter_chunks(where)), (None, None))
    finally:
        if where:
            shutil.rmtree(where, ignore_errors=True)
    _refine(run.findings, found)
    dropped = summary.dropped
    said = (f"{summary.events:,} events of {summary.processes} process(es), {summary.threads} thread(s): "
            f"{summary.slices:,} calls and regions, {summary.flows:,} MPI messages; {summary.bytes:,} bytes in "
            f"{summary.path}" + (f"; {dropped:,} events dropped by the limits (the profile counts them)"
                                 if dropped else "; nothing dropped")
            + (f"; {interpose_events.torn_note(reading)}" if reading is not None and interpose_events.torn_note(reading)
               else "")
            + f"; the tracer's own time {summary.tracer_ns / 1e9:.3g} s")
    run.findings.append(Finding(
        id="trace.recorded", status=OK, title=f"Trace written: {summary.path} ({summary.bytes / 1e6:.3g} MB)",
        evidence=said, why="Open it at https://ui.perfetto.dev (or with trace_processor): one track per rank and "
                           "thread, every recorded call a slice with its file, bytes and offset, MPI messages as "
                           "arrows.",
        data={"path": summary.path, "bytes": summary.bytes, "events": summary.events, "dropped": dropped,
              "processes": summary.processes, "threads": summary.threads, "tracer_s": summary.tracer_ns / 1e9,
              "timeline": bins_doc(bins), "counters": counters_doc(counters)}))


TRACK_POINTS = 600          # samples a counter track keeps in the run (the time line's columns)


def counters_doc(counters) -> list:
    """The node's tracks as the run keeps them, for the time line drawn again: at most
    TRACK_POINTS samples each (the mean of consecutive ones beyond)."""
    import numpy as np
    out = []
    for t in (counters.tracks if counters else ()):
        ts, v = np.asarray(t.ts, np.int64), np.asarray(t.value, np.float64)
        if len(ts) > TRACK_POINTS:
            cut = np.linspace(0, len(ts), TRACK_POINTS + 1).astype(int)
            ts = (np.add.reduceat(ts, cut[:-1]) // np.diff(cut)).astype(np.int64)
            v = np.add.reduceat(v, cut[:-1]) / np.diff(cut)
        out.append({"name": t.name, "unit": t.unit, "scope": t.scope, "device": t.device,
                    "ts_ns": ts.tolist(), "value": [round(float(x), 6) for x in v]})
    return out


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
