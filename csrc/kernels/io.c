/* io.c - POSIX file I/O loops: sequential bandwidth (IOR-easy and IOR-hard-like
 * layouts), random 4 KiB IOPS and metadata rates, for `ceiling bench storage`.
 *
 * Not rate kernels of the descriptor table (ceiling.h says why); Python
 * (src/ceiling/bench/storage.py) calls them by name. The C side only times,
 * checks and cleans up; rates, percentiles and the choice of cache defeat are
 * Python's.
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
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "ceiling.h"

#define IO_ALIGN 4096                 /* buffer alignment and O_DIRECT granularity */
#define IO_STAMP 512                  /* one stamp per this many bytes of file */
#define IO_MAX_THREADS 1024
#define IO_MAX_REPS 1000
#define IO_MAX_MD_BYTES (1 << 20)
#define IO_MAX_MD_FILES (1 << 24)
#define IO_FILL_CHUNK (1 << 20)       /* random: prefill transfer */

static int io_cancel_flag;

void ceil_io_cancel(int on)
{
    __atomic_store_n(&io_cancel_flag, on ? 1 : 0, __ATOMIC_SEQ_CST);
}

/* -- the pattern ------------------------------------------------------------- */

/* splitmix64's finaliser: every input bit affects every output bit. */
static inline uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

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
static void stamp(char *buf, size_t len, uint64_t seed, uint64_t fid, uint64_t off)
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

typedef struct io_run {
    const ceil_params *p;
    const ceil_io_spec *s;
    ceil_io_out *o;
    int abort;              /* set on the first error or cancel: every thread stops at its next operation */
    int rc;                 /* the first error's return code */
    int err;                /* and its errno */
    char msg[256];
    int64_t bad_offset;     /* first data mismatch: file offset, -1 none */
    char bad_msg[256];
    int stop;               /* thread 0's verdict at a consensus point */
} io_run;

static void io_fail(io_run *x, int rc, int err, const char *fmt, ...)
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
static void io_sysfail(io_run *x, const char *call, const char *path, int64_t off, int e, int direct)
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
static int io_stopped(io_run *x)
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

static void io_short(io_run *x, const char *path, int64_t off, int64_t want)
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
static void judge_read(io_run *x, const char *path, ssize_t got, int err, size_t want, int64_t off,
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
static int io_agree(io_run *x)
{
    int stop = io_stopped(x);
    if (x->s->sync && x->s->sync(stop) && !stop) {
        io_fail(x, CEIL_EPEER, 0, "stopped because another process failed");
        stop = 1;
    }
    return stop;
}

/* Every thread calls this between the same two barriers: thread 0 decides,
 * and no thread writes `abort` while it is read, so all see one verdict. */
#define CONSENSUS(x)                                         \
    do {                                                     \
        _Pragma("omp barrier");                              \
        if (omp_get_thread_num() == 0)                       \
            (x)->stop = io_agree(x);                         \
        _Pragma("omp barrier");                              \
    } while (0)

/* The start of a timed phase, called by every thread: the team (and, with
 * several processes, every process) is ready, then thread 0 starts the clock
 * and releases the team. With several processes each one's phase time runs
 * from this common start to its own end; the caller takes the largest (IOR's
 * first start to last end). A stop agreed here makes every operation of the
 * phase a no-op, and the CONSENSUS after it ends the loop. */
#define PHASE_START(x, t0)                                   \
    do {                                                     \
        _Pragma("omp barrier");                              \
        if (omp_get_thread_num() == 0) {                     \
            if ((x)->s->sync)                                \
                io_agree(x);                                 \
            (t0) = ceil_now();                               \
        }                                                    \
        _Pragma("omp barrier");                              \
    } while (0)

static ssize_t pwrite_full(int fd, const char *buf, size_t n, off_t off)
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
static ssize_t pread_full(int fd, char *buf, size_t n, off_t off)
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
static int create_open(io_run *x, const char *path, int flags, int *created)
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
static int evict_measure(const char *path, int evict, int64_t *res, int64_t *tot)
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

static void *io_buffer(size_t bytes)
{
    void *b = NULL;
    size_t len = (bytes + IO_ALIGN - 1) / IO_ALIGN * IO_ALIGN;
    if (posix_memalign(&b, IO_ALIGN, len ? len : IO_ALIGN) != 0)
        return NULL;
    return b;
}

typedef struct lat_sampler {
    float *buf;        /* cap entries or NULL */
    int64_t cap;
    int64_t seen;
    uint64_t rng;
} lat_sampler;

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* Reservoir sampling (Vitter's algorithm R): a uniform sample of every
 * operation's latency in a fixed buffer, however many operations ran. */
static inline void lat_add(lat_sampler *l, double sec)
{
    if (!l->buf || l->cap <= 0) {
        l->seen++;
        return;
    }
    if (l->seen < l->cap) {
        l->buf[l->seen] = (float)sec;
    } else {
        uint64_t j = xorshift(&l->rng) % (uint64_t)(l->seen + 1);
        if (j < (uint64_t)l->cap)
            l->buf[j] = (float)sec;
    }
    l->seen++;
}

static lat_sampler lat_for(const io_run *x, int rep, int phase, int tid, int nph)
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

static void lat_done(const io_run *x, const lat_sampler *l, int rep, int phase, int tid, int nph)
{
    if (rep < 0 || !x->o->lat_n)
        return;
    size_t slot = ((size_t)rep * (size_t)nph + (size_t)phase) * (size_t)x->p->nthreads + (size_t)tid;
    x->o->lat_n[slot] = l->buf ? (l->seen < l->cap ? l->seen : l->cap) : 0;
}

/* Common parameter checks; 0 or CEIL_EINVAL with msg set. */
static int io_validate(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r,
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
static int io_finish(io_run *x, ceil_result *r, int pin_err, int pin_cpu, int nt_run, const char *what)
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

static void start_team(io_run *x, int tid, ceil_affinity *old, int *pin_err, int *pin_cpu, int *nt_run)
{
    ceil_pin_member(x->p, tid, old, pin_err, pin_cpu);
    if (tid == 0)
        *nt_run = omp_get_num_threads();
}

/* After the first barrier: a pinning failure or a short team stops everyone. */
static void team_ok(io_run *x, int pin_err, int nt_run)
{
    if (omp_get_thread_num() == 0 && (pin_err != 0 || nt_run != x->p->nthreads))
        __atomic_store_n(&x->abort, 1, __ATOMIC_SEQ_CST);
}

/* Global thread index of thread tid, threads of all processes, and the index
 * whose data thread tid reads back (seq). */
static int io_g(const ceil_io_spec *s, int tid)
{
    return s->gthreads ? s->gbase + tid : tid;
}

static int io_G(const ceil_params *p, const ceil_io_spec *s)
{
    return s->gthreads ? s->gthreads : p->nthreads;
}

static int io_rg(const ceil_io_spec *s, int tid)
{
    return s->gthreads && s->rbase >= 0 ? s->rbase + tid : io_g(s, tid);
}

/* -- sequential -------------------------------------------------------------- */

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
                stamp(wbuf, (size_t)X, p->seed, fid, (uint64_t)off);
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

/* -- random ------------------------------------------------------------------ */

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
        CONSENSUS(&x);
        /* untimed: create and fill the file, fsync it */
        if (!x.stop) {
            fd = create_open(&x, path, O_WRONLY | dflag, &created);
            for (int64_t off = 0; fd >= 0 && off < F && !io_stopped(&x); off += chunk) {
                int64_t n = F - off < chunk ? F - off : chunk;
                stamp(fill, (size_t)n, p->seed, fid, (uint64_t)off);
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
        for (int j = 0; j < total && !x.stop; j++) {
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
            for (int ph = 0; ph < 2; ph++) {
                lat_sampler lat = lat_for(&x, rep, ph, tid, 2);
                uint64_t rng = mix64(p->seed ^ fid ^ ((uint64_t)j << 8) ^ (uint64_t)ph) | 1;
                int64_t n = 0;
                PHASE_START(&x, t0);
                const double deadline = t0 + s->duration_s;
                while ((s->ops == 0 || n < s->ops) && !io_stopped(&x)) {
                    int64_t off = (int64_t)((xorshift(&rng) >> 11) % (uint64_t)nblocks) * X;
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
                        stamp(wbuf, (size_t)X, p->seed, fid, (uint64_t)off);
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

/* -- metadata ---------------------------------------------------------------- */

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
                            stamp(wbuf, len, p->seed, fid, 0);
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
