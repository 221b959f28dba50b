"""What recording one event costs on this node (``ceiling trace`` multiplies it by the events
it recorded and adds the tracer's own write-out time, which the recorder measures itself).

The way probes/interpose_cost.py measures the interposer's cost per call: dd copies /dev/zero to
/dev/null one byte at a time (two intercepted calls per byte, each one event when traced), once
with the interposer counting only and once counting and tracing into a private directory
(CEILING_TRACE_DIR, the default buffer of 4096 events a thread, no limit), each way with no
bytes and with COUNT bytes, so that only the slope enters (start-up, the buffer's mapping and
the last write-out at exit are in both). Each run is dd's CPU time (wait4's rusage), the best of
ROUNDS, the ways alternating. The traced runs' events and the tracer's own time (the write-outs,
from the clock events of their files: probes/interpose_events.py) are read back: the write-outs
are taken off, since a trace states its own write-out time apart, so the figure is the cost of
putting an event into the thread's buffer (the limits' checks, the clock read, the 48 bytes)::

    per_event = (slope_traced - slope_counting - tracer_slope) / events_slope

Kept in the same cache as the per-call cost (one entry per build of the interposer and host),
so a trace measures it once: about twelve runs of dd and 20 MB written and removed.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, Optional, Tuple

from ..errors import StoreError
from ..files.private import temporary_dir
from .interpose_cost import _cached, _time     # dd's CPU time from wait4, run as the per-call cost runs it

COUNT = 200_000        # bytes: 400,000 events, 19 MB of event files, a few tens of ms of dd
ROUNDS = 3
CACHE_VERSION = 1      # the entry's layout and the method above; another value is measured again


def _figure(doc: dict) -> bool:
    per = doc.get("per_event_ns")
    return not isinstance(per, bool) and isinstance(per, (int, float)) and 0 <= per < 1e9


def measure(lib: Path, count: int = COUNT, rounds: int = ROUNDS, cache: bool = True) -> Dict[str, object]:
    """{"per_event_ns": float or None, "how": words, "why": why it is None, "cached": bool}: from the
    cache when this build of ``lib`` was measured on this host, else measured (and kept)."""
    return _cached(lib, cache, "trace-event-cost", ("per_event_ns",), _figure, CACHE_VERSION,
                   lambda: _measure(lib, count, rounds))


def _measure(lib: Path, count: int, rounds: int) -> Dict[str, object]:
    dd = shutil.which("dd")
    if dd is None:
        return {"per_event_ns": None, "why": "dd is not installed: nothing to calibrate with"}
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("CEILING_")}
    best: Dict[Tuple[str, int], Tuple[float, float, int]] = {}      # (cpu s, tracer s, events) of the best run
    with temporary_dir("ceiling-tracecost-") as tmp:
        for r in range(rounds):
            for way in ("counting", "traced"):
                for n in (0, count):
                    d = Path(tmp) / f"{way}-{n}-{r}"
                    d.mkdir(mode=0o700)
                    env = dict(base, LD_PRELOAD=str(lib), CEILING_INTERPOSE_OUT=str(d / "r.%p"))
                    if way == "traced":
                        env["CEILING_TRACE_DIR"] = str(d)
                    cpu = _time(dd, n, env)
                    if cpu is None:
                        return {"per_event_ns": None, "why": "dd failed under the interposer"}
                    got = _events(d) if way == "traced" else (0.0, 0)
                    shutil.rmtree(d, ignore_errors=True)
                    if got is None:
                        return {"per_event_ns": None, "why": "the traced calibration run left no readable events"}
                    if (way, n) not in best or cpu < best[(way, n)][0]:
                        best[(way, n)] = (cpu, got[0], got[1])
    slope = {w: best[(w, count)][0] - best[(w, 0)][0] for w in ("counting", "traced")}
    tracer = best[("traced", count)][1] - best[("traced", 0)][1]
    events = best[("traced", count)][2] - best[("traced", 0)][2]
    if events <= 0:
        return {"per_event_ns": None, "why": f"the traced calibration run recorded no more events with {count} "
                                             "bytes than with none"}
    per = (slope["traced"] - slope["counting"] - tracer) / events * 1e9
    if per <= 0:            # the noise of the runs larger than what the recording added: no figure, not kept
        return {"per_event_ns": None, "why": f"the traced runs were not slower than the counting ones ({per:.3g} ns "
                                             f"an event over {events:,} events): the node's noise hid the cost"}
    return {"per_event_ns": per,
            "how": f"dd of {count} single bytes /dev/zero to /dev/null traced ({events:,} events) against counting "
                   f"only, CPU time, best of {rounds} alternating runs, start-up and the tracer's own write-out "
                   f"time ({tracer * 1e3:.3g} ms) subtracted"}


def _events(d: Path) -> Optional[Tuple[float, int]]:
    """(the tracer's own seconds, events) of the event files in ``d``."""
    from . import interpose_events
    try:
        chunks = [ev for ev, _ in interpose_events.iter_chunks(str(d))]
    except (StoreError, OSError, ValueError):        # a file the reader refuses: no figure, said by the caller
        return None
    if not chunks:
        return None
    return sum(c.tracer_ns for c in chunks) / 1e9, sum(len(c) for c in chunks)

