/* io_meta.c - metadata rates for `ceiling bench storage`, mdtest's four
 * phases: create (O_EXCL, write md_bytes, close), stat, read back, unlink,
 * files per thread in one shared directory or one per thread
 * (CEIL_IO_UNIQUE_DIR, mdtest -u). Each operation's latency is sampled.
 * Shared state and helpers are io.c's (io.h).
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

static void md_path(char *out, size_t n, const ceil_io_spec *s, int j, int g, int64_t i)
{
    if (s->flags & CEIL_IO_UNIQUE_DIR)
        snprintf(out, n, "%s/%s.r%d/t%d/f.%lld", s->dir, s->tag, j, g, (long long)i);
    else
        snprintf(out, n, "%s/%s.r%d/f.%d.%lld", s->dir, s->tag, j, g, (long long)i);
}

int ceil_io_meta(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r)
{
    int rc = io_validate(p, s, o, r, 4, "storage metadata");
    if (rc)
        return rc;
    if (s->ops < 1 || s->ops > IO_MAX_MD_FILES || s->md_bytes < 0 || s->md_bytes > IO_MAX_MD_BYTES) {
        ceil_set_msg(r, "storage metadata: needs 1 .. %d files per thread and 0 .. %d bytes per file",
                     IO_MAX_MD_FILES, IO_MAX_MD_BYTES);
        return CEIL_EINVAL;
    }
    const int N = p->nthreads, total = p->warmup + p->reps, unique = (s->flags & CEIL_IO_UNIQUE_DIR) != 0;
    const int64_t F = s->ops;
    const size_t len = (size_t)s->md_bytes;
    io_run x = {.p = p, .s = s, .o = o, .bad_offset = -1};
    const int creator = io_g(s, 0) == 0;     /* the process whose thread 0 makes the top directory */
    int pin_err = 0, pin_cpu = -1, nt_run = 0, top_made = 0;
    double t0 = 0.0;
    char top[PATH_MAX];

#pragma omp parallel num_threads(N)
    {
        const int tid = omp_get_thread_num(), g = io_g(s, tid);
        ceil_affinity old;
        start_team(&x, tid, &old, &pin_err, &pin_cpu, &nt_run);
        char path[PATH_MAX], dir[PATH_MAX];
        char *wbuf = io_buffer(len + 1), *rbuf = io_buffer(len + 1);
        if (!wbuf || !rbuf)
            io_fail(&x, CEIL_ENOMEM, ENOMEM, "storage metadata: cannot allocate the buffers");
        else
            ceil_io_fill_base(p->seed, wbuf, len);
#pragma omp barrier
        team_ok(&x, pin_err, nt_run);
        CONSENSUS(&x);
        for (int j = 0; j < total && !x.stop; j++) {
            const int rep = j - p->warmup;
            int64_t created = 0, removed = 0;
            int dir_made = 0;
            /* untimed: the run's directories (mkdir fails on an existing one: never reused) */
            if (tid == 0) {
                snprintf(top, sizeof top, "%s/%s.r%d", s->dir, s->tag, j);
                if (creator) {
                    if (mkdir(top, 0700) == 0)
                        top_made = 1;
                    else
                        io_sysfail(&x, "mkdir", top, -1, errno, 0);
                }
            }
            CONSENSUS(&x);
            if (unique && !x.stop) {
                snprintf(dir, sizeof dir, "%s/t%d", top, g);
                if (mkdir(dir, 0700) == 0)
                    dir_made = 1;
                else
                    io_sysfail(&x, "mkdir", dir, -1, errno, 0);
            }
            CONSENSUS(&x);
            for (int ph = 0; ph < 4 && !x.stop; ph++) {
                lat_sampler lat = lat_for(&x, rep, ph, tid, 4);
                PHASE_START(&x, t0);
                for (int64_t i = 0; i < F && !io_stopped(&x); i++) {
                    md_path(path, sizeof path, s, j, g, i);
                    const uint64_t fid = ceil_io_file_id(CEIL_IO_FILE_MD, j, g, i);
                    double a = ceil_now();
                    if (ph == 0) {          /* create: O_EXCL, write, close */
                        if (len)
                            io_stamp(wbuf, len, p->seed, fid, 0);
                        a = ceil_now();
                        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
                        if (fd < 0) {
                            io_sysfail(&x, "create", path, -1, errno, 0);
                            break;
                        }
                        created = i + 1;
                        if (len && pwrite_full(fd, wbuf, len, 0) < 0)
                            io_sysfail(&x, "write", path, 0, errno, 0);
                        if (close(fd) != 0)
                            io_sysfail(&x, "close", path, -1, errno, 0);
                    } else if (ph == 1) {   /* stat */
                        struct stat st;
                        if (stat(path, &st) != 0)
                            io_sysfail(&x, "stat", path, -1, errno, 0);
                        else if (st.st_size != (off_t)len)
                            io_short(&x, path, (int64_t)st.st_size, (int64_t)len);
                    } else if (ph == 2) {   /* read the small file back */
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        if (fd < 0) {
                            io_sysfail(&x, "open", path, -1, errno, 0);
                            break;
                        }
                        ssize_t got = len ? pread_full(fd, rbuf, len, 0) : 0;
                        int err = errno;      /* before close() can change it */
                        close(fd);
                        double b = ceil_now();
                        lat_add(&lat, b - a);
                        judge_read(&x, path, got, err, len, 0, rbuf, wbuf, p->seed, fid, 1, 0);
                        continue;
                    } else {                /* unlink */
                        if (unlink(path) != 0)
                            io_sysfail(&x, "unlink", path, -1, errno, 0);
                        else
                            removed = i + 1;
                    }
                    lat_add(&lat, ceil_now() - a);
                }
#pragma omp barrier
                if (tid == 0 && rep >= 0) {
                    o->phase_s[4 * rep + ph] = ceil_now() - t0;
                    o->amount[4 * rep + ph] = (int64_t)N * F;
                }
                lat_done(&x, &lat, rep, ph, tid, 4);
                CONSENSUS(&x);
            }
            /* untimed: whatever is left (after an error), then the directories */
            for (int64_t i = removed; i < created; i++) {
                md_path(path, sizeof path, s, j, g, i);
                unlink(path);
            }
            if (dir_made)
                rmdir(dir);
            CONSENSUS(&x);      /* every process has emptied the top directory */
            if (tid == 0 && top_made) {
                if (rmdir(top) == 0)
                    top_made = 0;
                else
                    io_sysfail(&x, "rmdir", top, -1, errno, 0);
            }
            CONSENSUS(&x);
        }
        free(wbuf);
        free(rbuf);
        ceil_affinity_restore(&old);
    }
    r->iters = (int64_t)N * F;
    return io_finish(&x, r, pin_err, pin_cpu, nt_run, "storage metadata");
}
