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

/* What the team shares: the top directory thread 0 makes, the phase's start. */
typedef struct {
    io_run *x;
    int64_t F;
    size_t len;
    int N, unique, creator, top_made;
    double t0;
    char top[PATH_MAX];
} md_team;

/* One thread's: its global thread number, buffers, directory (with -u), and how
 * many of this repetition's files it created and removed (for the cleanup). */
typedef struct {
    int tid, g, dir_made;
    int64_t created, removed;
    char path[PATH_MAX], dir[PATH_MAX];
    char *wbuf, *rbuf;
} md_thread;

/* Untimed: the repetition's directories (mkdir fails on an existing one: never reused). */
static void md_dirs(md_team *t, md_thread *me, int j)
{
    io_run *x = t->x;
    const ceil_io_spec *s = x->s;
    me->created = me->removed = 0;
    me->dir_made = 0;
    if (me->tid == 0) {
        snprintf(t->top, sizeof t->top, "%s/%s.r%d", s->dir, s->tag, j);
        if (t->creator) {
            if (mkdir(t->top, 0700) == 0)
                t->top_made = 1;
            else
                io_sysfail(x, "mkdir", t->top, -1, errno, 0);
        }
    }
    CONSENSUS(x);
    if (t->unique && !x->stop) {
        snprintf(me->dir, sizeof me->dir, "%s/t%d", t->top, me->g);
        if (mkdir(me->dir, 0700) == 0)
            me->dir_made = 1;
        else
            io_sysfail(x, "mkdir", me->dir, -1, errno, 0);
    }
    CONSENSUS(x);
}

/* One operation of phase ph on file i: create (O_EXCL, write, close), stat, read
 * back, unlink; its latency sampled. Returns -1 where the phase cannot go on. */
static int md_op(md_team *t, md_thread *me, int ph, int j, int64_t i, lat_sampler *lat)
{
    io_run *x = t->x;
    const ceil_params *p = x->p;
    const size_t len = t->len;
    const char *path = me->path;
    md_path(me->path, sizeof me->path, x->s, j, me->g, i);
    const uint64_t fid = ceil_io_file_id(CEIL_IO_FILE_MD, j, me->g, i);
    double a = ceil_now();
    if (ph == 0) {          /* create: O_EXCL, write, close */
        if (len)
            io_stamp(me->wbuf, len, p->seed, fid, 0);
        a = ceil_now();
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) {
            io_sysfail(x, "create", path, -1, errno, 0);
            return -1;
        }
        me->created = i + 1;
        if (len && pwrite_full(fd, me->wbuf, len, 0) < 0)
            io_sysfail(x, "write", path, 0, errno, 0);
        if (close(fd) != 0)
            io_sysfail(x, "close", path, -1, errno, 0);
    } else if (ph == 1) {   /* stat */
        struct stat st;
        if (stat(path, &st) != 0)
            io_sysfail(x, "stat", path, -1, errno, 0);
        else if (st.st_size != (off_t)len)
            io_short(x, path, (int64_t)st.st_size, (int64_t)len);
    } else if (ph == 2) {   /* read the small file back */
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            io_sysfail(x, "open", path, -1, errno, 0);
            return -1;
        }
        ssize_t got = len ? pread_full(fd, me->rbuf, len, 0) : 0;
        int err = errno;      /* before close() can change it */
        close(fd);
        double b = ceil_now();
        lat_add(lat, b - a);
        judge_read(x, path, got, err, len, 0, me->rbuf, me->wbuf, p->seed, fid, 1, 0);
        return 0;
    } else {                /* unlink */
        if (unlink(path) != 0)
            io_sysfail(x, "unlink", path, -1, errno, 0);
        else
            me->removed = i + 1;
    }
    lat_add(lat, ceil_now() - a);
    return 0;
}

/* Phase ph of repetition j, timed: every thread's F operations. */
static void md_phase(md_team *t, md_thread *me, int ph, int j)
{
    io_run *x = t->x;
    const int rep = j - x->p->warmup;
    lat_sampler lat = lat_for(x, rep, ph, me->tid, 4);
    PHASE_START(x, t->t0);
    for (int64_t i = 0; i < t->F && !io_stopped(x); i++)
        if (md_op(t, me, ph, j, i, &lat) < 0)
            break;
#pragma omp barrier
    if (me->tid == 0 && rep >= 0) {
        x->o->phase_s[4 * rep + ph] = ceil_now() - t->t0;
        x->o->amount[4 * rep + ph] = (int64_t)t->N * t->F;
    }
    lat_done(x, &lat, rep, ph, me->tid, 4);
    CONSENSUS(x);
}

/* Untimed: whatever is left (after an error), then the directories. */
static void md_cleanup(md_team *t, md_thread *me, int j)
{
    io_run *x = t->x;
    for (int64_t i = me->removed; i < me->created; i++) {
        md_path(me->path, sizeof me->path, x->s, j, me->g, i);
        unlink(me->path);
    }
    if (me->dir_made)
        rmdir(me->dir);
    CONSENSUS(x);      /* every process has emptied the top directory */
    if (me->tid == 0 && t->top_made) {
        if (rmdir(t->top) == 0)
            t->top_made = 0;
        else
            io_sysfail(x, "rmdir", t->top, -1, errno, 0);
    }
    CONSENSUS(x);
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
    const int N = p->nthreads, total = p->warmup + p->reps;
    const size_t len = (size_t)s->md_bytes;
    io_run x = {.p = p, .s = s, .o = o, .bad_offset = -1};
    md_team t = {.x = &x, .F = s->ops, .len = len, .N = N, .unique = (s->flags & CEIL_IO_UNIQUE_DIR) != 0,
                 .creator = io_g(s, 0) == 0};     /* the process whose thread 0 makes the top directory */
    int pin_err = 0, pin_cpu = -1, nt_run = 0;

#pragma omp parallel num_threads(N)
    {
        md_thread me = {.tid = omp_get_thread_num()};
        me.g = io_g(s, me.tid);
        ceil_affinity old;
        start_team(&x, me.tid, &old, &pin_err, &pin_cpu, &nt_run);
        me.wbuf = io_buffer(len + 1);
        me.rbuf = io_buffer(len + 1);
        if (!me.wbuf || !me.rbuf)
            io_fail(&x, CEIL_ENOMEM, ENOMEM, "storage metadata: cannot allocate the buffers");
        else
            ceil_io_fill_base(p->seed, me.wbuf, len);
#pragma omp barrier
        team_ok(&x, pin_err, nt_run);
        CONSENSUS(&x);
        for (int j = 0; j < total && !x.stop; j++) {
            md_dirs(&t, &me, j);
            for (int ph = 0; ph < 4 && !x.stop; ph++)
                md_phase(&t, &me, ph, j);
            md_cleanup(&t, &me, j);
        }
        free(me.wbuf);
        free(me.rbuf);
        ceil_affinity_restore(&old);
    }
    r->iters = (int64_t)N * s->ops;
    return io_finish(&x, r, pin_err, pin_cpu, nt_run, "storage metadata");
}
