"""Storage with a queue: what the device sustains when it is kept busy.

The rest of ``bench storage`` issues one request at a time per thread (IOR's
and fio psync's pattern: what an application doing plain read/write sees).
A device, an NVMe drive above all, reaches its bandwidth and IOPS only with
many requests in flight. This part measures that, as fio does with
``--ioengine=libaio --iodepth=16 --direct=1``: QUEUE_DEPTH operations in
flight per thread through Linux AIO on O_DIRECT files (csrc/kernels/
io_queue.c), one file per thread of the random bench's size, for a duration
per phase:

- storage.queue.read / .write: the file's 1 MiB blocks in order (fio
  rw=read / rw=write, bs=1M), MiB/s;
- storage.queue.randread / .randwrite: random 4 KiB blocks (fio rw=randread /
  randwrite, bs=4k), IOPS.

Every read is checked against the stamps written, writes end with fsync
inside the phase (fio end_fsync=1). Buffered I/O cannot queue (AIO without
O_DIRECT completes inside the submit call), so where the file system refuses
O_DIRECT, or Linux AIO is not available (a seccomp profile, the node's
aio-max-nr), these figures are skipped with the reason.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.io import RAND_XFER, DirectRefused, IoRaw, QueueRefused, random_io
from ..results.measure import Outcome
from ..results.model import HIGHER, SKIPPED, Finding
from .storage_figures import IOPS, MIB, MIBS, metric, cache_defeat, lat_cap, latency_summary

if TYPE_CHECKING:
    from .storage import _Runner

QUEUE_DEPTH = 16          # per thread: fio's usual --iodepth for a device's figures
SEQ_XFER = 1 * MIB


def _run(r: "_Runner", in_order: bool) -> IoRaw:
    p = r.p
    xfer = SEQ_XFER if in_order else RAND_XFER
    return random_io(r.dir, nthreads=p.threads, cpus=p.cpus, file_bytes=file_bytes(r, xfer),
                     xfer=xfer, duration_s=p.rand_seconds, reps=p.reps, evict=True, direct=True,
                     lat_cap=lat_cap(r.all_threads), par=r.par, depth=QUEUE_DEPTH, in_order=in_order,
                     tag=r.tag("queue.seq" if in_order else "queue.rand"))


def skipped(why: str) -> Finding:
    return Finding(id="storage.queue", status=SKIPPED, title="storage: no figures with a queue of requests",
                   evidence=why,
                   why="A device reaches its bandwidth and IOPS only with many requests in flight; ceiling "
                       "queues them with Linux AIO on O_DIRECT files, as fio's libaio engine does.")


def measure(r: "_Runner", out: Outcome) -> None:
    """storage.queue.{read,write} (MiB/s) and .{randread,randwrite} (IOPS) into ``out``, or
    the finding that says why not."""
    if not r.mode.direct:
        out.findings.append(skipped(f"O_DIRECT is refused on this file system ({r.mode.refused}), and "
                                    "buffered asynchronous I/O completes one request at a time"))
        return
    for in_order in (True, False):
        try:
            raw = _run(r, in_order)
        except (DirectRefused, QueueRefused) as e:
            out.findings.append(skipped(str(e)))
            return
        xfer = SEQ_XFER if in_order else RAND_XFER
        method, held = cache_defeat(raw)
        for ph, what in ((0, "read"), (1, "write")):
            pooled = [v for rep in raw.lat_s for v in rep[ph]]
            c = r.context(raw, xfer_bytes=xfer, depth_per_thread=QUEUE_DEPTH,
                          in_flight=QUEUE_DEPTH * r.all_threads, file_bytes_per_thread=file_bytes(r, xfer),
                          seconds_per_rep=r.p.rand_seconds,
                          access="the file's blocks in order" if in_order else "random blocks",
                          engine=f"Linux AIO, O_DIRECT, {QUEUE_DEPTH} requests in flight per thread "
                                 f"(fio --ioengine=libaio --iodepth={QUEUE_DEPTH} --direct=1)",
                          latency_us=latency_summary(pooled), cache_defeat=method if ph == 0 else None)
            if ph == 1:
                c["fsync"] = "once per thread at the end, inside the timed phase (fio end_fsync=1)"
            note = "" if held or ph == 1 else f"page cache not defeated: {method}"
            if in_order:
                out.metrics.append(metric(f"storage.queue.{what}", raw.rates(ph, xfer / MIB), MIBS, raw,
                                           peak=r.fs.peak, context=c, note=note))
            else:
                out.metrics.append(metric(f"storage.queue.rand{what}", raw.rates(ph), IOPS, raw, HIGHER,
                                           context=c, note=note))


def file_bytes(r: "_Runner", xfer: int) -> int:
    """Each thread's file: the random bench's size, in whole transfers."""
    return r.p.rand_file_bytes // xfer * xfer
