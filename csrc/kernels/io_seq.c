/* io_seq.c - sequential bandwidth for `ceiling bench storage`: IOR-easy
 * (file per process, CEIL_IO_FPP) and IOR-hard-like shared-file layouts
 * (segmented or strided), write then read back per repetition.
 *
 * A write phase ends with every thread's fsync and close (IOR -e); between
 * the phases the written files are evicted (or O_DIRECT was used) and what
 * stayed resident is measured; with several processes, task reordering
 * (IOR -C, spec->rbase) makes each one read another's data. Shared state and
 * helpers are io.c's (io.h).
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

static int64_t seq_offset(int layout, int64_t i, int tid, int nthreads, int64_t bytes, int64_t xfer)
{
    switch (layout) {
    case CEIL_IO_SEGMENTED:
        return (int64_t)tid * bytes + i * xfer;
    case CEIL_IO_STRIDED:
        return (i * nthreads + tid) * xfer;
    default:
        return i * xfer;
    }
}

/* What the team shares: the call's arguments and sizes, and what thread 0 (or an
 * atomic write) sets for all: the shared file, residency, the phase's start. */
typedef struct {
    io_run *x;
    int64_t B, X, nx;
    int N, G, shared, creator, direct, dflag;
    char shared_path[PATH_MAX];
    int shared_created, res_unknown;
    double t0, resident;
    int64_t res_pages, tot_pages;
} seq_team;

/* One thread's: its global thread number and its reader's (task reordering), the
 * files it writes and reads, its buffers and descriptor. */
typedef struct {
    int tid, g, rg, fd, created;
    char path[PATH_MAX], rpath[PATH_MAX];
    char *wbuf, *rbuf;
} seq_thread;

/* Setup of repetition j, untimed: create every file (the shared one by global
 * thread 0, before anyone opens it) and open it for the test. */
static void seq_open(seq_team *t, seq_thread *me, int j)
{
    io_run *x = t->x;
    const ceil_io_spec *s = x->s;
    if (t->shared) {
        if (me->tid == 0) {
            snprintf(t->shared_path, sizeof t->shared_path, "%s/%s.r%d.shared", s->dir, s->tag, j);
            t->res_pages = t->tot_pages = 0;
            if (t->creator) {
                int f = create_open(x, t->shared_path, O_WRONLY, &t->shared_created);
                if (f >= 0)
                    close(f);
            }
        }
        CONSENSUS(x);
        snprintf(me->path, sizeof me->path, "%s", t->shared_path);
        snprintf(me->rpath, sizeof me->rpath, "%s", t->shared_path);
        if (!x->stop && (me->fd = open(me->path, O_WRONLY | O_CLOEXEC | t->dflag)) < 0)
            io_sysfail(x, "open", me->path, -1, errno, t->direct);
    } else {
        snprintf(me->path, sizeof me->path, "%s/%s.r%d.t%d", s->dir, s->tag, j, me->g);
        snprintf(me->rpath, sizeof me->rpath, "%s/%s.r%d.t%d", s->dir, s->tag, j, me->rg);
        if (me->tid == 0)
            t->res_pages = t->tot_pages = 0;
        if (!io_stopped(x))
            me->fd = create_open(x, me->path, O_WRONLY | t->dflag, &me->created);
    }
    CONSENSUS(x);
}

/* Phase 0, timed: write, fsync, close; every process has written before any
 * evicts or reads. */
static void seq_write(seq_team *t, seq_thread *me, int rep, uint64_t fid)
{
    io_run *x = t->x;
    const ceil_params *p = x->p;
    PHASE_START(x, t->t0);
    for (int64_t i = 0; i < t->nx && !io_stopped(x); i++) {
        int64_t off = seq_offset(x->s->layout, i, me->g, t->G, t->B, t->X);
        io_stamp(me->wbuf, (size_t)t->X, p->seed, fid, (uint64_t)off);
        if (pwrite_full(me->fd, me->wbuf, (size_t)t->X, off) < 0)
            io_sysfail(x, "write", me->path, off, errno, t->direct);
    }
    if (!io_stopped(x) && fsync(me->fd) != 0)
        io_sysfail(x, "fsync", me->path, -1, errno, 0);
    if (close(me->fd) != 0 && !io_stopped(x))
        io_sysfail(x, "close", me->path, -1, errno, 0);
    me->fd = -1;
#pragma omp barrier
    if (me->tid == 0 && rep >= 0) {
        x->o->phase_s[2 * rep] = ceil_now() - t->t0;
        x->o->amount[2 * rep] = (int64_t)t->N * t->B;
    }
    CONSENSUS(x);
}

/* Untimed: evict what this thread wrote and what it will read (another process's
 * file, with task reordering), count what stayed resident, let a test tamper. */
static void seq_evict(seq_team *t, seq_thread *me)
{
    io_run *x = t->x;
    const ceil_io_spec *s = x->s;
    if (!io_stopped(x) && (!t->shared || me->tid == 0)) {
        int64_t ignore_res = 0, ignore_tot = 0;
        if (strcmp(me->path, me->rpath) != 0)
            evict_measure(me->path, (s->flags & CEIL_IO_EVICT) != 0, &ignore_res, &ignore_tot);
        if (evict_measure(me->rpath, (s->flags & CEIL_IO_EVICT) != 0, &t->res_pages, &t->tot_pages) != 0) {
#pragma omp atomic write
            t->res_unknown = 1;
        }
    }
#pragma omp barrier
    if (me->tid == 0) {
        io_keep_resident(&t->resident, t->res_pages, t->tot_pages);
        if (s->between && !io_stopped(x))
            s->between();
    }
    CONSENSUS(x);
}

/* Phase 1, timed: read back and check; every process has read before files go. */
static void seq_read(seq_team *t, seq_thread *me, int rep, uint64_t rfid)
{
    io_run *x = t->x;
    const ceil_params *p = x->p;
    const ceil_io_spec *s = x->s;
    if ((me->fd = open(me->rpath, O_RDONLY | O_CLOEXEC | t->dflag)) < 0)
        io_sysfail(x, "open", me->rpath, -1, errno, t->direct);
    PHASE_START(x, t->t0);
    for (int64_t i = 0; me->fd >= 0 && i < t->nx && !io_stopped(x); i++) {
        int64_t off = seq_offset(s->layout, i, me->rg, t->G, t->B, t->X);
        ssize_t got = pread_full(me->fd, me->rbuf, (size_t)t->X, off);
        judge_read(x, me->rpath, got, errno, (size_t)t->X, off, me->rbuf, me->wbuf, p->seed, rfid,
                   (s->flags & CEIL_IO_VERIFY_ALL) != 0, t->direct);
    }
    if (me->fd >= 0)
        close(me->fd);
    me->fd = -1;
#pragma omp barrier
    if (me->tid == 0 && rep >= 0) {
        x->o->phase_s[2 * rep + 1] = ceil_now() - t->t0;
        x->o->amount[2 * rep + 1] = (int64_t)t->N * t->B;
    }
    CONSENSUS(x);
}

/* Untimed: remove this repetition's files (all of them, on the way out after an
 * error or a cancel: closed first). */
static void seq_remove(seq_team *t, seq_thread *me, int leaving)
{
    const int keep = (t->x->s->flags & CEIL_IO_KEEP) != 0;
    if (leaving && me->fd >= 0)
        close(me->fd);
    if (!keep && me->created && unlink(me->path) == 0)
        me->created = 0;
#pragma omp barrier
    if (me->tid == 0 && !keep && t->shared_created && unlink(t->shared_path) == 0)
        t->shared_created = 0;
}

int ceil_io_seq(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r)
{
    int rc = io_validate(p, s, o, r, 2, "storage seq");
    if (rc)
        return rc;
    const int64_t B = s->bytes_per_thread, X = s->xfer;
    const int direct = (s->flags & CEIL_IO_DIRECT) != 0;
    if (X < IO_STAMP || X % IO_STAMP || B < X || B % X || X > ((int64_t)1 << 30) ||
        s->layout < CEIL_IO_FPP || s->layout > CEIL_IO_STRIDED || (direct && X % IO_ALIGN)) {
        ceil_set_msg(r, "storage seq: needs a transfer of 512 B .. 1 GiB in 512 B multiples (4 KiB with "
                        "O_DIRECT), bytes per thread a multiple of it, and a known layout");
        return CEIL_EINVAL;
    }
    const int N = p->nthreads, total = p->warmup + p->reps, shared = s->layout != CEIL_IO_FPP;
    io_run x = {.p = p, .s = s, .o = o, .bad_offset = -1};
    seq_team t = {.x = &x, .B = B, .X = X, .nx = B / X, .N = N, .G = io_G(p, s), .shared = shared,
                  .creator = io_g(s, 0) == 0,      /* the process whose thread 0 makes the shared file */
                  .direct = direct, .dflag = direct ? O_DIRECT : 0};
    int pin_err = 0, pin_cpu = -1, nt_run = 0;

#pragma omp parallel num_threads(N)
    {
        seq_thread me = {.tid = omp_get_thread_num(), .fd = -1};
        me.g = io_g(s, me.tid);
        me.rg = io_rg(s, me.tid);
        ceil_affinity old;
        start_team(&x, me.tid, &old, &pin_err, &pin_cpu, &nt_run);
        me.wbuf = io_buffer((size_t)X);
        me.rbuf = io_buffer((size_t)X);
        if (!me.wbuf || !me.rbuf)
            io_fail(&x, CEIL_ENOMEM, ENOMEM, "storage seq: cannot allocate two %lld-byte buffers", (long long)X);
        else {
            ceil_io_fill_base(p->seed, me.wbuf, (size_t)X);   /* first touch by the thread that uses it */
            memset(me.rbuf, 0, (size_t)X);
        }
#pragma omp barrier
        team_ok(&x, pin_err, nt_run);
        CONSENSUS(&x);
        for (int j = 0; j < total && !x.stop; j++) {
            const int rep = j - p->warmup;
            seq_open(&t, &me, j);
            if (x.stop)
                break;
            seq_write(&t, &me, rep, ceil_io_file_id(CEIL_IO_FILE_SEQ, j, shared ? CEIL_IO_SHARED_TID : me.g, 0));
            seq_evict(&t, &me);
            if (x.stop)
                break;
            seq_read(&t, &me, rep, ceil_io_file_id(CEIL_IO_FILE_SEQ, j, shared ? CEIL_IO_SHARED_TID : me.rg, 0));
            seq_remove(&t, &me, 0);
            CONSENSUS(&x);
        }
        seq_remove(&t, &me, 1);
        free(me.wbuf);
        free(me.rbuf);
        ceil_affinity_restore(&old);
    }
    o->resident = t.res_unknown ? -1.0 : t.resident;
    r->iters = (int64_t)N * B;
    return io_finish(&x, r, pin_err, pin_cpu, nt_run, "storage seq");
}
