/* stdio.c - the stdio module: counts the program's calls of the C stream
 * API (fopen, fread, fwrite, fprintf, fflush, fseek, ...) per call class,
 * like Darshan's darshan-stdio.c, and estimates what those calls asked of
 * the kernel; the per-file records are the file module's (files.c): the
 * read and write calls count there under the stream's descriptor (fileno),
 * an fopen counts an open, an fclose unmaps the descriptor. The hot path is
 * a few adds into the thread's blocks and a look at the stream's buffer.
 *
 * Longer than 500 lines: one short wrapper for each of about 48 symbols
 * (the fortified and _unlocked forms, the refills __uflow/__underflow and __overflow
 * included) beside the buffer arithmetic they share: the estimate of what each
 * call sent the kernel (kernel_writes, kernel_reads_of, kernel_seek, ~150 lines)
 * reads the same stdio_before and counters the wrappers fill, inlined into each;
 * it is the seam to cut along (a stdio_kernel.h of static inlines) if it grows.
 *
 * Its record lines (interpose.h has the format around them), in this order:
 *
 *     module name=stdio version=2 enabled=1
 *     stdio class=read calls=12 errors=0 bytes=40960 ns=81234
 *     stdio class=write calls=3 errors=0 bytes=3072 ns=20111
 *     stdio class=meta calls=4 errors=1 ns=150002
 *     stdio class=flush calls=1 errors=0 ns=900123
 *     stdio class=other_read calls=0 errors=0 bytes=0 ns=0
 *     stdio class=other_write calls=100000 errors=0 bytes=988890 ns=7444576
 *     stdio class=other_flush calls=20002 errors=0 ns=35362781
 *     stdio class=kernel_read requests=11 bytes=40960
 *     stdio class=kernel_write requests=1 bytes=3072
 *     stdio class=pending requests=0 bytes=0
 *     stdio fn=fopen calls=2
 *     stdio fn=fwrite calls=3
 *     ...
 *
 * Library calls. class: read (fread, fgets, fgetc, getc and the fortified
 * __fread_chk, __fgets_chk), write (fwrite, fputs, puts, fputc, putc,
 * fprintf, printf, vfprintf, vprintf and their __*_chk forms), meta (fopen,
 * fopen64, fdopen, freopen, freopen64, fclose, fseek, fseeko, fseeko64,
 * ftell, ftello, ftello64, rewind), flush (fflush); the GNU _unlocked forms
 * of fread, fwrite, fgets, fputs, fflush, fgetc, getc, fputc and putc in
 * the class of their locked form, counted alike. A read, write or flush of
 * a stream that is not on a file (a pipe, a socket, a terminal, /dev/null,
 * a stream without a descriptor: what the posix module calls other) is in
 * other_read, other_write or other_flush instead: not storage I/O. What a
 * stream is, the thread asks with fstat of its descriptor at the stream's
 * first data call (a stdout the shell sent to /dev/null was never opened by
 * the program) and again after an fopen, fdopen, freopen or fclose of that
 * descriptor number; descriptors at or above STDIO_TRACKED_FDS are taken for
 * files. calls: all threads' calls, failed ones included. errors: the
 * calls that failed: fopen/fdopen/freopen returning NULL; fclose, fflush,
 * fputs, puts, fputc, putc returning EOF; fseek* and ftell* returning -1;
 * the printf forms returning a negative number; fwrite transferring fewer
 * items than asked; fread, fgets, fgetc and getc stopping short with the
 * stream's error indicator set (a short read at end of file is not an
 * error); rewind never. bytes: what the calls moved between the program and
 * the stream's buffer: fread/fwrite items actually transferred times the
 * item size, the length of the line fgets returned, the string fputs wrote
 * (puts: and its newline), what a printf form returned, 1 per successful
 * fgetc/getc/fputc/putc. ns: time inside the real functions, summed in
 * ceil_ip_ticks (interpose.h) and converted at report, in CLOCK_MONOTONIC
 * nanoseconds; fgetc, getc, fputc and putc are counted (calls, errors,
 * bytes) but not timed: the two clock reads would cost more than the call,
 * so ns leaves them out.
 *
 * Kernel requests, of streams on files only, estimated from the stream's
 * buffer (the public struct _IO_FILE, __fpending, __fbufsize) before and
 * after each call, as glibc's libio sends them: kernel_write: bytes that
 * left the buffer in a write call (pending before + bytes - pending after)
 * went in one request, or two where they were more than a buffer (the full
 * buffer, then whole buffers around it); fflush, fseek and rewind send what
 * was pending in one request, fclose likewise. kernel_read: bytes that came
 * into the buffer in a read call (bytes + read ahead after - read ahead
 * before) in one request, or two where more than a buffer (a direct read of
 * whole buffers, then one to fill it, unless the direct read took it all),
 * plus one of 0 bytes where the call
 * met the end of the file; a seek off the buffer, one request of a whole
 * buffer from the block it lands in (none on a block's start: kernel_seek
 * decides it as glibc does).
 * pending: the streams on files with bytes in their buffer when the record
 * was written (glibc's list of open streams), which glibc's exit writes
 * out, one request each, after the record; a fatal signal loses them.
 * These equal strace's count where the stream is fully buffered
 * (tests/test_stdio_interpose.py checks it); estimates, not counts, where
 * it is line-buffered, where a printf longer than the buffer fills it more
 * than once or a line longer than the buffer is read, where two threads use
 * one stream at once; fflush(NULL) and the flushes inside freopen and
 * setvbuf send nothing the estimate sees (the buffers they flush are then
 * counted by no one).
 * fn: one line per wrapped function called at least once, with its calls
 * (the symbol the program called: fopen64, __fprintf_chk, ...); these sum
 * to the library calls' classes.
 *
 * Refills: where glibc's headers inline getc_unlocked (when optimizing),
 * the character reads are no call, but each refill of the empty buffer is
 * (__uflow, __underflow): counted as a read call of the bytes it brought
 * into the buffer and one kernel request (STDIO_REFILL, below); likewise
 * the slow path of the inlined putc_unlocked, __overflow, one write call.
 *
 * Per file: each kernel request estimated above (and each stream's pending
 * buffer when the record is written, ceil_ip_stdio_pending) also goes to
 * the record of the stream's file (files.c's stdio_kernel_* and
 * stdio_pending_* fields), so that a reader has each file's requests as
 * strace counts them beside its library calls.
 *
 * Not seen: fscanf and the other scanf forms, fgetpos and fsetpos,
 * getchar and putchar, the bytes putc_unlocked stores where glibc's headers
 * inline it (only its __overflow is a call, below: the file's kernel figures
 * hold those bytes, its library bytes do not), and stdio calls glibc makes from inside itself (fprintf
 * calling vfprintf, fclose flushing, the flush of every stream at exit):
 * glibc calls its own internal aliases, not the exported symbols. A stream
 * call is counted once, under the symbol the program called.
 *
 * stdio and posix do not count each other: glibc's stdio reaches the
 * kernel through its internal read/write/open/lseek/close (never through
 * the PLT), so the posix module does not see the system calls a buffered
 * stream makes, and posix lines count only what the program itself calls.
 * The kernel_ lines are this module's account of those system calls.
 *
 * No recursion and no deadlock: a wrapper holds no lock, allocates nothing
 * and calls only the real function and, on a short transfer, ferror on the
 * same stream (the stream's lock is recursive), and reads the buffer's
 * pointers without the lock; the runtime never uses stdio (its record goes
 * out with the real write(2), its notes with the raw system call). A stream
 * the program built with fopencookie may call stdio from its callbacks;
 * those calls are the program's and counted as such.
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <stdio_ext.h>
#include <unistd.h>
#include "files.h"
#include "interpose.h"

/* Optimizing builds get these as macros from glibc's headers; here they are functions. */
#undef fread_unlocked
#undef fwrite_unlocked
#undef fgetc_unlocked
#undef getc_unlocked
#undef fputc_unlocked
#undef putc_unlocked

/* Every wrapped function, for the per-function counts (calls.def): those that
 * call their own real function, resolved at load, and the variadic printf
 * forms, which call the real v-form. */
#define STDIO_REAL_FNS(X) CEIL_IP_STDIO_REAL_FNS(X)
#define STDIO_VARIADIC_FNS(X) CEIL_IP_STDIO_VARIADIC_FNS(X)

#define STDIO_FNS(X) STDIO_REAL_FNS(X) STDIO_VARIADIC_FNS(X)

#define STDIO_FN_ENUM(fn, cls) FN_##fn,
#define STDIO_FN_NAME(fn, cls) #fn,
enum stdio_fn { STDIO_FNS(STDIO_FN_ENUM) FN_COUNT };
static const char *const fn_names[FN_COUNT] = {STDIO_FNS(STDIO_FN_NAME)};
#define STDIO_FN_CALL(fn, cls) CEIL_IP_CALL_##fn,
static const uint16_t fn_call[FN_COUNT] = {STDIO_FNS(STDIO_FN_CALL)};   /* the trace's call ids */

/* calls.def's classes */
#define STDIO_CLASS_ENUM(e, name) SC_##e,
#define STDIO_CLASS_NAME(e, name) #name,
enum stdio_class { CEIL_IP_STDIO_CLASSES(STDIO_CLASS_ENUM) SC_COUNT };

/* Each wrapper counts its call in the class calls.def gives it (one on a stream that is not a
 * file in other_* instead): checked where it is defined. */
#define STDIO_FN_CLASS(fn, cls) STDIO_CLASS_OF_##fn = SC_##cls,
enum { CEIL_IP_STDIO_REAL_FNS(STDIO_FN_CLASS) CEIL_IP_STDIO_VARIADIC_FNS(STDIO_FN_CLASS) };
#define STDIO_CLASS_IS(fn, klass)                                                                     \
    _Static_assert((int)STDIO_CLASS_OF_##fn == (int)(klass), "calls.def gives " #fn " another class")
static const char *const class_names[SC_COUNT] = {CEIL_IP_STDIO_CLASSES(STDIO_CLASS_NAME)};

/* What the streams on files asked of the kernel, estimated from the buffers (see the top). */
#define STDIO_KERNEL_ENUM(e, name) KR_##e,
enum { CEIL_IP_STDIO_KERNEL(STDIO_KERNEL_ENUM) KR_COUNT };
static const char *const kernel_names[KR_COUNT] = {CEIL_IP_STDIO_KERNEL(STDIO_CLASS_NAME)};

typedef struct stdio_class_counters {
    uint64_t calls, errors, bytes, ticks;   /* ticks: of ceil_ip_ticks, ns at report */
} stdio_class_counters;

/* What report sums: nothing but uint64_t, so it can be summed as an array. */
typedef struct stdio_totals {
    stdio_class_counters cls[SC_COUNT];
    uint64_t kernel[KR_COUNT][2];           /* [KR_*][0: requests, 1: bytes] */
    uint64_t fn_calls[FN_COUNT];
} stdio_totals;

/* Descriptors below this have their kind cached per thread (as posix.c's). */
#define STDIO_TRACKED_FDS 256

/* One thread's block; kind is the thread's own and never reported. */
typedef struct stdio_counters {
    stdio_totals t;
    uint8_t kind[STDIO_TRACKED_FDS];        /* FD_* below */
} stdio_counters;

/* What a stream's descriptor is: not known yet (fstat at the stream's first
 * data call on this thread), a file (regular, or a block device), or
 * anything else (a pipe, a socket, a terminal, /dev/null, a stream without
 * a descriptor: fmemopen, open_memstream, fopencookie). */
enum { FD_UNKNOWN = 0, FD_FILE = CEIL_IP_FD_FILE, FD_OTHER = CEIL_IP_FD_OTHER };

_Static_assert(sizeof(stdio_counters) <= CEIL_IP_MAX_BLOCK, "stdio block too large");
_Static_assert(sizeof(stdio_totals) % sizeof(uint64_t) == 0, "stdio_totals is not all uint64_t");
_Static_assert(sizeof(stdio_counters) % sizeof(uint64_t) == 0, "stdio_counters is not a whole of uint64_t");

static ceil_ip_module stdio_module;

/* The fortified forms: declared by glibc's headers only under
 * _FORTIFY_SOURCE, which is off here. */
size_t __fread_chk(void *, size_t, size_t, size_t, FILE *);
char *__fgets_chk(char *, size_t, int, FILE *);
int __fprintf_chk(FILE *, int, const char *, ...);
int __vfprintf_chk(FILE *, int, const char *, va_list);
int __printf_chk(int, const char *, ...);
int __vprintf_chk(int, const char *, va_list);

/* ---- what a stream is, and what its buffer did ------------------------------ */

/* 1 when f's descriptor is a file: fstat once per descriptor and thread,
 * through the raw system call (no wrapper counts it); a descriptor above the
 * tracked range, or one fstat refuses, is taken for a file, a stream without
 * a descriptor for something else. errno is left as it was. */
static inline int stream_is_file(stdio_counters *c, FILE *f)
{
    const int saved = errno;
    const int fd = fileno_unlocked(f);
    errno = saved;
    if (fd < 0)
        return 0;
    if (fd >= STDIO_TRACKED_FDS)
        return 1;
    if (c->kind[fd] == FD_UNKNOWN)
        c->kind[fd] = ceil_ip_fd_kind(fd);
    return c->kind[fd] == FD_FILE;
}

/* A descriptor a stream was just opened on, or that fclose closed: its kind is asked again. */
static inline void forget_kind(stdio_counters *c, int fd)
{
    if ((unsigned)fd < STDIO_TRACKED_FDS)
        c->kind[fd] = FD_UNKNOWN;
}

/* A stream's buffer before a call: the public struct _IO_FILE's pointers
 * (glibc's ABI since 2.1; what gnulib's freadahead reads too). */
#define STDIO_NO_READS 0x0004        /* glibc's libio.h _IO_NO_READS: a stream not open for reading */
#define STDIO_PUTTING 0x0800         /* glibc's libio.h _IO_CURRENTLY_PUTTING: its buffer holds writes */
#define STDIO_LINE_BUF 0x0200        /* glibc's libio.h _IO_LINE_BUF: a line-buffered stream */

typedef struct stdio_before {
    int file;                       /* the stream is on a file: estimate its kernel requests */
    int eof;                        /* its end-of-file indicator was set */
    size_t pending, size, ahead;    /* bytes waiting to be written, the buffer's size, bytes read ahead */
    size_t space;                   /* room left for writes in the buffer */
    const char *read_end, *read_base, *buf_base, *write_ptr;
    int putting;                    /* the stream was writing (glibc's _IO_CURRENTLY_PUTTING) */
    off64_t offset;                 /* glibc's idea of the descriptor's offset (_offset; -1: not known) */
} stdio_before;

static inline size_t read_ahead(const FILE *f)
{
    return f->_IO_read_end > f->_IO_read_ptr ? (size_t)(f->_IO_read_end - f->_IO_read_ptr) : 0;
}

static inline stdio_before before(stdio_counters *c, FILE *f)
{
    stdio_before b = {0};
    b.file = stream_is_file(c, f);
    if (b.file) {
        b.eof = feof_unlocked(f) != 0;
        b.pending = __fpending(f);
        b.size = __fbufsize(f);
        b.ahead = read_ahead(f);
        b.space = f->_IO_write_end > f->_IO_write_ptr ? (size_t)(f->_IO_write_end - f->_IO_write_ptr) : 0;
        b.read_end = f->_IO_read_end;
        b.read_base = f->_IO_read_base;
        b.buf_base = f->_IO_buf_base;
        b.write_ptr = f->_IO_write_ptr;
        b.putting = (f->_flags & STDIO_PUTTING) != 0;
        b.offset = f->_offset;
    }
    return b;
}

/* ... in the module's totals and in the record of the stream's file (fd). */
static inline void count_kernel_fd(stdio_counters *c, int fd, int k, uint64_t requests, uint64_t bytes)
{
    ceil_ip_add(&c->t.kernel[k][0], requests);
    ceil_ip_add(&c->t.kernel[k][1], bytes);
    ceil_ip_file_stdio_kernel(fd, k == KR_WRITE, requests, bytes);
}

static inline int fd_of(FILE *f)
{
    const int saved = errno;              /* fileno sets EBADF on a stream without a descriptor */
    const int fd = fileno_unlocked(f);
    errno = saved;
    return fd;
}

#define count_kernel(c, k, requests, bytes) count_kernel_fd((c), fd_of(f), (k), (requests), (bytes))

/* After a call that handed `bytes` to the stream: what left its buffer
 * (pending before + bytes - pending after) went to the kernel as glibc's
 * _IO_file_xsputn sends it: the buffer filled from the room it had, sent
 * where it then held anything, then whole buffers of the rest in one request
 * (a stream with no room, as after a seek or on its first write, sends only
 * that one). */
static inline void kernel_writes(stdio_counters *c, const stdio_before *b, FILE *f, uint64_t bytes)
{
    const size_t after = __fpending(f), size = __fbufsize(f);
    if (b->pending + bytes <= after)
        return;
    const uint64_t out = b->pending + bytes - after;
    const uint64_t buffered = b->pending + (bytes < b->space ? bytes : b->space);
    int n = 1;
    if (b->size > 1 && size > 1 && (f->_flags & STDIO_LINE_BUF))
        n = out > size ? 2 : 1;                 /* line-buffered: no room is kept, a line goes out whole */
    else if (b->size > 1 && size > 1)
        n = (buffered > 0) + (out > buffered);
    count_kernel(c, KR_WRITE, n > 0 ? n : 1, out);
}

/* After a call that took `bytes` from the stream: what came into its buffer
 * (bytes + read ahead after - read ahead before) came from the kernel in one
 * request, or two where it was more than a buffer (a direct read of whole
 * buffers, then one to fill it, unless the direct read took it all, a whole
 * number of buffers with nothing left ahead); a call that met the end of the
 * file made one more, of 0 bytes. */
static inline void kernel_reads_of(stdio_counters *c, const stdio_before *b, FILE *f, uint64_t bytes,
                                   uint64_t wanted)
{
    const size_t ahead = read_ahead(f), size = __fbufsize(f);
    const int eof = !b->eof && feof_unlocked(f);
    if (bytes + ahead > b->ahead) {
        const uint64_t in = bytes + ahead - b->ahead;
        int n = 1;
        if (in > size && size > 1 && (in % size != 0 || ahead > 0)) {
            /* a direct read that came back short at the end of the file was the last with data */
            const uint64_t direct = wanted > b->ahead ? (wanted - b->ahead) / size * size : 0;
            n = eof && ahead == 0 && in < direct ? 1 : 2;
        }
        count_kernel(c, KR_READ, (uint64_t)n + eof, in);
    } else if (eof) {
        count_kernel(c, KR_READ, 1, 0);
    }
}

/* A read of lines or characters: what it asked for is not known (0). */
static inline void kernel_reads(stdio_counters *c, const stdio_before *b, FILE *f, uint64_t bytes)
{
    kernel_reads_of(c, b, f, bytes, 0);
}

/* fread asks for size x n. */
#define KERNEL_FREAD(c, b, f, bytes) kernel_reads_of((c), (b), (f), (bytes), (uint64_t)size * n)

/* After a call that flushes (fflush, rewind): what left the buffer, one request. */
static inline void kernel_flush(stdio_counters *c, const stdio_before *b, FILE *f)
{
    const size_t after = __fpending(f);
    if (b->pending > after)
        count_kernel(c, KR_WRITE, 1, b->pending - after);
}

/* After a seek (rc: its result): the flush, and the read glibc's _IO_new_file_seekoff
 * makes, decided as it decides it. The new position is the stream's cached offset less
 * what is read ahead (the seek leaves _offset known). A position inside the buffer as it
 * was (from the block's start to the cached offset, which must have been known) reads
 * nothing; otherwise glibc seeks to the position's block (position & ~(buffer - 1)) and,
 * unless the position is that block's start, reads a whole buffer there: the bytes now in
 * the buffer. No sign in the buffer alone says it: a seek to the end of a short last block
 * reads that block again and leaves every pointer and the offset as they were. A read that
 * came back short of the position (a seek past the end, as ld makes writing a new file)
 * left an empty buffer: one request of what the file held from the block on (fstat, the
 * raw system call). A stream not open for reading never reads. */
static inline void kernel_seek(stdio_counters *c, const stdio_before *b, FILE *f, int rc)
{
    kernel_flush(c, b, f);
    const off64_t size = f->_IO_buf_end - f->_IO_buf_base;
    if (rc != 0 || f->_IO_buf_base == NULL || size <= 1 || (f->_flags & STDIO_NO_READS) || f->_offset < 0)
        return;
    const off64_t pos = f->_offset - (f->_IO_read_end - f->_IO_read_ptr);
    /* glibc first turns a writing stream to reading: with writes pending it sends them and
     * empties the buffer (nothing is inside it then), without, the buffer reaches as far
     * as the writes went */
    if (b->offset >= 0 && b->buf_base && b->pending == 0) {
        const char *end = b->putting && b->write_ptr > b->read_end ? b->write_ptr : b->read_end;
        const off64_t start = b->read_base < end ? b->offset - (end - b->buf_base) : b->offset;
        if (pos >= start && pos < b->offset)
            return;
    }
    const off64_t block = pos & ~(size - 1), delta = pos - block;
    if (delta == 0 || delta > size)
        return;
    uint64_t bytes = (uint64_t)(f->_IO_read_end - f->_IO_buf_base);
    struct stat st;
    if (bytes == 0 && syscall(SYS_fstat, fd_of(f), &st) == 0 && st.st_size > block)
        bytes = (uint64_t)(st.st_size - block < delta ? st.st_size - block : delta);
    count_kernel(c, KR_READ, 1, bytes);
}

/* ---- counting (inlined into every wrapper) ---------------------------------- */

/* A call in its class (k; a data call on a stream that is not a file in the
 * other_ class of its kind). file: the stream is a file, whose record counts
 * its reads and writes. */
static inline void count_call(stdio_counters *c, enum stdio_fn fn, enum stdio_class k, uint64_t ticks,
                              int failed, uint64_t bytes, FILE *f, int file)
{
    if (f && !file && (k == SC_READ || k == SC_WRITE || k == SC_FLUSH))
        k = k == SC_READ ? SC_OTHER_READ : k == SC_WRITE ? SC_OTHER_WRITE : SC_OTHER_FLUSH;
    stdio_class_counters *q = &c->t.cls[k];
    ceil_ip_add(&q->calls, 1);
    ceil_ip_add(&q->errors, (uint64_t)failed);
    ceil_ip_add(&q->bytes, bytes);
    ceil_ip_add(&q->ticks, ticks);
    ceil_ip_add(&c->t.fn_calls[fn], 1);
    if (file && (k == SC_READ || k == SC_WRITE) && !failed)
        ceil_ip_file_io(fileno_unlocked(f), k == SC_WRITE, bytes, ticks, 0, CEIL_IP_OFFSET_UNKNOWN,
                        CEIL_IP_API_STDIO);
    ceil_ip_event_dur(&stdio_module, (enum ceil_ip_call)fn_call[fn], ticks, failed ? -1 : (int64_t)bytes, bytes,
                      f && file ? ceil_ip_file_id(fileno_unlocked(f)) : 0, -1);
}

/* A stream opened on fd by path (NULL: fdopen, the record asks
 * /proc/self/fd), in ticks: its file's record, keyed by the path as opened
 * as Darshan keys it, counts an open. */
static inline FILE *stdio_opened(stdio_counters *c, FILE *f, const char *path, uint64_t ticks)
{
    if (f) {
        const int fd = fileno_unlocked(f);
        forget_kind(c, fd);
        ceil_ip_file_opened(fd, path, CEIL_IP_API_STDIO, ticks);
    }
    return f;
}

/* ---- wrappers ------------------------------------------------------------------
 * Each asks for its block before the real call, so that a process that is
 * not counting pays no clock reads, only the block test. FAILED and BYTES
 * are expressions of rc (the real call's result) and the arguments,
 * evaluated after errno is saved: what they call (ferror, strlen) cannot
 * change the errno the program sees. */
#define STDIO_WRAP(klass, ret_t, fn, params, args, FAILED, BYTES, STREAM)                          \
    STDIO_CLASS_IS(fn, klass);                                                                     \
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
        count_call(c, FN_##fn, klass, ticks, failed, (BYTES), (STREAM), 0);                        \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }

/* A read, write or flush of stream F, whose buffer is looked at before and
 * after the call (KERNEL: kernel_reads, kernel_writes or kernel_seek, with
 * the call's bytes). */
#define STDIO_DATA(klass, ret_t, fn, params, args, FAILED, BYTES, F, KERNEL)                       \
    STDIO_CLASS_IS(fn, klass);                                                                     \
    CEIL_IP_REAL_DECL(ret_t, fn, params);                                                          \
    CEIL_IP_EXPORT ret_t fn params                                                                 \
    {                                                                                              \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn) args;                                                             \
        const stdio_before b = before(c, (F));                                                     \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        ret_t rc = CEIL_REAL(fn) args;                                                             \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        const int saved = errno;                                                                   \
        const int failed = (FAILED);                                                               \
        const uint64_t bytes = (BYTES);                                                            \
        count_call(c, FN_##fn, klass, ticks, failed, bytes, (F), b.file);                          \
        if (b.file)                                                                                \
            KERNEL(c, &b, (F), bytes);                                                             \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }

#define KERNEL_SEEK(c, b, f, bytes) kernel_seek((c), (b), (f), rc)

/* meta */
STDIO_WRAP(SC_META, FILE *, fopen, (const char *path, const char *mode), (path, mode), rc == NULL, 0,
           stdio_opened(c, rc, path, ticks))
STDIO_WRAP(SC_META, FILE *, fopen64, (const char *path, const char *mode), (path, mode), rc == NULL, 0,
           stdio_opened(c, rc, path, ticks))
STDIO_WRAP(SC_META, FILE *, fdopen, (int fd, const char *mode), (fd, mode), rc == NULL, 0,
           stdio_opened(c, rc, NULL, ticks))
STDIO_WRAP(SC_META, FILE *, freopen, (const char *path, const char *mode, FILE *f), (path, mode, f),
           rc == NULL, 0, stdio_opened(c, rc, path, ticks))
STDIO_WRAP(SC_META, FILE *, freopen64, (const char *path, const char *mode, FILE *f), (path, mode, f),
           rc == NULL, 0, stdio_opened(c, rc, path, ticks))
STDIO_DATA(SC_META, int, fseek, (FILE *f, long off, int whence), (f, off, whence), rc == -1, 0, f, KERNEL_SEEK)
STDIO_DATA(SC_META, int, fseeko, (FILE *f, off_t off, int whence), (f, off, whence), rc == -1, 0, f,
           KERNEL_SEEK)
STDIO_DATA(SC_META, int, fseeko64, (FILE *f, off64_t off, int whence), (f, off, whence), rc == -1, 0, f,
           KERNEL_SEEK)
STDIO_WRAP(SC_META, long, ftell, (FILE *f), (f), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, off_t, ftello, (FILE *f), (f), rc == -1, 0, NULL)
STDIO_WRAP(SC_META, off64_t, ftello64, (FILE *f), (f), rc == -1, 0, NULL)

/* fclose: the stream's descriptor is closed inside glibc, unseen by the
 * posix module, so it is unmapped here (asked before the stream is gone);
 * what was pending in its buffer goes to the kernel in one request. */
CEIL_IP_REAL_DECL(int, fclose, (FILE *));
STDIO_CLASS_IS(fclose, SC_META);
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
    const stdio_before b = before(c, f);
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = CEIL_REAL(fclose)(f);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const int saved = errno;
    count_call(c, FN_fclose, SC_META, ticks, rc == EOF, 0, NULL, 0);
    if (b.file && b.pending)
        count_kernel_fd(c, fd, KR_WRITE, 1, b.pending);
    ceil_ip_file_closed(fd, ticks);
    forget_kind(c, fd);
    errno = saved;
    return rc;
}

CEIL_IP_REAL_DECL(void, rewind, (FILE *));
STDIO_CLASS_IS(rewind, SC_META);
CEIL_IP_EXPORT void rewind(FILE *f)
{
    stdio_counters *c = ceil_ip_block(&stdio_module);
    if (!c) {
        CEIL_REAL(rewind)(f);
        return;
    }
    const stdio_before b = before(c, f);
    const uint64_t t0 = ceil_ip_ticks();
    CEIL_REAL(rewind)(f);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    count_call(c, FN_rewind, SC_META, ticks, 0, 0, NULL, 0);   /* adds and reads only: errno untouched */
    if (b.file)
        kernel_flush(c, &b, f);
}

/* read: a short transfer is an error only when the stream says so. */
STDIO_DATA(SC_READ, size_t, fread, (void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n && ferror(f) != 0, (uint64_t)rc * size, f, KERNEL_FREAD)
STDIO_DATA(SC_READ, size_t, __fread_chk, (void *p, size_t plen, size_t size, size_t n, FILE *f),
           (p, plen, size, n, f), rc < n && ferror(f) != 0, (uint64_t)rc * size, f, KERNEL_FREAD)
STDIO_DATA(SC_READ, char *, fgets, (char *s, int n, FILE *f), (s, n, f), rc == NULL && ferror(f) != 0,
           rc ? strlen(rc) : 0, f, kernel_reads)
STDIO_DATA(SC_READ, char *, __fgets_chk, (char *s, size_t slen, int n, FILE *f), (s, slen, n, f),
           rc == NULL && ferror(f) != 0, rc ? strlen(rc) : 0, f, kernel_reads)

/* write */
STDIO_DATA(SC_WRITE, size_t, fwrite, (const void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n, (uint64_t)rc * size, f, kernel_writes)
STDIO_DATA(SC_WRITE, int, fputs, (const char *s, FILE *f), (s, f), rc == EOF, failed ? 0 : strlen(s), f,
           kernel_writes)
STDIO_DATA(SC_WRITE, int, puts, (const char *s), (s), rc == EOF, failed ? 0 : strlen(s) + 1, stdout,
           kernel_writes)
STDIO_DATA(SC_WRITE, int, vfprintf, (FILE *f, const char *fmt, va_list ap), (f, fmt, ap), rc < 0,
           failed ? 0 : (uint64_t)rc, f, kernel_writes)
STDIO_DATA(SC_WRITE, int, __vfprintf_chk, (FILE *f, int flag, const char *fmt, va_list ap),
           (f, flag, fmt, ap), rc < 0, failed ? 0 : (uint64_t)rc, f, kernel_writes)
STDIO_DATA(SC_WRITE, int, vprintf, (const char *fmt, va_list ap), (fmt, ap), rc < 0,
           failed ? 0 : (uint64_t)rc, stdout, kernel_writes)
STDIO_DATA(SC_WRITE, int, __vprintf_chk, (int flag, const char *fmt, va_list ap), (flag, fmt, ap),
           rc < 0, failed ? 0 : (uint64_t)rc, stdout, kernel_writes)

/* flush: fflush(NULL) flushes every stream and is counted as a call on no
 * stream, with no estimate of what it sent. */
#define STDIO_FLUSH(fn)                                                                            \
    STDIO_CLASS_IS(fn, SC_FLUSH);                                                                  \
    CEIL_IP_REAL_DECL(int, fn, (FILE *));                                                          \
    CEIL_IP_EXPORT int fn(FILE *f)                                                                 \
    {                                                                                              \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(f);                                                               \
        const stdio_before b = f ? before(c, f) : (stdio_before){0};                               \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(f);                                                           \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        const int saved = errno;                                                                   \
        count_call(c, FN_##fn, SC_FLUSH, ticks, rc == EOF, 0, f, b.file);                          \
        if (b.file)                                                                                \
            kernel_flush(c, &b, f);                                                                \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }
STDIO_FLUSH(fflush)

/* The _unlocked forms (GNU): the same calls without the stream's lock, for
 * programs that hold it themselves (flockfile) or have one thread; the
 * error test asks without the lock too. */
STDIO_DATA(SC_READ, size_t, fread_unlocked, (void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n && ferror_unlocked(f) != 0, (uint64_t)rc * size, f, KERNEL_FREAD)
STDIO_DATA(SC_WRITE, size_t, fwrite_unlocked, (const void *p, size_t size, size_t n, FILE *f), (p, size, n, f),
           rc < n, (uint64_t)rc * size, f, kernel_writes)
STDIO_DATA(SC_READ, char *, fgets_unlocked, (char *s, int n, FILE *f), (s, n, f),
           rc == NULL && ferror_unlocked(f) != 0, rc ? strlen(rc) : 0, f, kernel_reads)
STDIO_DATA(SC_WRITE, int, fputs_unlocked, (const char *s, FILE *f), (s, f), rc == EOF, failed ? 0 : strlen(s),
           f, kernel_writes)
STDIO_FLUSH(fflush_unlocked)

/* The variadic printf forms: the real v-form does the work, counted under
 * the name the program called. */
#define STDIO_PRINTF(fn, vfn, params, vargs, last, stream)                                         \
    STDIO_CLASS_IS(fn, SC_WRITE);                                                                  \
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
        const stdio_before b = before(c, stream);                                                  \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(vfn) vargs;                                                       \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        va_end(ap);                                                                                \
        const int saved = errno;                                                                   \
        const uint64_t bytes = rc < 0 ? 0 : (uint64_t)rc;                                          \
        count_call(c, FN_##fn, SC_WRITE, ticks, rc < 0, bytes, stream, b.file);                    \
        if (b.file)                                                                                \
            kernel_writes(c, &b, stream, bytes);                                                   \
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
#define STDIO_CHAR(klass, fn, params, args, FAILED, KERNEL)                                        \
    STDIO_CLASS_IS(fn, klass);                                                                     \
    CEIL_IP_REAL_DECL(int, fn, params);                                                            \
    CEIL_IP_EXPORT int fn params                                                                   \
    {                                                                                              \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn) args;                                                             \
        const stdio_before b = before(c, f);                                                       \
        const int rc = CEIL_REAL(fn) args;                                                         \
        const int saved = errno;                                                                   \
        const int failed = rc == EOF && (FAILED);                                                  \
        count_call(c, FN_##fn, klass, 0, failed, rc != EOF, f, b.file);                            \
        if (b.file)                                                                                \
            KERNEL(c, &b, f, rc != EOF);                                                           \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }
STDIO_CHAR(SC_READ, fgetc, (FILE *f), (f), ferror(f) != 0, kernel_reads)
STDIO_CHAR(SC_READ, getc, (FILE *f), (f), ferror(f) != 0, kernel_reads)
STDIO_CHAR(SC_WRITE, fputc, (int ch, FILE *f), (ch, f), 1, kernel_writes)
STDIO_CHAR(SC_WRITE, putc, (int ch, FILE *f), (ch, f), 1, kernel_writes)
STDIO_CHAR(SC_READ, fgetc_unlocked, (FILE *f), (f), ferror_unlocked(f) != 0, kernel_reads)
STDIO_CHAR(SC_READ, getc_unlocked, (FILE *f), (f), ferror_unlocked(f) != 0, kernel_reads)
STDIO_CHAR(SC_WRITE, fputc_unlocked, (int ch, FILE *f), (ch, f), 1, kernel_writes)
STDIO_CHAR(SC_WRITE, putc_unlocked, (int ch, FILE *f), (ch, f), 1, kernel_writes)

/* The refills of an empty buffer that glibc's inlined character reads make:
 * getc_unlocked, and getc and fgetc in some builds, are macros of its
 * headers that take the next byte from the buffer themselves and call
 * __uflow (consume it) or __underflow (look at it) only when the buffer is
 * empty (git's config reader, for one). The inlined reads are no call; each
 * refill is one read request of the stream, counted as a read call whose
 * bytes are what it brought into the buffer (which the inlined reads then
 * take), and as one kernel request; a refill at the end of the file is a
 * read of 0 bytes, as the kernel's. Timed: a refill is a system call. */
int __uflow(FILE *);
int __underflow(FILE *);
#define STDIO_REFILL(fn, TAKEN)                                                                    \
    STDIO_CLASS_IS(fn, SC_READ);                                                                   \
    CEIL_IP_REAL_DECL(int, fn, (FILE *));                                                          \
    CEIL_IP_EXPORT int fn(FILE *f)                                                                 \
    {                                                                                              \
        stdio_counters *c = ceil_ip_block(&stdio_module);                                          \
        if (!c)                                                                                    \
            return CEIL_REAL(fn)(f);                                                               \
        const stdio_before b = before(c, f);                                                       \
        const size_t ahead = read_ahead(f);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = CEIL_REAL(fn)(f);                                                           \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        const int saved = errno;                                                                   \
        const uint64_t taken = (TAKEN), now = read_ahead(f) + taken;                               \
        count_call(c, FN_##fn, SC_READ, ticks, rc == EOF && ferror_unlocked(f) != 0,               \
                   now > ahead ? now - ahead : 0, f, b.file);                                      \
        if (b.file)                                                                                \
            kernel_reads(c, &b, f, taken);                                                         \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    }
STDIO_REFILL(__uflow, rc != EOF)
STDIO_REFILL(__underflow, 0)

/* The slow path of glibc's inlined character writes: putc_unlocked (and
 * putc in some builds; cc1 -E writes its .i files so) is a macro of its
 * headers that stores the byte in the buffer itself and calls
 * __overflow(f, ch) only when the buffer is full, not made yet, or
 * line-buffered or unbuffered; __overflow sends what is pending to the
 * kernel where it must and stores ch (ch EOF: only the flush). The inlined
 * stores are no call and their bytes no library call's: __overflow counts
 * as a write call of its one character, and what left the buffer in it
 * (pending before + the character - pending after) as the kernel request
 * it made, so the file's kernel_write_bytes hold every inlined byte that
 * reached the kernel (the last buffer at exit is pending's). Timed: it may
 * be a system call. */
int __overflow(FILE *, int);
STDIO_CLASS_IS(__overflow, SC_WRITE);
CEIL_IP_REAL_DECL(int, __overflow, (FILE *, int));
CEIL_IP_EXPORT int __overflow(FILE *f, int ch)
{
    stdio_counters *c = ceil_ip_block(&stdio_module);
    if (!c)
        return CEIL_REAL(__overflow)(f, ch);
    const stdio_before b = before(c, f);
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = CEIL_REAL(__overflow)(f, ch);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const int saved = errno;
    const uint64_t stored = ch != EOF && rc != EOF;
    count_call(c, FN___overflow, SC_WRITE, ticks, rc == EOF && ch != EOF, stored, f, b.file);
    if (b.file)
        kernel_writes(c, &b, f, stored);
    errno = saved;
    return rc;
}

/* ---- the module ------------------------------------------------------------- */

/* Resolve now, so that no dlsym runs inside the program's first calls.
 * errno is the program's even at load. */
static int stdio_init(ceil_ip_module *self)
{
    (void)self;
    const int saved = errno;
#define STDIO_RESOLVE(fn, ...) (void)CEIL_REAL(fn);
    STDIO_REAL_FNS(STDIO_RESOLVE)
#undef STDIO_RESOLVE
    errno = saved;
    return 0;
}

/* The streams on files with bytes still in their buffers when the record is
 * written: glibc's exit writes each out in one request, after the record (a
 * fatal signal loses them). glibc's list of open streams (_IO_list_all, in
 * its ABI) is walked without its lock, reading pointers only; at most
 * STDIO_LIST_MAX streams. */
#define STDIO_LIST_MAX 4096
extern FILE *_IO_list_all;

int ceil_ip_stdio_pending(int *fds, uint64_t *bytes, int max)
{
    int n = 0, k = 0;
    for (FILE *f = __atomic_load_n(&_IO_list_all, __ATOMIC_ACQUIRE); f && n < STDIO_LIST_MAX && k < max;
         f = f->_chain, n++) {
        if (f->_fileno < 0 || f->_IO_write_ptr <= f->_IO_write_base)
            continue;
        fds[k] = f->_fileno;
        bytes[k++] = (uint64_t)(f->_IO_write_ptr - f->_IO_write_base);
    }
    return k;
}

static void pending_at_exit(uint64_t *requests, uint64_t *bytes)
{
    static int fds[STDIO_LIST_MAX];         /* static: the report may run in a signal handler's stack */
    static uint64_t b[STDIO_LIST_MAX];
    const int n = ceil_ip_stdio_pending(fds, b, STDIO_LIST_MAX);
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (syscall(SYS_fstat, fds[i], &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
            continue;
        *requests += 1;
        *bytes += b[i];
    }
}

/* May run in a signal handler: the sum is on the stack, no allocation. */
static void stdio_report(ceil_ip_module *self, ceil_ip_out *out)
{
    stdio_totals sum = {0};
    uint64_t *s = (uint64_t *)&sum;
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const stdio_counters *c = ceil_ip_block_of(self, t);
        if (!c)
            continue;
        const uint64_t *v = (const uint64_t *)&c->t;
        for (size_t i = 0; i < sizeof sum / sizeof *s; i++)
            s[i] += ceil_ip_read(&v[i]);
    }
    pending_at_exit(&sum.kernel[KR_PENDING][0], &sum.kernel[KR_PENDING][1]);
    const double tick_ns = ceil_ip_ns_per_tick();
    for (int k = 0; k < SC_COUNT; k++) {
        const stdio_class_counters *q = &sum.cls[k];
        ceil_ip_line(out, self);
        CEIL_IP_PUT_STR(out, class, class_names[k]);
        CEIL_IP_PUT_U64(out, calls, q->calls);
        CEIL_IP_PUT_U64(out, errors, q->errors);
        if (k != SC_META && k != SC_FLUSH && k != SC_OTHER_FLUSH)
            CEIL_IP_PUT_U64(out, bytes, q->bytes);
        CEIL_IP_PUT_U64(out, ns, ceil_ip_ticks_ns(q->ticks, tick_ns));
    }
    for (int k = 0; k < KR_COUNT; k++) {
        ceil_ip_line(out, self);
        CEIL_IP_PUT_STR(out, class, kernel_names[k]);
        CEIL_IP_PUT_U64(out, requests, sum.kernel[k][0]);
        CEIL_IP_PUT_U64(out, bytes, sum.kernel[k][1]);
    }
    ceil_ip_put_fn_calls(out, self, fn_names, sum.fn_calls, FN_COUNT);
}

static ceil_ip_module stdio_module = {
    .name = "stdio",
    .version = 2,
    .block_bytes = sizeof(stdio_counters),
    .init = stdio_init,
    .report = stdio_report,
};
CEIL_IP_MODULE(stdio_module);
