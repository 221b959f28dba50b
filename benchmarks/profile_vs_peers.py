"""`ceiling profile` on programs nobody wrote for it (issue 26): its counts, totals
and verdicts beside strace, Darshan and GNU time on the same programs.

    PYTHONPATH=src .venv/bin/python benchmarks/profile_vs_peers.py [--darshan PREFIX] \
        [--only dd,sqlite,...] [--skip ...] [--scale 1.0] [--imb PATH] [--dir DIR] [--keep]

Every program runs four times, one tool at a time, from the same starting state
(its outputs removed, its inputs made once before):

  - `ceiling profile --no-store --no-measure --save-json F -- PROGRAM`: the figures
    are read from F (the interposer's class totals `application.profile.io_calls`,
    its per-file records `files`, the /proc totals `app.io.read`/`app.io.write`,
    `app.rss.peak`, the bounds, findings and, with --experiments, the verdict);
  - `strace -f -ff -qq -y -s 0 -e trace=<the data and sync calls> -o P`: every
    system call that moves file data, with its descriptor's path and its return
    value, one file per thread (no interleaved lines);
  - Darshan (`LD_PRELOAD=PREFIX/lib/libdarshan.so`, DARSHAN_ENABLE_NONMPI=1,
    DARSHAN_LOGPATH a fresh directory, one log per process), read back with
    `PREFIX/bin/darshan-parser` (POSIX and STDIO counters per file); PREFIX from
    --darshan or $DARSHAN_PREFIX (a build configured with
    --with-log-path-by-env=DARSHAN_LOGPATH); without it the Darshan rows are
    skipped, with the reason;
  - GNU time: `/usr/bin/time -v -o F PROGRAM`, its "Maximum resident set size".

Figures, each with its reference and target:

  - read/write requests and bytes on the files under the work directory (the
    files the program works on; ceiling's per-file records' kernel_reads,
    kernel_writes and their bytes, summed per path: its POSIX calls, and for
    stdio streams the requests their buffers sent, glibc's exit's flush of the
    last buffer included) = strace's read/pread64/readv/preadv(2) and
    write/pwrite64/writev/pwritev(2) calls on descriptors whose path is there:
    exact. Where the record's calls (POSIX + stdio library calls, Darshan's
    counts) differ from those requests, a row gives both and the stdio files that
    made the difference. Where a file's written bytes differ only because the
    program wrote other output under each tool (fio's JSON holds its latencies),
    the row says so with that file's size after each run. Not the program's every
    file: glibc's own reads (/etc/locale.alias, nsswitch.conf) and the loader's
    of shared objects are no call an interposer can see. sync calls (ceiling's
    io_calls) = fsync + fdatasync: exact. Bytes moved by copy_file_range or
    sendfile are a row of their own (and in the per-file figures, a call that
    moved bytes is a read of its source and a write of its destination, on both
    sides);
  - /proc totals (app.io.read, app.io.write: rchar, wchar summed over the tree) =
    strace's bytes of every read-like or write-like call on any descriptor (with
    copy_file_range and sendfile on both sides, as the kernel counts them):
    within 2 % (ceiling takes off rchar what the kernel read at each exec it has a
    record of: the binary's and its loader's headers, ~1.6 KB per exec here, no
    system call and not in strace's sums); and, with those added back, = the
    program's own /proc/PID/io run alone, read as a zombie (within 2 %: exact where
    the program is deterministic);
  - peak RSS (app.rss.peak) = GNU time's maximum resident set size (the largest
    single process of the tree, from wait4): within 10 % or 1 MiB;
  - per-file records for the files the program opened under its work directory
    (sqlite's database and journal, gcc's -save-temps files and objects, ...):
    the number of files, one record per path (ceiling keys its records by inode:
    a path made again, as sqlite's journal, may have several, summed here), and
    per file opens, reads, writes and their bytes (Darshan POSIX + STDIO
    counters, ceiling's `files`: library calls) equal, a file whose output
    differs between the runs said as above;
  - verdicts: no storage finding (profile.io*, profile.ceiling.io_*, an io bound)
    for `git log -p` writing through stdio to /dev/null; fio's random writes
    counted as fio reports them (its JSON's total_ios and io_bytes, and the
    file's record) and its bound io; no "oversubscribed" bound for `make -j2`
    while two busy processes load the node, the competing load named instead;
    with --experiments, a pure FMA loop called compute, a STREAM triad loop
    memory bandwidth and a 1 GiB pointer chase not memory bandwidth; the MPI
    ping-pong's MPI_Send/MPI_Recv calls and bytes equal to what the program
    makes by construction.

Programs and their sizes here (the issue's sizes scaled so that the whole run takes
a few minutes on 2 CPUs; --scale multiplies the data sizes): dd 64 x 1 MiB;
dd oflag=dsync 64 x 64 KiB; gzip and gunzip of 32 MiB (text-like, half
compressible); sqlite3 inserting 300 rows one transaction each and 20,000 rows in
one transaction; tar cf of /usr/share/i18n and /usr/share/perl5; sort of 8 MiB of
lines; cp -r of /usr/share/i18n; numpy matmul of 1500 x 1500 doubles; git gc and
git log -p of a bare clone of this repository; fio psync random 4 KiB writes over
64 MiB with an fsync every 256 writes (the issue's run: 16,384 writes, 64 fsyncs);
make -j2 of 8 generated C files (gcc -O2 -save-temps); a 2-rank MPI
ping-pong (2,000 round trips of 1 KiB); 2-second FMA, triad (3 x 256 MiB) and
chase (1 GiB) loops; IMB-MPI1 PingPong when --imb is given (not installed here: skipped).

A peer that is missing is named and its rows skipped; a program that is not
installed (sqlite3, fio, git, make, numpy, an MPI) is skipped with the reason.
The table is Markdown: program, figure, ceiling, reference (its tool), ratio or
match, ok. Exit 0 however many rows miss: this measures, it does not test
(tests/test_profile_truth.py holds the CI-sized checks).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

READS = ("read", "pread64", "readv", "preadv", "preadv2")
WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2")
SYNCS = ("fsync", "fdatasync")
COPIES = ("copy_file_range", "sendfile")   # bytes read and written without a read or write call
TRACED = READS + WRITES + SYNCS + COPIES
LINE = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+)")
FD = re.compile(r"(\d+)<([^>]*)>")


# ---------------------------------------------------------------------------- programs

class Program:
    """One program: its argv, where its stdout goes, what it needs made once (prepare,
    untimed, before any tool) and before every run (reset), and which figures apply."""

    def __init__(self, name: str, argv: List[str], stdout: Optional[str] = None, stdin: Optional[str] = None,
                 prepare: Optional[Callable[[], None]] = None, reset: Optional[Callable[[], None]] = None,
                 needs: Optional[List[str]] = None, files: bool = False, env: Optional[Dict[str, str]] = None,
                 cwd: Optional[str] = None, checks: Optional[Callable] = None, opts: Optional[List[str]] = None,
                 peers: bool = True, corunners: int = 0):
        self.name, self.argv, self.stdout, self.stdin = name, argv, stdout, stdin
        self.prepare, self.reset, self.needs, self.files = prepare, reset, needs or [argv[0]], files
        self.env, self.cwd, self.checks, self.opts, self.peers = env or {}, cwd, checks, opts or [], peers
        self.corunners = corunners


def rm(*paths: str) -> Callable[[], None]:
    def go():
        for p in paths:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            elif os.path.lexists(p):
                os.unlink(p)
    return go


def text_data(path: str, mib: float) -> None:
    """Lines of words, half of them repeated: gzip gets about 2:1, sort has work."""
    import random
    rnd = random.Random(26)
    words = [f"{rnd.getrandbits(40):x}" for _ in range(4096)]
    size, target = 0, int(mib * 1048576)
    with open(path, "w") as f:
        while size < target:
            line = " ".join(rnd.choice(words) if rnd.random() < 0.5 else f"{rnd.getrandbits(48):x}"
                            for _ in range(8)) + "\n"
            f.write(line)
            size += len(line)


def sql_script(path: str, rows: int, transaction: bool) -> None:
    with open(path, "w") as f:
        f.write("CREATE TABLE t(i INTEGER PRIMARY KEY, s TEXT);\n")
        if transaction:
            f.write("BEGIN;\n")
        for i in range(rows):
            f.write(f"INSERT INTO t(s) VALUES('row {i} of {rows}');\n")
        if transaction:
            f.write("COMMIT;\n")


def c_project(d: str, files: int) -> None:
    os.makedirs(d, exist_ok=True)
    objs = []
    for k in range(files):
        with open(os.path.join(d, f"f{k}.c"), "w") as f:
            for j in range(40):
                f.write(f"double f{k}_{j}(const double *a, int n) {{ double s = {j}; "
                        f"for (int i = 0; i < n; i++) s += a[i] * {j + 1}.0 / (1.0 + a[i] * a[i]); "
                        f"return s; }}\n")
        objs.append(f"f{k}.o")
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write("int main(void) { return 0; }\n")
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write("CFLAGS = -O2 -save-temps\n"
                f"prog: main.o {' '.join(objs)}\n\t$(CC) -o $@ $^\n"
                "%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n")


def programs(w: str, scale: float, tools: Dict[str, Optional[str]], imb: Optional[str]) -> List[Program]:
    py = sys.executable
    mib = lambda n: max(1, int(n * scale))     # noqa: E731
    repo = os.path.join(w, "repo.git")

    def clone():
        rm(repo)()
        subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(ROOT), repo], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def make_reset():
        d = os.path.join(w, "cproj")
        subprocess.run(["make", "-s", "-C", d, "clean"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in glob.glob(os.path.join(d, "*.[ois]")) + glob.glob(os.path.join(d, "prog")):
            os.unlink(p)

    loops = os.path.join(w, "loops")
    pp = os.path.join(w, "pingpong")
    out = [
        Program("dd", ["dd", "if=/dev/zero", f"of={w}/dd.out", "bs=1M", f"count={mib(64)}"],
                reset=rm(f"{w}/dd.out"), files=True),
        Program("dd oflag=dsync", ["dd", "if=/dev/zero", f"of={w}/dsync.out", "bs=64k", f"count={mib(64)}",
                                   "oflag=dsync"], reset=rm(f"{w}/dsync.out"), files=True),
        Program("gzip", ["gzip", "-c", f"{w}/text"], stdout=f"{w}/text.gz",
                prepare=lambda: text_data(f"{w}/text", 32 * scale), reset=rm(f"{w}/text.gz")),
        Program("gunzip", ["gzip", "-dc", f"{w}/text.gz"], stdout=f"{w}/text.out", reset=rm(f"{w}/text.out")),
        Program("sqlite3, 300 rows, a transaction each", ["sqlite3", f"{w}/each.db"], stdin=f"{w}/each.sql",
                prepare=lambda: sql_script(f"{w}/each.sql", int(300 * scale), False),
                reset=rm(f"{w}/each.db", f"{w}/each.db-journal"), files=True),
        Program("sqlite3, 20,000 rows, one transaction", ["sqlite3", f"{w}/one.db"], stdin=f"{w}/one.sql",
                prepare=lambda: sql_script(f"{w}/one.sql", int(20000 * scale), True),
                reset=rm(f"{w}/one.db", f"{w}/one.db-journal"), files=True),
        Program("tar cf", ["tar", "cf", f"{w}/share.tar", "-C", "/usr/share", "i18n", "perl5"],
                reset=rm(f"{w}/share.tar"), files=True),
        Program("sort", ["sort", f"{w}/text8"], stdout=f"{w}/sorted",
                prepare=lambda: text_data(f"{w}/text8", 8 * scale), reset=rm(f"{w}/sorted"),
                env={"LC_ALL": "C", "TMPDIR": w}),
        Program("cp -r", ["cp", "-r", "/usr/share/i18n", f"{w}/i18n"], reset=rm(f"{w}/i18n")),
        Program("numpy matmul", [py, "-c", "import numpy as np; a = np.ones((1500, 1500)); print((a @ a).sum())"],
                stdout=os.devnull, needs=[py]),
        Program("git gc", ["git", "-C", repo, "gc", "-q"], reset=clone, needs=["git"]),
        Program("git log -p > /dev/null", ["git", "-C", repo, "log", "-p"], stdout=os.devnull,
                prepare=clone, needs=["git"], checks=no_storage_finding),
        Program("fio psync randwrite", ["fio", "--name=rw", f"--filename={w}/fio.dat", "--rw=randwrite",
                                        "--bs=4k", f"--size={mib(64)}m", "--ioengine=psync", "--fsync=256",
                                        "--output-format=json", f"--output={w}/fio.json"],
                reset=rm(f"{w}/fio.dat", f"{w}/fio.json"), files=True, checks=fio_checks(w)),
        Program("make -j2, 2 busy co-runners", ["make", "-s", "-j2", "-C", f"{w}/cproj"],
                prepare=lambda: c_project(f"{w}/cproj", 8), reset=make_reset, needs=["make", "cc"], files=True,
                checks=no_oversubscribed, corunners=2),
        Program("MPI ping-pong, 2 ranks", [tools.get("mpiexec") or "mpiexec", "-n", "2", pp, "2000", "1024"],
                stdout=os.devnull, needs=[tools.get("mpiexec") or "mpiexec", pp], checks=mpi_checks(2000, 1024),
                peers=False),
        Program("FMA loop --experiments", [loops, "fma", "2"], stdout=os.devnull, opts=["--experiments"],
                needs=[loops], checks=experiments_say("compute", None), peers=False),
        Program("triad loop --experiments", [loops, "triad", "2", "256"], stdout=os.devnull,
                opts=["--experiments"], needs=[loops], checks=experiments_say("memory", "bandwidth"), peers=False),
        Program("1 GiB chase --experiments", [loops, "chase", "2", "1024"], stdout=os.devnull,
                opts=["--experiments"], needs=[loops], checks=experiments_not("memory", "bandwidth"), peers=False),
    ]
    if imb:
        out.append(Program("IMB-MPI1 PingPong", [tools.get("mpiexec") or "mpiexec", "-n", "2", imb, "PingPong",
                                                 "-msglog", "0:10"], stdout=os.devnull, peers=False,
                           needs=[imb], checks=mpi_checks(None, None)))
    return out


# ---------------------------------------------------------------------------- the tools

def launch(prog: Program, argv: List[str], w: str, env_extra: Optional[Dict[str, str]] = None,
           timeout: float = 600) -> subprocess.CompletedProcess:
    if prog.reset:
        prog.reset()
    env = dict(os.environ, NO_COLOR="1", **prog.env, **(env_extra or {}))
    stdin = open(prog.stdin) if prog.stdin else subprocess.DEVNULL
    stdout = open(prog.stdout, "w") if prog.stdout else subprocess.DEVNULL
    try:
        return subprocess.run(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=prog.cwd or w, timeout=timeout)
    finally:
        for f in (stdin, stdout):
            if hasattr(f, "close"):
                f.close()


def run_ceiling(prog: Program, w: str, ceiling: List[str]) -> dict:
    out = os.path.join(w, "ceiling.json")
    if os.path.exists(out):
        os.unlink(out)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(prog.corunners)]
    try:
        if busy:
            time.sleep(1.0)       # their load is there before the program starts
        r = launch(prog, [*ceiling, "profile", "--no-store", "--no-measure", "--save-json", out, *prog.opts,
                          "--", *prog.argv], w)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"ceiling profile exited {r.returncode}: {r.stderr.strip()[-400:]}")
    with open(out) as f:
        doc = json.load(f)
    doc["_sizes"] = sizes(w)
    return doc


def sizes(w: str) -> Dict[str, int]:
    """The size of every file under the work directory after a run (the tools' own left out): a
    program whose output differs from run to run (fio's JSON holds its latencies) writes other
    bytes under each tool, which its files' sizes show."""
    out = {}
    for top, dirs, names in os.walk(w):
        dirs[:] = [d for d in dirs if not d.startswith(("strace-", "darshan-"))]
        for n in names:
            try:
                out[os.path.join(top, n)] = os.lstat(os.path.join(top, n)).st_size
            except OSError:
                pass
    return out


def run_strace(prog: Program, w: str, strace: str) -> dict:
    """strace's totals: rchar and wchar as the kernel counts them (every read-like and
    write-like call on any descriptor, copy_file_range and sendfile on both sides), sync
    calls, copied bytes, and per file under the work directory its read and write calls
    and bytes."""
    d = tempfile.mkdtemp(prefix="strace-", dir=w)
    r = launch(prog, [strace, "-f", "-ff", "-qq", "-y", "-s", "0", "-e", "trace=" + ",".join(TRACED),
                      "-o", os.path.join(d, "t"), *prog.argv], w)
    if r.returncode != 0:
        raise RuntimeError(f"strace run exited {r.returncode}: {r.stderr.strip()[-300:]}")
    tot = {k: 0 for k in ("sync_calls", "rchar", "wchar", "copy_calls", "copy_bytes")}
    tot["sizes"] = sizes(w)
    files: Dict[str, Dict[str, int]] = {}
    for path in glob.glob(os.path.join(d, "t.*")):
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if not m:
                    continue
                call, args, ret = m.group(1), m.group(2), int(m.group(3))
                fds = FD.findall(args)
                target = fds[0][1] if fds else ""
                got = max(ret, 0)
                kind = "read" if call in READS else "write" if call in WRITES else ""
                if kind:
                    tot["rchar" if kind == "read" else "wchar"] += got
                    if target.startswith(w + "/"):
                        rec = files.setdefault(target, {"reads": 0, "writes": 0, "read_bytes": 0,
                                                        "write_bytes": 0})
                        rec[kind + "s"] += 1
                        rec[kind + "_bytes"] += got
                elif call in SYNCS:
                    tot["sync_calls"] += 1
                elif call in COPIES:
                    tot["rchar"] += got
                    tot["wchar"] += got
                    tot["copy_calls"] += 1
                    tot["copy_bytes"] += got
                    # a copy that moved bytes is a read of its source and a write of its destination in
                    # ceiling's per-file records (copy_file_range(in, .., out, ..), sendfile(out, in, ..))
                    ends = [p for _, p in fds[:2]]
                    if call == "sendfile":
                        ends.reverse()
                    for kind, target in zip(("read", "write"), ends):
                        if got > 0 and target.startswith(w + "/"):
                            rec = files.setdefault(target, {"reads": 0, "writes": 0, "read_bytes": 0,
                                                            "write_bytes": 0})
                            rec[kind + "s"] += 1
                            rec[kind + "_bytes"] += got
    shutil.rmtree(d)
    tot["files"] = files
    return tot


def run_plain(prog: Program, w: str) -> Dict[str, int]:
    """The program run alone, its /proc/PID/io read while it is a zombie (as ceiling-launch
    reads it): the kernel's own rchar and wchar without any tool, which strace's sums lack the
    kernel's reads at exec (the binary's and the loader's headers, about 1.6 KB per exec here)."""
    if prog.reset:
        prog.reset()
    env = dict(os.environ, NO_COLOR="1", **prog.env)
    stdin = open(prog.stdin) if prog.stdin else subprocess.DEVNULL
    stdout = open(prog.stdout, "w") if prog.stdout else subprocess.DEVNULL
    try:
        p = subprocess.Popen(prog.argv, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, env=env,
                             cwd=prog.cwd or w)
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{p.pid}/io") as f:
            io = {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}
        if p.wait() != 0:
            raise RuntimeError(f"plain run exited {p.returncode}")
        return io
    finally:
        for f in (stdin, stdout):
            if hasattr(f, "close"):
                f.close()


def run_time(prog: Program, w: str, gnu_time: str) -> float:
    out = os.path.join(w, "time.txt")
    r = launch(prog, [gnu_time, "-v", "-o", out, *prog.argv], w)
    if r.returncode != 0:
        raise RuntimeError(f"GNU time run exited {r.returncode}: {r.stderr.strip()[-300:]}")
    with open(out) as f:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
    if not m:
        raise RuntimeError("GNU time printed no maximum resident set size")
    return int(m.group(1)) / 1024.0


def run_darshan(prog: Program, w: str, prefix: str) -> Dict[str, Dict[str, int]]:
    """Darshan's POSIX + STDIO counters per file path, summed over every process's log."""
    logs = tempfile.mkdtemp(prefix="darshan-", dir=w)
    r = launch(prog, prog.argv, w, {"LD_PRELOAD": os.path.join(prefix, "lib", "libdarshan.so"),
                                     "DARSHAN_ENABLE_NONMPI": "1", "DARSHAN_LOGPATH": logs})
    if r.returncode != 0:
        raise RuntimeError(f"Darshan run exited {r.returncode}: {r.stderr.strip()[-300:]}")
    files: Dict[str, Dict[str, int]] = {}
    names = {"OPENS": "opens", "READS": "reads", "WRITES": "writes", "BYTES_READ": "read_bytes",
             "BYTES_WRITTEN": "write_bytes"}
    for log in glob.glob(os.path.join(logs, "*.darshan")):
        text = subprocess.run([os.path.join(prefix, "bin", "darshan-parser"), log], capture_output=True,
                              text=True).stdout
        for line in text.splitlines():
            parts = line.split("\t")
            if len(parts) < 6 or parts[0] not in ("POSIX", "STDIO"):
                continue
            counter = parts[3].split("_", 1)[1]
            if counter in names:
                rec = files.setdefault(parts[5], {v: 0 for v in names.values()})
                rec[names[counter]] += max(int(parts[4]), 0)
            elif counter in ("DUPS", "FILENOS"):      # in Darshan's OPENS; no open of the file
                rec = files.setdefault(parts[5], {v: 0 for v in names.values()})
                rec["opens"] -= max(int(parts[4]), 0)
    shutil.rmtree(logs)
    files["_sizes"] = sizes(w)            # type: ignore[assignment]
    return files


# ---------------------------------------------------------------------------- figures

class Table:
    def __init__(self):
        self.rows: List[List[str]] = []

    def add(self, program: str, figure: str, ours, ref, tool: str, ok: Optional[bool], how: str = ""):
        self.rows.append([program, figure, _s(ours), f"{_s(ref)} ({tool})", how,
                          "-" if ok is None else ("ok" if ok else "**not**")])

    def skip(self, program: str, figure: str, why: str):
        self.rows.append([program, figure, "-", "-", why, "skipped"])

    def exact(self, program, figure, ours, ref, tool):
        self.add(program, figure, ours, ref, tool, ours == ref, "match" if ours == ref else
                 (f"{ours / ref:.3f}x" if ref else "differs"))

    def within(self, program, figure, ours, ref, tool, rel, absolute=0.0):
        ok = abs(ours - ref) <= max(rel * abs(ref), absolute)
        self.add(program, figure, ours, ref, tool, ok, f"{ours / ref:.3f}x" if ref else
                 ("match" if ours == ref else "differs"))

    def markdown(self) -> str:
        head = ["program", "figure", "ceiling", "reference", "ratio or match", "ok"]
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(out)


def _s(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def metric(doc: dict, name: str) -> Optional[float]:
    for m in doc.get("metrics", []):
        if m.get("name") == name:
            return m.get("value")
    return None


def work_files(doc: dict, w: str, ref) -> tuple:
    """ceiling's per-file records of the files under the work directory, and whether they
    are all there (it shows the 20 files with the most time: whole when it has no more, or
    when every file the reference saw under the work directory is among them)."""
    files = doc["application"]["profile"].get("files") or {}
    shown = files.get("shown", [])
    ours: Dict[str, dict] = {}
    for f in shown:
        if f["path"].startswith(w + "/"):
            mine = ours.setdefault(f["path"], {"records": 0})
            mine["records"] += 1
            for k, v in f.items():
                if isinstance(v, int) and mine.get(k, 0) is not None:
                    mine[k] = mine.get(k, 0) + v
                elif v is None and k.startswith("kernel_"):
                    mine[k] = None          # an older interposer's record: not known
    return ours, files.get("count", 0) <= len(shown) or set(ref) <= set(ours)


def plain_rows(t: Table, name: str, doc: dict, plain: Dict[str, int]) -> None:
    # ceiling's rchar is the system calls' bytes: it takes off what the kernel read at each exec
    # (and says how much); the plain run's /proc holds them, so they are added back here
    execs = ((((doc.get("application") or {}).get("profile") or {}).get("launch") or {}).get("interposer_io")
             or {}).get("exec") or {}
    for cls, key in (("read", "rchar"), ("write", "wchar")):
        v = metric(doc, f"app.io.{cls}")
        back = int(execs.get("read_bytes") or 0) if key == "rchar" else 0
        if v is not None and (v or plain.get(key)):
            t.within(name, f"/proc {key} bytes" + (" + the exec reads taken off" if back else ""),
                     int(round(v * 1e6)) + back, plain[key], "plain run's /proc", 0.02)


def kernel_figure(f: dict, key: str) -> Optional[int]:
    """A file's requests (key "reads"/"writes") or bytes that reached the kernel, as strace counts
    them: ceiling's kernel_* (its POSIX calls, and its stdio streams' requests from their buffers);
    None from an interposer that did not record them."""
    return f.get("kernel_" + key)


def io_rows(t: Table, name: str, doc: dict, st: dict, w: str) -> None:
    ref = st["files"]
    ours, whole = work_files(doc, w, ref)
    # where ceiling lists only its top 20 files, each listed record is still whole (one per path):
    # compare those paths with strace's figures on the same paths
    where = "work-dir files" if whole else f"the {len(ours)} work-dir files ceiling lists"
    if not whole:
        ref = {p: ref.get(p, {"reads": 0, "writes": 0, "read_bytes": 0, "write_bytes": 0}) for p in ours}
    for cls in ("read", "write"):
        theirs = sum(f[cls + "s"] for f in ref.values())
        calls = sum(f.get(cls + "s", 0) for f in ours.values())
        kernel = [kernel_figure(f, cls + "s") for f in ours.values()]
        known = all(k is not None for k in kernel)
        mine = sum(kernel) if known else calls
        if not (mine or theirs or calls):
            continue
        what = f"{cls} requests on {where}" if known else f"{cls} calls on {where}"
        t.exact(name, what, mine, theirs, "strace")
        if known and mine != theirs:
            t.add(name, f"{cls} requests, files that differ", "", "", "strace", None,
                  per_file_differences(ours, ref, cls))
        if known and calls != mine:
            # the library calls (the record's reads/writes, Darshan's POSIX + STDIO counts) made them
            lib = {p: f for p, f in ours.items() if f.get(cls + "s", 0) != kernel_figure(f, cls + "s")}
            t.add(name, f"{cls} calls on {where} (POSIX + stdio library calls)", calls, mine,
                  "ceiling's requests", None,
                  f"stdio: {sum(f[cls + 's'] for f in lib.values()):,} calls on {len(lib)} file"
                  f"{'s' if len(lib) != 1 else ''} ({', '.join(sorted(os.path.basename(p) for p in lib))[:80]}) "
                  f"made {sum(kernel_figure(f, cls + 's') for f in lib.values()):,} requests through "
                  "their buffers")
        mine_b = sum(kernel_figure(f, cls + "_bytes") or 0 for f in ours.values()) if known else \
            sum(f.get(cls + "_bytes", 0) for f in ours.values())
        theirs_b = sum(f[cls + "_bytes"] for f in ref.values())
        why = other_output(ours, ref, doc.get("_sizes", {}), st.get("sizes", {}), cls) \
            if mine_b != theirs_b and cls == "write" and known else ""
        if why:
            t.add(name, f"{cls} bytes on {where}", mine_b, theirs_b, "strace", True, why)
        else:
            t.exact(name, f"{cls} bytes on {where}", mine_b, theirs_b, "strace")
    io = doc["application"]["profile"].get("io_calls") or {}
    if io.get("sync", {}).get("calls", 0) or st["sync_calls"]:
        t.exact(name, "sync calls", io.get("sync", {}).get("calls", 0), st["sync_calls"], "strace")
    if st["copy_bytes"]:
        # the interposer's copy class: copy_file_range, sendfile, splice between two files (where one
        # side is not a file, the call is a read or a write of the other)
        got = io.get("copy", {})
        if got.get("calls"):
            t.exact(name, "copy_file_range/sendfile calls", got["calls"], st["copy_calls"], "strace")
            t.exact(name, "bytes by copy_file_range/sendfile", got.get("bytes", 0), st["copy_bytes"], "strace")
        else:
            t.add(name, "bytes by copy_file_range/sendfile", "not counted", st["copy_bytes"], "strace", False,
                  f"{st['copy_calls']:,} calls in no class of the interposer")
    for cls, key in (("read", "rchar"), ("write", "wchar")):
        v = metric(doc, f"app.io.{cls}")
        if v is None:
            t.skip(name, f"/proc {key}", "no app.io." + cls + " metric")
        elif v or st[key]:
            t.within(name, f"/proc {key} bytes", int(round(v * 1e6)), st[key], "strace", 0.02)


def per_file_differences(ours: dict, ref: dict, cls: str) -> str:
    """The files whose requests or bytes of class cls differ from strace's: name, ceiling's
    requests/bytes, strace's (the first few; a cell of the table)."""
    out = []
    for p in sorted(set(ours) | set(ref)):
        a = (kernel_figure(ours.get(p, {}), cls + "s") or 0, kernel_figure(ours.get(p, {}), cls + "_bytes") or 0)
        b = (ref.get(p, {}).get(cls + "s", 0), ref.get(p, {}).get(cls + "_bytes", 0))
        if a != b:
            out.append(f"{os.path.basename(p)} {a[0]:,}/{a[1]:,} B vs {b[0]:,}/{b[1]:,} B")
    return (f"{len(out)} files: " + "; ".join(out))[:300] if out else "none"


def other_output(ours: dict, ref: dict, mine: Dict[str, int], theirs: Dict[str, int], cls: str) -> str:
    """Why the bytes written differ, when they do only because the program wrote other output under
    each tool: every file whose bytes differ holds, after each run, what that run wrote to it (its
    size), and those sizes differ. "" when that does not account for the whole difference."""
    said = []
    for p in sorted(set(ours) | set(ref)):
        a = kernel_figure(ours.get(p, {}), cls + "_bytes") or 0
        b = ref.get(p, {}).get(cls + "_bytes", 0)
        if a == b:
            continue
        if mine.get(p) != a or theirs.get(p) != b:
            return ""
        said.append(f"{os.path.basename(p)} is {a:,} B after ceiling's run, {b:,} B after strace's")
    return ("the program's output differs between runs: " + "; ".join(said))[:200] if said else ""


def file_rows(t: Table, name: str, doc: dict, dar: Dict[str, Dict[str, int]], w: str) -> None:
    ref = {p: r for p, r in dar.items() if p.startswith(w + "/") and r["opens"]}
    after = dar.get("_sizes", {})
    shown, whole = work_files(doc, w, ref)
    ours = {p: f for p, f in shown.items() if f.get("opens", 0)}
    if whole:
        t.exact(name, "files opened under the work dir", len(ours), len(ref), "Darshan")
    else:
        t.add(name, "files opened under the work dir", f"{len(ours)} listed", len(ref), "Darshan", None,
              f"ceiling lists its top 20 of {(doc['application']['profile'].get('files') or {}).get('count')} "
              "records (every path, the work dir's and others'); the listed ones are compared below")
        ref = {p: r for p, r in ref.items() if p in ours}     # the paths ceiling lists, each record whole
    split = [os.path.basename(p) for p, f in shown.items() if f["records"] > 1]
    t.add(name, "paths with more than one record", len(split), 0, "Darshan: one per path", not split,
          ", ".join(f"{p} {shown[os.path.join(w, p)]['records']}" for p in split)[:200])
    keys = ("opens", "reads", "writes", "read_bytes", "write_bytes")
    both = sorted(set(ours) & set(ref))
    # a file the program wrote other output to under each tool (fio's JSON holds its latencies): its bytes
    # differ, and each run's equal the file's size after that run
    other = {p for p in both if ours[p].get("write_bytes", 0) != ref[p]["write_bytes"] and
             doc.get("_sizes", {}).get(p) == ours[p].get("write_bytes") and after.get(p) == ref[p]["write_bytes"]}
    same = [p for p in both if all(ours[p].get(k, 0) == ref[p][k] for k in keys if not (k == "write_bytes" and
                                                                                      p in other))]
    why = "; ".join(f"{os.path.basename(p)} is {ours[p]['write_bytes']:,} B after ceiling's run, "
                    f"{ref[p]['write_bytes']:,} B after Darshan's: the program's output differs between runs"
                    for p in sorted(other))
    t.add(name, "per-file opens, reads, writes, bytes equal" + ("" if whole else " (the files ceiling lists)"),
          f"{len(same)} of {len(both)} files", len(both),
          "Darshan", len(same) == len(both) == len(ref) and bool(ref),
          ("match" + (f" ({why})" if why else "")) if len(same) == len(both) else
          "; ".join(f"{os.path.basename(p)} {k} {ours[p].get(k, 0)} vs {ref[p][k]}" for p in both
                    for k in keys if ours[p].get(k, 0) != ref[p][k])[:200])


def bounds_of(doc: dict) -> List[str]:
    return [b["bound"] for b in doc.get("analysis", {}).get("bounds", [])]


def no_storage_finding(t: Table, name: str, doc: dict, w: str) -> None:
    ids = [f["id"] for f in doc.get("findings", []) if f["id"].startswith(("profile.io", "profile.ceiling.io"))]
    ids += ["bound io"] if "io" in bounds_of(doc) else []
    t.add(name, "storage findings (stdio to /dev/null)", ", ".join(ids) or "none", "none", "by construction",
          not ids)


def fio_checks(w: str) -> Callable:
    def check(t: Table, name: str, doc: dict, w_: str) -> None:
        with open(os.path.join(w, "fio.json")) as f:
            job = json.load(f)["jobs"][0]["write"]
        rec = next((f for f in (doc["application"]["profile"]["files"] or {}).get("shown", [])
                    if f["path"] == os.path.join(w, "fio.dat")), {})
        t.exact(name, "fio.dat writes (per-file record)", rec.get("writes", 0), job["total_ios"], "fio JSON")
        t.exact(name, "fio.dat bytes written", rec.get("write_bytes", 0), job["io_bytes"], "fio JSON")
        b = bounds_of(doc)
        t.add(name, "bound", ", ".join(b) or "none", "io", "by construction", bool(b) and b[0] == "io")
    return check


def no_oversubscribed(t: Table, name: str, doc: dict, w: str) -> None:
    b = bounds_of(doc)
    texts = " ".join([x.get("evidence", "") for x in doc.get("analysis", {}).get("bounds", [])] +
                     [f.get("title", "") + " " + f.get("evidence", "") for f in doc.get("findings", [])]).lower()
    t.add(name, "bound with the node loaded", ", ".join(b) or "none", "not oversubscribed", "by construction",
          "oversubscribed" not in b)
    named = "competing" in texts or "other process" in texts
    t.add(name, "competing load named", "yes" if named else "no", "yes", "2 busy co-runners", named)


def mpi_checks(iterations: Optional[int], nbytes: Optional[int]) -> Callable:
    def check(t: Table, name: str, doc: dict, w: str) -> None:
        mpi = doc["application"]["profile"].get("mpi") or {}
        fns = {f["fn"]: f for f in mpi.get("functions", [])}
        if not fns:
            t.add(name, "MPI calls", "none counted", "MPI_Send, MPI_Recv", "the program", False)
            return
        t.exact(name, "ranks", mpi.get("ranks", 0), 2, "mpiexec -n 2")
        if iterations is None:
            t.add(name, "MPI functions counted", len(fns), "-", "IMB", None, ", ".join(sorted(fns))[:120])
            return
        for fn in ("MPI_Send", "MPI_Recv"):
            t.exact(name, f"{fn} calls", fns.get(fn, {}).get("calls", 0), 2 * iterations, "by construction")
            t.exact(name, f"{fn} bytes", fns.get(fn, {}).get("bytes", 0), 2 * iterations * nbytes,
                    "by construction")
    return check


def experiments_say(bound: str, by: Optional[str]) -> Callable:
    def check(t: Table, name: str, doc: dict, w: str) -> None:
        e = doc["application"]["profile"].get("experiments") or {}
        said = e.get("bound") or "undecided"
        said += f" ({e['by']})" if e.get("by") else ""
        want = bound + (f" ({by})" if by else "")
        t.add(name, "experiments' verdict", said, want, "by construction",
              e.get("bound") == bound and e.get("by") == by, (e.get("why") or "")[:160])
    return check


def experiments_not(bound: str, by: str) -> Callable:
    """The chase: latency, or undecided with its reason; never memory bandwidth."""
    def check(t: Table, name: str, doc: dict, w: str) -> None:
        e = doc["application"]["profile"].get("experiments") or {}
        said = (e.get("bound") or "undecided") + (f" ({e['by']})" if e.get("by") else "")
        t.add(name, "experiments' verdict", said, f"not {bound} ({by})", "by construction",
              (e.get("bound"), e.get("by")) != (bound, by), (e.get("why") or "")[:160])
    return check


# ---------------------------------------------------------------------------- main

def build(w: str, tools: Dict[str, Optional[str]]) -> List[str]:
    """Compile the two programs of ours; returns what could not be built."""
    notes = []
    cc = shutil.which("cc")
    if cc:
        subprocess.run([cc, "-O2", "-o", os.path.join(w, "loops"), str(HERE / "profile_vs_peers_loops.c")],
                       check=True)
    else:
        notes.append("no C compiler: the FMA, triad and chase loops are skipped")
    if tools.get("mpicc"):
        r = subprocess.run([tools["mpicc"], "-O2", "-o", os.path.join(w, "pingpong"),
                            str(HERE / "profile_vs_peers_pingpong.c")], capture_output=True, text=True)
        if r.returncode:
            notes.append(f"{tools['mpicc']} failed: {r.stderr.strip()[-200:]}")
    else:
        notes.append("no MPI compiler wrapper: the ping-pong is skipped")
    return notes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--darshan", default=os.environ.get("DARSHAN_PREFIX"),
                    help="prefix of a Darshan build (lib/libdarshan.so, bin/darshan-parser); $DARSHAN_PREFIX")
    ap.add_argument("--only", help="comma-separated words; programs whose name starts with one")
    ap.add_argument("--skip", help="comma-separated words; programs whose name starts with one are left out")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the data sizes (default 1)")
    ap.add_argument("--imb", help="IMB-MPI1 built with --mpicc's MPI (its PingPong is then profiled)")
    ap.add_argument("--dir", default=None, help="where the work directory is made (default $TMPDIR)")
    ap.add_argument("--ceiling", default=f"{sys.executable} -m ceiling", help="how to start ceiling")
    ap.add_argument("--mpicc", default=str(ROOT / ".venv/bin/mpicc"))
    ap.add_argument("--mpiexec", default=str(ROOT / ".venv/bin/mpiexec"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()

    tools = {"strace": shutil.which("strace"), "time": "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK)
             else None, "mpicc": a.mpicc if os.access(a.mpicc, os.X_OK) else shutil.which("mpicc"),
             "mpiexec": a.mpiexec if os.access(a.mpiexec, os.X_OK) else shutil.which("mpiexec")}
    darshan = a.darshan
    why_no_darshan = ("no Darshan build given (--darshan PREFIX or $DARSHAN_PREFIX)" if not darshan else
                      f"{darshan}/lib/libdarshan.so or bin/darshan-parser missing"
                      if not (os.path.exists(os.path.join(darshan, "lib", "libdarshan.so")) and
                              os.access(os.path.join(darshan, "bin", "darshan-parser"), os.X_OK)) else "")
    missing = ["strace: not installed (apt-get install strace)"] if not tools["strace"] else []
    missing += ["GNU time: /usr/bin/time not installed (apt-get install time)"] if not tools["time"] else []
    missing += [f"Darshan: {why_no_darshan}"] if why_no_darshan else []
    for m in missing:
        print(f"peer missing: {m}; its rows are skipped", file=sys.stderr)

    w = tempfile.mkdtemp(prefix="ceiling-peers-", dir=a.dir)
    w = os.path.realpath(w)
    t0 = time.monotonic()
    t = Table()
    notes = build(w, tools)
    ceiling = a.ceiling.split()
    progs = programs(w, a.scale, tools, a.imb)
    only = [x.strip() for x in a.only.split(",")] if a.only else None
    skip = [x.strip() for x in a.skip.split(",")] if a.skip else []
    try:
        for p in progs:
            if (only and not p.name.startswith(tuple(only))) or p.name.startswith(tuple(skip) or ("\0",)):
                continue
            absent = [n for n in p.needs if not (shutil.which(n) or os.access(n, os.X_OK))]
            if p.name.startswith("numpy"):
                absent += [] if subprocess.run([sys.executable, "-c", "import numpy"],
                                               capture_output=True).returncode == 0 else ["numpy"]
            if absent:
                t.skip(p.name, "all", "not installed: " + ", ".join(absent))
                continue
            start = time.monotonic()
            print(f"{p.name} ...", file=sys.stderr, flush=True)
            try:
                if p.prepare:
                    p.prepare()
                doc = run_ceiling(p, w, ceiling)
                if p.peers and tools["strace"]:
                    io_rows(t, p.name, doc, run_strace(p, w, tools["strace"]), w)
                if p.peers:
                    plain_rows(t, p.name, doc, run_plain(p, w))
                if p.peers and tools["time"]:
                    rss = metric(doc, "app.rss.peak")
                    ref = run_time(p, w, tools["time"])
                    if rss is None:
                        t.skip(p.name, "peak RSS", "no app.rss.peak metric")
                    else:
                        t.within(p.name, "peak RSS MiB", float(rss), ref, "GNU time", 0.10, 1.0)
                if p.files and not why_no_darshan:
                    file_rows(t, p.name, doc, run_darshan(p, w, darshan), w)
                if p.checks:
                    p.checks(t, p.name, doc, w)
            except (RuntimeError, subprocess.SubprocessError, OSError, KeyError, ValueError) as e:
                t.skip(p.name, "all", f"failed: {e}"[:300])
            print(f"{p.name}: {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(w, ignore_errors=True)
    print(t.markdown())
    for n in notes + missing:
        print(f"\nnote: {n}")
    bad = sum(1 for r in t.rows if r[-1] == "**not**")
    print(f"\n{len(t.rows)} rows, {bad} not ok, {sum(1 for r in t.rows if r[-1] == 'skipped')} skipped; "
          f"{time.monotonic() - t0:.0f} s in all" + (f"; work directory kept: {w}" if a.keep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
