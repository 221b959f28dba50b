/* files.c - the "file" module: one record per file the program read or
 * wrote through the POSIX or stdio calls the other modules wrap, like
 * Darshan's per-file records (files.h has the interface and the model).
 *
 * Its record lines (interpose.h has the format around them):
 *
 *     module name=file version=1 enabled=1
 *     file files=2 lost=0 max=512
 *     file id=1 dev=2049 ino=393220 blksize=4096 api=1 opens=1 meta_ns=8120 reads=0 read_bytes=0 read_ns=0
 *          writes=256 write_bytes=268435456 write_ns=91234567 random=0 unaligned=0 syncs=1
 *          sync_ns=402311 extent=268435456 path=/scratch/out.dat
 *     ...
 *
 * (a file line is one line.) files: the records that follow (files the
 * process opened, read, wrote or synced); lost: distinct files that found
 * no record (more than max = CEIL_IP_FILES_MAX, or a full probe sequence)
 * and are counted only in the POSIX and stdio totals. Per file: id (the
 * record's slot, 1-based; two threads meeting a new file at the same
 * moment may make two records of it, which a reader merges by dev and
 * ino); dev and ino (st_dev, st_ino: the same file under two paths is one
 * record, and processes on one node that share a file name the same
 * pair); blksize (st_blksize, the alignment the file system prefers);
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
 * syncs: fsync and fdatasync calls; extent: one past the highest byte a
 * POSIX access with a known offset moved (a pread's or pwrite's, or a read
 * or write at a position the thread knows: after the open or an lseek, not
 * after a pread or pwrite, which leave the position where it was); path: as the program opened
 * it when absolute, else /proc/self/fd's link (a relative path, a
 * descriptor met without its open), at most FILE_PATH_BYTES - 1
 * bytes (longer ones keep their end, after "...").
 *
 * Not seen: a descriptor at or above CEIL_IP_FD_MAP; dup, dup2 and fcntl
 * copies are met as unknown descriptors and mapped then, but a number
 * that dup2 replaces keeps its old file until it is closed through close;
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "files.h"
#include "interpose.h"

#define FILE_PATH_BYTES 240
#define FILE_CACHE 64           /* per-thread entries, by file id modulo */
#define FILE_PROBES 64          /* slots tried before a file is lost */
#define FID_NONE UINT32_MAX     /* descriptor seen: not a file, or no record */

/* The counts of one file (FC_EXTENT is a maximum, the rest sums). */
enum { FC_OPENS, FC_META_TICKS, FC_READS, FC_READ_BYTES, FC_READ_TICKS, FC_WRITES, FC_WRITE_BYTES, FC_WRITE_TICKS,
       FC_RANDOM, FC_UNALIGNED, FC_SYNCS, FC_SYNC_TICKS, FC_EXTENT, FC_N };
static const char *const fc_names[FC_N] = {"opens", "meta_ns", "reads", "read_bytes", "read_ns", "writes",
                                          "write_bytes", "write_ns", "random", "unaligned", "syncs", "sync_ns",
                                          "extent"};
#define FC_IS_TICKS(k) ((k) == FC_META_TICKS || (k) == FC_READ_TICKS || (k) == FC_WRITE_TICKS || (k) == FC_SYNC_TICKS)

enum { FR_EMPTY = 0, FR_CLAIMED, FR_READY, FR_DEAD };

typedef struct file_rec {
    uint32_t state;             /* FR_*: EMPTY -> CLAIMED (one thread fills it) -> READY */
    uint32_t api;
    uint64_t dev, ino, blksize;
    uint64_t n[FC_N];           /* what threads folded in */
    char path[FILE_PATH_BYTES];
} file_rec;

/* One thread's cache entry: a file id (0 = free) and its counts since the
 * last fold. The block is nothing but uint64_t. */
typedef struct file_entry {
    uint64_t fid, api, n[FC_N];
} file_entry;

typedef struct file_counters {
    file_entry e[FILE_CACHE];
} file_counters;

_Static_assert(sizeof(file_counters) <= CEIL_IP_MAX_BLOCK, "file block too large");

static file_rec files[CEIL_IP_FILES_MAX];
static uint32_t fdmap[CEIL_IP_FD_MAP];  /* 0 = not seen, FID_NONE, else 1 + the record's slot */
static uint64_t files_lost;
static uint64_t report_sum[CEIL_IP_FILES_MAX][FC_N];   /* the report's scratch: no stack of 48 KiB */
static uint32_t report_api[CEIL_IP_FILES_MAX];

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

/* fd's link in /proc/self/fd, without stdio (no allocation). */
static void proc_path(int fd, char *out, size_t len)
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

/* The record of (dev, ino), made when there is none: 1 + its slot, or 0
 * when none is free within FILE_PROBES slots. Wait-free: a slot another
 * thread is filling is passed over (a possible duplicate, see the top). */
static uint32_t record_of(const struct stat *st, const char *path, int fd)
{
    const uint64_t dev = (uint64_t)st->st_dev, ino = (uint64_t)st->st_ino;
    uint64_t h = (dev * 0x9E3779B97F4A7C15ULL) ^ (ino * 0xC2B2AE3D27D4EB4FULL);
    h ^= h >> 29;
    for (unsigned i = 0; i < FILE_PROBES; i++) {
        const uint32_t slot = (uint32_t)((h + i) % CEIL_IP_FILES_MAX);
        file_rec *r = &files[slot];
        uint32_t s = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
        if (s == FR_EMPTY) {
            uint32_t expect = FR_EMPTY;
            if (__atomic_compare_exchange_n(&r->state, &expect, FR_CLAIMED, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                r->dev = dev;
                r->ino = ino;
                r->blksize = st->st_blksize > 0 ? (uint64_t)st->st_blksize : 0;
                if (path && path[0] == '/')
                    copy_path(r->path, path);
                else {
                    char buf[4096];
                    proc_path(fd, buf, sizeof buf);
                    copy_path(r->path, buf);
                }
                __atomic_store_n(&r->state, FR_READY, __ATOMIC_RELEASE);
                return slot + 1;
            }
            s = expect;
        }
        if (s == FR_READY && r->dev == dev && r->ino == ino)
            return slot + 1;
    }
    __atomic_fetch_add(&files_lost, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Map fd (below CEIL_IP_FD_MAP) to its file, asking the kernel once. */
static uint32_t map_fd(int fd, const char *path)
{
    struct stat st;
    uint32_t fid = FID_NONE;
    if (syscall(SYS_fstat, fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
        const uint32_t f = record_of(&st, path, fd);
        fid = f ? f : FID_NONE;
    }
    __atomic_store_n(&fdmap[fd], fid, __ATOMIC_RELAXED);
    return fid;
}

/* The calling thread's entry for fd's file, NULL when fd is no file with a
 * record or the thread is not counting. Keeps errno. */
static file_entry *entry_in(file_counters *c, uint32_t fid);

static file_entry *entry_of(int fd, const char *path, int opened)
{
    if ((unsigned)fd >= CEIL_IP_FD_MAP)
        return NULL;
    file_counters *c = ceil_ip_block(&file_module);
    if (!c)
        return NULL;
    uint32_t fid = __atomic_load_n(&fdmap[fd], __ATOMIC_RELAXED);
    if (fid == 0 || opened) {
        const int saved = errno;
        fid = map_fd(fd, path);
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
            for (int k = 0; k < FC_N; k++) {
                const uint64_t v = ceil_ip_read(&e->n[k]);
                if (k == FC_EXTENT) {
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

void ceil_ip_file_opened(int fd, const char *path, unsigned api, uint64_t ticks)
{
    file_entry *e = fd >= 0 ? entry_of(fd, path, 1) : NULL;
    if (e) {
        ceil_ip_add(&e->n[FC_OPENS], 1);
        ceil_ip_add(&e->n[FC_META_TICKS], ticks);
        e->api |= api;
    }
}

void ceil_ip_file_closed(int fd, uint64_t ticks)
{
    if ((unsigned)fd >= CEIL_IP_FD_MAP)
        return;
    /* a descriptor never mapped is not looked up now: it is closed */
    file_entry *e = ticks && __atomic_load_n(&fdmap[fd], __ATOMIC_RELAXED) ? entry_of(fd, NULL, 0) : NULL;
    if (e)
        ceil_ip_add(&e->n[FC_META_TICKS], ticks);
    __atomic_store_n(&fdmap[fd], 0, __ATOMIC_RELAXED);
}

void ceil_ip_file_io(int fd, int write, uint64_t bytes, uint64_t ticks, int random, int64_t offset, unsigned api)
{
    file_entry *e = entry_of(fd, NULL, 0);
    if (!e)
        return;
    ceil_ip_add(&e->n[write ? FC_WRITES : FC_READS], 1);
    ceil_ip_add(&e->n[write ? FC_WRITE_BYTES : FC_READ_BYTES], bytes);
    ceil_ip_add(&e->n[write ? FC_WRITE_TICKS : FC_READ_TICKS], ticks);
    ceil_ip_add(&e->n[FC_RANDOM], (uint64_t)random);
    if (offset >= 0 && bytes > 0) {
        const uint64_t bs = files[e->fid - 1].blksize;
        ceil_ip_add(&e->n[FC_UNALIGNED], bs && (uint64_t)offset % bs != 0);
        if ((uint64_t)offset + bytes > e->n[FC_EXTENT])
            __atomic_store_n(&e->n[FC_EXTENT], (uint64_t)offset + bytes, __ATOMIC_RELAXED);
    }
    if (!(e->api & api))
        e->api |= api;
}

void ceil_ip_file_sync(int fd, uint64_t ticks)
{
    file_entry *e = entry_of(fd, NULL, 0);
    if (e) {
        ceil_ip_add(&e->n[FC_SYNCS], 1);
        ceil_ip_add(&e->n[FC_SYNC_TICKS], ticks);
    }
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
    struct stat st;
    const long rc = syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0);
    if (rc != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
        return 0;
    char abs[4096];
    if (path[0] != '/') {
        /* relative to where the program is now: made absolute without the cwd's wrapper */
        const long n = syscall(SYS_getcwd, abs, sizeof abs - 1);
        size_t len = n > 0 ? strlen(abs) : 0, pl = strlen(path);
        if (len == 0 || len + 1 + pl >= sizeof abs)
            return 0;
        abs[len] = '/';
        memcpy(abs + len + 1, path, pl + 1);
        path = abs;
    }
    const uint32_t fid = record_of(&st, path, -1);
    if (fid) {
        file_entry *e = entry_in(c, fid);
        ceil_ip_add(&e->n[FC_OPENS], 1);
        ceil_ip_add(&e->n[FC_META_TICKS], ticks);
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
    ceil_ip_add(&e->n[write ? FC_WRITES : FC_READS], 1);
    ceil_ip_add(&e->n[write ? FC_WRITE_BYTES : FC_READ_BYTES], bytes);
    ceil_ip_add(&e->n[write ? FC_WRITE_TICKS : FC_READ_TICKS], ticks);
    e->api |= api;
}

void ceil_ip_file_sync_id(uint32_t fid, uint64_t ticks)
{
    file_counters *c = fid ? ceil_ip_block(&file_module) : NULL;
    if (!c)
        return;
    file_entry *e = entry_in(c, fid);
    ceil_ip_add(&e->n[FC_SYNCS], 1);
    ceil_ip_add(&e->n[FC_SYNC_TICKS], ticks);
}

/* ---- the module ---------------------------------------------------------------- */

/* The child of fork() counts for itself (interpose.h): its files keep their
 * records and its descriptors their map, but no counts; a record another
 * thread was filling will never be finished there. */
static void file_at_fork_child(void)
{
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++) {
        file_rec *r = &files[i];
        if (r->state == FR_CLAIMED)
            r->state = FR_DEAD;
        memset(r->n, 0, sizeof r->n);
        r->api = 0;
    }
    files_lost = 0;
}

static int file_init(ceil_ip_module *self)
{
    (void)self;
    pthread_atfork(NULL, NULL, file_at_fork_child);
    return 0;
}

/* May run in a signal handler: static scratch, no allocation, no lock. */
static void file_report(ceil_ip_module *self, ceil_ip_out *out)
{
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++) {
        for (int k = 0; k < FC_N; k++)
            report_sum[i][k] = __atomic_load_n(&files[i].n[k], __ATOMIC_RELAXED);
        report_api[i] = __atomic_load_n(&files[i].api, __ATOMIC_RELAXED);
    }
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const file_counters *c = ceil_ip_block_of(self, t);
        for (int j = 0; c && j < FILE_CACHE; j++) {
            const file_entry *e = &c->e[j];
            const uint64_t fid = ceil_ip_read(&e->fid);
            if (fid == 0 || fid > CEIL_IP_FILES_MAX)
                continue;
            uint64_t *s = report_sum[fid - 1];
            for (int k = 0; k < FC_N; k++) {
                const uint64_t v = ceil_ip_read(&e->n[k]);
                s[k] = k == FC_EXTENT ? (v > s[k] ? v : s[k]) : s[k] + v;
            }
            report_api[fid - 1] |= (uint32_t)ceil_ip_read(&e->api);
        }
    }
    uint64_t shown = 0;
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++) {
        int used = 0;
        for (int k = 0; k < FC_N; k++)
            used |= report_sum[i][k] != 0;
        if (__atomic_load_n(&files[i].state, __ATOMIC_ACQUIRE) == FR_READY && used)
            shown++;
        else
            report_api[i] = UINT32_MAX;   /* marks "not shown" below */
    }
    ceil_ip_line(out, self);
    ceil_ip_put_u64(out, "files", shown);
    ceil_ip_put_u64(out, "lost", __atomic_load_n(&files_lost, __ATOMIC_RELAXED));
    ceil_ip_put_u64(out, "max", CEIL_IP_FILES_MAX);
    const double tick_ns = ceil_ip_ns_per_tick();
    for (int i = 0; i < CEIL_IP_FILES_MAX; i++) {
        if (report_api[i] == UINT32_MAX)
            continue;
        const file_rec *r = &files[i];
        ceil_ip_line(out, self);
        ceil_ip_put_u64(out, "id", (uint64_t)i + 1);
        ceil_ip_put_u64(out, "dev", r->dev);
        ceil_ip_put_u64(out, "ino", r->ino);
        ceil_ip_put_u64(out, "blksize", r->blksize);
        ceil_ip_put_u64(out, "api", report_api[i]);
        for (int k = 0; k < FC_N; k++)
            ceil_ip_put_u64(out, fc_names[k], FC_IS_TICKS(k) ? ceil_ip_ticks_ns(report_sum[i][k], tick_ns)
                                                             : report_sum[i][k]);
        ceil_ip_put_str(out, "path", r->path);
    }
}

static ceil_ip_module file_module = {
    .name = "file",
    .version = 1,
    .block_bytes = sizeof(file_counters),
    .init = file_init,
    .report = file_report,
};
CEIL_IP_MODULE(file_module);
