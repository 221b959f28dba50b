"""Storage: sequential bandwidth (file per thread, one shared file, strided),
random 4 KiB IOPS and metadata rates, on the file system of ``--dir``.

What is measured, and how it is kept true (csrc/kernels/io.c does the I/O):

- Sequential write then read of each thread's data in transfers of one size,
  fsync before close inside the timed write phase (IOR ``-e``, fio
  ``end_fsync=1``), in three layouts: a file per thread (IOR-easy), one shared
  file with a contiguous segment per thread, and one shared file with the
  threads' transfers interleaved (transfer i of thread t at (i*N+t)*xfer,
  IOR-hard-like, 64 KiB transfers). Bandwidth by transfer size (4 KiB ..
  16 MiB) on the file-per-thread layout is a Series.
- The page cache is defeated so that a read figure is the device's: O_DIRECT
  where the file system takes it, otherwise buffered I/O and, after the
  fsync, posix_fadvise(POSIX_FADV_DONTNEED) on every file (no root needed).
  Which one held is measured: mincore() counts the file pages still resident
  before the read, and a read figure with pages left in the cache says so.
  Writing 1.5x the node's memory would also defeat the cache but takes
  minutes on a large node, so it is never the default (``--size`` can ask).
- Every transfer carries a stamp per 512 bytes made from (file, offset), and
  every read checks it: a stale, misplaced, zeroed or short block makes the
  metric invalid, with the first mismatching offset in its note.
- Random 4 KiB reads and writes (pread/pwrite, one operation in flight per
  thread: fio's psync at iodepth 1), O_DIRECT when available, on one file per
  thread; every operation is timed for p50/p99 latency (reservoir sample).
- Metadata (mdtest's phases and order): each thread creates, stats, reads and
  unlinks its files, in one shared directory and in a directory per thread
  (mdtest -u), a barrier between phases; rates are files per second of all
  threads, each operation timed for percentiles. Files are 3901 bytes, MD-
  Workbench's default (mdtest's default of 0 bytes would make "read" an
  open and close only; 3901 is not a multiple of 512 or 4096, so the last
  block is a partial one, as it is for most small files).

Units follow IOR: MiB/s (2^20 bytes per second); IOPS and op/s are
operations per second of all threads together.

Safety: everything is written inside a new ``ceiling-io-XXXXXX`` directory
(under ``--dir``, or $TMPDIR), every file is created with O_EXCL, free space
is checked first, and the directory is removed on success, error and Ctrl-C
(and by an atexit hook if all else failed). A full disk mid-run is one clear
error, after the files are removed; the figures measured before it are kept
(they travel with the error, and the run is marked partial).

The pieces: the C loops' binding is core/io.py, the file system and its
device peak machine/storage.py, the run directory bench/storage_dir.py, and
several MPI processes measuring together bench/storage_mpi.py (which uses
this module, never the other way round).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from ..cluster import watchdog
from ..core.io import MD_BYTES, RAND_XFER, STAMP_EVERY, DirectRefused, Group, IoRaw, meta_io, random_io, seq_io
from ..errors import BadValueError, CeilingError
from ..machine.storage import FileSystem, describe_fs
from ..results.model import LOWER, OK, WARN, Finding, Metric, Series
from ..results.measure import Context, Interrupted, Outcome
from ..sysfs import meminfo_bytes
from . import storage_dir, storage_queue
from .storage_dir import RunDir, free_bytes
from .storage_figures import (GIB, IOPS, KIB, MIB, MIBS, OPS, US, cache_defeat, lat_cap,  # noqa: F401
                              latency_summary, metric)

# -- defaults ---------------------------------------------------------------------

QUICK_TOTAL_BYTES = 256 * MIB       # sequential data per measurement, all threads
TOTAL_BYTES = 1 * GIB
MIN_BYTES_PER_THREAD = 1 * MIB
XFER = 1 * MIB                      # headline transfer (IOR-easy's usual -t 1m)
STRIDED_XFER = 64 * KIB             # interleaved layout's transfer (IOR-hard uses 47008 B, which O_DIRECT cannot)
SWEEP_XFERS = (4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB)
QUICK_SWEEP_XFERS = (4 * KIB, 64 * KIB, 1 * MIB, 16 * MIB)
SWEEP_TRANSFERS = 1024              # transfers per thread at each sweep point, at most
RAND_FILE_BYTES = 256 * MIB         # per thread, at most; never more than the sequential data
QUICK_RAND_FILE_BYTES = 64 * MIB
RAND_SECONDS, QUICK_RAND_SECONDS = 3.0, 1.0
MD_FILES, QUICK_MD_FILES = 4000, 1000   # per thread
REPS, QUICK_REPS = 5, 3
SWEEP_REPS = 2
DEFAULT_MAX_THREADS = 8             # without --threads: a node's storage saturates with a few streams
FREE_MARGIN = 1.10                  # free space needed: what a run writes at once, +10 %
# RAND_XFER (4 KiB), MD_BYTES (3901 B, MD-Workbench's default) and LAT_CAP are the
# storage loops' own defaults (core/io.py), used here as they are.

# Test hook: called with the run directory between each sequential write and
# its read (after eviction), so a test can corrupt a file there.
_BETWEEN: Optional[Callable[[str], None]] = None


class ParallelPart(Group, Protocol):
    """This process's part when several measure together (bench/storage_mpi.Parallel):
    what the plan, the runner and the report need, besides what the I/O calls do."""

    threads: int                    # per process, the same in every process
    cpus: Optional[List[int]]       # this process's threads' CPUs; None: not pinned
    size: int                       # processes
    max_ranks_per_node: int

    def context(self) -> Dict[str, Any]:
        """What every metric carries about the processes."""

    def file_system(self, path: str) -> FileSystem:
        """Collective: the file system of every process's run directory, combined."""


# -- the plan ---------------------------------------------------------------------------

@dataclass
class Plan:
    """Sizes and counts of one storage run, and where they came from."""

    threads: int                # per process
    cpus: Optional[List[int]]   # the threads' CPUs; None: not pinned (ranks sharing CPUs)
    total_bytes: int            # sequential data per measurement, all threads (of this node, with MPI)
    bytes_per_thread: int
    xfer: int
    strided_xfer: int
    sweep: List[int]
    rand_file_bytes: int        # per thread
    rand_seconds: float
    md_files: int               # per thread
    md_bytes: int
    reps: int
    notes: Dict[str, str] = field(default_factory=dict)

    def bytes_at_once(self) -> int:
        """The most this run has on disk at one time (each measurement removes its files)."""
        return max(self.threads * self.bytes_per_thread, self.threads * self.rand_file_bytes) \
            + self.threads * self.md_files * max(self.md_bytes, 4096)


def plan(ctx: Context, par: Optional[ParallelPart] = None) -> Plan:
    """Sizes and counts; with ``par`` (several ranks) per rank, from the node's share of the data."""
    opts = ctx.opts
    quick = opts.quick
    cpus: Optional[List[int]] = list(ctx.cpus)
    notes: Dict[str, str] = {}
    if par is not None:
        cpus = par.cpus
        n_threads = par.threads
        per_node = par.threads * par.max_ranks_per_node      # the threads sharing one node's data
    else:
        if opts.threads is None and len(cpus) > DEFAULT_MAX_THREADS:
            cpus = cpus[:DEFAULT_MAX_THREADS]
            notes["threads"] = (f"{DEFAULT_MAX_THREADS} threads (the first CPUs of the plan): one node's "
                                "storage saturates with a few streams; --threads sets another count")
        n_threads = per_node = max(1, len(cpus))
    n = per_node
    if opts.size_bytes is not None:
        total = int(opts.size_bytes)
        if total < n * MIN_BYTES_PER_THREAD:
            raise BadValueError(f"--size {total}: storage needs at least {MIN_BYTES_PER_THREAD // MIB} MiB per "
                                f"thread ({n * MIN_BYTES_PER_THREAD} bytes for {n} threads)")
        notes["size"] = "set by the user" + (" (data per node)" if par is not None else "")
    else:
        total = QUICK_TOTAL_BYTES if quick else TOTAL_BYTES
        mem = meminfo_bytes("MemTotal")
        notes["size"] = (f"{total // MIB} MiB of data per measurement{' and node' if par is not None else ''} "
                         f"({'quick' if quick else 'default'}); the page cache is defeated by O_DIRECT or "
                         "fadvise, not by size"
                         + (f" (1.5x the {mem // GIB} GiB of memory would take far longer)" if mem else ""))
    bpt = max(XFER, total // n // XFER * XFER)
    reps = opts.reps if opts.reps else (QUICK_REPS if quick else REPS)
    if reps < 1 or reps > 1000:
        raise BadValueError(f"--reps {reps}: must be between 1 and 1000")
    rand = min(QUICK_RAND_FILE_BYTES if quick else RAND_FILE_BYTES, bpt) // RAND_XFER * RAND_XFER
    return Plan(threads=n_threads, cpus=cpus, total_bytes=n * bpt, bytes_per_thread=bpt, xfer=XFER,
                strided_xfer=STRIDED_XFER, sweep=list(QUICK_SWEEP_XFERS if quick else SWEEP_XFERS),
                rand_file_bytes=rand, rand_seconds=QUICK_RAND_SECONDS if quick else RAND_SECONDS,
                md_files=QUICK_MD_FILES if quick else MD_FILES, md_bytes=MD_BYTES, reps=reps, notes=notes)


# -- the bench --------------------------------------------------------------------------

@dataclass
class _Mode:
    direct: bool = True
    refused: str = ""           # why O_DIRECT was given up


class _Runner:
    """One storage run: the mode (direct or buffered), the context every metric carries."""

    def __init__(self, ctx: Context, p: Plan, run_dir: str, fs: FileSystem, par: Optional[ParallelPart] = None):
        self.ctx, self.p, self.dir, self.fs, self.par = ctx, p, run_dir, fs, par
        self.mode = _Mode()
        self.n = 0
        self.all_threads = p.threads * (par.size if par is not None else 1)

    def tag(self, what: str) -> str:
        watchdog.set_phase(f"storage, {storage_dir.TAG_WORDS.get(what, what)}")
        self.n += 1
        return f"{what}{self.n}"

    def between(self) -> Optional[Callable[[], None]]:
        hook = _BETWEEN
        return (lambda: hook(self.dir)) if hook is not None else None

    def seq(self, *, layout: str, xfer: int, bytes_per_thread: int, reps: int, direct: Optional[bool] = None
            ) -> IoRaw:
        """One sequential measurement; falls back to buffered (for good) when O_DIRECT is refused."""
        want = self.mode.direct if direct is None else direct
        kw = dict(nthreads=self.p.threads, cpus=self.p.cpus, bytes_per_thread=bytes_per_thread, xfer=xfer,
                  layout=layout, evict=True, reps=reps, between=self.between(), par=self.par)
        if want:
            try:
                return seq_io(self.dir, direct=True, tag=self.tag(f"seq.{layout}"), **kw)
            except DirectRefused as e:
                self.mode = _Mode(False, str(e))
        return seq_io(self.dir, direct=False, tag=self.tag(f"seq.{layout}"), **kw)

    def rand(self) -> IoRaw:
        kw = dict(nthreads=self.p.threads, cpus=self.p.cpus, file_bytes=self.p.rand_file_bytes,
                  duration_s=self.p.rand_seconds, reps=self.p.reps, evict=True,
                  lat_cap=lat_cap(self.all_threads), par=self.par)
        if self.mode.direct:
            try:
                return random_io(self.dir, direct=True, tag=self.tag("rand"), **kw)
            except DirectRefused as e:
                self.mode = _Mode(False, str(e))
        return random_io(self.dir, direct=False, tag=self.tag("rand"), **kw)

    def meta(self, unique: bool) -> IoRaw:
        return meta_io(self.dir, nthreads=self.p.threads, cpus=self.p.cpus, files=self.p.md_files,
                       md_bytes=self.p.md_bytes, unique_dir=unique, reps=self.p.reps,
                       lat_cap=lat_cap(self.all_threads), par=self.par,
                       tag=self.tag("md.unique" if unique else "md.shared"))

    def context(self, raw: IoRaw, **extra) -> Dict[str, Any]:
        out: Dict[str, Any] = {"threads": raw.nthreads, "reps": len(raw.phase_s),
                               "io": "direct" if raw.direct else "buffered"}
        if self.par is None:
            out.update(cpus=(self.p.cpus or [])[:raw.nthreads], placement=self.ctx.opts.placement)
        else:
            out.update(self.par.context())
        out.update(self.fs.context())
        out.update(extra)
        out.update({f"{k}_note": v for k, v in self.p.notes.items()})
        return out


def _seq_metrics(r: _Runner, raw: IoRaw, layout: str, xfer: int, bpt: int, suffix: str = "") -> List[Metric]:
    method, held = cache_defeat(raw)
    ctx = r.context(raw, layout=layout, xfer_bytes=xfer, bytes_per_thread=bpt, total_bytes=bpt * raw.nthreads,
                    fsync="before close, inside the timed write phase (IOR -e)",
                    verify=f"a 64-bit stamp per {STAMP_EVERY} B checked on every read",
                    unit_note="MiB/s = 2^20 bytes per second (IOR's convention)")
    if r.mode.refused:
        ctx["direct_refused"] = r.mode.refused
    out = []
    for ph, what in ((0, "write"), (1, "read")):
        c = dict(ctx)
        note = ""
        if ph == 1:
            c["cache_defeat"] = method
            c["resident_fraction"] = raw.resident
            if not held:
                note = f"page cache not defeated: {method}"
        out.append(metric(f"storage.seq.{what}.{layout}{suffix}", raw.rates(ph, 1 / MIB), MIBS, raw,
                           peak=r.fs.peak, context=c, note=note))
    return out


def check_space(p: Plan, path: str, shown: str, processes: int = 1,
                found: Sequence[storage_dir.Leftover] = ()) -> None:
    """BadValueError unless ``path`` has room for what the plan writes at once (+10 %);
    ``found``: leftovers of killed runs in the same parent, named in the message."""
    need = p.bytes_at_once() * processes
    free = free_bytes(path)
    if free < FREE_MARGIN * need:
        raise BadValueError(f"--dir {shown}: {free / GIB:.2f} GiB free, the storage bench needs "
                            f"{FREE_MARGIN * need / GIB:.2f} GiB (what it writes at once +10 %): use a smaller "
                            "--size or another --dir"
                            + (f"; {storage_dir.held(list(found))}: --clean removes them" if found else ""))


def preflight(ctx: Context) -> Plan:
    """Every check that needs no measurement, for the CLI to run before anything else:
    sizes and repetitions (BadValueError), the directory (PathError) and its free space
    (BadValueError). bench_storage repeats them; this only makes bad input fail first."""
    p = plan(ctx)
    parent = getattr(ctx.opts, "storage_dir", None)
    found = storage_dir.find_leftovers(ctx.opts)
    with RunDir(parent) as rd:        # proves the directory writable, and removes the probe
        check_space(p, rd.path, parent or os.path.dirname(rd.path), found=found)
    return p


def bench_storage(ctx: Context, parallel: Optional[Tuple[ParallelPart, str, Plan]] = None) -> Outcome:
    """Sequential bandwidth, random IOPS and metadata rates on ``storage_dir`` (or $TMPDIR).

    ``parallel``: what bench/storage_mpi.prepare_parallel yields (this rank's Parallel,
    the run directory, the plan); every MPI rank calls this and they measure together.
    Every rank returns the same figures, except the latency percentiles, which only
    rank 0 computes from every rank's samples.
    """
    if parallel is not None:
        return _bench_parallel(ctx, *parallel)
    parent = getattr(ctx.opts, "storage_dir", None)
    p = plan(ctx)
    out = Outcome()
    found = storage_dir.find_leftovers(ctx.opts)
    if found:
        out.findings.append(storage_dir.leftover_finding(found))
    with RunDir(parent) as rd:
        check_space(p, rd.path, parent or os.path.dirname(rd.path), found=found)
        fs = describe_fs(rd.path)
        fs.dir = os.path.dirname(rd.path)     # the run's own subdirectory is gone afterwards
        _measure_keeping(_Runner(ctx, p, rd.path, fs), out)
    return out


def _bench_parallel(ctx: Context, par: ParallelPart, path: str, p: Plan) -> Outcome:
    out = Outcome()
    fs = par.file_system(path)
    _measure_keeping(_Runner(ctx, p, path, fs, par), out)
    return out


def _measure_keeping(r: "_Runner", out: Outcome) -> None:
    """_measure; what it measured before a stop or a failure (a full disk) travels with
    the exception: Interrupted's outcome, or ``outcome`` set on the CeilingError."""
    try:
        with watchdog.holding(lambda: out):     # a rank stopped answering: rank 0 keeps this much
            _measure(r, out)
    except KeyboardInterrupt as e:
        raise Interrupted(out, *e.args) from None
    except CeilingError as e:
        e.outcome = out          # type: ignore[attr-defined]
        raise


def _measure(r: _Runner, out: Outcome) -> None:
    p, prog = r.p, r.ctx.progress
    fs = r.fs
    peak = (f"{fs.peak.value:.0f} {MIBS}" if fs.peak.known else "unknown") + f" - {fs.peak.provenance}"
    if fs.groups:
        where = "; ".join(f"{g['dir']} on {g['host']} (nodes {', '.join(g['nodes'][:4])}"
                          f"{' ...' if len(g['nodes']) > 4 else ''}) is on {g['mount_point'] or '?'} ({g['fs_type']})"
                          for g in fs.groups[:8])
        out.findings.append(Finding(
            id="storage.fs", status=OK, title=f"storage: {len(fs.groups)} directories, one per group of nodes",
            evidence=f"{where}{' ...' if len(fs.groups) > 8 else ''}; peak of the aggregate: {peak}"))
    else:
        out.findings.append(Finding(
            id="storage.fs", status=OK, title=f"storage: {fs.fstype} on {fs.mount.source if fs.mount else '?'}",
            evidence=f"{r.dir} is on {fs.mount.mount_point if fs.mount else '?'} ({fs.fstype}); device peak: {peak}"))
    # A progress step per phase: a batch log (not a terminal) gets a line as each one starts.
    prog.start("storage: sequential write and read, 3 layouts", total=4)      # and buffered, where direct
    # headline: the three layouts at the headline transfer, direct when the file system allows
    for layout, xfer in (("fpp", p.xfer), ("shared", p.xfer), ("strided", p.strided_xfer)):
        bpt = p.bytes_per_thread // xfer * xfer
        raw = r.seq(layout=layout, xfer=xfer, bytes_per_thread=bpt, reps=p.reps)
        out.metrics += _seq_metrics(r, raw, layout, xfer, bpt)
        prog.advance()
    # the same file-per-thread pattern buffered (fsync + fadvise), when the headline was direct
    if r.mode.direct:
        raw = r.seq(layout="fpp", xfer=p.xfer, bytes_per_thread=p.bytes_per_thread, reps=p.reps, direct=False)
        out.metrics += _seq_metrics(r, raw, "fpp", p.xfer, p.bytes_per_thread, suffix=".buffered")
    prog.advance()
    # bandwidth against transfer size
    xs: List[float] = []
    ys: Dict[int, List[Optional[float]]] = {0: [], 1: []}
    invalid: List[str] = []
    skipped: List[str] = []
    sweep_reps = min(p.reps, SWEEP_REPS)
    prog.start("storage: bandwidth by transfer size", total=len(p.sweep))
    for xfer in p.sweep:
        bpt = min(p.bytes_per_thread, xfer * SWEEP_TRANSFERS) // xfer * xfer
        if bpt < xfer:
            skipped.append(f"{xfer} B: larger than the {p.bytes_per_thread} bytes per thread")
            prog.advance()
            continue
        raw = r.seq(layout="fpp", xfer=xfer, bytes_per_thread=bpt, reps=sweep_reps)
        xs.append(xfer)
        for ph in (0, 1):
            ys[ph].append(max(raw.rates(ph, 1 / MIB)) if raw.valid else None)
        if not raw.valid:
            invalid.append(f"{xfer} B: {raw.msg}")
        prog.advance()
    for ph, what in ((0, "write"), (1, "read")):
        c = {"layout": "fpp", "threads": p.threads * (r.par.size if r.par else 1),
             "io": "direct" if r.mode.direct else "buffered", **(r.par.context() if r.par else {}),
             "reps": sweep_reps, "y_stat": f"best of {sweep_reps} repetitions",
             "x_note": f"transfer size; each thread moves up to {SWEEP_TRANSFERS} transfers",
             **fs.context()}
        if invalid:
            c["invalid"] = invalid
        if skipped:
            c["skipped"] = skipped
        out.series.append(Series(f"storage.seq.{what}.xfer", "xy", title=f"Sequential {what} by transfer size",
                                 x_label="transfer", x_unit="bytes", y_label="bandwidth", y_unit=MIBS,
                                 x=xs, y=ys[ph], context=c))
    # random 4 KiB
    prog.start(f"storage: random {RAND_XFER // 1024} KiB read and write")
    raw = r.rand()
    method, held = cache_defeat(raw)
    for ph, what in ((0, "randread"), (1, "randwrite")):
        pooled = [v for rep in raw.lat_s for v in rep[ph]]
        c = r.context(raw, xfer_bytes=RAND_XFER, file_bytes_per_thread=p.rand_file_bytes,
                      seconds_per_rep=p.rand_seconds, engine="pread/pwrite, one operation in flight per thread "
                      "(fio psync, iodepth=1)", latency_us=latency_summary(pooled),
                      cache_defeat=method if ph == 0 else None)
        if ph == 1:
            c["fsync"] = "once per thread at the end, inside the timed phase (fio end_fsync=1)"
        note = "" if held or ph == 1 else f"page cache not defeated: {method}"
        if not raw.direct and ph == 0:
            note = "; ".join(filter(None, [note, "buffered reads: blocks read twice in a repetition come from "
                                                 "the page cache"]))
        out.metrics.append(metric(f"storage.iops.{what}", raw.rates(ph), IOPS, raw, context=c, note=note))
        for q in (50, 99):
            vals = [float(np.percentile(rep[ph], q)) * 1e6 for rep in raw.lat_s if len(rep[ph])]
            if vals:
                out.metrics.append(metric(f"storage.lat.{what}.p{q}", vals, US, raw, better=LOWER,
                                           context={"threads": raw.nthreads, "io": c["io"],
                                                    "stat": f"p{q} of each repetition's operations",
                                                    **fs.context()}))
    if r.mode.direct:
        prog.start(f"storage: {storage_queue.QUEUE_DEPTH} requests in flight per thread, in order and random")
    storage_queue.measure(r, out)        # the device kept busy: requests in flight (fio libaio)
    # metadata, shared directory then a directory per thread
    prog.start("storage: metadata, a shared directory and one per thread", total=2)
    for unique, suffix in ((False, ""), (True, ".unique")):
        raw = r.meta(unique)
        for ph, what in enumerate(("create", "stat", "read", "unlink")):
            pooled = [v for rep in raw.lat_s for v in rep[ph]]
            c = r.context(raw, files_per_thread=p.md_files, file_bytes=p.md_bytes,
                          directory="one per thread (mdtest -u)" if unique else "one shared by all threads",
                          latency_us=latency_summary(pooled), io="buffered",
                          note="no fsync (mdtest's default): rates include the journal's and page cache's work")
            out.metrics.append(metric(f"storage.md.{what}{suffix}", raw.rates(ph), OPS, raw, context=c))
        prog.advance()
    prog.done()
    if r.mode.refused:
        out.findings.append(Finding(
            id="storage.direct", status=WARN, title="storage: O_DIRECT refused, buffered I/O used",
            evidence=r.mode.refused,
            why="Without O_DIRECT, reads reach the device only if the page cache was emptied first.",
            fix="Each read metric says whether posix_fadvise emptied it (cache_defeat, resident_fraction)."))
    bad = [m.name for m in out.metrics if "page cache not defeated" in m.note]
    if bad:
        out.findings.append(Finding(
            id="storage.cache", status=WARN, title="storage: read figures include the page cache",
            evidence=f"{', '.join(bad)}: pages stayed resident after the write and eviction",
            why="A read served from memory is not the device's bandwidth.",
            fix="Use a file system that honours O_DIRECT or posix_fadvise, or --size of 1.5x the node's memory."))
