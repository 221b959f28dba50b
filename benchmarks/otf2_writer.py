"""How fast and how small the OTF2 writer is (issue 29's goals: 10^7 events in at most 20 s, at most
128 bytes per I/O call, memory bounded), and why it is C: the otf2 package's Python bindings' cost
per record.

The workload is benchmarks/perfetto_writer.py's, so the two writers compare: N events (default 10^7)
given as chunks of 10^6, 8 threads of 2 ranks, 90% pread/pwrite on 4 files (4 KiB to 1 MiB), 10%
MPI_Isend/MPI_Recv pairs between the ranks. Each round runs in a fresh process (its peak RSS its own)
and writes the archive with report/exporters/otf2.write_otf2 (csrc/trace/otf2*.c through libotf2).
Reported per round: wall and CPU seconds, events/s, bytes per event, peak RSS and the most bytes
libotf2's buffers held; then the median and the spread (min-max) over the rounds. Bytes per I/O
call come from a second archive of I/O calls only (each: Enter, IoOperationBegin,
IoOperationComplete, Leave).

The bindings: Enter/Leave pairs written one call per record with the otf2 package's high-level
writer (otf2.writer) and its ctypes layer (_otf2), microseconds per record, best of 3, and what 4
records per event would cost for N events.

    .venv/bin/python benchmarks/otf2_writer.py [--events 1e7] [--rounds 5] [--dir /tmp] [--bindings 20000]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perfetto_writer import CHUNK, chunks, template  # noqa: E402  (the same workload as the Perfetto writer's)


def one_round(total: int, io_only: bool, where: str) -> dict:
    from ceiling.report.exporters.otf2 import write_otf2
    ev = template(io_only)
    path = os.path.join(where, f"bench{os.getpid()}-otf2")
    c0, t0 = time.process_time(), time.perf_counter()
    s = write_otf2(path, chunks(ev, total), ranks=2)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    shutil.rmtree(path)
    return {"events": s.events, "wall_s": wall, "cpu_s": cpu, "bytes": s.bytes, "records": s.records,
            "io_ops": s.io_ops, "buffer_peak": s.buffer_peak, "library": s.library,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def bindings(n: int, where: str) -> dict:
    """Microseconds per record through the otf2 package's Python bindings (best of 3)."""
    import _otf2
    import otf2
    from otf2.enums import Paradigm, RegionRole
    best = {"otf2.writer": float("inf"), "_otf2": float("inf")}
    for _ in range(3):
        d = os.path.join(where, f"hl{os.getpid()}")
        with otf2.writer.open(d, timer_resolution=10**9) as tr:
            node = tr.definitions.system_tree_node("node")
            group = tr.definitions.location_group("rank 0", system_tree_parent=node)
            loc = tr.definitions.location("main", group=group)
            reg = tr.definitions.region("pwrite", paradigm=Paradigm.USER, region_role=RegionRole.FILE_IO)
            ew = tr.event_writer_from_location(loc)
            t0 = time.perf_counter()
            for i in range(n):
                ew.enter(10 * i, reg)
                ew.leave(10 * i + 5, reg)
            best["otf2.writer"] = min(best["otf2.writer"], (time.perf_counter() - t0) / (2 * n))
        shutil.rmtree(d)
        d = os.path.join(where, f"ll{os.getpid()}")
        ar = _otf2.Archive_Open(d, "traces", _otf2.FILEMODE_WRITE, 1 << 20, 4 << 20, _otf2.SUBSTRATE_POSIX,
                                _otf2.COMPRESSION_NONE)
        cb = _otf2.FlushCallbacks(pre_flush=lambda *a: _otf2.FLUSH, post_flush=None)
        _otf2.Archive_SetFlushCallbacks(ar, cb, None)
        _otf2.Archive_SetSerialCollectiveCallbacks(ar)
        _otf2.Archive_OpenEvtFiles(ar)
        w = _otf2.Archive_GetEvtWriter(ar, 0)
        t0 = time.perf_counter()
        for i in range(n):
            _otf2.EvtWriter_Enter(w, None, 10 * i, 0)
            _otf2.EvtWriter_Leave(w, None, 10 * i + 5, 0)
        best["_otf2"] = min(best["_otf2"], (time.perf_counter() - t0) / (2 * n))
        _otf2.Archive_CloseEvtWriter(ar, w)
        _otf2.Archive_CloseEvtFiles(ar)
        _otf2.Archive_Close(ar)
        shutil.rmtree(d)
    return {k: v * 1e6 for k, v in best.items()}


def _sub(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e7)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--bindings", type=int, default=20000, help="Enter/Leave pairs through the Python bindings "
                                                                 "(0: do not measure them)")
    ap.add_argument("--one", choices=("mixed", "io", "bindings"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    total = int(a.events)
    if a.one == "bindings":
        print(json.dumps(bindings(a.bindings, a.dir)))
        return
    if a.one:
        print(json.dumps(one_round(total, a.one == "io", a.dir)))
        return
    rounds = []
    for i in range(a.rounds):
        r = _sub("--one", "mixed", "--events", str(total), "--dir", a.dir)
        rounds.append(r)
        print(f"round {i + 1}: {r['events']:,} events ({r['records']:,} records) in {r['wall_s']:.2f} s wall, "
              f"{r['cpu_s']:.2f} s CPU ({r['events'] / r['wall_s'] / 1e6:.2f} M events/s), "
              f"{r['bytes'] / r['events']:.1f} B/event, peak RSS {r['peak_rss_mib']:.0f} MiB, "
              f"libotf2's buffers {r['buffer_peak'] / 2**20:.1f} MiB at most")
    for key, unit in (("wall_s", "s"), ("cpu_s", "s"), ("peak_rss_mib", "MiB")):
        v = [r[key] for r in rounds]
        print(f"{key}: median {statistics.median(v):.2f} {unit}, min {min(v):.2f}, max {max(v):.2f} "
              f"over {len(v)} rounds")
    rate = [r["events"] / r["wall_s"] / 1e6 for r in rounds]
    print(f"events/s: median {statistics.median(rate):.2f} M, min {min(rate):.2f}, max {max(rate):.2f}")
    io = _sub("--one", "io", "--events", str(min(total, 2 * CHUNK)), "--dir", a.dir)
    print(f"I/O calls only: {io['bytes'] / io['events']:.1f} bytes per call ({io['events']:,} calls on 4 files, "
          f"{io['io_ops']:,} I/O operations)")
    print(f"libotf2: {rounds[0]['library']}")
    if a.bindings:
        try:
            b = _sub("--one", "bindings", "--bindings", str(a.bindings), "--dir", a.dir)
        except subprocess.CalledProcessError as e:
            print(f"the otf2 package's Python bindings: not measured ({(e.stderr or '').strip().splitlines()[-1:]})")
            return
        for k, us in b.items():
            print(f"the otf2 package's Python bindings ({k}): {us:.2f} us per record; {total:,} events of 4 records "
                  f"would take {us * 4 * total / 1e6:.0f} s")


if __name__ == "__main__":
    main()
