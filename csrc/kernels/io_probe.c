/* io_probe.c - the single timed operations of `ceiling probe` (verbs/probe.py):
 * io-probing's random 1 MiB read and write in a large file, and one
 * MD-Workbench iteration (stat, read, delete, re-create one small file; the read of a file whose pages
 * were dropped from the page cache first, untimed).
 *
 * Unlike the storage loops (io_seq.c, io_random.c, io_meta.c), which time
 * whole loops, each call here is one operation and its own time: the probe
 * runs one of each per interval, and what it reports is that latency as a
 * user meets it. The clock is ceil_now() (CLOCK_MONOTONIC); buffers are
 * made and filled before the clock starts. pread_full / pwrite_full and
 * io_buffer are io.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io.h"

#define PROBE_SEED 0x9A0BEULL

int ceil_probe_rw(int fd, int write, int64_t off, int64_t len, int direct, double *sec)
{
    if (fd < 0 || off < 0 || len <= 0 || len > (64LL << 20) || !sec)
        return -EINVAL;
    if (direct && (off % IO_ALIGN || len % IO_ALIGN))
        return -EINVAL;
    char *buf = io_buffer((size_t)len);
    if (!buf)
        return -ENOMEM;
    if (write)
        ceil_io_fill_base(PROBE_SEED ^ (uint64_t)off, buf, (size_t)len);
    else
        memset(buf, 0, (size_t)len);         /* the pages are ours before the clock starts */
    int rc = 0;
    if (!direct && !write) {                 /* the range from the device, not the page cache */
        int e = posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED);
        if (e) {
            free(buf);
            return -e;
        }
    }
    double t0 = ceil_now();
    ssize_t k = write ? pwrite_full(fd, buf, (size_t)len, off) : pread_full(fd, buf, (size_t)len, off);
    if (k >= 0 && write && !direct && fdatasync(fd) != 0)
        k = -1;                               /* a buffered write reaches the device before the clock stops */
    double t1 = ceil_now();
    if (k < 0)
        rc = -errno;
    else if (k != len)
        rc = -EIO;                            /* the data file is shorter than it was made */
    else
        *sec = t1 - t0;
    if (!direct && write && rc == 0)
        (void)posix_fadvise(fd, off, len, POSIX_FADV_DONTNEED);
    free(buf);
    return rc;
}

int ceil_probe_md(const char *path, int64_t md_bytes, double sec[4], int *err)
{
    if (!path || md_bytes <= 0 || md_bytes > IO_MAX_MD_BYTES || !sec || !err)
        return -EINVAL;
    char *buf = malloc((size_t)md_bytes);
    if (!buf)
        return -ENOMEM;
    ceil_io_fill_base(PROBE_SEED, buf, (size_t)md_bytes);
    struct stat st;
    int step = 0, fd = -1;
    *err = 0;
    /* Untimed: the file's clean pages dropped from this node's page cache, so that the read is the file
     * system's (a server's, a device's) every time, as the data file's reads are (O_DIRECT or a dropped
     * range), not a cache hit whose rate drifts with what the kernel keeps: on a VM whose kernel pages
     * out cold page cache (DAMON's reclaim) the pool's reads went from 21 us to 100 us within two
     * minutes of the pool's making, a factor of 4 the file system had nothing to do with. */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
        fd = -1;
    }
    double t0 = ceil_now();
    if (stat(path, &st) != 0)                                   /* 1: stat */
        goto fail;
    double t1 = ceil_now();
    step = 1;                                                   /* 2: read it whole */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || pread_full(fd, buf, (size_t)md_bytes, 0) < 0)
        goto fail;
    close(fd);
    fd = -1;
    double t2 = ceil_now();
    step = 2;                                                   /* 3: delete */
    if (unlink(path) != 0)
        goto fail;
    double t3 = ceil_now();
    step = 3;                                                   /* 4: create, write, close */
    fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 || pwrite_full(fd, buf, (size_t)md_bytes, 0) < 0)
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    double t4 = ceil_now();
    sec[0] = t1 - t0;
    sec[1] = t2 - t1;
    sec[2] = t3 - t2;
    sec[3] = t4 - t3;
    free(buf);
    return 0;
fail:
    *err = errno;
    if (fd >= 0)
        close(fd);
    free(buf);
    return step + 1;
}
