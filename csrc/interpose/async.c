/* async.c - I/O that no wrapper counts, said to be there (files.h,
 * ceil_ip_file_async): io_uring and Linux AIO submit and complete I/O by
 * raw system calls (io_uring_enter, io_submit, or none at all with a
 * polling ring), so their reads and writes are in no count. What is seen:
 * liburing's and libaio's set-up calls (wrapped here), an mmap of an
 * io_uring descriptor (posix.c, files.c), and, when the record is
 * written, an io_uring ring or an "[aio]" ring in /proc/self/maps. The
 * file module's head line says it (io_uring=, aio=); analysis/profile_files.py
 * makes the finding.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "files.h"
#include "interpose.h"

static uint32_t async_seen;             /* CEIL_IP_ASYNC_* */

void ceil_ip_file_async(int which)
{
    __atomic_fetch_or(&async_seen, (uint32_t)which, __ATOMIC_RELAXED);
}

/* What /proc/self/maps shows now: CEIL_IP_ASYNC_AIO for an "[aio]" ring
 * (a Linux AIO context), CEIL_IP_ASYNC_IO_URING for an io_uring ring.
 * Raw system calls and a static buffer: may run in a signal handler. */
static char maps_buf[4096 + 32];

static uint32_t async_in_maps(void)
{
    const int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint32_t seen = 0;
    size_t keep = 0;
    for (;;) {
        const long n = syscall(SYS_read, fd, maps_buf + keep, sizeof maps_buf - 1 - keep);
        ceil_ip_self_read_(n);
        if (n <= 0)
            break;
        const size_t len = keep + (size_t)n;
        /* a line may hold a NUL-free name only: search the chunk as text */
        for (size_t i = 0; i < len; i++)
            if (maps_buf[i] == 0)
                maps_buf[i] = ' ';
        maps_buf[len] = 0;
        if (strstr(maps_buf, "[aio]"))
            seen |= CEIL_IP_ASYNC_AIO;
        if (strstr(maps_buf, "[io_uring]"))
            seen |= CEIL_IP_ASYNC_IO_URING;
        /* the chunk's end may cut a name in two: carry it */
        keep = len < 16 ? len : 16;
        memmove(maps_buf, maps_buf + len - keep, keep);
    }
    syscall(SYS_close, fd);
    return seen;
}

uint32_t ceil_ip_file_async_seen(void)
{
    return __atomic_load_n(&async_seen, __ATOMIC_RELAXED) | async_in_maps();
}

void ceil_ip_file_async_forget(void)
{
    async_seen = 0;
}

/* ---- liburing's and libaio's set-ups ------------------------------------------
 * These wrappers only note that the program set such I/O up. The
 * real function is looked up without stopping the program when it is
 * missing (CEIL_REAL would): only a program linked with the library calls
 * these names. */

static void *next_fn(const char *name, void **cache)
{
    void *f = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, f, __ATOMIC_RELAXED);
    }
    return f;
}

struct io_uring;
struct io_uring_params;

CEIL_IP_EXPORT int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
    static void *real;
    int (*f)(unsigned, struct io_uring *, unsigned) = (int (*)(unsigned, struct io_uring *, unsigned))next_fn(
        "io_uring_queue_init", &real);
    if (!f)
        return -ENOSYS;
    const int rc = f(entries, ring, flags);
    if (rc == 0)
        ceil_ip_file_async(CEIL_IP_ASYNC_IO_URING);
    return rc;
}

CEIL_IP_EXPORT int io_uring_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
    static void *real;
    int (*f)(unsigned, struct io_uring *, struct io_uring_params *) =
        (int (*)(unsigned, struct io_uring *, struct io_uring_params *))next_fn("io_uring_queue_init_params", &real);
    if (!f)
        return -ENOSYS;
    const int rc = f(entries, ring, p);
    if (rc == 0)
        ceil_ip_file_async(CEIL_IP_ASYNC_IO_URING);
    return rc;
}

/* libaio's io_context_t is a pointer to an opaque struct. */
#define CEIL_IP_AIO_SETUP(fn)                                                                      \
    CEIL_IP_EXPORT int fn(int maxevents, void **ctx)                                               \
    {                                                                                              \
        static void *real;                                                                         \
        int (*f)(int, void **) = (int (*)(int, void **))next_fn(#fn, &real);                       \
        if (!f)                                                                                    \
            return -ENOSYS;                                                                        \
        const int rc = f(maxevents, ctx);                                                          \
        if (rc == 0)                                                                               \
            ceil_ip_file_async(CEIL_IP_ASYNC_AIO);                                                 \
        return rc;                                                                                 \
    }
CEIL_IP_AIO_SETUP(io_setup)
CEIL_IP_AIO_SETUP(io_queue_init)
