"""What recording a trace cost the program, stated on every trace (the ``trace.recorded`` finding's
``data["cost"]``, its evidence on the terminal page, the HTML time line's note, the Perfetto
trace's own track).

Two parts, both measured, never guessed:

- putting the events into the threads' buffers: the events recorded times the cost of one event
  measured on this node for this build of the interposer (probes/trace_cost.py: dd traced against
  dd counting, CPU time, the write-outs taken off);
- the tracer's own time: the write-outs of full buffers, which the recorder times itself (the
  clock events of each thread's file), and in a wrapped MPI launch the clocks' sync at MPI_Init
  and MPI_Finalize (its SYNC events, csrc/interpose/mpi_clock.c). The last write-out of each
  thread (at its exit) is reported by no later clock event, so it is not in that figure: said
  with it.

The share of the run is the busiest process's (its events and write-outs over the run's wall
time), as the profile states the interposer's cost: processes record beside each other. In a
tightly coupled job one rank's write-out holds the others at the next collective, so the job
can lose up to the sum over ranks (benchmarks/trace_end_to_end.py measures a barrier loop). Without
a per-event figure (dd missing, a job stopped before it was measured) the cost is unknown, with
the reason, and the write-out time alone is given for what it is.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple


def recording_cost(per_process: Mapping[int, Tuple[int, int]], event_cost: Mapping[str, object],
                   wall_s: Optional[float]) -> Dict[str, object]:
    """``per_process``: pid -> (events recorded, the tracer's own ns); ``event_cost``: probes/trace_cost's
    answer ({} when not measured). The cost as the run keeps it (see the module docstring)."""
    events = sum(n for n, _ in per_process.values())
    tracer_s = sum(t for _, t in per_process.values()) / 1e9
    out: Dict[str, object] = {"events": int(events), "tracer_s": tracer_s, "processes": len(per_process),
                              "wall_s": wall_s}
    per = event_cost.get("per_event_ns") if event_cost else None
    if not isinstance(per, (int, float)) or isinstance(per, bool):
        out["why"] = str((event_cost or {}).get("why") or "the cost of one event was not measured in this run")
        return out
    out["per_event_ns"] = float(per)
    out["how"] = str(event_cost.get("how", ""))
    out["recording_s"] = per * events / 1e9
    out["total_s"] = out["recording_s"] + tracer_s
    busiest = max(((n * per / 1e9 + t / 1e9, pid) for pid, (n, t) in per_process.items()), default=(0.0, None))
    out["busiest_s"], out["busiest_pid"] = busiest
    out["fraction"] = busiest[0] / wall_s if wall_s else None
    return out


def cost_text(cost: Optional[Mapping[str, object]]) -> str:
    """One sentence for the terminal page, the HTML time line and the Perfetto trace."""
    if not cost:
        return "Recording cost: unknown (this run kept no figure of it)"
    own = (f"the tracer's own time {_time(float(cost.get('tracer_s') or 0))} (writing its buffers out, and the "
           "clocks' sync where ranks measured them), measured by the recorder (the last write-out of each thread, "
           "at its exit, is not timed)")
    n = int(cost.get("events") or 0)
    if cost.get("per_event_ns") is None:
        return (f"Recording cost: unknown for the {n:,} events recorded ({cost.get('why') or 'not measured'}); "
                + own)
    frac = cost.get("fraction")
    share = (f", {frac:.2%} of the run in its busiest process" if isinstance(frac, float) else
             ", its share of the run unknown (no wall time)")
    return (f"Recording cost: about {_time(float(cost['total_s']))}{share}: {n:,} events x "
            f"{float(cost['per_event_ns']):.3g} ns per event measured on this node ({cost.get('how')}), plus "
            + own)


def _time(s: float) -> str:
    return f"{s:.3g} s" if s >= 1 else f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} µs"
