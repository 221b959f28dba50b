/* mpi_p2p.c - the MPI module's point-to-point calls, the calls that
 * complete requests, persistent requests (the collective ones' starts
 * included) and MPI 4 partitioned ones (mpi.c has the module and its record
 * lines; mpi.h why one build serves every MPI). Sends name their destination (mpi.c: peer
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
    MPI_EXPORT(fn, (const void *buf, cnt count, mpi_h type, int dest, int tag, mpi_h comm))        \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn)(buf, count, type, dest, tag, comm);                             \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn)(buf, count, type, dest, tag, comm);                         \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = mpi_bytes(count, type);                   \
        mpi_peer_send(c, comm, dest, n, ticks);                                                    \
        mpi_ev_tag(tag);                  /* the peer: mpi_peer_send's */                           \
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
    MPI_EXPORT(fn, (const void *buf, cnt count, mpi_h type, int dest, int tag, mpi_h comm,         \
                          void *req))                                                              \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn)(buf, count, type, dest, tag, comm, req);                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn)(buf, count, type, dest, tag, comm, req);                    \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = mpi_bytes(count, type);                   \
        mpi_peer_send(c, comm, dest, n, ticks);                                                    \
        mpi_ev_tag(tag);                  /* the peer: mpi_peer_send's */                           \
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
    MPI_WRAP_S(fn, MH_POST, (void *buf, cnt count, mpi_h type, int src, int tag, mpi_h comm, void *req), \
             (buf, count, type, src, tag, comm, req), MPI_POSTED_REQ(comm, src, tag, req, mpi_bytes(count, type)), \
             MPI_FITS(count))
MPI_IRECV_FN(MPI_Irecv, int)
MPI_IRECV_FN(MPI_Irecv_c, mpi_count)

#define MPI_RECV_FN(fn, cnt)                                                                       \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, int, mpi_h, void *));                                  \
    MPI_EXPORT(fn, (void *buf, cnt count, mpi_h type, int src, int tag, mpi_h comm, void *status)) \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn)(buf, count, type, src, tag, comm, status);                      \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn)(buf, count, type, src, tag, comm, st);                      \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        if (rc == 0)                                                                               \
            mpi_ev_status(comm, st);                                                               \
        mpi_done(c, FN_##fn, ticks, rc == 0 ? mpi_status_bytes(st, type) : 0, MH_P2P);             \
        return rc;                                                                                 \
    }
MPI_RECV_FN(MPI_Recv, int)
MPI_RECV_FN(MPI_Recv_c, mpi_count)

PMPI_DECL(MPI_Probe, (int, int, mpi_h, void *));
MPI_WRAP(MPI_Probe, -1, (int src, int tag, mpi_h comm, void *status), (src, tag, comm, status), 0)

/* Matched probes, as mpi4py receives a Python object (MPI_Mprobe, then MPI_Mrecv of the message
 * it matched; `msg` an MPI_Message *): MPI_Mprobe waits for a message as MPI_Probe does (class
 * recv, time only), MPI_Improbe asks as MPI_Iprobe does (wait); MPI_Mrecv receives it as
 * MPI_Recv does (recv, the bytes its status gives), MPI_Imrecv posts it as MPI_Irecv does
 * (post, the bytes asked). */
PMPI_DECL(MPI_Mprobe, (int, int, mpi_h, void *, void *));
MPI_WRAP(MPI_Mprobe, -1, (int src, int tag, mpi_h comm, void *msg, void *status), (src, tag, comm, msg, status), 0)
PMPI_DECL(MPI_Improbe, (int, int, mpi_h, int *, void *, void *));
MPI_WRAP(MPI_Improbe, -1, (int src, int tag, mpi_h comm, int *flag, void *msg, void *status),
         (src, tag, comm, flag, msg, status), 0)

#define MPI_MRECV_FN(fn, cnt)                                                                      \
    PMPI_DECL(fn, (void *, cnt, mpi_h, void *, void *));                                           \
    MPI_EXPORT(fn, (void *buf, cnt count, mpi_h type, void *msg, void *status))                    \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn)(buf, count, type, msg, status);                                 \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn)(buf, count, type, msg, st);                                 \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        mpi_done(c, FN_##fn, ticks, rc == 0 ? mpi_status_bytes(st, type) : 0, MH_P2P);             \
        return rc;                                                                                 \
    }
MPI_MRECV_FN(MPI_Mrecv, int)
MPI_MRECV_FN(MPI_Mrecv_c, mpi_count)

#define MPI_IMRECV_FN(fn, cnt)                                                                     \
    PMPI_DECL(fn, (void *, cnt, mpi_h, void *, void *));                                           \
    MPI_WRAP_S(fn, MH_POST, (void *buf, cnt count, mpi_h type, void *msg, void *req), (buf, count, type, msg, req), \
             mpi_bytes(count, type), MPI_FITS(count))
MPI_IMRECV_FN(MPI_Imrecv, int)
MPI_IMRECV_FN(MPI_Imrecv_c, mpi_count)

#define MPI_SENDRECV_FN(fn, cnt)                                                                   \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, int, int, void *, cnt, mpi_h, int, int, mpi_h, void *)); \
    MPI_EXPORT(fn, (const void *sbuf, cnt scount, mpi_h stype, int dest, int stag, void *rbuf,     \
                          cnt rcount, mpi_h rtype, int src, int rtag, mpi_h comm, void *status))   \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(scount) && MPI_FITS(rcount)))                           \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn)(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src, rtag, \
                                 comm, status);                                                    \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn)(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, src,  \
                                     rtag, comm, st);                                              \
        const uint64_t ticks = ceil_ip_ticks() - t0, sent = mpi_bytes(scount, stype);              \
        mpi_sendrecv_done(c, FN_##fn, comm, dest, ticks, sent, rc == 0 ? mpi_status_bytes(st, rtype) : 0); \
        return rc;                                                                                 \
    }
MPI_SENDRECV_FN(MPI_Sendrecv, int)
MPI_SENDRECV_FN(MPI_Sendrecv_c, mpi_count)

#define MPI_SENDRECV_REPLACE_FN(fn, cnt)                                                           \
    PMPI_DECL(fn, (void *, cnt, mpi_h, int, int, int, int, mpi_h, void *));                        \
    MPI_EXPORT(fn, (void *buf, cnt count, mpi_h type, int dest, int stag, int src, int rtag,       \
                          mpi_h comm, void *status))                                               \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn)(buf, count, type, dest, stag, src, rtag, comm, status);         \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        void *st = mpi_status(status, own);                                                        \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn)(buf, count, type, dest, stag, src, rtag, comm, st);         \
        const uint64_t ticks = ceil_ip_ticks() - t0, n = mpi_bytes(count, type);                   \
        mpi_sendrecv_done(c, FN_##fn, comm, dest, ticks, n, rc == 0 ? mpi_status_bytes(st, type) : 0); \
        return rc;                                                                                 \
    }
MPI_SENDRECV_REPLACE_FN(MPI_Sendrecv_replace, int)
MPI_SENDRECV_REPLACE_FN(MPI_Sendrecv_replace_c, mpi_count)

/* ---- completion: time only (the bytes were counted where the request was posted) ---- */

/* MPI_Wait on a receive posted from a world rank with a tag names its message (source, tag, communicator)
 * as a blocking receive does, from its status (ours where the program ignores it): the wait states pair it
 * with its MPI_Irecv and the send (analysis/trace_waits.py, late sender in MPI_Wait). */
PMPI_DECL(MPI_Wait, (void *, void *));
MPI_EXPORT(MPI_Wait, (void *req, void *status))
{
    mpi_counters *c = mpi_enter();
    if (!c)
        return PMPI_REAL(MPI_Wait)(req, status);
    mpi_h comm = 0;
    const int recv = mpi_recv_pending(req, &comm);
    _Alignas(16) char own[MPI_STATUS_BYTES];
    void *st = recv ? mpi_status(status, own) : status;
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_Wait)(req, st);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    if (recv && rc == 0)
        mpi_ev_status(comm, st);
    mpi_done(c, FN_MPI_Wait, ticks, 0, -1);
    return rc;
}
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

/* ---- persistent requests --------------------------------------------------------
 * MPI_Send_init and its forms, MPI_Recv_init, the partitioned inits (below),
 * and the persistent collectives (mpi_coll.c, mpi_neighbor.c): not counted (they move nothing), but what the
 * request will move is noted against its handle, in a table of
 * MPI_PERSISTENT requests (claimed with a CAS; the rest start with no
 * bytes). MPI_Start and MPI_Startall count, per request started, those
 * bytes: a point-to-point request's (a send's with its peer) in the call's
 * own line and in the posting histogram, as an MPI_Isend or MPI_Irecv
 * would; a persistent collective's as one call of its init function's
 * name (fn=MPI_Allreduce_init: its starts; class icoll, as a non-blocking
 * collective's posting, in no histogram), with its share of the call's time,
 * which the MPI_Start or MPI_Startall line then leaves out (a call that
 * started collectives only is counted under their names alone: it posted
 * no point-to-point message).
 * MPI_Request_free forgets the handle. The Fortran bindings (mpi_fortran.c)
 * use the same table with their handles made C ones. */
#define MPI_PERSISTENT 256
static struct {
    uintptr_t key;          /* the request's C handle; 0: free */
    uint64_t bytes;
    mpi_h comm;
    int32_t dest;           /* -1: a receive (or a collective) */
    int32_t coll;           /* a persistent collective's FN_ index; -1: point-to-point */
} persistent[MPI_PERSISTENT];
static int persistent_live;  /* entries in use: MPI_Request_free of any other request skips the scan */

static int persistent_find(uintptr_t key)
{
    if (!key || __atomic_load_n(&persistent_live, __ATOMIC_ACQUIRE) == 0)
        return -1;
    for (int i = 0; i < MPI_PERSISTENT; i++)
        if (__atomic_load_n(&persistent[i].key, __ATOMIC_ACQUIRE) == key)
            return i;
    return -1;
}

/* Handles are read only where their size is known (the MPI was identified
 * at MPI_Init): an int-handle MPI read as pointers would be read past. */
uintptr_t mpi_request_key(const void *req) { return req && mpi_handle_bytes() ? mpi_handle_at(req) : 0; }

void mpi_persistent_note(uintptr_t key, uint64_t bytes, mpi_h comm, int dest, int coll)
{
    int i = persistent_find(key);
    for (int j = 0; i < 0 && key && j < MPI_PERSISTENT; j++) {
        uintptr_t free_key = 0;
        if (__atomic_compare_exchange_n(&persistent[j].key, &free_key, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            __atomic_add_fetch(&persistent_live, 1, __ATOMIC_ACQ_REL);
            i = j;
        }
    }
    if (i < 0)
        return;
    persistent[i].bytes = bytes;
    persistent[i].comm = comm;
    persistent[i].dest = dest;
    persistent[i].coll = coll;
}

void mpi_persistent_forget(uintptr_t key)
{
    const int i = persistent_find(key);
    if (i >= 0) {
        __atomic_store_n(&persistent[i].key, 0, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&persistent_live, 1, __ATOMIC_ACQ_REL);
    }
}

/* Each request started gets an equal share of the call's time: a
 * point-to-point one goes into the posting histogram with its own bytes, as
 * n MPI_Start calls would; a collective one is counted under its own name. */
void mpi_start_done(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, int ok, int n, const void *reqs,
                    mpi_key_fn key_of)
{
    uint64_t bytes = 0, coll_ticks = 0;
    const uint64_t share = n > 0 ? ticks / (uint64_t)n : 0;
    int colls = 0;
    mpi_fn_counters *last = NULL;
    for (int i = 0; ok && reqs && i < n; i++) {
        const int k = persistent_find(key_of(reqs, i));
        const uint64_t b = k >= 0 ? persistent[k].bytes : 0;
        if (k >= 0 && persistent[k].coll >= 0) {
            mpi_fn_counters *f = last = &c->fn[persistent[k].coll];
            ceil_ip_add(&f->calls, 1);
            ceil_ip_add(&f->ticks, share);
            ceil_ip_add(&f->bytes, b);
            coll_ticks += share;
            colls++;
            continue;
        }
        if (k >= 0 && persistent[k].dest >= 0)
            mpi_peer_send(c, persistent[k].comm, persistent[k].dest, b, share);
        const unsigned h = ceil_ip_size_bucket(b);
        ceil_ip_add(&c->hist[MH_POST][h], 1);
        ceil_ip_add(&c->hist_ticks[MH_POST][h], share);
        ceil_ip_add(&c->hist_bytes[MH_POST][h], b);
        bytes += b;
    }
    if (colls > 0 && colls == n) {      /* collectives only: counted under their names alone, */
        ceil_ip_add(&last->ticks, ticks - coll_ticks);      /* not as a post of no time besides */
        ceil_ip_leave();
        return;
    }
    mpi_done(c, fn, ticks - coll_ticks, bytes, -1);
}

#define MPI_PSEND_INIT_FN(fn, cnt, dest_of)                                                        \
    PMPI_DECL(fn, (const void *, cnt, mpi_h, int, int, mpi_h, void *));                            \
    MPI_EXPORT(fn, (const void *buf, cnt count, mpi_h type, int peer, int tag, mpi_h comm,         \
                          void *req))                                                              \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        const int rc = PMPI_REAL_S(fn)(buf, count, type, peer, tag, comm, req);                    \
        if (rc == 0 && ceil_ip_active())                                                           \
            mpi_persistent_note(mpi_request_key(req), mpi_bytes(count, type), comm, (dest_of), -1); \
        return rc;                                                                                 \
    }
MPI_PSEND_INIT_FN(MPI_Send_init, int, peer)
MPI_PSEND_INIT_FN(MPI_Send_init_c, mpi_count, peer)
MPI_PSEND_INIT_FN(MPI_Ssend_init, int, peer)
MPI_PSEND_INIT_FN(MPI_Ssend_init_c, mpi_count, peer)
MPI_PSEND_INIT_FN(MPI_Bsend_init, int, peer)
MPI_PSEND_INIT_FN(MPI_Bsend_init_c, mpi_count, peer)
MPI_PSEND_INIT_FN(MPI_Rsend_init, int, peer)
MPI_PSEND_INIT_FN(MPI_Rsend_init_c, mpi_count, peer)
MPI_PSEND_INIT_FN(MPI_Recv_init, int, -1)
MPI_PSEND_INIT_FN(MPI_Recv_init_c, mpi_count, -1)

/* ---- partitioned communication (MPI 4) -------------------------------------------------
 * MPI_Psend_init and MPI_Precv_init make persistent requests like
 * MPI_Send_init's: not counted, but what each start will move noted against
 * the handle, partitions times count of the datatype (the whole message),
 * with a send's peer; MPI_Start and MPI_Startall count it as they count a
 * persistent send or receive. Their count is an MPI_Count already (no _c
 * form). The partition calls are counted as calls, time only (the bytes
 * were the start's): MPI_Pready, MPI_Pready_range and MPI_Pready_list in
 * class post, as each hands partitions of a started send to the library to
 * transfer, as MPI_Isend hands it a message; MPI_Parrived in class wait, as
 * it asks whether a partition has arrived, as MPI_Test asks of a request.
 * Looked up at the first call: an MPI without them (Open MPI 4.1) runs as
 * before. */
#define MPI_PINIT_FN(fn, dest_of)                                                                  \
    PMPI_DECL(fn, (const void *, int, mpi_count, mpi_h, int, int, mpi_h, mpi_h, void *));          \
    MPI_EXPORT(fn, (const void *buf, int partitions, mpi_count count, mpi_h type, int peer, int tag, \
                          mpi_h comm, mpi_h info, void *req))                                      \
    {                                                                                              \
        const int rc = PMPI_REAL(fn)(buf, partitions, count, type, peer, tag, comm, info, req);    \
        if (rc == 0 && ceil_ip_active())                                                           \
            mpi_persistent_note(mpi_request_key(req), mpi_bytes((int64_t)partitions * count, type), comm, \
                                (dest_of), -1);                                                    \
        return rc;                                                                                 \
    }
MPI_PINIT_FN(MPI_Psend_init, peer)
MPI_PINIT_FN(MPI_Precv_init, -1)

/* The request is passed by value here. */
PMPI_DECL(MPI_Pready, (int, mpi_h));
MPI_WRAP(MPI_Pready, -1, (int partition, mpi_h req), (partition, req), 0)
PMPI_DECL(MPI_Pready_range, (int, int, mpi_h));
MPI_WRAP(MPI_Pready_range, -1, (int low, int high, mpi_h req), (low, high, req), 0)
PMPI_DECL(MPI_Pready_list, (int, const int *, mpi_h));
MPI_WRAP(MPI_Pready_list, -1, (int n, const int *partitions, mpi_h req), (n, partitions, req), 0)
PMPI_DECL(MPI_Parrived, (mpi_h, int, int *));
MPI_WRAP(MPI_Parrived, -1, (mpi_h req, int partition, int *flag), (req, partition, flag), 0)

/* Forgotten whatever the runtime's state (also after the record is written):
 * a stale entry would credit a later request on the same handle. */
PMPI_DECL(MPI_Request_free, (void *));
MPI_EXPORT(MPI_Request_free, (void *req))
{
    mpi_persistent_forget(mpi_request_key(req));
    return PMPI_REAL(MPI_Request_free)(req);
}

/* The i-th of the C handles at reqs (mpi_request_key's rule). */
static uintptr_t c_key_at(const void *reqs, int i)
{
    const size_t step = mpi_handle_bytes();
    return step ? mpi_handle_at((const char *)reqs + (size_t)i * step) : 0;
}

PMPI_DECL(MPI_Start, (void *));
MPI_EXPORT(MPI_Start, (void *req))
{
    mpi_counters *c = mpi_enter();
    if (!c)
        return PMPI_REAL(MPI_Start)(req);
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_Start)(req);
    mpi_start_done(c, FN_MPI_Start, ceil_ip_ticks() - t0, rc == 0, 1, req, c_key_at);
    return rc;
}

PMPI_DECL(MPI_Startall, (int, void *));
MPI_EXPORT(MPI_Startall, (int n, void *reqs))
{
    mpi_counters *c = mpi_enter();
    if (!c)
        return PMPI_REAL(MPI_Startall)(n, reqs);
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_Startall)(n, reqs);
    mpi_start_done(c, FN_MPI_Startall, ceil_ip_ticks() - t0, rc == 0, n, reqs, c_key_at);
    return rc;
}
