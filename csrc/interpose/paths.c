/* paths.c - the names files.c gives files (paths.h): a descriptor's link,
 * and a path made absolute and cleaned as Darshan makes its record ids.
 * Raw system calls only (no wrapper counts them), no allocation. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "paths.h"

/* fd's link in /proc/self/fd, without stdio (no allocation). */
void ceil_ip_fd_path(int fd, char *out, size_t len)
{
    char link[32] = "/proc/self/fd/", digits[12];
    int nd = 0;
    unsigned v = (unsigned)fd;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t at = strlen(link);
    while (nd)
        link[at++] = digits[--nd];
    link[at] = 0;
    const long n = syscall(SYS_readlinkat, AT_FDCWD, link, out, len - 1);   /* AArch64 has no readlink */
    out[n > 0 ? (size_t)n : 0] = 0;
}

/* Darshan's darshan_clean_file_path, in place: "//" and "/./" removed. */
void ceil_ip_clean_path(char *p)
{
    char *w = p;
    const char *r = p;
    while (*r) {
        if (*r != '/') {
            *w++ = *r++;
            continue;
        }
        *w++ = *r++;
        for (;;) {
            if (r[0] == '/')
                r++;
            else if (r[0] == '.' && r[1] == '/')
                r += 2;
            else
                break;
        }
    }
    *w = 0;
}

/* path as Darshan names it, in out: absolute (after the working directory,
 * or dirfd's link, when relative), cleaned. 0 when it does not fit or the
 * directory cannot be told. No wrapper is called (raw system calls). */
int ceil_ip_absolute_path(int dirfd, const char *path, char *out, size_t len)
{
    size_t at = 0, pl = strlen(path);
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            const long n = syscall(SYS_getcwd, out, len - 1);
            if (n <= 0)
                return 0;
            out[len - 1] = 0;
        } else {
            ceil_ip_fd_path(dirfd, out, len);
        }
        at = strlen(out);
        if (at == 0 || out[0] != '/')
            return 0;
        if (at + 1 < len)
            out[at++] = '/';
    }
    if (at + pl + 1 > len)
        return 0;
    memcpy(out + at, path, pl + 1);
    ceil_ip_clean_path(out);
    return 1;
}

/* FNV-1a, 64 bits: a record's key. */
uint64_t ceil_ip_path_key(const char *p)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    return h;
}
