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
    const int N = p->nthreads, G = io_G(p, s), total = p->warmup + p->reps, shared = s->layout != CEIL_IO_FPP;
    const int creator = io_g(s, 0) == 0;     /* the process whose thread 0 makes the shared file */
    const int dflag = direct ? O_DIRECT : 0;
    const int64_t nx = B / X;
    io_run x = {.p = p, .s = s, .o = o, .bad_offset = -1};
    int pin_err = 0, pin_cpu = -1, nt_run = 0, res_unknown = 0;
    int shared_created = 0;
    double t0 = 0.0, resident = 0.0;
    int64_t res_pages = 0, tot_pages = 0;
    char shared_path[PATH_MAX];

#pragma omp parallel num_threads(N)
    {
        const int tid = omp_get_thread_num(), g = io_g(s, tid), rg = io_rg(s, tid);
        ceil_affinity old;
        start_team(&x, tid, &old, &pin_err, &pin_cpu, &nt_run);
        char path[PATH_MAX], rpath[PATH_MAX];
        char *wbuf = io_buffer((size_t)X), *rbuf = io_buffer((size_t)X);
        int fd = -1, created = 0;
        if (!wbuf || !rbuf)
            io_fail(&x, CEIL_ENOMEM, ENOMEM, "storage seq: cannot allocate two %lld-byte buffers", (long long)X);
        else {
            ceil_io_fill_base(p->seed, wbuf, (size_t)X);   /* first touch by the thread that uses it */
            memset(rbuf, 0, (size_t)X);
        }
#pragma omp barrier
        team_ok(&x, pin_err, nt_run);
        CONSENSUS(&x);
        for (int j = 0; j < total && !x.stop; j++) {
            const int rep = j - p->warmup;
            const uint64_t fid = ceil_io_file_id(CEIL_IO_FILE_SEQ, j, shared ? CEIL_IO_SHARED_TID : g, 0);
            const uint64_t rfid = ceil_io_file_id(CEIL_IO_FILE_SEQ, j, shared ? CEIL_IO_SHARED_TID : rg, 0);
            /* setup, untimed: create every file (the shared one by global thread 0, before anyone
             * opens it), open it for the test */
            if (shared) {
                if (tid == 0) {
                    snprintf(shared_path, sizeof shared_path, "%s/%s.r%d.shared", s->dir, s->tag, j);
                    res_pages = tot_pages = 0;
                    if (creator) {
                        int f = create_open(&x, shared_path, O_WRONLY, &shared_created);
                        if (f >= 0)
                            close(f);
                    }
                }
                CONSENSUS(&x);
                snprintf(path, sizeof path, "%s", shared_path);
                snprintf(rpath, sizeof rpath, "%s", shared_path);
                if (!x.stop && (fd = open(path, O_WRONLY | O_CLOEXEC | dflag)) < 0)
                    io_sysfail(&x, "open", path, -1, errno, direct);
            } else {
                snprintf(path, sizeof path, "%s/%s.r%d.t%d", s->dir, s->tag, j, g);
                snprintf(rpath, sizeof rpath, "%s/%s.r%d.t%d", s->dir, s->tag, j, rg);
                if (tid == 0)
                    res_pages = tot_pages = 0;
                if (!io_stopped(&x))
                    fd = create_open(&x, path, O_WRONLY | dflag, &created);
            }
            CONSENSUS(&x);
            if (x.stop)
                break;

            /* phase 0: write, fsync, close */
            PHASE_START(&x, t0);
            for (int64_t i = 0; i < nx && !io_stopped(&x); i++) {
                int64_t off = seq_offset(s->layout, i, g, G, B, X);
                io_stamp(wbuf, (size_t)X, p->seed, fid, (uint64_t)off);
                if (pwrite_full(fd, wbuf, (size_t)X, off) < 0)
                    io_sysfail(&x, "write", path, off, errno, direct);
            }
            if (!io_stopped(&x) && fsync(fd) != 0)
                io_sysfail(&x, "fsync", path, -1, errno, 0);
            if (close(fd) != 0 && !io_stopped(&x))
                io_sysfail(&x, "close", path, -1, errno, 0);
            fd = -1;
#pragma omp barrier
            if (tid == 0 && rep >= 0) {
                o->phase_s[2 * rep] = ceil_now() - t0;
                o->amount[2 * rep] = (int64_t)N * B;
            }
            /* every process has written before any evicts or reads */
            CONSENSUS(&x);

            /* untimed: evict what this thread wrote and what it will read (another process's
             * file, with task reordering), count what stayed resident, let a test tamper */
            if (!io_stopped(&x) && (!shared || tid == 0)) {
                int64_t ignore_res = 0, ignore_tot = 0;
                if (strcmp(path, rpath) != 0)
                    evict_measure(path, (s->flags & CEIL_IO_EVICT) != 0, &ignore_res, &ignore_tot);
                if (evict_measure(rpath, (s->flags & CEIL_IO_EVICT) != 0, &res_pages, &tot_pages) != 0) {
#pragma omp atomic write
                    res_unknown = 1;
                }
            }
#pragma omp barrier
            if (tid == 0) {
                if (tot_pages > 0 && (double)res_pages / (double)tot_pages > resident)
                    resident = (double)res_pages / (double)tot_pages;
                if (s->between && !io_stopped(&x))
                    s->between();
            }
            CONSENSUS(&x);
            if (x.stop)
                break;

            /* phase 1: read back and check */
            if ((fd = open(rpath, O_RDONLY | O_CLOEXEC | dflag)) < 0)
                io_sysfail(&x, "open", rpath, -1, errno, direct);
            PHASE_START(&x, t0);
            for (int64_t i = 0; fd >= 0 && i < nx && !io_stopped(&x); i++) {
                int64_t off = seq_offset(s->layout, i, rg, G, B, X);
                ssize_t got = pread_full(fd, rbuf, (size_t)X, off);
                judge_read(&x, rpath, got, errno, (size_t)X, off, rbuf, wbuf, p->seed, rfid,
                           (s->flags & CEIL_IO_VERIFY_ALL) != 0, direct);
            }
            if (fd >= 0)
                close(fd);
            fd = -1;
#pragma omp barrier
            if (tid == 0 && rep >= 0) {
                o->phase_s[2 * rep + 1] = ceil_now() - t0;
                o->amount[2 * rep + 1] = (int64_t)N * B;
            }
            /* every process has read before files go */
            CONSENSUS(&x);

            /* untimed: remove this repetition's files */
            if (!(s->flags & CEIL_IO_KEEP)) {
                if (created && unlink(path) == 0)
                    created = 0;
#pragma omp barrier
                if (tid == 0 && shared_created && unlink(shared_path) == 0)
                    shared_created = 0;
            }
            CONSENSUS(&x);
        }
        /* on error or cancel: close and remove whatever this call created */
        if (fd >= 0)
            close(fd);
        if (created && !(s->flags & CEIL_IO_KEEP))
            unlink(path);
#pragma omp barrier
        if (tid == 0 && shared_created && !(s->flags & CEIL_IO_KEEP))
            unlink(shared_path);
        free(wbuf);
        free(rbuf);
        ceil_affinity_restore(&old);
    }
    o->resident = res_unknown ? -1.0 : resident;
    r->iters = (int64_t)N * B;
    return io_finish(&x, r, pin_err, pin_cpu, nt_run, "storage seq");
}
