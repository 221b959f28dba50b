"""ceiling probe's 1 MiB random read and write latency against fio's for the same operation.

    .venv/bin/python benchmarks/probe_vs_fio.py [--dir /var/tmp] [--size 1G] [--ops 64] [--rounds 5]

Both time one 1 MiB transfer at a random 4 KiB-aligned offset of the same file, one in flight, O_DIRECT,
no fsync (fio: rw=randread / randwrite, bs=1M, ioengine=psync, iodepth=1, direct=1, lat_percentiles=1:
its total latency, submission to completion, as ours is the pread/pwrite call). ``--ops`` operations per
tool and round; the tools alternate within each round, the order shifting every round, so a burst of
other I/O hurts both alike. Per round each tool's median latency; printed: the median over rounds and
ours / fio. The goal (issue 31): within 10% on an idle file system. The file is made under --dir in a new
directory, removed at the end. Needs fio (apt-get install -y fio) and the C core built.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile

from ceiling.core import probe as cprobe
from ceiling.units import parse_size

MIB = 1 << 20


def ours(path: str, write: bool, ops: int, size: int, rng: random.Random) -> float:
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    try:
        blocks = (size - MIB) // 4096 + 1
        lat = [cprobe.rw(fd, write, rng.randrange(blocks) * 4096, MIB, True) for _ in range(ops)]
    finally:
        os.close(fd)
    return statistics.median(lat)


def fio(exe: str, path: str, write: bool, ops: int, size: int) -> float:
    out = subprocess.run([exe, "--name=probe", f"--filename={path}", f"--rw={'randwrite' if write else 'randread'}",
                          "--bs=1M", "--blockalign=4k", "--direct=1", "--ioengine=psync", "--iodepth=1",
                          f"--size={size}", f"--number_ios={ops}", "--lat_percentiles=1", "--randrepeat=0",
                          "--output-format=json"], capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["write" if write else "read"]
    return side["lat_ns"]["percentile"]["50.000000"] / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--ops", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fio", default="fio")
    a = ap.parse_args()
    exe = shutil.which(a.fio)
    if not exe:
        raise SystemExit("fio not found (apt-get install -y fio)")
    size = parse_size(a.size, what="--size")
    d = tempfile.mkdtemp(prefix="ceiling-probe-vs-fio-", dir=a.dir)
    path = os.path.join(d, "data")
    try:
        with open(path, "wb") as f:
            chunk = os.urandom(MIB)
            for _ in range(size // MIB):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        rng = random.Random(1)
        res = {(tool, op): [] for tool in ("ours", "fio") for op in ("read", "write")}
        for r in range(a.rounds):
            order = [("ours", "read"), ("fio", "read"), ("ours", "write"), ("fio", "write")]
            order = order[r % 4:] + order[:r % 4]
            for tool, op in order:
                w = op == "write"
                t = ours(path, w, a.ops, size, rng) if tool == "ours" else fio(exe, path, w, a.ops, size)
                res[(tool, op)].append(t)
        print(f"1 MiB random, O_DIRECT, one in flight, {a.ops} ops x {a.rounds} rounds, file {size / MIB:.0f} MiB "
              f"in {a.dir}")
        print(f"{'op':6} {'ours median':>12} {'fio median':>12} {'ours/fio':>9}   per-round medians (ms) ours | fio")
        for op in ("read", "write"):
            o, f = statistics.median(res[("ours", op)]), statistics.median(res[("fio", op)])
            rounds = " ".join(f"{x * 1e3:.2f}" for x in res[("ours", op)]) + " | " + \
                " ".join(f"{x * 1e3:.2f}" for x in res[("fio", op)])
            print(f"{op:6} {o * 1e3:9.3f} ms {f * 1e3:9.3f} ms {o / f:9.3f}   {rounds}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
