/* files.c - the "file" module: one record per file the program read or
 * wrote through the POSIX or stdio calls the other modules wrap, like
 * Darshan's per-file records (files.h has the interface and the model).
 *
 * Longer than 500 lines: a hundred are the record's format, below; the
 * rest is one table of records that the descriptor map, the per-thread
 * cache, the fork handler and the report all walk. The names it gives
 * files are paths.c's, the I/O no wrapper sees is async.c's.
 *
 * Its record lines (interpose.h has the format around them):
 *
 *     module name=file version=3 enabled=1
 *     file files=2 lost=0 max=512 io_uring=0 aio=0
 *     file id=1 dev=2049 ino=393220 blksize=4096 api=1 opens=1 meta_ns=8120 reads=0 read_bytes=0 read_ns=0
 *          writes=256 write_bytes=268435456 write_ns=91234567 random=0 unaligned=0 syncs=1
 *          sync_ns=402311 extent=268435456 flagged_writes=0 flagged_write_ns=0 maps=0 map_bytes=0
 *          stdio_reads=0 stdio_read_bytes=0 stdio_writes=0 stdio_write_bytes=0 stdio_kernel_reads=0
 *          stdio_kernel_read_bytes=0 stdio_kernel_writes=0 stdio_kernel_write_bytes=0
 *          stdio_pending_writes=0 stdio_pending_write_bytes=0
 *          recreated=0 oflags=0 map_prot=0 first_open_ns=5123000111 last_close_ns=5191000222
 *          path=/scratch/out.dat
 *     ...
 *
 * (a file line is one line.) files: the records that follow (files the
 * process opened, read, wrote, synced or mapped); lost: distinct files that found
 * no record (more than max = CEIL_IP_FILES_MAX, or a full probe sequence)
 * and are counted only in the POSIX and stdio totals; io_uring, aio: 1
 * when the process set up I/O that no wrapper counts: an io_uring instance
 * (liburing's io_uring_queue_init*, an mmap of a ring's descriptor, or a
 * ring still mapped when the record is written) or a Linux AIO context
 * (libaio's io_setup or io_queue_init, or an "[aio]" ring in
 * /proc/self/maps when the record is written). Per file: id (the
 * record's slot, 1-based; two threads meeting a new path at the same
 * moment may make two records of it, which a reader merges by path);
 * dev and ino (st_dev, st_ino of the file under the path at its last open:
 * version 1 keyed records by them, which merged the temporary files that
 * an inode number passed between and split a file deleted and created again);
 * blksize (st_blksize, the alignment the file system prefers);
 * api: bits, 1 = POSIX calls, 2 = stdio calls, 4 = MPI-IO calls; opens:
 * successful opens of it (open family, creat, fopen family, MPI_File_open);
 * meta_ns: time in those opens and in the closes of its descriptors (close,
 * fclose; an MPI-IO file's close is not timed here); reads, writes: successful calls;
 * read_bytes, write_bytes: what they returned (POSIX) or moved to or from
 * the stream's buffer (stdio), or what MPI-IO was asked to write and read
 * (mpi_io.c says which); read_ns, write_ns, sync_ns: time in the
 * calls (stdio's per-character calls are not timed); random: POSIX
 * accesses that did not start where the thread's previous access of the
 * descriptor ended (posix.c, "Sequential or not"); unaligned: POSIX
 * accesses whose start offset was known and not a multiple of blksize;
 * syncs: fsync and fdatasync calls; flagged_writes, flagged_write_ns:
 * the writes (and their time, within writes and write_ns) through a
 * descriptor opened with O_SYNC, O_DSYNC or O_DIRECT or given O_DIRECT by
 * fcntl(F_SETFL); maps, map_bytes: successful mmap calls of the file and
 * the bytes they mapped (what the program then reads or writes through the
 * mapping is page faults, not calls: not in reads or writes); stdio_reads,
 * stdio_read_bytes, stdio_writes, stdio_write_bytes: the stdio library
 * calls among reads and writes and their bytes; stdio_kernel_reads, ..._bytes,
 * stdio_kernel_writes, ..._bytes: the requests the file's streams made of
 * the kernel, estimated from their buffers (stdio.c), so that a file's
 * requests as strace counts them are reads - stdio_reads +
 * stdio_kernel_reads (and so for writes and bytes); stdio_pending_writes,
 * stdio_pending_write_bytes: its streams with bytes in their buffers when
 * the record was written, which glibc's exit writes out after it, one
 * request each (lost at _exit, an exec or a fatal signal: the process
 * line's reason tells; version 2 had none of the stdio_ fields); recreated:
 * opens that found another file under the path than the process's
 * previous open of it did (another inode, or the same inode number born
 * at another time: statx's btime, where the file system keeps it); oflags:
 * bits of the opens, 1 = O_DSYNC, 2 = O_SYNC, 4 = O_DIRECT; map_prot: bits
 * of the mappings, 1 = readable, 2 = writable, 4 = MAP_SHARED;
 * first_open_ns, last_close_ns: CLOCK_MONOTONIC (the process line's clock,
 * comparable between the processes of a node) at the process's first
 * open of the path or first meeting of a descriptor of it (for a forked
 * child holding the descriptor: the fork), and at the last close of a
 * descriptor of it (the record's time when one is still open then, 0 when
 * none was opened or met), so that a reader can tell processes that had
 * the file open at the same time from ones that took turns;
 * extent: one past the highest byte a
 * POSIX access with a known offset moved (a pread's or pwrite's, or a read
 * or write at a position the thread knows: after the open or an lseek, not
 * after a pread or pwrite, which leave the position where it was); path:
 * the record's key, as Darshan makes its record ids: the path as the
 * program opened it, made absolute with the working directory (or
 * openat's directory's link) when relative, "//" and "/./" removed, no
 * link resolved; /proc/self/fd's link for a descriptor met without its
 * open; at most FILE_PATH_BYTES - 1 bytes (longer ones keep their end,
 * after "...": the key is a hash of the whole path).
 *
 * Not seen: a descriptor at or above CEIL_IP_FD_MAP; a copy of a
 * descriptor made other than by dup, dup2, dup3 or fcntl (F_DUPFD) is met
 * as an unknown descriptor, under its link; munmap (map_bytes is what was
 * mapped, not what stayed mapped); I/O through io_uring or Linux AIO
 * (raw system calls: only said to be present, above);
 * where MPI-IO's reads and writes went inside a file (its calls count
 * requests, bytes and time per file, from the name MPI_File_open was
 * given; ROMIO's own POSIX calls run inside the MPI call, uncounted, see
 * interpose.h on nesting), so random and unaligned are POSIX's only. Counts a thread still holds in
 * its cache are added at report; a thread folding while the record is
 * written may be counted in neither or both, as with every module's
 * blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "files.h"
#include "interpose.h"
#include "paths.h"

#define FILE_PATH_BYTES 240
#define FILE_CACHE 64           /* per-thread entries, by file id modulo */
#define FILE_PROBES 64          /* slots tried before a file is lost */
#define FID_NONE UINT32_MAX     /* descriptor seen: not a file, or no record */

/* The counts of one file (FC_extent is a maximum, the rest sums). */
/* Their names, order and which are of ticks are calls.def's CEIL_IP_FILE_COUNTERS. */
#define FC_NAME(key, ticks, _) #key,
#define FC_TICKS(key, ticks, _) ticks,
static const char *const fc_names[] = {CEIL_IP_FILE_COUNTERS(FC_NAME, _)};
static const unsigned char fc_ticks[] = {CEIL_IP_FILE_COUNTERS(FC_TICKS, _)};
#define FC_ENUM(key, ticks, _) FC_##key,
/* FC_CACHED: those before it are counted in the thread's cache, the rare ones
 * from it on are added to the record itself (atomic adds) */
enum { CEIL_IP_FILE_COUNTERS(FC_ENUM, _) FC_N, FC_CACHED = FC_flagged_writes };
#define FC_IS_TICKS(k) (fc_ticks[k] != 0)

/* The open flags a record keeps (oflags), and a descriptor's (fdflags). */
#define OF_DSYNC 1u
#define OF_SYNC 2u
#define OF_DIRECT 4u

enum { FR_EMPTY = 0, FR_CLAIMED, FR_READY, FR_DEAD };

typedef struct file_rec {
    uint32_t state;             /* FR_*: EMPTY -> CLAIMED (one thread fills it) -> READY */
    uint32_t api;
    uint64_t key;               /* hash of the whole path */
    uint64_t dev, ino, btime;   /* the file under the path at its last open (btime 0: not known) */
    uint64_t blksize;
    uint64_t recreated;
    uint64_t first_ns, last_ns; /* CLOCK_MONOTONIC; 0 = none */
    uint32_t oflags, map_prot;
    uint64_t n[FC_N];           /* what threads folded in */
    char path[FILE_PATH_BYTES];
} file_rec;

/* One thread's cache entry: a file id (0 = free) and its counts since the
 * last fold. The block is nothing but uint64_t. */
typedef struct file_entry {
    uint64_t fid, api, n[FC_CACHED];
} file_entry;

typedef struct file_counters {
    file_entry e[FILE_CACHE];
} file_counters;

_Static_assert(sizeof(file_counters) <= CEIL_IP_MAX_BLOCK, "file block too large");

/* What a file is, from statx (or fstatat where statx is refused). */
typedef struct file_id {
    uint64_t dev, ino, btime, blksize;
} file_id;

static file_rec files[CEIL_IP_FILES_MAX];
static uint32_t fdmap[CEIL_IP_FD_MAP];  /* 0 = not seen, FID_NONE, else 1 + the record's slot */
static uint8_t fdflags[CEIL_IP_FD_MAP]; /* OF_* of the descriptor */
static uint64_t files_lost;
static int no_statx;                    /* statx refused (ENOSYS, a seccomp filter's EPERM) */

static ceil_ip_module file_module;

/* ---- the records ------------------------------------------------------------- */

static void copy_path(char *dst, const char *src)
{
    size_t n = strlen(src);
    if (n < FILE_PATH_BYTES) {
        memcpy(dst, src, n + 1);
        return;
    }
    /* the end names the file; keep it */
    memcpy(dst, "...", 3);
    memcpy(dst + 3, src + n - (FILE_PATH_BYTES - 4), FILE_PATH_BYTES - 4);
    dst[FILE_PATH_BYTES - 1] = 0;
}

/* 1 when (dirfd, path, at_flags) names a regular file or a block device,
 * with what it is in *id; statx for the birth time, else fstatat. */
static int file_stat(int dirfd, const char *path, int at_flags, file_id *id)
{
#ifdef SYS_statx
    if (!__atomic_load_n(&no_statx, __ATOMIC_RELAXED)) {
        struct statx sx;
        if (syscall(SYS_statx, dirfd, path, at_flags, STATX_TYPE | STATX_INO | STATX_BTIME, &sx) == 0) {
            if (!(S_ISREG(sx.stx_mode) || S_ISBLK(sx.stx_mode)))
                return 0;
            id->dev = (uint64_t)makedev(sx.stx_dev_major, sx.stx_dev_minor);
            id->ino = sx.stx_ino;
            id->btime = (sx.stx_mask & STATX_BTIME)
                            ? (uint64_t)sx.stx_btime.tv_sec * 1000000000u + sx.stx_btime.tv_nsec + 1 : 0;
            id->blksize = sx.stx_blksize;
            return 1;
        }
        if (errno != ENOSYS && errno != EPERM)
            return 0;
        __atomic_store_n(&no_statx, 1, __ATOMIC_RELAXED);
    }
#endif
    struct stat st;
    if (syscall(SYS_newfstatat, dirfd, path, &st, at_flags) != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
        return 0;
    id->dev = (uint64_t)st.st_dev;
    id->ino = (uint64_t)st.st_ino;
    id->btime = 0;
    id->blksize = st.st_blksize > 0 ? (uint64_t)st.st_blksize : 0;
    return 1;
}

static void time_min(uint64_t *at, uint64_t v)
{
    uint64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
    while ((cur == 0 || v < cur) &&
           !__atomic_compare_exchange_n(at, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void time_max(uint64_t *at, uint64_t v)
{
    uint64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(at, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The record of the (absolute, clean) path, made when there is none: 1 +
 * its slot, or 0 when none is free within FILE_PROBES slots. `opened`:
 * the program just opened the path, so a file other than the one its
 * previous open found is a re-creation. Wait-free: a slot another thread
 * is filling is passed over (a possible duplicate, see the top). */
static uint32_t record_of(const char *path, const file_id *id, int opened)
{
    const uint64_t key = ceil_ip_path_key(path);
    uint64_t h = key ^ (key >> 29);
    for (unsigned i = 0; i < FILE_PROBES; i++) {
        const uint32_t slot = (uint32_t)((h + i) % CEIL_IP_FILES_MAX);
        file_rec *r = &files[slot];
        uint32_t s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
        if (s == FR_EMPTY) {
            uint32_t expect = FR_EMPTY;
            if (__atomic_compare_exchange_n(&r->state, &expect, FR_CLAIMED, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                r->key = key;
                r->dev = id->dev;
                r->ino = id->ino;
                r->btime = id->btime;
                r->blksize = id->blksize;
                copy_path(r->path, path);
                __atomic_store_n(&r->state, FR_READY, __ATOMIC_RELEASE);
                return slot + 1;
            }
            s = expect;
        }
        if (s == FR_READY && r->key == key) {
            if (opened && (__atomic_load_n(&r->ino, __ATOMIC_RELAXED) != id->ino ||
                           __atomic_load_n(&r->dev, __ATOMIC_RELAXED) != id->dev ||
                           __atomic_load_n(&r->btime, __ATOMIC_RELAXED) != id->btime)) {
                __atomic_fetch_add(&r->recreated, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&r->dev, id->dev, __ATOMIC_RELAXED);
                __atomic_store_n(&r->ino, id->ino, __ATOMIC_RELAXED);
                __atomic_store_n(&r->btime, id->btime, __ATOMIC_RELAXED);
            }
            return slot + 1;
        }
    }
    __atomic_fetch_add(&files_lost, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Map fd (below CEIL_IP_FD_MAP) to its file, asking the kernel once: by
 * the path it was opened by (relative to dirfd), else by its link. */
static uint32_t map_fd(int dirfd, int fd, const char *path, int opened)
{
    file_id id;
    uint32_t fid = FID_NONE;
    if (file_stat(fd, "", AT_EMPTY_PATH, &id)) {
        char buf[4096];
        if (!path || !path[0] || !ceil_ip_absolute_path(dirfd, path, buf, sizeof buf))
            ceil_ip_fd_path(fd, buf, sizeof buf);
        const uint32_t f = buf[0] == '/' ? record_of(buf, &id, opened) : 0;
        if (!f && buf[0] != '/')
            __atomic_fetch_add(&files_lost, 1, __ATOMIC_RELAXED);
        if (f) {
            fid = f;
            time_min(&files[f - 1].first_ns, ceil_ip_now_ns());
        }
    }
    __atomic_store_n(&fdmap[fd], fid, __ATOMIC_RELAXED);
    return fid;
}

/* The calling thread's entry for fd's file, NULL when fd is no file with a
 * record or the thread is not counting. Keeps errno. */
static file_entry *entry_in(file_counters *c, uint32_t fid);

static file_entry *entry_of(int fd, int dirfd, const char *path, int opened)
{
    if ((unsigned)fd >= CEIL_IP_FD_MAP)
        return NULL;
    file_counters *c = ceil_ip_block(&file_module);
    if (!c)
        return NULL;
    uint32_t fid = __atomic_load_n(&fdmap[fd], __ATOMIC_RELAXED);
    if (fid == 0 || opened) {
        const int saved = errno;
        fid = map_fd(dirfd, fd, path, opened);
        errno = saved;
    }
    return fid == FID_NONE ? NULL : entry_in(c, fid);
}

/* The entry of file fid in the thread's cache c, taking the slot over. */
static file_entry *entry_in(file_counters *c, uint32_t fid)
{
    file_entry *e = &c->e[fid % FILE_CACHE];
    if (e->fid != fid) {
        if (e->fid) {
            /* the slot passes to another file: the old one's counts go to its record */
            file_rec *r = &files[e->fid - 1];
            for (int k = 0; k < FC_CACHED; k++) {
                const uint64_t v = ceil_ip_read(&e->n[k]);
                if (k == FC_extent) {
                    uint64_t cur = __atomic_load_n(&r->n[k], __ATOMIC_RELAXED);
                    while (v > cur && !__atomic_compare_exchange_n(&r->n[k], &cur, v, 1, __ATOMIC_RELAXED,
                                                                    __ATOMIC_RELAXED))
                        ;
                } else if (v) {
                    __atomic_fetch_add(&r->n[k], v, __ATOMIC_RELAXED);
                }
                __atomic_store_n(&e->n[k], 0, __ATOMIC_RELAXED);
            }
            __atomic_fetch_or(&r->api, (uint32_t)e->api, __ATOMIC_RELAXED);
            __atomic_store_n(&e->api, 0, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&e->fid, fid, __ATOMIC_RELAXED);
    }
    return e;
}

/* ---- what posix.c and stdio.c call ------------------------------------------------ */

static unsigned oflags_of(int flags)
{
    unsigned f = 0;
    if ((flags & O_SYNC) == O_SYNC)
        f |= OF_SYNC;
    else if (flags & O_DSYNC)
        f |= OF_DSYNC;
    if (flags & O_DIRECT)
        f |= OF_DIRECT;
    return f;
}

void ceil_ip_file_opened_at(int dirfd, int fd, const char *path, int flags, unsigned api, uint64_t ticks)
{
    if ((unsigned)fd >= CEIL_IP_FD_MAP)
        return;
    const unsigned of = oflags_of(flags);
    __atomic_store_n(&fdflags[fd], (uint8_t)of, __ATOMIC_RELAXED);
    file_entry *e = entry_of(fd, dirfd, path, 1);
    if (e) {
        ceil_ip_add(&e->n[FC_opens], 1);
        ceil_ip_add(&e->n[FC_meta_ns], ticks);
        e->api |= api;
        if (of)
            __atomic_fetch_or(&files[e->fid - 1].oflags, of, __ATOMIC_RELAXED);
    }
}

void ceil_ip_file_opened(int fd, const char *path, unsigned api, uint64_t ticks)
{
    ceil_ip_file_opened_at(AT_FDCWD, fd, path, 0, api, ticks);
}

/* fd's record, 0 when it has none (or was never seen). */
static uint32_t fid_of(int fd)
{
    const uint32_t fid = (unsigned)fd < CEIL_IP_FD_MAP ? __atomic_load_n(&fdmap[fd], __ATOMIC_RELAXED) : 0;
    return fid == FID_NONE ? 0 : fid;
}

int32_t ceil_ip_file_id(int fd) { return (int32_t)fid_of(fd); }

void ceil_ip_file_closed(int fd, uint64_t ticks)
{
    if ((unsigned)fd >= CEIL_IP_FD_MAP)
        return;
    const uint32_t fid = fid_of(fd);
    if (fid)
        time_max(&files[fid - 1].last_ns, ceil_ip_now_ns());
    /* a descriptor never mapped is not looked up now: it is closed */
    file_entry *e = ticks && fid ? entry_of(fd, AT_FDCWD, NULL, 0) : NULL;
    if (e)
        ceil_ip_add(&e->n[FC_meta_ns], ticks);
    __atomic_store_n(&fdmap[fd], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fdflags[fd], 0, __ATOMIC_RELAXED);
}

void ceil_ip_file_dup(int oldfd, int newfd)
{
    if ((unsigned)newfd >= CEIL_IP_FD_MAP || newfd == oldfd)
        return;
    const int saved = errno;
    ceil_ip_file_closed(newfd, 0);      /* dup2 and dup3 closed what the number was */
    if ((unsigned)oldfd < CEIL_IP_FD_MAP) {
        __atomic_store_n(&fdmap[newfd], __atomic_load_n(&fdmap[oldfd], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
        __atomic_store_n(&fdflags[newfd], __atomic_load_n(&fdflags[oldfd], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    }
    errno = saved;
}

void ceil_ip_file_setfl(int fd, int flags)
{
    if ((unsigned)fd >= CEIL_IP_FD_MAP)
        return;
    const uint8_t was = __atomic_load_n(&fdflags[fd], __ATOMIC_RELAXED);
    const uint8_t now = (uint8_t)((was & ~OF_DIRECT) | (flags & O_DIRECT ? OF_DIRECT : 0));
    __atomic_store_n(&fdflags[fd], now, __ATOMIC_RELAXED);
    if (now & OF_DIRECT) {
        const int saved = errno;
        file_entry *e = entry_of(fd, AT_FDCWD, NULL, 0);
        if (e)
            __atomic_fetch_or(&files[e->fid - 1].oflags, OF_DIRECT, __ATOMIC_RELAXED);
        errno = saved;
    }
}

void ceil_ip_file_io(int fd, int write, uint64_t bytes, uint64_t ticks, int random, int64_t offset, unsigned api)
{
    file_entry *e = entry_of(fd, AT_FDCWD, NULL, 0);
    if (!e)
        return;
    ceil_ip_add(&e->n[write ? FC_writes : FC_reads], 1);
    ceil_ip_add(&e->n[write ? FC_write_bytes : FC_read_bytes], bytes);
    ceil_ip_add(&e->n[write ? FC_write_ns : FC_read_ns], ticks);
    ceil_ip_add(&e->n[FC_random], (uint64_t)random);
    if (write && __atomic_load_n(&fdflags[fd], __ATOMIC_RELAXED)) {
        uint64_t *n = files[e->fid - 1].n;
        __atomic_fetch_add(&n[FC_flagged_writes], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&n[FC_flagged_write_ns], ticks, __ATOMIC_RELAXED);
    }
    if (offset >= 0 && bytes > 0) {
        const uint64_t bs = files[e->fid - 1].blksize;
        ceil_ip_add(&e->n[FC_unaligned], bs && (uint64_t)offset % bs != 0);
        if ((uint64_t)offset + bytes > e->n[FC_extent])
            __atomic_store_n(&e->n[FC_extent], (uint64_t)offset + bytes, __ATOMIC_RELAXED);
    }
    if (api == CEIL_IP_API_STDIO) {
        uint64_t *n = files[e->fid - 1].n;
        __atomic_fetch_add(&n[write ? FC_stdio_writes : FC_stdio_reads], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&n[write ? FC_stdio_write_bytes : FC_stdio_read_bytes], bytes, __ATOMIC_RELAXED);
    }
    if (!(e->api & api))
        e->api |= api;
}

void ceil_ip_file_stdio_kernel(int fd, int write, uint64_t requests, uint64_t bytes)
{
    const uint32_t fid = fid_of(fd);
    if (!fid || !requests || !ceil_ip_block(&file_module))
        return;
    uint64_t *n = files[fid - 1].n;
    __atomic_fetch_add(&n[write ? FC_stdio_kernel_writes : FC_stdio_kernel_reads], requests, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n[write ? FC_stdio_kernel_write_bytes : FC_stdio_kernel_read_bytes], bytes, __ATOMIC_RELAXED);
}

void ceil_ip_file_sync(int fd, uint64_t ticks)
{
    file_entry *e = entry_of(fd, AT_FDCWD, NULL, 0);
    if (e) {
        ceil_ip_add(&e->n[FC_syncs], 1);
        ceil_ip_add(&e->n[FC_sync_ns], ticks);
    }
}

void ceil_ip_file_mapped(int fd, uint64_t len, int prot, int flags)
{
    const int saved = errno;
    file_entry *e = entry_of(fd, AT_FDCWD, NULL, 0);
    if (e) {
        uint64_t *n = files[e->fid - 1].n;
        __atomic_fetch_add(&n[FC_maps], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&n[FC_map_bytes], len, __ATOMIC_RELAXED);
        const uint32_t bits = (prot & PROT_READ ? 1u : 0) | (prot & PROT_WRITE ? 2u : 0) |
                              ((flags & MAP_TYPE) == MAP_SHARED || (flags & MAP_TYPE) == MAP_SHARED_VALIDATE ? 4u : 0);
        __atomic_fetch_or(&files[e->fid - 1].map_prot, bits, __ATOMIC_RELAXED);
    } else if (fd >= 0 && fid_of(fd) == 0 && ceil_ip_block(&file_module)) {
        /* not a file: an io_uring instance's rings are mapped from its descriptor */
        char link[64];
        ceil_ip_fd_path(fd, link, sizeof link);
        if (!strcmp(link, "anon_inode:[io_uring]"))
            ceil_ip_file_async(CEIL_IP_ASYNC_IO_URING);
    }
    errno = saved;
}

/* ---- what mpi_io.c calls: files by name --------------------------------------------- */

static uint32_t file_named(const char *path, unsigned api, uint64_t ticks);

uint32_t ceil_ip_file_named(const char *path, unsigned api, uint64_t ticks)
{
    const int saved = errno;
    const uint32_t fid = file_named(path, api, ticks);
    errno = saved;
    return fid;
}

static uint32_t file_named(const char *path, unsigned api, uint64_t ticks)
{
    file_counters *c = ceil_ip_block(&file_module);
    if (!c || !path)
        return 0;
    /* ROMIO's "ufs:", "lustre:", "nfs:" ... prefixes name the driver, not the file */
    const char *p = path;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))
        p++;
    if (*p == ':' && p - path >= 2)
        path = p + 1;
    file_id id;
    char abs[4096];
    if (!file_stat(AT_FDCWD, path, 0, &id) || !ceil_ip_absolute_path(AT_FDCWD, path, abs, sizeof abs))
        return 0;
    const uint32_t fid = record_of(abs, &id, 1);
    if (fid) {
        file_entry *e = entry_in(c, fid);
        ceil_ip_add(&e->n[FC_opens], 1);
        ceil_ip_add(&e->n[FC_meta_ns], ticks);
        e->api |= api;
    }
    return fid;
}

void ceil_ip_file_io_id(uint32_t fid, int write, uint64_t bytes, uint64_t ticks, unsigned api)
{
    file_counters *c = fid ? ceil_ip_block(&file_module) : NULL;
    if (!c)
        return;
    file_entry *e = entry_in(c, fid);
    ceil_ip_add(&e->n[write ? FC_writes : FC_reads], 1);
    ceil_ip_add(&e->n[write ? FC_write_bytes : FC_read_bytes], bytes);
    ceil_ip_add(&e->n[write ? FC_write_ns : FC_read_ns], ticks);
    e->api |= api;
}

void ceil_ip_file_sync_id(uint32_t fid, uint64_t ticks)
{
    file_counters *c = fid ? ceil_ip_block(&file_module) : NULL;
    if (!c)
        return;
    file_entry *e = entry_in(c, fid);
    ceil_ip_add(&e->n[FC_syncs], 1);
    ceil_ip_add(&e->n[FC_sync_ns], ticks);
}

/* ---- the module ---------------------------------------------------------------- */

/* The child of fork() counts for itself (interpose.h): its files keep their
 * records and its descriptors their map, but no counts; a record another
 * thread was filling will never be finished there. */
static void file_at_fork_child(void)
{
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++) {
        file_rec *r = &files[i];
        if (r->state == FR_EMPTY)
            continue;             /* all zero: read, not written, so its page is not copied */
        if (r->state == FR_CLAIMED)
            r->state = FR_DEAD;
        memset(r->n, 0, sizeof r->n);
        r->api = 0;
        r->recreated = 0;
        r->oflags = 0;
        r->map_prot = 0;
        r->first_ns = r->last_ns = 0;
    }
    /* what the child holds open it has had since the fork */
    const uint64_t now = ceil_ip_now_ns();
    for (int fd = 0; fd < CEIL_IP_FD_MAP; fd++) {
        const uint32_t fid = fid_of(fd);
        if (fid) {
            files[fid - 1].first_ns = now;
            files[fid - 1].oflags |= fdflags[fd];
        }
    }
    files_lost = 0;
    ceil_ip_file_async_forget();
}

static int file_init(ceil_ip_module *self)
{
    (void)self;
    pthread_atfork(NULL, NULL, file_at_fork_child);
    return 0;
}

/* File fid's counts: its record's, with what threads still hold in their
 * caches (a file's entry in a cache is at fid % FILE_CACHE, so one per
 * thread); *api the APIs that reached it. */
static void file_sums(ceil_ip_module *self, uint32_t fid, uint64_t s[FC_N], uint32_t *api)
{
    const file_rec *r = &files[fid - 1];
    for (int k = 0; k < FC_N; k++)
        s[k] = __atomic_load_n(&r->n[k], __ATOMIC_RELAXED);
    *api = __atomic_load_n(&r->api, __ATOMIC_RELAXED);
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const file_counters *c = ceil_ip_block_of(self, t);
        const file_entry *e = c ? &c->e[fid % FILE_CACHE] : NULL;
        if (!e || ceil_ip_read(&e->fid) != fid)
            continue;
        for (int k = 0; k < FC_CACHED; k++) {
            const uint64_t v = ceil_ip_read(&e->n[k]);
            s[k] = k == FC_extent ? (v > s[k] ? v : s[k]) : s[k] + v;
        }
        *api |= (uint32_t)ceil_ip_read(&e->api);
    }
}

/* Whether record i is shown: finished, and counted something. */
static int file_shown(ceil_ip_module *self, int i, uint64_t s[FC_N], uint32_t *api)
{
    if (__atomic_load_n(&files[i].state, __ATOMIC_ACQUIRE) != FR_READY)
        return 0;
    file_sums(self, (uint32_t)i + 1, s, api);
    for (int k = 0; k < FC_N; k++)
        if (s[k])
            return 1;
    return 0;
}

/* May run in a signal handler: no allocation, no lock. The sums are made per
 * file as it is written, twice (the count comes first), so that no scratch of
 * every record's counts (70 KiB) is written: a table page the program never
 * made a record on stays untouched, and out of its resident memory. */
static void file_report(ceil_ip_module *self, ceil_ip_out *out)
{
    static uint8_t open_now[CEIL_IP_FILES_MAX / 8];
    memset(open_now, 0, sizeof open_now);
    for (int fd = 0; fd < CEIL_IP_FD_MAP; fd++) {
        const uint32_t fid = fid_of(fd);
        if (fid && fid <= CEIL_IP_FILES_MAX)
            open_now[(fid - 1) / 8] |= (uint8_t)(1u << ((fid - 1) % 8));
    }
    /* the streams' buffers glibc's exit writes out after this record, by file */
    static uint64_t pend_n[CEIL_IP_FILES_MAX], pend_b[CEIL_IP_FILES_MAX];
    static int pend_fd[CEIL_IP_FD_MAP];
    static uint64_t pend_bytes[CEIL_IP_FD_MAP];
    memset(pend_n, 0, sizeof pend_n);
    memset(pend_b, 0, sizeof pend_b);
    const int pending = ceil_ip_stdio_pending(pend_fd, pend_bytes, CEIL_IP_FD_MAP);
    for (int i = 0; i < pending; i++) {
        const uint32_t fid = fid_of(pend_fd[i]);
        if (fid && fid <= CEIL_IP_FILES_MAX) {
            pend_n[fid - 1] += 1;
            pend_b[fid - 1] += pend_bytes[i];
        }
    }
    uint64_t s[FC_N];
    uint32_t api;
    uint64_t shown = 0;
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++)
        shown += (uint64_t)file_shown(self, i, s, &api);
    const uint64_t now = ceil_ip_now_ns();
    const uint32_t async = ceil_ip_file_async_seen();
    ceil_ip_line(out, self);
    CEIL_IP_PUT_U64(out, files, shown);
    CEIL_IP_PUT_U64(out, lost, __atomic_load_n(&files_lost, __ATOMIC_RELAXED));
    CEIL_IP_PUT_U64(out, max, CEIL_IP_FILES_MAX);
    CEIL_IP_PUT_U64(out, io_uring, (async & CEIL_IP_ASYNC_IO_URING) != 0);
    CEIL_IP_PUT_U64(out, aio, (async & CEIL_IP_ASYNC_AIO) != 0);
    const double tick_ns = ceil_ip_ns_per_tick();
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++) {
        if (!file_shown(self, i, s, &api))
            continue;
        const file_rec *r = &files[i];
        const int is_open = (open_now[i / 8] >> (i % 8)) & 1;
        ceil_ip_line(out, self);
        CEIL_IP_PUT_U64(out, id, (uint64_t)i + 1);
        CEIL_IP_PUT_U64(out, dev, __atomic_load_n(&r->dev, __ATOMIC_RELAXED));
        CEIL_IP_PUT_U64(out, ino, __atomic_load_n(&r->ino, __ATOMIC_RELAXED));
        CEIL_IP_PUT_U64(out, blksize, r->blksize);
        CEIL_IP_PUT_U64(out, api, api);
        for (int k = 0; k < FC_N; k++)
            ceil_ip_put_u64(out, fc_names[k], FC_IS_TICKS(k) ? ceil_ip_ticks_ns(s[k], tick_ns) : s[k]);
        CEIL_IP_PUT_U64(out, stdio_pending_writes, pend_n[i]);
        CEIL_IP_PUT_U64(out, stdio_pending_write_bytes, pend_b[i]);
        CEIL_IP_PUT_U64(out, recreated, __atomic_load_n(&r->recreated, __ATOMIC_RELAXED));
        CEIL_IP_PUT_U64(out, oflags, __atomic_load_n(&r->oflags, __ATOMIC_RELAXED));
        CEIL_IP_PUT_U64(out, map_prot, __atomic_load_n(&r->map_prot, __ATOMIC_RELAXED));
        CEIL_IP_PUT_U64(out, first_open_ns, __atomic_load_n(&r->first_ns, __ATOMIC_RELAXED));
        CEIL_IP_PUT_U64(out, last_close_ns, is_open ? now : __atomic_load_n(&r->last_ns, __ATOMIC_RELAXED));
        CEIL_IP_PUT_STR(out, path, r->path);
    }
}

static ceil_ip_module file_module = {
    .name = "file",
    .version = 3,
    .block_bytes = sizeof(file_counters),
    .init = file_init,
    .report = file_report,
};
CEIL_IP_MODULE(file_module);
