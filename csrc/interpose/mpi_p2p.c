/* mpi_p2p.c - the MPI module's point-to-point calls and the calls that
 * complete requests (mpi.c has the module and its record lines; mpi.h why
 * one build serves every MPI). Sends name their destination (mpi.c: peer
 * lines); receives count what arrived, from the status; the waits and tests
 * count time only, the bytes having been counted where the request was
 * posted. Each wrapper is written once for int counts and once for the
 * MPI 4 large-count form (_c).
 */
#include "mpi.h"

/* A sendrecv: its send to dest, both sides' bytes, the larger in the histogram (mpi.h). */
void mpi_sendrecv_done(mpi_counters *c, enum mpi_fn fn, mpi_h comm, int dest, uint64_t ticks,
                              uint64_t sent, uint64_t got)
{
    mpi_peer_send(c, comm, dest, sent, ticks);
    ceil_ip_add(&c->fn[fn].bytes, got);
    mpi_done(c, fn, ticks, sent, -1);
    const uint64_t larger = sent > got ? sent : got;
    const unsigned b = ceil_ip_size_bucket(larger);
    ceil_ip_add(&c->hist[MH_P2P][b], 1);
    ceil_ip_add(&c->hist_ticks[MH_P2P][b], ticks);
    ceil_ip_add(&c->hist_bytes[MH_P2P][b], larger);
}

/* ---- point-to-point ------------------------------------------------------------ */

/* Each wrapper body is written once, for the count type cnt: int, or
 * mpi_count in the large-count form (the _c name). */
#define MPI_SEND_FN(fn, cnt)                                                                       \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, int, int, mpi_h));                                    \
    CEIL_IP_EXPORT int fn(const void *buf, cnt count, mpi_h type, int dest, int tag, mpi_h comm)  \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL(fn)(buf, count, type, dest, tag, comm);                               \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL(fn)(buf, count, type, dest, tag, comm);                           \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = mpi_bytes(count, type);                   \
        mpi_peer_send(c, comm, dest, n, ticks);                                                    \
        mpi_done(c, FN_##fn, ticks, n, MH_P2P);                                                    \
        return rc;                                                                                 \
    }
MPI_SEND_FN(MPI_Send, int)
MPI_SEND_FN(MPI_Send_c, mpi_count)
MPI_SEND_FN(MPI_Ssend, int)
MPI_SEND_FN(MPI_Ssend_c, mpi_count)
MPI_SEND_FN(MPI_Bsend, int)
MPI_SEND_FN(MPI_Bsend_c, mpi_count)
MPI_SEND_FN(MPI_Rsend, int)
MPI_SEND_FN(MPI_Rsend_c, mpi_count)

#define MPI_ISEND_FN(fn, cnt)                                                                      \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, int, int, mpi_h, void *));                            \
    CEIL_IP_EXPORT int fn(const void *buf, cnt count, mpi_h type, int dest, int tag, mpi_h comm,  \
                          void *req)                                                               \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL(fn)(buf, count, type, dest, tag, comm, req);                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL(fn)(buf, count, type, dest, tag, comm, req);                      \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = mpi_bytes(count, type);                   \
        mpi_peer_send(c, comm, dest, n, ticks);                                                    \
        mpi_done(c, FN_##fn, ticks, n, MH_POST);                                                   \
        return rc;                                                                                 \
    }
MPI_ISEND_FN(MPI_Isend, int)
MPI_ISEND_FN(MPI_Isend_c, mpi_count)
MPI_ISEND_FN(MPI_Issend, int)
MPI_ISEND_FN(MPI_Issend_c, mpi_count)
MPI_ISEND_FN(MPI_Ibsend, int)
MPI_ISEND_FN(MPI_Ibsend_c, mpi_count)
MPI_ISEND_FN(MPI_Irsend, int)
MPI_ISEND_FN(MPI_Irsend_c, mpi_count)

#define MPI_IRECV_FN(fn, cnt)                                                                      \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, int, mpi_h, void *));                                  \
    MPI_WRAP(fn, MH_POST, (void *buf, cnt count, mpi_h type, int src, int tag, mpi_h comm, void *req), \
             (buf, count, type, src, tag, comm, req), mpi_bytes(count, type))
MPI_IRECV_FN(MPI_Irecv, int)
MPI_IRECV_FN(MPI_Irecv_c, mpi_count)

#define MPI_RECV_FN(fn, cnt)                                                                       \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, int, mpi_h, void *));                                  \
    CEIL_IP_EXPORT int fn(void *buf, cnt count, mpi_h type, int src, int tag, mpi_h comm, void *status) \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL(fn)(buf, count, type, src, tag, comm, status);                        \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL(fn)(buf, count, type, src, tag, comm, st);                        \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        mpi_done(c, FN_##fn, ticks, rc == 0 ? mpi_status_bytes(st, type) : 0, MH_P2P);             \
        return rc;                                                                                 \
    }
MPI_RECV_FN(MPI_Recv, int)
MPI_RECV_FN(MPI_Recv_c, mpi_count)

PMPI_DECL(MPI_Probe, (int, int, mpi_h, void *));
MPI_WRAP(MPI_Probe, -1, (int src, int tag, mpi_h comm, void *status), (src, tag, comm, status), 0)

#define MPI_SENDRECV_FN(fn, cnt)                                                                   \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, int, int, void *, cnt, mpi_h, int, int, mpi_h, void *)); \
    CEIL_IP_EXPORT int fn(const void *sbuf, cnt scount, mpi_h stype, int dest, int stag, void *rbuf,  \
                          cnt rcount, mpi_h rtype, int src, int rtag, mpi_h comm, void *status)    \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL(fn)(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag,  \
                                 comm, status);                                                    \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL(fn)(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src,    \
                                     rtag, comm, st);                                              \
        const uint64_t ticks = ceil_ip_ticks() - t0, sent = mpi_bytes(scount, stype);              \
        mpi_sendrecv_done(c, FN_##fn, comm, dest, ticks, sent, rc == 0 ? mpi_status_bytes(st, rtype) : 0); \
        return rc;                                                                                 \
    }
MPI_SENDRECV_FN(MPI_Sendrecv, int)
MPI_SENDRECV_FN(MPI_Sendrecv_c, mpi_count)

#define MPI_SENDRECV_REPLACE_FN(fn, cnt)                                                           \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, int, int, int, mpi_h, void *));                        \
    CEIL_IP_EXPORT int fn(void *buf, cnt count, mpi_h type, int dest, int stag, int src, int rtag, \
                          mpi_h comm, void *status)                                                \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL(fn)(buf, count, type, dest, stag, src, rtag, comm, status);           \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL(fn)(buf, count, type, dest, stag, src, rtag, comm, st);           \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = mpi_bytes(count, type);                   \
        mpi_sendrecv_done(c, FN_##fn, comm, dest, ticks, n, rc == 0 ? mpi_status_bytes(st, type) : 0); \
        return rc;                                                                                 \
    }
MPI_SENDRECV_REPLACE_FN(MPI_Sendrecv_replace, int)
MPI_SENDRECV_REPLACE_FN(MPI_Sendrecv_replace_c, mpi_count)

/* ---- completion: time only (the bytes were counted where the request was posted) ---- */

PMPI_DECL(MPI_Wait, (void *, void *));
MPI_WRAP(MPI_Wait, -1, (void *req, void *status), (req, status), 0)
PMPI_DECL(MPI_Waitall, (int, void *, void *));
MPI_WRAP(MPI_Waitall, -1, (int n, void *reqs, void *statuses), (n, reqs, statuses), 0)
PMPI_DECL(MPI_Waitany, (int, void *, int *, void *));
MPI_WRAP(MPI_Waitany, -1, (int n, void *reqs, int *index, void *status), (n, reqs, index, status), 0)
PMPI_DECL(MPI_Waitsome, (int, void *, int *, int *, void *));
MPI_WRAP(MPI_Waitsome, -1, (int n, void *reqs, int *done, int *indices, void *statuses),
                  (n, reqs, done, indices, statuses), 0)
PMPI_DECL(MPI_Test, (void *, int *, void *));
MPI_WRAP(MPI_Test, -1, (void *req, int *flag, void *status), (req, flag, status), 0)
PMPI_DECL(MPI_Testall, (int, void *, int *, void *));
MPI_WRAP(MPI_Testall, -1, (int n, void *reqs, int *flag, void *statuses), (n, reqs, flag, statuses), 0)
PMPI_DECL(MPI_Testany, (int, void *, int *, int *, void *));
MPI_WRAP(MPI_Testany, -1, (int n, void *reqs, int *index, int *flag, void *status),
                  (n, reqs, index, flag, status), 0)
PMPI_DECL(MPI_Testsome, (int, void *, int *, int *, void *));
MPI_WRAP(MPI_Testsome, -1, (int n, void *reqs, int *done, int *indices, void *statuses),
                  (n, reqs, done, indices, statuses), 0)
PMPI_DECL(MPI_Iprobe, (int, int, mpi_h, int *, void *));
MPI_WRAP(MPI_Iprobe, -1, (int src, int tag, mpi_h comm, int *flag, void *status),
                  (src, tag, comm, flag, status), 0)

/* Persistent requests: starting them, time only (their bytes were set at
 * MPI_Send_init / MPI_Recv_init, which are not wrapped). */
PMPI_DECL(MPI_Start, (void *));
MPI_WRAP(MPI_Start, -1, (void *req), (req), 0)
PMPI_DECL(MPI_Startall, (int, void *));
MPI_WRAP(MPI_Startall, -1, (int n, void *reqs), (n, reqs), 0)
