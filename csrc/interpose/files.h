/*
 * files.h - per-file records of libceiling_interpose.so (files.c, the
 * "file" module), fed by the POSIX and stdio modules: which files the
 * program read and wrote, how much, in what requests, where and how fast.
 *
 * A file is the absolute path of a regular file or a block device, as
 * Darshan keys its records (the path as opened, made absolute with the
 * working directory or openat's directory, "//" and "/./" removed; not
 * resolved: a link is its own record); its record is made the first time
 * the program opens the path, or the first time it reads or writes a
 * descriptor the module has not seen opened (inherited from the parent,
 * opened before an exec), under /proc/self/fd's link. A file deleted and
 * created again under its path stays one record that counts the
 * re-creations; two paths of one inode are two. A descriptor is mapped to its
 * file in one process-wide table; the counts go into a small per-thread
 * cache of files, folded into the process-wide record with atomic adds
 * only when a thread's cache slot passes to another file. So the hot path
 * is one table load and a few adds into the thread's own memory: no lock,
 * no allocation.
 */
#ifndef CEIL_IP_FILES_H
#define CEIL_IP_FILES_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CEIL_IP_FILES_MAX 512      /* distinct files with a record; more are counted as lost */
#define CEIL_IP_FD_MAP 4096        /* descriptors below this are mapped to their file */

/* Which API touched a file (the api field of its record). */
#define CEIL_IP_API_POSIX 1u
#define CEIL_IP_API_STDIO 2u
#define CEIL_IP_API_MPIIO 4u

/* The start of an access whose offset is not known (read at a position the
 * thread cannot tell). */
#define CEIL_IP_OFFSET_UNKNOWN (-1)

/* A descriptor the program just opened (fd >= 0), by path (NULL: ask
 * /proc/self/fd), the open taking `ticks`: its file's record, one open
 * counted. */
void ceil_ip_file_opened(int fd, const char *path, unsigned api, uint64_t ticks) __attribute__((visibility("hidden")));

/* The same for openat: a relative path is relative to dirfd (AT_FDCWD: the
 * working directory); flags are the open's, of which O_SYNC, O_DSYNC and
 * O_DIRECT are kept for the descriptor. */
void ceil_ip_file_opened_at(int dirfd, int fd, const char *path, int flags, unsigned api, uint64_t ticks)
    __attribute__((visibility("hidden")));

/* newfd is now a copy of oldfd (dup, dup2, dup3, fcntl F_DUPFD): the same
 * file and flags; what newfd was before is closed. */
void ceil_ip_file_dup(int oldfd, int newfd) __attribute__((visibility("hidden")));

/* fcntl(fd, F_SETFL, flags) succeeded: O_DIRECT is on or off now. */
void ceil_ip_file_setfl(int fd, int flags) __attribute__((visibility("hidden")));

/* A successful mmap of `len` bytes of fd with prot and flags (MAP_ANONYMOUS
 * excluded by the caller): counted against the file; a mapping of an
 * io_uring instance's descriptor marks io_uring as present. */
void ceil_ip_file_mapped(int fd, uint64_t len, int prot, int flags) __attribute__((visibility("hidden")));

/* I/O no wrapper counts was set up: an io_uring instance (liburing's
 * io_uring_queue_init*) or a Linux AIO context (libaio's io_setup). */
#define CEIL_IP_ASYNC_IO_URING 1
#define CEIL_IP_ASYNC_AIO 2
void ceil_ip_file_async(int which) __attribute__((visibility("hidden")));

/* (async.c) CEIL_IP_ASYNC_* seen so far, or in /proc/self/maps now (may run
 * in a signal handler); forgotten in a forked child. */
uint32_t ceil_ip_file_async_seen(void) __attribute__((visibility("hidden")));
void ceil_ip_file_async_forget(void) __attribute__((visibility("hidden")));

/* A descriptor the program closed, in ticks (0: not timed): the number's
 * next user is another file. */
void ceil_ip_file_closed(int fd, uint64_t ticks) __attribute__((visibility("hidden")));

/* fd's file record id (the "id" of its file line), 0 when it has none: the trace's file column. */
int32_t ceil_ip_file_id(int fd) __attribute__((visibility("hidden")));

/* A read (write = 0) or write that moved `bytes` (successful calls only) in
 * `ticks` (ceil_ip_ticks), at `offset` (CEIL_IP_OFFSET_UNKNOWN when not
 * known), `random` = 1 when it did not start where the thread's previous
 * access of the descriptor ended. Nothing when fd is not a file. */
void ceil_ip_file_io(int fd, int write, uint64_t bytes, uint64_t ticks, int random, int64_t offset,
                     unsigned api) __attribute__((visibility("hidden")));

/* What a stdio stream on fd asked of the kernel, estimated from its buffer
 * (stdio.c): `requests` reads (write = 0) or writes of `bytes` in all.
 * Nothing when fd has no record. */
void ceil_ip_file_stdio_kernel(int fd, int write, uint64_t requests, uint64_t bytes)
    __attribute__((visibility("hidden")));

/* (stdio.c) The streams with bytes waiting in their buffers now, which
 * glibc's exit writes out after the record, one request each: up to max of
 * them, their descriptors in fds and the bytes in bytes; how many. May run
 * in a signal handler (reads pointers only). */
int ceil_ip_stdio_pending(int *fds, uint64_t *bytes, int max) __attribute__((visibility("hidden")));

/* An fsync or fdatasync of fd that took `ticks`. */
void ceil_ip_file_sync(int fd, uint64_t ticks) __attribute__((visibility("hidden")));

/* A file the program opened by name rather than through a descriptor it
 * sees (MPI_File_open): its record's id (0: no record: not a regular file,
 * no room, or not counting), one open counted. A driver prefix of ROMIO's
 * ("ufs:", "lustre:") is dropped. */
uint32_t ceil_ip_file_named(const char *path, unsigned api, uint64_t ticks) __attribute__((visibility("hidden")));

/* A read, write or sync of the file with that id (nothing for 0). */
void ceil_ip_file_io_id(uint32_t fid, int write, uint64_t bytes, uint64_t ticks, unsigned api)
    __attribute__((visibility("hidden")));
void ceil_ip_file_sync_id(uint32_t fid, uint64_t ticks) __attribute__((visibility("hidden")));

/* What a descriptor is, for the thread caches of the POSIX and stdio
 * modules (0 there: not asked yet): CEIL_IP_FD_FILE (a regular file or a
 * block device: storage) or CEIL_IP_FD_OTHER (a pipe, socket, terminal,
 * /dev/null). Asked with fstat through the raw system call (no wrapper
 * counts it); a descriptor fstat refuses is taken for a file. */
enum { CEIL_IP_FD_FILE = 1, CEIL_IP_FD_OTHER = 2 };

static inline uint8_t ceil_ip_fd_kind(int fd)
{
    struct stat st;
    return syscall(SYS_fstat, fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode) ? CEIL_IP_FD_FILE
                                                                                        : CEIL_IP_FD_OTHER;
}

#endif /* CEIL_IP_FILES_H */
