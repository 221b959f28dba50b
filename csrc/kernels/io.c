/* io.c - POSIX file I/O loops: sequential bandwidth (IOR-easy and IOR-hard-like
 * layouts), random 4 KiB IOPS and metadata rates, for `ceiling bench storage`.
 *
 * Not rate kernels of the descriptor table (ceiling.h says why); Python
 * (src/ceiling/core/io.py) calls them by name. The C side only times,
 * checks and cleans up; rates, percentiles and the choice of cache defeat are
 * Python's.
 *
 * This file holds the data pattern and what the three loops share (one
 * call's state, errors and cancel, agreement between processes, eviction,
 * latency samples, parameter checks); io.h declares it, hidden from the
 * library's exports. The loops: io_seq.c (bandwidth), io_random.c (IOPS),
 * io_meta.c (metadata rates).
 *
 * How each figure is made true:
 *   - Timing. Each phase is timed by thread 0 from before the barrier that
 *     releases the team to after the barrier that closes it (bw_scalar.c's
 *     rule), so no thread's work runs untimed. A write phase ends with every
 *     thread's fsync and close (IOR -e, fio end_fsync=1): the data is on the
 *     device, not in the page cache, when the clock stops.
 *   - Cache defeat. Either O_DIRECT (CEIL_IO_DIRECT), or after the write
 *     phase posix_fadvise(POSIX_FADV_DONTNEED) on each file (CEIL_IO_EVICT):
 *     after fsync its pages are clean and the kernel drops them without root.
 *     Whether it did is measured, not assumed: mincore() over an mmap of each
 *     file counts the pages still resident, and out->resident reports the
 *     largest fraction seen, so the caller can say which method held.
 *   - Data. Every 512-byte-aligned file offset carries a 64-bit stamp made
 *     from (seed, file id, offset), the rest of each transfer a fixed random
 *     buffer (incompressible, so a compressing file system cannot cheat).
 *     Stamping costs one store per 512 bytes, so the write loop runs at the
 *     device's speed; the read phase checks every stamp (a stale, misplaced,
 *     zeroed or short block fails) and, with CEIL_IO_VERIFY_ALL, every byte.
 *   - Safety. Files are created with O_CREAT|O_EXCL (an existing name is an
 *     error, never overwritten), then reopened with the flags of the test, so
 *     that an O_DIRECT refusal (EINVAL: tmpfs on older kernels, some FUSE) is
 *     told apart from a creation failure. Every file and directory a call
 *     created is removed before it returns, on error and on cancel too. An
 *     error (ENOSPC, EIO, EDQUOT) stops every thread at its next operation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io.h"

static int io_cancel_flag;

void ceil_io_cancel(int on)
{
    __atomic_store_n(&io_cancel_flag, on ? 1 : 0, __ATOMIC_SEQ_CST);
}

/* -- the pattern ------------------------------------------------------------- */

uint64_t ceil_io_stamp(uint64_t seed, uint64_t file_id, uint64_t offset)
{
    return mix64(mix64(seed ^ file_id) ^ offset);
}

uint64_t ceil_io_file_id(int kind, int rep, int tid, int64_t index)
{
    return ((uint64_t)(kind & 0xFF) << 56) | ((uint64_t)(rep & 0xFFFF) << 40) |
           ((uint64_t)(tid & 0xFFFF) << 24) | ((uint64_t)index & 0xFFFFFF);
}

#define IO_BASE_KEY 0xba5eba11ULL

/* Word w of the base buffer is mix64((seed ^ IO_BASE_KEY) + w), native byte
 * order; a tail shorter than a word takes the first bytes of the next word. */
void ceil_io_fill_base(uint64_t seed, void *buf, size_t bytes)
{
    const uint64_t k = seed ^ IO_BASE_KEY;
    size_t w = 0, nw = bytes / 8;
    char *c = buf;
    for (; w < nw; w++) {
        uint64_t v = mix64(k + w);
        memcpy(c + 8 * w, &v, 8);
    }
    if (bytes % 8) {
        uint64_t v = mix64(k + w);
        memcpy(c + 8 * w, &v, bytes % 8);
    }
}

/* Put the stamps of file offsets [off, off+len) into buf (which holds that range). */
void io_stamp(char *buf, size_t len, uint64_t seed, uint64_t fid, uint64_t off)
{
    const uint64_t k = mix64(seed ^ fid);
    for (uint64_t fo = (off + IO_STAMP - 1) & ~(uint64_t)(IO_STAMP - 1); fo + 8 <= off + len; fo += IO_STAMP) {
        uint64_t v = mix64(k ^ fo);
        memcpy(buf + (fo - off), &v, 8);
    }
}

static int64_t first_diff(const char *a, const char *b, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (a[i] != b[i])
            return (int64_t)i;
    return -1;
}

/* Check buf (file offsets [off, off+len)) against the pattern: every stamp,
 * and with `all` every other byte against base (a buffer laid out like the
 * transfer). Returns -1, or the position in buf of the first wrong byte, with
 * what was read and expected there. */
static int64_t check(const char *buf, const char *base, size_t len, uint64_t seed, uint64_t fid,
                     uint64_t off, int all, unsigned *got, unsigned *want)
{
    const uint64_t k = mix64(seed ^ fid);
    size_t pos = 0;
    int64_t bad = -1;
    for (uint64_t fo = (off + IO_STAMP - 1) & ~(uint64_t)(IO_STAMP - 1); fo + 8 <= off + len; fo += IO_STAMP) {
        size_t at = (size_t)(fo - off);
        if (all && at > pos && memcmp(buf + pos, base + pos, at - pos) != 0) {
            bad = first_diff(buf, base, pos, at);
            *got = (unsigned char)buf[bad];
            *want = (unsigned char)base[bad];
            return bad;
        }
        uint64_t v, e = mix64(k ^ fo);
        memcpy(&v, buf + at, 8);
        if (v != e) {
            char eb[8];
            memcpy(eb, &e, 8);
            bad = (int64_t)at + first_diff(buf + at, eb, 0, 8);
            *got = (unsigned char)buf[bad];
            *want = (unsigned char)eb[bad - (int64_t)at];
            return bad;
        }
        pos = at + 8;
    }
    if (all && pos < len && memcmp(buf + pos, base + pos, len - pos) != 0) {
        bad = first_diff(buf, base, pos, len);
        *got = (unsigned char)buf[bad];
        *want = (unsigned char)base[bad];
    }
    return bad;
}

/* -- one call's shared state ------------------------------------------------- */

void io_fail(io_run *x, int rc, int err, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
#pragma omp critical(ceil_io_fail)
    if (x->rc == 0) {
        x->rc = rc;
        x->err = err;
        memcpy(x->msg, buf, sizeof buf);
    }
    __atomic_store_n(&x->abort, 1, __ATOMIC_SEQ_CST);
}

/* A failed system call: O_DIRECT's EINVAL is its own code (the caller falls back). */
void io_sysfail(io_run *x, const char *call, const char *path, int64_t off, int e, int direct)
{
    char eb[128];
    const char *es = strerror_r(e, eb, sizeof eb);
    if (direct && e == EINVAL)
        io_fail(x, CEIL_EDIRECT, e, "%s %s: O_DIRECT refused by the file system (%s)", call, path, es);
    else if (off >= 0)
        io_fail(x, CEIL_EIO, e, "%s %s at offset %lld: %s", call, path, (long long)off, es);
    else
        io_fail(x, CEIL_EIO, e, "%s %s: %s", call, path, es);
}

/* 1 when this thread should stop: an error, or a cancel request (which becomes the error). */
int io_stopped(io_run *x)
{
    if (__atomic_load_n(&x->abort, __ATOMIC_RELAXED))
        return 1;
    if (__atomic_load_n(&io_cancel_flag, __ATOMIC_RELAXED)) {
        io_fail(x, CEIL_ECANCEL, 0, "cancelled");
        return 1;
    }
    return 0;
}

static void io_mismatch(io_run *x, const char *path, int64_t off, unsigned got, unsigned want)
{
#pragma omp critical(ceil_io_bad)
    if (x->bad_offset < 0) {
        x->bad_offset = off;
        snprintf(x->bad_msg, sizeof x->bad_msg, "%.160s: byte at offset %lld is 0x%02x, expected 0x%02x",
                 path, (long long)off, got, want);
    }
}

void io_short(io_run *x, const char *path, int64_t off, int64_t want)
{
#pragma omp critical(ceil_io_bad)
    if (x->bad_offset < 0) {
        x->bad_offset = off;
        snprintf(x->bad_msg, sizeof x->bad_msg, "%.160s: short read at offset %lld (%lld bytes expected)",
                 path, (long long)off, (long long)want);
    }
}

/* Judge one read of `want` bytes at `off` that returned `got` (errno `err`
 * when negative): an error, a short read, or data that does not match the
 * pattern written there. */
void judge_read(io_run *x, const char *path, ssize_t got, int err, size_t want, int64_t off,
                       const char *rbuf, const char *base, uint64_t seed, uint64_t fid, int all, int direct)
{
    if (got < 0) {
        io_sysfail(x, "read", path, off, err, direct);
    } else if ((size_t)got < want) {
        io_short(x, path, off + got, (int64_t)want);
    } else if (want) {
        unsigned g = 0, w = 0;
        int64_t bad = check(rbuf, base, want, seed, fid, (uint64_t)off, all, &g, &w);
        if (bad >= 0)
            io_mismatch(x, path, off + bad, g, w);
    }
}

/* Thread 0's verdict: this process's, and with several processes (spec->sync)
 * everyone's: a stop anywhere stops all, so every process takes the same path
 * through the same agreement points. */
int io_agree(io_run *x)
{
    int stop = io_stopped(x);
    if (x->s->sync && x->s->sync(stop) && !stop) {
        io_fail(x, CEIL_EPEER, 0, "stopped because another process failed");
        stop = 1;
    }
    return stop;
}

ssize_t pwrite_full(int fd, const char *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = pwrite(fd, buf + done, n - done, off + (off_t)done);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0) {          /* no progress and no error: the device is full */
            errno = ENOSPC;
            return -1;
        }
        done += (size_t)k;
    }
    return (ssize_t)done;
}

/* Bytes read, fewer at end of file; -1 on error. */
ssize_t pread_full(int fd, char *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(fd, buf + done, n - done, off + (off_t)done);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (k == 0)
            break;
        done += (size_t)k;
    }
    return (ssize_t)done;
}

/* Create `path` (O_EXCL: never an existing file), close it, and open it
 * again with `flags`. Returns the fd; -1 after io_sysfail. *created says
 * whether the name is now ours to remove. */
int create_open(io_run *x, const char *path, int flags, int *created)
{
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
        io_sysfail(x, "create", path, -1, errno, 0);
        return -1;
    }
    *created = 1;
    close(fd);
    fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        io_sysfail(x, "open", path, -1, errno, (flags & O_DIRECT) != 0);
    return fd;
}

/* Evict (when asked) a file's clean pages, then count how many are still
 * resident. Adds to *res and *tot; returns 0, or -errno when it cannot tell. */
int evict_measure(const char *path, int evict, int64_t *res, int64_t *tot)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    if (evict) {
        int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (e != 0)
            rc = -e;
    }
    size_t len = (size_t)st.st_size;
    if (len == 0) {
        close(fd);
        return rc;
    }
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        rc = -errno;
        close(fd);
        return rc;
    }
    long pg = sysconf(_SC_PAGESIZE);
    size_t np = (len + (size_t)pg - 1) / (size_t)pg;
    unsigned char *vec = malloc(np);
    if (!vec) {
        rc = -ENOMEM;
    } else if (mincore(m, len, vec) != 0) {
        rc = -errno;
    } else {
        int64_t n = 0;
        for (size_t i = 0; i < np; i++)
            n += vec[i] & 1;
#pragma omp atomic
        *res += n;
#pragma omp atomic
        *tot += (int64_t)np;
    }
    free(vec);
    munmap(m, len);
    close(fd);
    return rc;
}

void *io_buffer(size_t bytes)
{
    void *b = NULL;
    size_t len = (bytes + IO_ALIGN - 1) / IO_ALIGN * IO_ALIGN;
    if (posix_memalign(&b, IO_ALIGN, len ? len : IO_ALIGN) != 0)
        return NULL;
    return b;
}

lat_sampler lat_for(const io_run *x, int rep, int phase, int tid, int nph)
{
    lat_sampler l = {NULL, 0, 0, mix64(x->p->seed ^ ((uint64_t)rep << 32) ^ ((uint64_t)phase << 16) ^ (uint64_t)tid) | 1};
    const ceil_io_spec *s = x->s;
    if (rep >= 0 && s->lat_cap > 0 && x->o->lat_s) {
        size_t slot = ((size_t)rep * (size_t)nph + (size_t)phase) * (size_t)x->p->nthreads + (size_t)tid;
        l.buf = x->o->lat_s + slot * (size_t)s->lat_cap;
        l.cap = s->lat_cap;
    }
    return l;
}

void lat_done(const io_run *x, const lat_sampler *l, int rep, int phase, int tid, int nph)
{
    if (rep < 0 || !x->o->lat_n)
        return;
    size_t slot = ((size_t)rep * (size_t)nph + (size_t)phase) * (size_t)x->p->nthreads + (size_t)tid;
    x->o->lat_n[slot] = l->buf ? (l->seen < l->cap ? l->seen : l->cap) : 0;
}

/* Common parameter checks; 0 or CEIL_EINVAL with msg set. */
int io_validate(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r,
                       int nph, const char *what)
{
    if (!p || !s || !o || !r)
        return CEIL_EINVAL;
    ceil_result_clear(r);
    if (p->nthreads < 1 || p->nthreads > IO_MAX_THREADS || p->reps < 1 || p->reps > IO_MAX_REPS ||
        p->warmup < 0 || p->warmup > IO_MAX_REPS) {
        ceil_set_msg(r, "%s: needs 1 <= threads <= %d, 1 <= reps <= %d, 0 <= warmup <= %d", what,
                     IO_MAX_THREADS, IO_MAX_REPS, IO_MAX_REPS);
        return CEIL_EINVAL;
    }
    if (!s->dir || !s->tag || !s->tag[0] || strchr(s->tag, '/') ||
        strlen(s->dir) + strlen(s->tag) + 64 >= PATH_MAX) {
        ceil_set_msg(r, "%s: needs a directory and a file-name tag without '/', together under %d bytes",
                     what, PATH_MAX - 64);
        return CEIL_EINVAL;
    }
    if (!o->phase_s || !o->amount || s->lat_cap < 0 || (s->lat_cap > 0 && (!o->lat_s || !o->lat_n))) {
        ceil_set_msg(r, "%s: needs the phase_s and amount arrays (and lat_s, lat_n when lat_cap > 0)", what);
        return CEIL_EINVAL;
    }
    if (p->warmup + p->reps > 0xFFFF) {
        ceil_set_msg(r, "%s: too many repetitions", what);
        return CEIL_EINVAL;
    }
    if (s->gthreads != 0 && (s->gthreads < p->nthreads || s->gthreads >= CEIL_IO_SHARED_TID ||
                             s->gbase < 0 || s->gbase > s->gthreads - p->nthreads ||
                             s->rbase < -1 || s->rbase > s->gthreads - p->nthreads)) {
        ceil_set_msg(r, "%s: needs 0 <= gbase, rbase <= gthreads - nthreads and gthreads < %d", what,
                     CEIL_IO_SHARED_TID);
        return CEIL_EINVAL;
    }
    size_t n = (size_t)p->reps * (size_t)nph;
    memset(o->phase_s, 0, n * sizeof *o->phase_s);
    memset(o->amount, 0, n * sizeof *o->amount);
    if (o->lat_n)
        memset(o->lat_n, 0, n * (size_t)p->nthreads * sizeof *o->lat_n);
    o->bad_offset = -1;
    o->resident = -1.0;
    o->err = 0;
    o->direct = (s->flags & CEIL_IO_DIRECT) != 0;
    o->nphases = nph;
    return 0;
}

/* The call's outcome into r and o; returns the call's code. */
int io_finish(io_run *x, ceil_result *r, int pin_err, int pin_cpu, int nt_run, const char *what)
{
    ceil_io_out *o = x->o;
    r->nthreads = nt_run;
    if (pin_err != 0) {
        ceil_set_msg(r, "%s: cannot pin a thread to CPU %d: %s", what, pin_cpu, strerror(-pin_err));
        return CEIL_EPIN;
    }
    if (nt_run != x->p->nthreads) {
        ceil_set_msg(r, "%s: OpenMP started %d threads, %d were asked for (OMP_THREAD_LIMIT?)", what,
                     nt_run, x->p->nthreads);
        return CEIL_EINVAL;
    }
    if (x->rc != 0) {
        o->err = x->err;
        ceil_set_msg(r, "%s", x->msg);
        return x->rc;
    }
    o->bad_offset = x->bad_offset;
    r->valid = x->bad_offset < 0;
    if (!r->valid)
        ceil_set_msg(r, "%s", x->bad_msg);
    return 0;
}

void start_team(io_run *x, int tid, ceil_affinity *old, int *pin_err, int *pin_cpu, int *nt_run)
{
    ceil_pin_member(x->p, tid, old, pin_err, pin_cpu);
    if (tid == 0)
        *nt_run = omp_get_num_threads();
}

/* After the first barrier: a pinning failure or a short team stops everyone. */
void team_ok(io_run *x, int pin_err, int nt_run)
{
    if (omp_get_thread_num() == 0 && (pin_err != 0 || nt_run != x->p->nthreads))
        __atomic_store_n(&x->abort, 1, __ATOMIC_SEQ_CST);
}
