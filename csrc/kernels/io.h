/* io.h - private to the storage loops (io*.c); nothing here is exported.
 *
 * io.c holds the data pattern, one call's shared state and the helpers every
 * loop uses (errors, cancel, agreement between processes, full reads and
 * writes, cache eviction, latency samples, parameter checks); io_seq.c,
 * io_random.c and io_meta.c hold one entry point each. The shared helpers are
 * hidden (CEIL_IO_INTERNAL) so that libceiling_core.so exports only the
 * ceil_io_* functions of ceiling.h.
 */
#ifndef CEIL_IO_H
#define CEIL_IO_H

#include <omp.h>
#include <stdint.h>
#include <sys/types.h>
#include "ceiling.h"

#define CEIL_IO_INTERNAL __attribute__((visibility("hidden")))

#define IO_ALIGN 4096                 /* buffer alignment and O_DIRECT granularity */
#define IO_STAMP 512                  /* one stamp per this many bytes of file */
#define IO_MAX_THREADS 1024
#define IO_MAX_REPS 1000
#define IO_MAX_MD_BYTES (1 << 20)
#define IO_MAX_MD_FILES (1 << 24)
#define IO_FILL_CHUNK (1 << 20)       /* random: prefill transfer */

/* splitmix64's finaliser: every input bit affects every output bit. */
static inline uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* Put the stamps of file offsets [off, off+len) into buf (which holds that range). */
CEIL_IO_INTERNAL void io_stamp(char *buf, size_t len, uint64_t seed, uint64_t fid, uint64_t off);

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

CEIL_IO_INTERNAL void io_fail(io_run *x, int rc, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A failed system call: O_DIRECT's EINVAL is its own code (the caller falls back). */
CEIL_IO_INTERNAL void io_sysfail(io_run *x, const char *call, const char *path, int64_t off, int e, int direct);
/* 1 when this thread should stop: an error, or a cancel request (which becomes the error). */
CEIL_IO_INTERNAL int io_stopped(io_run *x);
/* A read that came back shorter than the pattern says (a data failure, not an error). */
CEIL_IO_INTERNAL void io_short(io_run *x, const char *path, int64_t off, int64_t want);
/* Judge one read of `want` bytes at `off` that returned `got` (errno `err`
 * when negative): an error, a short read, or data that does not match the
 * pattern written there. */
CEIL_IO_INTERNAL void judge_read(io_run *x, const char *path, ssize_t got, int err, size_t want, int64_t off,
                                 const char *rbuf, const char *base, uint64_t seed, uint64_t fid, int all,
                                 int direct);
/* Thread 0's verdict: this process's, and with several processes (spec->sync)
 * everyone's: a stop anywhere stops all, so every process takes the same path
 * through the same agreement points. */
CEIL_IO_INTERNAL int io_agree(io_run *x);

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

/* Whole transfers, retried on EINTR; -1 on error (a write making no progress is ENOSPC). */
CEIL_IO_INTERNAL ssize_t pwrite_full(int fd, const char *buf, size_t n, off_t off);
/* Bytes read, fewer at end of file; -1 on error. */
CEIL_IO_INTERNAL ssize_t pread_full(int fd, char *buf, size_t n, off_t off);
/* Create `path` (O_EXCL: never an existing file), close it, and open it
 * again with `flags`. Returns the fd; -1 after io_sysfail. *created says
 * whether the name is now ours to remove. */
CEIL_IO_INTERNAL int create_open(io_run *x, const char *path, int flags, int *created);
/* Evict (when asked) a file's clean pages, then count how many are still
 * resident. Adds to *res and *tot; returns 0, or -errno when it cannot tell. */
CEIL_IO_INTERNAL int evict_measure(const char *path, int evict, int64_t *res, int64_t *tot);
/* The largest resident share seen after eviction, over the repetitions (res of tot pages). */
static inline void io_keep_resident(double *resident, int64_t res, int64_t tot)
{
    if (tot > 0 && (double)res / (double)tot > *resident)
        *resident = (double)res / (double)tot;
}
/* IO_ALIGN-aligned, a multiple of it long (O_DIRECT's rule); NULL when out of memory. */
CEIL_IO_INTERNAL void *io_buffer(size_t bytes);

typedef struct lat_sampler {
    float *buf;        /* cap entries or NULL */
    int64_t cap;
    int64_t seen;
    uint64_t rng;
} lat_sampler;

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

/* The sampler of (rep, phase, tid) in out->lat_s (none for a warm-up), and
 * how many samples it kept into out->lat_n. */
CEIL_IO_INTERNAL lat_sampler lat_for(const io_run *x, int rep, int phase, int tid, int nph);
CEIL_IO_INTERNAL void lat_done(const io_run *x, const lat_sampler *l, int rep, int phase, int tid, int nph);

/* Common parameter checks; 0 or CEIL_EINVAL with msg set. */
CEIL_IO_INTERNAL int io_validate(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r,
                                 int nph, const char *what);
/* The call's outcome into r and o; returns the call's code. */
CEIL_IO_INTERNAL int io_finish(io_run *x, ceil_result *r, int pin_err, int pin_cpu, int nt_run,
                               const char *what);
/* Pin team member tid; thread 0 records the team's size. */
CEIL_IO_INTERNAL void start_team(io_run *x, int tid, ceil_affinity *old, int *pin_err, int *pin_cpu,
                                 int *nt_run);
/* After the first barrier: a pinning failure or a short team stops everyone. */
CEIL_IO_INTERNAL void team_ok(io_run *x, int pin_err, int nt_run);

/* -- several operations in flight (io_queue.c) ---------------------------------- */

typedef struct io_queue {
    uint64_t ctx;             /* aio_context_t */
    int open;
    int depth;
    int64_t xfer;
    char *slots;              /* 2 x depth buffers of xfer bytes, IO_ALIGN-aligned */
    int *buf_of;              /* the buffer each operation slot reads into or writes from */
    int *spare;               /* buffers not in flight (a stack): a read's slot goes out again with one */
    int nspare;
    struct iocb *cbs;
    struct iocb **ptrs;
    struct io_event *ev;
    double *t_sub;            /* submission time of each slot's operation */
} io_queue;

typedef struct io_phase {
    int fd;
    const char *path;
    int write;                /* 1: writes of the pattern; 0: reads, each checked */
    int seq;                  /* 1: the file's blocks in order (and around again); 0: random */
    int all;                  /* reads compare every byte (CEIL_IO_VERIFY_ALL) */
    int64_t nblocks;          /* the file's length in transfers */
    uint64_t *rng;            /* random offsets' state */
    double deadline;          /* ceil_now() after which nothing more is submitted; <= 0: none */
    int64_t max_ops;          /* 0: no limit */
    const char *base;         /* ceil_io_fill_base of one transfer */
    uint64_t seed, fid;
} io_phase;

/* The AIO context and buffers of one thread (each holding `base`); 0, or -1 after io_fail
 * (CEIL_EQUEUE when io_setup is refused). io_queue_close after either. */
CEIL_IO_INTERNAL int io_queue_open(io_run *x, io_queue *q, int depth, int64_t xfer, const char *base);
CEIL_IO_INTERNAL void io_queue_close(io_queue *q);
/* One timed phase with q->depth operations in flight; returns the operations completed. */
CEIL_IO_INTERNAL int64_t io_queue_phase(io_run *x, io_queue *q, const io_phase *ph, lat_sampler *lat);

/* Global thread index of thread tid, threads of all processes, and the index
 * whose data thread tid reads back (seq). */
static inline int io_g(const ceil_io_spec *s, int tid)
{
    return s->gthreads ? s->gbase + tid : tid;
}

static inline int io_G(const ceil_params *p, const ceil_io_spec *s)
{
    return s->gthreads ? s->gthreads : p->nthreads;
}

static inline int io_rg(const ceil_io_spec *s, int tid)
{
    return s->gthreads && s->rbase >= 0 ? s->rbase + tid : io_g(s, tid);
}

#endif
