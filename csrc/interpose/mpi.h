/* mpi.h - what the MPI module's files share (mpi.c: the module, its
 * record lines, start-up and end; mpi_p2p.c: point-to-point, completion,
 * persistent and partitioned requests; mpi_coll.c: the collectives;
 * mpi_neighbor.c: the neighbourhood collectives; mpi_rma.c:
 * one-sided communication; mpi_io.c: MPI-IO; mpi_fortran.c: the Fortran
 * names; mpi_gather.c: the records to one rank; mpi_narrow.c: the
 * large-count v-collectives on an MPI without them). Internal to
 * libceiling_interpose.so.
 *
 * One library for every MPI: the module is built without any MPI header.
 * A handle (communicator, datatype, op, request, file, info) is an int in
 * the MPICH ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH) and a pointer in
 * Open MPI's and in the MPI 5 standard ABI; on x86-64 and AArch64 either is
 * passed in a 64-bit register or stack slot, so a wrapper takes every
 * handle as mpi_h (64 bits), hands it unchanged to the PMPI function, and
 * never looks inside it. Communicators are compared with MPI_COMM_WORLD,
 * MPI_COMM_SELF and MPI_COMM_NULL, with the values the library in the
 * process uses (mpi.c: mpi_identify), and with the handles the program's
 * own communicators got (mpi_comm.c), to name peers by world rank. Statuses are opaque too: a wrapper
 * that needs one for the bytes received and was given MPI_STATUS_IGNORE
 * (0 in Open MPI and the standard ABI, 1 in MPICH's) passes a buffer of its
 * own, larger than any library's MPI_Status.
 */
#ifndef CEIL_MPI_H
#define CEIL_MPI_H

#include <stdint.h>
#include "interpose.h"

typedef uintptr_t mpi_h;             /* any MPI handle, passed through unread */
typedef int64_t mpi_aint;            /* MPI_Aint, MPI_Offset: 64 bits in every ABI here */

/* Every wrapped function, with its class (the record's class= word): calls.def's
 * CEIL_IP_MPI_FNS, which says which have a large-count form fn_c. */
#define MPI_FNS(X, C) CEIL_IP_MPI_FNS(X, C)

#define MPI_FN_ENUM(fn, cls) FN_##fn,
#define MPI_FN_ENUM_C(fn, cls) FN_##fn, FN_##fn##_c,
enum mpi_fn { MPI_FNS(MPI_FN_ENUM, MPI_FN_ENUM_C) MPI_FN_COUNT };

typedef int64_t mpi_count;           /* MPI_Count */

#define MPI_CLASS_ENUM(e, name) MC_##e,
enum mpi_class { CEIL_IP_MPI_CLASSES(MPI_CLASS_ENUM) MC_COUNT };

/* The size histograms: blocking point-to-point (a send's bytes, a
 * receive's as received, a sendrecv's larger side), non-blocking posts (a
 * send's bytes, a receive's posted size), blocking collectives (the
 * call's bytes, mpi.c says which), and MPI-IO data calls. */
#define MPI_HIST_ENUM(e, name) MH_##e,
enum mpi_hist { CEIL_IP_MPI_HISTS(MPI_HIST_ENUM) MH_COUNT };

#define MPI_PEERS 24                 /* destinations tracked per thread; more go to peers_other */

typedef struct mpi_fn_counters {
    uint64_t calls, ticks, bytes;
} mpi_fn_counters;

typedef struct mpi_peer {
    uint64_t key;                    /* 1 + the destination's world rank; 0: free */
    uint64_t calls, bytes, ticks;
} mpi_peer;

/* One thread's block. */
typedef struct mpi_counters {
    mpi_fn_counters fn[MPI_FN_COUNT];
    uint64_t hist[MH_COUNT][CEIL_IP_HIST_BUCKETS];
    uint64_t hist_ticks[MH_COUNT][CEIL_IP_HIST_BUCKETS];
    uint64_t hist_bytes[MH_COUNT][CEIL_IP_HIST_BUCKETS];
    uint64_t other_calls, other_bytes;   /* sends whose world rank is unknown, or past MPI_PEERS */
    mpi_peer peers[MPI_PEERS];
} mpi_counters;

_Static_assert(sizeof(mpi_counters) <= CEIL_IP_MAX_BLOCK, "mpi block too large");

extern ceil_ip_module ceil_mpi_module __attribute__((visibility("hidden")));

/* ---- helpers every wrapper uses (mpi.c) ---------------------------------- */

/* The calling thread's block, with its depth raised (ceil_ip_enter), or
 * NULL: pass through. */
static inline mpi_counters *mpi_enter(void)
{
    mpi_counters *c = ceil_ip_block(&ceil_mpi_module);
    if (c)
        ceil_ip_enter();
    return c;
}

/* Bytes of count elements of a datatype (PMPI_Type_size); 0 when unknown. */
uint64_t mpi_bytes(int64_t count, mpi_h type) __attribute__((visibility("hidden")));

/* Bytes a completed receive or read moved, from its status (PMPI_Get_count). */
uint64_t mpi_status_bytes(const void *status, mpi_h type) __attribute__((visibility("hidden")));

/* The status to pass: the caller's, or a buffer of ours when it passed
 * MPI_STATUS_IGNORE (a small integer in every ABI). */
#define MPI_STATUS_BYTES 64
static inline void *mpi_status(void *given, void *own) { return (uintptr_t)given < 4096 ? own : given; }

/* MPI_IN_PLACE: (void *)1 in Open MPI and the standard ABI, (void *)-1 in MPICH's. */
static inline int mpi_in_place(const void *buf) { return buf == (const void *)1 || buf == (const void *)-1; }

/* Count one call (lowers the depth): its time in ticks, its bytes in the
 * histogram `hist` (-1: none). */
void mpi_done(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, uint64_t bytes, int hist)
    __attribute__((visibility("hidden")));
/* The same, for a call whose event needs what only the depth lowered can find (MPI_File_open: its file's
 * record, which ceil_ip_block gives no module while the depth is raised): counted now, the end returned,
 * and its event given after by mpi_event_ended, spanning what mpi_done's would have. */
uint64_t mpi_done_later(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, uint64_t bytes, int hist)
    __attribute__((visibility("hidden")));
void mpi_event_ended(enum mpi_fn fn, uint64_t t1, uint64_t ticks, uint64_t bytes, uint32_t file, int64_t offset)
    __attribute__((visibility("hidden")));

/* The trace: the next mpi_done's event names this peer (a rank of comm, recorded as its world rank:
 * on MPI_COMM_WORLD, MPI_COMM_SELF and every communicator mpi_comm.c tracked; -1 elsewhere) and tag;
 * mpi_ev_status takes them from a completed receive's status (ANY_SOURCE resolved), never reading the
 * MPI's MPI_STATUS_IGNORE (give it mpi_status()'s buffer to learn the source anyway) nor a status before
 * MPI_Init named the MPI. mpi_ev_root: a rooted collective's root, as a world rank the same way (an
 * intercommunicator's MPI_ROOT and MPI_PROC_NULL: -1), and its communicator as mpi_ev_comm does.
 * mpi_ev_comm: a collective's communicator (mpi_comm_id, where a message's goes; tag -1), so that the
 * OTF2 archive's collective records name it. mpi_ev_file: an MPI-IO call's file (files.c's id, 0 none)
 * and byte offset (-1 unknown). interpose.h (ceil_ip_trace_ev) says where each lands. */
void mpi_ev_p2p(mpi_h comm, int peer, int tag) __attribute__((visibility("hidden")));
void mpi_ev_status(mpi_h comm, const void *status) __attribute__((visibility("hidden")));
void mpi_ev_root(mpi_h comm, int root) __attribute__((visibility("hidden")));
/* mpi_ev_comm: a collective's communicator (mpi_ev_root names it too); the wait states pair the
 * members' calls by it (one compare on MPI_COMM_WORLD, a table lookup elsewhere). */
void mpi_ev_comm(mpi_h comm) __attribute__((visibility("hidden")));
void mpi_ev_tag(int tag) __attribute__((visibility("hidden")));      /* after mpi_peer_send, which names the peer */
void mpi_ev_file(uint32_t file, int64_t offset) __attribute__((visibility("hidden")));
/* A rooted collective's bytes expression (MPI_WRAP's `bytes`, evaluated after the call, before
 * mpi_done): names the root for the event, then gives the bytes. */
#define MPI_ROOTED(comm, root, bytes) (mpi_ev_root((comm), (root)), (bytes))
/* An unrooted collective's, or a posted receive's: names the communicator (and the source and tag,
 * MPI_POSTED) for the event, then gives the bytes. */
#define MPI_ON(comm, bytes) (mpi_ev_comm(comm), (bytes))
#define MPI_POSTED(comm, src, tag, bytes) (mpi_ev_p2p((comm), (src), (tag)), (bytes))
/* A posted receive with its request (MPI_Irecv): also kept for the MPI_Wait that completes it. */
#define MPI_POSTED_REQ(comm, src, tag, req, bytes) (mpi_ev_p2p((comm), (src), (tag)), mpi_recv_posted((comm), (req)), \
                                                    (bytes))
/* mpi_recv_posted: a receive posted from a world rank with a tag (after mpi_ev_p2p named it), by its request;
 * mpi_recv_pending: whether *req is one (its communicator in *comm), forgetting it. */
void mpi_recv_posted(mpi_h comm, const void *req) __attribute__((visibility("hidden")));
int mpi_recv_pending(const void *req, mpi_h *comm) __attribute__((visibility("hidden")));

/* Communicators (mpi_comm.c): a rank of comm (not MPI_COMM_WORLD, which mpi.c translates itself) as a
 * world rank, from the table of the communicators the program made (MPI_COMM_SELF's rank 0 too); -1
 * unknown. mpi_comms_lost: those made past the table. mpi_comm_started: MPI_Init identified the MPI
 * (its MPI_COMM_WORLD, MPI_COMM_SELF, MPI_COMM_NULL, this process's world rank and the world's size):
 * resolves mpi_comm.c's PMPI functions. */
int32_t mpi_comm_world_rank(mpi_h comm, int rank) __attribute__((visibility("hidden")));
/* The communicator's id in the trace, the same in every member's events (mpi_comm.c): 0 for
 * MPI_COMM_WORLD, MPI_COMM_ID_UNKNOWN for one not made under the table's eye. */
#define MPI_COMM_ID_UNKNOWN UINT32_MAX
uint32_t mpi_comm_id(mpi_h comm) __attribute__((visibility("hidden")));
uint64_t mpi_comms_lost(void) __attribute__((visibility("hidden")));
/* The Fortran wrappers' (mpi_fortran.c) way in: a communicator made (MPI_Comm_idup's from its parent),
 * one freed, by C handle; mpi_comm_notes counts the communicators this thread was given to note, so
 * that a Fortran call the library passed to the C wrapper is not noted twice. */
unsigned mpi_comm_notes(void) __attribute__((visibility("hidden")));
void mpi_comm_note(mpi_h comm) __attribute__((visibility("hidden")));
void mpi_comm_note_dup(mpi_h parent, mpi_h comm) __attribute__((visibility("hidden")));
void mpi_comm_forget(mpi_h comm) __attribute__((visibility("hidden")));
void mpi_comm_started(const void *caller, mpi_h world, mpi_h self, mpi_h null, int rank, int size)
    __attribute__((visibility("hidden")));
/* mpi_io.c's PMPI file-pointer queries (the trace's byte offsets), resolved at MPI_Init. */
void mpi_io_started(const void *caller) __attribute__((visibility("hidden")));

/* A send of `bytes` to `dest` on `comm` (named by world rank where mpi_ev_p2p can name it; peer=other
 * elsewhere). */
void mpi_peer_send(mpi_counters *c, mpi_h comm, int dest, uint64_t bytes, uint64_t ticks)
    __attribute__((visibility("hidden")));

/* A sendrecv done (lowers the depth): its send to dest, both sides' bytes,
 * the larger in the point-to-point histogram (mpi_p2p.c). */
void mpi_sendrecv_done(mpi_counters *c, enum mpi_fn fn, mpi_h comm, int dest, uint64_t ticks, uint64_t sent,
                       uint64_t got) __attribute__((visibility("hidden")));

/* For the Fortran MPI-IO wrappers (mpi_io.c): a file opened under a
 * Fortran name (`len` characters, blank-padded, no NUL), as MPI_File_open
 * notes its handle (its file's record returned, 0 none); the file's record of a handle; a handle closed. */
uint32_t mpi_io_opened(mpi_h fh, const char *name, size_t len, uint64_t ticks) __attribute__((visibility("hidden")));
uint32_t mpi_io_file(mpi_h fh) __attribute__((visibility("hidden")));
void mpi_io_closed(mpi_h fh) __attribute__((visibility("hidden")));

/* The ranks a v-collective's count arrays cover on comm: its size (PMPI_Comm_size), the
 * remote group's on an intercommunicator; 0 when unknown. */
int mpi_comm_size(mpi_h comm) __attribute__((visibility("hidden")));

/* MPI_COMM_WORLD, MPI_BYTE, this process's rank and the world's size as
 * MPI_Init found them (mpi.c); 1 when the handles are known. */
int mpi_world(mpi_h *comm, mpi_h *byte, int *rank, int *size) __attribute__((visibility("hidden")));

/* mpi_gather.c: whether ceiling asked for every rank's record at one rank
 * (CEILING_INTERPOSE_GATHER=1), and the ceil_ip_checkpoint hand-off that
 * does it (arg: an address inside the program's caller of MPI_Finalize). */
int mpi_gather_wanted(void) __attribute__((visibility("hidden")));
void mpi_gather_records(const char *text, size_t len, void *arg) __attribute__((visibility("hidden")));
/* Wait for one MPI request (`test`: PMPI_Test): 1 done, 0 the test failed, -1 past `deadline`
 * (CLOCK_MONOTONIC ns; the request is left behind). It spins for 20 us (an answer under way comes
 * within a round trip, timed without a system call in between), then yields the CPU, then sleeps
 * 20 us at a time: a waiting rank must not take the CPU from the ranks being served where ranks
 * outnumber cores (4 ranks on 2 cores spinning throughout took 0.11 s in mpi_clock.c's sync, 2 ms
 * so). */
int mpi_wait(int (*test)(void *, int *, void *), uint64_t *req, uint64_t deadline)
    __attribute__((visibility("hidden")));
/* Every rank's `bytes` of `mine` into all (size x bytes) by an MPI_Iallgather on MPI_COMM_WORLD waited for
 * 30 s at most: 1 when every rank came, else 0 (`failed` said on stderr, the request left behind). */
int mpi_agree(const void *mine, void *all, int bytes, void *caller, const char *failed)
    __attribute__((visibility("hidden")));

/* mpi_clock.c, a wrapped launch's trace: this rank's clock against rank 0's, measured once MPI_Init has
 * returned (mpi_clock_started, after the call's event) and as MPI_Finalize starts (mpi_clock_finalizing,
 * before the checkpoint and gather), into SYNC events. Nothing elsewhere. */
void mpi_clock_started(const void *caller) __attribute__((visibility("hidden")));
void mpi_clock_finalizing(const void *caller) __attribute__((visibility("hidden")));
/* MPI_Init's or MPI_Init_thread's count and event (mpi_done), then the clocks' sync with the depth raised
 * (the library's own calls inside it are not the program's). */
void mpi_init_done(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, const void *caller)
    __attribute__((visibility("hidden")));

/* MPI_Init or MPI_Init_thread returned (ok: successfully; provided: the
 * thread level, -1 for MPI_Init): identify the library, MPI_COMM_WORLD and
 * this rank, note the time. MPI_Finalize is about to run: note the time,
 * write the checkpoint (and gather, mpi_gather.c). caller: the program's
 * address the wrapper was called from. Shared by the C and Fortran
 * wrappers (mpi_fortran.c). */
void mpi_started(const void *caller, int ok, int provided) __attribute__((visibility("hidden")));

/* MPI_Init returned while ceiling asked for the job to end
 * (CEILING_INTERPOSE_ABORT=code: a wrapped rank 0 whose ceiling failed before
 * its program, while the other ranks wait in MPI_Init): MPI_Abort on
 * MPI_COMM_WORLD with that code, then _exit. Nothing when not asked. */
void mpi_abort_if_asked(const void *caller) __attribute__((visibility("hidden")));
void mpi_finalizing(const void *caller) __attribute__((visibility("hidden")));
/* MPI_Finalize's own count, around the real call: mpi_finalize_begin counts
 * the call and writes the checkpoint (mpi_finalizing), mpi_finalize_end adds
 * its time (since t0) and leaves. The call is counted before the checkpoint,
 * which is all rank 0 receives of a gathered rank: its MPI_Finalize is there,
 * with no time (the reader says the time is unknown). */
void mpi_finalize_begin(mpi_counters *c, const void *caller) __attribute__((visibility("hidden")));
void mpi_finalize_end(mpi_counters *c, uint64_t t0) __attribute__((visibility("hidden")));

/* For the Fortran wrappers: a Fortran communicator, datatype, file or
 * request as the C handle (PMPI_Comm_f2c, PMPI_Type_f2c, PMPI_File_f2c,
 * PMPI_Request_f2c; 0 when unknown); the bytes a
 * Fortran status says arrived (0 for MPI_STATUS_IGNORE); whether a Fortran
 * buffer is MPI_IN_PLACE (Open MPI's and MPICH's sentinels). */
enum { MPI_F2C_COMM, MPI_F2C_TYPE, MPI_F2C_FILE, MPI_F2C_REQUEST, MPI_F2C_KINDS };
void mpi_fortran_started(const void *caller) __attribute__((visibility("hidden")));   /* resolves them */
/* mpi_neighbor.c's PMPI topology queries, resolved at MPI_Init as mpi.c's helpers are. */
void mpi_neighbor_started(const void *caller) __attribute__((visibility("hidden")));
/* The blocks a neighbourhood collective sends on comm, its out-degree: 2 x
 * the dimensions of a Cartesian topology (MPI_PROC_NULL neighbours
 * included, as the count arrays include them), this rank's neighbours in a
 * graph, a distributed graph's out-degree; 0 when unknown (mpi_neighbor.c). */
int mpi_out_degree(mpi_h comm) __attribute__((visibility("hidden")));
const char *mpi_family(void) __attribute__((visibility("hidden")));   /* mpi.c: openmpi, mpich, mpi-abi, unknown */
mpi_h mpi_f2c(int kind, int handle) __attribute__((visibility("hidden")));
uint64_t mpi_fortran_status_bytes(const int *fstatus, mpi_h type) __attribute__((visibility("hidden")));
int mpi_fortran_in_place(const void *buf) __attribute__((visibility("hidden")));

/* A v-collective's block (mpi_coll.c): counts[this rank in comm] times the
 * type's size, and the mean of the size of comm's counts times it; 0 when unknown. */
uint64_t mpi_own_block(const int *counts, mpi_h type, mpi_h comm) __attribute__((visibility("hidden")));
uint64_t mpi_mean_block(const int *counts, mpi_h type, mpi_h comm) __attribute__((visibility("hidden")));
/* The mean block over n blocks: counts[0 .. n-1] of one type (int and
 * MPI_Count counts), or each of its own type (types: an array of handles,
 * the _w forms); 0 when unknown (mpi_coll.c). */
uint64_t mpi_mean_of_i(const int *counts, mpi_h type, int n) __attribute__((visibility("hidden")));
uint64_t mpi_mean_of_c(const mpi_count *counts, mpi_h type, int n) __attribute__((visibility("hidden")));
uint64_t mpi_mean_of_w_i(const int *counts, const void *types, int n) __attribute__((visibility("hidden")));
uint64_t mpi_mean_of_w_c(const mpi_count *counts, const void *types, int n) __attribute__((visibility("hidden")));

/* A handle the program passed by address (an MPI_Request *, an array of
 * them): its bytes (4 in MPICH's ABI, where handles are ints; a pointer's
 * in Open MPI's and the MPI 5 ABI's; 0 while the MPI is not identified, when
 * no handle may be read) and its value. */
size_t mpi_handle_bytes(void) __attribute__((visibility("hidden")));
uintptr_t mpi_handle_at(const void *p) __attribute__((visibility("hidden")));

/* Persistent requests (mpi_p2p.c), known by their C handle (a key; 0: none).
 * mpi_request_key: the key of a request the program passed by address (0
 * while the MPI is not identified). mpi_persistent_note: at its init, what
 * the request will move at each start: bytes, and a send's peer (dest >= 0
 * on comm; -1: a receive) or, for a persistent collective, coll: the init
 * function's index (FN_MPI_Bcast_init ...; -1: point-to-point). No lock:
 * a table of fixed size, entries claimed with a CAS (past it, starts count
 * no bytes). mpi_persistent_forget: MPI_Request_free. mpi_start_done:
 * MPI_Start (fn FN_MPI_Start, n 1) or MPI_Startall (FN_MPI_Startall)
 * returned (ok: successfully) from starting the n requests at reqs, of which
 * key_of(reqs, i) gives the i-th's key (C handles, or Fortran ones made C):
 * counts the call and each request (lowers the depth). */
typedef uintptr_t (*mpi_key_fn)(const void *reqs, int i);
uintptr_t mpi_request_key(const void *req) __attribute__((visibility("hidden")));
void mpi_persistent_note(uintptr_t key, uint64_t bytes, mpi_h comm, int dest, int coll)
    __attribute__((visibility("hidden")));
void mpi_persistent_forget(uintptr_t key) __attribute__((visibility("hidden")));
void mpi_start_done(mpi_counters *c, enum mpi_fn fn, uint64_t ticks, int ok, int n, const void *reqs,
                    mpi_key_fn key_of) __attribute__((visibility("hidden")));

/* This process's rank in comm (PMPI_Comm_rank); -1 when unknown. */
int mpi_comm_rank(mpi_h comm) __attribute__((visibility("hidden")));

/* The caller of the wrapper: where a PMPI function is looked up when
 * RTLD_NEXT does not reach the library (interpose.h, CEIL_REAL_FROM). */
#define PMPI_REAL(fn) CEIL_REAL_FROM(P##fn, __builtin_return_address(0))

/* Declares the PMPI function behind a wrapper, and whether it is the int
 * form standing in for a missing large-count one (PMPI_REAL_S). */
#define PMPI_DECL(fn, params)                                                                      \
    CEIL_IP_REAL_DECL(int, P##fn, params);                                                         \
    static int ceil_ip_narrow_P##fn __attribute__((unused))

/*
 * PMPI_REAL_S(fn): the PMPI function of a wrapper whose counts are scalars
 * (no count or displacement arrays). Where the MPI has no Pfn_c (an MPI 3
 * library; Open MPI 5.0, which has no large-count calls), it is the int form
 * Pfn, called with the same arguments: on x86-64, AArch64 and little-endian
 * POWER an int argument is the low half of the register or stack slot a
 * 64-bit count fills, so that is the int call once each count fits an int,
 * which MPI_COUNT_REFUSED(fn, fits) checks first (MPI_ERR_COUNT otherwise,
 * returned without the error handler; mpi4py's own fallback returns
 * MPI_ERR_ARG through it: either way an exception in mpi4py). A program that tests for the
 * _c call (mpi4py 4's wheels) finds the wrapper on such an MPI and keeps
 * working. Elsewhere the missing function stops the program, as before.
 */
#if defined(__ELF__) && (defined(__x86_64__) || defined(__aarch64__) ||                             \
                         (defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__))
#define MPI_NARROW_ABI 1          /* not Apple's arm64, which packs stack arguments by their size */
#endif
#ifdef MPI_NARROW_ABI
#define PMPI_REAL_S(fn) CEIL_REAL_NARROW(P##fn, __builtin_return_address(0), &ceil_ip_narrow_P##fn)
#else
#define PMPI_REAL_S(fn) PMPI_REAL(fn)
#endif
static inline int mpi_fits(int64_t x) { return x >= INT32_MIN && x <= INT32_MAX; }
#define MPI_FITS(x) mpi_fits(x)
#define MPI_ERR_COUNT_ 2      /* MPI_ERR_COUNT in MPICH's, Open MPI's and the MPI 5 ABI's mpi.h */
#define MPI_COUNT_REFUSED(fn, fits)                                                                \
    (PMPI_REAL_S(fn) != NULL && __atomic_load_n(&ceil_ip_narrow_P##fn, __ATOMIC_RELAXED) && !(fits))

/*
 * MPI_EXPORT(fn, params) { body }: the exported wrapper fn, a plain
 * function. An MPI may lack fn (an MPI 3 library has no MPI 4 large-count
 * or persistent-collective calls; MPICH no MPIX_ ones) while a program tests
 * for it (mpi4py 4's PyPI wheels reference MPI_Send_c and the others weakly
 * and call them when not NULL): it finds the wrapper. A large-count wrapper
 * then calls the int form (PMPI_REAL_S; the blocking v-collectives through
 * mpi_narrow.c), as the program's own fallback would; the others (MPI 4's
 * persistent collectives and partitioned calls on an MPI 3 library, the
 * large-count non-blocking and persistent v-forms) stop the program with a
 * line saying why and what to do (resolve.c). GNU indirect functions that
 * answer NULL where the MPI has no PMPI twin were tried and left: glibc
 * prints "Relink ... for IFUNC symbol" for each one a library relocated
 * before this one binds at load (every reference under -z now, as RHEL's
 * and Fedora's MPICH are built; MPICH's ROMIO and Fortran library call the
 * MPI_ names), and those bindings cannot be answered NULL anyway.
 */
#define MPI_EXPORT(fn, params) CEIL_IP_EXPORT int fn params

/*
 * The usual wrapper: exported fn with parameters `named`, calling its PMPI
 * function with `args`, counting its time and `bytes` (an expression of
 * the parameters, evaluated after the call) into histogram `hist` (-1:
 * none). Declare the PMPI function with PMPI_DECL first.
 */
#define MPI_WRAP(fn, hist, named, args, bytes) MPI_WRAP_GUARDED(fn, hist, named, , PMPI_REAL(fn) args, bytes)

/* The same with a statement first (`guard`) and the PMPI call given whole
 * (`call`, an expression of the parameters). */
#define MPI_WRAP_GUARDED(fn, hist, named, guard, call, bytes)                                      \
    MPI_EXPORT(fn, named)                                                                          \
    {                                                                                              \
        guard mpi_counters *c = mpi_enter();                                                       \
        if (!c)                                                                                    \
            return (call);                                                                         \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = (call);                                                                     \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        mpi_done(c, FN_##fn, ticks, (bytes), (hist));                                              \
        return rc;                                                                                 \
    }

/* MPI_WRAP for a function with scalar counts, `fits` saying they all fit an
 * int (PMPI_REAL_S). */
#define MPI_WRAP_S(fn, hist, named, args, bytes, fits)                                             \
    MPI_WRAP_GUARDED(fn, hist, named, if (MPI_COUNT_REFUSED(fn, fits)) return MPI_ERR_COUNT_;,     \
                     PMPI_REAL_S(fn) args, bytes)

/* MPI_WRAP with the PMPI call given whole. */
#define MPI_WRAP_CALL(fn, hist, named, call, bytes) MPI_WRAP_GUARDED(fn, hist, named, , call, bytes)

/*
 * A persistent collective's init (MPI 4: MPI_Bcast_init, MPI_Neighbor_alltoall_init
 * ...): exported fn with parameters `named` (the request's pointer named
 * req), calling its PMPI function (declared from `types`) with `args`. Not
 * counted, as it moves nothing: `bytes` (an expression of the parameters)
 * is noted against the request, and each start of it counts them as one
 * call of fn (mpi_persistent_note). Its PMPI function is looked up at the
 * first call, as every other: an MPI without it (Open MPI 4.1 has only
 * MPIX_ forms) loads and runs as before, its programs having none to call.
 * Open MPI 4's MPIX_ forms (its pcollreq extension, the MPI 4 calls before
 * MPI 4) are wrapped alike, under their own names.
 */
#define PCOLL(fn, types, named, args, bytes)                                                       \
    PMPI_DECL(fn, types);                                                                          \
    MPI_EXPORT(fn, named)                                                                          \
    {                                                                                              \
        const int rc = PMPI_REAL(fn) args;                                                         \
        if (rc == 0 && ceil_ip_active())                                                           \
            mpi_persistent_note(mpi_request_key(req), (bytes), 0, -1, FN_##fn);                    \
        return rc;                                                                                 \
    }

/* The PMPI call of a blocking v-collective, for its int form (sfx _i) and
 * its large-count one (_c): where the MPI has no Pfn_c, `conv`
 * (mpi_narrow.c) calls the int form with the arrays copied to ints. */
#define MPI_ARGS_(...) __VA_ARGS__
#define MPI_V_CALL_i(fn, conv, args) PMPI_REAL(fn) args
#ifdef MPI_NARROW_ABI
#define MPI_V_CALL_c(fn, conv, args)                                                               \
    (PMPI_REAL_S(fn) && __atomic_load_n(&ceil_ip_narrow_P##fn, __ATOMIC_RELAXED)                   \
         ? conv((void *)PMPI_REAL_S(fn), MPI_ARGS_ args)                                           \
         : PMPI_REAL_S(fn) args)
#else
#define MPI_V_CALL_c(fn, conv, args) PMPI_REAL(fn) args
#endif
int mpi_narrow_gatherv(void *f, const void *sbuf, mpi_count scount, mpi_h stype, void *rbuf, const mpi_count *rcounts,
                       const mpi_aint *displs, mpi_h rtype, int root, mpi_h comm) __attribute__((visibility("hidden")));
int mpi_narrow_scatterv(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *displs, mpi_h stype,
                        void *rbuf, mpi_count rcount, mpi_h rtype, int root, mpi_h comm)
    __attribute__((visibility("hidden")));
int mpi_narrow_allgatherv(void *f, const void *sbuf, mpi_count scount, mpi_h stype, void *rbuf,
                          const mpi_count *rcounts, const mpi_aint *displs, mpi_h rtype, mpi_h comm)
    __attribute__((visibility("hidden")));
int mpi_narrow_alltoallv(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *sdispls, mpi_h stype,
                         void *rbuf, const mpi_count *rcounts, const mpi_aint *rdispls, mpi_h rtype, mpi_h comm)
    __attribute__((visibility("hidden")));
int mpi_narrow_alltoallw(void *f, const void *sbuf, const mpi_count *scounts, const mpi_aint *sdispls,
                         const void *stypes, void *rbuf, const mpi_count *rcounts, const mpi_aint *rdispls,
                         const void *rtypes, mpi_h comm) __attribute__((visibility("hidden")));
int mpi_narrow_reduce_scatter(void *f, const void *sbuf, void *rbuf, const mpi_count *counts, mpi_h type, mpi_h op,
                              mpi_h comm) __attribute__((visibility("hidden")));

/* PCOLL for an init with scalar counts, `fits` saying they all fit an int (PMPI_REAL_S). */
#define PCOLL_S(fn, types, named, args, bytes, fits)                                               \
    PMPI_DECL(fn, types);                                                                          \
    MPI_EXPORT(fn, named)                                                                          \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, fits))                                                           \
            return MPI_ERR_COUNT_;                                                                 \
        const int rc = PMPI_REAL_S(fn) args;                                                       \
        if (rc == 0 && ceil_ip_active())                                                           \
            mpi_persistent_note(mpi_request_key(req), (bytes), 0, -1, FN_##fn);                    \
        return rc;                                                                                 \
    }

#endif /* CEIL_MPI_H */
