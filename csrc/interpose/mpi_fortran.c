/* mpi_fortran.c - the MPI module's Fortran bindings (mpi.c has the module
 * and its record; mpi.h why one build serves every MPI).
 *
 * A Fortran program calls mpi_send_ (the `use mpi` module and mpif.h, as
 * gfortran, ifort, ifx, flang and nvfortran name it: lower case, one
 * trailing underscore) or, with the mpi_f08 module, Open MPI's
 * mpi_send_f08_. Open MPI's Fortran library goes from either straight to
 * PMPI_Send (the f08 one through its mpif.h code, not through mpi_send_):
 * the C wrappers never see the call. So the calls below are wrapped under
 * both Fortran names, passed on to the real Fortran function (RTLD_NEXT,
 * else the caller's object) and counted under the C name (a Fortran
 * MPI_Send is fn=MPI_Send in the record), with the same bytes, histograms
 * and peers as the C wrappers. Where a library's Fortran function calls the
 * C one (MPICH's, its mpi_f08 module's too), the C wrapper passes it
 * through: the depth is raised (interpose.h, nesting).
 *
 * Fortran passes every argument by reference; handles are INTEGERs (in
 * mpi_f08 a TYPE holding one INTEGER, the same in memory), made C handles
 * with PMPI_Comm_f2c and PMPI_Type_f2c for the sizes and peers; a receive's
 * bytes come from its status (PMPI_Status_f2c; mpi_f08's TYPE(MPI_Status)
 * has the INTEGER array's layout), 0 with MPI_STATUS_IGNORE
 * (MPI_F_STATUS_IGNORE tells it). MPI_IN_PLACE is known by Open MPI's and
 * MPICH's sentinels; elsewhere a Gather or Allgather in place counts its
 * send arguments. mpi_f08's ierror is OPTIONAL (a null pointer when the
 * program leaves it out): its wrapper passes one of its own to the real
 * function, reads it, and copies it back when the program gave one.
 *
 * Wrapped: MPI_Init, MPI_Init_thread, MPI_Finalize; the blocking sends,
 * MPI_Recv, MPI_Probe, MPI_Sendrecv, MPI_Sendrecv_replace; MPI_Isend and its
 * forms, MPI_Irecv; the waits and tests, MPI_Iprobe; MPI_Barrier,
 * MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Gather(v), MPI_Scatter(v),
 * MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter(_block), MPI_Scan,
 * MPI_Exscan, MPI_Alltoallw; MPI_Ibarrier, MPI_Ibcast, MPI_Ireduce,
 * MPI_Iallreduce, MPI_Iallgather, MPI_Ialltoall; the neighbourhood
 * collectives, blocking and non-blocking (MPI_Neighbor_allgather(v),
 * MPI_Neighbor_alltoall(v,w), MPI_Ineighbor_...); persistent requests:
 * MPI_Send_init and its forms, MPI_Recv_init, MPI_Start, MPI_Startall,
 * MPI_Request_free (the table of mpi_p2p.c, keyed by the C handle:
 * PMPI_Request_f2c), and the persistent collectives of mpi_coll.c and
 * mpi_neighbor.c (MPI 4: none in Open MPI 4.1);
 * one-sided communication: MPI_Put, MPI_Get, MPI_Rput, MPI_Rget, the
 * accumulates, MPI_Fetch_and_op, MPI_Compare_and_swap and the
 * synchronisation calls of mpi_rma.c; MPI-IO: MPI_File_open (the file's
 * record by its Fortran name: blank-padded, its length a hidden argument
 * after the others), close, set_view, set_size, seek, sync, and the reads
 * and writes (blocking, _all, _at, _at_all, and the non-blocking ones),
 * with the bytes and per-file counts mpi_io.c gives the C calls. Not
 * wrapped in Fortran (counted only where the library goes through the C
 * name, as MPICH's does): MPI 4 partitioned communication (MPI_Psend_init,
 * MPI_Precv_init, MPI_Pready..., MPI_Parrived); the matched probes and
 * receives (MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv). Passed on
 * uncounted, with an ierror of ours: MPI_F_sync_reg (MPICH 4.0's writes one).
 *
 * Longer than 500 lines: the Fortran twin of about 145 wrapped calls, one
 * macro line to a few each, beside the handle conversions and the ierror
 * and wrapper macros they all use; split by API, those macros would move to
 * a header shared by the pieces and each piece would still read as a list.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include "files.h"
#include "mpi_fortran.h"

/* ---- handles and statuses from Fortran (mpi.h) ------------------------------------------ */

typedef mpi_h (*f2c_fn)(int);
typedef int (*status_f2c_fn)(const int *, void *);
static f2c_fn f2c[MPI_F2C_KINDS];      /* by kind: PMPI_Comm_f2c, _Type_, _File_, _Request_ */
static status_f2c_fn status_f2c;
/* MPI_F_STATUS_IGNORE is a variable MPICH sets only when its Fortran layer
 * starts: its address is kept and read at each use; Open MPI's sentinel too. */
static void *const *f_status_ignore_var;
static const void *f_status_ignore_sym, *f_in_place;

void mpi_fortran_started(const void *caller)
{
    f2c[MPI_F2C_COMM] = (f2c_fn)ceil_ip_lookup("PMPI_Comm_f2c", caller);
    f2c[MPI_F2C_TYPE] = (f2c_fn)ceil_ip_lookup("PMPI_Type_f2c", caller);
    f2c[MPI_F2C_FILE] = (f2c_fn)ceil_ip_lookup("PMPI_File_f2c", caller);
    f2c[MPI_F2C_REQUEST] = (f2c_fn)ceil_ip_lookup("PMPI_Request_f2c", caller);
    status_f2c = (status_f2c_fn)ceil_ip_lookup("PMPI_Status_f2c", caller);
    void **ignore = (void **)dlsym(RTLD_DEFAULT, "MPI_F_STATUS_IGNORE");
    f_status_ignore_var = ignore ? ignore : (void **)ceil_ip_lookup("MPI_F_STATUS_IGNORE", caller);
    f_status_ignore_sym = dlsym(RTLD_DEFAULT, "mpi_fortran_status_ignore_");
    void **mpich_in_place = (void **)dlsym(RTLD_DEFAULT, "MPIR_F_MPI_IN_PLACE");
    f_in_place = mpich_in_place ? *mpich_in_place : dlsym(RTLD_DEFAULT, "mpi_fortran_in_place_");
}

mpi_h mpi_f2c(int kind, int handle)
{
    const f2c_fn f = kind >= 0 && kind < MPI_F2C_KINDS ? f2c[kind] : NULL;
    const int mpich = strcmp(mpi_family(), "mpich") == 0;
    if (!f)
        return mpich ? (mpi_h)(uint32_t)handle : 0;   /* MPICH's f2c is a cast (its mpi.h macro) */
    const mpi_h h = f(handle);
    /* an int handle (MPICH's ABI) comes back in the low half of the register */
    return mpich ? (mpi_h)(uint32_t)h : h;
}

uint64_t mpi_fortran_status_bytes(const int *fstatus, mpi_h type)
{
    _Alignas(16) char st[MPI_STATUS_BYTES];
    const void *ignore = f_status_ignore_var ? *f_status_ignore_var : NULL;
    if (!fstatus || !status_f2c || (const void *)fstatus == ignore || (const void *)fstatus == f_status_ignore_sym ||
        status_f2c(fstatus, st) != 0)
        return 0;
    return mpi_status_bytes(st, type);
}

int mpi_fortran_in_place(const void *buf) { return f_in_place != NULL && buf == f_in_place; }

#define TYPE(f) mpi_f2c(MPI_F2C_TYPE, *(f))
#define BYTES(count, type) mpi_bytes(*(count), TYPE(type))

/* One wrapper: fn with parameters `named`, the real fn called with `args`,
 * then `after` (statements that may use c, ticks and *ierr) counts it;
 * `pass` runs after the real fn when nothing is counted. */
#define F_ONE(fn, IN, OUT, named, args, after, pass)                                               \
    F_DECL(fn, named);                                                                             \
    CEIL_IP_EXPORT void fn named                                                                   \
    {                                                                                              \
        IN mpi_counters *c = mpi_enter();                                                          \
        if (!c) {                                                                                  \
            F_REAL(fn) args;                                                                       \
            pass OUT return;                                                                       \
        }                                                                                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        F_REAL(fn) args;                                                                           \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        (void)ticks;                                                                               \
        after OUT                                                                                  \
    }

/* Both Fortran names of the call `stem` (mpi_send: mpi_send_ and mpi_send_f08_). */
#define F_BOTH_PASS(stem, named, args, after, pass)                                                \
    F_ONE(stem##_, F77_IN, F77_OUT, named, args, after, pass)                                      \
    F_ONE(stem##_f08_, F08_IN, F08_OUT, named, args, after, pass)
#define F_BOTH(stem, named, args, after) F_BOTH_PASS(stem, named, args, after, )

/* A call counted like MPI_WRAP's: FN (the C name's index), hist, bytes after the call. */
#define F_WRAP(stem, FN, hist, named, args, bytes)                                                 \
    F_BOTH(stem, named, args, mpi_done(c, FN, ticks, *ierr == 0 ? (bytes) : 0, (hist));)

/* ---- start and end ----------------------------------------------------------- */

F_BOTH_PASS(mpi_init, (fint *ierr), (ierr),
            mpi_started(__builtin_return_address(0), *ierr == 0, -1);
            mpi_init_done(c, FN_MPI_Init, ticks, __builtin_return_address(0));, mpi_abort_if_asked(__builtin_return_address(0));)
F_BOTH_PASS(mpi_init_thread, (fint *required, fint *provided, fint *ierr), (required, provided, ierr),
            mpi_started(__builtin_return_address(0), *ierr == 0, *provided);
            mpi_init_done(c, FN_MPI_Init_thread, ticks, __builtin_return_address(0));, mpi_abort_if_asked(__builtin_return_address(0));)

/* MPI_Finalize: the record's checkpoint (and gather) before the real call, not in its time. */
#define F_FINALIZE(fn, IN, OUT)                                                                    \
    F_DECL(fn, (fint *));                                                                          \
    CEIL_IP_EXPORT void fn(fint *ierr)                                                             \
    {                                                                                              \
        IN mpi_counters *c = mpi_enter();                                                          \
        if (!c) {                                                                                  \
            F_REAL(fn)(ierr);                                                                      \
            OUT return;                                                                            \
        }                                                                                          \
        mpi_finalize_begin(c, __builtin_return_address(0));                                        \
        const uint64_t t0 = ceil_ip_ticks();    /* the MPI library's time alone (mpi.c) */         \
        F_REAL(fn)(ierr);                                                                          \
        mpi_finalize_end(c, t0);                                                                   \
        OUT                                                                                        \
    }
F_FINALIZE(mpi_finalize_, F77_IN, F77_OUT)
F_FINALIZE(mpi_finalize_f08_, F08_IN, F08_OUT)

/* ---- point-to-point ------------------------------------------------------------- */

/* A send counted: its peer and its bytes (none when it failed). */
static inline void f_sent(mpi_counters *c, enum mpi_fn fn, int hist, int ok, const fint *comm, const fint *dest,
                          const fint *count, const fint *type, uint64_t ticks)
{
    const uint64_t n = ok ? BYTES(count, type) : 0;
    mpi_peer_send(c, COMM(comm), *dest, n, ticks);
    mpi_done(c, fn, ticks, n, hist);
}

/* The sends: (buf, count, type, dest, tag, comm[, request], ierr); the posted
 * ones (with a request) go into the posting histogram. */
#define F_SEND(stem, FN)                                                                           \
    F_BOTH(stem, (void *buf, fint *count, fint *type, fint *dest, fint *tag, fint *comm, fint *ierr), \
           (buf, count, type, dest, tag, comm, ierr),                                              \
           f_sent(c, FN, MH_P2P, *ierr == 0, comm, dest, count, type, ticks);)
#define F_ISEND(stem, FN)                                                                          \
    F_BOTH(stem,                                                                                   \
           (void *buf, fint *count, fint *type, fint *dest, fint *tag, fint *comm, fint *req, fint *ierr), \
           (buf, count, type, dest, tag, comm, req, ierr),                                         \
           f_sent(c, FN, MH_POST, *ierr == 0, comm, dest, count, type, ticks);)
F_SEND(mpi_send, FN_MPI_Send)
F_SEND(mpi_ssend, FN_MPI_Ssend)
F_SEND(mpi_bsend, FN_MPI_Bsend)
F_SEND(mpi_rsend, FN_MPI_Rsend)
F_ISEND(mpi_isend, FN_MPI_Isend)
F_ISEND(mpi_issend, FN_MPI_Issend)
F_ISEND(mpi_ibsend, FN_MPI_Ibsend)
F_ISEND(mpi_irsend, FN_MPI_Irsend)

F_WRAP(mpi_irecv, FN_MPI_Irecv, MH_POST,
       (void *buf, fint *count, fint *type, fint *src, fint *tag, fint *comm, fint *req, fint *ierr),
       (buf, count, type, src, tag, comm, req, ierr), BYTES(count, type))

/* MPI_Recv: the bytes that arrived, from the status. */
F_WRAP(mpi_recv, FN_MPI_Recv, MH_P2P,
       (void *buf, fint *count, fint *type, fint *src, fint *tag, fint *comm, fint *status, fint *ierr),
       (buf, count, type, src, tag, comm, status, ierr), mpi_fortran_status_bytes(status, TYPE(type)))
F_WRAP(mpi_probe, FN_MPI_Probe, -1, (fint *src, fint *tag, fint *comm, fint *status, fint *ierr),
       (src, tag, comm, status, ierr), 0)

/* A sendrecv counted: the send to dest, the bytes the status says arrived. */
static inline void f_sendrecv(mpi_counters *c, enum mpi_fn fn, int ok, const fint *comm, const fint *dest,
                              const fint *scount, const fint *stype, const fint *status, const fint *rtype,
                              uint64_t ticks)
{
    mpi_sendrecv_done(c, fn, COMM(comm), *dest, ticks, ok ? BYTES(scount, stype) : 0,
                      ok ? mpi_fortran_status_bytes(status, TYPE(rtype)) : 0);
}

F_BOTH(mpi_sendrecv,
       (void *sbuf, fint *scount, fint *stype, fint *dest, fint *stag, void *rbuf, fint *rcount, fint *rtype,
        fint *src, fint *rtag, fint *comm, fint *status, fint *ierr),
       (sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, comm, status, ierr),
       f_sendrecv(c, FN_MPI_Sendrecv, *ierr == 0, comm, dest, scount, stype, status, rtype, ticks);)
F_BOTH(mpi_sendrecv_replace,
       (void *buf, fint *count, fint *type, fint *dest, fint *stag, fint *src, fint *rtag, fint *comm,
        fint *status, fint *ierr),
       (buf, count, type, dest, stag, src, rtag, comm, status, ierr),
       f_sendrecv(c, FN_MPI_Sendrecv_replace, *ierr == 0, comm, dest, count, type, status, type, ticks);)

/* ---- completion: time only ----------------------------------------------------------- */

F_WRAP(mpi_wait, FN_MPI_Wait, -1, (fint *req, fint *status, fint *ierr), (req, status, ierr), 0)
F_WRAP(mpi_waitall, FN_MPI_Waitall, -1, (fint *n, fint *reqs, fint *statuses, fint *ierr),
       (n, reqs, statuses, ierr), 0)
F_WRAP(mpi_waitany, FN_MPI_Waitany, -1, (fint *n, fint *reqs, fint *index, fint *status, fint *ierr),
       (n, reqs, index, status, ierr), 0)
F_WRAP(mpi_waitsome, FN_MPI_Waitsome, -1,
       (fint *n, fint *reqs, fint *done, fint *indices, fint *statuses, fint *ierr),
       (n, reqs, done, indices, statuses, ierr), 0)
F_WRAP(mpi_test, FN_MPI_Test, -1, (fint *req, fint *flag, fint *status, fint *ierr), (req, flag, status, ierr), 0)
F_WRAP(mpi_testall, FN_MPI_Testall, -1, (fint *n, fint *reqs, fint *flag, fint *statuses, fint *ierr),
       (n, reqs, flag, statuses, ierr), 0)
F_WRAP(mpi_testany, FN_MPI_Testany, -1,
       (fint *n, fint *reqs, fint *index, fint *flag, fint *status, fint *ierr),
       (n, reqs, index, flag, status, ierr), 0)
F_WRAP(mpi_testsome, FN_MPI_Testsome, -1,
       (fint *n, fint *reqs, fint *done, fint *indices, fint *statuses, fint *ierr),
       (n, reqs, done, indices, statuses, ierr), 0)
F_WRAP(mpi_iprobe, FN_MPI_Iprobe, -1, (fint *src, fint *tag, fint *comm, fint *flag, fint *status, fint *ierr),
       (src, tag, comm, flag, status, ierr), 0)

/* ---- persistent requests: mpi_p2p.c's table, by the C handle ------------------------------ */

#define REQ(f) mpi_f2c(MPI_F2C_REQUEST, *(f))

/* An init returned: not counted (it moves nothing), what its request will move
 * noted (mpi.h: mpi_persistent_note; bytes: 0 when it failed). Lowers the depth. */
static inline void f_noted(int ok, const fint *req, uint64_t bytes, mpi_h comm, int dest, int coll)
{
    if (ok)
        mpi_persistent_note(REQ(req), bytes, comm, dest, coll);
    ceil_ip_leave();
}

/* Send_init and its forms, Recv_init: (buf, count, type, peer, tag, comm, request, ierr). */
#define F_PINIT(stem, dest_of)                                                                     \
    F_BOTH(stem, (void *buf, fint *count, fint *type, fint *peer, fint *tag, fint *comm, fint *req, fint *ierr), \
           (buf, count, type, peer, tag, comm, req, ierr),                                         \
           f_noted(*ierr == 0, req, *ierr == 0 ? BYTES(count, type) : 0, COMM(comm), (dest_of), -1);)
F_PINIT(mpi_send_init, *peer)
F_PINIT(mpi_ssend_init, *peer)
F_PINIT(mpi_bsend_init, *peer)
F_PINIT(mpi_rsend_init, *peer)
F_PINIT(mpi_recv_init, -1)

/* The i-th of an array of Fortran requests, as its C handle. */
static uintptr_t f_key_at(const void *reqs, int i) { return mpi_f2c(MPI_F2C_REQUEST, ((const fint *)reqs)[i]); }

F_BOTH(mpi_start, (fint *req, fint *ierr), (req, ierr),
       mpi_start_done(c, FN_MPI_Start, ticks, *ierr == 0, 1, req, f_key_at);)
F_BOTH(mpi_startall, (fint *n, fint *reqs, fint *ierr), (n, reqs, ierr),
       mpi_start_done(c, FN_MPI_Startall, ticks, *ierr == 0, *n, reqs, f_key_at);)

/* MPI_Request_free sets the Fortran handle to MPI_REQUEST_NULL: the C handle
 * is taken first, and forgotten whatever the runtime's state, as in C. */
#define F_REQUEST_FREE(fn, IN, OUT)                                                                \
    F_DECL(fn, (fint *, fint *));                                                                  \
    CEIL_IP_EXPORT void fn(fint *req, fint *ierr)                                                  \
    {                                                                                              \
        IN mpi_persistent_forget(REQ(req));                                                        \
        F_REAL(fn)(req, ierr);                                                                     \
        OUT                                                                                        \
    }
F_REQUEST_FREE(mpi_request_free_, F77_IN, F77_OUT)
F_REQUEST_FREE(mpi_request_free_f08_, F08_IN, F08_OUT)

/* ---- collectives: the bytes as mpi_coll.c counts them ------------------------------------ */

F_WRAP(mpi_barrier, FN_MPI_Barrier, MH_COLL, (fint *comm, fint *ierr), (comm, ierr), 0)
F_WRAP(mpi_bcast, FN_MPI_Bcast, MH_COLL, (void *buf, fint *count, fint *type, fint *root, fint *comm, fint *ierr),
       (buf, count, type, root, comm, ierr), BYTES(count, type))
F_WRAP(mpi_reduce, FN_MPI_Reduce, MH_COLL,
       (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *root, fint *comm, fint *ierr),
       (sbuf, rbuf, count, type, op, root, comm, ierr), BYTES(count, type))

/* Allreduce, Scan, Exscan, Reduce_scatter_block: (sbuf, rbuf, count, type, op, comm). */
#define F_ALLREDUCE(stem, FN)                                                                      \
    F_WRAP(stem, FN, MH_COLL, (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *comm, fint *ierr), \
           (sbuf, rbuf, count, type, op, comm, ierr), BYTES(count, type))
F_ALLREDUCE(mpi_allreduce, FN_MPI_Allreduce)
F_ALLREDUCE(mpi_scan, FN_MPI_Scan)
F_ALLREDUCE(mpi_exscan, FN_MPI_Exscan)
F_ALLREDUCE(mpi_reduce_scatter_block, FN_MPI_Reduce_scatter_block)
F_WRAP(mpi_reduce_scatter, FN_MPI_Reduce_scatter, MH_COLL,
       (void *sbuf, void *rbuf, fint *counts, fint *type, fint *op, fint *comm, fint *ierr),
       (sbuf, rbuf, counts, type, op, comm, ierr), mpi_own_block(counts, TYPE(type), COMM(comm)))

/* Gather, Allgather, Alltoall: one block, the one sent (received with MPI_IN_PLACE). */
#define F_BLOCK_SENT (mpi_fortran_in_place(sbuf) ? BYTES(rcount, rtype) : BYTES(scount, stype))
F_WRAP(mpi_gather, FN_MPI_Gather, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root, fint *comm,
        fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr), F_BLOCK_SENT)
F_WRAP(mpi_scatter, FN_MPI_Scatter, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root, fint *comm,
        fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, ierr),
       mpi_fortran_in_place(rbuf) ? BYTES(scount, stype) : BYTES(rcount, rtype))
F_WRAP(mpi_allgather, FN_MPI_Allgather, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm, fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr), F_BLOCK_SENT)
F_WRAP(mpi_alltoall, FN_MPI_Alltoall, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm, fint *ierr),
       (sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr), F_BLOCK_SENT)

/* The v-collectives: Gatherv, Allgatherv the block sent (this rank's receive
 * count in place); Scatterv the block received (this rank's send count in
 * place at the root); Alltoallv the mean block. */
#define F_OWN(counts, type, comm) mpi_own_block(counts, TYPE(type), COMM(comm))
#define F_MEAN(counts, type, comm) mpi_mean_block(counts, TYPE(type), COMM(comm))
F_WRAP(mpi_gatherv, FN_MPI_Gatherv, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs, fint *rtype, fint *root,
        fint *comm, fint *ierr),
       (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, ierr),
       mpi_fortran_in_place(sbuf) ? F_OWN(rcounts, rtype, comm) : BYTES(scount, stype))
F_WRAP(mpi_allgatherv, FN_MPI_Allgatherv, MH_COLL,
       (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs, fint *rtype, fint *comm,
        fint *ierr),
       (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, ierr),
       mpi_fortran_in_place(sbuf) ? F_OWN(rcounts, rtype, comm) : BYTES(scount, stype))
F_WRAP(mpi_scatterv, FN_MPI_Scatterv, MH_COLL,
       (void *sbuf, fint *scounts, fint *displs, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root,
        fint *comm, fint *ierr),
       (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, ierr),
       mpi_fortran_in_place(rbuf) ? F_OWN(scounts, stype, comm) : BYTES(rcount, rtype))
F_WRAP(mpi_alltoallv, FN_MPI_Alltoallv, MH_COLL,
       (void *sbuf, fint *scounts, fint *sdispls, fint *stype, void *rbuf, fint *rcounts, fint *rdispls,
        fint *rtype, fint *comm, fint *ierr),
       (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, ierr),
       mpi_fortran_in_place(sbuf) ? F_MEAN(rcounts, rtype, comm) : F_MEAN(scounts, stype, comm))

/* The non-blocking collectives (class icoll): the bytes at posting, no
 * histogram (their time is in the wait that completes them). */
F_WRAP(mpi_ibarrier, FN_MPI_Ibarrier, -1, (fint *comm, fint *req, fint *ierr), (comm, req, ierr), 0)
F_WRAP(mpi_ibcast, FN_MPI_Ibcast, -1,
       (void *buf, fint *count, fint *type, fint *root, fint *comm, fint *req, fint *ierr),
       (buf, count, type, root, comm, req, ierr), BYTES(count, type))
F_WRAP(mpi_ireduce, FN_MPI_Ireduce, -1,
       (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *root, fint *comm, fint *req, fint *ierr),
       (sbuf, rbuf, count, type, op, root, comm, req, ierr), BYTES(count, type))
F_WRAP(mpi_iallreduce, FN_MPI_Iallreduce, -1,
       (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *comm, fint *req, fint *ierr),
       (sbuf, rbuf, count, type, op, comm, req, ierr), BYTES(count, type))
#define F_IALLGATHER(stem, FN)                                                                     \
    F_WRAP(stem, FN, -1,                                                                           \
           (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm, fint *req, \
            fint *ierr),                                                                           \
           (sbuf, scount, stype, rbuf, rcount, rtype, comm, req, ierr), F_BLOCK_SENT)
F_IALLGATHER(mpi_iallgather, FN_MPI_Iallgather)
F_IALLGATHER(mpi_ialltoall, FN_MPI_Ialltoall)

/* Persistent collectives (MPI 4; Open MPI 5, MPICH 4): the request's bytes as
 * the blocking form's, noted for its starts, which count them as calls of the
 * init's C name (mpi_coll.c). An MPI without them has no Fortran name for a
 * program to call either. Open MPI 4's MPIX_ forms alike (F_PCOLL2, and the
 * mpix_ lines below each shape's). */
#define F_PCOLL(stem, FN, named, args, bytes)                                                      \
    F_BOTH(stem, named, args, f_noted(*ierr == 0, req, *ierr == 0 ? (bytes) : 0, 0, -1, FN);)
/* and Open MPI 4's MPIX_ form (its pcollreq extension), under its own name */
#define F_PCOLL2(stem, FN, xstem, XFN, named, args, bytes)                                         \
    F_PCOLL(stem, FN, named, args, bytes) F_PCOLL(xstem, XFN, named, args, bytes)
F_PCOLL2(mpi_barrier_init, FN_MPI_Barrier_init, mpix_barrier_init, FN_MPIX_Barrier_init,
        (fint *comm, fint *info, fint *req, fint *ierr), (comm, info, req, ierr), 0)
F_PCOLL2(mpi_bcast_init, FN_MPI_Bcast_init, mpix_bcast_init, FN_MPIX_Bcast_init,
        (void *buf, fint *count, fint *type, fint *root, fint *comm, fint *info, fint *req, fint *ierr),
        (buf, count, type, root, comm, info, req, ierr), BYTES(count, type))
F_PCOLL2(mpi_reduce_init, FN_MPI_Reduce_init, mpix_reduce_init, FN_MPIX_Reduce_init,
        (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *root, fint *comm, fint *info, fint *req,
         fint *ierr),
        (sbuf, rbuf, count, type, op, root, comm, info, req, ierr), BYTES(count, type))
#define F_ALLREDUCE_INIT(stem, FN)                                                                 \
    F_PCOLL(stem, FN,                                                                              \
            (void *sbuf, void *rbuf, fint *count, fint *type, fint *op, fint *comm, fint *info, fint *req,   \
             fint *ierr),                                                                          \
            (sbuf, rbuf, count, type, op, comm, info, req, ierr), BYTES(count, type))
F_ALLREDUCE_INIT(mpi_allreduce_init, FN_MPI_Allreduce_init)
F_ALLREDUCE_INIT(mpix_allreduce_init, FN_MPIX_Allreduce_init)
F_ALLREDUCE_INIT(mpi_scan_init, FN_MPI_Scan_init)
F_ALLREDUCE_INIT(mpix_scan_init, FN_MPIX_Scan_init)
F_ALLREDUCE_INIT(mpi_exscan_init, FN_MPI_Exscan_init)
F_ALLREDUCE_INIT(mpix_exscan_init, FN_MPIX_Exscan_init)
F_ALLREDUCE_INIT(mpi_reduce_scatter_block_init, FN_MPI_Reduce_scatter_block_init)
F_ALLREDUCE_INIT(mpix_reduce_scatter_block_init, FN_MPIX_Reduce_scatter_block_init)
F_PCOLL2(mpi_reduce_scatter_init, FN_MPI_Reduce_scatter_init, mpix_reduce_scatter_init, FN_MPIX_Reduce_scatter_init,
        (void *sbuf, void *rbuf, fint *counts, fint *type, fint *op, fint *comm, fint *info, fint *req, fint *ierr),
        (sbuf, rbuf, counts, type, op, comm, info, req, ierr), F_OWN(counts, type, comm))
#define F_ROOTED_INIT(stem, FN, bytes)                                                             \
    F_PCOLL(stem, FN,                                                                              \
            (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root, fint *comm, \
             fint *info, fint *req, fint *ierr),                                                   \
            (sbuf, scount, stype, rbuf, rcount, rtype, root, comm, info, req, ierr), bytes)
F_ROOTED_INIT(mpi_gather_init, FN_MPI_Gather_init, F_BLOCK_SENT)
F_ROOTED_INIT(mpix_gather_init, FN_MPIX_Gather_init, F_BLOCK_SENT)
F_ROOTED_INIT(mpi_scatter_init, FN_MPI_Scatter_init,
              mpi_fortran_in_place(rbuf) ? BYTES(scount, stype) : BYTES(rcount, rtype))
F_ROOTED_INIT(mpix_scatter_init, FN_MPIX_Scatter_init,
              mpi_fortran_in_place(rbuf) ? BYTES(scount, stype) : BYTES(rcount, rtype))
#define F_ALLGATHER_INIT(stem, FN)                                                                 \
    F_PCOLL(stem, FN,                                                                              \
            (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm, fint *info, \
             fint *req, fint *ierr),                                                               \
            (sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req, ierr), F_BLOCK_SENT)
F_ALLGATHER_INIT(mpi_allgather_init, FN_MPI_Allgather_init)
F_ALLGATHER_INIT(mpix_allgather_init, FN_MPIX_Allgather_init)
F_ALLGATHER_INIT(mpi_alltoall_init, FN_MPI_Alltoall_init)
F_ALLGATHER_INIT(mpix_alltoall_init, FN_MPIX_Alltoall_init)
F_PCOLL2(mpi_gatherv_init, FN_MPI_Gatherv_init, mpix_gatherv_init, FN_MPIX_Gatherv_init,
        (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs, fint *rtype, fint *root,
         fint *comm, fint *info, fint *req, fint *ierr),
        (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, info, req, ierr),
        mpi_fortran_in_place(sbuf) ? F_OWN(rcounts, rtype, comm) : BYTES(scount, stype))
F_PCOLL2(mpi_allgatherv_init, FN_MPI_Allgatherv_init, mpix_allgatherv_init, FN_MPIX_Allgatherv_init,
        (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs, fint *rtype, fint *comm,
         fint *info, fint *req, fint *ierr),
        (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, req, ierr),
        mpi_fortran_in_place(sbuf) ? F_OWN(rcounts, rtype, comm) : BYTES(scount, stype))
F_PCOLL2(mpi_scatterv_init, FN_MPI_Scatterv_init, mpix_scatterv_init, FN_MPIX_Scatterv_init,
        (void *sbuf, fint *scounts, fint *displs, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *root,
         fint *comm, fint *info, fint *req, fint *ierr),
        (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, info, req, ierr),
        mpi_fortran_in_place(rbuf) ? F_OWN(scounts, stype, comm) : BYTES(rcount, rtype))
F_PCOLL2(mpi_alltoallv_init, FN_MPI_Alltoallv_init, mpix_alltoallv_init, FN_MPIX_Alltoallv_init,
        (void *sbuf, fint *scounts, fint *sdispls, fint *stype, void *rbuf, fint *rcounts, fint *rdispls,
         fint *rtype, fint *comm, fint *info, fint *req, fint *ierr),
        (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, info, req, ierr),
        mpi_fortran_in_place(sbuf) ? F_MEAN(rcounts, rtype, comm) : F_MEAN(scounts, stype, comm))

/* ---- neighbourhood collectives and Alltoallw: the bytes of mpi_neighbor.c and mpi_coll.c ---- */

/* Parameters and arguments by shape, with what follows comm before ierror
 * (nothing; the request; info and the request) as the variadic part:
 * Allgather's and Alltoall's one count and type a side (F_NB), Allgatherv's
 * counts received (F_NBV), Alltoallv's and Alltoallw's counts both sides
 * (F_W; Alltoallw's types are arrays and, in the neighbourhood form, its
 * displacements INTEGER(KIND=MPI_ADDRESS_KIND): passed through unread). */
#define F_NB_P(...)                                                                                \
    (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcount, fint *rtype, fint *comm __VA_ARGS__, fint *ierr)
#define F_NB_A(...) (sbuf, scount, stype, rbuf, rcount, rtype, comm __VA_ARGS__, ierr)
#define F_NBV_P(...)                                                                               \
    (void *sbuf, fint *scount, fint *stype, void *rbuf, fint *rcounts, fint *displs, fint *rtype,  \
     fint *comm __VA_ARGS__, fint *ierr)
#define F_NBV_A(...) (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm __VA_ARGS__, ierr)
#define F_W_P(...)                                                                                 \
    (void *sbuf, fint *scounts, void *sdispls, fint *stype, void *rbuf, fint *rcounts, void *rdispls, \
     fint *rtype, fint *comm __VA_ARGS__, fint *ierr)
#define F_W_A(...) (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm __VA_ARGS__, ierr)
#define F_REQ , fint *req
#define F_INFO_REQ , fint *info, fint *req

/* Alltoallw's mean block: counts[i] of the i-th Fortran datatype summed
 * over n (comm's size; a neighbourhood's out-degree), over n. */
static uint64_t f_mean_w(const fint *counts, const fint *types, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += mpi_bytes(counts[i], mpi_f2c(MPI_F2C_TYPE, types[i]));
    return n > 0 ? sum / (uint64_t)n : 0;
}

/* Neighbourhood, blocking (coll), non-blocking (icoll) and persistent:
 * Allgather, Alltoall and Allgatherv the block sent; Alltoallv and
 * Alltoallw the mean block sent over the out-degree (mpi_neighbor.c). */
#define F_SENT BYTES(scount, stype)
#define F_NB_MEAN mpi_mean_of_i(scounts, TYPE(stype), mpi_out_degree(COMM(comm)))
#define F_NB_MEAN_W f_mean_w(scounts, stype, mpi_out_degree(COMM(comm)))
F_WRAP(mpi_neighbor_allgather, FN_MPI_Neighbor_allgather, MH_COLL, F_NB_P(), F_NB_A(), F_SENT)
F_WRAP(mpi_neighbor_alltoall, FN_MPI_Neighbor_alltoall, MH_COLL, F_NB_P(), F_NB_A(), F_SENT)
F_WRAP(mpi_neighbor_allgatherv, FN_MPI_Neighbor_allgatherv, MH_COLL, F_NBV_P(), F_NBV_A(), F_SENT)
F_WRAP(mpi_neighbor_alltoallv, FN_MPI_Neighbor_alltoallv, MH_COLL, F_W_P(), F_W_A(), F_NB_MEAN)
F_WRAP(mpi_neighbor_alltoallw, FN_MPI_Neighbor_alltoallw, MH_COLL, F_W_P(), F_W_A(), F_NB_MEAN_W)
F_WRAP(mpi_ineighbor_allgather, FN_MPI_Ineighbor_allgather, -1, F_NB_P(F_REQ), F_NB_A(, req), F_SENT)
F_WRAP(mpi_ineighbor_alltoall, FN_MPI_Ineighbor_alltoall, -1, F_NB_P(F_REQ), F_NB_A(, req), F_SENT)
F_WRAP(mpi_ineighbor_allgatherv, FN_MPI_Ineighbor_allgatherv, -1, F_NBV_P(F_REQ), F_NBV_A(, req), F_SENT)
F_WRAP(mpi_ineighbor_alltoallv, FN_MPI_Ineighbor_alltoallv, -1, F_W_P(F_REQ), F_W_A(, req), F_NB_MEAN)
F_WRAP(mpi_ineighbor_alltoallw, FN_MPI_Ineighbor_alltoallw, -1, F_W_P(F_REQ), F_W_A(, req), F_NB_MEAN_W)
F_PCOLL2(mpi_neighbor_allgather_init, FN_MPI_Neighbor_allgather_init,
         mpix_neighbor_allgather_init, FN_MPIX_Neighbor_allgather_init,
         F_NB_P(F_INFO_REQ), F_NB_A(, info, req), F_SENT)
F_PCOLL2(mpi_neighbor_alltoall_init, FN_MPI_Neighbor_alltoall_init,
         mpix_neighbor_alltoall_init, FN_MPIX_Neighbor_alltoall_init,
         F_NB_P(F_INFO_REQ), F_NB_A(, info, req), F_SENT)
F_PCOLL2(mpi_neighbor_allgatherv_init, FN_MPI_Neighbor_allgatherv_init,
         mpix_neighbor_allgatherv_init, FN_MPIX_Neighbor_allgatherv_init,
         F_NBV_P(F_INFO_REQ), F_NBV_A(, info, req), F_SENT)
F_PCOLL2(mpi_neighbor_alltoallv_init, FN_MPI_Neighbor_alltoallv_init,
         mpix_neighbor_alltoallv_init, FN_MPIX_Neighbor_alltoallv_init,
         F_W_P(F_INFO_REQ), F_W_A(, info, req), F_NB_MEAN)
F_PCOLL2(mpi_neighbor_alltoallw_init, FN_MPI_Neighbor_alltoallw_init,
         mpix_neighbor_alltoallw_init, FN_MPIX_Neighbor_alltoallw_init,
         F_W_P(F_INFO_REQ), F_W_A(, info, req), F_NB_MEAN_W)

#define F_W_BLOCK                                                                                  \
    (mpi_fortran_in_place(sbuf) ? f_mean_w(rcounts, rtype, mpi_comm_size(COMM(comm)))               \
                                : f_mean_w(scounts, stype, mpi_comm_size(COMM(comm))))
F_WRAP(mpi_alltoallw, FN_MPI_Alltoallw, MH_COLL, F_W_P(), F_W_A(), F_W_BLOCK)
F_PCOLL2(mpi_alltoallw_init, FN_MPI_Alltoallw_init, mpix_alltoallw_init, FN_MPIX_Alltoallw_init,
         F_W_P(F_INFO_REQ), F_W_A(, info, req), F_W_BLOCK)

/* ---- one-sided: the bytes and classes of mpi_rma.c --------------------------------------- */

/* Put, Get: (origin, ocount, otype, target, tdisp, tcount, ttype, win[, request], ierr);
 * tdisp is INTEGER(KIND=MPI_ADDRESS_KIND). The origin's bytes, at posting. */
#define F_PUT(stem, FN)                                                                            \
    F_WRAP(stem, FN, MH_POST,                                                                      \
           (void *obuf, fint *ocount, fint *otype, fint *target, int64_t *tdisp, fint *tcount, fint *ttype, \
            fint *win, fint *ierr),                                                                \
           (obuf, ocount, otype, target, tdisp, tcount, ttype, win, ierr), BYTES(ocount, otype))
#define F_RPUT(stem, FN)                                                                           \
    F_WRAP(stem, FN, MH_POST,                                                                      \
           (void *obuf, fint *ocount, fint *otype, fint *target, int64_t *tdisp, fint *tcount, fint *ttype, \
            fint *win, fint *req, fint *ierr),                                                     \
           (obuf, ocount, otype, target, tdisp, tcount, ttype, win, req, ierr), BYTES(ocount, otype))
F_PUT(mpi_put, FN_MPI_Put)
F_PUT(mpi_get, FN_MPI_Get)
F_RPUT(mpi_rput, FN_MPI_Rput)
F_RPUT(mpi_rget, FN_MPI_Rget)
F_WRAP(mpi_accumulate, FN_MPI_Accumulate, MH_POST,
       (void *obuf, fint *ocount, fint *otype, fint *target, int64_t *tdisp, fint *tcount, fint *ttype, fint *op,
        fint *win, fint *ierr),
       (obuf, ocount, otype, target, tdisp, tcount, ttype, op, win, ierr), BYTES(ocount, otype))
F_WRAP(mpi_get_accumulate, FN_MPI_Get_accumulate, MH_POST,
       (void *obuf, fint *ocount, fint *otype, void *rbuf, fint *rcount, fint *rtype, fint *target, int64_t *tdisp,
        fint *tcount, fint *ttype, fint *op, fint *win, fint *ierr),
       (obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount, ttype, op, win, ierr),
       BYTES(ocount, otype))
F_WRAP(mpi_fetch_and_op, FN_MPI_Fetch_and_op, MH_POST,
       (void *obuf, void *rbuf, fint *type, fint *target, int64_t *tdisp, fint *op, fint *win, fint *ierr),
       (obuf, rbuf, type, target, tdisp, op, win, ierr), mpi_bytes(1, TYPE(type)))
F_WRAP(mpi_compare_and_swap, FN_MPI_Compare_and_swap, MH_POST,
       (void *obuf, void *cbuf, void *rbuf, fint *type, fint *target, int64_t *tdisp, fint *win, fint *ierr),
       (obuf, cbuf, rbuf, type, target, tdisp, win, ierr), mpi_bytes(1, TYPE(type)))

/* Synchronisation: time only; by their arguments before the window: none
 * (unlock_all, the _all flushes, complete, wait, sync), one (fence's and
 * lock_all's assert, unlock's and the flushes' rank), two (post's and start's
 * group and assert), three (lock's type, rank and assert). */
#define F_SYNC0(stem, FN) F_WRAP(stem, FN, -1, (fint *win, fint *ierr), (win, ierr), 0)
#define F_SYNC1(stem, FN) F_WRAP(stem, FN, -1, (fint *a, fint *win, fint *ierr), (a, win, ierr), 0)
#define F_SYNC2(stem, FN) F_WRAP(stem, FN, -1, (fint *a, fint *b, fint *win, fint *ierr), (a, b, win, ierr), 0)
F_SYNC1(mpi_win_fence, FN_MPI_Win_fence)
F_WRAP(mpi_win_lock, FN_MPI_Win_lock, -1, (fint *type, fint *rank, fint *a, fint *win, fint *ierr),
       (type, rank, a, win, ierr), 0)
F_SYNC1(mpi_win_unlock, FN_MPI_Win_unlock)
F_SYNC1(mpi_win_lock_all, FN_MPI_Win_lock_all)
F_SYNC0(mpi_win_unlock_all, FN_MPI_Win_unlock_all)
F_SYNC1(mpi_win_flush, FN_MPI_Win_flush)
F_SYNC0(mpi_win_flush_all, FN_MPI_Win_flush_all)
F_SYNC1(mpi_win_flush_local, FN_MPI_Win_flush_local)
F_SYNC0(mpi_win_flush_local_all, FN_MPI_Win_flush_local_all)
F_SYNC2(mpi_win_post, FN_MPI_Win_post)
F_SYNC2(mpi_win_start, FN_MPI_Win_start)
F_SYNC0(mpi_win_complete, FN_MPI_Win_complete)
F_SYNC0(mpi_win_wait, FN_MPI_Win_wait)
F_SYNC0(mpi_win_sync, FN_MPI_Win_sync)

/* MPI_F_sync_reg(buf) has no ierror (MPI 3.0 17.1.7): a program passes the buffer alone. MPICH
 * 4.0's mpif.h binding (libmpichfort's mpi_f_sync_reg_, generated like the other calls) still
 * stores MPI_SUCCESS through a second argument, so through whatever the program's previous call
 * left in the second argument register; after one of these wrappers that is the wrapper's
 * leftover, which need not be an address at all (0x8b after the MPI_Win_fence wrapper once the
 * trace's hook was in mpi_done: SIGSEGV in pmpi_f_sync_reg__, trace off). So the call is passed
 * on with an ierror of ours, which a one-parameter binding (Open MPI's, later MPICH's) never
 * reads. Not counted: the call exists to stop the compiler keeping buf in registers. */
F_DECL(mpi_f_sync_reg_, (void *, fint *));
CEIL_IP_EXPORT void mpi_f_sync_reg_(void *buf)
{
    fint ierr_own = 0;
    F_REAL(mpi_f_sync_reg_)(buf, &ierr_own);
}

/* ---- MPI-IO: the bytes and per-file counts of mpi_io.c ----------------------------------- */

#define FILE_H(f) mpi_f2c(MPI_F2C_FILE, *(f))

/* MPI_File_open: the name's length is a hidden argument (size_t in gfortran 8
 * and later, ifx, flang, nvfortran) after ierror, which mpi_f08 passes too. */
F_BOTH(mpi_file_open, (fint *comm, const char *name, fint *amode, fint *info, fint *fh, fint *ierr, size_t len),
       (comm, name, amode, info, fh, ierr, len),
       const uint64_t t1 = mpi_done_later(c, FN_MPI_File_open, ticks, 0, -1);
       mpi_event_ended(FN_MPI_File_open, t1, ticks, 0, *ierr == 0 ? mpi_io_opened(FILE_H(fh), name, len, ticks) : 0,
                       -1);)

/* MPI_File_close sets the Fortran handle to MPI_FILE_NULL: the C handle is taken first. */
#define F_FILE_CLOSE(fn, IN, OUT)                                                                  \
    F_DECL(fn, (fint *, fint *));                                                                  \
    CEIL_IP_EXPORT void fn(fint *fh, fint *ierr)                                                   \
    {                                                                                              \
        IN mpi_counters *c = mpi_enter();                                                          \
        const mpi_h h = c ? FILE_H(fh) : 0;                                                        \
        if (!c) {                                                                                  \
            F_REAL(fn)(fh, ierr);                                                                  \
            OUT return;                                                                            \
        }                                                                                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        F_REAL(fn)(fh, ierr);                                                                      \
        mpi_done(c, FN_MPI_File_close, ceil_ip_ticks() - t0, 0, -1);                               \
        mpi_io_closed(h);                                                                          \
        OUT                                                                                        \
    }
F_FILE_CLOSE(mpi_file_close_, F77_IN, F77_OUT)
F_FILE_CLOSE(mpi_file_close_f08_, F08_IN, F08_OUT)

/* set_view's datarep is a CHARACTER: its hidden length follows. */
F_WRAP(mpi_file_set_view, FN_MPI_File_set_view, -1,
       (fint *fh, int64_t *disp, fint *etype, fint *ftype, const char *rep, fint *info, fint *ierr, size_t len),
       (fh, disp, etype, ftype, rep, info, ierr, len), 0)
F_WRAP(mpi_file_set_size, FN_MPI_File_set_size, -1, (fint *fh, int64_t *size, fint *ierr), (fh, size, ierr), 0)
F_WRAP(mpi_file_seek, FN_MPI_File_seek, -1, (fint *fh, int64_t *off, fint *whence, fint *ierr),
       (fh, off, whence, ierr), 0)

static inline void f_file_sync(mpi_counters *c, const fint *fh, int ok, uint64_t ticks)
{
    mpi_done(c, FN_MPI_File_sync, ticks, 0, -1);
    if (ok)
        ceil_ip_file_sync_id(mpi_io_file(FILE_H(fh)), ticks);
}
F_BOTH(mpi_file_sync, (fint *fh, fint *ierr), (fh, ierr), f_file_sync(c, fh, *ierr == 0, ticks);)

/* A data call counted: in the call's class and, by its handle, in the file's record. */
static inline void f_file_io(mpi_counters *c, enum mpi_fn fn, int hist, const fint *fh, int write, uint64_t bytes,
                             uint64_t ticks)
{
    mpi_done(c, fn, ticks, bytes, hist);
    ceil_ip_file_io_id(mpi_io_file(FILE_H(fh)), write, bytes, ticks, CEIL_IP_API_MPIIO);
}

/* Blocking reads: the bytes the status says were read; writes and the
 * non-blocking forms: the bytes asked. */
#define F_READ(stem, FN)                                                                           \
    F_BOTH(stem, (fint *fh, void *buf, fint *count, fint *type, fint *status, fint *ierr),         \
           (fh, buf, count, type, status, ierr),                                                   \
           f_file_io(c, FN, MH_IO, fh, 0, *ierr == 0 ? mpi_fortran_status_bytes(status, TYPE(type)) : 0, ticks);)
#define F_READ_AT(stem, FN)                                                                        \
    F_BOTH(stem, (fint *fh, int64_t *off, void *buf, fint *count, fint *type, fint *status, fint *ierr), \
           (fh, off, buf, count, type, status, ierr),                                              \
           f_file_io(c, FN, MH_IO, fh, 0, *ierr == 0 ? mpi_fortran_status_bytes(status, TYPE(type)) : 0, ticks);)
#define F_ASKED(stem, FN, hist, write)                                                             \
    F_BOTH(stem, (fint *fh, void *buf, fint *count, fint *type, fint *st, fint *ierr),             \
           (fh, buf, count, type, st, ierr),                                                       \
           f_file_io(c, FN, hist, fh, write, *ierr == 0 ? BYTES(count, type) : 0, ticks);)
#define F_ASKED_AT(stem, FN, hist, write)                                                          \
    F_BOTH(stem, (fint *fh, int64_t *off, void *buf, fint *count, fint *type, fint *st, fint *ierr), \
           (fh, off, buf, count, type, st, ierr),                                                  \
           f_file_io(c, FN, hist, fh, write, *ierr == 0 ? BYTES(count, type) : 0, ticks);)
F_READ(mpi_file_read, FN_MPI_File_read)
F_READ(mpi_file_read_all, FN_MPI_File_read_all)
F_READ_AT(mpi_file_read_at, FN_MPI_File_read_at)
F_READ_AT(mpi_file_read_at_all, FN_MPI_File_read_at_all)
F_ASKED(mpi_file_write, FN_MPI_File_write, MH_IO, 1)
F_ASKED(mpi_file_write_all, FN_MPI_File_write_all, MH_IO, 1)
F_ASKED_AT(mpi_file_write_at, FN_MPI_File_write_at, MH_IO, 1)
F_ASKED_AT(mpi_file_write_at_all, FN_MPI_File_write_at_all, MH_IO, 1)
F_ASKED(mpi_file_iread, FN_MPI_File_iread, -1, 0)
F_ASKED_AT(mpi_file_iread_at, FN_MPI_File_iread_at, -1, 0)
F_ASKED(mpi_file_iwrite, FN_MPI_File_iwrite, -1, 1)
F_ASKED_AT(mpi_file_iwrite_at, FN_MPI_File_iwrite_at, -1, 1)
