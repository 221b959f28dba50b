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
    const int seq_order = (s->flags & CEIL_IO_SEQ_ORDER) != 0;
    const int N = p->nthreads, total = p->warmup + p->reps;
    const int dflag = direct ? O_DIRECT : 0;
    const int64_t nblocks = F / X;
    const int64_t chunk = (IO_FILL_CHUNK / X) * X < F ? (IO_FILL_CHUNK / X) * X : F;
    io_run x = {.p = p, .s = s, .o = o, .bad_offset = -1};
    int pin_err = 0, pin_cpu = -1, nt_run = 0, res_unknown = 0;
    double t0 = 0.0, resident = 0.0;
    int64_t res_pages = 0, tot_pages = 0, nops[2] = {0, 0};

#pragma omp parallel num_threads(N)
    {
        const int tid = omp_get_thread_num(), g = io_g(s, tid);
        ceil_affinity old;
        start_team(&x, tid, &old, &pin_err, &pin_cpu, &nt_run);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s.t%d", s->dir, s->tag, g);
        const uint64_t fid = ceil_io_file_id(CEIL_IO_FILE_RAND, 0, g, 0);
        char *wbuf = io_buffer((size_t)X), *rbuf = io_buffer((size_t)X), *fill = io_buffer((size_t)chunk);
        int fd = -1, created = 0;
        io_queue q = {0};
        if (!wbuf || !rbuf || !fill) {
            io_fail(&x, CEIL_ENOMEM, ENOMEM, "storage random: cannot allocate the buffers");
        } else {
            ceil_io_fill_base(p->seed, wbuf, (size_t)X);
            for (int64_t a = 0; a < chunk; a += X)   /* the base repeats every operation's length */
                memcpy(fill + a, wbuf, (size_t)X);
            memset(rbuf, 0, (size_t)X);
        }
#pragma omp barrier
        team_ok(&x, pin_err, nt_run);
        if (depth > 1 && wbuf && !io_stopped(&x))
            io_queue_open(&x, &q, depth, X, wbuf);
        CONSENSUS(&x);
        /* untimed: create and fill the file, fsync it */
        if (!x.stop) {
            fd = create_open(&x, path, O_WRONLY | dflag, &created);
            for (int64_t off = 0; fd >= 0 && off < F && !io_stopped(&x); off += chunk) {
                int64_t n = F - off < chunk ? F - off : chunk;
                io_stamp(fill, (size_t)n, p->seed, fid, (uint64_t)off);
                if (pwrite_full(fd, fill, (size_t)n, off) < 0)
                    io_sysfail(&x, "write", path, off, errno, direct);
            }
            if (fd >= 0 && !io_stopped(&x) && fsync(fd) != 0)
                io_sysfail(&x, "fsync", path, -1, errno, 0);
            if (fd >= 0)
                close(fd);
            fd = -1;
            if (!io_stopped(&x) && (fd = open(path, O_RDWR | O_CLOEXEC | dflag)) < 0)
                io_sysfail(&x, "open", path, -1, errno, direct);
#ifdef POSIX_FADV_RANDOM
            if (fd >= 0)
                posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);   /* no read-ahead around buffered reads */
#endif
        }
        CONSENSUS(&x);
        if (tid == 0 && s->between && !x.stop)
            s->between();       /* tests spoil the files here */
#pragma omp barrier
        /* Every repetition's reads, then every repetition's writes: a read phase never follows
         * gigabytes just written, whose write-back below a VM's disk (the host's cache) would
         * still be under way and slow it (fio's read after its write: 8-10 % slower here). */
        for (int k = 0; k < 2 * total && !x.stop; k++) {
            const int ph = k / total, j = k % total;
            const int rep = j - p->warmup;
            if (tid == 0)
                res_pages = tot_pages = 0;
#pragma omp barrier
            if (evict_measure(path, (s->flags & CEIL_IO_EVICT) != 0, &res_pages, &tot_pages) != 0) {
#pragma omp atomic write
                res_unknown = 1;
            }
#pragma omp barrier
            if (tid == 0) {
                if (tot_pages > 0 && (double)res_pages / (double)tot_pages > resident)
                    resident = (double)res_pages / (double)tot_pages;
                nops[0] = nops[1] = 0;
            }
            CONSENSUS(&x);
            if (x.stop)
                break;
            {
                lat_sampler lat = lat_for(&x, rep, ph, tid, 2);
                uint64_t rng = mix64(p->seed ^ fid ^ ((uint64_t)j << 8) ^ (uint64_t)ph) | 1;
                int64_t n = 0;
                int64_t pos = 0;
                PHASE_START(&x, t0);
                const double deadline = t0 + s->duration_s;
                if (depth > 1) {
                    const io_phase qp = {.fd = fd, .path = path, .write = ph, .seq = seq_order,
                                         .all = (s->flags & CEIL_IO_VERIFY_ALL) != 0, .nblocks = nblocks,
                                         .rng = &rng, .deadline = s->duration_s > 0.0 ? deadline : 0.0,
                                         .max_ops = s->ops, .base = wbuf, .seed = p->seed, .fid = fid};
                    n = io_queue_phase(&x, &q, &qp, &lat);
                }
                while (depth == 1 && (s->ops == 0 || n < s->ops) && !io_stopped(&x)) {
                    int64_t off = seq_order ? (pos++ % nblocks) * X
                                            : (int64_t)((xorshift(&rng) >> 11) % (uint64_t)nblocks) * X;
                    double a = ceil_now();
                    if (s->duration_s > 0.0 && a >= deadline)
                        break;
                    if (ph == 0) {
                        ssize_t got = pread_full(fd, rbuf, (size_t)X, off);
                        int err = errno;
                        double b = ceil_now();
                        lat_add(&lat, b - a);
                        judge_read(&x, path, got, err, (size_t)X, off, rbuf, wbuf, p->seed, fid,
                                   (s->flags & CEIL_IO_VERIFY_ALL) != 0, direct);
                    } else {
                        io_stamp(wbuf, (size_t)X, p->seed, fid, (uint64_t)off);
                        if (pwrite_full(fd, wbuf, (size_t)X, off) < 0)
                            io_sysfail(&x, "write", path, off, errno, direct);
                        lat_add(&lat, ceil_now() - a);
                    }
                    n++;
                }
                if (ph == 1 && !io_stopped(&x) && fsync(fd) != 0)
                    io_sysfail(&x, "fsync", path, -1, errno, 0);
#pragma omp atomic
                nops[ph] += n;
#pragma omp barrier
                if (tid == 0 && rep >= 0) {
                    o->phase_s[2 * rep + ph] = ceil_now() - t0;
                    o->amount[2 * rep + ph] = nops[ph];
                }
                lat_done(&x, &lat, rep, ph, tid, 2);
            }
            CONSENSUS(&x);
        }
        io_queue_close(&q);
        if (fd >= 0)
            close(fd);
        if (created && !(s->flags & CEIL_IO_KEEP))
            unlink(path);
        free(wbuf);
        free(rbuf);
        free(fill);
        ceil_affinity_restore(&old);
    }
    o->resident = res_unknown ? -1.0 : resident;
    r->iters = nblocks;
    return io_finish(&x, r, pin_err, pin_cpu, nt_run, "storage random");
}
