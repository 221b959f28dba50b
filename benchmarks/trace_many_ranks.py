"""Many processes' event files merged into one trace: issue 29's "64 ranks x 10^5 events in under 10 s here,
memory bounded".

    .venv/bin/python benchmarks/trace_many_ranks.py [--procs 64] [--events 100000] [--rounds 3] [--dir /var/tmp]
                                                     [--otf2]

Recording: --procs processes of a small C program, each making --events pwrite calls of 64 bytes on a file of
its own, under the interposer with the trace on (its real event files, as `ceiling trace` leaves them; no MPI:
the lanes are processes, which the merge treats as it treats ranks). Then, in a fresh Python process per round
(its peak RSS its own), what `ceiling trace` does after a program (verbs/trace_output.conclude): the event
files planned (probes/interpose_events.EventSource: each file's header, clock and sync events), then each pass
reading them again one at a time: the Perfetto trace written (report/exporters/perfetto), with --otf2 the OTF2
archive (report/exporters/otf2), the time line's findings (analysis/trace_patterns.trace_findings), the wait
states (analysis/trace_waits) and its bins (analysis/trace_bins); wall and CPU seconds of each step, the
trace's size, peak RSS. Median and spread over --rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROG = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = atol(argv[2]);
    char buf[64] = {0};
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    for (long i = 0; i < n; i++)
        if (pwrite(fd, buf, sizeof buf, (i % 1024) * 64) != sizeof buf) return 2;
    return close(fd) ? 3 : 0;
}
"""

MERGE = r"""
import json, os, resource, sys, time
from ceiling.analysis.trace_bins import DOC_BINS, timeline_bins
from ceiling.analysis.trace_patterns import trace_findings
from ceiling.analysis.trace_waits import wait_findings
from ceiling.probes import interpose_events
from ceiling.report.exporters.perfetto import write_perfetto
d, out, otf2 = sys.argv[1], sys.argv[2], sys.argv[3]
steps = {}
def step(name, f):
    w, c = time.perf_counter(), time.process_time()
    r = f()
    steps[name] = (time.perf_counter() - w, time.process_time() - c)
    return r
# as verbs/trace_output.conclude reads them: a plan of every file, then each pass reads the files again
chunks = step("plan", lambda: interpose_events.EventSource(d))
n = sum(c for c, _ in chunks.per_process().values())
summary = step("perfetto", lambda: write_perfetto(out, chunks, None, {"command": "many"}))
res = {"events": n, "processes": summary.processes, "bytes": os.path.getsize(out)}
if otf2 != "-":
    from ceiling.report.exporters.otf2 import write_otf2
    o = step("otf2", lambda: write_otf2(otf2, chunks, None, {"command": "many"}))
    res["otf2_bytes"] = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(otf2) for f in fs)
step("findings", lambda: trace_findings(chunks))
step("waits", lambda: wait_findings(chunks))
step("bins", lambda: timeline_bins(chunks, DOC_BINS))
res.update(steps=steps, rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=64)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--otf2", action="store_true", help="write the OTF2 archive too (needs libotf2)")
    a = ap.parse_args()
    from ceiling.core import interpose_library_path
    lib = interpose_library_path()
    top = tempfile.mkdtemp(prefix="ceiling-many-ranks-", dir=a.dir)
    try:
        src, exe, ev = os.path.join(top, "w.c"), os.path.join(top, "w"), os.path.join(top, "events")
        with open(src, "w") as f:
            f.write(PROG)
        subprocess.run(["gcc", "-O2", "-o", exe, src], check=True)
        os.mkdir(ev, 0o700)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CEILING_", "LD_PRELOAD"))}
        env.update(LD_PRELOAD=str(lib), CEILING_INTERPOSE_OUT=os.path.join(top, "record.%p"), CEILING_TRACE_DIR=ev)
        t = time.perf_counter()
        procs = [subprocess.Popen([exe, os.path.join(top, f"data.{i}"), str(a.events)], env=env)
                 for i in range(a.procs)]
        assert all(p.wait() == 0 for p in procs)
        size = sum(os.path.getsize(os.path.join(ev, x)) for x in os.listdir(ev))
        print(f"recorded: {a.procs} processes x {a.events:,} pwrite calls in {time.perf_counter() - t:.1f} s; "
              f"event files {size / 1e6:.0f} MB ({len(os.listdir(ev))} files)")
        rounds = []
        for r in range(a.rounds):
            out, otf2 = os.path.join(top, "t.pftrace"), os.path.join(top, f"t-otf2-{r}")
            w = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", MERGE, ev, out, otf2 if a.otf2 else "-"], capture_output=True,
                               text=True, check=True)
            res = json.loads(p.stdout)
            res["wall"] = time.perf_counter() - w
            rounds.append(res)
            s = res["steps"]
            print(f"round {r + 1}: {res['events']:,} events of {res['processes']} processes; "
                  + ", ".join(f"{k} {v[0]:.2f} s" for k, v in s.items())
                  + f"; all steps {sum(v[0] for v in s.values()):.2f} s, process {res['wall']:.2f} s with imports; "
                  f"{res['bytes'] / 1e6:.0f} MB trace ({res['bytes'] / res['events']:.1f} B/event); "
                  + (f"OTF2 {res['otf2_bytes'] / 1e6:.0f} MB ({res['otf2_bytes'] / res['events']:.1f} B/event); "
                     if "otf2_bytes" in res else "") +
                  f"peak RSS {res['rss_mib']:.0f} MiB")
        tot = [sum(v[0] for v in r["steps"].values()) for r in rounds]
        print(f"median of {len(rounds)}: {statistics.median(tot):.2f} s for every step "
              f"(min {min(tot):.2f}, max {max(tot):.2f}); goal: under 10 s")
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
