"""How fast and how small the Perfetto writer is (issue 28's goals: 10^7 events in at most 20 s,
at most 64 bytes per I/O call, memory bounded).

Each round runs in a fresh process (so its peak RSS is its own) and writes N events (default 10^7)
given as chunks of 10^6: 8 threads of 2 ranks, 90% pread/pwrite on 4 files (4 KiB to 1 MiB, 2-50 µs
apart), 10% MPI_Isend/MPI_Recv pairs between the ranks (so flows are made too). A chunk is one
template whose timestamps are shifted (one vector add, counted in the time). Reported per round:
wall and CPU seconds, events/s, bytes per event, peak RSS; then the median and the spread
(min-max) over the rounds. Bytes per I/O call come from a second file of I/O calls only.

    .venv/bin/python benchmarks/perfetto_writer.py [--events 1e7] [--rounds 5] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

CHUNK = 1_000_000


def template(io_only: bool):
    from ceiling.probes import interpose_names
    from ceiling.results import events as E
    calls = interpose_names.names().calls
    fid = {c.fn: c.id for c in calls}
    rng = np.random.default_rng(28)
    n = CHUNK
    cols = {k: np.full(n, -1 if np.issubdtype(d, np.signedinteger) else 0, d) for k, d in E.COLUMNS.items()}
    gap = rng.integers(2_000, 50_000, n)
    ts = np.cumsum(gap) // 8                      # 8 threads share the time line
    thread = rng.integers(0, 8, n).astype(np.int32)
    pid = 1000 + thread // 4
    kind = np.where(rng.random(n) < 0.5, E.IO_WRITE, E.IO_READ).astype(np.uint8)
    nbytes = rng.choice([4096, 65536, 1 << 20], n)
    dur = np.diff(ts, append=ts[-1] + 1000) // 2        # each call ends before the next row starts
    cols.update(ts=ts, dur=dur, pid=pid.astype(np.int32), tid=(pid * 10 + thread % 4),
                rank=(pid - 1000).astype(np.int32), kind=kind,
                call=np.where(kind == E.IO_WRITE, fid["pwrite"], fid["pread"]).astype(np.uint16),
                file=rng.integers(0, 4, n).astype(np.int32), offset=rng.integers(0, 64 << 30, n), nbytes=nbytes,
                result=nbytes)
    if not io_only:
        mpi = rng.random(n) < 0.1
        send = mpi & (cols["rank"] == 0)
        recv = mpi & (cols["rank"] == 1)
        for m, fn in ((send, "MPI_Isend"), (recv, "MPI_Recv")):
            cols["kind"][m] = E.MPI_P2P
            cols["call"][m] = fid[fn]
            cols["peer"][m] = 1 - cols["rank"][m]
            cols["file"][m], cols["offset"][m] = -1, -1
            cols["tag"][m], cols["comm"][m], cols["result"][m] = 3, 0, 0
    ev = E.Events(0, 0, cols, calls=calls, files=[f"/scratch/run/part{i}.dat" for i in range(4)],
                  comms=[E.Comm("MPI_COMM_WORLD", [0, 1])],
                  processes={1000 + r: E.Process(1000 + r, 1, "node01", r, "/bin/app") for r in range(2)})
    ev.sort()
    return ev


def chunks(ev, total):
    from ceiling.results import events as E
    span = int(ev.ts[-1]) + 1_000_000
    for i in range(0, total, CHUNK):
        k = min(CHUNK, total - i)
        cols = {name: (c[:k] + (i // CHUNK) * span if name == "ts" else c[:k]) for name, c in ev.columns.items()}
        yield E.Events(ev.t0_ns, ev.t0_unix_ns, cols, ev.calls, ev.files, ev.regions, ev.comms, ev.processes,
                       ev.threads)


def one_round(total: int, io_only: bool, where: str) -> dict:
    from ceiling.report.exporters.perfetto import write_perfetto
    ev = template(io_only)
    path = os.path.join(where, f"bench{os.getpid()}.pftrace")
    c0, t0 = time.process_time(), time.perf_counter()
    s = write_perfetto(path, chunks(ev, total))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    os.unlink(path)
    return {"events": s.events, "wall_s": wall, "cpu_s": cpu, "bytes": s.bytes, "flows": s.flows,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e7)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--one", choices=("mixed", "io"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    total = int(a.events)
    if a.one:
        print(json.dumps(one_round(total, a.one == "io", a.dir)))
        return
    rounds = []
    for i in range(a.rounds):
        out = subprocess.run([sys.executable, __file__, "--one", "mixed", "--events", str(total), "--dir", a.dir],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        rounds.append(r)
        print(f"round {i + 1}: {r['events']:,} events in {r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU "
              f"({r['events'] / r['wall_s'] / 1e6:.2f} M events/s), {r['bytes'] / r['events']:.1f} B/event, "
              f"peak RSS {r['peak_rss_mib']:.0f} MiB")
    for key, unit in (("wall_s", "s"), ("cpu_s", "s"), ("peak_rss_mib", "MiB")):
        v = [r[key] for r in rounds]
        print(f"{key}: median {statistics.median(v):.2f} {unit}, min {min(v):.2f}, max {max(v):.2f} "
              f"over {len(v)} rounds")
    rate = [r["events"] / r["wall_s"] / 1e6 for r in rounds]
    print(f"events/s: median {statistics.median(rate):.2f} M, min {min(rate):.2f}, max {max(rate):.2f}")
    io = json.loads(subprocess.run([sys.executable, __file__, "--one", "io", "--events", str(min(total, 2 * CHUNK)),
                                    "--dir", a.dir], check=True, capture_output=True, text=True).stdout)
    print(f"I/O calls only: {io['bytes'] / io['events']:.1f} bytes per call ({io['events']:,} calls on 4 files)")


if __name__ == "__main__":
    main()
