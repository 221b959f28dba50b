/* io_random.c - random IOPS for `ceiling bench storage`: one file per
 * thread, written and fsynced untimed first; each repetition evicts it (with
 * CEIL_IO_EVICT), then times a phase of random reads (each one checked); then
 * the same for every repetition's phase of random writes ending with fsync
 * (fio end_fsync=1), all reads before any write, one operation
 * of spec->xfer bytes at a time per thread (fio psync, iodepth 1; Python asks
 * for fio's usual 4 KiB), for a count or a duration; or spec->depth at a time
 * (io_queue.c: Linux AIO on O_DIRECT, fio libaio), and with CEIL_IO_SEQ_ORDER
 * the file's blocks in order. Each operation's latency is sampled. Shared
 * state and helpers are io.c's (io.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io.h"

/* What the team shares: the call's sizes and what thread 0 (or an atomic update)
 * sets for all: residency, operations done per phase, the phase's start. */
typedef struct {
    io_run *x;
    int64_t F, X, nblocks, chunk;
    int N, depth, direct, dflag, seq_order, total;
    int res_unknown;
    double t0, resident;
    int64_t res_pages, tot_pages, nops[2];
} rand_team;

/* One thread's: its file, buffers, descriptor and queue. */
typedef struct {
    int tid, fd, created;
    uint64_t fid;
    char path[PATH_MAX];
    char *wbuf, *rbuf, *fill;
    io_queue q;
} rand_thread;

/* Untimed: create and fill the file, fsync it, open it for the test. */
static void rand_fill(rand_team *t, rand_thread *me)
{
    io_run *x = t->x;
    const ceil_params *p = x->p;
    me->fd = create_open(x, me->path, O_WRONLY | t->dflag, &me->created);
    for (int64_t off = 0; me->fd >= 0 && off < t->F && !io_stopped(x); off += t->chunk) {
        int64_t n = t->F - off < t->chunk ? t->F - off : t->chunk;
        io_stamp(me->fill, (size_t)n, p->seed, me->fid, (uint64_t)off);
        if (pwrite_full(me->fd, me->fill, (size_t)n, off) < 0)
            io_sysfail(x, "write", me->path, off, errno, t->direct);
    }
    if (me->fd >= 0 && !io_stopped(x) && fsync(me->fd) != 0)
        io_sysfail(x, "fsync", me->path, -1, errno, 0);
    if (me->fd >= 0)
        close(me->fd);
    me->fd = -1;
    if (!io_stopped(x) && (me->fd = open(me->path, O_RDWR | O_CLOEXEC | t->dflag)) < 0)
        io_sysfail(x, "open", me->path, -1, errno, t->direct);
#ifdef POSIX_FADV_RANDOM
    if (me->fd >= 0)
        posix_fadvise(me->fd, 0, 0, POSIX_FADV_RANDOM);   /* no read-ahead around buffered reads */
#endif
}

/* Untimed, before each phase: evict the files and count what stayed resident. */
static void rand_evict(rand_team *t, rand_thread *me)
{
    io_run *x = t->x;
    if (me->tid == 0)
        t->res_pages = t->tot_pages = 0;
#pragma omp barrier
    if (evict_measure(me->path, (x->s->flags & CEIL_IO_EVICT) != 0, &t->res_pages, &t->tot_pages) != 0) {
#pragma omp atomic write
        t->res_unknown = 1;
    }
#pragma omp barrier
    if (me->tid == 0) {
        io_keep_resident(&t->resident, t->res_pages, t->tot_pages);
        t->nops[0] = t->nops[1] = 0;
    }
    CONSENSUS(x);
}

/* One operation at a time until the count or the deadline: reads (ph 0) checked,
 * writes (ph 1) stamped; returns the operations done. */
static int64_t rand_one_by_one(rand_team *t, rand_thread *me, int ph, uint64_t *rng, double deadline,
                               lat_sampler *lat)
{
    io_run *x = t->x;
    const ceil_params *p = x->p;
    const ceil_io_spec *s = x->s;
    const int64_t X = t->X;
    int64_t n = 0, pos = 0;
    while ((s->ops == 0 || n < s->ops) && !io_stopped(x)) {
        int64_t off = t->seq_order ? (pos++ % t->nblocks) * X
                                   : (int64_t)((xorshift(rng) >> 11) % (uint64_t)t->nblocks) * X;
        double a = ceil_now();
        if (s->duration_s > 0.0 && a >= deadline)
            break;
        if (ph == 0) {
            ssize_t got = pread_full(me->fd, me->rbuf, (size_t)X, off);
            int err = errno;
            double b = ceil_now();
            lat_add(lat, b - a);
            judge_read(x, me->path, got, err, (size_t)X, off, me->rbuf, me->wbuf, p->seed, me->fid,
                       (s->flags & CEIL_IO_VERIFY_ALL) != 0, t->direct);
        } else {
            io_stamp(me->wbuf, (size_t)X, p->seed, me->fid, (uint64_t)off);
            if (pwrite_full(me->fd, me->wbuf, (size_t)X, off) < 0)
                io_sysfail(x, "write", me->path, off, errno, t->direct);
            lat_add(lat, ceil_now() - a);
        }
        n++;
    }
    return n;
}

/* Phase ph (0 reads, 1 writes) of repetition j, timed: one operation at a time or
 * through the queue, the writes' fsync inside the phase. */
static void rand_phase(rand_team *t, rand_thread *me, int ph, int j)
{
    io_run *x = t->x;
    const ceil_params *p = x->p;
    const ceil_io_spec *s = x->s;
    const int rep = j - p->warmup;
    lat_sampler lat = lat_for(x, rep, ph, me->tid, 2);
    uint64_t rng = mix64(p->seed ^ me->fid ^ ((uint64_t)j << 8) ^ (uint64_t)ph) | 1;
    int64_t n = 0;
    PHASE_START(x, t->t0);
    const double deadline = t->t0 + s->duration_s;
    if (t->depth > 1) {
        const io_phase qp = {.fd = me->fd, .path = me->path, .write = ph, .seq = t->seq_order,
                             .all = (s->flags & CEIL_IO_VERIFY_ALL) != 0, .nblocks = t->nblocks,
                             .rng = &rng, .deadline = s->duration_s > 0.0 ? deadline : 0.0,
                             .max_ops = s->ops, .base = me->wbuf, .seed = p->seed, .fid = me->fid};
        n = io_queue_phase(x, &me->q, &qp, &lat);
    } else {
        n = rand_one_by_one(t, me, ph, &rng, deadline, &lat);
    }
    if (ph == 1 && !io_stopped(x) && fsync(me->fd) != 0)
        io_sysfail(x, "fsync", me->path, -1, errno, 0);
#pragma omp atomic
    t->nops[ph] += n;
#pragma omp barrier
    if (me->tid == 0 && rep >= 0) {
        x->o->phase_s[2 * rep + ph] = ceil_now() - t->t0;
        x->o->amount[2 * rep + ph] = t->nops[ph];
    }
    lat_done(x, &lat, rep, ph, me->tid, 2);
}

int ceil_io_random(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r)
{
    int rc = io_validate(p, s, o, r, 2, "storage random");
    if (rc)
        return rc;
    const int64_t F = s->bytes_per_thread, X = s->xfer;
    const int direct = (s->flags & CEIL_IO_DIRECT) != 0;
    if (X < IO_STAMP || X % IO_STAMP || X > IO_FILL_CHUNK || F < X || F % X || (direct && X % IO_ALIGN) ||
        s->ops < 0 || !(s->duration_s >= 0.0) || s->duration_s > 3600.0 || (s->ops == 0 && s->duration_s == 0.0)) {
        ceil_set_msg(r, "storage random: needs an operation of 512 B .. 1 MiB in 512 B multiples (4 KiB "
                        "with O_DIRECT), a file size multiple of it, and ops > 0 or 0 < duration <= 3600 s");
        return CEIL_EINVAL;
    }
    const int depth = s->depth > 1 ? s->depth : 1;
    if (s->depth < 0 || s->depth > 4096 || (depth > 1 && !direct)) {
        ceil_set_msg(r, "storage random: a depth of 0 .. 4096 operations in flight, and more than one only "
                        "with O_DIRECT (buffered AIO completes inside io_submit, one at a time)");
        return CEIL_EINVAL;
    }
    const int N = p->nthreads, total = p->warmup + p->reps;
    io_run x = {.p = p, .s = s, .o = o, .bad_offset = -1};
    rand_team t = {.x = &x, .F = F, .X = X, .nblocks = F / X,
                   .chunk = (IO_FILL_CHUNK / X) * X < F ? (IO_FILL_CHUNK / X) * X : F,
                   .N = N, .depth = depth, .direct = direct, .dflag = direct ? O_DIRECT : 0,
                   .seq_order = (s->flags & CEIL_IO_SEQ_ORDER) != 0, .total = total};
    int pin_err = 0, pin_cpu = -1, nt_run = 0;

#pragma omp parallel num_threads(N)
    {
        rand_thread me = {.tid = omp_get_thread_num(), .fd = -1};
        const int g = io_g(s, me.tid);
        ceil_affinity old;
        start_team(&x, me.tid, &old, &pin_err, &pin_cpu, &nt_run);
        snprintf(me.path, sizeof me.path, "%s/%s.t%d", s->dir, s->tag, g);
        me.fid = ceil_io_file_id(CEIL_IO_FILE_RAND, 0, g, 0);
        me.wbuf = io_buffer((size_t)X);
        me.rbuf = io_buffer((size_t)X);
        me.fill = io_buffer((size_t)t.chunk);
        if (!me.wbuf || !me.rbuf || !me.fill) {
            io_fail(&x, CEIL_ENOMEM, ENOMEM, "storage random: cannot allocate the buffers");
        } else {
            ceil_io_fill_base(p->seed, me.wbuf, (size_t)X);
            for (int64_t a = 0; a < t.chunk; a += X)   /* the base repeats every operation's length */
                memcpy(me.fill + a, me.wbuf, (size_t)X);
            memset(me.rbuf, 0, (size_t)X);
        }
#pragma omp barrier
        team_ok(&x, pin_err, nt_run);
        if (depth > 1 && me.wbuf && !io_stopped(&x))
            io_queue_open(&x, &me.q, depth, X, me.wbuf);
        CONSENSUS(&x);
        if (!x.stop)
            rand_fill(&t, &me);
        CONSENSUS(&x);
        if (me.tid == 0 && s->between && !x.stop)
            s->between();       /* tests spoil the files here */
#pragma omp barrier
        /* Every repetition's reads, then every repetition's writes: a read phase never follows
         * gigabytes just written, whose write-back below a VM's disk (the host's cache) would
         * still be under way and slow it (fio's read after its write: 8-10 % slower here). */
        for (int k = 0; k < 2 * total && !x.stop; k++) {
            rand_evict(&t, &me);
            if (x.stop)
                break;
            rand_phase(&t, &me, k / total, k % total);
            CONSENSUS(&x);
        }
        io_queue_close(&me.q);
        if (me.fd >= 0)
            close(me.fd);
        if (me.created && !(s->flags & CEIL_IO_KEEP))
            unlink(me.path);
        free(me.wbuf);
        free(me.rbuf);
        free(me.fill);
        ceil_affinity_restore(&old);
    }
    o->resident = t.res_unknown ? -1.0 : t.resident;
    r->iters = t.nblocks;
    return io_finish(&x, r, pin_err, pin_cpu, nt_run, "storage random");
}
