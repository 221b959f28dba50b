/* mpi_neighbor.c - the MPI module's neighbourhood collectives, on a
 * communicator with a topology (MPI_Cart_create, MPI_Dist_graph_create ...):
 * blocking (class coll), non-blocking (icoll, at posting, in no histogram,
 * as mpi_coll.c's) and MPI 4 persistent (each start one call of the init's
 * name, class icoll: mpi.h, PCOLL). mpi.c has the module and its record;
 * mpi.h why one build serves every MPI.
 *
 * Bytes: Allgather, Alltoall and Allgatherv the block sent (MPI_IN_PLACE is
 * not allowed in these). Alltoallv's and Alltoallw's blocks are in count
 * arrays as long as the neighbour list, which the wrapper does not know:
 * calls and time only, in no histogram. The persistent and non-blocking
 * forms count what the blocking one does. Each wrapper is written once for
 * int counts and once for the MPI 4 large-count form (_c: MPI_Count counts,
 * MPI_Aint displacements; Alltoallw's displacements are MPI_Aint in both).
 * The PMPI functions are looked up at the first call: an MPI without the
 * persistent ones (Open MPI 4.1 has only MPIX_ forms) runs as before.
 */
#include "mpi.h"

/* The arguments after comm: none (blocking), the request (non-blocking),
 * info and the request (persistent); as types (T), parameters (P) and
 * arguments (A). P reaches the _ARGS macros below as their variadic part. */
#define REQ_T , void *
#define REQ_P , void *req
#define REQ_A , req
#define INIT_T , mpi_h, void *
#define INIT_P , mpi_h info, void *req
#define INIT_A , info, req

/* Allgather, Alltoall: (sbuf, scount, stype, rbuf, rcount, rtype, comm ...): one block sent. */
#define NEIGHBOR(fn, cnt, hist, T, P, A)                                                           \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, mpi_h T));                        \
    MPI_WRAP(fn, hist,                                                                             \
             (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm P), \
             (sbuf, scount, stype, rbuf, rcount, rtype, comm A), mpi_bytes(scount, stype))
NEIGHBOR(MPI_Neighbor_allgather, int, MH_COLL, , , )
NEIGHBOR(MPI_Neighbor_allgather_c, mpi_count, MH_COLL, , , )
NEIGHBOR(MPI_Neighbor_alltoall, int, MH_COLL, , , )
NEIGHBOR(MPI_Neighbor_alltoall_c, mpi_count, MH_COLL, , , )
NEIGHBOR(MPI_Ineighbor_allgather, int, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR(MPI_Ineighbor_allgather_c, mpi_count, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR(MPI_Ineighbor_alltoall, int, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR(MPI_Ineighbor_alltoall_c, mpi_count, -1, REQ_T, REQ_P, REQ_A)

#define NEIGHBOR_INIT(fn, cnt)                                                                     \
    PCOLL(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, mpi_h INIT_T),                        \
          (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm INIT_P), \
          (sbuf, scount, stype, rbuf, rcount, rtype, comm INIT_A), mpi_bytes(scount, stype))
NEIGHBOR_INIT(MPI_Neighbor_allgather_init, int)
NEIGHBOR_INIT(MPI_Neighbor_allgather_init_c, mpi_count)
NEIGHBOR_INIT(MPI_Neighbor_alltoall_init, int)
NEIGHBOR_INIT(MPI_Neighbor_alltoall_init_c, mpi_count)
NEIGHBOR_INIT(MPIX_Neighbor_allgather_init, int)
NEIGHBOR_INIT(MPIX_Neighbor_alltoall_init, int)

/* Allgatherv: (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm ...): the block sent. */
#define NEIGHBOR_ALLGATHERV_ARGS(cnt, disp, ...)                                                   \
    (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, const cnt *rcounts, const disp *displs, mpi_h rtype, \
     mpi_h comm __VA_ARGS__)
#define NEIGHBOR_ALLGATHERV(fn, cnt, disp, hist, T, P, A)                                          \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, void *, const cnt *, const disp *, mpi_h, mpi_h T));  \
    MPI_WRAP(fn, hist, NEIGHBOR_ALLGATHERV_ARGS(cnt, disp, P),                                     \
             (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm A), mpi_bytes(scount, stype))
NEIGHBOR_ALLGATHERV(MPI_Neighbor_allgatherv, int, int, MH_COLL, , , )
NEIGHBOR_ALLGATHERV(MPI_Neighbor_allgatherv_c, mpi_count, mpi_aint, MH_COLL, , , )
NEIGHBOR_ALLGATHERV(MPI_Ineighbor_allgatherv, int, int, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLGATHERV(MPI_Ineighbor_allgatherv_c, mpi_count, mpi_aint, -1, REQ_T, REQ_P, REQ_A)

#define NEIGHBOR_ALLGATHERV_INIT(fn, cnt, disp)                                                    \
    PCOLL(fn, (const void *, cnt, mpi_h, void *, const cnt *, const disp *, mpi_h, mpi_h INIT_T),  \
          NEIGHBOR_ALLGATHERV_ARGS(cnt, disp, INIT_P),                                             \
          (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm INIT_A), mpi_bytes(scount, stype))
NEIGHBOR_ALLGATHERV_INIT(MPI_Neighbor_allgatherv_init, int, int)
NEIGHBOR_ALLGATHERV_INIT(MPI_Neighbor_allgatherv_init_c, mpi_count, mpi_aint)
NEIGHBOR_ALLGATHERV_INIT(MPIX_Neighbor_allgatherv_init, int, int)

/* Alltoallv (one datatype a side) and Alltoallw (an array of them, `ty`
 * const void *): (sbuf, scounts, sdispls, stype(s), rbuf, rcounts, rdispls,
 * rtype(s), comm ...): calls and time only. */
#define NEIGHBOR_ALLTOALLV_ARGS(cnt, disp, ty, ...)                                                \
    (const void *sbuf, const cnt *scounts, const disp *sdispls, ty stype, void *rbuf, const cnt *rcounts, \
     const disp *rdispls, ty rtype, mpi_h comm __VA_ARGS__)
#define NEIGHBOR_ALLTOALLV_TYPES(cnt, disp, ty) const void *, const cnt *, const disp *, ty, void *, const cnt *, \
     const disp *, ty, mpi_h
#define NEIGHBOR_ALLTOALLV(fn, cnt, disp, ty, T, P, A)                                             \
    PMPI_DECL(fn, (NEIGHBOR_ALLTOALLV_TYPES(cnt, disp, ty) T));                                    \
    MPI_WRAP(fn, -1, NEIGHBOR_ALLTOALLV_ARGS(cnt, disp, ty, P),                                    \
             (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm A), 0)
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallv, int, int, mpi_h, , , )
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallv_c, mpi_count, mpi_aint, mpi_h, , , )
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallw, int, mpi_aint, const void *, , , )
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallw_c, mpi_count, mpi_aint, const void *, , , )
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallv, int, int, mpi_h, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallv_c, mpi_count, mpi_aint, mpi_h, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallw, int, mpi_aint, const void *, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallw_c, mpi_count, mpi_aint, const void *, REQ_T, REQ_P, REQ_A)

#define NEIGHBOR_ALLTOALLV_INIT(fn, cnt, disp, ty)                                                 \
    PCOLL(fn, (NEIGHBOR_ALLTOALLV_TYPES(cnt, disp, ty) INIT_T), NEIGHBOR_ALLTOALLV_ARGS(cnt, disp, ty, INIT_P), \
          (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm INIT_A), 0)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallv_init, int, int, mpi_h)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallv_init_c, mpi_count, mpi_aint, mpi_h)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallw_init, int, mpi_aint, const void *)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallw_init_c, mpi_count, mpi_aint, const void *)
NEIGHBOR_ALLTOALLV_INIT(MPIX_Neighbor_alltoallv_init, int, int, mpi_h)
NEIGHBOR_ALLTOALLV_INIT(MPIX_Neighbor_alltoallw_init, int, mpi_aint, const void *)
