"""A quick measurement of a ceiling the history lacks, for ``ceiling profile``: the program
did enough I/O to be compared with the storage, or its counters gave a memory traffic,
and this node has no run that measured that ceiling.

Memory: `bench memory --quick`'s STREAM (arrays sized by STREAM's rule, every CPU the
profile may use, 5 repetitions), after the program ended; its Triad is the ceiling.

Sequential bandwidth, measured after the program ended, in the directory of the file it
spent the most time writing (else reading, else its working directory), where the
program's own I/O went: one thread, QUICK_BYTES in QUICK_XFER requests, O_DIRECT where
the file system allows (else buffered, with fsync and the page cache dropped for the
file, as `bench storage` does), write then read back with every block checked, best of
QUICK_REPS. That is `bench storage`'s file-per-process pattern at one thread: a lower
bound of what the storage can do with more streams, and said so. The files go into a
new ceiling-io-* directory there, removed whatever happens; nothing is measured when
the directory lacks room or refuses a write.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional, Tuple

MIB = 1 << 20
QUICK_BYTES = 256 * MIB
QUICK_XFER = MIB
QUICK_REPS = 3
FREE_MARGIN = 2.0          # the directory must have twice what is written

Row = Tuple[str, Optional[float], str, str, str]


def where(files: Dict[str, Any], cwd: str) -> str:
    """The directory of the file the program spent the most time writing (else reading), else
    cwd; only a directory that exists and is writable now."""
    shown = (files or {}).get("shown") or []
    for key in ("write_s", "read_s"):
        for f in sorted(shown, key=lambda f: -f[key]):
            d = os.path.dirname(f["path"])
            if f[key] > 0 and os.path.isabs(d) and os.path.isdir(d) and os.access(d, os.W_OK):
                return d
    return cwd


def storage(directory: str) -> Tuple[Dict[str, Row], Dict[str, Any]]:
    """({"storage.seq.write.": row, "storage.seq.read.": row}, how) measured now in directory,
    or ({}, {"why": ...}) when it could not be."""
    from ..bench.storage_dir import RunDir, free_bytes
    from ..core.io import DirectRefused, seq_io
    from ..errors import CeilingError
    how: Dict[str, Any] = {"dir": directory, "threads": 1, "bytes": QUICK_BYTES, "xfer_bytes": QUICK_XFER,
                           "reps": QUICK_REPS}
    try:
        if free_bytes(directory) < FREE_MARGIN * QUICK_BYTES:
            return {}, {**how, "why": f"{directory} has less than {FREE_MARGIN * QUICK_BYTES / MIB:.0f} MiB free"}
        t0 = time.monotonic()
        with RunDir(directory) as rd:
            kw = dict(nthreads=1, bytes_per_thread=QUICK_BYTES, xfer=QUICK_XFER, reps=QUICK_REPS, tag="profile")
            try:
                raw, how["io"] = seq_io(rd.path, direct=True, **kw), "direct"
            except DirectRefused as e:
                raw, how["io"], how["direct_refused"] = seq_io(rd.path, direct=False, **kw), "buffered", str(e)
        how["seconds"] = time.monotonic() - t0
    except (CeilingError, OSError) as e:
        return {}, {**how, "why": f"{directory}: {e}"}
    except KeyboardInterrupt:              # the profile is kept: only this figure is given up
        return {}, {**how, "why": "interrupted (Ctrl-C)"}
    now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    rows: Dict[str, Row] = {}
    for phase, what in ((0, "write"), (1, "read")):
        rates = raw.rates(phase, 1 / MIB)
        if rates:
            rows[f"storage.seq.{what}."] = (f"storage.seq.{what}.fpp (quick)", max(rates), "MiB/s", now, "")
    return rows, how


def memory(machine) -> Tuple[Dict[str, Row], Dict[str, Any]]:
    """({"stream.triad": row}, how) measured now, or ({}, {"why": ...})."""
    from ..bench.memory import bench_stream
    from ..errors import CeilingError
    from ..results.measure import Context, Options
    cpus = sorted(machine.affinity) or sorted(os.sched_getaffinity(0))
    how: Dict[str, Any] = {"threads": len(cpus), "what": "memory"}
    t0 = time.monotonic()
    try:
        out = bench_stream(Context(machine, Options(quick=True), cpus))
    except CeilingError as e:
        return {}, {**how, "why": str(e)}
    except KeyboardInterrupt:
        return {}, {**how, "why": "interrupted (Ctrl-C)"}
    how["seconds"] = time.monotonic() - t0
    m = next((m for m in out.metrics if m.name == "stream.triad"), None)
    if m is None or m.value is None or not m.valid:
        return {}, {**how, "why": "STREAM Triad gave no valid figure" + (f" ({m.note})" if m and m.note else "")}
    how["reps"] = len(m.values)
    now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    return {"stream.triad": ("stream.triad (quick)", m.value, m.unit, now, "")}, how


def words(how: Dict[str, Any]) -> str:
    """How a quick figure was measured, for the comparison's source."""
    if how.get("what") == "memory":
        return (f"measured now by this profile in {how.get('seconds', 0):.2g} s: STREAM Triad as 'ceiling bench "
                f"memory --quick' measures it, {how['threads']} threads, best of {how.get('reps', '?')}")
    return (f"measured now by this profile in {how['dir']} in {how.get('seconds', 0):.2g} s: {how['threads']} "
            f"thread, {how['bytes'] // MIB} MiB in {how['xfer_bytes'] // MIB} MiB requests, {how.get('io', '?')}, "
            f"best of {how['reps']}; one stream, so a lower bound of the storage ('ceiling bench storage --dir "
            f"{how['dir']}' measures it fully)")
