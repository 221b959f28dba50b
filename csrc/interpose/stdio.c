/* stdio.c - the stdio module: counts the program's calls of the C stream
 * API (fopen, fread, fwrite, fprintf, fflush, fseek, ...) per call class,
 * like Darshan's darshan-stdio.c; the per-file records are the file
 * module's (files.c): the read and write calls count there under the
 * stream's descriptor (fileno), an fopen counts an open, an fclose unmaps
 * the descriptor. The hot path is a few adds into the thread's blocks.
 *
 * Its record lines (interpose.h has the format around them), in this order:
 *
 *     module name=stdio version=1 enabled=1
 *     stdio class=read calls=12 errors=0 bytes=40960 ns=81234
 *     stdio class=write calls=3 errors=0 bytes=3072 ns=20111
 *     stdio class=meta calls=4 errors=1 ns=150002
 *     stdio class=flush calls=1 errors=0 ns=900123
 *     stdio fn=fopen calls=2
 *     stdio fn=fwrite calls=3
 *     ...
 *
 * class: read (fread, fgets, fgetc, getc and the fortified __fread_chk,
 * __fgets_chk), write (fwrite, fputs, puts, fputc, putc, fprintf, printf,
 * vfprintf, vprintf and their __*_chk forms), meta (fopen, fopen64, fdopen,
 * freopen, freopen64, fclose, fseek, fseeko, fseeko64, ftell, ftello,
 * ftello64, rewind), flush (fflush); the GNU _unlocked forms of fread,
 * fwrite, fgets, fputs, fflush, fgetc, getc, fputc and putc in the class
 * of their locked form, counted alike. calls: all threads' calls, failed
 * ones included. errors: the calls that failed: fopen/fdopen/freopen
 * returning NULL; fclose, fflush, fputs, puts, fputc, putc returning EOF;
 * fseek* and ftell* returning -1; the printf forms returning a negative
 * number; fwrite transferring fewer items than asked; fread, fgets, fgetc
 * and getc stopping short with the stream's error indicator set (a short
 * read at end of file is not an error); rewind never. bytes: what the calls
 * moved between the program and the stream's buffer: fread/fwrite items
 * actually transferred times the item size, the length of the line fgets
 * returned, the string fputs wrote (puts: and its newline), what a printf
 * form returned, 1 per successful fgetc/getc/fputc/putc. ns: time inside
 * the real functions, summed in ceil_ip_ticks (interpose.h) and converted
 * at report, in CLOCK_MONOTONIC nanoseconds; fgetc, getc, fputc and putc are
 * counted (calls, errors, bytes) but not timed: the two clock reads would
 * cost more than the call, so ns leaves them out.
 * fn: one line per wrapped function called at least once, with its calls
 * (the symbol the program called: fopen64, __fprintf_chk, ...); these sum
 * to the classes' calls.
 *
 * Not seen: fscanf and the other scanf forms, fgetpos and fsetpos,
 * getchar and putchar, and getc_unlocked and putc_unlocked where glibc's
 * headers inline them (when optimizing), and stdio calls glibc makes from inside itself (fprintf
 * calling vfprintf, fclose flushing, the flush of every stream at exit):
 * glibc calls its own internal aliases, not the exported symbols. A stream
 * call is counted once, under the symbol the program called.
 *
 * stdio and posix do not count each other: glibc's stdio reaches the
 * kernel through its internal read/write/open/lseek/close (never through
 * the PLT), so the posix module does not see the system calls a buffered
 * stream makes, and posix lines count only what the program itself calls.
 * Between the two the bytes therefore differ in kind: stdio's are what the
 * program handed to or took from a stream's buffer, whenever that buffer
 * reached the file.
 *
 * No recursion and no deadlock: a wrapper holds no lock, allocates nothing
 * and calls only the real function and, on a short transfer, ferror on the
 * same stream (the stream's lock is recursive); the runtime never uses
 * stdio (its record goes out with the real write(2), its notes with the raw
 * system call). A stream the program built with fopencookie may call stdio
 * from its callbacks; those calls are the program's and counted as such.
 */
/* The definitions below replace glibc's functions; with fortified headers
 * some of them (fread, fgets, fprintf) would be inline wrappers of their own. */
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include "files.h"
#include "interpose.h"

/* Optimizing builds get these as macros from glibc's headers; here they are functions. */
#undef fread_unlocked
#undef fwrite_unlocked
#undef fgetc_unlocked
#undef getc_unlocked
#undef fputc_unlocked
#undef putc_unlocked

/* Every wrapped function, for the per-function counts: those that call
 * their own real function, resolved at load, */
#define STDIO_REAL_FNS(X)                                                                          \
    X(fopen) X(fopen64) X(fdopen) X(freopen) X(freopen64) X(fclose)                                \
    X(fseek) X(fseeko) X(fseeko64) X(ftell) X(ftello) X(ftello64) X(rewind)                        \
    X(fread) X(__fread_chk) X(fgets) X(__fgets_chk) X(fgetc) X(getc)                               \
    X(fwrite) X(fputs) X(puts) X(fputc) X(putc)                                                    \
    X(vfprintf) X(__vfprintf_chk) X(vprintf) X(__vprintf_chk)                                      \
    X(fflush)                                                                                      \
    X(fread_unlocked) X(fwrite_unlocked) X(fgets_unlocked) X(fputs_unlocked) X(fflush_unlocked)    \
    X(fgetc_unlocked) X(getc_unlocked) X(fputc_unlocked) X(putc_unlocked)

/* and the variadic printf forms, which call the real v-form. */
#define STDIO_VARIADIC_FNS(X) X(fprintf) X(__fprintf_chk) X(printf) X(__printf_chk)

#define STDIO_FNS(X) STDIO_REAL_FNS(X) STDIO_VARIADIC_FNS(X)

#define STDIO_FN_ENUM(fn) FN_##fn,
#define STDIO_FN_NAME(fn) #fn,
enum stdio_fn { STDIO_FNS(STDIO_FN_ENUM) FN_COUNT };
static const char *const fn_names[FN_COUNT] = {STDIO_FNS(STDIO_FN_NAME)};

enum stdio_class { SC_READ, SC_WRITE, SC_META, SC_FLUSH, SC_COUNT };
static const char *const class_names[SC_COUNT] = {"read", "write", "meta", "flush"};

typedef struct stdio_class_counters {
    uint64_t calls, errors, bytes, ticks;   /* ticks: of ceil_ip_ticks, ns at report */
} stdio_class_counters;

/* One thread's block: nothing but uint64_t, so report sums it as an array. */
typedef struct stdio_counters {
    stdio_class_counters cls[SC_COUNT];
    uint64_t fn_calls[FN_COUNT];
} stdio_counters;

_Static_assert(sizeof(stdio_counters) <= CEIL_IP_MAX_BLOCK, "stdio block too large");
_Static_assert(sizeof(stdio_counters) % sizeof(uint64_t) == 0, "stdio_counters is not all uint64_t");

static ceil_ip_module stdio_module;

/* The fortified forms: declared by glibc's headers only under
 * _FORTIFY_SOURCE, which is off here. */
size_t __fread_chk(void *, size_t, size_t, size_t, FILE *);
char *__fgets_chk(char *, size_t, int, FILE *);
int __fprintf_chk(FILE *, int, const char *, ...);
int __vfprintf_chk(FILE *, int, const char *, va_list);
int __printf_chk(int, const char *, ...);
int __vprintf_chk(int, const char *, va_list);

/* ---- counting (inlined into every wrapper) ---------------------------------- */

/* f: the stream a read or write went to (its file's record counts it), or NULL. */
static inline void count_call(stdio_counters *c, enum stdio_fn fn, enum stdio_class k, uint64_t ticks,
                              int failed, uint64_t bytes, FILE *f)
{
    stdio_class_counters *q = &c->cls[k];
    ceil_ip_add(&q->calls, 1);
    ceil_ip_add(&q->errors, (uint64_t)failed);
    ceil_ip_add(&q->bytes, bytes);
    ceil_ip_add(&q->ticks, ticks);
    ceil_ip_add(&c->fn_calls[fn], 1);
    if (f && (k == SC_READ || k == SC_WRITE) && !failed)
        ceil_ip_file_io(fileno_unlocked(f), k == SC_WRITE, bytes, ticks, 0, CEIL_IP_OFFSET_UNKNOWN,
                        CEIL_IP_API_STDIO);
}

/* A stream opened on fd, in ticks: its file's record counts an open. */
static inline FILE *stdio_opened(FILE *f, uint64_t ticks)
{
    if (f)
        ceil_ip_file_opened(fileno_unlocked(f), NULL, CEIL_IP_API_STDIO, ticks);
    return f;
}

/* ---- wrappers ------------------------------------------------------------------
 * Each asks for its block before the real call, so that a process that is
 * not counting pays no clock reads, only the block test. FAILED and BYTES
 * are expressions of rc (the real call's result) and the arguments,
 * evaluated after errno is saved: what they call (ferror, strlen) cannot
 * change the errno the program sees. */
#define STDIO_WRAP(klass, ret_t, fn, params, args, FAILED, BYTES, STREAM)                          \
    CEIL_IP_REAL_DECL(ret_t, fn, params);                                                          \
    CEIL_IP_EXPORT ret_t fn params                                                                 \
    {                                                                                              \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn) args;                                                             \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        ret_t rc = CEIL_REAL(fn) args;                                                             \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        const int saved = errno;                                                                   \
        const int failed = (FAILED);                                                               \
        count_call(c, FN_##fn, klass, ticks, failed, (BYTES), (STREAM));                           \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }

/* meta */
STDIO_WRAP(SC_META, FILE *, fopen, (const char *path, const char *mode), (path, mode), rc == NULL, 0,
           stdio_opened(rc, ticks))
STDIO_WRAP(SC_META, FILE *, fopen64, (const char *path, const char *mode), (path, mode), rc == NULL, 0,
           stdio_opened(rc, ticks))
STDIO_WRAP(SC_META, FILE *, fdopen, (int fd, const char *mode), (fd, mode), rc == NULL, 0, stdio_opened(rc, ticks))
STDIO_WRAP(SC_META, FILE *, freopen, (const char *path, const char *mode, FILE *f), (path, mode, f),
           rc == NULL, 0, stdio_opened(rc, ticks))
STDIO_WRAP(SC_META, FILE *, freopen64, (const char *path, const char *mode, FILE *f), (path, mode, f),
           rc == NULL, 0, stdio_opened(rc, ticks))
STDIO_WRAP(SC_META, int, fseek, (FILE *f, long off, int whence), (f, off, whence), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, int, fseeko, (FILE *f, off_t off, int whence), (f, off, whence), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, int, fseeko64, (FILE *f, off64_t off, int whence), (f, off, whence), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, long, ftell, (FILE *f), (f), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, off_t, ftello, (FILE *f), (f), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, off64_t, ftello64, (FILE *f), (f), rc == -1, 0, NULL)

/* fclose: the stream's descriptor is closed inside glibc, unseen by the
 * posix module, so it is unmapped here (asked before the stream is gone). */
CEIL_IP_REAL_DECL(int, fclose, (FILE *));
CEIL_IP_EXPORT int fclose(FILE *f)
{
    const int saved0 = errno;              /* fileno sets EBADF on a stream without a descriptor */
    const int fd = fileno_unlocked(f);
    errno = saved0;
    stdio_counters *c = ceil_ip_block(&stdio_module);
    if (!c) {
        const int r = CEIL_REAL(fclose)(f);
        ceil_ip_file_closed(fd, 0);
        return r;
    }
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = CEIL_REAL(fclose)(f);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const int saved = errno;
    count_call(c, FN_fclose, SC_META, ticks, rc == EOF, 0, NULL);
    ceil_ip_file_closed(fd, ticks);
    errno = saved;
    return rc;
}

CEIL_IP_REAL_DECL(void, rewind, (FILE *));
CEIL_IP_EXPORT void rewind(FILE *f)
{
    stdio_counters *c = ceil_ip_block(&stdio_module);
    if (!c) {
        CEIL_REAL(rewind)(f);
        return;
    }
    const uint64_t t0 = ceil_ip_ticks();
    CEIL_REAL(rewind)(f);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    count_call(c, FN_rewind, SC_META, ticks, 0, 0, NULL);   /* adds only: errno untouched */
}

/* read: a short transfer is an error only when the stream says so. */
STDIO_WRAP(SC_READ, size_t, fread, (void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n && ferror(f) != 0, (uint64_t)rc * size, f)
STDIO_WRAP(SC_READ, size_t, __fread_chk, (void *p, size_t plen, size_t size, size_t n, FILE *f),
           (p, plen, size, n, f), rc < n && ferror(f) != 0, (uint64_t)rc * size, f)
STDIO_WRAP(SC_READ, char *, fgets, (char *s, int n, FILE *f), (s, n, f), rc == NULL && ferror(f) != 0,
           rc ? strlen(rc) : 0, f)
STDIO_WRAP(SC_READ, char *, __fgets_chk, (char *s, size_t slen, int n, FILE *f), (s, slen, n, f),
           rc == NULL && ferror(f) != 0, rc ? strlen(rc) : 0, f)

/* write */
STDIO_WRAP(SC_WRITE, size_t, fwrite, (const void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n, (uint64_t)rc * size, f)
STDIO_WRAP(SC_WRITE, int, fputs, (const char *s, FILE *f), (s, f), rc == EOF, failed ? 0 : strlen(s), f)
STDIO_WRAP(SC_WRITE, int, puts, (const char *s), (s), rc == EOF, failed ? 0 : strlen(s) + 1, stdout)
STDIO_WRAP(SC_WRITE, int, vfprintf, (FILE *f, const char *fmt, va_list ap), (f, fmt, ap), rc < 0,
           failed ? 0 : (uint64_t)rc, f)
STDIO_WRAP(SC_WRITE, int, __vfprintf_chk, (FILE *f, int flag, const char *fmt, va_list ap),
           (f, flag, fmt, ap), rc < 0, failed ? 0 : (uint64_t)rc, f)
STDIO_WRAP(SC_WRITE, int, vprintf, (const char *fmt, va_list ap), (fmt, ap), rc < 0,
           failed ? 0 : (uint64_t)rc, stdout)
STDIO_WRAP(SC_WRITE, int, __vprintf_chk, (int flag, const char *fmt, va_list ap), (flag, fmt, ap),
           rc < 0, failed ? 0 : (uint64_t)rc, stdout)

/* flush */
STDIO_WRAP(SC_FLUSH, int, fflush, (FILE *f), (f), rc == EOF, 0, NULL)

/* The _unlocked forms (GNU): the same calls without the stream's lock, for
 * programs that hold it themselves (flockfile) or have one thread; the
 * error test asks without the lock too. */
STDIO_WRAP(SC_READ, size_t, fread_unlocked, (void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n && ferror_unlocked(f) != 0, (uint64_t)rc * size, f)
STDIO_WRAP(SC_WRITE, size_t, fwrite_unlocked, (const void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n, (uint64_t)rc * size, f)
STDIO_WRAP(SC_READ, char *, fgets_unlocked, (char *s, int n, FILE *f), (s, n, f),
           rc == NULL && ferror_unlocked(f) != 0, rc ? strlen(rc) : 0, f)
STDIO_WRAP(SC_WRITE, int, fputs_unlocked, (const char *s, FILE *f), (s, f), rc == EOF, failed ? 0 : strlen(s),
           f)
STDIO_WRAP(SC_FLUSH, int, fflush_unlocked, (FILE *f), (f), rc == EOF, 0, NULL)

/* The variadic printf forms: the real v-form does the work, counted under
 * the name the program called. */
#define STDIO_PRINTF(fn, vfn, params, vargs, last, stream)                                         \
    CEIL_IP_EXPORT int fn params                                                                   \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, last);                                                                        \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (!c) {                                                                                  \
            const int r = CEIL_REAL(vfn) vargs;                                                    \
            va_end(ap);                                                                            \
            return r;                                                                              \
        }                                                                                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(vfn) vargs;                                                       \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        va_end(ap);                                                                                \
        const int saved = errno;                                                                   \
        count_call(c, FN_##fn, SC_WRITE, ticks, rc < 0, rc < 0 ? 0 : (uint64_t)rc, stream);        \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }
STDIO_PRINTF(fprintf, vfprintf, (FILE *f, const char *fmt, ...), (f, fmt, ap), fmt, f)
STDIO_PRINTF(__fprintf_chk, __vfprintf_chk, (FILE *f, int flag, const char *fmt, ...), (f, flag, fmt, ap),
             fmt, f)
STDIO_PRINTF(printf, vprintf, (const char *fmt, ...), (fmt, ap), fmt, stdout)
STDIO_PRINTF(__printf_chk, __vprintf_chk, (int flag, const char *fmt, ...), (flag, fmt, ap), fmt, stdout)

/* One character at a time: counted, not timed (see the top). EOF from a
 * read is an error only when the stream says so. */
#define STDIO_CHAR(klass, fn, params, args, FAILED)                                                \
    CEIL_IP_REAL_DECL(int, fn, params);                                                            \
    CEIL_IP_EXPORT int fn params                                                                   \
    {                                                                                              \
        const int rc = CEIL_REAL(fn) args;                                                         \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (c) {                                                                                   \
            const int saved = errno;                                                               \
            const int failed = rc == EOF && (FAILED);                                              \
            count_call(c, FN_##fn, klass, 0, failed, rc != EOF, f);                                \
            errno = saved;                                                                         \
        }                                                                                          \
        return rc;                                                                                 \
    }
STDIO_CHAR(SC_READ, fgetc, (FILE *f), (f), ferror(f) != 0)
STDIO_CHAR(SC_READ, getc, (FILE *f), (f), ferror(f) != 0)
STDIO_CHAR(SC_WRITE, fputc, (int ch, FILE *f), (ch, f), 1)
STDIO_CHAR(SC_WRITE, putc, (int ch, FILE *f), (ch, f), 1)
STDIO_CHAR(SC_READ, fgetc_unlocked, (FILE *f), (f), ferror_unlocked(f) != 0)
STDIO_CHAR(SC_READ, getc_unlocked, (FILE *f), (f), ferror_unlocked(f) != 0)
STDIO_CHAR(SC_WRITE, fputc_unlocked, (int ch, FILE *f), (ch, f), 1)
STDIO_CHAR(SC_WRITE, putc_unlocked, (int ch, FILE *f), (ch, f), 1)

/* ---- the module ------------------------------------------------------------- */

/* Resolve now, so that no dlsym runs inside the program's first calls.
 * errno is the program's even at load. */
static int stdio_init(ceil_ip_module *self)
{
    (void)self;
    const int saved = errno;
#define STDIO_RESOLVE(fn) (void)CEIL_REAL(fn);
    STDIO_REAL_FNS(STDIO_RESOLVE)
#undef STDIO_RESOLVE
    errno = saved;
    return 0;
}

/* May run in a signal handler: the sum is on the stack, no allocation. */
static void stdio_report(ceil_ip_module *self, ceil_ip_out *out)
{
    stdio_counters sum = {0};
    uint64_t *s = (uint64_t *)&sum;
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const uint64_t *v = ceil_ip_block_of(self, t);
        if (!v)
            continue;
        for (size_t i = 0; i < sizeof sum / sizeof *s; i++)
            s[i] += ceil_ip_read(&v[i]);
    }
    const double tick_ns = ceil_ip_ns_per_tick();
    for (int k = 0; k < SC_COUNT; k++) {
        const stdio_class_counters *q = &sum.cls[k];
        ceil_ip_line(out, self);
        ceil_ip_put_str(out, "class", class_names[k]);
        ceil_ip_put_u64(out, "calls", q->calls);
        ceil_ip_put_u64(out, "errors", q->errors);
        if (k == SC_READ || k == SC_WRITE)
            ceil_ip_put_u64(out, "bytes", q->bytes);
        ceil_ip_put_u64(out, "ns", ceil_ip_ticks_ns(q->ticks, tick_ns));
    }
    ceil_ip_put_fn_calls(out, self, fn_names, sum.fn_calls, FN_COUNT);
}

static ceil_ip_module stdio_module = {
    .name = "stdio",
    .version = 1,
    .block_bytes = sizeof(stdio_counters),
    .init = stdio_init,
    .report = stdio_report,
};
CEIL_IP_MODULE(stdio_module);
