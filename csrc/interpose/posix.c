/* posix.c - the POSIX I/O module: counts the program's calls of the POSIX
 * file API (open, read, write, lseek, stat, fsync, ...) per call class,
 * like Darshan's darshan-posix.c; the per-file records are the file
 * module's (files.c), which every open, read, write, fsync and close here
 * feeds. The hot path is a few adds into the calling thread's blocks.
 *
 * Longer than 500 lines: one short wrapper for each of about 45 symbols
 * (the 64-bit, fortified and __xstat forms included) beside the per-thread
 * offset tracking they all share; split by class, every file would need
 * that state and the clock, and the module's one block layout would be in
 * four places.
 *
 * Only calls the program makes through the dynamic linker are seen: stdio
 * (fopen, fread) calls glibc's internal functions and is the stdio
 * module's; the runtime's own record writes call the real functions.
 *
 * Its record lines (interpose.h has the format around them), in this order:
 *
 *     module name=posix version=1 enabled=1
 *     posix class=read calls=12 errors=0 bytes=40960 ns=81234 random=1
 *     posix class=write calls=3 errors=0 bytes=3072 ns=20111 random=0
 *     posix class=meta calls=40 errors=2 ns=150002
 *     posix class=sync calls=1 errors=0 ns=900123
 *     posix class=other_read calls=2 errors=0 bytes=12 ns=3002
 *     posix class=other_write calls=5 errors=0 bytes=512 ns=9120
 *     posix hist=read lt1k=2 1k=0 2k=0 4k=10 8k=0 ... 32m=0 ge64m=0
 *     posix hist=write lt1k=0 1k=3 2k=0 ... ge64m=0
 *     posix fn=open calls=4
 *     posix fn=read calls=12
 *     ...
 *
 * class: read (read, pread, readv and their 64/_chk forms), write (write,
 * pwrite, writev), meta (open, openat, creat, close, lseek, stat and its
 * forms, unlink, unlinkat, mkdir, rmdir, rename, access), sync (fsync,
 * fdatasync), other_read and other_write (the data calls on a descriptor
 * that is not a regular file or a block device: a pipe, a socket, a
 * terminal, /dev/null; not storage I/O, and neither in the histograms nor
 * tracked for sequential access; a thread asks fstat once per descriptor,
 * at its first read or write, and again after it is closed or reopened;
 * descriptors at or above POSIX_TRACKED_FDS are taken for files). calls:
 * all threads' calls, failed ones included; errors: the
 * calls that returned -1; ns: time inside the real function, summed, in
 * CLOCK_MONOTONIC nanoseconds (summed in ceil_ip_ticks, interpose.h); bytes: what the successful calls returned (bytes
 * actually read or written, not asked for); random: read or write calls
 * that did not start where the same thread's previous access of that
 * descriptor ended (see "Sequential or not" below).
 * hist: the successful calls of the class by bytes returned, in
 * power-of-two buckets: lt1k = 0 .. 1023 bytes (a read at end of file, 0
 * bytes, is here), 1k = 1 KiB .. 2 KiB - 1, 2k, 4k, ..., 512k, 1m, ...,
 * 32m = 32 MiB .. 64 MiB - 1, ge64m = 64 MiB and more; 18 buckets that sum
 * to calls - errors.
 * fn: one line per wrapped function called at least once, with its calls
 * (the name is the symbol the program called: open64, __read_chk,
 * __xstat, ...); these sum to the classes' calls.
 *
 * Sequential or not. Each thread keeps, for descriptors below
 * POSIX_TRACKED_FDS (256), where the next sequential access of the
 * descriptor would start, without a system call: an open expects offset 0
 * (nothing with O_APPEND, where writes go to the end), a read or write
 * moves the expectation by the bytes returned, a pread/pwrite at offset o
 * sets it to o + bytes, an lseek that moves the position elsewhere marks
 * the next read or write random, and a pread/pwrite at an offset other
 * than the expected one is random; close forgets. An lseek(fd, 0,
 * SEEK_CUR) is a question, not a move: its answer corrects the
 * expectation. Approximate where it cannot know: a descriptor used by two
 * threads, inherited, dup'ed or above the tracked range is never counted
 * random until the thread seeks on it or names an offset; one that mixes
 * pread with read is compared against the last access of either kind.
 */
/* The definitions below replace glibc's functions; with fortified headers
 * some of them (read, open) would be inline wrappers of their own. */
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "files.h"
#include "interpose.h"

/* Every wrapped function, for the per-function counts (calls.def): the ones
 * every glibc has, resolved at load; stat and its forms as functions of their
 * own, exported since glibc 2.33 (before, the headers turned them into __xstat
 * calls), resolved at load; and what binaries built against an older glibc
 * call instead: resolved at their first call, so that a glibc that no longer
 * exports them does not stop every program at load. */
#define POSIX_BASE_FNS(X) CEIL_IP_POSIX_BASE_FNS(X)
#if __GLIBC_PREREQ(2, 33)
#define POSIX_STAT_FNS(X) CEIL_IP_POSIX_STAT_FNS(X)
#else
#define POSIX_STAT_FNS(X)
#endif
#define POSIX_XSTAT_FNS(X) CEIL_IP_POSIX_XSTAT_FNS(X)

#define POSIX_FNS(X) POSIX_BASE_FNS(X) POSIX_STAT_FNS(X) POSIX_XSTAT_FNS(X)

#define POSIX_FN_ENUM(fn, cls) FN_##fn,
#define POSIX_FN_NAME(fn, cls) #fn,
enum posix_fn { POSIX_FNS(POSIX_FN_ENUM) FN_COUNT };
static const char *const fn_names[FN_COUNT] = {POSIX_FNS(POSIX_FN_NAME)};
#define POSIX_FN_CALL(fn, cls) CEIL_IP_CALL_##fn,
static const uint16_t fn_call[FN_COUNT] = {POSIX_FNS(POSIX_FN_CALL)};   /* the trace's call ids */

/* calls.def's classes; read and write first: they index the histograms too. */
#define POSIX_CLASS_ENUM(e, name) PC_##e,
#define POSIX_CLASS_NAME(e, name) #name,
enum posix_class { CEIL_IP_POSIX_CLASSES(POSIX_CLASS_ENUM) PC_COUNT };
static const char *const class_names[PC_COUNT] = {CEIL_IP_POSIX_CLASSES(POSIX_CLASS_NAME)};
_Static_assert(PC_READ == 0 && PC_WRITE == 1, "read and write index the histograms");

/* Each wrapper counts its call in the class calls.def gives it (a data call on a descriptor
 * that is not a file in other_read or other_write instead): checked where it is defined. */
#define POSIX_FN_CLASS(fn, cls) POSIX_CLASS_OF_##fn = PC_##cls,
enum { CEIL_IP_POSIX_BASE_FNS(POSIX_FN_CLASS) CEIL_IP_POSIX_STAT_FNS(POSIX_FN_CLASS)
       CEIL_IP_POSIX_XSTAT_FNS(POSIX_FN_CLASS) };
#define POSIX_CLASS_IS(fn, klass)                                                                     \
    _Static_assert((int)POSIX_CLASS_OF_##fn == (int)(klass), "calls.def gives " #fn " another class")

/* 256 descriptors of 8 bytes keep the block inside CEIL_IP_MAX_BLOCK. */
#define POSIX_TRACKED_FDS 256

typedef struct posix_class_counters {
    uint64_t calls, errors, bytes, ticks, random;   /* ticks: of ceil_ip_ticks, ns at report */
} posix_class_counters;

/* What report sums: nothing but uint64_t, so it can be summed as an array. */
typedef struct posix_totals {
    posix_class_counters cls[PC_COUNT];
    uint64_t hist[2][CEIL_IP_HIST_BUCKETS];     /* [PC_READ or PC_WRITE][bucket] */
    uint64_t fn_calls[FN_COUNT];
} posix_totals;

/* One thread's block. next_pos is the thread's own and never reported:
 * 0 = unknown, else 1 + the offset where the descriptor's next sequential
 * access starts, with POS_MOVED set when an lseek moved the position away
 * from there and no read or write followed yet, and POS_POSITIONAL when a
 * pread or pwrite set it (the file position itself is then not known). */
typedef struct posix_counters {
    posix_totals t;
    uint64_t next_pos[POSIX_TRACKED_FDS];
    uint8_t kind[POSIX_TRACKED_FDS];          /* FD_* below, the thread's own */
} posix_counters;

/* What a descriptor is: not known yet (asked with fstat at its first read
 * or write), a file (regular, or a block device), or anything else. */
enum { FD_UNKNOWN = 0, FD_FILE = CEIL_IP_FD_FILE, FD_OTHER = CEIL_IP_FD_OTHER };

#define POS_MOVED (UINT64_C(1) << 63)
/* A pread or pwrite came last: the expectation is its end, for telling random
 * accesses, but the file position is not known (it did not move), so a read or
 * write at the position has no known offset until an lseek or open says it. */
#define POS_POSITIONAL (UINT64_C(1) << 62)
#define POS_FLAGS (POS_MOVED | POS_POSITIONAL)

_Static_assert(sizeof(posix_counters) <= CEIL_IP_MAX_BLOCK, "posix block too large");
_Static_assert(sizeof(posix_totals) % sizeof(uint64_t) == 0, "posix_totals is not all uint64_t");

static ceil_ip_module posix_module;

/* ---- counting (inlined into every wrapper) ---------------------------------- */

/* A read or write at the file position rather than at an offset it names. */
#define AT_POSITION ((off64_t)-1)

/* Counts the call in its class; returns the ticks it took. */
static inline uint64_t count_call_(posix_counters *c, enum posix_fn fn, enum posix_class k, uint64_t t0,
                                   int failed)
{
    const uint64_t ticks = ceil_ip_ticks() - t0;
    posix_class_counters *q = &c->t.cls[k];
    ceil_ip_add(&q->calls, 1);
    ceil_ip_add(&q->errors, (uint64_t)failed);
    ceil_ip_add(&q->ticks, ticks);
    ceil_ip_add(&c->t.fn_calls[fn], 1);
    return ticks;
}

/* The same, and its event (the trace): the result is -1 or 0 (the calls that come here return -1 on failure). */
static inline uint64_t count_call(posix_counters *c, enum posix_fn fn, enum posix_class k, uint64_t t0,
                                  int failed)
{
    const uint64_t ticks = count_call_(c, fn, k, t0, failed);
    ceil_ip_event(&posix_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + ticks, failed ? -1 : 0, 0);
    return ticks;
}

/* 1 when a read or write of n bytes at off (or AT_POSITION) on fd is not
 * where the previous access ended; moves the expectation past it. *start
 * is where the access began, CEIL_IP_OFFSET_UNKNOWN when not known (at the
 * position after a move, or on a descriptor the thread knows nothing of). */
static inline int track_access(posix_counters *c, int fd, off64_t off, uint64_t n, int64_t *start)
{
    *start = off == AT_POSITION ? CEIL_IP_OFFSET_UNKNOWN : (int64_t)off;
    if ((unsigned)fd >= POSIX_TRACKED_FDS)
        return 0;
    uint64_t *pos = &c->next_pos[fd];
    const uint64_t moved = *pos & POS_MOVED, positional = *pos & POS_POSITIONAL, expect = *pos & ~POS_FLAGS;
    if (off == AT_POSITION) {
        if (*pos == 0)
            return 0;
        *pos = (expect + n) | positional;
        if (!positional)                      /* after an lseek too: it said where */
            *start = (int64_t)(expect - 1);
        return moved != 0;
    }
    /* pread/pwrite leave the file position where it was, so a pending
     * move still applies to the next read or write. */
    *pos = ((uint64_t)off + 1 + n) | moved | POS_POSITIONAL;
    return expect != 0 && expect != (uint64_t)off + 1;
}

/* 1 when fd is a file: fstat once per descriptor and thread, through the
 * raw system call (no wrapper counts it); a descriptor above the tracked
 * range, or one fstat refuses, is taken for a file. */
static inline int is_file(posix_counters *c, int fd)
{
    if ((unsigned)fd >= POSIX_TRACKED_FDS)
        return 1;
    if (c->kind[fd] == FD_UNKNOWN)
        c->kind[fd] = ceil_ip_fd_kind(fd);
    return c->kind[fd] == FD_FILE;
}

static inline void count_data(posix_counters *c, enum posix_fn fn, enum posix_class k, uint64_t t0,
                              ssize_t rc, int fd, off64_t off)
{
    const int saved = errno;
    if (!is_file(c, fd)) {
        const uint64_t t = count_call_(c, fn, k == PC_READ ? PC_OTHER_READ : PC_OTHER_WRITE, t0, rc < 0);
        ceil_ip_event_io(&posix_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + t, rc, rc > 0 ? (uint64_t)rc : 0,
                         0, -1);
        if (rc > 0)
            ceil_ip_add(&c->t.cls[k == PC_READ ? PC_OTHER_READ : PC_OTHER_WRITE].bytes, (uint64_t)rc);
        errno = saved;
        return;
    }
    const uint64_t ticks = count_call_(c, fn, k, t0, rc < 0);
    if (rc < 0)
        ceil_ip_event_io(&posix_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + ticks, rc, 0,
                         ceil_ip_file_id(fd), off == AT_POSITION ? -1 : (int64_t)off);
    if (rc >= 0) {
        posix_class_counters *q = &c->t.cls[k];
        int64_t start;
        const int random = track_access(c, fd, off, (uint64_t)rc, &start);
        ceil_ip_add(&q->bytes, (uint64_t)rc);
        ceil_ip_add(&c->t.hist[k][ceil_ip_size_bucket((uint64_t)rc)], 1);
        ceil_ip_add(&q->random, (uint64_t)random);
        ceil_ip_file_io(fd, k == PC_WRITE, (uint64_t)rc, ticks, random, start, CEIL_IP_API_POSIX);
        ceil_ip_event_io(&posix_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + ticks, rc, (uint64_t)rc,
                         ceil_ip_file_id(fd), start);
    }
    errno = saved;
}

static inline uint64_t count_meta(posix_counters *c, enum posix_fn fn, uint64_t t0, int failed)
{
    const int saved = errno;
    const uint64_t ticks = count_call(c, fn, PC_META, t0, failed);
    errno = saved;
    return ticks;
}

/* A new descriptor's position is 0, or wherever the file ends at each
 * write with O_APPEND. */
static inline void count_open(posix_counters *c, enum posix_fn fn, uint64_t t0, int rc, int flags, int dirfd,
                              const char *path)
{
    const int saved = errno;
    const uint64_t ticks = count_call_(c, fn, PC_META, t0, rc < 0);
    if ((unsigned)rc < POSIX_TRACKED_FDS) {
        c->next_pos[rc] = (flags & O_APPEND) ? 0 : 1;
        c->kind[rc] = FD_UNKNOWN;
    }
    ceil_ip_file_opened_at(dirfd, rc, path, flags, CEIL_IP_API_POSIX, ticks);
    ceil_ip_event_io(&posix_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + ticks, rc, 0,
                     rc >= 0 ? ceil_ip_file_id(rc) : 0, -1);
    errno = saved;
}

/* A metadata call on a descriptor (close, lseek): its event names the file; offset: lseek's new position. */
static inline uint64_t count_meta_fd(posix_counters *c, enum posix_fn fn, uint64_t t0, int64_t rc, int32_t fid,
                                     int64_t offset)
{
    const int saved = errno;
    const uint64_t ticks = count_call_(c, fn, PC_META, t0, rc < 0);
    ceil_ip_event_io(&posix_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + ticks, rc, 0, fid, offset);
    errno = saved;
    return ticks;
}

static inline void track_seek(posix_counters *c, int fd, off64_t off, int whence, off64_t rc)
{
    if (rc < 0 || (unsigned)fd >= POSIX_TRACKED_FDS)
        return;
    uint64_t *pos = &c->next_pos[fd];
    const uint64_t at = (uint64_t)rc + 1;
    if ((*pos & ~POS_FLAGS) == at) {
        *pos = at | (*pos & POS_MOVED);       /* the position is known now */
        return;
    }
    /* Unknown before, or only asked: now known, and no move away from
     * anything this thread knew. */
    if (*pos == 0 || (whence == SEEK_CUR && off == 0))
        *pos = at;
    else
        *pos = at | POS_MOVED;
}

/* ---- wrappers ------------------------------------------------------------------
 * Each asks for its block before the real call, so that a process that is
 * not counting pays no clock reads, only the block test. t0 is in
 * ceil_ip_ticks (interpose.h). */

/* The mode argument of open and openat, present only when the flags need it. */
#define POSIX_MODE_ARG(mode, flags)                                                                \
    do {                                                                                           \
        if (__OPEN_NEEDS_MODE(flags)) {                                                            \
            va_list ap_;                                                                           \
            va_start(ap_, flags);                                                                  \
            (mode) = va_arg(ap_, mode_t);                                                          \
            va_end(ap_);                                                                           \
        }                                                                                          \
    } while (0)

#define POSIX_OPEN(fn)                                                                             \
    POSIX_CLASS_IS(fn, PC_META);                                                                   \
    CEIL_IP_REAL_DECL(int, fn, (const char *, int, ...));                                          \
    CEIL_IP_EXPORT int fn(const char *path, int flags, ...)                                        \
    {                                                                                              \
        mode_t mode = 0;                                                                           \
        POSIX_MODE_ARG(mode, flags);                                                               \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(path, flags, mode);                                               \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(path, flags, mode);                                           \
        count_open(c, FN_##fn, t0, rc, flags, AT_FDCWD, path);                                     \
        return rc;                                                                                 \
    }
POSIX_OPEN(open)
POSIX_OPEN(open64)

#define POSIX_OPENAT(fn)                                                                           \
    POSIX_CLASS_IS(fn, PC_META);                                                                   \
    CEIL_IP_REAL_DECL(int, fn, (int, const char *, int, ...));                                     \
    CEIL_IP_EXPORT int fn(int dirfd, const char *path, int flags, ...)                             \
    {                                                                                              \
        mode_t mode = 0;                                                                           \
        POSIX_MODE_ARG(mode, flags);                                                               \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(dirfd, path, flags, mode);                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(dirfd, path, flags, mode);                                    \
        count_open(c, FN_##fn, t0, rc, flags, dirfd, path);                                        \
        return rc;                                                                                 \
    }
POSIX_OPENAT(openat)
POSIX_OPENAT(openat64)

/* What fortified callers (-D_FORTIFY_SOURCE, Ubuntu's default) call when
 * the flags are not known at compile time; no mode: with O_CREAT the real
 * one stops the program. */
#define POSIX_OPEN_2(fn)                                                                           \
    POSIX_CLASS_IS(fn, PC_META);                                                                   \
    int fn(const char *, int);                                                                     \
    CEIL_IP_REAL_DECL(int, fn, (const char *, int));                                               \
    CEIL_IP_EXPORT int fn(const char *path, int flags)                                             \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(path, flags);                                                     \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(path, flags);                                                 \
        count_open(c, FN_##fn, t0, rc, flags, AT_FDCWD, path);                                     \
        return rc;                                                                                 \
    }
POSIX_OPEN_2(__open_2)
POSIX_OPEN_2(__open64_2)

#define POSIX_OPENAT_2(fn)                                                                         \
    POSIX_CLASS_IS(fn, PC_META);                                                                   \
    int fn(int, const char *, int);                                                                \
    CEIL_IP_REAL_DECL(int, fn, (int, const char *, int));                                          \
    CEIL_IP_EXPORT int fn(int dirfd, const char *path, int flags)                                  \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(dirfd, path, flags);                                              \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(dirfd, path, flags);                                          \
        count_open(c, FN_##fn, t0, rc, flags, dirfd, path);                                        \
        return rc;                                                                                 \
    }
POSIX_OPENAT_2(__openat_2)
POSIX_OPENAT_2(__openat64_2)

#define POSIX_CREAT(fn)                                                                            \
    POSIX_CLASS_IS(fn, PC_META);                                                                   \
    CEIL_IP_REAL_DECL(int, fn, (const char *, mode_t));                                            \
    CEIL_IP_EXPORT int fn(const char *path, mode_t mode)                                           \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(path, mode);                                                      \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(path, mode);                                                  \
        count_open(c, FN_##fn, t0, rc, O_WRONLY | O_CREAT | O_TRUNC, AT_FDCWD, path);              \
        return rc;                                                                                 \
    }
POSIX_CREAT(creat)
POSIX_CREAT(creat64)

CEIL_IP_REAL_DECL(int, close, (int));
POSIX_CLASS_IS(close, PC_META);
CEIL_IP_EXPORT int close(int fd)
{
    posix_counters *c = ceil_ip_block(&posix_module);
    if (!c) {
        ceil_ip_file_closed(fd, 0);
        return CEIL_REAL(close)(fd);
    }
    const uint64_t t0 = ceil_ip_ticks();
    const int32_t fid = ceil_ip_file_id(fd);
    const int rc = CEIL_REAL(close)(fd);
    const uint64_t ticks = count_meta_fd(c, FN_close, t0, rc, fid, -1);
    /* The number's next user is another file (Linux frees it even when close fails). */
    ceil_ip_file_closed(fd, ticks);
    if ((unsigned)fd < POSIX_TRACKED_FDS) {
        c->next_pos[fd] = 0;
        c->kind[fd] = FD_UNKNOWN;
    }
    return rc;
}

/* ---- what only the per-file records need: copies of descriptors, flags, mappings ----
 * Not counted in the classes (no line of their own in the record): they
 * keep files.c's descriptor map true (a copy is the same file, with the
 * same O_SYNC, O_DSYNC and O_DIRECT; what dup2 replaces is closed), note
 * O_DIRECT set by fcntl, and count a file's mappings. They keep the
 * map even when the thread is not counting (inside another wrapper). */
#define POSIX_DUP_FNS(X) X(dup) X(dup2) X(dup3) X(fcntl)

CEIL_IP_REAL_DECL(int, dup, (int));
CEIL_IP_EXPORT int dup(int fd)
{
    const int rc = CEIL_REAL(dup)(fd);
    if (rc >= 0)
        ceil_ip_file_dup(fd, rc);
    return rc;
}

CEIL_IP_REAL_DECL(int, dup2, (int, int));
CEIL_IP_EXPORT int dup2(int fd, int to)
{
    const int rc = CEIL_REAL(dup2)(fd, to);
    if (rc >= 0)
        ceil_ip_file_dup(fd, rc);
    return rc;
}

CEIL_IP_REAL_DECL(int, dup3, (int, int, int));
CEIL_IP_EXPORT int dup3(int fd, int to, int flags)
{
    const int rc = CEIL_REAL(dup3)(fd, to, flags);
    if (rc >= 0)
        ceil_ip_file_dup(fd, rc);
    return rc;
}

/* fcntl's third argument is an int or a pointer, or absent: passed on as
 * a pointer-sized value, as glibc's own fcntl reads it. fcntl64 is what
 * glibc 2.28's headers call with _FILE_OFFSET_BITS=64. */
#define POSIX_FCNTL(fn)                                                                            \
    CEIL_IP_REAL_DECL(int, fn, (int, int, ...));                                                   \
    CEIL_IP_EXPORT int fn(int fd, int cmd, ...)                                                    \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, cmd);                                                                         \
        void *arg = va_arg(ap, void *);                                                            \
        va_end(ap);                                                                                \
        const int rc = CEIL_REAL(fn)(fd, cmd, arg);                                                \
        if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))                                 \
            ceil_ip_file_dup(fd, rc);                                                              \
        else if (rc >= 0 && cmd == F_SETFL)                                                        \
            ceil_ip_file_setfl(fd, (int)(intptr_t)arg);                                            \
        return rc;                                                                                 \
    }
POSIX_FCNTL(fcntl)
#if __GLIBC_PREREQ(2, 28)
int fcntl64(int, int, ...);
POSIX_FCNTL(fcntl64)
#endif

/* mmap is called by allocators (a preloaded one's own, too) and by this
 * library at load, before the real one is resolved: until then the
 * system call itself. An anonymous mapping is passed on untouched. */
#define POSIX_MMAP(fn)                                                                             \
    CEIL_IP_REAL_DECL(void *, fn, (void *, size_t, int, int, int, off_t));                         \
    CEIL_IP_EXPORT void *fn(void *addr, size_t len, int prot, int flags, int fd, off_t off)        \
    {                                                                                              \
        ceil_ip_##fn##_fn_ f = __atomic_load_n(&ceil_ip_real_##fn##_, __ATOMIC_RELAXED);           \
        void *rc = f ? f(addr, len, prot, flags, fd, off)                                          \
                     : (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);                 \
        if (rc != MAP_FAILED && !(flags & MAP_ANONYMOUS) && fd >= 0 && ceil_ip_block(&posix_module)) \
            ceil_ip_file_mapped(fd, len, prot, flags);                                             \
        return rc;                                                                                 \
    }
POSIX_MMAP(mmap)
POSIX_MMAP(mmap64)

/* read and write at the file position: (fd, buf, n). */
#define POSIX_RW(klass, fn, buf_t)                                                                 \
    POSIX_CLASS_IS(fn, klass);                                                                     \
    CEIL_IP_REAL_DECL(ssize_t, fn, (int, buf_t, size_t));                                          \
    CEIL_IP_EXPORT ssize_t fn(int fd, buf_t buf, size_t n)                                         \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(fd, buf, n);                                                      \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const ssize_t rc = CEIL_REAL(fn)(fd, buf, n);                                              \
        count_data(c, FN_##fn, klass, t0, rc, fd, AT_POSITION);                                    \
        return rc;                                                                                 \
    }
POSIX_RW(PC_READ, read, void *)
POSIX_RW(PC_WRITE, write, const void *)

/* pread and pwrite at an offset: (fd, buf, n, off). */
#define POSIX_PRW(klass, fn, buf_t, off_type)                                                      \
    POSIX_CLASS_IS(fn, klass);                                                                     \
    CEIL_IP_REAL_DECL(ssize_t, fn, (int, buf_t, size_t, off_type));                                \
    CEIL_IP_EXPORT ssize_t fn(int fd, buf_t buf, size_t n, off_type off)                           \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(fd, buf, n, off);                                                 \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const ssize_t rc = CEIL_REAL(fn)(fd, buf, n, off);                                         \
        count_data(c, FN_##fn, klass, t0, rc, fd, off);                                            \
        return rc;                                                                                 \
    }
POSIX_PRW(PC_READ, pread, void *, off_t)
POSIX_PRW(PC_READ, pread64, void *, off64_t)
POSIX_PRW(PC_WRITE, pwrite, const void *, off_t)
POSIX_PRW(PC_WRITE, pwrite64, const void *, off64_t)

/* The fortified read and pread: the same, with the buffer's size last. */
ssize_t __read_chk(int, void *, size_t, size_t);
CEIL_IP_REAL_DECL(ssize_t, __read_chk, (int, void *, size_t, size_t));
POSIX_CLASS_IS(__read_chk, PC_READ);
CEIL_IP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    posix_counters *c = ceil_ip_block(&posix_module);
    if (!c)
        return CEIL_REAL(__read_chk)(fd, buf, n, buflen);
    const uint64_t t0 = ceil_ip_ticks();
    const ssize_t rc = CEIL_REAL(__read_chk)(fd, buf, n, buflen);
    count_data(c, FN___read_chk, PC_READ, t0, rc, fd, AT_POSITION);
    return rc;
}

#define POSIX_PREAD_CHK(fn, off_type)                                                              \
    POSIX_CLASS_IS(fn, PC_READ);                                                                   \
    ssize_t fn(int, void *, size_t, off_type, size_t);                                             \
    CEIL_IP_REAL_DECL(ssize_t, fn, (int, void *, size_t, off_type, size_t));                       \
    CEIL_IP_EXPORT ssize_t fn(int fd, void *buf, size_t n, off_type off, size_t buflen)            \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(fd, buf, n, off, buflen);                                         \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const ssize_t rc = CEIL_REAL(fn)(fd, buf, n, off, buflen);                                 \
        count_data(c, FN_##fn, PC_READ, t0, rc, fd, off);                                          \
        return rc;                                                                                 \
    }
POSIX_PREAD_CHK(__pread_chk, off_t)
POSIX_PREAD_CHK(__pread64_chk, off64_t)

#define POSIX_RWV(klass, fn)                                                                       \
    POSIX_CLASS_IS(fn, klass);                                                                     \
    CEIL_IP_REAL_DECL(ssize_t, fn, (int, const struct iovec *, int));                              \
    CEIL_IP_EXPORT ssize_t fn(int fd, const struct iovec *iov, int iovcnt)                         \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(fd, iov, iovcnt);                                                 \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const ssize_t rc = CEIL_REAL(fn)(fd, iov, iovcnt);                                         \
        count_data(c, FN_##fn, klass, t0, rc, fd, AT_POSITION);                                    \
        return rc;                                                                                 \
    }
POSIX_RWV(PC_READ, readv)
POSIX_RWV(PC_WRITE, writev)

#define POSIX_LSEEK(fn, off_type)                                                                  \
    POSIX_CLASS_IS(fn, PC_META);                                                                   \
    CEIL_IP_REAL_DECL(off_type, fn, (int, off_type, int));                                         \
    CEIL_IP_EXPORT off_type fn(int fd, off_type off, int whence)                                   \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(fd, off, whence);                                                 \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const off_type rc = CEIL_REAL(fn)(fd, off, whence);                                        \
        count_meta_fd(c, FN_##fn, t0, rc, ceil_ip_file_id(fd), rc);                               \
        track_seek(c, fd, off, whence, rc);                                                        \
        return rc;                                                                                 \
    }
POSIX_LSEEK(lseek, off_t)
POSIX_LSEEK(lseek64, off64_t)

/* A call that is counted in its class and nothing else; every one of them
 * returns -1 on failure. params name the arguments, args pass them on. */
#define POSIX_PLAIN(klass, fn, params, args)                                                       \
    POSIX_CLASS_IS(fn, klass);                                                                     \
    CEIL_IP_REAL_DECL(int, fn, params);                                                            \
    CEIL_IP_EXPORT int fn params                                                                   \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn) args;                                                             \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn) args;                                                         \
        const int saved = errno;                                                                   \
        count_call(c, FN_##fn, klass, t0, rc == -1);                                               \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }

#define POSIX_SYNC(fn)                                                                             \
    POSIX_CLASS_IS(fn, PC_SYNC);                                                                   \
    CEIL_IP_REAL_DECL(int, fn, (int));                                                             \
    CEIL_IP_EXPORT int fn(int fd)                                                                  \
    {                                                                                              \
        posix_counters *c = ceil_ip_block(&posix_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(fd);                                                              \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(fd);                                                          \
        const int saved = errno;                                                                   \
        const uint64_t ticks = count_call_(c, FN_##fn, PC_SYNC, t0, rc == -1);                     \
        /* its event names the file (the OTF2 archive's flush of its handle) */                   \
        ceil_ip_event_io(&posix_module, (enum ceil_ip_call)fn_call[FN_##fn], t0, t0 + ticks, rc, 0, \
                         ceil_ip_file_id(fd), -1);                                                 \
        if (rc == 0)                                                                               \
            ceil_ip_file_sync(fd, ticks);                                                          \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }
POSIX_SYNC(fsync)
POSIX_SYNC(fdatasync)
POSIX_PLAIN(PC_META, unlink, (const char *path), (path))
POSIX_PLAIN(PC_META, unlinkat, (int dirfd, const char *path, int flags), (dirfd, path, flags))
POSIX_PLAIN(PC_META, mkdir, (const char *path, mode_t mode), (path, mode))
POSIX_PLAIN(PC_META, rmdir, (const char *path), (path))
POSIX_PLAIN(PC_META, rename, (const char *from, const char *to), (from, to))
POSIX_PLAIN(PC_META, access, (const char *path, int mode), (path, mode))

#if __GLIBC_PREREQ(2, 33)
POSIX_PLAIN(PC_META, stat, (const char *path, struct stat *st), (path, st))
POSIX_PLAIN(PC_META, stat64, (const char *path, struct stat64 *st), (path, st))
POSIX_PLAIN(PC_META, lstat, (const char *path, struct stat *st), (path, st))
POSIX_PLAIN(PC_META, lstat64, (const char *path, struct stat64 *st), (path, st))
POSIX_PLAIN(PC_META, fstat, (int fd, struct stat *st), (fd, st))
POSIX_PLAIN(PC_META, fstat64, (int fd, struct stat64 *st), (fd, st))
POSIX_PLAIN(PC_META, fstatat, (int dirfd, const char *path, struct stat *st, int flags),
            (dirfd, path, st, flags))
POSIX_PLAIN(PC_META, fstatat64, (int dirfd, const char *path, struct stat64 *st, int flags),
            (dirfd, path, st, flags))
#endif

/* Declared by glibc's headers only before 2.33. */
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstat(int, int, struct stat *);
int __fxstat64(int, int, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);
POSIX_PLAIN(PC_META, __xstat, (int ver, const char *path, struct stat *st), (ver, path, st))
POSIX_PLAIN(PC_META, __xstat64, (int ver, const char *path, struct stat64 *st), (ver, path, st))
POSIX_PLAIN(PC_META, __lxstat, (int ver, const char *path, struct stat *st), (ver, path, st))
POSIX_PLAIN(PC_META, __lxstat64, (int ver, const char *path, struct stat64 *st), (ver, path, st))
POSIX_PLAIN(PC_META, __fxstat, (int ver, int fd, struct stat *st), (ver, fd, st))
POSIX_PLAIN(PC_META, __fxstat64, (int ver, int fd, struct stat64 *st), (ver, fd, st))
POSIX_PLAIN(PC_META, __fxstatat,
            (int ver, int dirfd, const char *path, struct stat *st, int flags),
            (ver, dirfd, path, st, flags))
POSIX_PLAIN(PC_META, __fxstatat64,
            (int ver, int dirfd, const char *path, struct stat64 *st, int flags),
            (ver, dirfd, path, st, flags))

/* ---- the module ------------------------------------------------------------- */

/* Resolve now, so that no dlsym runs inside the program's first calls;
 * errno is the program's even at load. */
static int posix_init(ceil_ip_module *self)
{
    (void)self;
    const int saved = errno;
#define POSIX_RESOLVE(fn, ...) (void)CEIL_REAL(fn);
    POSIX_BASE_FNS(POSIX_RESOLVE)
    POSIX_STAT_FNS(POSIX_RESOLVE)
    POSIX_DUP_FNS(POSIX_RESOLVE)
    (void)CEIL_REAL(mmap);
    (void)CEIL_REAL(mmap64);
#undef POSIX_RESOLVE
    errno = saved;
    return 0;
}

/* May run in a signal handler: the sum is on the stack, no allocation. */
static void posix_report(ceil_ip_module *self, ceil_ip_out *out)
{
    posix_totals sum = {0};
    uint64_t *s = (uint64_t *)&sum;
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const posix_counters *c = ceil_ip_block_of(self, t);
        if (!c)
            continue;
        const uint64_t *v = (const uint64_t *)&c->t;
        for (size_t i = 0; i < sizeof sum / sizeof *s; i++)
            s[i] += ceil_ip_read(&v[i]);
    }
    const double tick_ns = ceil_ip_ns_per_tick();
    for (int k = 0; k < PC_COUNT; k++) {
        const posix_class_counters *q = &sum.cls[k];
        ceil_ip_line(out, self);
        CEIL_IP_PUT_STR(out, class, class_names[k]);
        CEIL_IP_PUT_U64(out, calls, q->calls);
        CEIL_IP_PUT_U64(out, errors, q->errors);
        if (k != PC_META && k != PC_SYNC)
            CEIL_IP_PUT_U64(out, bytes, q->bytes);
        CEIL_IP_PUT_U64(out, ns, ceil_ip_ticks_ns(q->ticks, tick_ns));
        if (k == PC_READ || k == PC_WRITE)
            CEIL_IP_PUT_U64(out, random, q->random);
    }
    for (int k = PC_READ; k <= PC_WRITE; k++) {
        ceil_ip_line(out, self);
        CEIL_IP_PUT_STR(out, hist, class_names[k]);
        for (int b = 0; b < CEIL_IP_HIST_BUCKETS; b++)
            ceil_ip_put_u64(out, ceil_ip_bucket_names[b], sum.hist[k][b]);
    }
    ceil_ip_put_fn_calls(out, self, fn_names, sum.fn_calls, FN_COUNT);
}

static ceil_ip_module posix_module = {
    .name = "posix",
    .version = 1,
    .block_bytes = sizeof(posix_counters),
    .init = posix_init,
    .report = posix_report,
};
CEIL_IP_MODULE(posix_module);
