/* mpi_fortran.c - the MPI module's Fortran bindings (mpi.c has the module
 * and its record; mpi.h why one build serves every MPI).
 *
 * A Fortran program calls mpi_send_ (the `use mpi` module and mpif.h, as
 * gfortran, ifort, ifx, flang and nvfortran name it: lower case, one
 * trailing underscore), and Open MPI's Fortran library goes from there
 * straight to PMPI_Send: the C wrappers never see the call. So the calls
 * below are wrapped under their Fortran names too, passed on to the real
 * Fortran function (RTLD_NEXT, else the caller's object) and counted under
 * the C name (a Fortran MPI_Send is fn=MPI_Send in the record), with the
 * same bytes, histograms and peers as the C wrappers. Where a library's
 * Fortran function calls the C one (MPICH's), the C wrapper passes it
 * through: the depth is raised (interpose.h, nesting).
 *
 * Fortran passes every argument by reference; handles are INTEGERs, made C
 * handles with PMPI_Comm_f2c and PMPI_Type_f2c for the sizes and peers; a
 * receive's bytes come from its status (PMPI_Status_f2c), 0 with
 * MPI_STATUS_IGNORE (MPI_F_STATUS_IGNORE tells it). MPI_IN_PLACE is known
 * by Open MPI's and MPICH's sentinels; elsewhere a Gather or Allgather in
 * place counts its send arguments.
 *
 * Wrapped: MPI_Init, MPI_Init_thread, MPI_Finalize; the blocking sends,
 * MPI_Recv, MPI_Probe, MPI_Sendrecv, MPI_Sendrecv_replace; MPI_Isend and its
 * forms, MPI_Irecv; the waits and tests, MPI_Iprobe; MPI_Barrier,
 * MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Gather, MPI_Scatter,
 * MPI_Allgather, MPI_Alltoall. Not wrapped in Fortran (counted only where
 * the library goes through the C name): the v-collectives, the
 * non-blocking collectives, MPI-IO, and the mpi_f08 module's bindings
 * (mpi_send_f08_ and the like).
 */
#include "mpi.h"

typedef int fint;

/* The real Fortran function, looked up from the program's call. */
#define F_REAL(fn) CEIL_REAL_FROM(fn, __builtin_return_address(0))
#define F_DECL(fn, params) CEIL_IP_REAL_DECL(void, fn, params)

#define COMM(f) mpi_f2c(MPI_F2C_COMM, *(f))
#define TYPE(f) mpi_f2c(MPI_F2C_TYPE, *(f))
#define BYTES(count, type) mpi_bytes(*(count), TYPE(type))

/* A call counted like MPI_WRAP's: fn (Fortran), FN (the C name's index),
 * hist, the named parameters and the arguments, bytes after the call. */
#define F_WRAP(fn, FN, hist, named, args, bytes)                                                   \
    F_DECL(fn, named);                                                                             \
    CEIL_IP_EXPORT void fn named                                                                   \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c) {                                                                                  \
            F_REAL(fn) args;                                                                       \
            return;                                                                                \
        }                                                                                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        F_REAL(fn) args;                                                                           \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        mpi_done(c, FN, ticks, *ierr == 0 ? (bytes) : 0, (hist));                                  \
    }

/* ---- start and end ----------------------------------------------------------- */

F_DECL(mpi_init_, (fint *));
CEIL_IP_EXPORT void mpi_init_(fint *ierr)
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        F_REAL(mpi_init_)(ierr);
        return;
    }
    const uint64_t t0 = ceil_ip_ticks();
    F_REAL(mpi_init_)(ierr);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    mpi_started(__builtin_return_address(0), *ierr == 0, -1);
    mpi_done(c, FN_MPI_Init, ticks, 0, -1);
}

F_DECL(mpi_init_thread_, (fint *, fint *, fint *));
CEIL_IP_EXPORT void mpi_init_thread_(fint *required, fint *provided, fint *ierr)
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        F_REAL(mpi_init_thread_)(required, provided, ierr);
        return;
    }
    const uint64_t t0 = ceil_ip_ticks();
    F_REAL(mpi_init_thread_)(required, provided, ierr);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    mpi_started(__builtin_return_address(0), *ierr == 0, *provided);
    mpi_done(c, FN_MPI_Init_thread, ticks, 0, -1);
}

F_DECL(mpi_finalize_, (fint *));
CEIL_IP_EXPORT void mpi_finalize_(fint *ierr)
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        F_REAL(mpi_finalize_)(ierr);
        return;
    }
    const uint64_t t0 = ceil_ip_ticks();
    mpi_finalizing(__builtin_return_address(0));
    F_REAL(mpi_finalize_)(ierr);
    mpi_done(c, FN_MPI_Finalize, ceil_ip_ticks() - t0, 0, -1);
}

/* ---- point-to-point ------------------------------------------------------------- */

/* The sends: (buf, count, type, dest, tag, comm[, request], ierr); the posted
 * ones (with a request) go into the posting histogram. */
#define F_SEND_BODY(fn, FN, hist, args)                                                            \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c) {                                                                                  \
            F_REAL(fn) args;                                                                       \
            return;                                                                                \
        }                                                                                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        F_REAL(fn) args;                                                                           \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = *ierr == 0 ? BYTES(count, type) : 0;      \
        mpi_peer_send(c, COMM(comm), *dest, n, ticks);                                             \
        mpi_done(c, FN, ticks, n, hist);                                                           \
    }
#define F_SEND(fn, FN)                                                                             \
    F_DECL(fn, (void *, fint *, fint *, fint *, fint *, fint *, fint *));                          \
    CEIL_IP_EXPORT void fn(void *buf, fint *count, fint *type, fint *dest, fint *tag, fint *comm,  \
                           fint *ierr)                                                             \
        F_SEND_BODY(fn, FN, MH_P2P, (buf, count, type, dest, tag, comm, ierr))
#define F_ISEND(fn, FN)                                                                            \
    F_DECL(fn, (void *, fint *, fint *, fint *, fint *, fint *, fint *, fint *));                  \
    CEIL_IP_EXPORT void fn(void *buf, fint *count, fint *type, fint *dest, fint *tag, fint *comm,  \
                           fint *req, fint *ierr)                                                  \
        F_SEND_BODY(fn, FN, MH_POST, (buf, count, type, dest, tag, comm, req, ierr))
F_SEND(mpi_send_, FN_MPI_Send)
F_SEND(mpi_ssend_, FN_MPI_Ssend)
F_SEND(mpi_bsend_, FN_MPI_Bsend)
F_SEND(mpi_rsend_, FN_MPI_Rsend)
F_ISEND(mpi_isend_, FN_MPI_Isend)
F_ISEND(mpi_issend_, FN_MPI_Issend)
F_ISEND(mpi_ibsend_, FN_MPI_Ibsend)
F_ISEND(mpi_irsend_, FN_MPI_Irsend)

F_WRAP(mpi_irecv_, FN_MPI_Irecv, MH_POST,
       (void *buf, fint *count, fint *type, fint *src, fint *tag, fint *comm, fint *req, fint *ierr),
       (buf, count, type, src, tag, comm, req, ierr), BYTES(count, type))

/* MPI_Recv: the bytes that arrived, from the status. */
F_WRAP(mpi_recv_, FN_MPI_Recv, MH_P2P,
       (void *buf, fint *count, fint *type, fint *src, fint *tag, fint *comm, fint *status, fint *ierr),
       (buf, count, type, src, tag, comm, status, ierr), mpi_fortran_status_bytes(status, TYPE(type)))
F_WRAP(mpi_probe_, FN_MPI_Probe, -1, (fint *src, fint *tag, fint *comm, fint *status, fint *ierr),
       (src, tag, comm, status, ierr), 0)

F_DECL(mpi_sendrecv_, (void *, fint *, fint *, fint *, fint *, void *, fint *, fint *, fint *, fint *, fint *,
                       fint *, fint *));
CEIL_IP_EXPORT void mpi_sendrecv_(void *sbuf, fint *scount, fint *stype, fint *dest, fint *stag, void *rbuf,
                                  fint *rcount, fint *rtype, fint *src, fint *rtag, fint *comm, fint *status,
                                  fint *ierr)
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        F_REAL(mpi_sendrecv_)(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, status, ierr);
        return;
    }
    const uint64_t t0 = ceil_ip_ticks();
    F_REAL(mpi_sendrecv_)(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, status, ierr);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const int ok = *ierr == 0;
    mpi_sendrecv_done(c, FN_MPI_Sendrecv, COMM(comm), *dest, ticks, ok ? BYTES(scount, stype) : 0,
                      ok ? mpi_fortran_status_bytes(status, TYPE(rtype)) : 0);
}

F_DECL(mpi_sendrecv_replace_, (void *, fint *, fint *, fint *, fint *, fint *, fint *, fint *, fint *, fint *));
CEIL_IP_EXPORT void mpi_sendrecv_replace_(void *buf, fint *count, fint *type, fint *dest, fint *stag, fint *src,
                                          fint *rtag, fint *comm, fint *status, fint *ierr)
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        F_REAL(mpi_sendrecv_replace_)(buf, count, type, dest, stag, src, rtag, comm, status, ierr);
        return;
    }
    const uint64_t t0 = ceil_ip_ticks();
    F_REAL(mpi_sendrecv_replace_)(buf, count, type, dest, stag, src, rtag, comm, status, ierr);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const int ok = *ierr == 0;
    mpi_sendrecv_done(c, FN_MPI_Sendrecv_replace, COMM(comm), *dest, ticks, ok ? BYTES(count, type) : 0,
                      ok ? mpi_fortran_status_bytes(status, TYPE(type)) : 0);
}

/* ---- completion: time only ----------------------------------------------------------- */

F_WRAP(mpi_wait_, FN_MPI_Wait, -1, (fint *req, fint *status, fint *ierr), (req, status, ierr), 0)
F_WRAP(mpi_waitall_, FN_MPI_Waitall, -1, (fint *n, fint *reqs, fint *statuses, fint *ierr),
       (n, reqs, statuses, ierr), 0)
F_WRAP(mpi_waitany_, FN_MPI_Waitany, -1, (fint *n, fint *reqs, fint *index, fint *status, fint *ierr),
       (n, reqs, index, status, ierr), 0)
F_WRAP(mpi_waitsome_, FN_MPI_Waitsome, -1,
       (fint *n, fint *reqs, fint *done, fint *indices, fint *statuses, fint *ierr),
       (n, reqs, done, indices, statuses, ierr), 0)
F_WRAP(mpi_test_, FN_MPI_Test, -1, (fint *req, fint *flag, fint *status, fint *ierr), (req, flag, status, ierr), 0)
F_WRAP(mpi_testall_, FN_MPI_Testall, -1, (fint *n, fint *reqs, fint *flag, fint *statuses, fint *ierr),
       (n, reqs, flag, statuses, ierr), 0)
F_WRAP(mpi_testany_, FN_MPI_Testany, -1,
       (fint *n, fint *reqs, fint *index, fint *flag, fint *status, fint *ierr),
       (n, reqs, index, flag, status, ierr), 0)
F_WRAP(mpi_testsome_, FN_MPI_Testsome, -1,
       (fint *n, fint *reqs, fint *done, fint *indices, fint *statuses, fint *ierr),
       (n, reqs, done, indices, statuses, ierr), 0)
F_WRAP(mpi_iprobe_, FN_MPI_Iprobe, -1, (fint *src, fint *tag, fint *comm, fint *flag, fint *status, fint *ierr),
       (src, tag, comm, flag, status, ierr), 0)

/* ---- collectives: the bytes as mpi_coll.c counts them ------------------------------------ */

F_WRAP(mpi_barrier_, FN_MPI_Barrier, MH_COLL, (fint *comm, fint *ierr), (comm, ierr), 0)
F_WRAP(mpi_bcast_, FN_MPI_Bcast, MH_COLL, (void *buf, fint *count, fint *type, fint *root, fint *comm, fint *ierr),
       (buf, count, type, root, comm, ierr), BYTES(count, type))
F_WRAP(mpi_reduce_, FN_MPI_Reduce, MH_COLL,
       (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *root, fint *comm, fint *ierr),
       (sbuf, rbuf, count, type, op, root, comm, ierr), BYTES(count, type))
F_WRAP(mpi_allreduce_, FN_MPI_Allreduce, MH_COLL,
       (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *comm, fint *ierr),
       (sbuf, rbuf, count, type, op, comm, ierr), BYTES(count, type))

/* Gather, Allgather, Alltoall: one block, the one sent (received with MPI_IN_PLACE). */
#define F_BLOCK_SENT (mpi_fortran_in_place(sbuf) ? BYTES(rcount, rtype) : BYTES(scount, stype))
F_WRAP(mpi_gather_, FN_MPI_Gather, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root, fint *comm,
        fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr), F_BLOCK_SENT)
F_WRAP(mpi_scatter_, FN_MPI_Scatter, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root, fint *comm,
        fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr),
       mpi_fortran_in_place(rbuf) ? BYTES(scount, stype) : BYTES(rcount, rtype))
F_WRAP(mpi_allgather_, FN_MPI_Allgather, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm, fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr), F_BLOCK_SENT)
F_WRAP(mpi_alltoall_, FN_MPI_Alltoall, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm, fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr), F_BLOCK_SENT)
