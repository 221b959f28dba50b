/* copy.c - the copy module: the calls that move data from one descriptor to
 * another inside the kernel, with no buffer of the program's between them
 * (copy_file_range, sendfile, sendfile64, splice, tee). cp moves a file's
 * bytes with copy_file_range, a web server sends files with sendfile: the
 * posix module's read and write never see those bytes.
 *
 * Its record lines (interpose.h has the format around them), in this order:
 *
 *     module name=copy version=1 enabled=1
 *     copy class=read calls=2 errors=0 bytes=40960 ns=81234
 *     copy class=write calls=0 errors=0 bytes=0 ns=0
 *     copy class=copy calls=3 errors=0 bytes=434000000 ns=20111000
 *     copy class=other calls=0 errors=0 bytes=0 ns=0
 *     copy fn=copy_file_range calls=3
 *     ...
 *
 * class, by what the two descriptors are (a file: regular or a block
 * device; asked with fstat at every call, through the raw system call, a
 * descriptor fstat refuses taken for a file): read (the source is a file,
 * the destination is not: sendfile of a file to a socket, splice of a file
 * into a pipe), write (the destination is a file, the source is not: splice
 * of a pipe into a file), copy (both are files: copy_file_range, sendfile
 * between files: a read of one and a write of the other), other (neither:
 * splice between pipes and sockets, tee, which only joins two pipes).
 * calls: all threads' calls, failed ones included; errors: the calls that
 * returned -1; bytes: what the successful calls returned; ns: time inside
 * the real function, summed in ceil_ip_ticks and converted at report, in
 * CLOCK_MONOTONIC nanoseconds. fn: one line per wrapped function called at
 * least once, with its calls (sendfile64 is glibc's other name of
 * sendfile, counted under the name the program called).
 *
 * The files' records (files.c) count a read of the source and a write of
 * the destination, each with the call's bytes and time, at the offset the
 * call names (unknown when it moves from the file position).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include "files.h"
#include "interpose.h"

#define COPY_FNS(X) CEIL_IP_COPY_FNS(X)     /* calls.def */

#define COPY_FN_ENUM(fn, cls) FN_##fn,
#define COPY_FN_NAME(fn, cls) #fn,
enum copy_fn { COPY_FNS(COPY_FN_ENUM) FN_COUNT };
static const char *const fn_names[FN_COUNT] = {COPY_FNS(COPY_FN_NAME)};
#define COPY_FN_CALL(fn, cls) CEIL_IP_CALL_##fn,
static const uint16_t fn_call[FN_COUNT] = {COPY_FNS(COPY_FN_CALL)};   /* the trace's call ids */

#define COPY_CLASS_ENUM(e, name) CC_##e,
#define COPY_CLASS_NAME(e, name) #name,
enum copy_class { CEIL_IP_COPY_CLASSES(COPY_CLASS_ENUM) CC_COUNT };
static const char *const class_names[CC_COUNT] = {CEIL_IP_COPY_CLASSES(COPY_CLASS_NAME)};

typedef struct copy_class_counters {
    uint64_t calls, errors, bytes, ticks;   /* ticks: of ceil_ip_ticks, ns at report */
} copy_class_counters;

/* One thread's block: nothing but uint64_t, so report sums it as an array. */
typedef struct copy_counters {
    copy_class_counters cls[CC_COUNT];
    uint64_t fn_calls[FN_COUNT];
} copy_counters;

_Static_assert(sizeof(copy_counters) <= CEIL_IP_MAX_BLOCK, "copy block too large");
_Static_assert(sizeof(copy_counters) % sizeof(uint64_t) == 0, "copy_counters is not all uint64_t");

static ceil_ip_module copy_module;

/* 1 when fd is a file (see the top). */
static inline int is_file(int fd)
{
    struct stat st;
    return syscall(SYS_fstat, fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
}

/* Counts a call that moved rc bytes from in (at *off_in when given, read
 * before the call) to out; errno is left as the real call set it. */
static inline void count_copy(copy_counters *c, enum copy_fn fn, uint64_t t0, ssize_t rc, int in, int64_t off_in,
                              int out, int64_t off_out)
{
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const int saved = errno;
    const int src = is_file(in), dst = is_file(out);
    copy_class_counters *q = &c->cls[src && dst ? CC_COPY : src ? CC_READ : dst ? CC_WRITE : CC_OTHER];
    ceil_ip_add(&q->calls, 1);
    ceil_ip_add(&q->errors, rc < 0);
    ceil_ip_add(&q->ticks, ticks);
    ceil_ip_add(&c->fn_calls[fn], 1);
    if (rc > 0) {
        ceil_ip_add(&q->bytes, (uint64_t)rc);
        if (src)
            ceil_ip_file_io(in, 0, (uint64_t)rc, ticks, 0, off_in, CEIL_IP_API_POSIX);
        if (dst)
            ceil_ip_file_io(out, 1, (uint64_t)rc, ticks, 0, off_out, CEIL_IP_API_POSIX);
    }
    /* the event names the file written (else the one read) and that side's offset */
    ceil_ip_event_io(&copy_module, (enum ceil_ip_call)fn_call[fn], t0, t0 + ticks, rc, rc > 0 ? (uint64_t)rc : 0,
                     dst ? ceil_ip_file_id(out) : src ? ceil_ip_file_id(in) : 0, dst ? off_out : src ? off_in : -1);
    errno = saved;
}

static inline int64_t offset_of(const void *off, int wide)
{
    if (!off)
        return CEIL_IP_OFFSET_UNKNOWN;
    return wide ? (int64_t)*(const off64_t *)off : (int64_t)*(const off_t *)off;
}

/* ---- wrappers ----------------------------------------------------------------- */

CEIL_IP_REAL_DECL(ssize_t, copy_file_range, (int, off64_t *, int, off64_t *, size_t, unsigned));
CEIL_IP_EXPORT ssize_t copy_file_range(int in, off64_t *off_in, int out, off64_t *off_out, size_t n, unsigned flags)
{
    copy_counters *c = ceil_ip_block(&copy_module);
    if (!c)
        return CEIL_REAL(copy_file_range)(in, off_in, out, off_out, n, flags);
    const int64_t oi = offset_of(off_in, 1), oo = offset_of(off_out, 1);
    const uint64_t t0 = ceil_ip_ticks();
    const ssize_t rc = CEIL_REAL(copy_file_range)(in, off_in, out, off_out, n, flags);
    count_copy(c, FN_copy_file_range, t0, rc, in, oi, out, oo);
    return rc;
}

/* sendfile(out, in, offset, count): the destination first. */
#define COPY_SENDFILE(fn, off_type)                                                                \
    CEIL_IP_REAL_DECL(ssize_t, fn, (int, int, off_type *, size_t));                                \
    CEIL_IP_EXPORT ssize_t fn(int out, int in, off_type *off, size_t n)                            \
    {                                                                                              \
        copy_counters *c = ceil_ip_block(&copy_module);                                            \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(out, in, off, n);                                                 \
        const int64_t oi = off ? (int64_t)*off : CEIL_IP_OFFSET_UNKNOWN;                           \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const ssize_t rc = CEIL_REAL(fn)(out, in, off, n);                                         \
        count_copy(c, FN_##fn, t0, rc, in, oi, out, CEIL_IP_OFFSET_UNKNOWN);                       \
        return rc;                                                                                 \
    }
COPY_SENDFILE(sendfile, off_t)
COPY_SENDFILE(sendfile64, off64_t)

CEIL_IP_REAL_DECL(ssize_t, splice, (int, loff_t *, int, loff_t *, size_t, unsigned));
CEIL_IP_EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t n, unsigned flags)
{
    copy_counters *c = ceil_ip_block(&copy_module);
    if (!c)
        return CEIL_REAL(splice)(in, off_in, out, off_out, n, flags);
    const int64_t oi = offset_of(off_in, 1), oo = offset_of(off_out, 1);
    const uint64_t t0 = ceil_ip_ticks();
    const ssize_t rc = CEIL_REAL(splice)(in, off_in, out, off_out, n, flags);
    count_copy(c, FN_splice, t0, rc, in, oi, out, oo);
    return rc;
}

CEIL_IP_REAL_DECL(ssize_t, tee, (int, int, size_t, unsigned));
CEIL_IP_EXPORT ssize_t tee(int in, int out, size_t n, unsigned flags)
{
    copy_counters *c = ceil_ip_block(&copy_module);
    if (!c)
        return CEIL_REAL(tee)(in, out, n, flags);
    const uint64_t t0 = ceil_ip_ticks();
    const ssize_t rc = CEIL_REAL(tee)(in, out, n, flags);
    count_copy(c, FN_tee, t0, rc, in, CEIL_IP_OFFSET_UNKNOWN, out, CEIL_IP_OFFSET_UNKNOWN);
    return rc;
}

/* ---- the module ------------------------------------------------------------- */

/* Resolve now, so that no dlsym runs inside the program's first calls;
 * errno is the program's even at load. */
static int copy_init(ceil_ip_module *self)
{
    (void)self;
    const int saved = errno;
#define COPY_RESOLVE(fn, ...) (void)CEIL_REAL(fn);
    COPY_FNS(COPY_RESOLVE)
#undef COPY_RESOLVE
    errno = saved;
    return 0;
}

/* May run in a signal handler: the sum is on the stack, no allocation. */
static void copy_report(ceil_ip_module *self, ceil_ip_out *out)
{
    copy_counters sum = {0};
    uint64_t *s = (uint64_t *)&sum;
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const uint64_t *v = ceil_ip_block_of(self, t);
        if (!v)
            continue;
        for (size_t i = 0; i < sizeof sum / sizeof *s; i++)
            s[i] += ceil_ip_read(&v[i]);
    }
    const double tick_ns = ceil_ip_ns_per_tick();
    for (int k = 0; k < CC_COUNT; k++) {
        const copy_class_counters *q = &sum.cls[k];
        ceil_ip_line(out, self);
        CEIL_IP_PUT_STR(out, class, class_names[k]);
        CEIL_IP_PUT_U64(out, calls, q->calls);
        CEIL_IP_PUT_U64(out, errors, q->errors);
        CEIL_IP_PUT_U64(out, bytes, q->bytes);
        CEIL_IP_PUT_U64(out, ns, ceil_ip_ticks_ns(q->ticks, tick_ns));
    }
    ceil_ip_put_fn_calls(out, self, fn_names, sum.fn_calls, FN_COUNT);
}

static ceil_ip_module copy_module = {
    .name = "copy",
    .version = 1,
    .block_bytes = sizeof(copy_counters),
    .init = copy_init,
    .report = copy_report,
};
CEIL_IP_MODULE(copy_module);
