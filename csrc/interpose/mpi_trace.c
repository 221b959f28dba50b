/* mpi_trace.c - every rank's trace to rank 0 at MPI_Finalize, for
 * `mpirun -n N ceiling trace -- ./app` (issue 28): each rank's ceiling
 * keeps its events in a directory of its own, on its own node, and rank 0's
 * ceiling writes the one Perfetto trace. Called by mpi_gather.c once every
 * rank has come to the gather and said it traces (so every rank is here),
 * after the trace's pending events were written out (interpose.c's
 * checkpoint flushes them before the gather).
 *
 * Point to point on a duplicate of MPI_COMM_WORLD (no message of the
 * program's can match ours): rank 0 takes the ranks in order; each other
 * rank sends, for each of its directory's trace-*.bin, trace-*.regions and
 * trace-*.comms files (its own threads' and those of its child processes written so
 * far), a head (name, size then), the file in chunks of at most 1 MiB, and
 * an empty chunk; then a head marked last. Memory stays one chunk's buffer,
 * mmap'ed (no malloc inside the program's MPI_Finalize). Rank 0 writes each
 * file into its own directory under its name with -r<rank> before the
 * extension (pids of two nodes may be equal), and one line per rank into
 * trace-gathered ("rank=R files=N bytes=B unwritten=U"); each sender
 * writes trace-sent ("NAME BYTES" per file sent) in its own directory, so
 * that its ceiling counts what it recorded after this (its MPI_Finalize's
 * end, its exit: rank 0 never gets those) and says so. Only raw system
 * calls touch the files.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "mpi_trace.h"

#define CHUNK (1u << 20)
#define TAG 7731

typedef int (*dup_fn)(mpi_h, mpi_h *);
typedef int (*free_fn)(mpi_h *);
typedef int (*send_fn)(const void *, int, mpi_h, int, int, mpi_h);
typedef int (*recv_fn)(void *, int, mpi_h, int, int, mpi_h, void *);
typedef int (*count_fn)(const void *, mpi_h, int *);

typedef struct head {
    uint64_t size, last;
    char name[240];
} head;

typedef struct dirent64_ {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
} dirent64_;

static int ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static int wanted(const char *name)
{
    return strncmp(name, "trace-", 6) == 0 && strchr(name, '/') == NULL && strlen(name) < sizeof(((head *)0)->name)
           && (ends_with(name, ".bin") || ends_with(name, ".regions") || ends_with(name, ".comms"));
}

static void put_num(char *p, uint64_t v)
{
    char t[24];
    int k = 0;
    do t[k++] = (char)('0' + v % 10); while ((v /= 10) && k < 24);
    while (k)
        *p++ = t[--k];
    *p = '\0';
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        long w = syscall(SYS_write, fd, p, n);
        if (w <= 0)
            return;
        p += w, n -= (size_t)w;
    }
}

static int open_in(const char *dir, const char *name, int flags)
{
    char path[4096];
    if (strlen(dir) + strlen(name) + 2 > sizeof path)
        return -1;
    strcpy(path, dir);
    strcat(path, "/");
    strcat(path, name);
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* One file: its head, its bytes up to its size now, an empty chunk. Returns the bytes sent. */
static uint64_t send_file(const char *dir, const char *name, char *buf, send_fn send, mpi_h byte, mpi_h comm)
{
    head h;
    memset(&h, 0, sizeof h);
    strcpy(h.name, name);
    const int fd = open_in(dir, name, O_RDONLY);
    struct stat st;
    if (fd >= 0 && syscall(SYS_fstat, fd, &st) == 0)
        h.size = (uint64_t)st.st_size;
    send(&h, (int)sizeof h, byte, 0, TAG, comm);
    uint64_t sent = 0;
    while (fd >= 0 && sent < h.size) {
        const size_t want = h.size - sent < CHUNK ? (size_t)(h.size - sent) : CHUNK;
        const long n = syscall(SYS_pread64, fd, buf, want, (off_t)sent);
        if (n <= 0)
            break;
        send(buf, (int)n, byte, 0, TAG, comm);
        sent += (uint64_t)n;
    }
    send(buf, 0, byte, 0, TAG, comm);
    if (fd >= 0)
        syscall(SYS_close, fd);
    return sent;
}

static void send_all(const char *dir, char *buf, char *ents, send_fn send, mpi_h byte, mpi_h comm)
{
    const int d = (int)syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int said = open_in(dir, "trace-sent", O_WRONLY | O_CREAT | O_TRUNC);
    for (long got; d >= 0 && (got = syscall(SYS_getdents64, d, ents, CHUNK)) > 0;)
        for (long at = 0; at < got;) {
            const dirent64_ *e = (const dirent64_ *)(ents + at);
            at += e->reclen;
            if (!wanted(e->name))
                continue;
            const uint64_t n = send_file(dir, e->name, buf, send, byte, comm);
            if (said >= 0) {
                char line[sizeof(((head *)0)->name) + 32], num[24];
                strcpy(line, e->name);
                strcat(line, " ");
                put_num(num, n);
                strcat(line, num);
                strcat(line, "\n");
                write_all(said, line, strlen(line));
            }
        }
    head last;
    memset(&last, 0, sizeof last);
    last.last = 1;
    send(&last, (int)sizeof last, byte, 0, TAG, comm);
    if (said >= 0)
        syscall(SYS_close, said);
    if (d >= 0)
        syscall(SYS_close, d);
}

/* Rank r's files into dir, named with -r<r> before the extension; one line into trace-gathered. */
static void receive_rank(const char *dir, int r, char *buf, recv_fn recv, count_fn count, mpi_h byte,
                         mpi_h comm, int gathered)
{
    _Alignas(16) char status[MPI_STATUS_BYTES];
    uint64_t files = 0, bytes = 0, unwritten = 0;
    for (;;) {
        head h;
        if (recv(&h, (int)sizeof h, byte, r, TAG, comm, status) != 0 || h.last)
            break;
        h.name[sizeof h.name - 1] = '\0';
        int fd = -1;
        if (wanted(h.name)) {
            char name[sizeof h.name + 32], num[24];
            char *dot = strrchr(h.name, '.');
            strcpy(name, h.name);
            name[dot - h.name] = '\0';
            strcat(name, "-r");
            put_num(num, (uint64_t)r);
            strcat(name, num);
            strcat(name, dot);
            fd = open_in(dir, name, O_WRONLY | O_CREAT | O_EXCL);
        }
        files++;
        for (;;) {               /* every chunk is received, written or not: the sender goes on */
            int n = 0;
            if (recv(buf, (int)CHUNK, byte, r, TAG, comm, status) != 0 || count(status, byte, &n) != 0 || n <= 0)
                break;
            bytes += (uint64_t)n;
            if (fd < 0) {
                unwritten += (uint64_t)n;
                continue;
            }
            const char *p = buf;
            size_t left = (size_t)n;
            while (left > 0) {
                long w = syscall(SYS_write, fd, p, left);
                if (w <= 0)
                    break;
                p += w, left -= (size_t)w;
            }
            unwritten += left;
        }
        if (fd >= 0)
            syscall(SYS_close, fd);
    }
    if (unwritten)
        ceil_ip_say("rank 0 could not write part of another rank's trace events (a full disk?); said in the trace", NULL);
    if (gathered >= 0) {
        char line[160], num[24];
        strcpy(line, "rank=");
        put_num(num, (uint64_t)r);
        strcat(line, num);
        strcat(line, " files=");
        put_num(num, files);
        strcat(line, num);
        strcat(line, " bytes=");
        put_num(num, bytes);
        strcat(line, num);
        strcat(line, " unwritten=");
        put_num(num, unwritten);
        strcat(line, num);
        strcat(line, "\n");
        write_all(gathered, line, strlen(line));
    }
}

void mpi_trace_gather(mpi_h world, mpi_h byte, int rank, int size, void *arg)
{
    const char *dir = ceil_ip_trace_dir_();
    dup_fn dup = (dup_fn)ceil_ip_lookup("PMPI_Comm_dup", arg);
    free_fn cfree = (free_fn)ceil_ip_lookup("PMPI_Comm_free", arg);
    send_fn send = (send_fn)ceil_ip_lookup("PMPI_Send", arg);
    recv_fn recv = (recv_fn)ceil_ip_lookup("PMPI_Recv", arg);
    count_fn count = (count_fn)ceil_ip_lookup("PMPI_Get_count", arg);
    /* every rank has these or none (one library); the directory every rank has (mpi_gather.c asked) */
    if (!dir || !dup || !cfree || !send || !recv || !count)
        return;
    mpi_h comm = 0;
    if (dup(world, &comm) != 0)
        return;
    const size_t bytes = rank == 0 ? CHUNK : 2 * (size_t)CHUNK;
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        /* the others then wait for this rank's messages: only where a 2 MiB mmap fails */
        ceil_ip_say("cannot map the trace gather's buffer; this rank's events stay on its node", NULL);
        cfree(&comm);
        return;
    }
    if (rank == 0) {
        const int gathered = open_in(dir, "trace-gathered", O_WRONLY | O_CREAT | O_APPEND);
        for (int r = 1; r < size; r++)
            receive_rank(dir, r, buf, recv, count, byte, comm, gathered);
        if (gathered >= 0)
            syscall(SYS_close, gathered);
    } else {
        send_all(dir, buf, buf + CHUNK, send, byte, comm);
    }
    munmap(buf, bytes);
    cfree(&comm);
}
