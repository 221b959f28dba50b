/* mpi_coll.c - the MPI module's collectives (mpi.c has the module and its
 * record; mpi.h why one build serves every MPI).
 *
 * A collective's bytes are its message size as IMB and OSU name it, from
 * this process's arguments: Bcast, Reduce, Allreduce, Scan, Exscan and
 * Reduce_scatter_block: count times the datatype's size; Gather,
 * Allgather, Alltoall: one block (the send count; with MPI_IN_PLACE, the
 * receive count); Scatter: the block received (at the root with
 * MPI_IN_PLACE, the send count); Gatherv, Allgatherv: the block sent
 * (with MPI_IN_PLACE, this rank's receive count); Scatterv: the block
 * received (with MPI_IN_PLACE at the root, this rank's send count);
 * Reduce_scatter: this rank's block of the result; Alltoallv: the mean
 * block, all the blocks it sends over the communicator's size (Alltoallw's
 * the same, each block of its own datatype); Barrier: 0. The neighbourhood
 * collectives are in mpi_neighbor.c (their Alltoallv's and Alltoallw's
 * mean block is over the neighbours, with the helpers here).
 * The non-blocking ones (class icoll) count the same bytes at posting and
 * enter no histogram: their time is in the wait that completes them. The
 * persistent ones (MPI 4: MPI_Bcast_init ...) count the same bytes at each
 * start, as the non-blocking ones at posting (the end of this file).
 * Every wrapper is written once for int counts and once for the MPI 4
 * large-count form (_c: MPI_Count counts, MPI_Aint displacements).
 * The trace's event of a rooted one (Bcast, Reduce, Gather, Gatherv,
 * Scatter, Scatterv, Ibcast, Ireduce) names its root as a world rank in
 * the peer field (mpi.h: MPI_ROOTED), and every blocking or non-blocking
 * one here names its communicator (MPI_ON, MPI_ROOTED), so that the wait
 * states pair the members' calls (analysis/trace_waits.py); the persistent
 * inits, which record no event, do not (their starts' events name none).
 */
#include "mpi.h"

/* counts[rank of this process in comm] times the type's size, and the mean
 * of counts[0 .. n-1] times it (n: comm's size here; a neighbourhood
 * collective's out-degree in mpi_neighbor.c), for int and MPI_Count count
 * arrays; 0 when unknown. */
#define BLOCKS(suffix, T)                                                                          \
    static uint64_t own_block##suffix(const T *counts, mpi_h type, mpi_h comm)                     \
    {                                                                                              \
        const int r = mpi_comm_rank(comm);                                                         \
        return counts && r >= 0 ? mpi_bytes((int64_t)counts[r], type) : 0;                         \
    }                                                                                              \
    uint64_t mpi_mean_of##suffix(const T *counts, mpi_h type, int n)                               \
    {                                                                                              \
        if (!counts || n <= 0)                                                                     \
            return 0;                                                                              \
        int64_t sum = 0;                                                                           \
        for (int i = 0; i < n; i++)                                                                \
            sum += (int64_t)counts[i];                                                             \
        return mpi_bytes(sum, type) / (uint64_t)n;                                                 \
    }                                                                                              \
    static uint64_t mean_block##suffix(const T *counts, mpi_h type, mpi_h comm)                    \
    {                                                                                              \
        return mpi_mean_of##suffix(counts, type, mpi_comm_size(comm));                             \
    }
BLOCKS(_i, int)
BLOCKS(_c, mpi_count)

/* Alltoallw's mean block: counts[i] of types[i] (an array of handles, read
 * at the size the MPI's handles have: mpi.h) summed over n (comm's size
 * here), over n; 0 when unknown. */
#define BLOCKS_W(suffix, T)                                                                        \
    uint64_t mpi_mean_of_w##suffix(const T *counts, const void *types, int n)                      \
    {                                                                                              \
        const size_t step = mpi_handle_bytes();                                                    \
        if (!counts || !types || n <= 0 || !step)                                                  \
            return 0;                                                                              \
        uint64_t sum = 0;                                                                          \
        for (int i = 0; i < n; i++)                                                                \
            sum += mpi_bytes((int64_t)counts[i], mpi_handle_at((const char *)types + (size_t)i * step)); \
        return sum / (uint64_t)n;                                                                  \
    }                                                                                              \
    static uint64_t mean_block_w##suffix(const T *counts, const void *types, mpi_h comm)           \
    {                                                                                              \
        return mpi_mean_of_w##suffix(counts, types, mpi_comm_size(comm));                          \
    }
BLOCKS_W(_i, int)
BLOCKS_W(_c, mpi_count)

/* The int forms, for the Fortran wrappers (mpi_fortran.c). */
uint64_t mpi_own_block(const int *counts, mpi_h type, mpi_h comm) { return own_block_i(counts, type, comm); }
uint64_t mpi_mean_block(const int *counts, mpi_h type, mpi_h comm) { return mean_block_i(counts, type, comm); }

PMPI_DECL(MPI_Barrier, (mpi_h));
MPI_WRAP(MPI_Barrier, MH_COLL, (mpi_h comm), (comm), MPI_ON(comm, 0))

PMPI_DECL(MPI_Ibarrier, (mpi_h, void *));
MPI_WRAP(MPI_Ibarrier, -1, (mpi_h comm, void *req), (comm, req), MPI_ON(comm, 0))

/* Each macro below: one signature, its bytes, both count types. */
#define BCAST(fn, cnt)                                                                             \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, mpi_h));                                               \
    MPI_WRAP_S(fn, MH_COLL, (void *buf, cnt count, mpi_h type, int root, mpi_h comm),              \
             (buf, count, type, root, comm), MPI_ROOTED(comm, root, mpi_bytes(count, type)), MPI_FITS(count))
BCAST(MPI_Bcast, int)
BCAST(MPI_Bcast_c, mpi_count)

#define IBCAST(fn, cnt)                                                                            \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, mpi_h, void *));                                       \
    MPI_WRAP_S(fn, -1, (void *buf, cnt count, mpi_h type, int root, mpi_h comm, void *req),        \
             (buf, count, type, root, comm, req), MPI_ROOTED(comm, root, mpi_bytes(count, type)), MPI_FITS(count))
IBCAST(MPI_Ibcast, int)
IBCAST(MPI_Ibcast_c, mpi_count)

#define REDUCE(fn, cnt)                                                                            \
    PMPI_DECL(fn, (const void *, void *, cnt, mpi_h, mpi_h, int, mpi_h));                          \
    MPI_WRAP_S(fn, MH_COLL, (const void *sbuf, void *rbuf, cnt count, mpi_h type, mpi_h op, int root, mpi_h comm), \
             (sbuf, rbuf, count, type, op, root, comm), MPI_ROOTED(comm, root, mpi_bytes(count, type)), \
             MPI_FITS(count))
REDUCE(MPI_Reduce, int)
REDUCE(MPI_Reduce_c, mpi_count)

#define IREDUCE(fn, cnt)                                                                           \
    PMPI_DECL(fn, (const void *, void *, cnt, mpi_h, mpi_h, int, mpi_h, void *));                  \
    MPI_WRAP_S(fn, -1,                                                                             \
             (const void *sbuf, void *rbuf, cnt count, mpi_h type, mpi_h op, int root, mpi_h comm, void *req), \
             (sbuf, rbuf, count, type, op, root, comm, req), MPI_ROOTED(comm, root, mpi_bytes(count, type)), \
             MPI_FITS(count))
IREDUCE(MPI_Ireduce, int)
IREDUCE(MPI_Ireduce_c, mpi_count)

/* Allreduce, Scan, Exscan, Reduce_scatter_block: (sbuf, rbuf, count, type, op, comm). */
#define ALLREDUCE(fn, cnt)                                                                         \
    PMPI_DECL(fn, (const void *, void *, cnt, mpi_h, mpi_h, mpi_h));                               \
    MPI_WRAP_S(fn, MH_COLL, (const void *sbuf, void *rbuf, cnt count, mpi_h type, mpi_h op, mpi_h comm), \
             (sbuf, rbuf, count, type, op, comm), MPI_ON(comm, mpi_bytes(count, type)), MPI_FITS(count))
ALLREDUCE(MPI_Allreduce, int)
ALLREDUCE(MPI_Allreduce_c, mpi_count)
ALLREDUCE(MPI_Scan, int)
ALLREDUCE(MPI_Scan_c, mpi_count)
ALLREDUCE(MPI_Exscan, int)
ALLREDUCE(MPI_Exscan_c, mpi_count)
ALLREDUCE(MPI_Reduce_scatter_block, int)
ALLREDUCE(MPI_Reduce_scatter_block_c, mpi_count)

#define IALLREDUCE(fn, cnt)                                                                        \
    PMPI_DECL(fn, (const void *, void *, cnt, mpi_h, mpi_h, mpi_h, void *));                       \
    MPI_WRAP_S(fn, -1, (const void *sbuf, void *rbuf, cnt count, mpi_h type, mpi_h op, mpi_h comm, void *req), \
             (sbuf, rbuf, count, type, op, comm, req), MPI_ON(comm, mpi_bytes(count, type)), MPI_FITS(count))
IALLREDUCE(MPI_Iallreduce, int)
IALLREDUCE(MPI_Iallreduce_c, mpi_count)

#define REDUCE_SCATTER(fn, cnt, sfx)                                                               \
    PMPI_DECL(fn, (const void *, void *, const cnt *, mpi_h, mpi_h, mpi_h));                       \
    MPI_WRAP_CALL(fn, MH_COLL, (const void *sbuf, void *rbuf, const cnt *counts, mpi_h type, mpi_h op, mpi_h comm), \
                  MPI_V_CALL##sfx(fn, mpi_narrow_reduce_scatter, (sbuf, rbuf, counts, type, op, comm)),    \
                  MPI_ON(comm, own_block##sfx(counts, type, comm)))
REDUCE_SCATTER(MPI_Reduce_scatter, int, _i)
REDUCE_SCATTER(MPI_Reduce_scatter_c, mpi_count, _c)

/* Gather, Allgather, Alltoall: one block, the one sent (received with MPI_IN_PLACE). */
#define BLOCK_SENT(scount, stype, rcount, rtype)                                                   \
    (mpi_in_place(sbuf) ? mpi_bytes(rcount, rtype) : mpi_bytes(scount, stype))

#define GATHER(fn, cnt)                                                                            \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, int, mpi_h));                     \
    MPI_WRAP_S(fn, MH_COLL,                                                                        \
             (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, int root, mpi_h comm), \
             (sbuf, scount, stype, rbuf, rcount, rtype, root, comm),                               \
             MPI_ROOTED(comm, root, BLOCK_SENT(scount, stype, rcount, rtype)), MPI_FITS(scount) && MPI_FITS(rcount))
GATHER(MPI_Gather, int)
GATHER(MPI_Gather_c, mpi_count)

#define SCATTER(fn, cnt)                                                                           \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, int, mpi_h));                     \
    MPI_WRAP_S(fn, MH_COLL,                                                                        \
             (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, int root, mpi_h comm), \
             (sbuf, scount, stype, rbuf, rcount, rtype, root, comm),                               \
             MPI_ROOTED(comm, root, mpi_in_place(rbuf) ? mpi_bytes(scount, stype) : mpi_bytes(rcount, rtype)), \
             MPI_FITS(scount) && MPI_FITS(rcount))
SCATTER(MPI_Scatter, int)
SCATTER(MPI_Scatter_c, mpi_count)

/* Allgather, Alltoall: (sbuf, scount, stype, rbuf, rcount, rtype, comm); I-forms add a request. */
#define ALLGATHER(fn, cnt)                                                                         \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, mpi_h));                          \
    MPI_WRAP_S(fn, MH_COLL,                                                                        \
             (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm), \
             (sbuf, scount, stype, rbuf, rcount, rtype, comm), MPI_ON(comm, BLOCK_SENT(scount, stype, rcount, rtype)), \
             MPI_FITS(scount) && MPI_FITS(rcount))
ALLGATHER(MPI_Allgather, int)
ALLGATHER(MPI_Allgather_c, mpi_count)
ALLGATHER(MPI_Alltoall, int)
ALLGATHER(MPI_Alltoall_c, mpi_count)

#define IALLGATHER(fn, cnt)                                                                        \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, mpi_h, void *));                  \
    MPI_WRAP_S(fn, -1,                                                                             \
             (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm, void *req), \
             (sbuf, scount, stype, rbuf, rcount, rtype, comm, req),                                \
             MPI_ON(comm, BLOCK_SENT(scount, stype, rcount, rtype)), MPI_FITS(scount) && MPI_FITS(rcount))
IALLGATHER(MPI_Iallgather, int)
IALLGATHER(MPI_Iallgather_c, mpi_count)
IALLGATHER(MPI_Ialltoall, int)
IALLGATHER(MPI_Ialltoall_c, mpi_count)

#define GATHERV(fn, cnt, disp, sfx)                                                                \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, const cnt *, const disp *, mpi_h, int, mpi_h)); \
    MPI_WRAP_CALL(fn, MH_COLL,                                                                     \
                  (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, const cnt *rcounts, const disp *displs, \
                   mpi_h rtype, int root, mpi_h comm),                                             \
                  MPI_V_CALL##sfx(fn, mpi_narrow_gatherv, (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm)), \
                  MPI_ROOTED(comm, root,                                                           \
                             mpi_in_place(sbuf) ? own_block##sfx(rcounts, rtype, comm) : mpi_bytes(scount, stype)))
GATHERV(MPI_Gatherv, int, int, _i)
GATHERV(MPI_Gatherv_c, mpi_count, mpi_aint, _c)

#define ALLGATHERV(fn, cnt, disp, sfx)                                                             \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, const cnt *, const disp *, mpi_h, mpi_h));    \
    MPI_WRAP_CALL(fn, MH_COLL,                                                                     \
                  (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, const cnt *rcounts, const disp *displs, \
                   mpi_h rtype, mpi_h comm),                                                       \
                  MPI_V_CALL##sfx(fn, mpi_narrow_allgatherv, (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm)), \
                  MPI_ON(comm, mpi_in_place(sbuf) ? own_block##sfx(rcounts, rtype, comm) : mpi_bytes(scount, stype)))
ALLGATHERV(MPI_Allgatherv, int, int, _i)
ALLGATHERV(MPI_Allgatherv_c, mpi_count, mpi_aint, _c)

#define SCATTERV(fn, cnt, disp, sfx)                                                               \
    PMPI_DECL(fn, (const void *, const cnt *, const disp *, mpi_h, void *, cnt, mpi_h, int, mpi_h)); \
    MPI_WRAP_CALL(fn, MH_COLL,                                                                     \
                  (const void *sbuf, const cnt *scounts, const disp *displs, mpi_h stype, void *rbuf, cnt rcount, \
                   mpi_h rtype, int root, mpi_h comm),                                             \
                  MPI_V_CALL##sfx(fn, mpi_narrow_scatterv, (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm)), \
                  MPI_ROOTED(comm, root,                                                           \
                             mpi_in_place(rbuf) ? own_block##sfx(scounts, stype, comm) : mpi_bytes(rcount, rtype)))
SCATTERV(MPI_Scatterv, int, int, _i)
SCATTERV(MPI_Scatterv_c, mpi_count, mpi_aint, _c)

#define ALLTOALLV(fn, cnt, disp, sfx)                                                              \
    PMPI_DECL(fn, (const void *, const cnt *, const disp *, mpi_h, void *, const cnt *, const disp *, \
                   mpi_h, mpi_h));                                                                 \
    MPI_WRAP_CALL(fn, MH_COLL,                                                                     \
                  (const void *sbuf, const cnt *scounts, const disp *sdispls, mpi_h stype, void *rbuf, \
                   const cnt *rcounts, const disp *rdispls, mpi_h rtype, mpi_h comm),              \
                  MPI_V_CALL##sfx(fn, mpi_narrow_alltoallv,                                        \
                                  (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm)), \
                  MPI_ON(comm, mpi_in_place(sbuf) ? mean_block##sfx(rcounts, rtype, comm)                \
                                                  : mean_block##sfx(scounts, stype, comm)))
ALLTOALLV(MPI_Alltoallv, int, int, _i)
ALLTOALLV(MPI_Alltoallv_c, mpi_count, mpi_aint, _c)

/* Alltoallw: Alltoallv's mean block, each block of its own datatype. */
#define ALLTOALLW_BLOCK(sfx)                                                                       \
    (mpi_in_place(sbuf) ? mean_block_w##sfx(rcounts, rtypes, comm) : mean_block_w##sfx(scounts, stypes, comm))
#define ALLTOALLW(fn, cnt, disp, sfx)                                                              \
    PMPI_DECL(fn, (const void *, const cnt *, const disp *, const void *, void *, const cnt *, const disp *, \
                   const void *, mpi_h));                                                          \
    MPI_WRAP_CALL(fn, MH_COLL,                                                                     \
                  (const void *sbuf, const cnt *scounts, const disp *sdispls, const void *stypes, void *rbuf, \
                   const cnt *rcounts, const disp *rdispls, const void *rtypes, mpi_h comm),       \
                  MPI_V_CALL##sfx(fn, mpi_narrow_alltoallw,                                        \
                                  (sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm)), \
                  MPI_ON(comm, ALLTOALLW_BLOCK(sfx)))
ALLTOALLW(MPI_Alltoallw, int, int, _i)
ALLTOALLW(MPI_Alltoallw_c, mpi_count, mpi_aint, _c)

/* ---- persistent collectives (MPI 4) -----------------------------------------------------
 * MPI_Bcast_init and the others are not counted (they move nothing): the
 * request's bytes, each the blocking form's above (MPI_Bcast_init's as
 * MPI_Bcast's, Barrier_init's 0), are noted against its handle, and each
 * MPI_Start or MPI_Startall of it counts them as one call of the init's
 * name, class icoll (mpi.h: PCOLL; mpi_p2p.c, persistent requests).
 * Open MPI 4's MPIX_ forms (no _c ones) alike, under their own names. */
PCOLL(MPI_Barrier_init, (mpi_h, mpi_h, void *), (mpi_h comm, mpi_h info, void *req), (comm, info, req), 0)
PCOLL(MPIX_Barrier_init, (mpi_h, mpi_h, void *), (mpi_h comm, mpi_h info, void *req), (comm, info, req), 0)

#define BCAST_INIT(fn, cnt)                                                                        \
    PCOLL_S(fn, (void *, cnt, mpi_h, int, mpi_h, mpi_h, void *),                                   \
          (void *buf, cnt count, mpi_h type, int root, mpi_h comm, mpi_h info, void *req),         \
          (buf, count, type, root, comm, info, req), mpi_bytes(count, type), MPI_FITS(count))
BCAST_INIT(MPI_Bcast_init, int)
BCAST_INIT(MPI_Bcast_init_c, mpi_count)
BCAST_INIT(MPIX_Bcast_init, int)

#define REDUCE_INIT(fn, cnt)                                                                       \
    PCOLL_S(fn, (const void *, void *, cnt, mpi_h, mpi_h, int, mpi_h, mpi_h, void *),              \
          (const void *sbuf, void *rbuf, cnt count, mpi_h type, mpi_h op, int root, mpi_h comm, mpi_h info, \
           void *req),                                                                             \
          (sbuf, rbuf, count, type, op, root, comm, info, req), mpi_bytes(count, type), MPI_FITS(count))
REDUCE_INIT(MPI_Reduce_init, int)
REDUCE_INIT(MPI_Reduce_init_c, mpi_count)
REDUCE_INIT(MPIX_Reduce_init, int)

/* Allreduce, Scan, Exscan, Reduce_scatter_block: (sbuf, rbuf, count, type, op, comm, info, req). */
#define ALLREDUCE_INIT(fn, cnt)                                                                    \
    PCOLL_S(fn, (const void *, void *, cnt, mpi_h, mpi_h, mpi_h, mpi_h, void *),                   \
          (const void *sbuf, void *rbuf, cnt count, mpi_h type, mpi_h op, mpi_h comm, mpi_h info, void *req), \
          (sbuf, rbuf, count, type, op, comm, info, req), mpi_bytes(count, type), MPI_FITS(count))
ALLREDUCE_INIT(MPI_Allreduce_init, int)
ALLREDUCE_INIT(MPI_Allreduce_init_c, mpi_count)
ALLREDUCE_INIT(MPI_Scan_init, int)
ALLREDUCE_INIT(MPI_Scan_init_c, mpi_count)
ALLREDUCE_INIT(MPI_Exscan_init, int)
ALLREDUCE_INIT(MPI_Exscan_init_c, mpi_count)
ALLREDUCE_INIT(MPI_Reduce_scatter_block_init, int)
ALLREDUCE_INIT(MPI_Reduce_scatter_block_init_c, mpi_count)
ALLREDUCE_INIT(MPIX_Allreduce_init, int)
ALLREDUCE_INIT(MPIX_Scan_init, int)
ALLREDUCE_INIT(MPIX_Exscan_init, int)
ALLREDUCE_INIT(MPIX_Reduce_scatter_block_init, int)

#define REDUCE_SCATTER_INIT(fn, cnt, sfx)                                                          \
    PCOLL(fn, (const void *, void *, const cnt *, mpi_h, mpi_h, mpi_h, mpi_h, void *),             \
          (const void *sbuf, void *rbuf, const cnt *counts, mpi_h type, mpi_h op, mpi_h comm, mpi_h info, \
           void *req),                                                                             \
          (sbuf, rbuf, counts, type, op, comm, info, req), own_block##sfx(counts, type, comm))
REDUCE_SCATTER_INIT(MPI_Reduce_scatter_init, int, _i)
REDUCE_SCATTER_INIT(MPI_Reduce_scatter_init_c, mpi_count, _c)
REDUCE_SCATTER_INIT(MPIX_Reduce_scatter_init, int, _i)

/* Gather, Scatter: (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, req). */
#define GATHER_INIT(fn, cnt, bytes)                                                                \
    PCOLL_S(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, int, mpi_h, mpi_h, void *),         \
          (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, int root, mpi_h comm, \
           mpi_h info, void *req),                                                                 \
          (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, req), bytes, MPI_FITS(scount) && MPI_FITS(rcount))
#define SCATTERED (mpi_in_place(rbuf) ? mpi_bytes(scount, stype) : mpi_bytes(rcount, rtype))
GATHER_INIT(MPI_Gather_init, int, BLOCK_SENT(scount, stype, rcount, rtype))
GATHER_INIT(MPI_Gather_init_c, mpi_count, BLOCK_SENT(scount, stype, rcount, rtype))
GATHER_INIT(MPI_Scatter_init, int, SCATTERED)
GATHER_INIT(MPI_Scatter_init_c, mpi_count, SCATTERED)
GATHER_INIT(MPIX_Gather_init, int, BLOCK_SENT(scount, stype, rcount, rtype))
GATHER_INIT(MPIX_Scatter_init, int, SCATTERED)

/* Allgather, Alltoall: (sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req). */
#define ALLGATHER_INIT(fn, cnt)                                                                    \
    PCOLL_S(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, mpi_h, mpi_h, void *),              \
          (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm, mpi_h info, \
           void *req),                                                                             \
          (sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req), BLOCK_SENT(scount, stype, rcount, rtype), MPI_FITS(scount) && MPI_FITS(rcount))
ALLGATHER_INIT(MPI_Allgather_init, int)
ALLGATHER_INIT(MPI_Allgather_init_c, mpi_count)
ALLGATHER_INIT(MPI_Alltoall_init, int)
ALLGATHER_INIT(MPI_Alltoall_init_c, mpi_count)
ALLGATHER_INIT(MPIX_Allgather_init, int)
ALLGATHER_INIT(MPIX_Alltoall_init, int)

#define GATHERV_INIT(fn, cnt, disp, sfx)                                                           \
    PCOLL(fn, (const void *, cnt, mpi_h, void *, const cnt *, const disp *, mpi_h, int, mpi_h, mpi_h, void *), \
          (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, const cnt *rcounts, const disp *displs, \
           mpi_h rtype, int root, mpi_h comm, mpi_h info, void *req),                              \
          (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, info, req),              \
          mpi_in_place(sbuf) ? own_block##sfx(rcounts, rtype, comm) : mpi_bytes(scount, stype))
GATHERV_INIT(MPI_Gatherv_init, int, int, _i)
GATHERV_INIT(MPI_Gatherv_init_c, mpi_count, mpi_aint, _c)
GATHERV_INIT(MPIX_Gatherv_init, int, int, _i)

#define ALLGATHERV_INIT(fn, cnt, disp, sfx)                                                        \
    PCOLL(fn, (const void *, cnt, mpi_h, void *, const cnt *, const disp *, mpi_h, mpi_h, mpi_h, void *), \
          (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, const cnt *rcounts, const disp *displs, \
           mpi_h rtype, mpi_h comm, mpi_h info, void *req),                                        \
          (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, req),                    \
          mpi_in_place(sbuf) ? own_block##sfx(rcounts, rtype, comm) : mpi_bytes(scount, stype))
ALLGATHERV_INIT(MPI_Allgatherv_init, int, int, _i)
ALLGATHERV_INIT(MPI_Allgatherv_init_c, mpi_count, mpi_aint, _c)
ALLGATHERV_INIT(MPIX_Allgatherv_init, int, int, _i)

#define SCATTERV_INIT(fn, cnt, disp, sfx)                                                          \
    PCOLL(fn, (const void *, const cnt *, const disp *, mpi_h, void *, cnt, mpi_h, int, mpi_h, mpi_h, void *), \
          (const void *sbuf, const cnt *scounts, const disp *displs, mpi_h stype, void *rbuf, cnt rcount, \
           mpi_h rtype, int root, mpi_h comm, mpi_h info, void *req),                              \
          (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, info, req),              \
          mpi_in_place(rbuf) ? own_block##sfx(scounts, stype, comm) : mpi_bytes(rcount, rtype))
SCATTERV_INIT(MPI_Scatterv_init, int, int, _i)
SCATTERV_INIT(MPI_Scatterv_init_c, mpi_count, mpi_aint, _c)
SCATTERV_INIT(MPIX_Scatterv_init, int, int, _i)

#define ALLTOALLV_INIT(fn, cnt, disp, sfx)                                                         \
    PCOLL(fn, (const void *, const cnt *, const disp *, mpi_h, void *, const cnt *, const disp *, mpi_h, \
               mpi_h, mpi_h, void *),                                                              \
          (const void *sbuf, const cnt *scounts, const disp *sdispls, mpi_h stype, void *rbuf,     \
           const cnt *rcounts, const disp *rdispls, mpi_h rtype, mpi_h comm, mpi_h info, void *req), \
          (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, info, req),         \
          mpi_in_place(sbuf) ? mean_block##sfx(rcounts, rtype, comm) : mean_block##sfx(scounts, stype, comm))
ALLTOALLV_INIT(MPI_Alltoallv_init, int, int, _i)
ALLTOALLV_INIT(MPI_Alltoallv_init_c, mpi_count, mpi_aint, _c)
ALLTOALLV_INIT(MPIX_Alltoallv_init, int, int, _i)

#define ALLTOALLW_INIT(fn, cnt, disp, sfx)                                                         \
    PCOLL(fn, (const void *, const cnt *, const disp *, const void *, void *, const cnt *, const disp *, \
               const void *, mpi_h, mpi_h, void *),                                                \
          (const void *sbuf, const cnt *scounts, const disp *sdispls, const void *stypes, void *rbuf, \
           const cnt *rcounts, const disp *rdispls, const void *rtypes, mpi_h comm, mpi_h info, void *req), \
          (sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, info, req), ALLTOALLW_BLOCK(sfx))
ALLTOALLW_INIT(MPI_Alltoallw_init, int, int, _i)
ALLTOALLW_INIT(MPI_Alltoallw_init_c, mpi_count, mpi_aint, _c)
ALLTOALLW_INIT(MPIX_Alltoallw_init, int, int, _i)
