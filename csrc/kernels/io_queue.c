/* io_queue.c - a timed phase of ceil_io_random with several operations in
 * flight per thread (spec->depth > 1): Linux native AIO (io_setup,
 * io_submit, io_getevents, the system calls themselves: no libaio needed),
 * on files opened with O_DIRECT, as fio's libaio engine does. Buffered I/O
 * through AIO completes inside io_submit, one at a time, so a queue needs
 * O_DIRECT; ceil_io_random refuses a depth without it.
 *
 * The queue is kept full: the first `depth` operations are submitted at
 * once, and every completion's slot is submitted again at once with the next
 * offset, one io_submit per operation as fio's iodepth_batch_submit=1 does
 * (gathering a reaped batch into one io_submit left the slots idle while the
 * batch was checked: random 4 KiB reads ran 10 % below fio). A read's slot
 * goes out with a spare buffer, and what it read is checked (the stamps of
 * every block) after the resubmission, so that the check of 1 MiB is never
 * time with one operation fewer in flight; there are 2 x depth buffers. A
 * write is checked (the full length written) first: its buffer is free once
 * it completed. The buffers sit in huge pages where the kernel grants them
 * (queue_buffers). Every completion's latency (submission to reaped completion)
 * is sampled. At the deadline
 * or after the operations asked for nothing
 * more is submitted and the queue drains; the phase's time includes the
 * drain and its completions count. Shared state and helpers are io.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "io.h"

#define IO_QUEUE_WAIT_NS 100000000L   /* io_getevents wakes at least this often to see a cancel */

/* The buffers in transparent huge pages where the kernel grants them (enabled = always or
 * madvise): a 1 MiB O_DIRECT transfer into 4 KiB pages is 256 scattered segments, more than a
 * virtio disk takes in one request (max_segments 254 here), so the block layer splits it in
 * two; from one huge page it is a single segment. On the development VM this doubled
 * sequential reads at depth 16 (1.1-1.2 to 2.6 GB/s), and fio's own buffers do the same
 * (--iomem=shmhuge: 2.6 GB/s; its default malloc'd buffers: 1.3-1.7). */
static char *queue_buffers(size_t bytes)
{
    const size_t huge = (size_t)2 << 20, len = (bytes + huge - 1) / huge * huge;
    void *b = NULL;
    if (posix_memalign(&b, huge, len) != 0)
        return io_buffer(bytes);
    madvise(b, len, MADV_HUGEPAGE);      /* advice: without THP the pages stay 4 KiB, nothing fails */
    return b;
}

int io_queue_open(io_run *x, io_queue *q, int depth, int64_t xfer, const char *base)
{
    memset(q, 0, sizeof *q);
    q->depth = depth;
    q->xfer = xfer;
    q->slots = queue_buffers(2 * (size_t)depth * (size_t)xfer);
    q->buf_of = calloc((size_t)depth, sizeof *q->buf_of);
    q->spare = calloc((size_t)depth, sizeof *q->spare);
    q->cbs = calloc((size_t)depth, sizeof *q->cbs);
    q->ptrs = calloc((size_t)depth, sizeof *q->ptrs);
    q->ev = calloc((size_t)depth, sizeof *q->ev);
    q->t_sub = calloc((size_t)depth, sizeof *q->t_sub);
    if (!q->slots || !q->buf_of || !q->spare || !q->cbs || !q->ptrs || !q->ev || !q->t_sub) {
        io_fail(x, CEIL_ENOMEM, ENOMEM, "storage queue: cannot allocate %d buffers of %lld bytes", 2 * depth,
                (long long)xfer);
        return -1;
    }
    for (int i = 0; i < 2 * depth; i++)   /* the pattern's base in every buffer; writes add their stamps */
        memcpy(q->slots + (size_t)i * (size_t)xfer, base, (size_t)xfer);
    for (int i = 0; i < depth; i++) {
        q->buf_of[i] = i;
        q->spare[i] = depth + i;
    }
    q->nspare = depth;
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, depth, &ctx) != 0) {
        int e = errno;
        char eb[128];
        io_fail(x, CEIL_EQUEUE, e, "io_setup(%d): %s%s", depth, strerror_r(e, eb, sizeof eb),
                e == EAGAIN ? " (the node's AIO limit, /proc/sys/fs/aio-max-nr, is reached)"
                : e == ENOSYS || e == EPERM ? " (Linux AIO is not available here: a seccomp profile or kernel option)"
                : "");
        return -1;
    }
    q->ctx = ctx;
    q->open = 1;
    return 0;
}

void io_queue_close(io_queue *q)
{
    if (q->open)   /* waits for anything still in flight before the buffers go */
        syscall(SYS_io_destroy, (aio_context_t)q->ctx);
    q->open = 0;
    free(q->slots);
    free(q->buf_of);
    free(q->spare);
    free(q->cbs);
    free(q->ptrs);
    free(q->ev);
    free(q->t_sub);
    memset(q, 0, sizeof *q);
}

/* Submit q->ptrs[0..n); 0, or -1 after io_sysfail (those not submitted are dropped). */
static int submit(io_run *x, io_queue *q, int n, const char *path, int *inflight)
{
    int done = 0;
    while (done < n) {
        long k = syscall(SYS_io_submit, (aio_context_t)q->ctx, (long)(n - done), q->ptrs + done);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            struct iocb *cb = q->ptrs[done];
            io_sysfail(x, cb->aio_lio_opcode == IOCB_CMD_PWRITE ? "io_submit (write)" : "io_submit (read)",
                       path, (int64_t)cb->aio_offset, k < 0 ? errno : EIO, 1);
            return -1;
        }
        done += (int)k;
        *inflight += (int)k;
    }
    return 0;
}

int64_t io_queue_phase(io_run *x, io_queue *q, const io_phase *ph, lat_sampler *lat)
{
    const int64_t X = q->xfer;
    int64_t issued = 0, done = 0, pos = 0;
    int inflight = 0;

    /* next offset: the file's blocks in order, from the start and around again, or random */
#define MORE() (!io_stopped(x) && (ph->max_ops == 0 || issued < ph->max_ops) && \
                (ph->deadline <= 0.0 || ceil_now() < ph->deadline))
#define PREP(i)                                                                                          \
    do {                                                                                                 \
        int64_t off_ = ph->seq ? (pos++ % ph->nblocks) * X                                               \
                               : (int64_t)((xorshift(ph->rng) >> 11) % (uint64_t)ph->nblocks) * X;        \
        char *b_ = q->slots + (size_t)q->buf_of[i] * (size_t)X;                                          \
        struct iocb *cb_ = &q->cbs[i];                                                                   \
        memset(cb_, 0, sizeof *cb_);                                                                     \
        if (ph->write)                                                                                   \
            io_stamp(b_, (size_t)X, ph->seed, ph->fid, (uint64_t)off_);                                  \
        cb_->aio_fildes = (uint32_t)ph->fd;                                                              \
        cb_->aio_lio_opcode = ph->write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD;                              \
        cb_->aio_buf = (uint64_t)(uintptr_t)b_;                                                          \
        cb_->aio_nbytes = (uint64_t)X;                                                                   \
        cb_->aio_offset = off_;                                                                          \
        cb_->aio_data = (uint64_t)(i);                                                                   \
        issued++;                                                                                        \
    } while (0)

    int n = 0;
    for (int i = 0; i < q->depth && MORE(); i++) {
        PREP(i);
        q->ptrs[n++] = &q->cbs[i];
    }
    double now = ceil_now();
    for (int i = 0; i < n; i++)
        q->t_sub[q->cbs[i].aio_data] = now;
    if (n)
        submit(x, q, n, ph->path, &inflight);
    while (inflight > 0) {
        struct timespec to = {0, IO_QUEUE_WAIT_NS};
        long got = syscall(SYS_io_getevents, (aio_context_t)q->ctx, 1L, (long)q->depth, q->ev, &to);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            io_sysfail(x, "io_getevents", ph->path, -1, errno, 0);
            break;          /* io_queue_close waits for what is still in flight */
        }
        now = ceil_now();
        for (long e = 0; e < got; e++) {
            const int i = (int)q->ev[e].data;
            const struct iocb *cb = &q->cbs[i];
            const int64_t res = q->ev[e].res, off = (int64_t)cb->aio_offset;
            const int filled = q->buf_of[i];
            inflight--;
            done++;
            lat_add(lat, now - q->t_sub[i]);
            if (ph->write) {
                if (res < 0)
                    io_sysfail(x, "write", ph->path, off, (int)-res, 1);
                else if (res < X)     /* an O_DIRECT write that stops short: the device is full */
                    io_sysfail(x, "write", ph->path, off + res, ENOSPC, 0);
            } else {
                q->buf_of[i] = q->spare[--q->nspare];    /* the slot goes out again with a spare buffer */
            }
            if (MORE()) {       /* at once, not after the batch: the queue stays full */
                PREP(i);
                q->ptrs[0] = &q->cbs[i];
                q->t_sub[i] = ceil_now();
                submit(x, q, 1, ph->path, &inflight);
            }
            if (!ph->write) {   /* checked while the slot's next read is in flight */
                judge_read(x, ph->path, res < 0 ? -1 : (ssize_t)res, res < 0 ? (int)-res : 0, (size_t)X, off,
                           q->slots + (size_t)filled * (size_t)X, ph->base, ph->seed, ph->fid, ph->all, 1);
                q->spare[q->nspare++] = filled;
            }
        }
    }
#undef MORE
#undef PREP
    return done;
}
