/*
 * netbench.c - the MPI timing loops of `ceiling bench network`.
 *
 * Not part of the CMake build: ceiling compiles this file at first use with
 * the compiler wrapper (mpicc) of the MPI library that mpi4py loaded, into
 * $XDG_CACHE_HOME/ceiling/mpi-<hash>.so, and loads it with ctypes after
 * mpi4py has initialised MPI (src/ceiling/cluster/build.py builds it,
 * cluster/netbench.py binds it). So the times are the library's and the
 * fabric's, not Python's.
 *
 * Longer than 500 lines: one translation unit on purpose. It is compiled at
 * run time, alone, by whatever mpicc the user's MPI provides (the build cache
 * hashes this one file), so splitting it would mean shipping and hashing a
 * header and several sources for every MPI stack.
 *
 * Rules of the interface:
 *  - No MPI handle crosses it. Every function works on MPI_COMM_WORLD, takes
 *    world ranks or colours as ints, and splits what it needs inside.
 *  - Every function is collective over MPI_COMM_WORLD: all ranks call it
 *    with the same arguments (their own colour for nb_coll). Ranks that take
 *    no part wait in a "quiet" barrier (MPI_Ibarrier polled with a 50 us
 *    sleep) so that they leave the CPUs to the ranks being measured, which
 *    matters when ranks share CPUs.
 *  - Results (times in seconds, one per timed block) are returned on every
 *    rank; validity is agreed over the world (any rank that saw a wrong byte
 *    makes the result invalid, and its message is the one returned).
 *  - Return value: 1 valid, 0 measured but the data check failed (msg says
 *    where), < 0 bad parameters or no memory (msg says which).
 *
 * Conventions follow the peers: ping-pong is IMB-MPI1 PingPong (MPI_Send /
 * MPI_Recv, two barriers before each timed loop, one wall-clock interval per
 * loop); streaming bandwidth is osu_bw / osu_bibw (a window of MPI_Isend /
 * MPI_Irecv into one buffer, then a 4-byte acknowledgement); collectives are
 * IMB's (each call timed on its own, a barrier after each, time per call
 * averaged over the loop on each rank; min / max / mean over ranks; Barrier
 * itself back to back, one interval for the loop).
 *
 * Data checks: before each timed block every sender fills its buffer with a
 * pattern unique to (message size, block, sender) and one untimed exchange
 * is verified on receipt (the first exchange); the receive buffer is then
 * filled with the complement of the expected pattern, and after the timed
 * loop it must hold the pattern again (the last exchange). Zero-byte
 * messages carry nothing to check.
 *
 * Ping-pong (nb_pingpong, nb_pairs) checks the same way but does not rewrite
 * whole buffers between its blocks: IMB leaves them alone, and rewriting two
 * 4 MiB buffers between blocks left them dirty in the caches and cost the
 * next block up to 15% at 4 MiB on a Zen 4 guest. The pattern (unique to
 * size and sender) is written and its first exchange verified once, before
 * the warm-up; the receive buffer then holds its complement. Each block,
 * warm-up included, stamps its own pattern on the first and last 8 bytes
 * of the message (the whole of a message of 16 bytes or less) and the
 * complement on the receiver's, so every block must deliver; after the
 * last block the whole receive buffer is checked.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NB_ABI 2

/* Flags */
#define NB_F_CORRUPT 0x1   /* test hook: spoil one byte of the verified first exchange */
#define NB_F_STALE 0x2     /* test hook: ping-pong's first sender leaves block 0 unstamped */

/* Collective operations for nb_coll */
enum { NB_BARRIER = 0, NB_BCAST = 1, NB_ALLREDUCE = 2, NB_ALLTOALL = 3 };

enum { NB_EINVAL = -1, NB_ENOMEM = -2 };

#define NB_MSG 256
#define NB_MAX_BYTES (1LL << 30)
#define NB_N_BARR 2            /* IMB's N_BARR: barriers before each timed loop */
#define NB_ACK_BYTES 4         /* osu_bw's acknowledgement */
#define NB_QUIET_SLEEP_NS 50000

/** ABI version of this file; ceiling refuses a cached library with another. */
int nb_abi(void) { return NB_ABI; }

/**
 * The library version string of the MPI this file is linked against
 * (MPI_Get_library_version) into buf; returns 1 when MPI is initialised in
 * that library, 0 when not (the loaded library is another copy than the
 * one mpi4py initialised: its results would be meaningless).
 */
int nb_library(char *buf, int len)
{
    int init = 0, fin = 0, n = 0;
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    MPI_Get_library_version(v, &n);
    if (buf && len > 0)
        snprintf(buf, (size_t)len, "%s", v);
    return init && !fin;
}

/* -- patterns ---------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    /* splitmix64 finaliser: every seed gives an unrelated stream */
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t seed_of(int64_t nbytes, int block, int sender, int receiver, int what)
{
    return mix(((uint64_t)nbytes << 20) ^ ((uint64_t)(block + 2) << 8) ^ ((uint64_t)sender << 40) ^
               ((uint64_t)receiver << 52) ^ (uint64_t)what);
}

static inline uint8_t pat(uint64_t seed, int64_t i)
{
    uint64_t w = seed ^ ((uint64_t)(i >> 3) * 0xD6E8FEB86659FD93ULL);
    return (uint8_t)(w >> (8 * (i & 7)));
}

static void fill(uint8_t *p, int64_t n, uint64_t seed, int complement)
{
    uint8_t c = complement ? 0xFF : 0;
    for (int64_t i = 0; i < n; i++)
        p[i] = pat(seed, i) ^ c;
}

/* Index of the first byte that differs from the pattern, -1 when all match. */
static int64_t check(const uint8_t *p, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++)
        if (p[i] != pat(seed, i))
            return i;
    return -1;
}

#define NB_STAMP 8          /* bytes stamped at each end of a ping-pong message */

/* The block's own pattern (or its complement) on both ends of the message. */
static void stamp(uint8_t *p, int64_t n, uint64_t seed, int complement)
{
    uint8_t c = complement ? 0xFF : 0;
    for (int64_t i = 0; i < n && i < NB_STAMP; i++)
        p[i] = pat(seed, i) ^ c;
    for (int64_t i = n - NB_STAMP > NB_STAMP ? n - NB_STAMP : NB_STAMP; i < n; i++)
        p[i] = pat(seed, i) ^ c;
}

/* First stamped byte not holding the block's pattern, -1 when all match. */
static int64_t check_stamp(const uint8_t *p, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i = (i + 1 == NB_STAMP && n - NB_STAMP > NB_STAMP) ? n - NB_STAMP : i + 1)
        if (p[i] != pat(seed, i))
            return i;
    return -1;
}

/* First byte between the stamps not holding the pattern, -1 when all match. */
static int64_t check_body(const uint8_t *p, int64_t n, uint64_t seed)
{
    for (int64_t i = NB_STAMP; i < n - NB_STAMP; i++)
        if (p[i] != pat(seed, i))
            return i;
    return -1;
}

/* -- helpers ----------------------------------------------------------- */

static void *nb_alloc(int64_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, (size_t)(n > 0 ? n : 1)) != 0)
        return NULL;
    memset(p, 0, (size_t)(n > 0 ? n : 1));   /* first touch by the rank that uses it */
    return p;
}

/* A barrier that does not spin: for ranks with nothing to do. */
static void quiet_barrier(MPI_Comm comm, int idle)
{
    MPI_Request r;
    int done = 0;
    struct timespec ts = {0, NB_QUIET_SLEEP_NS};
    MPI_Ibarrier(comm, &r);
    if (!idle) {
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        return;
    }
    for (;;) {
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done)
            break;
        nanosleep(&ts, NULL);
    }
}

/* The end of every call: all ranks learn the times of `root` and the
 * verdict of every rank (the message of the lowest failing rank). */
static int finish(int root, int valid, char *msg, double *times, int n, int idle)
{
    int all = 0, me, bad;
    quiet_barrier(MPI_COMM_WORLD, idle);
    MPI_Bcast(times, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
    MPI_Allreduce(&valid, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        int mine = valid ? 1 << 30 : me;
        MPI_Allreduce(&mine, &bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Bcast(msg, NB_MSG, MPI_CHAR, bad, MPI_COMM_WORLD);
    }
    return all;
}

static int bad_args(char *msg, const char *what)
{
    snprintf(msg, NB_MSG, "%s", what);
    return NB_EINVAL;
}

/* Collective check of parameters so that either every rank runs or none. */
static int agree(int ok_here, char *msg, const char *what)
{
    int ok = 0;
    MPI_Allreduce(&ok_here, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok ? 0 : bad_args(msg, what);
}

static int pair_args(int a, int b, int64_t nbytes, int reps, int blocks, int *rank, int *size)
{
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return a >= 0 && b >= 0 && a < *size && b < *size && a != b && nbytes >= 0 && nbytes <= NB_MAX_BYTES &&
           reps >= 1 && blocks >= 1;
}

/* Communicator of the two ranks a (its rank 0) and b (its rank 1); MPI_COMM_NULL elsewhere. */
static MPI_Comm pair_comm(int a, int b, int rank)
{
    MPI_Comm c;
    int in = rank == a || rank == b;
    MPI_Comm_split(MPI_COMM_WORLD, in ? 0 : MPI_UNDEFINED, rank == a ? 0 : 1, &c);
    return c;
}

/* -- ping-pong ---------------------------------------------------------- */

/**
 * IMB PingPong between world ranks a and b: `blocks` timed loops of `reps`
 * round trips of `nbytes`, each after `warmup` untimed round trips (once,
 * before the first block) and one verified exchange. times[i] = seconds of
 * block i (round trips; one-way time = times[i] / (2 reps)).
 */
int nb_pingpong(int a, int b, int64_t nbytes, int reps, int warmup, int blocks, int flags, double *times,
                char *msg)
{
    int rank, size, valid = 1;
    msg[0] = 0;
    int ok = pair_args(a, b, nbytes, reps, blocks, &rank, &size) && warmup >= 0 && times;
    if (agree(ok, msg, "nb_pingpong: bad parameters (ranks, size, reps or blocks)"))
        return NB_EINVAL;
    for (int i = 0; i < blocks; i++)
        times[i] = 0.0;
    MPI_Comm pc = pair_comm(a, b, rank);
    int idle = pc == MPI_COMM_NULL;
    uint8_t *sbuf = NULL, *rbuf = NULL;
    int mem_ok = 1;
    if (!idle) {
        sbuf = nb_alloc(nbytes);
        rbuf = nb_alloc(nbytes);
        mem_ok = sbuf && rbuf;
    }
    if (agree(mem_ok, msg, "nb_pingpong: out of memory")) {
        free(sbuf);
        free(rbuf);
        if (!idle)
            MPI_Comm_free(&pc);
        return NB_ENOMEM;
    }
    if (!idle) {
        int me, n = (int)nbytes;
        MPI_Comm_rank(pc, &me);
        int peer = 1 - me;
        int wr_me = me == 0 ? a : b, wr_peer = me == 0 ? b : a;
        uint64_t ss = seed_of(nbytes, -1, wr_me, wr_peer, 1);
        uint64_t rs = seed_of(nbytes, -1, wr_peer, wr_me, 1);
        fill(sbuf, nbytes, ss, 0);
        if ((flags & NB_F_CORRUPT) && me == 0 && nbytes > 0)
            sbuf[nbytes / 2] ^= 0x5A;
        /* the first exchange, untimed and verified */
        if (me == 0) {
            MPI_Send(sbuf, n, MPI_BYTE, peer, 1, pc);
            MPI_Recv(rbuf, n, MPI_BYTE, peer, 1, pc, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, n, MPI_BYTE, peer, 1, pc, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, n, MPI_BYTE, peer, 1, pc);
        }
        int64_t at = check(rbuf, nbytes, rs);
        if (at >= 0) {
            valid = 0;
            snprintf(msg, NB_MSG, "ping-pong %lld B: byte %lld from rank %d wrong on rank %d (first exchange)",
                     (long long)nbytes, (long long)at, wr_peer, wr_me);
        }
        if (flags & NB_F_CORRUPT)
            fill(sbuf, nbytes, ss, 0);
        fill(rbuf, nbytes, rs, 1);
        for (int blk = -1; blk < blocks; blk++) {
            uint64_t bs = seed_of(nbytes, blk, wr_peer, wr_me, 2);
            if (!((flags & NB_F_STALE) && me == 0 && blk == 0))
                stamp(sbuf, nbytes, seed_of(nbytes, blk, wr_me, wr_peer, 2), 0);
            stamp(rbuf, nbytes, bs, 1);
            int iters = blk < 0 ? warmup : reps;
            for (int k = 0; k < NB_N_BARR; k++)
                MPI_Barrier(pc);
            double t0 = MPI_Wtime();
            if (me == 0) {
                for (int i = 0; i < iters; i++) {
                    MPI_Send(sbuf, n, MPI_BYTE, peer, 1, pc);
                    MPI_Recv(rbuf, n, MPI_BYTE, peer, 1, pc, MPI_STATUS_IGNORE);
                }
            } else {
                for (int i = 0; i < iters; i++) {
                    MPI_Recv(rbuf, n, MPI_BYTE, peer, 1, pc, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, n, MPI_BYTE, peer, 1, pc);
                }
            }
            double t1 = MPI_Wtime();
            if (blk >= 0)
                times[blk] = t1 - t0;
            at = iters > 0 ? check_stamp(rbuf, nbytes, bs) : -1;
            if (at >= 0 && valid) {
                valid = 0;
                snprintf(msg, NB_MSG, "ping-pong %lld B: byte %lld from rank %d wrong on rank %d (block %d)",
                         (long long)nbytes, (long long)at, wr_peer, wr_me, blk);
            }
        }
        at = check_body(rbuf, nbytes, rs);
        if (at >= 0 && valid) {
            valid = 0;
            snprintf(msg, NB_MSG, "ping-pong %lld B: byte %lld from rank %d wrong on rank %d (last exchange)",
                     (long long)nbytes, (long long)at, wr_peer, wr_me);
        }
        MPI_Comm_free(&pc);
    }
    free(sbuf);
    free(rbuf);
    return finish(a, valid, msg, times, blocks, idle);
}

/* -- every rank with its partner at once ------------------------------------ */

/**
 * Ping-pong between each rank and `partner` (every pair at the same time:
 * cluster mode's pairwise network, a round of a perfect matching); -1 sits
 * the round out. Partners must be mutual (checked over the world). Per call:
 * `blocks` timed loops of `reps` round trips of `nbytes` after `warmup`
 * untimed ones, each block started by every rank together (two world
 * barriers) and checked as nb_pingpong checks. times[i] = this rank's pair's
 * seconds of block i (0 for a rank that sat out).
 */
int nb_pairs(int partner, int64_t nbytes, int reps, int warmup, int blocks, int flags, double *times, char *msg)
{
    int rank, size, valid = 1, ok = 1;
    msg[0] = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *all = malloc(sizeof(int) * (size_t)size);
    if (agree(all != NULL, msg, "nb_pairs: out of memory")) {
        free(all);
        return NB_ENOMEM;
    }
    MPI_Allgather(&partner, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        ok = ok && all[r] >= -1 && all[r] < size && all[r] != r && (all[r] < 0 || all[all[r]] == r);
    free(all);
    ok = ok && nbytes >= 0 && nbytes <= NB_MAX_BYTES && reps >= 1 && blocks >= 1 && warmup >= 0 && times;
    if (agree(ok, msg, "nb_pairs: bad parameters (partners not mutual, size, reps or blocks)"))
        return NB_EINVAL;
    for (int i = 0; i < blocks; i++)
        times[i] = 0.0;
    int idle = partner < 0, n = (int)nbytes, first = rank < partner;
    uint8_t *sbuf = idle ? NULL : nb_alloc(nbytes), *rbuf = idle ? NULL : nb_alloc(nbytes);
    if (agree(idle || (sbuf && rbuf), msg, "nb_pairs: out of memory")) {
        free(sbuf);
        free(rbuf);
        return NB_ENOMEM;
    }
    uint64_t ss = seed_of(nbytes, -1, rank, partner, 5), rs = seed_of(nbytes, -1, partner, rank, 5);
    if (!idle) {
        fill(sbuf, nbytes, ss, 0);
        if ((flags & NB_F_CORRUPT) && first && nbytes > 0)
            sbuf[nbytes / 2] ^= 0x5A;
        MPI_Sendrecv(sbuf, n, MPI_BYTE, partner, 5, rbuf, n, MPI_BYTE, partner, 5, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);          /* the verified first exchange */
        int64_t at = check(rbuf, nbytes, rs);
        if (at >= 0) {
            valid = 0;
            snprintf(msg, NB_MSG, "pairs %lld B: byte %lld from rank %d wrong on rank %d (first exchange)",
                     (long long)nbytes, (long long)at, partner, rank);
        }
        if (flags & NB_F_CORRUPT)
            fill(sbuf, nbytes, ss, 0);
        fill(rbuf, nbytes, rs, 1);
    }
    for (int blk = -1; blk < blocks; blk++) {
        uint64_t bs = seed_of(nbytes, blk, partner, rank, 6);
        if (!idle) {
            if (!((flags & NB_F_STALE) && first && blk == 0))
                stamp(sbuf, nbytes, seed_of(nbytes, blk, rank, partner, 6), 0);
            stamp(rbuf, nbytes, bs, 1);
        }
        for (int k = 0; k < NB_N_BARR; k++)
            MPI_Barrier(MPI_COMM_WORLD);
        int iters = blk < 0 ? warmup : reps;
        double t0 = MPI_Wtime();
        for (int i = 0; !idle && i < iters; i++) {
            if (first) {
                MPI_Send(sbuf, n, MPI_BYTE, partner, 6, MPI_COMM_WORLD);
                MPI_Recv(rbuf, n, MPI_BYTE, partner, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, n, MPI_BYTE, partner, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, n, MPI_BYTE, partner, 6, MPI_COMM_WORLD);
            }
        }
        double t1 = MPI_Wtime();
        if (blk >= 0 && !idle)
            times[blk] = t1 - t0;
        int64_t at = !idle && iters > 0 ? check_stamp(rbuf, nbytes, bs) : -1;
        if (at >= 0 && valid) {
            valid = 0;
            snprintf(msg, NB_MSG, "pairs %lld B: byte %lld from rank %d wrong on rank %d (block %d)",
                     (long long)nbytes, (long long)at, partner, rank, blk);
        }
    }
    int64_t at = idle ? -1 : check_body(rbuf, nbytes, rs);
    if (at >= 0 && valid) {
        valid = 0;
        snprintf(msg, NB_MSG, "pairs %lld B: byte %lld from rank %d wrong on rank %d (last exchange)",
                 (long long)nbytes, (long long)at, partner, rank);
    }
    free(sbuf);
    free(rbuf);
    int everyone = 0, me = valid ? 1 << 30 : rank, bad = 0;
    MPI_Allreduce(&valid, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!everyone) {
        MPI_Allreduce(&me, &bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Bcast(msg, NB_MSG, MPI_CHAR, bad, MPI_COMM_WORLD);
    }
    return everyone;
}

/* -- streaming bandwidth -------------------------------------------------- */

/**
 * osu_bw (bidir = 0) or osu_bibw (bidir = 1) between world ranks a (sender
 * of osu_bw) and b: `blocks` timed loops of `iters` windows of `window`
 * non-blocking messages of `nbytes`, after `warmup` untimed windows.
 * times[i] = seconds of block i as rank a sees it; bytes moved per block =
 * nbytes x window x iters (x 2 when bidir).
 */
int nb_stream(int a, int b, int64_t nbytes, int window, int iters, int warmup, int blocks, int bidir, int flags,
              double *times, char *msg)
{
    int rank, size, valid = 1;
    msg[0] = 0;
    int ok = pair_args(a, b, nbytes, iters, blocks, &rank, &size) && warmup >= 0 && window >= 1 &&
             window <= 4096 && times;
    if (agree(ok, msg, "nb_stream: bad parameters (ranks, size, window, iters or blocks)"))
        return NB_EINVAL;
    for (int i = 0; i < blocks; i++)
        times[i] = 0.0;
    MPI_Comm pc = pair_comm(a, b, rank);
    int idle = pc == MPI_COMM_NULL;
    uint8_t *sbuf = NULL, *rbuf = NULL, ack[NB_ACK_BYTES] = {0};
    MPI_Request *req = NULL, *rreq = NULL;
    int mem_ok = 1;
    if (!idle) {
        sbuf = nb_alloc(nbytes);
        rbuf = nb_alloc(nbytes);
        req = malloc(sizeof(MPI_Request) * (size_t)window);
        rreq = malloc(sizeof(MPI_Request) * (size_t)window);
        mem_ok = sbuf && rbuf && req && rreq;
    }
    if (agree(mem_ok, msg, "nb_stream: out of memory")) {
        free(sbuf);
        free(rbuf);
        free(req);
        free(rreq);
        if (!idle)
            MPI_Comm_free(&pc);
        return NB_ENOMEM;
    }
    if (!idle) {
        int me, n = (int)nbytes;
        MPI_Comm_rank(pc, &me);
        int peer = 1 - me;
        int wr_me = me == 0 ? a : b, wr_peer = me == 0 ? b : a;
        int sends = me == 0 || bidir, recvs = me == 1 || bidir;
        for (int blk = -1; blk < blocks; blk++) {
            uint64_t ss = seed_of(nbytes, blk, wr_me, wr_peer, 2 + bidir);
            uint64_t rs = seed_of(nbytes, blk, wr_peer, wr_me, 2 + bidir);
            fill(sbuf, nbytes, ss, 0);
            if ((flags & NB_F_CORRUPT) && me == 0 && nbytes > 0)
                sbuf[nbytes / 2] ^= 0x5A;
            /* the first exchange of the block, untimed and verified */
            if (sends && recvs) {
                MPI_Sendrecv(sbuf, n, MPI_BYTE, peer, 2, rbuf, n, MPI_BYTE, peer, 2, pc, MPI_STATUS_IGNORE);
            } else if (sends) {
                MPI_Send(sbuf, n, MPI_BYTE, peer, 2, pc);
            } else {
                MPI_Recv(rbuf, n, MPI_BYTE, peer, 2, pc, MPI_STATUS_IGNORE);
            }
            int64_t at = recvs ? check(rbuf, nbytes, rs) : -1;
            if (at >= 0 && valid) {
                valid = 0;
                snprintf(msg, NB_MSG, "%s %lld B: byte %lld from rank %d wrong on rank %d (first message)",
                         bidir ? "bibw" : "bw", (long long)nbytes, (long long)at, wr_peer, wr_me);
            }
            if (flags & NB_F_CORRUPT)
                fill(sbuf, nbytes, ss, 0);
            if (recvs)
                fill(rbuf, nbytes, rs, 1);
            int loops = blk < 0 ? warmup : iters;
            for (int k = 0; k < NB_N_BARR; k++)
                MPI_Barrier(pc);
            double t0 = MPI_Wtime();
            for (int i = 0; i < loops; i++) {
                if (bidir) {
                    for (int j = 0; j < window; j++)
                        MPI_Irecv(rbuf, n, MPI_BYTE, peer, 3, pc, rreq + j);
                    for (int j = 0; j < window; j++)
                        MPI_Isend(sbuf, n, MPI_BYTE, peer, 3, pc, req + j);
                    MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                    MPI_Waitall(window, rreq, MPI_STATUSES_IGNORE);
                } else if (me == 0) {
                    for (int j = 0; j < window; j++)
                        MPI_Isend(sbuf, n, MPI_BYTE, peer, 3, pc, req + j);
                    MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                    MPI_Recv(ack, NB_ACK_BYTES, MPI_BYTE, peer, 4, pc, MPI_STATUS_IGNORE);
                } else {
                    for (int j = 0; j < window; j++)
                        MPI_Irecv(rbuf, n, MPI_BYTE, peer, 3, pc, req + j);
                    MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
                    MPI_Send(ack, NB_ACK_BYTES, MPI_BYTE, peer, 4, pc);
                }
            }
            double t1 = MPI_Wtime();
            if (blk >= 0)
                times[blk] = t1 - t0;
            at = recvs && loops > 0 ? check(rbuf, nbytes, rs) : -1;
            if (at >= 0 && valid) {
                valid = 0;
                snprintf(msg, NB_MSG, "%s %lld B: byte %lld from rank %d wrong on rank %d (last message)",
                         bidir ? "bibw" : "bw", (long long)nbytes, (long long)at, wr_peer, wr_me);
            }
        }
        MPI_Comm_free(&pc);
    }
    free(sbuf);
    free(rbuf);
    free(req);
    free(rreq);
    return finish(a, valid, msg, times, blocks, idle);
}

/* -- collectives ---------------------------------------------------------- */

static const char *coll_name(int op)
{
    static const char *names[] = {"barrier", "bcast", "allreduce", "alltoall"};
    return op >= 0 && op <= 3 ? names[op] : "?";
}

/* Allreduce operand: element j of rank r is r + j (exact in double for the sizes used). */
static void fill_reduce(double *s, int64_t n, int r, int spoil)
{
    for (int64_t j = 0; j < n; j++)
        s[j] = (double)r + (double)(j % 1048576);
    if (spoil && n > 0)
        s[n / 2] += 1.0;
}

static int64_t check_reduce(const double *x, int64_t n, int k)
{
    double base = (double)k * (double)(k - 1) / 2.0;
    for (int64_t j = 0; j < n; j++)
        if (x[j] != base + (double)k * (double)(j % 1048576))
            return j;
    return -1;
}

/* Verify the data of one collective call on this rank; -1 when right, else the first wrong byte/element. */
static int64_t coll_check(int op, const uint8_t *rbuf, int64_t nbytes, int me, int k, int blk)
{
    if (op == NB_BCAST)
        return me == 0 ? -1 : check(rbuf, nbytes, seed_of(nbytes, blk, 0, 0, 10));
    if (op == NB_ALLREDUCE)
        return check_reduce((const double *)rbuf, nbytes / 8, k);
    if (op == NB_ALLTOALL) {
        for (int s = 0; s < k; s++) {
            int64_t at = check(rbuf + (int64_t)s * nbytes, nbytes, seed_of(nbytes, blk, s, me, 11));
            if (at >= 0)
                return (int64_t)s * nbytes + at;
        }
    }
    return -1;
}

static void coll_fill(int op, uint8_t *sbuf, uint8_t *rbuf, int64_t nbytes, int me, int k, int blk, int spoil)
{
    if (op == NB_BCAST) {
        if (me == 0) {
            fill(rbuf, nbytes, seed_of(nbytes, blk, 0, 0, 10), 0);
            if (spoil && nbytes > 0)
                rbuf[nbytes / 2] ^= 0x5A;
        } else {
            fill(rbuf, nbytes, seed_of(nbytes, blk, 0, 0, 10), 1);
        }
    } else if (op == NB_ALLREDUCE) {
        fill_reduce((double *)sbuf, nbytes / 8, me, spoil);
        for (int64_t j = 0; j < nbytes / 8; j++)
            ((double *)rbuf)[j] = -1.0;
    } else if (op == NB_ALLTOALL) {
        for (int d = 0; d < k; d++) {
            fill(sbuf + (int64_t)d * nbytes, nbytes, seed_of(nbytes, blk, me, d, 11), 0);
            fill(rbuf + (int64_t)d * nbytes, nbytes, seed_of(nbytes, blk, d, me, 11), 1);
        }
        if (spoil && nbytes > 0 && k > 1)
            sbuf[(int64_t)((me + 1) % k) * nbytes + nbytes / 2] ^= 0x5A;
    }
}

static void coll_call(int op, uint8_t *sbuf, uint8_t *rbuf, int64_t nbytes, MPI_Comm c)
{
    switch (op) {
    case NB_BARRIER:
        MPI_Barrier(c);
        break;
    case NB_BCAST:
        MPI_Bcast(rbuf, (int)nbytes, MPI_BYTE, 0, c);
        break;
    case NB_ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, (int)(nbytes / 8), MPI_DOUBLE, MPI_SUM, c);
        break;
    case NB_ALLTOALL:
        MPI_Alltoall(sbuf, (int)nbytes, MPI_BYTE, rbuf, (int)nbytes, MPI_BYTE, c);
        break;
    }
}

/**
 * One collective (op: 0 Barrier, 1 Bcast from rank 0, 2 Allreduce of
 * nbytes / 8 doubles with MPI_SUM, 3 Alltoall of nbytes per pair of ranks)
 * over the ranks whose `color` is >= 0 (one communicator per colour, ranks
 * ordered by `key`; world rank 0 must have colour 0 and the smallest key:
 * the figures are those of its communicator). `blocks` timed loops of
 * `iters` calls, each call timed alone and followed by a barrier (IMB;
 * Barrier: back to back, the loop timed as a whole),
 * after `warmup` untimed calls. For block i: tmin[i], tmax[i], tavg[i] =
 * minimum, maximum and mean over the ranks of each rank's mean seconds per
 * call (IMB's t_min, t_max, t_avg).
 */
int nb_coll(int op, int color, int key, int64_t nbytes, int iters, int warmup, int blocks, int flags,
            double *tmin, double *tmax, double *tavg, char *msg)
{
    int rank, size, valid = 1;
    msg[0] = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ok = op >= 0 && op <= 3 && nbytes >= 0 && nbytes <= NB_MAX_BYTES && iters >= 1 && warmup >= 0 &&
             blocks >= 1 && tmin && tmax && tavg && (rank != 0 || color == 0) &&
             !(op == NB_ALLREDUCE && nbytes % 8 != 0);
    if (agree(ok, msg, "nb_coll: bad parameters (operation, size, iters, blocks or colour of rank 0)"))
        return NB_EINVAL;
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, color >= 0 ? color : MPI_UNDEFINED, key, &c);
    int idle = c == MPI_COMM_NULL;
    int me = 0, k = 1;
    uint8_t *sbuf = NULL, *rbuf = NULL;
    int64_t len = nbytes;
    double *out = calloc((size_t)blocks * 3, sizeof(double));
    int mem_ok = out != NULL;
    if (!idle) {
        MPI_Comm_rank(c, &me);
        MPI_Comm_size(c, &k);
        if (op == NB_ALLTOALL)
            len = nbytes * k;
        sbuf = nb_alloc(len);
        rbuf = nb_alloc(len);
        mem_ok = mem_ok && sbuf && rbuf;
    }
    if (agree(mem_ok, msg, "nb_coll: out of memory")) {
        free(sbuf);
        free(rbuf);
        free(out);
        if (!idle)
            MPI_Comm_free(&c);
        return NB_ENOMEM;
    }
    if (!idle) {
        for (int blk = -1; blk < blocks; blk++) {
            int spoil = (flags & NB_F_CORRUPT) && me == 0;
            coll_fill(op, sbuf, rbuf, nbytes, me, k, blk, spoil);
            coll_call(op, sbuf, rbuf, nbytes, c);      /* the first call, untimed and verified */
            int64_t at = coll_check(op, rbuf, nbytes, me, k, blk);
            if (at >= 0 && valid) {
                valid = 0;
                snprintf(msg, NB_MSG, "%s %lld B over %d ranks: %s %lld wrong on world rank %d (first call)",
                         coll_name(op), (long long)nbytes, k, op == NB_ALLREDUCE ? "element" : "byte",
                         (long long)at, rank);
            }
            coll_fill(op, sbuf, rbuf, nbytes, me, k, blk, 0);
            int loops = blk < 0 ? warmup : iters;
            double t = 0.0;
            for (int j = 0; j < NB_N_BARR; j++)
                MPI_Barrier(c);
            if (op == NB_BARRIER) {
                /* IMB Barrier: back to back, one interval for the loop */
                t = MPI_Wtime();
                for (int i = 0; i < loops; i++)
                    MPI_Barrier(c);
                t = MPI_Wtime() - t;
            } else {
                for (int i = 0; i < loops; i++) {
                    t -= MPI_Wtime();
                    coll_call(op, sbuf, rbuf, nbytes, c);
                    t += MPI_Wtime();
                    MPI_Barrier(c);
                }
            }
            at = loops > 0 ? coll_check(op, rbuf, nbytes, me, k, blk) : -1;
            if (at >= 0 && valid) {
                valid = 0;
                snprintf(msg, NB_MSG, "%s %lld B over %d ranks: %s %lld wrong on world rank %d (last call)",
                         coll_name(op), (long long)nbytes, k, op == NB_ALLREDUCE ? "element" : "byte",
                         (long long)at, rank);
            }
            if (blk >= 0) {
                double per = loops > 0 ? t / loops : 0.0, mn, mx, sum;
                MPI_Allreduce(&per, &mn, 1, MPI_DOUBLE, MPI_MIN, c);
                MPI_Allreduce(&per, &mx, 1, MPI_DOUBLE, MPI_MAX, c);
                MPI_Allreduce(&per, &sum, 1, MPI_DOUBLE, MPI_SUM, c);
                out[blk] = mn;
                out[blocks + blk] = mx;
                out[2 * blocks + blk] = sum / k;
            }
        }
        MPI_Comm_free(&c);
    }
    free(sbuf);
    free(rbuf);
    int all = finish(0, valid, msg, out, 3 * blocks, idle);
    for (int i = 0; i < blocks; i++) {
        tmin[i] = out[i];
        tmax[i] = out[blocks + i];
        tavg[i] = out[2 * blocks + i];
    }
    free(out);
    return all;
}
