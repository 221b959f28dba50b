/* mpi_clock.c - every rank's clock against world rank 0's, for a wrapped
 * launch's trace (`mpirun -n N ceiling trace -- ./app`, issue 28): the
 * events' times are each node's CLOCK_MONOTONIC, whose origin and rate
 * differ between nodes, so the reader (probes/interpose_clocks.py) maps
 * another node's times onto rank 0's with the offsets measured here.
 *
 * Score-P's way: right after the real MPI_Init (or MPI_Init_thread)
 * returns, and at the start of MPI_Finalize (before the gather), rank 0
 * takes the other ranks in turn and exchanges SYNC_ROUNDS ping-pongs with
 * each on a duplicate of MPI_COMM_WORLD (no message of the program's can
 * match ours): the rank notes its clock t1, sends, rank 0 answers with its
 * own clock t0 as it receives, the rank notes t2 on the answer. Rank 0's t0
 * fell between t1 and t2, so offset = t0 - (t1 + t2) / 2 is off by at most
 * (t2 - t1) / 2; each rank keeps its round with the smallest round trip.
 * The clock is the events' own (ceil_ip_now_ns, CLOCK_MONOTONIC). Every
 * rank records its measurement as a SYNC event of the thread that called
 * MPI_Init or MPI_Finalize (interpose.h has the fields), with the time the
 * sync took (the tracer's own time). Ranks on rank 0's boot (the kernel's
 * boot_id, exchanged at MPI_Init) share its clock exactly: they are
 * measured all the same (their offset must then lie within its stated
 * error, which the tests check), and the reader aligns them by nothing.
 *
 * Only in the wrapped launch (CEILING_INTERPOSE_GATHER=1, where every rank
 * carries this library; never under `ceiling trace -- mpirun`, mpi_gather.c
 * says why), and only when every rank traces: at MPI_Init an
 * MPI_Iallgather of {traces, boot} waited for 30 s at most (mpi_gather.c's
 * mpi_agree) decides that alike everywhere before the blocking
 * MPI_Comm_dup. The point-to-point waits are MPI_Test loops with a 30 s
 * deadline each, so a rank that ends without MPI_Finalize leaves the others
 * unaligned (said on stderr), not hung. (When rank 0 gives up at MPI_Init,
 * the ranks it had measured do not know it, and each waits those 30 s at
 * MPI_Finalize before giving up too: only after a rank failed to answer.) No malloc: the agreement's slots
 * are mmap'ed, the rest is on the stack.
 *
 * Cost: rank 0's loop is SYNC_ROUNDS round trips per rank, twice per run,
 * all of it the tracer's own time on each rank. Measured (MPICH 4, shared
 * memory, a 2-core KVM guest, a program doing MPI_Init, MPI_Barrier,
 * MPI_Finalize; medians of 7 runs, the longest rank's): 2 ranks 0.18 ms at
 * MPI_Init and 0.04 ms at MPI_Finalize, best round trips 1.5 us; 4 ranks on
 * the 2 cores 1.7 and 2.7 ms (with other work on the machine; 1.4 ms at
 * MPI_Finalize without), round trips up to 46 us; 8 ranks 5.7 and 6.2 ms,
 * up to 88 us. (With mpi_agree's wait then a 200 us sleep per poll, 2 ranks
 * took 0.64 ms at MPI_Init; mpi_wait spins and yields first.)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "mpi.h"
#include "mpi_trace.h"

#define SYNC_ROUNDS 10          /* ping-pongs per rank and measurement; the least round trip is kept */
#define SYNC_WAIT_S 30          /* a wait longer than this gives the sync up */
#define SYNC_TAG 7732

typedef int (*dup_fn)(mpi_h, mpi_h *);
typedef int (*free_fn)(mpi_h *);
typedef int (*isend_fn)(const void *, int, mpi_h, int, int, mpi_h, void *);
typedef int (*irecv_fn)(void *, int, mpi_h, int, int, mpi_h, void *);
typedef int (*test_fn)(void *, int *, void *);

typedef struct agreed {
    uint64_t traces, boot;
} agreed;

typedef struct stamp {
    int64_t ns;                 /* the sender's CLOCK_MONOTONIC */
    uint64_t round;
} stamp;

static mpi_h sync_comm;         /* the duplicate, from MPI_Init to MPI_Finalize's sync; 0: no sync */
static int32_t same_boot = -1;  /* this rank's boot is rank 0's: 1, another: 0, unknown: -1 */
static isend_fn isend;
static irecv_fn irecv;
static test_fn test;

/* Wait for one request (mpi_gather.c's mpi_wait: spin, yield, sleep): 1 done, 0 failed or past the deadline. */
static int wait_one(uint64_t *req, uint64_t deadline)
{
    return mpi_wait(test, req, deadline) == 1;
}

/* Rank 0: SYNC_ROUNDS answers to each other rank in turn. 0 when one did not come. */
static int serve(int size, mpi_h byte)
{
    for (int r = 1; r < size; r++)
        for (int i = 0; i < SYNC_ROUNDS; i++) {
            stamp in, out;
            uint64_t rq[2] = {0, 0}, sq[2] = {0, 0};
            const uint64_t deadline = ceil_ip_now_ns() + (uint64_t)SYNC_WAIT_S * 1000000000u;
            if (irecv(&in, (int)sizeof in, byte, r, SYNC_TAG, sync_comm, rq) != 0 || !wait_one(rq, deadline))
                return 0;
            out.ns = (int64_t)ceil_ip_now_ns();
            out.round = in.round;
            if (isend(&out, (int)sizeof out, byte, r, SYNC_TAG, sync_comm, sq) != 0 || !wait_one(sq, deadline))
                return 0;
        }
    return 1;
}

/* Another rank: its rounds with rank 0; the best one's offset, round trip and midpoint. 0 when rank 0 did
 * not answer. */
static int ask(mpi_h byte, int64_t *offset, uint64_t *rtt, uint64_t *mid)
{
    *rtt = UINT64_MAX;
    for (int i = 0; i < SYNC_ROUNDS; i++) {
        stamp out = {0, (uint64_t)i}, in = {0, 0};
        uint64_t rq[2] = {0, 0}, sq[2] = {0, 0};
        /* the first wait covers rank 0's rounds with the ranks before this one */
        const uint64_t deadline = ceil_ip_now_ns() + (uint64_t)SYNC_WAIT_S * 1000000000u;
        if (irecv(&in, (int)sizeof in, byte, 0, SYNC_TAG, sync_comm, rq) != 0)
            return 0;
        const uint64_t t1 = ceil_ip_now_ns();
        out.ns = (int64_t)t1;
        if (isend(&out, (int)sizeof out, byte, 0, SYNC_TAG, sync_comm, sq) != 0 || !wait_one(sq, deadline)
            || !wait_one(rq, deadline))
            return 0;
        const uint64_t t2 = ceil_ip_now_ns();
        if (t2 - t1 < *rtt && in.round == (uint64_t)i) {
            *rtt = t2 - t1;
            *mid = t1 + (t2 - t1) / 2;
            *offset = in.ns - (int64_t)*mid;
        }
    }
    return *rtt != UINT64_MAX;
}

/* One measurement on every rank, recorded as this thread's SYNC event with its cost since `start` (ticks); 0 when
 * it was given up. */
static int measure(uint16_t phase, uint64_t start, int rank, int size, mpi_h byte)
{
    int64_t offset = 0;
    uint64_t rtt = 0, mid = ceil_ip_now_ns();
    const int ok = rank == 0 ? serve(size, byte) : ask(byte, &offset, &rtt, &mid);
    if (!ok) {
        ceil_ip_say(rank == 0 ? "clock sync: a rank did not answer within 30 s; the ranks after it are not aligned "
                                "to rank 0's clock in the trace"
                              : "clock sync: rank 0 did not answer within 30 s; this rank's clock is not aligned "
                                "to rank 0's in the trace", NULL);
        return 0;
    }
    ceil_ip_trace_sync_(phase, ceil_ip_ticks() - start, offset, rtt, rank == 0 ? ceil_ip_now_ns() : mid,
                        rank == 0 ? 1 : same_boot);
    return 1;
}

static void release(const void *caller)
{
    free_fn cfree = (free_fn)ceil_ip_lookup("PMPI_Comm_free", caller);
    if (cfree && sync_comm)
        cfree(&sync_comm);
    sync_comm = 0;
}

void mpi_clock_started(const void *caller)
{
    mpi_h world, byte;
    int rank, size;
    /* not tracing (`mpirun -n N ceiling profile`): nothing, no collective; a wrapped launch's ranks all trace
     * or none, so a rank that returns here leaves no other waiting (and if one did, the agreement's deadline) */
    if (!mpi_gather_wanted() || !ceil_ip_trace_dir_() || !mpi_world(&world, &byte, &rank, &size) || size < 2)
        return;
    dup_fn dup = (dup_fn)ceil_ip_lookup("PMPI_Comm_dup", caller);
    isend = (isend_fn)ceil_ip_lookup("PMPI_Isend", caller);
    irecv = (irecv_fn)ceil_ip_lookup("PMPI_Irecv", caller);
    test = (test_fn)ceil_ip_lookup("PMPI_Test", caller);
    if (!dup || !isend || !irecv || !test || !ceil_ip_lookup("PMPI_Comm_free", caller))
        return;                 /* one library: every rank lacks them alike */
    const uint64_t start = ceil_ip_ticks();      /* the agreement and the duplicate are the sync's cost too */
    const size_t bytes = (size_t)size * sizeof(agreed);
    agreed *all = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (all == MAP_FAILED)
        return;                 /* the others then give up at the agreement's deadline */
    const agreed mine = {ceil_ip_trace_dir_() != NULL, ceil_ip_trace_boot_()};
    int every = mpi_agree(&mine, all, (int)sizeof mine, (void *)caller,
                          "clock sync: not every rank reached MPI_Init under ceiling within 30 s; the trace's "
                          "clocks are not aligned");
    for (int r = 0; every && r < size; r++)
        every &= all[r].traces == 1;
    if (every)
        same_boot = all[0].boot == 0 || all[rank].boot == 0 ? -1 : all[0].boot == all[rank].boot;
    munmap(all, bytes);
    /* every rank decides alike from the same slots */
    if (!every || dup(world, &sync_comm) != 0) {
        sync_comm = 0;
        return;
    }
    if (!measure(0, start, rank, size, byte))
        release(caller);        /* given up: no second try at MPI_Finalize */
}

void mpi_clock_finalizing(const void *caller)
{
    mpi_h world, byte;
    int rank, size;
    if (!sync_comm)
        return;
    if (mpi_world(&world, &byte, &rank, &size) && ceil_ip_trace_dir_() != NULL)
        measure(1, ceil_ip_ticks(), rank, size, byte);
    release(caller);
}
