"""Side-by-side storage: ceiling's I/O loops against fio (and IOR / mdtest when
given), with the same pattern, threads, sizes and directory.

    PYTHONPATH=src python benchmarks/storage_vs_peers.py [--fio fio] [--ior PATH/ior] \
        [--mdtest PATH/mdtest] [--mpirun mpirun] [--ours-mpirun MPIEXEC] [--dir /tmp] \
        [--threads N] [--rounds 5]

fio comes from the distribution (apt-get install -y fio). IOR and mdtest need
MPI and are built by whoever runs this (https://github.com/hpc/ior:
./bootstrap && ./configure CC=mpicc && make); this script never builds them.
Tools alternate within each round, the order shifting every round, so a burst
of other I/O hurts every tool alike; best and median over rounds are printed,
with ratios ours / peer. Everything is written in a new directory under
--dir, removed at the end.

Like with like:
  - sequential, file per thread: fio rw=write then rw=read, bs=xfer,
    size=bytes per thread, numjobs=N, ioengine=psync, end_fsync=1 (fio counts
    the fsync in its runtime, as ours counts it in the write phase),
    fallocate=none (ours does not preallocate either), one CPU per job
    (cpus_allowed_policy=split, as ours pins). direct=1 against our O_DIRECT;
    direct=0 against our buffered run: fio drops the file's pages before the
    read (invalidate=1, its default, posix_fadvise DONTNEED), ours does the
    same after fsync and checks with mincore.
    IOR: -a POSIX -F -e -w -r -t xfer -b bytes per thread --posix.odirect,
    one rank per thread (direct only: buffered IOR reads from the page cache).
  - random 4 KiB: fio randread / randwrite, psync, iodepth=1, direct=1,
    time_based for the same seconds, end_fsync=1 on writes, one file per job
    of the same size, against our random phases (which also check every read).
  - queue (the device kept busy): fio --ioengine=libaio --iodepth=16
    --direct=1, rw=read / write at bs=1M and randread / randwrite at 4k,
    time_based, one file per job of the random test's size, reads first (so
    the writes overwrite laid-out files, as ours do), against ours with 16
    requests in flight per thread through Linux AIO (bench/storage_queue.py).
    Ours keep their buffers in transparent huge pages; fio's get --iomem=shmhuge
    when enough hugetlb pages are reserved (as root: echo 128 >
    /proc/sys/vm/nr_hugepages), else the table says fio's buffers were 4 KiB pages
    (a 1 MiB direct transfer from them is two requests on a virtio disk).
  - metadata: mdtest -F -n files -w 3901 -e 3901 (shared directory, and -u
    for one per rank) against ours; rates in ops/s of all ranks/threads.
  - with --ours-mpirun (the launcher of the MPI that mpi4py loads, which may
    differ from the peers' --mpirun): ceiling under MPI, N ranks of one
    thread each making one measurement together (bench/storage_mpi.py),
    against the same IOR and mdtest runs: "mpi" rows. IOR and mdtest are
    then compared with these rows only (processes with processes), and our
    threads with fio only. Also one shared file
    (IOR without -F, each rank a contiguous segment: ours' "shared" layout).

Settling: before every measurement the script syncs and waits --settle
seconds (default 5). Deleting a tool's files frees blocks that ext4 (mounted
with -o discard) discards at its next journal commit, up to 5 s later, and on
a virtual disk the host may then punch holes in its image file: a tool that
starts right after another's deletion writes into still-allocated blocks and
looks several times faster than one that starts after the commit. Waiting
puts every tool in the same state.

Bandwidth is MiB/s (2^20 bytes/s) for every tool (fio's bw_bytes and IOR's
MiB/s converted where needed).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

from ceiling.bench import storage as st
from ceiling.bench import storage_queue as sq
from memory_vs_peers import best_of, median_of, ratio, table  # noqa: E402  (same folder)

MIB = 1 << 20


ROUND = [0]     # the round being run, for paired ratios


def keep(seen: Dict, key, value: Optional[float]) -> None:
    if value is not None:
        seen.setdefault(key, []).append(value)
        seen.setdefault(key + ("rounds",), []).append((ROUND[0], value))


def fmt(x: Optional[float]) -> str:
    return "-" if x is None else (f"{x:.0f}" if x >= 100 else f"{x:.2f}")


def paired(seen: Dict, ours, peer) -> str:
    """Median over rounds of each round's ours / peer (rounds where both ran)."""
    rs = {i: v for i, v in seen.get(ours + ("rounds",), [])}
    ps = {i: v for i, v in seen.get(peer + ("rounds",), [])}
    vals = sorted(rs[i] / ps[i] for i in rs if i in ps and ps[i])
    if not vals:
        return "-"
    mid = len(vals) // 2
    return f"{vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid]):.3f}"


def clear(d: str) -> None:
    for name in os.listdir(d):
        p = os.path.join(d, name)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)


# -- fio ------------------------------------------------------------------------------

def fio(path: str, d: str, cpus: List[int], *args: str, engine: str = "psync", depth: int = 1) -> dict:
    cmd = [path, "--directory", d, f"--ioengine={engine}", f"--iodepth={depth}", "--group_reporting",
           "--output-format=json", f"--numjobs={len(cpus)}", f"--cpus_allowed={','.join(map(str, cpus))}",
           "--cpus_allowed_policy=split", "--fallocate=none", *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"fio failed: {' '.join(cmd)}\n{p.stderr}")
    text = p.stdout[p.stdout.index("{"):]
    return json.loads(text)["jobs"][0]


def fio_seq(path: str, d: str, cpus: List[int], bpt: int, xfer: int, direct: bool) -> Tuple[float, float]:
    """(write, read) MiB/s of fio's sequential file-per-job pattern."""
    common = [f"--bs={xfer}", f"--size={bpt}", f"--direct={int(direct)}", "--name=seq"]
    w = fio(path, d, cpus, "--rw=write", "--end_fsync=1", *common)["write"]
    r = fio(path, d, cpus, "--rw=read", "--invalidate=1", *common)["read"]
    clear(d)
    return w["bw_bytes"] / MIB, r["bw_bytes"] / MIB


def fio_rand(path: str, d: str, cpus: List[int], file_bytes: int, seconds: float) -> Tuple[float, float]:
    """(randread, randwrite) IOPS, direct, 4 KiB, iodepth 1."""
    common = ["--bs=4096", f"--size={file_bytes}", "--direct=1", "--name=rand", "--time_based",
              f"--runtime={max(1, round(seconds * 1000))}ms"]
    rr = fio(path, d, cpus, "--rw=randread", *common)["read"]["iops"]
    rw = fio(path, d, cpus, "--rw=randwrite", "--end_fsync=1", *common)["write"]["iops"]
    clear(d)
    return rr, rw


def fio_hugepages(cpus: List[int], depth: int) -> bool:
    """Whether fio's queued buffers can sit in huge pages (--iomem=shmhuge): enough hugetlb
    pages are reserved (/proc/sys/vm/nr_hugepages; root sets it). Ours keep theirs in
    transparent huge pages (io_queue.c): a 1 MiB direct transfer from 4 KiB pages is split in
    two by a virtio disk (max_segments 254), which halved fio's sequential reads here."""
    try:
        free = int(open("/proc/sys/vm/nr_hugepages").read())
    except (OSError, ValueError):
        return False
    return free * 2 * MIB >= len(cpus) * depth * MIB * 2


def fio_queue(path: str, d: str, cpus: List[int], file_bytes: int, seconds: float, depth: int
              ) -> Tuple[float, float, float, float]:
    """(read, write) MiB/s at 1 MiB in order, (randread, randwrite) IOPS at 4 KiB: libaio, direct,
    ``depth`` in flight per job; reads first, so the writes overwrite laid-out files as ours do."""
    out = []
    huge = ["--iomem=shmhuge"] if fio_hugepages(cpus, depth) else []
    for bs, rws in ((MIB, ("read", "write")), (4096, ("randread", "randwrite"))):
        common = [f"--bs={bs}", f"--size={file_bytes // bs * bs}", "--direct=1", "--name=queue", "--time_based",
                  f"--runtime={max(1, round(seconds * 1000))}ms", *huge]
        for rw in rws:
            res = fio(path, d, cpus, f"--rw={rw}", *(["--end_fsync=1"] if "write" in rw else []), *common,
                      engine="libaio", depth=depth)["write" if "write" in rw else "read"]
            out.append(res["bw_bytes"] / MIB if bs == MIB else res["iops"])
    clear(d)
    return out[0], out[1], out[2], out[3]


# -- IOR and mdtest --------------------------------------------------------------------

def mpi(args, n: int, exe: str, *rest: str) -> str:
    cmd = args.mpirun.split() + ["-n", str(n), exe, *rest]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}")
    return p.stdout


def ior(args, d: str, n: int, bpt: int, xfer: int, shared: bool = False) -> Tuple[Optional[float], Optional[float]]:
    out = mpi(args, n, args.ior, "-a", "POSIX", *([] if shared else ["-F"]), "-e", "-w", "-r", "-t", str(xfer),
              "-b", str(bpt), "-i", "1", "--posix.odirect", "-o", os.path.join(d, "ior.dat"))
    clear(d)
    # the first table of results: "write  <bw MiB/s> ..." (IOR 3.3+), or "Max Write: <x> MiB/sec" (older)
    w = re.search(r"^write\s+([\d.]+)", out, re.M) or re.search(r"^Max Write:\s+([\d.]+) MiB/sec", out, re.M)
    r = re.search(r"^read\s+([\d.]+)", out, re.M) or re.search(r"^Max Read:\s+([\d.]+) MiB/sec", out, re.M)
    return (float(w.group(1)) if w else None), (float(r.group(1)) if r else None)


MD_OPS = (("create", "creation"), ("stat", "stat"), ("read", "read"), ("unlink", "removal"))


def mdtest(args, d: str, n: int, files: int, unique: bool) -> Dict[str, float]:
    out = mpi(args, n, args.mdtest, "-F", "-n", str(files), "-w", str(st.MD_BYTES), "-e", str(st.MD_BYTES),
              "-i", "1", "-d", d, *(["-u"] if unique else []))
    clear(d)
    res = {}
    for ours, theirs in MD_OPS:
        m = re.search(rf"^\s*File {theirs}\s*:?\s+([\d.]+)", out, re.M)
        if m:
            res[ours] = float(m.group(1))
    return res


# -- ceiling under MPI --------------------------------------------------------------------

MPI_DRIVER = """
import json, sys
from ceiling.bench import storage as st, storage_mpi
from ceiling.results.measure import Context, Options
from ceiling.machine.model import Machine
test, d, bpt, xfer, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ctx = Context(Machine(), Options(), [])
with storage_mpi.parallel_run(ctx, d) as (par, path):
    if test.startswith("seq."):
        raw = st.seq_io(path, nthreads=1, cpus=par.cpus, bytes_per_thread=bpt, xfer=xfer, direct=True,
                        layout="shared" if test == "seq.shared" else "fpp", par=par)
        res = {"write": raw.rates(0, 1 / (1 << 20))[0], "read": raw.rates(1, 1 / (1 << 20))[0]}
    else:
        raw = st.meta_io(path, nthreads=1, cpus=par.cpus, files=files, unique_dir=test == "md.unique", lat_cap=0,
                         par=par)
        res = {op: raw.rates(i)[0] for i, op in enumerate(("create", "stat", "read", "unlink"))}
    if par.rank == 0:
        print("RESULT " + json.dumps({"valid": raw.valid, "msg": raw.msg, "res": res}))
"""


def ours_mpi(args, d: str, n: int, test: str, bpt: int) -> Dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(MPI_DRIVER)
    try:
        cmd = args.ours_mpirun.split() + ["-n", str(n), sys.executable, f.name, test, d, str(bpt),
                                          str(args.xfer), str(args.md_files)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        os.unlink(f.name)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}")
    out = json.loads(line[7:])
    if not out["valid"]:
        raise SystemExit(f"ours (MPI) did not validate: {out['msg']}")
    return out["res"]


# -- main ------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fio", default=shutil.which("fio"), help="fio binary (default: the one on PATH)")
    ap.add_argument("--ior", help="IOR binary built against MPI")
    ap.add_argument("--mdtest", help="mdtest binary built against MPI")
    ap.add_argument("--mpirun", default="mpirun", help="MPI launcher and its options (default: mpirun)")
    ap.add_argument("--ours-mpirun", help="launcher of mpi4py's MPI: also run ceiling under MPI (mpi rows)")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where to write (a new subdirectory)")
    ap.add_argument("--threads", type=int, default=min(len(os.sched_getaffinity(0)), st.DEFAULT_MAX_THREADS))
    ap.add_argument("--size", type=int, default=1 << 30, help="sequential bytes per measurement, all threads")
    ap.add_argument("--xfer", type=int, default=st.XFER, help="sequential transfer size (default 1 MiB)")
    ap.add_argument("--rand-file", type=int, default=256 * MIB, help="random: file bytes per thread")
    ap.add_argument("--rand-seconds", type=float, default=3.0)
    ap.add_argument("--md-files", type=int, default=1000, help="metadata: files per thread")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", action="append", choices=["seq", "rand", "queue", "md"], help="only these tests")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds to wait, after a sync, before each measurement (default 5; see above)")
    args = ap.parse_args(argv)

    cpus = sorted(os.sched_getaffinity(0))[:args.threads]
    n = len(cpus)
    bpt = args.size // n // args.xfer * args.xfer
    only = set(args.only or ["seq", "rand", "queue", "md"])
    fs = st.describe_fs(args.dir)
    print(f"dir {args.dir}: {fs.fstype} on {fs.mount.source if fs.mount else '?'}; device peak: {fs.peak.provenance}")
    if "queue" in only:
        print("fio's queued buffers: " + ("huge pages (--iomem=shmhuge)" if fio_hugepages(cpus, sq.QUEUE_DEPTH) else
                                          "4 KiB pages (reserve hugetlb pages for a like-for-like comparison)"))
    print(f"threads {n} on CPUs {cpus}; sequential {n} x {bpt} bytes in {args.xfer}-byte transfers; "
          f"random 4 KiB over {n} x {args.rand_file} bytes for {args.rand_seconds:g} s; "
          f"metadata {n} x {args.md_files} files of {st.MD_BYTES} bytes; {args.rounds} rounds")

    seen: Dict[Tuple[str, str], List[float]] = {}
    with st.RunDir(args.dir) as rd:
        d = rd.path
        jobs: List[Tuple[str, str]] = []
        if "seq" in only:
            for mode in ("direct", "buffered"):
                jobs.append(("ours", f"seq.{mode}"))
                if args.fio:
                    jobs.append(("fio", f"seq.{mode}"))
            if args.ior:
                jobs.append(("ior", "seq.direct"))
            if args.ours_mpirun:
                jobs += [("ours-mpi", "seq.direct"), ("ours-mpi", "seq.shared")]
                if args.ior:
                    jobs.append(("ior", "seq.shared"))
        if "rand" in only:
            jobs.append(("ours", "rand"))
            if args.fio:
                jobs.append(("fio", "rand"))
        if "queue" in only:
            jobs.append(("ours", "queue"))
            if args.fio:
                jobs.append(("fio", "queue"))
        if "md" in only:
            for layout in ("shared", "unique"):
                jobs.append(("ours", f"md.{layout}"))
                if args.mdtest:
                    jobs.append(("mdtest", f"md.{layout}"))
                if args.ours_mpirun:
                    jobs.append(("ours-mpi", f"md.{layout}"))
        for rnd in range(args.rounds):
            ROUND[0] = rnd
            shift = rnd % len(jobs)
            for tool, test in jobs[shift:] + jobs[:shift]:
                settle(args.settle)
                run_one(args, tool, test, d, cpus, bpt, seen)
            print(f"round {rnd + 1} done", file=sys.stderr)

    rows = [("test", "ours best", "ours median", "peer", "peer best", "peer median", "best/peer", "median/peer",
             "paired")]
    tests = [("seq.direct", "write", "MiB/s"), ("seq.direct", "read", "MiB/s"),
             ("seq.shared", "write", "MiB/s"), ("seq.shared", "read", "MiB/s"),
             ("seq.buffered", "write", "MiB/s"), ("seq.buffered", "read", "MiB/s"),
             ("rand", "randread", "IOPS"), ("rand", "randwrite", "IOPS"),
             ("queue", "read", "MiB/s"), ("queue", "write", "MiB/s"),
             ("queue", "randread", "IOPS"), ("queue", "randwrite", "IOPS")] + \
        [(f"md.{lay}", op, "op/s") for lay in ("shared", "unique") for op, _ in MD_OPS]
    for test, what, unit, who in [(t, w, u, who) for t, w, u in tests for who in ("ours", "ours-mpi")]:
        ours = (who, f"{test}.{what}")
        if not seen.get(ours):
            continue
        peers = [p for p in ("fio", "ior", "mdtest") if seen.get((p, f"{test}.{what}"))]
        if who == "ours-mpi":
            peers = [p for p in peers if p != "fio"]
        elif seen.get(("ours-mpi", f"{test}.{what}")):
            # Like with like: IOR and mdtest are N MPI processes, compared with ours under MPI;
            # our threads with fio's jobs. On this VM's virtio disk, direct reads by MPI-launched
            # processes (ours and IOR alike) ran ~1.7x those of fio's jobs (fork or --thread) or
            # of our threads; the cause is not found.
            peers = [p for p in peers if p == "fio"]
        for peer in peers or ["-"]:
            key = (peer, f"{test}.{what}")
            rows.append((f"{test}.{what}{' mpi' if who == 'ours-mpi' else ''} ({unit})", fmt(best_of(seen, ours)),
                         fmt(median_of(seen, ours)), peer, fmt(best_of(seen, key)), fmt(median_of(seen, key)),
                         ratio(best_of(seen, ours), best_of(seen, key)),
                         ratio(median_of(seen, ours), median_of(seen, key)), paired(seen, ours, key)))
    print("best: best round; median: median over rounds; paired: median over rounds of each round's ours/peer")
    print("(the verdict: a slow spell of the device hits both tools of a round). Ours checks every block it")
    print("reads; the peers do not.")
    print(table(rows))
    return 0


def settle(seconds: float) -> None:
    """Let the previous tool's deletions and write-back finish before the next one starts."""
    if seconds > 0:
        os.sync()
        time.sleep(seconds)


def run_one(args, tool: str, test: str, d: str, cpus: List[int], bpt: int, seen: Dict) -> None:
    n = len(cpus)
    if tool == "ours-mpi":
        for k, v in ours_mpi(args, d, n, test, bpt).items():
            keep(seen, (tool, f"{test}.{k}"), v)
        return
    if test == "seq.shared":          # IOR, one shared file
        w, r = ior(args, d, n, bpt, args.xfer, shared=True)
        keep(seen, (tool, f"{test}.write"), w)
        keep(seen, (tool, f"{test}.read"), r)
        return
    if test.startswith("seq."):
        direct = test == "seq.direct"
        if tool == "ours":
            try:
                raw = st.seq_io(d, nthreads=n, cpus=cpus, bytes_per_thread=bpt, xfer=args.xfer, direct=direct)
            except st.DirectRefused as e:
                print(f"ours: O_DIRECT refused ({e}); skipping the direct test", file=sys.stderr)
                return
            if not raw.valid:
                raise SystemExit(f"ours did not validate: {raw.msg}")
            if not direct and not st.cache_defeat(raw)[1]:
                print(f"ours: {st.cache_defeat(raw)[0]}", file=sys.stderr)
            w, r = raw.rates(0, 1 / MIB)[0], raw.rates(1, 1 / MIB)[0]
        elif tool == "fio":
            w, r = fio_seq(args.fio, d, cpus, bpt, args.xfer, direct)
        else:
            w, r = ior(args, d, n, bpt, args.xfer)
        keep(seen, (tool, f"{test}.write"), w)
        keep(seen, (tool, f"{test}.read"), r)
    elif test == "rand":
        file_bytes = args.rand_file // 4096 * 4096
        if tool == "ours":
            raw = st.random_io(d, nthreads=n, cpus=cpus, file_bytes=file_bytes, duration_s=args.rand_seconds,
                               direct=True)
            if not raw.valid:
                raise SystemExit(f"ours did not validate: {raw.msg}")
            rr, rw = raw.rates(0)[0], raw.rates(1)[0]
        else:
            rr, rw = fio_rand(args.fio, d, cpus, file_bytes, args.rand_seconds)
        keep(seen, (tool, "rand.randread"), rr)
        keep(seen, (tool, "rand.randwrite"), rw)
    elif test == "queue":
        file_bytes = args.rand_file // MIB * MIB
        if tool == "ours":
            res = []
            for in_order, xfer in ((True, MIB), (False, 4096)):
                raw = st.random_io(d, nthreads=n, cpus=cpus, file_bytes=file_bytes, xfer=xfer,
                                   duration_s=args.rand_seconds, direct=True, depth=sq.QUEUE_DEPTH,
                                   in_order=in_order)
                if not raw.valid:
                    raise SystemExit(f"ours did not validate: {raw.msg}")
                scale = xfer / MIB if in_order else 1
                res += [raw.rates(0, scale)[0], raw.rates(1, scale)[0]]
        else:
            res = list(fio_queue(args.fio, d, cpus, file_bytes, args.rand_seconds, sq.QUEUE_DEPTH))
        for what, v in zip(("read", "write", "randread", "randwrite"), res):
            keep(seen, (tool, f"queue.{what}"), v)
    else:
        unique = test == "md.unique"
        if tool == "ours":
            raw = st.meta_io(d, nthreads=n, cpus=cpus, files=args.md_files, unique_dir=unique, lat_cap=0)
            if not raw.valid:
                raise SystemExit(f"ours did not validate: {raw.msg}")
            res = {op: raw.rates(i)[0] for i, (op, _) in enumerate(MD_OPS)}
        else:
            res = mdtest(args, d, n, args.md_files, unique)
        for op, v in res.items():
            keep(seen, (tool, f"{test}.{op}"), v)


if __name__ == "__main__":
    sys.exit(main())
