/* clock.c - the wrappers' clock (interpose.h: ceil_ip_ticks): the CPU's
 * timestamp counter where the kernel itself keeps time with it (its
 * clocksource is "tsc": invariant, synchronised across CPUs), else
 * CLOCK_MONOTONIC (why, with the costs measured: interpose.h, ceil_ip_ticks).
 * Ticks become nanoseconds at report time, at the rate measured against
 * CLOCK_MONOTONIC since load. Apart from the runtime (interpose.c): one
 * piece every module shares. Also which CLOCK_MONOTONIC it is: the boot's
 * identity (ceil_ip_boot_id_), for the trace's clocks across nodes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "interpose.h"

CEIL_IP_REAL_DECL(int, open, (const char *, int, ...));
CEIL_IP_REAL_DECL(int, close, (int));
CEIL_IP_REAL_DECL(ssize_t, read, (int, void *, size_t));

int ceil_ip_use_tsc_;
static uint64_t tsc_at_load, ns_at_load;

/* 1 when the kernel's clocksource is the TSC. Through the real functions,
 * so that no module counts these calls. */
static int kernel_uses_tsc(void)
{
#if defined(__x86_64__)
    char buf[16] = {0};
    static const char path[] = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    const int fd = CEIL_REAL(open)(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    const ssize_t n = CEIL_REAL(read)(fd, buf, sizeof buf - 1);
    ceil_ip_self_read_((long)n);
    CEIL_REAL(close)(fd);
    return n == 4 && memcmp(buf, "tsc\n", 4) == 0;
#else
    return 0;
#endif
}

void ceil_ip_clock_init_(void)
{
    const int saved = errno;
    ceil_ip_use_tsc_ = kernel_uses_tsc();
    ns_at_load = ceil_ip_now_ns();
    tsc_at_load = ceil_ip_use_tsc_ ? ceil_ip_ticks() : 0;
    errno = saved;
}

double ceil_ip_ns_per_tick(void)
{
    if (!ceil_ip_use_tsc_)
        return 1.0;
    const uint64_t ns = ceil_ip_now_ns() - ns_at_load, ticks = ceil_ip_ticks() - tsc_at_load;
    return ticks > 0 ? (double)ns / (double)ticks : 1.0;
}

uint64_t ceil_ip_boot_id_(void)
{
    char b[64];
    const int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    const long n = syscall(SYS_read, fd, b, sizeof b);
    ceil_ip_self_read_(n);
    syscall(SYS_close, fd);
    size_t len = n > 0 ? (size_t)n : 0;
    while (len && (b[len - 1] == '\n' || b[len - 1] == ' '))
        len--;
    if (len < 16)
        return 0;
    uint64_t h = UINT64_C(0xcbf29ce484222325);       /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)b[i]) * UINT64_C(0x100000001b3);
    return h;
}
