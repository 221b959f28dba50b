/* mpi_gather.c - every rank's record to one rank at MPI_Finalize, for
 * `mpirun -n N ceiling profile -- ./app`: each rank runs under a ceiling of
 * its own, with a record file of its own on its own node, and the ceiling of
 * the lowest rank that can write its file reports them all.
 *
 * Only when ceiling asks (CEILING_INTERPOSE_GATHER=1, which it sets in every
 * rank it wraps): the gather is two collectives on MPI_COMM_WORLD inside
 * MPI_Finalize, and a rank without this library (a launcher that did not
 * pass LD_PRELOAD on) would leave the others waiting in them forever. So an
 * express launch (`ceiling profile -- mpirun ...`) never gathers.
 *
 * Each rank gives, in one MPI_Iallgather of a fixed-size slot (waited for
 * 30 s at most: agree below): its record's
 * length, a hash of its record path's pattern, and whether that path's
 * directory exists here. When every rank writes to the same pattern and
 * every one's directory exists, they already share one directory: nothing
 * is gathered. Otherwise the lowest rank whose directory exists receives
 * every record (MPI_Gatherv of bytes, once it has said with MPI_Bcast that it
 * could map the space) and appends the others' to its own file; its own
 * follows from the checkpoint, as on every rank. When every rank's slot
 * says it records a trace (`mpirun -n N ceiling trace`), the event files
 * follow, to rank 0 (mpi_trace.c). Buffers are
 * mmap'ed here (no malloc inside the program's MPI_Finalize) and unmapped.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "mpi.h"
#include "mpi_trace.h"
#include "record.h"

typedef int (*iallgather_fn)(const void *, int, mpi_h, void *, int, mpi_h, mpi_h, void *);
typedef int (*test_fn)(void *, int *, void *);
typedef int (*gatherv_fn)(const void *, int, mpi_h, void *, const int *, const int *, mpi_h, int, mpi_h);
typedef int (*bcast_fn)(void *, int, mpi_h, int, mpi_h);

typedef struct slot {
    uint64_t len, pattern;
    uint64_t here;
    uint64_t trace;                   /* 1: this rank records a trace (mpi_trace.c gathers it) */
} slot;

int mpi_gather_wanted(void)
{
    const char *v = getenv("CEILING_INTERPOSE_GATHER");
    return v && v[0] == '1' && v[1] == '\0';
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Whether the directory of this process's record file exists and is writable here. */
static int directory_here(void)
{
    char path[PATH_MAX];
    if (ceil_ip_expand_path_(path, sizeof path, ceil_ip_out_pattern(), getpid()) != 0)
        return 0;
    char *slash = strrchr(path, '/');
    if (!slash)
        return access(".", W_OK) == 0;
    *slash = '\0';
    return access(path[0] ? path : "/", W_OK) == 0;
}

static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

#define SPIN_NS 20000
#define YIELD_NS 1000000
int mpi_wait(int (*test)(void *, int *, void *), uint64_t *req, uint64_t deadline)
{
    _Alignas(16) char status[MPI_STATUS_BYTES];
    const uint64_t start = ceil_ip_now_ns();
    const struct timespec pause = {0, 20000};
    for (;;) {
        int done = 0;
        if (test(req, &done, status) != 0)
            return 0;
        if (done)
            return 1;
        const uint64_t now = ceil_ip_now_ns();
        if (now > deadline)
            return -1;
        if (now - start > YIELD_NS)
            nanosleep(&pause, NULL);
        else if (now - start > SPIN_NS)
            sched_yield();
    }
}

/* The first collective, with a deadline: a rank that never comes (its
 * ceiling did not wrap it, its runtime is off) must not hold the others in
 * MPI_Finalize forever. Once every rank has come, the rest is decided from
 * the same slots everywhere, so the later collectives all meet. On the
 * deadline the request is left behind (a collective cannot be cancelled)
 * and this rank goes on, saying `failed`. Also the clocks' agreement at
 * MPI_Init (mpi_clock.c). */
#define AGREE_S 30
int mpi_agree(const void *mine, void *all, int bytes, void *caller, const char *failed)
{
    iallgather_fn iallgather = (iallgather_fn)ceil_ip_lookup("PMPI_Iallgather", caller);
    test_fn test = (test_fn)ceil_ip_lookup("PMPI_Test", caller);
    mpi_h world, byte;
    int rank, size;
    uint64_t req[2] = {0, 0};          /* an MPI_Request: an int or a pointer */
    if (!iallgather || !test || !mpi_world(&world, &byte, &rank, &size)
        || iallgather(mine, bytes, byte, all, bytes, byte, world, req) != 0)
        return 0;
    const int got = mpi_wait(test, req, ceil_ip_now_ns() + (uint64_t)AGREE_S * 1000000000u);
    if (got < 0)
        ceil_ip_say(failed, NULL);
    return got == 1;
}

/* The records to the lowest rank whose directory exists, unless they share one (every rank alike). */
static void gather_records(const char *text, size_t len, const slot *all, int *counts, int rank, int size,
                           gatherv_fn gatherv, bcast_fn bcast, mpi_h byte, mpi_h world)
{
    int target = -1, shared = 1;
    uint64_t total = 0;
    for (int r = 0; r < size; r++) {
        if (target < 0 && all[r].here)
            target = r;
        shared &= all[r].here && all[r].pattern == all[0].pattern;
        total += all[r].len;
    }
    /* Every rank sees the same slots and makes the same choice. */
    if (target < 0 || shared || total > INT_MAX) {
        if (rank == 0 && total > INT_MAX)
            ceil_ip_say("the ranks' records are over 2 GiB: not gathered", NULL);
        return;
    }
    int *displs = counts + size;
    for (int r = 0, at = 0; r < size; r++) {
        counts[r] = (int)all[r].len;
        displs[r] = at;
        at += counts[r];
    }
    /* The target says whether it could map the space; all go on or stop together. */
    char *buf = rank == target ? map((size_t)total) : NULL;
    char ready = buf != NULL;
    if (bcast(&ready, 1, byte, target, world) != 0 || !ready) {
        if (buf)
            munmap(buf, (size_t)total);
        return;
    }
    char none;
    int rc = gatherv(text, (int)len, byte, buf ? buf : &none, counts, displs, byte, target, world);
    if (buf && rc == 0) {
        ceil_ip_append(buf, (size_t)displs[rank]);                          /* the ranks before this one */
        const size_t after = (size_t)displs[rank] + (size_t)counts[rank];
        ceil_ip_append(buf + after, (size_t)total - after);                  /* and after it */
    }
    if (buf)
        munmap(buf, (size_t)total);
}

void mpi_gather_records(const char *text, size_t len, void *arg)
{
    mpi_h world, byte;
    int rank, size;
    iallgather_fn iallgather = (iallgather_fn)ceil_ip_lookup("PMPI_Iallgather", arg);
    test_fn test = (test_fn)ceil_ip_lookup("PMPI_Test", arg);
    gatherv_fn gatherv = (gatherv_fn)ceil_ip_lookup("PMPI_Gatherv", arg);
    bcast_fn bcast = (bcast_fn)ceil_ip_lookup("PMPI_Bcast", arg);
    if (!mpi_world(&world, &byte, &rank, &size) || size < 2 || !iallgather || !test || !gatherv || !bcast)
        return;
    const size_t slots_bytes = (size_t)size * sizeof(slot), ints_bytes = 2 * (size_t)size * sizeof(int);
    slot *all = map(slots_bytes);
    int *counts = map(ints_bytes);
    if (!all || !counts) {
        /* every rank must take part in the collectives: an empty slot, then out */
        ceil_ip_say("cannot map the gather's buffers; this rank's record stays on its node", NULL);
        if (all)
            munmap(all, slots_bytes);
        if (counts)
            munmap(counts, ints_bytes);
        return;    /* the others then wait: only where a small mmap fails, which leaves little else working */
    }
    const slot mine = {len, fnv1a(ceil_ip_out_pattern()), (uint64_t)directory_here(), ceil_ip_trace_dir_() != NULL};
    if (!mpi_agree(&mine, all, (int)sizeof mine, arg, "the ranks' records were not gathered: not every rank "
                   "reached MPI_Finalize under ceiling within 30 s"))
        goto out;
    gather_records(text, len, all, counts, rank, size, gatherv, bcast, byte, world);
    /* every rank decides alike from the same slots: the trace's files when every rank traces */
    int traced = 1;
    for (int r = 0; r < size; r++)
        traced &= all[r].trace == 1;
    if (traced)
        mpi_trace_gather(world, byte, rank, size, arg);
out:
    munmap(all, slots_bytes);
    munmap(counts, ints_bytes);
}
