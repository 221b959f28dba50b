/* mpi_neighbor.c - the MPI module's neighbourhood collectives, on a
 * communicator with a topology (MPI_Cart_create, MPI_Dist_graph_create ...):
 * blocking (class coll), non-blocking (icoll, at posting, in no histogram,
 * as mpi_coll.c's) and MPI 4 persistent (each start one call of the init's
 * name, class icoll: mpi.h, PCOLL). mpi.c has the module and its record;
 * mpi.h why one build serves every MPI.
 *
 * Bytes: Allgather, Alltoall and Allgatherv the block sent (MPI_IN_PLACE is
 * not allowed in these); Alltoallv and Alltoallw the mean block sent, their
 * send counts (each of its own datatype for Alltoallw) summed over this
 * process's out-degree in the topology and divided by it, as mpi_coll.c's
 * Alltoallv over the communicator's size: a Cartesian topology's 2 x
 * dimensions (the MPI_PROC_NULL neighbours of a non-periodic edge
 * included, as the count arrays include them), this rank's neighbours in a
 * graph, a distributed graph's out-degree. The persistent and non-blocking
 * forms count what the blocking one does. Each wrapper is written once for
 * int counts and once for the MPI 4 large-count form (_c: MPI_Count counts,
 * MPI_Aint displacements; Alltoallw's displacements are MPI_Aint in both).
 * The PMPI functions are looked up at the first call: an MPI without the
 * persistent ones (Open MPI 4.1 has only MPIX_ forms) runs as before.
 */
#include "mpi.h"

#include <string.h>

/* The topology queries (mpi_neighbor_started, at MPI_Init; NULL if absent). */
typedef int (*comm_int_fn)(mpi_h, int *);
typedef int (*graph_count_fn)(mpi_h, int, int *);
typedef int (*dist_count_fn)(mpi_h, int *, int *, int *);
static comm_int_fn topo_test, cartdim_get;
static graph_count_fn graph_count;
static dist_count_fn dist_count;

void mpi_neighbor_started(const void *caller)
{
    topo_test = (comm_int_fn)ceil_ip_lookup("PMPI_Topo_test", caller);
    cartdim_get = (comm_int_fn)ceil_ip_lookup("PMPI_Cartdim_get", caller);
    graph_count = (graph_count_fn)ceil_ip_lookup("PMPI_Graph_neighbors_count", caller);
    dist_count = (dist_count_fn)ceil_ip_lookup("PMPI_Dist_graph_neighbors_count", caller);
}

/* PMPI_Topo_test's constants differ between MPIs. */
int mpi_out_degree(mpi_h comm)
{
    /* MPI_CART, MPI_GRAPH, MPI_DIST_GRAPH in each one's mpi.h (the MPI 5 ABI's: mpi_abi.h) */
    static const struct {
        const char *family;
        int cart, graph, dist;
    } kinds[] = {{"openmpi", 1, 2, 3}, {"mpich", 2, 1, 3}, {"mpi-abi", 211, 212, 213}};
    const char *family = mpi_family();
    int kind = 0, n = 0, in = 0, weighted = 0;
    if (!topo_test || topo_test(comm, &kind) != 0)
        return 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(family, kinds[i].family) != 0)
            continue;
        if (kind == kinds[i].cart)
            return cartdim_get && cartdim_get(comm, &n) == 0 && n > 0 ? 2 * n : 0;
        if (kind == kinds[i].graph) {
            const int r = mpi_comm_rank(comm);
            return graph_count && r >= 0 && graph_count(comm, r, &n) == 0 && n > 0 ? n : 0;
        }
        if (kind == kinds[i].dist)
            return dist_count && dist_count(comm, &in, &n, &weighted) == 0 && n > 0 ? n : 0;
    }
    return 0;
}

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
    MPI_WRAP_S(fn, hist,                                                                           \
             (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm P), \
             (sbuf, scount, stype, rbuf, rcount, rtype, comm A), mpi_bytes(scount, stype), MPI_FITS(scount) && MPI_FITS(rcount))
NEIGHBOR(MPI_Neighbor_allgather, int, MH_COLL, , , )
NEIGHBOR(MPI_Neighbor_allgather_c, mpi_count, MH_COLL, , , )
NEIGHBOR(MPI_Neighbor_alltoall, int, MH_COLL, , , )
NEIGHBOR(MPI_Neighbor_alltoall_c, mpi_count, MH_COLL, , , )
NEIGHBOR(MPI_Ineighbor_allgather, int, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR(MPI_Ineighbor_allgather_c, mpi_count, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR(MPI_Ineighbor_alltoall, int, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR(MPI_Ineighbor_alltoall_c, mpi_count, -1, REQ_T, REQ_P, REQ_A)

#define NEIGHBOR_INIT(fn, cnt)                                                                     \
    PCOLL_S(fn, (const void *, cnt, mpi_h, void *, cnt, mpi_h, mpi_h INIT_T),                      \
          (const void *sbuf, cnt scount, mpi_h stype, void *rbuf, cnt rcount, mpi_h rtype, mpi_h comm INIT_P), \
          (sbuf, scount, stype, rbuf, rcount, rtype, comm INIT_A), mpi_bytes(scount, stype), MPI_FITS(scount) && MPI_FITS(rcount))
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

/* Alltoallv (one datatype a side: sfx _i or _c) and Alltoallw (an array of
 * them, `ty` const void *: sfx _w_i or _w_c): (sbuf, scounts, sdispls,
 * stype(s), rbuf, rcounts, rdispls, rtype(s), comm ...): the mean block sent. */
#define NEIGHBOR_ALLTOALLV_ARGS(cnt, disp, ty, ...)                                                \
    (const void *sbuf, const cnt *scounts, const disp *sdispls, ty stype, void *rbuf, const cnt *rcounts, \
     const disp *rdispls, ty rtype, mpi_h comm __VA_ARGS__)
#define NEIGHBOR_ALLTOALLV_TYPES(cnt, disp, ty) const void *, const cnt *, const disp *, ty, void *, const cnt *, \
     const disp *, ty, mpi_h
#define NEIGHBOR_MEAN(sfx) mpi_mean_of##sfx(scounts, stype, mpi_out_degree(comm))
#define NEIGHBOR_ALLTOALLV(fn, cnt, disp, ty, sfx, hist, T, P, A)                                  \
    PMPI_DECL(fn, (NEIGHBOR_ALLTOALLV_TYPES(cnt, disp, ty) T));                                    \
    MPI_WRAP(fn, hist, NEIGHBOR_ALLTOALLV_ARGS(cnt, disp, ty, P),                                  \
             (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm A), NEIGHBOR_MEAN(sfx))
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallv, int, int, mpi_h, _i, MH_COLL, , , )
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallv_c, mpi_count, mpi_aint, mpi_h, _c, MH_COLL, , , )
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallw, int, mpi_aint, const void *, _w_i, MH_COLL, , , )
NEIGHBOR_ALLTOALLV(MPI_Neighbor_alltoallw_c, mpi_count, mpi_aint, const void *, _w_c, MH_COLL, , , )
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallv, int, int, mpi_h, _i, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallv_c, mpi_count, mpi_aint, mpi_h, _c, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallw, int, mpi_aint, const void *, _w_i, -1, REQ_T, REQ_P, REQ_A)
NEIGHBOR_ALLTOALLV(MPI_Ineighbor_alltoallw_c, mpi_count, mpi_aint, const void *, _w_c, -1, REQ_T, REQ_P, REQ_A)

#define NEIGHBOR_ALLTOALLV_INIT(fn, cnt, disp, ty, sfx)                                            \
    PCOLL(fn, (NEIGHBOR_ALLTOALLV_TYPES(cnt, disp, ty) INIT_T), NEIGHBOR_ALLTOALLV_ARGS(cnt, disp, ty, INIT_P), \
          (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm INIT_A), NEIGHBOR_MEAN(sfx))
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallv_init, int, int, mpi_h, _i)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallv_init_c, mpi_count, mpi_aint, mpi_h, _c)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallw_init, int, mpi_aint, const void *, _w_i)
NEIGHBOR_ALLTOALLV_INIT(MPI_Neighbor_alltoallw_init_c, mpi_count, mpi_aint, const void *, _w_c)
NEIGHBOR_ALLTOALLV_INIT(MPIX_Neighbor_alltoallv_init, int, int, mpi_h, _i)
NEIGHBOR_ALLTOALLV_INIT(MPIX_Neighbor_alltoallw_init, int, mpi_aint, const void *, _w_i)
