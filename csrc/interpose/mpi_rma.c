/* mpi_rma.c - the MPI module's one-sided communication (mpi.c has the
 * module and its record; mpi.h why one build serves every MPI).
 *
 * Class rma: the calls that start a transfer (MPI_Put, MPI_Get,
 * MPI_Accumulate, MPI_Get_accumulate, MPI_Rput, MPI_Rget,
 * MPI_Fetch_and_op, MPI_Compare_and_swap), with the origin's bytes (count
 * times the origin datatype's size; one element of the datatype for the
 * atomics). The call may return before the data moved: the transfer
 * completes at a synchronisation, so its time is there. They enter the
 * posting histogram, as MPI_Isend does. Class rma_sync: the calls that
 * complete transfers or order epochs (MPI_Win_fence, MPI_Win_lock and
 * unlock, their _all forms, the flushes, MPI_Win_post, start, complete,
 * wait, sync): time only, and where ranks wait for each other. Targets are
 * ranks of the window's group, not world ranks: no peer lines. Each data
 * call is written once for int counts and once for the MPI 4 large-count
 * form (_c).
 */
#include "mpi.h"

/* Put, Get: (origin, ocount, otype, target, tdisp, tcount, ttype, win). */
#define PUT(fn, cnt, q)                                                                            \
    PMPI_DECL(fn, (q void *, cnt, mpi_h, int, mpi_aint, cnt, mpi_h, mpi_h));                       \
    MPI_WRAP_S(fn, MH_POST,                                                                        \
             (q void *obuf, cnt ocount, mpi_h otype, int target, mpi_aint tdisp, cnt tcount, mpi_h ttype, \
              mpi_h win),                                                                          \
             (obuf, ocount, otype, target, tdisp, tcount, ttype, win), mpi_bytes(ocount, otype), MPI_FITS(ocount) && MPI_FITS(tcount))
PUT(MPI_Put, int, const)
PUT(MPI_Put_c, mpi_count, const)
PUT(MPI_Get, int, )
PUT(MPI_Get_c, mpi_count, )

/* Rput, Rget: the same with a request. */
#define RPUT(fn, cnt, q)                                                                           \
    PMPI_DECL(fn, (q void *, cnt, mpi_h, int, mpi_aint, cnt, mpi_h, mpi_h, void *));               \
    MPI_WRAP_S(fn, MH_POST,                                                                        \
             (q void *obuf, cnt ocount, mpi_h otype, int target, mpi_aint tdisp, cnt tcount, mpi_h ttype, \
              mpi_h win, void *req),                                                               \
             (obuf, ocount, otype, target, tdisp, tcount, ttype, win, req), mpi_bytes(ocount, otype), MPI_FITS(ocount) && MPI_FITS(tcount))
RPUT(MPI_Rput, int, const)
RPUT(MPI_Rput_c, mpi_count, const)
RPUT(MPI_Rget, int, )
RPUT(MPI_Rget_c, mpi_count, )

#define ACCUMULATE(fn, cnt)                                                                        \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, int, mpi_aint, cnt, mpi_h, mpi_h, mpi_h));            \
    MPI_WRAP_S(fn, MH_POST,                                                                        \
             (const void *obuf, cnt ocount, mpi_h otype, int target, mpi_aint tdisp, cnt tcount,   \
              mpi_h ttype, mpi_h op, mpi_h win),                                                   \
             (obuf, ocount, otype, target, tdisp, tcount, ttype, op, win), mpi_bytes(ocount, otype), MPI_FITS(ocount) && MPI_FITS(tcount))
ACCUMULATE(MPI_Accumulate, int)
ACCUMULATE(MPI_Accumulate_c, mpi_count)

#define GET_ACCUMULATE(fn, cnt)                                                                    \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, int, mpi_aint, cnt, mpi_h, mpi_h, mpi_h)); \
    MPI_WRAP_S(fn, MH_POST,                                                                        \
             (const void *obuf, cnt ocount, mpi_h otype, void *rbuf, cnt rcount, mpi_h rtype, int target, \
              mpi_aint tdisp, cnt tcount, mpi_h ttype, mpi_h op, mpi_h win),                       \
             (obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount, ttype, op, win),    \
             mpi_bytes(ocount, otype), MPI_FITS(ocount) && MPI_FITS(rcount) && MPI_FITS(tcount))
GET_ACCUMULATE(MPI_Get_accumulate, int)
GET_ACCUMULATE(MPI_Get_accumulate_c, mpi_count)

PMPI_DECL(MPI_Fetch_and_op, (const void *, void *, mpi_h, int, mpi_aint, mpi_h, mpi_h));
MPI_WRAP(MPI_Fetch_and_op, MH_POST,
         (const void *obuf, void *rbuf, mpi_h type, int target, mpi_aint tdisp, mpi_h op, mpi_h win),
         (obuf, rbuf, type, target, tdisp, op, win), mpi_bytes(1, type))

PMPI_DECL(MPI_Compare_and_swap, (const void *, const void *, void *, mpi_h, int, mpi_aint, mpi_h));
MPI_WRAP(MPI_Compare_and_swap, MH_POST,
         (const void *obuf, const void *cbuf, void *rbuf, mpi_h type, int target, mpi_aint tdisp, mpi_h win),
         (obuf, cbuf, rbuf, type, target, tdisp, win), mpi_bytes(1, type))

/* ---- synchronisation: time only ------------------------------------------------- */

PMPI_DECL(MPI_Win_fence, (int, mpi_h));
MPI_WRAP(MPI_Win_fence, -1, (int assert_, mpi_h win), (assert_, win), 0)
PMPI_DECL(MPI_Win_lock, (int, int, int, mpi_h));
MPI_WRAP(MPI_Win_lock, -1, (int type, int rank, int assert_, mpi_h win), (type, rank, assert_, win), 0)
PMPI_DECL(MPI_Win_unlock, (int, mpi_h));
MPI_WRAP(MPI_Win_unlock, -1, (int rank, mpi_h win), (rank, win), 0)
PMPI_DECL(MPI_Win_lock_all, (int, mpi_h));
MPI_WRAP(MPI_Win_lock_all, -1, (int assert_, mpi_h win), (assert_, win), 0)
PMPI_DECL(MPI_Win_unlock_all, (mpi_h));
MPI_WRAP(MPI_Win_unlock_all, -1, (mpi_h win), (win), 0)
PMPI_DECL(MPI_Win_flush, (int, mpi_h));
MPI_WRAP(MPI_Win_flush, -1, (int rank, mpi_h win), (rank, win), 0)
PMPI_DECL(MPI_Win_flush_all, (mpi_h));
MPI_WRAP(MPI_Win_flush_all, -1, (mpi_h win), (win), 0)
PMPI_DECL(MPI_Win_flush_local, (int, mpi_h));
MPI_WRAP(MPI_Win_flush_local, -1, (int rank, mpi_h win), (rank, win), 0)
PMPI_DECL(MPI_Win_flush_local_all, (mpi_h));
MPI_WRAP(MPI_Win_flush_local_all, -1, (mpi_h win), (win), 0)
PMPI_DECL(MPI_Win_post, (mpi_h, int, mpi_h));
MPI_WRAP(MPI_Win_post, -1, (mpi_h group, int assert_, mpi_h win), (group, assert_, win), 0)
PMPI_DECL(MPI_Win_start, (mpi_h, int, mpi_h));
MPI_WRAP(MPI_Win_start, -1, (mpi_h group, int assert_, mpi_h win), (group, assert_, win), 0)
PMPI_DECL(MPI_Win_complete, (mpi_h));
MPI_WRAP(MPI_Win_complete, -1, (mpi_h win), (win), 0)
PMPI_DECL(MPI_Win_wait, (mpi_h));
MPI_WRAP(MPI_Win_wait, -1, (mpi_h win), (win), 0)
PMPI_DECL(MPI_Win_sync, (mpi_h));
MPI_WRAP(MPI_Win_sync, -1, (mpi_h win), (win), 0)
