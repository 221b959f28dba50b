/* mpi_narrow.c - the blocking large-count v-collectives (MPI_Gatherv_c ...)
 * on an MPI without them (an MPI 3 library; Open MPI 5.0): their int forms,
 * with the count and displacement arrays copied to ints. A program that
 * tests for the _c calls (mpi4py 4's wheels: its gather, scatter, allgather
 * and alltoall of Python objects use them) finds the wrapper on such an MPI,
 * whose PMPI_..._c is missing; mpi.h's PMPI_REAL_S then finds the int form
 * and MPI_V_CALL_c calls it through these. The scalar-count calls need no
 * copy (mpi.h, PMPI_REAL_S). Arrays are read where the call reads them (at
 * the root only for Gatherv's receive side and Scatterv's send side), over
 * the group's size (the remote group's on an intercommunicator, but the
 * local one for Reduce_scatter's), asked of the MPI here. A count or
 * displacement that does not fit an int gives MPI_ERR_COUNT (mpi.h); so do
 * a failed allocation and a size that cannot be had. Not for the
 * neighbourhood, non-blocking and persistent v-forms (the latter's arrays
 * must outlive the call): those still stop the program with the line
 * resolve.c writes.
 */
#include <stdlib.h>
#include "mpi.h"

/* A copy of v[0 .. n-1] as ints (NULL for none); *bad set when a value does not fit, memory
 * fails, or the length is unknown (n < 0). */
static int *ints(const int64_t *v, int n, int *bad)
{
    if (v && n < 0)
        *bad = 1;
    if (!v || n <= 0)
        return NULL;
    int *out = malloc((size_t)n * sizeof *out);
    if (!out) {
        *bad = 1;
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        *bad |= !mpi_fits(v[i]);
        out[i] = (int)v[i];
    }
    return out;
}

/* The communicator queries, looked up where the int form was found (f: an address in that
 * object), not at MPI_Init: the module may not have seen it (its runtime off, MPI 4 sessions). */
typedef int (*comm_int_fn)(mpi_h, int *);
static comm_int_fn query(const char *name, void *f, void **cache)
{
    void *q = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (!q && (q = ceil_ip_lookup(name, f)) != NULL)
        __atomic_store_n(cache, q, __ATOMIC_RELAXED);
    return (comm_int_fn)q;
}
static int ask(const char *name, void *f, void **cache, mpi_h comm)
{
    comm_int_fn q = query(name, f, cache);
    int v = -1;
    return q && q(comm, &v) == 0 ? v : -1;
}
static void *c_size, *c_rank, *c_inter, *c_remote;
static int local_size(mpi_h comm, void *f) { return ask("PMPI_Comm_size", f, &c_size, comm); }
static int inter(mpi_h comm, void *f) { return ask("PMPI_Comm_test_inter", f, &c_inter, comm) > 0; }

/* How many entries a count array has: the group's size, the remote group's on an intercommunicator. */
static int group_size(mpi_h comm, void *f)
{
    return inter(comm, f) ? ask("PMPI_Comm_remote_size", f, &c_remote, comm) : local_size(comm, f);
}

/* Whether this process is the root of a rooted collective: its rank on an intracommunicator;
 * MPI_ROOT on an intercommunicator (-3 in MPICH's ABI and the MPI 5 ABI, -4 in Open MPI's;
 * MPI_PROC_NULL and MPI_ANY_SOURCE are above both), where a rank names one in the other group. */
static int at_root(int root, mpi_h comm, void *f)
{
    return inter(comm, f) ? root <= -3 : root == ask("PMPI_Comm_rank", f, &c_rank, comm);
}

typedef int (*gatherv_fn)(const void *, int, mpi_h, void *, const int *, const int *, mpi_h, int, mpi_h);
int mpi_narrow_gatherv(void *f, const void *sbuf, mpi_count scount, mpi_h stype, void *rbuf, const mpi_count *rcounts,
                       const mpi_aint *displs, mpi_h rtype, int root, mpi_h comm)
{
    const int n = at_root(root, comm, f) ? group_size(comm, f) : 0;
    int bad = !mpi_fits(scount);
    int *rc = ints(rcounts, n, &bad), *dp = ints(displs, n, &bad);
    const int r = bad ? MPI_ERR_COUNT_ : ((gatherv_fn)f)(sbuf, (int)scount, stype, rbuf, rc, dp, rtype, root, comm);
    free(rc);
    free(dp);
    return r;
}

typedef int (*scatterv_fn)(const void *, const int *, const int *, mpi_h, void *, int, mpi_h, int, mpi_h);
int mpi_narrow_scatterv(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *displs, mpi_h stype,
                        void *rbuf, mpi_count rcount, mpi_h rtype, int root, mpi_h comm)
{
    const int n = at_root(root, comm, f) ? group_size(comm, f) : 0;
    int bad = !mpi_fits(rcount);
    int *sc = ints(scounts, n, &bad), *dp = ints(displs, n, &bad);
    const int r = bad ? MPI_ERR_COUNT_ : ((scatterv_fn)f)(sbuf, sc, dp, stype, rbuf, (int)rcount, rtype, root, comm);
    free(sc);
    free(dp);
    return r;
}

typedef int (*allgatherv_fn)(const void *, int, mpi_h, void *, const int *, const int *, mpi_h, mpi_h);
int mpi_narrow_allgatherv(void *f, const void *sbuf, mpi_count scount, mpi_h stype, void *rbuf,
                          const mpi_count *rcounts, const mpi_aint *displs, mpi_h rtype, mpi_h comm)
{
    const int n = group_size(comm, f);
    int bad = !mpi_fits(scount);
    int *rc = ints(rcounts, n, &bad), *dp = ints(displs, n, &bad);
    const int r = bad ? MPI_ERR_COUNT_ : ((allgatherv_fn)f)(sbuf, (int)scount, stype, rbuf, rc, dp, rtype, comm);
    free(rc);
    free(dp);
    return r;
}

/* Alltoallv (one datatype a side) and Alltoallw (arrays of them, passed through): the same call. */
typedef int (*alltoallv_fn)(const void *, const int *, const int *, const void *, void *, const int *, const int *,
                            const void *, mpi_h);
static int alltoall_v_or_w(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *sdispls,
                           const void *stype, void *rbuf, const mpi_count *rcounts, const mpi_aint *rdispls,
                           const void *rtype, mpi_h comm)
{
    const int n = group_size(comm, f);
    int bad = 0;
    int *sc = ints(scounts, n, &bad), *sd = ints(sdispls, n, &bad);
    int *rc = ints(rcounts, n, &bad), *rd = ints(rdispls, n, &bad);
    const int r = bad ? MPI_ERR_COUNT_ : ((alltoallv_fn)f)(sbuf, sc, sd, stype, rbuf, rc, rd, rtype, comm);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    return r;
}

int mpi_narrow_alltoallv(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *sdispls, mpi_h stype,
                         void *rbuf, const mpi_count *rcounts, const mpi_aint *rdispls, mpi_h rtype, mpi_h comm)
{
    /* a handle passed where the int form has one: the same register or slot as a pointer */
    return alltoall_v_or_w(f, sbuf, scounts, sdispls, (const void *)stype, rbuf, rcounts, rdispls,
                           (const void *)rtype, comm);
}

int mpi_narrow_alltoallw(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *sdispls,
                         const void *stypes, void *rbuf, const mpi_count *rcounts, const mpi_aint *rdispls,
                         const void *rtypes, mpi_h comm)
{
    return alltoall_v_or_w(f, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
}

typedef int (*reduce_scatter_fn)(const void *, void *, const int *, mpi_h, mpi_h, mpi_h);
int mpi_narrow_reduce_scatter(void *f, const void *sbuf, void *rbuf, const mpi_count *counts, mpi_h type, mpi_h op,
                              mpi_h comm)
{
    int bad = 0;
    int *rc = ints(counts, local_size(comm, f), &bad);     /* this group's blocks, also on an intercommunicator */
    const int r = bad ? MPI_ERR_COUNT_ : ((reduce_scatter_fn)f)(sbuf, rbuf, rc, type, op, comm);
    free(rc);
    return r;
}
