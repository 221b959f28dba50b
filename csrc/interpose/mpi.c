/* mpi.c - the MPI module: counts the program's MPI calls through the
 * profiling interface (each MPI_X wrapper calls PMPI_X), like mpiP and
 * IPM, per function and per class, with message-size histograms and the
 * destinations of its sends. This file: the module, start and end, the
 * record; mpi_p2p.c holds point-to-point, completion, persistent and
 * partitioned requests, mpi_coll.c the collectives, mpi_neighbor.c the
 * neighbourhood ones, mpi_io.c MPI-IO, mpi_rma.c one-sided communication,
 * mpi_fortran.c the Fortran names, mpi.h what they share (and why one
 * build serves every MPI).
 *
 * Longer than 500 lines: seventy are the record's format, below, and the
 * rest is one piece (the module's start, MPI_Init and MPI_Finalize with the
 * wrapped launch's gather around it, and the record), whose parts share
 * the module's static state; the calls themselves are in the files above.
 *
 * Its record lines (interpose.h has the format around them), in this order:
 *
 *     module name=mpi version=1 enabled=1
 *     mpi rank=0 size=4 family=mpich world=1 thread_level=0 init_ns=... finalize_ns=... library=MPICH... comms_lost=0
 *     mpi class=send calls=100 ns=81234 bytes=409600
 *     ...
 *     mpi hist=p2p lt1k=2 1k=0 ... ge64m=0
 *     mpi hist_ns=p2p lt1k=812 1k=0 ... ge64m=0
 *     mpi hist_bytes=p2p lt1k=16 1k=0 ... ge64m=0
 *     mpi fn=MPI_Send calls=100 ns=81234 bytes=409600
 *     mpi peer=1 calls=100 bytes=409600 ns=81234
 *     mpi peer=other calls=0 bytes=0
 *
 * A process that made no MPI call has no lines but its module line. The
 * first line: rank and size in MPI_COMM_WORLD (-1 when the library was
 * not recognised and no launcher variable gave them: PMI_RANK, PMIX_RANK,
 * OMPI_COMM_WORLD_RANK, SLURM_PROCID); family: openmpi, mpich (the MPICH
 * ABI: MPICH, Intel MPI, MVAPICH, Cray MPICH), mpi-abi (the MPI 5
 * standard ABI, libmpi_abi) or unknown; world: 1 when MPI_COMM_WORLD's
 * handle is known, so that peers are world ranks (0: no peer lines);
 * thread_level: what MPI_Init_thread provided (-1: MPI_Init); init_ns: when
 * MPI_Init returned, finalize_ns: when MPI_Finalize was called (0: not
 * seen), CLOCK_MONOTONIC; library: MPI_Get_library_version's first line;
 * comms_lost: communicators made past the table that names their ranks by
 * world rank (below: their sends count as peer=other, their events name no
 * peer).
 * class (only those called): init (MPI_Init, MPI_Init_thread,
 * MPI_Finalize), send (blocking sends), recv (MPI_Recv, MPI_Probe),
 * sendrecv, post (MPI_Isend and its forms, MPI_Irecv: posting only; the
 * transfer's time is in the wait that completes it; MPI_Start and
 * MPI_Startall of persistent requests, with the bytes their MPI_Send_init
 * or MPI_Recv_init set, and of MPI 4 partitioned ones, with the whole
 * message their MPI_Psend_init or MPI_Precv_init set, mpi_p2p.c; a
 * persistent collective started is icoll's; MPI_Pready, MPI_Pready_range
 * and MPI_Pready_list, time only), wait
 * (MPI_Wait*, MPI_Test*, MPI_Iprobe, MPI_Parrived), coll (blocking
 * collectives, Alltoallw and the neighbourhood ones included), icoll
 * (non-blocking collectives, the neighbourhood ones included, posting
 * only; and each start of a persistent collective, MPI 4, neighbourhood
 * ones and Alltoallw_init included, counted as a call of its init's name,
 * fn=MPI_Allreduce_init, with the bytes the init set and its share of the
 * MPI_Start or MPI_Startall, whose line leaves that time out, and the
 * call itself where it started collectives only), io_meta, io_read, io_write, io_sync (MPI-IO), rma (MPI_Put,
 * MPI_Get, the accumulates, MPI_Rput, MPI_Rget, MPI_Fetch_and_op,
 * MPI_Compare_and_swap: the origin's bytes, at posting: the transfer may
 * finish at the synchronisation), rma_sync (MPI_Win_fence, the locks and
 * unlocks, the flushes, post, start, complete, wait and sync: where
 * one-sided transfers complete and ranks wait for each other). calls, ns (time inside the PMPI function, summed in
 * ceil_ip_ticks), bytes: a send's count times its datatype's size (exact),
 * a blocking receive's and a read's as received (MPI_Get_count of the
 * status), an MPI_Irecv's posted size, a sendrecv's two sides, a
 * collective's as mpi_coll.c says, a write's as asked.
 * hist / hist_ns / hist_bytes: calls, time and bytes by size (interpose.h's
 * buckets) for p2p
 * (blocking sends, receives and sendrecvs: the larger side), post,
 * coll and io (MPI-IO reads and writes); only kinds with calls are written.
 * fn: one line per function called, with its calls, time and bytes (a
 * persistent collective's init: its starts).
 * peer: sends to one world rank (blocking, non-blocking and sendrecv's
 * send side), by destination, on MPI_COMM_WORLD, MPI_COMM_SELF and every
 * communicator tracked (mpi_comm.c; an intercommunicator's destination is
 * a remote rank, named by its world rank); peer=other: sends whose world
 * rank is unknown (a communicator past the table, or made where it was not
 * seen) and to destinations past the MPI_PEERS each thread tracks.
 *
 * Not seen: the bytes of persistent requests past the table's
 * MPI_PERSISTENT (mpi_p2p.c), whose starts count as point-to-point ones
 * with no bytes; the Fortran calls mpi_fortran.c does not wrap (the
 * partitioned ones and the matched probes among them).
 * Calls the library makes from inside an MPI call (its progress engine's
 * reads and writes, MPI-IO's pread and pwrite, an MPI-IO collective's
 * MPI_Allreduce) are not counted by any module: their time is the outer
 * call's (interpose.h, nesting). The record is written at MPI_Finalize as
 * a checkpoint (launchers may kill ranks soon after) and again at exit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include "mpi.h"

#define MPI_FN_NAME(fn, cls) #fn,
#define MPI_FN_NAME_C(fn, cls) #fn, #fn "_c",
#define MPI_FN_CLASS(fn, cls) MC_##cls,
#define MPI_FN_CLASS_C(fn, cls) MC_##cls, MC_##cls,
static const char *const fn_names[MPI_FN_COUNT] = {MPI_FNS(MPI_FN_NAME, MPI_FN_NAME_C)};
static const unsigned char fn_class[MPI_FN_COUNT] = {MPI_FNS(MPI_FN_CLASS, MPI_FN_CLASS_C)};
#define MPI_CLASS_NAME(e, name) #name,
static const char *const class_names[MC_COUNT] = {CEIL_IP_MPI_CLASSES(MPI_CLASS_NAME)};
static const char *const hist_names[MH_COUNT] = {CEIL_IP_MPI_HISTS(MPI_CLASS_NAME)};

/* Known after MPI_Init (written once there, read at report). */
static int world_rank = -1, world_size = -1, world_known, thread_level = -1;
static mpi_h world, byte_type, comm_self, comm_null;
static const char *family = "unknown";
static char library[256];
static uint64_t init_ns, finalize_ns;
/* The family's MPI_STATUS_IGNORE, which is its MPI_STATUSES_IGNORE too ((MPI_Status *)1 in MPICH's
 * mpi.h, 0 in Open MPI's and the standard ABI's), and where MPI_SOURCE sits in its status, in ints
 * (MPICH: after two count words; first in Open MPI's and the ABI's; -1 while the family is unknown):
 * set by mpi_identify. */
static const void *status_ignore;
static int status_source_at = -1;

/* The helpers' PMPI functions, looked up at MPI_Init (softly: NULL if absent). */
typedef int (*type_size_fn)(mpi_h, int *);
typedef int (*get_count_fn)(const void *, mpi_h, int *);
typedef int (*get_count_c_fn)(const void *, mpi_h, mpi_count *);
typedef int (*comm_int_fn)(mpi_h, int *);
static type_size_fn type_size;
static get_count_fn get_count;
static get_count_c_fn get_count_c;         /* MPI 4: counts past 2^31 - 1 */
static comm_int_fn comm_rank, comm_size, comm_test_inter, comm_remote_size;

/* ---- helpers (mpi.h) ------------------------------------------------------- */

uint64_t mpi_bytes(int64_t count, mpi_h type)
{
    int size = 0;
    /* 0 is no datatype in any ABI here (a Fortran handle that could not be converted) */
    if (count <= 0 || type == 0 || !type_size || type_size(type, &size) != 0 || size <= 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

uint64_t mpi_status_bytes(const void *status, mpi_h type)
{
    /* MPI_UNDEFINED (negative) when not a whole number of elements */
    mpi_count n = 0;
    if (get_count_c)
        return get_count_c(status, type, &n) == 0 && n > 0 ? mpi_bytes(n, type) : 0;
    int k = 0;
    return get_count && get_count(status, type, &k) == 0 && k > 0 ? mpi_bytes(k, type) : 0;
}

int mpi_comm_size(mpi_h comm)
{
    int n = 0, inter = 0;
    /* on an intercommunicator the count arrays cover the remote group */
    if (comm_test_inter && comm_remote_size && comm_test_inter(comm, &inter) == 0 && inter)
        return comm_remote_size(comm, &n) == 0 && n > 0 ? n : 0;
    return comm_size && comm_size(comm, &n) == 0 && n > 0 ? n : 0;
}

int mpi_world(mpi_h *comm, mpi_h *byte, int *rank, int *size)
{
    *comm = world;
    *byte = byte_type;
    *rank = world_rank;
    *size = world_size;
    return world_known && byte_type != 0;
}

int mpi_comm_rank(mpi_h comm)
{
    int r = -1;
    return comm_rank && comm_rank(comm, &r) == 0 ? r : -1;
}

/* A rank of comm as a world rank (-1 unknown): MPI_COMM_WORLD's without a lookup, the others' from
 * mpi_comm.c's table. */
static inline int32_t to_world(mpi_h comm, int rank)
{
    if (!world_known || rank < 0)
        return -1;
    return comm == world ? rank : mpi_comm_world_rank(comm, rank);
}

/* The trace's call ids of the MPI functions, and what the next event names (mpi.h: mpi_ev_p2p and
 * the others set them before mpi_done, which takes them): its file field (a peer or root as a world
 * rank, or an MPI-IO call's file id) and its offset field (a message's communicator id and tag,
 * tag_on, or an MPI-IO call's byte offset). */
#define MPI_FN_CALL(fn, cls) CEIL_IP_CALL_##fn,
#define MPI_FN_CALL_C(fn, cls) CEIL_IP_CALL_##fn, CEIL_IP_CALL_##fn##_c,
static const uint16_t fn_call[MPI_FN_COUNT] = {MPI_FNS(MPI_FN_CALL, MPI_FN_CALL_C)};
static __thread int32_t ev_peer_ = -1;
static __thread int64_t ev_tag_ = -1;
static __thread uint32_t ev_comm_ = MPI_COMM_ID_UNKNOWN;

/* A message's offset field: its communicator's id (mpi_comm_id) in the high 32 bits, its tag in the low. */
static int64_t tag_on(uint32_t comm_id, int tag) { return (int64_t)(((uint64_t)comm_id << 32) | (uint32_t)tag); }

void mpi_ev_p2p(mpi_h comm, int peer, int tag)
{
    ev_peer_ = to_world(comm, peer);
    ev_tag_ = tag_on(world_known ? mpi_comm_id(comm) : MPI_COMM_ID_UNKNOWN, tag);
}

void mpi_ev_tag(int tag) { ev_tag_ = tag_on(ev_comm_, tag); }     /* the communicator: mpi_peer_send's */

/* Receives posted with a source and a tag (MPI_Irecv), by request, so that the MPI_Wait completing one names
 * its message as a blocking receive would (the wait states' late sender in MPI_Wait): a small ring per
 * thread, the oldest let go past RECV_PENDING (its wait then names nothing). */
#define RECV_PENDING 64
static __thread struct { uintptr_t req; mpi_h comm; } pending_[RECV_PENDING];
static __thread unsigned pending_next_;

void mpi_recv_posted(mpi_h comm, const void *req)
{
    /* mpi_ev_p2p has named the post: a world rank and a tag, not MPI_ANY_SOURCE or MPI_ANY_TAG */
    if (!req || !mpi_handle_bytes() || ev_peer_ < 0 || (int32_t)(uint32_t)ev_tag_ < 0)
        return;
    const unsigned i = pending_next_++ % RECV_PENDING;
    pending_[i].req = mpi_handle_at(req);
    pending_[i].comm = comm;
}

int mpi_recv_pending(const void *req, mpi_h *comm)
{
    if (!req || !mpi_handle_bytes())
        return 0;
    const uintptr_t r = mpi_handle_at(req);
    for (unsigned k = 0; k < RECV_PENDING; k++)
        if (pending_[k].req == r && r) {
            *comm = pending_[k].comm;
            pending_[k].req = 0;
            return 1;
        }
    return 0;
}

void mpi_ev_comm(mpi_h comm) { ev_tag_ = tag_on(world_known ? mpi_comm_id(comm) : MPI_COMM_ID_UNKNOWN, -1); }

void mpi_ev_root(mpi_h comm, int root)
{
    ev_peer_ = to_world(comm, root);
    mpi_ev_comm(comm);
}

void mpi_ev_file(uint32_t file, int64_t offset)
{
    ev_peer_ = (int32_t)file;
    ev_tag_ = offset;
}

void mpi_ev_status(mpi_h comm, const void *status)
{
    /* never read: a status the library was told to ignore, or one whose layout is not known */
    if (status_source_at < 0 || status == NULL || status == status_ignore)
        return;
    const int *s = status;
    mpi_ev_p2p(comm, s[status_source_at], s[status_source_at + 1]);     /* MPI_SOURCE, MPI_TAG */
}

static void count_(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, uint64_t bytes, int hist);

void mpi_done(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, uint64_t bytes, int hist)
{
    ceil_ip_event_dur(&ceil_mpi_module, (enum ceil_ip_call)fn_call[fn], ticks, 0, bytes, ev_peer_, ev_tag_);
    count_(c, fn, ticks, bytes, hist);
}

uint64_t mpi_done_later(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, uint64_t bytes, int hist)
{
    const uint64_t t1 = ceil_ip_ticks();
    count_(c, fn, ticks, bytes, hist);
    return t1;
}

void mpi_event_ended(enum mpi_fn fn, uint64_t t1, uint64_t ticks, uint64_t bytes, uint32_t file, int64_t offset)
{
    ceil_ip_event_io(&ceil_mpi_module, (enum ceil_ip_call)fn_call[fn], t1 - ticks, t1, 0, bytes, (int32_t)file,
                     offset);
}

static void count_(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, uint64_t bytes, int hist)
{
    ev_peer_ = -1, ev_tag_ = -1, ev_comm_ = MPI_COMM_ID_UNKNOWN;
    mpi_fn_counters *f = &c->fn[fn];
    ceil_ip_add(&f->calls, 1);
    ceil_ip_add(&f->ticks, ticks);
    ceil_ip_add(&f->bytes, bytes);
    if (hist >= 0) {
        const unsigned b = ceil_ip_size_bucket(bytes);
        ceil_ip_add(&c->hist[hist][b], 1);
        ceil_ip_add(&c->hist_ticks[hist][b], ticks);
        ceil_ip_add(&c->hist_bytes[hist][b], bytes);
    }
    ceil_ip_leave();
}

void mpi_peer_send(mpi_counters *c, mpi_h comm, int dest, uint64_t bytes, uint64_t ticks)
{
    const int32_t to = to_world(comm, dest);
    ev_peer_ = to;
    ev_comm_ = world_known ? mpi_comm_id(comm) : MPI_COMM_ID_UNKNOWN;
    if (to >= 0) {
        const uint64_t key = (uint64_t)to + 1;
        for (unsigned i = 0, h = (unsigned)to % MPI_PEERS; i < MPI_PEERS; i++, h = (h + 1) % MPI_PEERS) {
            mpi_peer *p = &c->peers[h];
            if (p->key != key && p->key != 0)
                continue;
            if (p->key == 0)
                __atomic_store_n(&p->key, key, __ATOMIC_RELAXED);
            ceil_ip_add(&p->calls, 1);
            ceil_ip_add(&p->bytes, bytes);
            ceil_ip_add(&p->ticks, ticks);
            return;
        }
    }
    ceil_ip_add(&c->other_calls, 1);
    ceil_ip_add(&c->other_bytes, bytes);
}

/* ---- start and end --------------------------------------------------------- */

static int env_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            char *end;
            long n = strtol(v, &end, 10);
            if (!*end && n >= 0 && n < (1L << 30))
                return (int)n;
        }
    }
    return -1;
}

/* Which MPI this is, MPI_COMM_WORLD's handle, this process's rank. */
static void mpi_identify(const void *caller, int provided)
{
    typedef int (*version_fn)(char *, int *);
    static char text[8192];          /* MPI_MAX_LIBRARY_VERSION_STRING is 8192 in MPICH, less elsewhere */
    type_size = (type_size_fn)ceil_ip_lookup("PMPI_Type_size", caller);
    get_count = (get_count_fn)ceil_ip_lookup("PMPI_Get_count", caller);
    get_count_c = (get_count_c_fn)ceil_ip_lookup("PMPI_Get_count_c", caller);
    comm_rank = (comm_int_fn)ceil_ip_lookup("PMPI_Comm_rank", caller);
    comm_size = (comm_int_fn)ceil_ip_lookup("PMPI_Comm_size", caller);
    comm_test_inter = (comm_int_fn)ceil_ip_lookup("PMPI_Comm_test_inter", caller);
    comm_remote_size = (comm_int_fn)ceil_ip_lookup("PMPI_Comm_remote_size", caller);
    version_fn version = (version_fn)ceil_ip_lookup("PMPI_Get_library_version", caller);
    int len = 0;
    if (version && version(text, &len) == 0 && len > 0) {
        size_t n = strcspn(text, "\n");
        n = n < sizeof library - 1 ? n : sizeof library - 1;
        memcpy(library, text, n);
        library[n] = '\0';
    }
    thread_level = provided;
    /* A data symbol: a program linked against libmpi holds a copy of it
     * (a copy relocation) that every reference, libmpi's own included,
     * binds to, and RTLD_NEXT would find libmpi's unused original; the
     * global scope starts at the program. */
    void *ompi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    if (!ompi_world)
        ompi_world = ceil_ip_lookup("ompi_mpi_comm_world", caller);
    void *init = ceil_ip_lookup("PMPI_Init", caller);
    Dl_info info;
    if (ompi_world) {
        family = "openmpi";
        status_ignore = NULL, status_source_at = 0;
        world = (mpi_h)ompi_world;
        void *null_ = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_null"), *self_ = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_self");
        comm_null = (mpi_h)(null_ ? null_ : ceil_ip_lookup("ompi_mpi_comm_null", caller));
        comm_self = (mpi_h)(self_ ? self_ : ceil_ip_lookup("ompi_mpi_comm_self", caller));
        void *b = dlsym(RTLD_DEFAULT, "ompi_mpi_byte");
        byte_type = (mpi_h)(b ? b : ceil_ip_lookup("ompi_mpi_byte", caller));
        world_known = 1;
    } else if (init && dladdr(init, &info) && info.dli_fname && strstr(info.dli_fname, "libmpi_abi")) {
        family = "mpi-abi";
        status_ignore = NULL, status_source_at = 0;
        world = 0x101;               /* mpi_abi.h: MPI_COMM_WORLD, MPI_BYTE, MPI_COMM_NULL, MPI_COMM_SELF */
        comm_null = 0x100, comm_self = 0x102;
        byte_type = 0x247;
        world_known = 1;
    } else if (strstr(library, "MPICH") || strstr(library, "Intel(R) MPI") || strstr(library, "MVAPICH")) {
        family = "mpich";
        status_ignore = (const void *)1, status_source_at = 2;
        world = 0x44000000;          /* MPICH's mpi.h: MPI_COMM_WORLD, MPI_BYTE, MPI_COMM_NULL, MPI_COMM_SELF */
        comm_null = 0x04000000, comm_self = 0x44000001;
        byte_type = 0x4c00010d;
        world_known = 1;
    }
    if (world_known && comm_rank && comm_size && comm_rank(world, &world_rank) == 0 &&
        comm_size(world, &world_size) == 0) {
        __atomic_store_n(&ceil_ip_trace_rank_, world_rank, __ATOMIC_RELAXED);
        return;
    }
    world_known = 0;
    static const char *const ranks[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    static const char *const sizes[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", NULL};
    world_rank = env_int(ranks);
    world_size = env_int(sizes);
    __atomic_store_n(&ceil_ip_trace_rank_, world_rank, __ATOMIC_RELAXED);
}

void mpi_started(const void *caller, int ok, int provided)
{
    init_ns = ceil_ip_now_ns();
    if (!ok)
        return;
    mpi_identify(caller, provided);
    mpi_fortran_started(caller);
    mpi_neighbor_started(caller);
    if (world_known)
        mpi_comm_started(caller, world, comm_self, comm_null, world_rank, world_size);
    mpi_io_started(caller);
}

const char *mpi_family(void) { return family; }

void mpi_init_done(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, const void *caller)
{
    mpi_done(c, fn, ticks, 0, -1);
    ceil_ip_enter();
    mpi_clock_started(caller);
    ceil_ip_leave();
}

void mpi_finalizing(const void *caller)
{
    finalize_ns = ceil_ip_now_ns();
    mpi_clock_finalizing(caller);       /* before the checkpoint writes the events out (mpi_clock.c) */
    ceil_ip_checkpoint(ceil_mpi_module.name, mpi_gather_wanted() ? mpi_gather_records : NULL, (void *)caller);
}

void mpi_finalize_begin(mpi_counters *c, const void *caller)
{
    /* The call is counted before the checkpoint, its time after PMPI_Finalize
     * (PMPI_Finalize's alone: the checkpoint, rank 0's gather of every rank's
     * record and events and the clocks' sync are ceiling's work, not the
     * program's, and stay out of its MPI time):
     * the checkpoint is all that rank 0 receives of a gathered rank (its record
     * at exit stays on its node), which then has the call but not its time
     * (fn=MPI_Finalize calls=1 ns=0 in a reason=checkpoint record; the reader
     * says the time is unknown, analysis/profile_mpi.py). */
    ceil_ip_add(&c->fn[FN_MPI_Finalize].calls, 1);
    /* Every rank's record to one, when ceiling wraps each rank (mpi_gather.c);
     * before PMPI_Finalize, with the depth still raised. */
    mpi_finalizing(caller);
}

void mpi_finalize_end(mpi_counters *c, uint64_t t0)
{
    ceil_ip_add(&c->fn[FN_MPI_Finalize].ticks, ceil_ip_ticks() - t0);
    ceil_ip_leave();
}

size_t mpi_handle_bytes(void)
{
    if (strcmp(family, "mpich") == 0)
        return sizeof(uint32_t);
    return strcmp(family, "openmpi") == 0 || strcmp(family, "mpi-abi") == 0 ? sizeof(uintptr_t) : 0;
}

uintptr_t mpi_handle_at(const void *p)
{
    if (mpi_handle_bytes() == sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    uintptr_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

void mpi_abort_if_asked(const void *caller)
{
    const char *v = getenv("CEILING_INTERPOSE_ABORT");
    if (!v || !*v)
        return;
    const int code = atoi(v) > 0 ? atoi(v) : 1;
    mpi_identify(caller, -1);
    typedef int (*abort_fn)(mpi_h, int);
    abort_fn ab = (abort_fn)ceil_ip_lookup("PMPI_Abort", caller);
    if (ab && world_known)
        ab(world, code);
    _exit(code);
}

PMPI_DECL(MPI_Init, (int *, char ***));
MPI_EXPORT(MPI_Init, (int *argc, char ***argv))
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        const int rc = PMPI_REAL(MPI_Init)(argc, argv);
        mpi_abort_if_asked(__builtin_return_address(0));
        return rc;
    }
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_Init)(argc, argv);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    mpi_started(__builtin_return_address(0), rc == 0, -1);
    mpi_init_done(c, FN_MPI_Init, ticks, __builtin_return_address(0));
    return rc;
}

PMPI_DECL(MPI_Init_thread, (int *, char ***, int, int *));
MPI_EXPORT(MPI_Init_thread, (int *argc, char ***argv, int required, int *provided))
{
    mpi_counters *c = mpi_enter();
    if (!c) {
        const int rc = PMPI_REAL(MPI_Init_thread)(argc, argv, required, provided);
        mpi_abort_if_asked(__builtin_return_address(0));
        return rc;
    }
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_Init_thread)(argc, argv, required, provided);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    mpi_started(__builtin_return_address(0), rc == 0, provided ? *provided : -1);
    mpi_init_done(c, FN_MPI_Init_thread, ticks, __builtin_return_address(0));
    return rc;
}

PMPI_DECL(MPI_Finalize, (void));
MPI_EXPORT(MPI_Finalize, (void))
{
    mpi_counters *c = mpi_enter();
    if (!c)
        return PMPI_REAL(MPI_Finalize)();
    mpi_finalize_begin(c, __builtin_return_address(0));
    const uint64_t t0 = ceil_ip_ticks();        /* after the checkpoint: the MPI library's time alone */
    const int rc = PMPI_REAL(MPI_Finalize)();
    mpi_finalize_end(c, t0);
    return rc;
}

/* ---- the record ------------------------------------------------------------------ */

typedef struct mpi_sums {
    mpi_fn_counters fn[MPI_FN_COUNT];
    uint64_t hist[MH_COUNT][CEIL_IP_HIST_BUCKETS];
    uint64_t hist_ticks[MH_COUNT][CEIL_IP_HIST_BUCKETS];
    uint64_t hist_bytes[MH_COUNT][CEIL_IP_HIST_BUCKETS];
    uint64_t other_calls, other_bytes;
} mpi_sums;

/* The peers of every thread merged (static: a report allocates nothing). */
#define MERGED_PEERS 4096
static mpi_peer merged[MERGED_PEERS];
static mpi_sums sums;

static void merge_peer(const mpi_peer *p)
{
    const uint64_t key = ceil_ip_read(&p->key);
    if (!key)
        return;
    for (unsigned i = 0, h = (unsigned)(key % MERGED_PEERS); i < MERGED_PEERS; i++, h = (h + 1) % MERGED_PEERS) {
        mpi_peer *m = &merged[h];
        if (m->key != key && m->key != 0)
            continue;
        m->key = key;
        m->calls += ceil_ip_read(&p->calls);
        m->bytes += ceil_ip_read(&p->bytes);
        m->ticks += ceil_ip_read(&p->ticks);
        return;
    }
    sums.other_calls += ceil_ip_read(&p->calls);
    sums.other_bytes += ceil_ip_read(&p->bytes);
}

static void put_hist(ceil_ip_out *o, ceil_ip_module *m, const char *key, const char *name, const uint64_t *v,
                     double ns_per_tick, int ticks)
{
    ceil_ip_line(o, m);
    ceil_ip_put_str(o, key, name);
    for (int b = 0; b < CEIL_IP_HIST_BUCKETS; b++)
        ceil_ip_put_u64(o, ceil_ip_bucket_names[b], ticks ? ceil_ip_ticks_ns(v[b], ns_per_tick) : v[b]);
}

/* Whether any thread made an MPI call, read from the blocks alone: a process
 * that never did (most of those under the interposer) writes none of the
 * report's scratch, 140 KiB it would otherwise keep resident to its end. */
static int any_mpi_call(ceil_ip_module *self)
{
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const mpi_counters *c = ceil_ip_block_of(self, t);
        for (int f = 0; c && f < MPI_FN_COUNT; f++)
            if (ceil_ip_read(&c->fn[f].calls))
                return 1;
    }
    return 0;
}

static void mpi_report(ceil_ip_module *self, ceil_ip_out *o)
{
    const double npt = ceil_ip_ns_per_tick();
    if (!init_ns && !any_mpi_call(self))
        return;                      /* a process that never called MPI: no lines */
    memset(&sums, 0, sizeof sums);
    for (int p = 0; p < MERGED_PEERS; p++)       /* only the pages a report wrote before */
        if (merged[p].key)
            memset(&merged[p], 0, sizeof merged[p]);
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const mpi_counters *c = ceil_ip_block_of(self, t);
        if (!c)
            continue;
        const uint64_t *src = (const uint64_t *)c;
        uint64_t *dst = (uint64_t *)&sums;
        for (size_t i = 0; i < sizeof sums / sizeof(uint64_t); i++)   /* mpi_sums is the block's head */
            dst[i] += ceil_ip_read(&src[i]);
        for (int p = 0; p < MPI_PEERS; p++)
            merge_peer(&c->peers[p]);
    }
    uint64_t calls = 0;
    for (int f = 0; f < MPI_FN_COUNT; f++)
        calls += sums.fn[f].calls;
    if (!calls && !init_ns)
        return;                      /* a process that never called MPI: no lines */
    ceil_ip_line(o, self);
    CEIL_IP_PUT_I64(o, rank, world_rank);
    CEIL_IP_PUT_I64(o, size, world_size);
    CEIL_IP_PUT_STR(o, family, family);
    CEIL_IP_PUT_U64(o, world, (uint64_t)world_known);
    CEIL_IP_PUT_I64(o, thread_level, thread_level);
    CEIL_IP_PUT_U64(o, init_ns, init_ns);
    CEIL_IP_PUT_U64(o, finalize_ns, finalize_ns);
    CEIL_IP_PUT_STR(o, library, library);
    CEIL_IP_PUT_U64(o, comms_lost, mpi_comms_lost());

    mpi_fn_counters cls[MC_COUNT] = {{0, 0, 0}};
    for (int f = 0; f < MPI_FN_COUNT; f++) {
        cls[fn_class[f]].calls += sums.fn[f].calls;
        cls[fn_class[f]].ticks += sums.fn[f].ticks;
        cls[fn_class[f]].bytes += sums.fn[f].bytes;
    }
    for (int k = 0; k < MC_COUNT; k++) {
        if (!cls[k].calls)
            continue;
        ceil_ip_line(o, self);
        CEIL_IP_PUT_STR(o, class, class_names[k]);
        CEIL_IP_PUT_U64(o, calls, cls[k].calls);
        CEIL_IP_PUT_U64(o, ns, ceil_ip_ticks_ns(cls[k].ticks, npt));
        CEIL_IP_PUT_U64(o, bytes, cls[k].bytes);
    }
    for (int h = 0; h < MH_COUNT; h++) {
        uint64_t any = 0;
        for (int b = 0; b < CEIL_IP_HIST_BUCKETS; b++)
            any += sums.hist[h][b];
        if (!any)
            continue;
        put_hist(o, self, CEIL_IP_KEY_(hist, 's'), hist_names[h], sums.hist[h], npt, 0);
        put_hist(o, self, CEIL_IP_KEY_(hist_ns, 's'), hist_names[h], sums.hist_ticks[h], npt, 1);
        put_hist(o, self, CEIL_IP_KEY_(hist_bytes, 's'), hist_names[h], sums.hist_bytes[h], npt, 0);
    }
    for (int f = 0; f < MPI_FN_COUNT; f++) {
        if (!sums.fn[f].calls)
            continue;
        ceil_ip_line(o, self);
        CEIL_IP_PUT_STR(o, fn, fn_names[f]);
        CEIL_IP_PUT_U64(o, calls, sums.fn[f].calls);
        CEIL_IP_PUT_U64(o, ns, ceil_ip_ticks_ns(sums.fn[f].ticks, npt));
        CEIL_IP_PUT_U64(o, bytes, sums.fn[f].bytes);
    }
    for (int p = 0; p < MERGED_PEERS; p++) {
        if (!merged[p].key)
            continue;
        ceil_ip_line(o, self);
        CEIL_IP_PUT_PEER_U64(o, peer, merged[p].key - 1);
        CEIL_IP_PUT_U64(o, calls, merged[p].calls);
        CEIL_IP_PUT_U64(o, bytes, merged[p].bytes);
        CEIL_IP_PUT_U64(o, ns, ceil_ip_ticks_ns(merged[p].ticks, npt));
    }
    ceil_ip_line(o, self);
    CEIL_IP_PUT_PEER_STR(o, peer, "other");
    CEIL_IP_PUT_U64(o, calls, sums.other_calls);
    CEIL_IP_PUT_U64(o, bytes, sums.other_bytes);
}

_Static_assert(offsetof(mpi_counters, other_bytes) == offsetof(mpi_sums, other_bytes),
               "mpi_sums must be the head of mpi_counters");

ceil_ip_module ceil_mpi_module = {.name = "mpi", .version = 1, .block_bytes = sizeof(mpi_counters),
                                  .report = mpi_report};
CEIL_IP_MODULE(ceil_mpi_module);
