/* mpi_comm.c - the communicators the program makes, so that the trace and
 * the profile's peer lines name every peer and root by its world rank
 * (mpi.c asks mpi_comm_world_rank for any communicator but MPI_COMM_WORLD,
 * which it translates itself; mpi.h says why one build serves every MPI).
 *
 * Each call that makes a communicator (MPI_Comm_split, _split_type, _dup,
 * _dup_with_info, _create, _create_group, MPI_Intercomm_create,
 * MPI_Intercomm_merge, MPI_Cart_create, MPI_Cart_sub, MPI_Graph_create,
 * MPI_Dist_graph_create, MPI_Dist_graph_create_adjacent, MPI 4's
 * MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups) is passed through,
 * and its new communicator's ranks translated once to world ranks
 * (PMPI_Comm_group, or PMPI_Comm_remote_group on an intercommunicator, whose
 * point-to-point peers and roots are remote ranks; then
 * PMPI_Group_translate_ranks against MPI_COMM_WORLD's group), noted in
 * the table below. MPI_Comm_free and MPI_Comm_disconnect
 * forget it. These calls are not counted (they move no data; their time is
 * the program's): they are not in calls.def.
 *
 * MPI_Comm_idup and _idup_with_info take their parent's members (note_dup:
 * the new communicator may not be asked before its request completes).
 * Not seen: the duplicate of an intercommunicator by idup, dynamic
 * processes (ranks outside MPI_COMM_WORLD translate to -1), and, under Open
 * MPI, communicators made and freed from Fortran (its Fortran library calls
 * the PMPI functions itself).
 */
#include <stdlib.h>
#include "mpi.h"

/* ---- the table -------------------------------------------------------------------
 * Peers and roots are named by world rank on every communicator the program made (noted at its
 * creation, below): a table of MPI_COMMS entries keyed by the handle, each
 * with its ranks' world ranks (the remote group's on an intercommunicator, whose point-to-point
 * peers and roots name remote ranks), allocated at the creation, freed at MPI_Comm_free. A send
 * reads it without a lock or an allocation (mpi.c compares MPI_COMM_WORLD first, with no lookup): the
 * handle hashed into the table (open addressing, linear probing: an empty slot ends a search, a
 * freed one is a tombstone the next creation on its path reuses). Past MPI_COMMS live ones a
 * communicator's peers are unknown (-1, and peer=other in the record), counted in comms_lost, never
 * a wrong rank. */
#define MPI_COMMS 256                /* a power of two */
#define COMM_TOMB ((uintptr_t)1)     /* freed (no handle is 1 in any ABI here) */
#define COMM_CLAIM ((uintptr_t)2)    /* being filled */
static struct { uintptr_t key; int32_t n; int32_t *world; uint32_t id; } comms[MPI_COMMS];
static int comms_live;
static uint64_t comms_lost;
static mpi_h world, comm_self, comm_null;
static int world_known, world_rank, world_size;

static unsigned comm_slot(uintptr_t key) { return (unsigned)(((uint64_t)key * 0x9E3779B97F4A7C15u) >> 56); }
_Static_assert(MPI_COMMS == 256, "comm_slot takes 8 bits");

/* The entry of a handle; -1 none. */
static int comm_find(uintptr_t key)
{
    for (unsigned i = 0, h = comm_slot(key); i < MPI_COMMS; i++, h = (h + 1) % MPI_COMMS) {
        const uintptr_t k = __atomic_load_n(&comms[h].key, __ATOMIC_ACQUIRE);
        if (k == key)
            return (int)h;
        if (k == 0)
            return -1;
    }
    return -1;
}

int32_t mpi_comm_world_rank(mpi_h comm, int rank)
{
    if (comm == comm_self)
        return rank == 0 ? world_rank : -1;
    if (!__atomic_load_n(&comms_live, __ATOMIC_ACQUIRE))
        return -1;
    const int e = comm_find(comm);
    return e >= 0 && rank < comms[e].n ? comms[e].world[rank] : -1;
}

uint32_t mpi_comm_id(mpi_h comm)
{
    if (comm == world)
        return 0;
    if (!__atomic_load_n(&comms_live, __ATOMIC_ACQUIRE))
        return MPI_COMM_ID_UNKNOWN;
    const int e = comm_find(comm);
    return e >= 0 ? comms[e].id : MPI_COMM_ID_UNKNOWN;
}

uint64_t mpi_comms_lost(void) { return __atomic_load_n(&comms_lost, __ATOMIC_RELAXED); }

/* ---- the communicator's id in the trace ------------------------------------------------------
 * The same number in every member's events, so that a send and its receive pair on their
 * communicator (two communicators may carry the same ranks and tag at once): FNV-1a of its
 * members' world ranks (on an intercommunicator, the local group's hash XOR the remote group's:
 * the same from both sides), then of how many communicators of those members this process made
 * before. Members make the communicators they share in one order (MPI's collective creation), so
 * the count agrees; a hash that collides shares a count, still the same on every member. */
#define MEMBER_SETS 256
static struct { uint64_t hash; uint32_t made; } member_sets[MEMBER_SETS];

static uint64_t fnv_ranks(uint64_t h, const int32_t *r, int n)
{
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 4; b++)
            h = (h ^ (((uint32_t)r[i] >> (8 * b)) & 0xffu)) * UINT64_C(0x100000001b3);
    return h;
}

static uint32_t comm_id_of(uint64_t members)
{
    uint32_t made = 0;
    for (unsigned i = 0, h = (unsigned)(members % MEMBER_SETS); i < MEMBER_SETS; i++, h = (h + 1) % MEMBER_SETS) {
        if (member_sets[h].made == 0 || member_sets[h].hash == members) {
            member_sets[h].hash = members;
            made = ++member_sets[h].made;
            break;
        }
    }
    uint64_t h = members;
    for (int b = 0; b < 4; b++)
        h = (h ^ ((made >> (8 * b)) & 0xffu)) * UINT64_C(0x100000001b3);
    const uint32_t id = (uint32_t)(h >> 32) ^ (uint32_t)h;
    return id == 0 || id == MPI_COMM_ID_UNKNOWN ? 1 : id;     /* 0: MPI_COMM_WORLD */
}

/* Whether the table may hold this handle: the MPI identified, and not MPI_COMM_NULL, MPI_COMM_WORLD nor
 * MPI_COMM_SELF, which need none. */
static int trackable(mpi_h comm)
{
    return world_known && comm > COMM_CLAIM && comm != comm_null && comm != world && comm != comm_self;
}

static void comm_note(mpi_h comm, int32_t *ranks, int n, uint32_t id)
{
    /* a handle already here (freed where it went unseen, from Fortran) names its new ranks now */
    const int e = comm_find(comm);
    if (e >= 0) {
        int32_t *old = comms[e].world;
        comms[e].n = n, comms[e].world = ranks, comms[e].id = id;
        free(old);
        return;
    }
    for (unsigned i = 0, h = comm_slot(comm); ranks && i < MPI_COMMS; i++, h = (h + 1) % MPI_COMMS) {
        uintptr_t k = __atomic_load_n(&comms[h].key, __ATOMIC_RELAXED);
        if ((k == 0 || k == COMM_TOMB) &&
            __atomic_compare_exchange_n(&comms[h].key, &k, COMM_CLAIM, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            comms[h].n = n, comms[h].world = ranks, comms[h].id = id;
            __atomic_store_n(&comms[h].key, comm, __ATOMIC_RELEASE);
            __atomic_add_fetch(&comms_live, 1, __ATOMIC_ACQ_REL);
            return;
        }
    }
    free(ranks);
    __atomic_add_fetch(&comms_lost, 1, __ATOMIC_RELAXED);
}

static void comm_forget(mpi_h comm)
{
    const int e = comm > COMM_CLAIM ? comm_find(comm) : -1;
    if (e < 0)
        return;
    int32_t *old = comms[e].world;
    comms[e].world = NULL, comms[e].n = 0;
    __atomic_store_n(&comms[e].key, COMM_TOMB, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&comms_live, 1, __ATOMIC_ACQ_REL);
    free(old);
}

typedef int (*comm_group_fn)(mpi_h, uintptr_t *);
typedef int (*group_size_fn)(mpi_h, int *);
typedef int (*group_translate_fn)(mpi_h, int, const int *, mpi_h, int *);
typedef int (*group_free_fn)(uintptr_t *);
typedef int (*comm_int_fn)(mpi_h, int *);
static comm_group_fn comm_group, remote_group;
static group_size_fn group_size;
static group_translate_fn group_translate;
static group_free_fn group_free;
static comm_int_fn test_inter;

void mpi_comm_started(const void *caller, mpi_h world_, mpi_h self_, mpi_h null_, int rank_, int size_)
{
    world = world_, comm_self = self_, comm_null = null_, world_rank = rank_, world_size = size_;
    comm_group = (comm_group_fn)ceil_ip_lookup("PMPI_Comm_group", caller);
    remote_group = (comm_group_fn)ceil_ip_lookup("PMPI_Comm_remote_group", caller);
    group_size = (group_size_fn)ceil_ip_lookup("PMPI_Group_size", caller);
    group_translate = (group_translate_fn)ceil_ip_lookup("PMPI_Group_translate_ranks", caller);
    group_free = (group_free_fn)ceil_ip_lookup("PMPI_Group_free", caller);
    test_inter = (comm_int_fn)ceil_ip_lookup("PMPI_Comm_test_inter", caller);
    __atomic_store_n(&world_known, 1, __ATOMIC_RELEASE);
}

/* The hash of an intercommunicator's local group's world ranks (0 where they cannot be had). */
static uint64_t local_members(mpi_h comm, uintptr_t wg)
{
    uintptr_t g = 0;
    int n = 0;
    uint64_t h = 0;
    if (comm_group(comm, &g) != 0)
        return 0;
    int32_t *r = NULL;
    int *in = NULL;
    if (group_size(g, &n) == 0 && n > 0 && (r = malloc((size_t)n * sizeof *r)) &&
        (in = malloc((size_t)n * sizeof *in))) {
        for (int i = 0; i < n; i++)
            in[i] = i;
        if (group_translate(g, n, in, wg, r) == 0)
            h = fnv_ranks(UINT64_C(0xcbf29ce484222325), r, n);
    }
    free(r);
    free(in);
    group_free(&g);
    return h;
}

/* The trace's line of a communicator's members, "ID N R0 R1 ...\n" (its id, then its ranks' world ranks in
 * rank order), appended to DIR/trace-<pid>-<start_ns>.comms where a trace is recorded, so that the OTF2
 * archive defines its group and names its partners by their rank in it. Not for an intercommunicator:
 * its members seen from each side differ. */
static void trace_members(uint32_t id, const int32_t *ranks, int n)
{
    if (!ceil_ip_trace_dir_())
        return;
    const size_t cap = (size_t)n * 12 + 32;
    char *line = malloc(cap), *p = line;
    if (!line)
        return;
    char t[16];
    int64_t v[2] = {id, n};
    for (int i = -2; i < n; i++) {
        int64_t x = i < 0 ? v[i + 2] : ranks[i];
        int k = 0;
        const int neg = x < 0;
        if (neg)
            x = -x;
        do t[k++] = (char)('0' + x % 10); while ((x /= 10) && k < 15);
        if (neg)
            *p++ = '-';
        while (k)
            *p++ = t[--k];
        *p++ = i == n - 1 ? '\n' : ' ';
    }
    ceil_ip_trace_line_(".comms", line, (size_t)(p - line));
    free(line);
}

/* The communicator the program's MPI_Comm * now holds: its ranks (the remote group's on an
 * intercommunicator) as world ranks, into mpi.c's table. A group handle is written as an int (MPICH)
 * or a pointer: read from a zeroed uintptr_t, which is either on the little-endian ABIs here. */
static __thread unsigned notes_;     /* communicators this thread was given to note (mpi_comm_notes) */

static void note_handle(mpi_h comm)
{
    int inter = 0, n = 0;
    notes_++;
    if (!ceil_ip_active() || !trackable(comm))
        return;
    if (!comm_group || !remote_group || !group_size || !group_translate || !group_free || !test_inter ||
        test_inter(comm, &inter) != 0)
        return;
    uintptr_t g = 0, wg = 0;
    if ((inter ? remote_group(comm, &g) : comm_group(comm, &g)) != 0)
        return;
    int32_t *ranks = NULL;
    int *in = NULL;
    if (comm_group(world, &wg) == 0 && group_size(g, &n) == 0 && n > 0 &&
        (ranks = malloc((size_t)n * sizeof *ranks)) && (in = malloc((size_t)n * sizeof *in))) {
        for (int i = 0; i < n; i++)
            in[i] = i;
        if (group_translate(g, n, in, wg, ranks) == 0) {
            for (int i = 0; i < n; i++)
                ranks[i] = ranks[i] >= 0 && ranks[i] < world_size ? ranks[i] : -1;     /* MPI_UNDEFINED */
            uint64_t members = fnv_ranks(UINT64_C(0xcbf29ce484222325), ranks, n);
            if (inter)
                members ^= local_members(comm, wg);
            const uint32_t id = comm_id_of(members);
            if (!inter)
                trace_members(id, ranks, n);
            comm_note(comm, ranks, n, id);
            ranks = NULL;
        }
    }
    free(ranks);
    free(in);
    group_free(&g);
    if (wg)
        group_free(&wg);
}

static void note(const void *newcomm)
{
    if (newcomm && mpi_handle_bytes())
        note_handle(mpi_handle_at(newcomm));
}

/* For the Fortran wrappers (mpi_fortran.c): a communicator the Fortran library made without the C
 * call (Open MPI's goes to PMPI itself), by its C handle; the count tells whether the C wrapper did. */
unsigned mpi_comm_notes(void) { return notes_; }
void mpi_comm_note(mpi_h comm) { note_handle(comm); }
void mpi_comm_forget(mpi_h comm) { comm_forget(comm); }

/* Each wrapper: the PMPI call, then its new communicator (at `out`, an MPI_Comm *) noted. */
#define COMM_MAKER(fn, types, named, args, out)                                                    \
    PMPI_DECL(fn, types);                                                                          \
    MPI_EXPORT(fn, named)                                                                          \
    {                                                                                              \
        const int rc = PMPI_REAL(fn) args;                                                         \
        if (rc == 0)                                                                               \
            note(out);                                                                             \
        return rc;                                                                                 \
    }
COMM_MAKER(MPI_Comm_split, (mpi_h, int, int, void *), (mpi_h comm, int color, int key, void *newcomm),
           (comm, color, key, newcomm), newcomm)
COMM_MAKER(MPI_Comm_split_type, (mpi_h, int, int, mpi_h, void *),
           (mpi_h comm, int type, int key, mpi_h info, void *newcomm), (comm, type, key, info, newcomm), newcomm)
COMM_MAKER(MPI_Comm_dup, (mpi_h, void *), (mpi_h comm, void *newcomm), (comm, newcomm), newcomm)
COMM_MAKER(MPI_Comm_dup_with_info, (mpi_h, mpi_h, void *), (mpi_h comm, mpi_h info, void *newcomm),
           (comm, info, newcomm), newcomm)
COMM_MAKER(MPI_Comm_create, (mpi_h, mpi_h, void *), (mpi_h comm, mpi_h group, void *newcomm),
           (comm, group, newcomm), newcomm)
COMM_MAKER(MPI_Comm_create_group, (mpi_h, mpi_h, int, void *), (mpi_h comm, mpi_h group, int tag, void *newcomm),
           (comm, group, tag, newcomm), newcomm)
COMM_MAKER(MPI_Intercomm_create, (mpi_h, int, mpi_h, int, int, void *),
           (mpi_h local, int local_leader, mpi_h peer, int remote_leader, int tag, void *newcomm),
           (local, local_leader, peer, remote_leader, tag, newcomm), newcomm)
COMM_MAKER(MPI_Intercomm_merge, (mpi_h, int, void *), (mpi_h inter, int high, void *newcomm),
           (inter, high, newcomm), newcomm)
COMM_MAKER(MPI_Cart_create, (mpi_h, int, const int *, const int *, int, void *),
           (mpi_h comm, int ndims, const int *dims, const int *periods, int reorder, void *newcomm),
           (comm, ndims, dims, periods, reorder, newcomm), newcomm)
COMM_MAKER(MPI_Cart_sub, (mpi_h, const int *, void *), (mpi_h comm, const int *remain, void *newcomm),
           (comm, remain, newcomm), newcomm)
COMM_MAKER(MPI_Graph_create, (mpi_h, int, const int *, const int *, int, void *),
           (mpi_h comm, int nnodes, const int *index, const int *edges, int reorder, void *newcomm),
           (comm, nnodes, index, edges, reorder, newcomm), newcomm)
COMM_MAKER(MPI_Dist_graph_create, (mpi_h, int, const int *, const int *, const int *, const int *, mpi_h, int, void *),
           (mpi_h comm, int n, const int *sources, const int *degrees, const int *dests, const int *weights,
            mpi_h info, int reorder, void *newcomm),
           (comm, n, sources, degrees, dests, weights, info, reorder, newcomm), newcomm)
COMM_MAKER(MPI_Dist_graph_create_adjacent,
           (mpi_h, int, const int *, const int *, int, const int *, const int *, mpi_h, int, void *),
           (mpi_h comm, int indegree, const int *sources, const int *sweights, int outdegree, const int *dests,
            const int *dweights, mpi_h info, int reorder, void *newcomm),
           (comm, indegree, sources, sweights, outdegree, dests, dweights, info, reorder, newcomm), newcomm)

/* MPI 4's communicators from groups (no parent communicator): noted as the others are. */
COMM_MAKER(MPI_Comm_create_from_group, (mpi_h, const char *, mpi_h, mpi_h, void *),
           (mpi_h group, const char *tag, mpi_h info, mpi_h errh, void *newcomm), (group, tag, info, errh, newcomm),
           newcomm)
COMM_MAKER(MPI_Intercomm_create_from_groups, (mpi_h, int, mpi_h, int, const char *, mpi_h, mpi_h, void *),
           (mpi_h local, int local_leader, mpi_h remote, int remote_leader, const char *tag, mpi_h info, mpi_h errh,
            void *newcomm),
           (local, local_leader, remote, remote_leader, tag, info, errh, newcomm), newcomm)

/* A non-blocking duplicate: its communicator may not be asked anything before its request completes,
 * but its members are its parent's, known now (MPI_COMM_WORLD's, MPI_COMM_SELF's, or the table's), and
 * its place among the communicators of those members is now (a collective call, in every member's
 * order). Its handle is in the program's MPI_Comm at return (MPICH and Open MPI). An intercommunicator's
 * duplicate, or a parent the table does not hold, stays unknown. */
static void note_dup_handle(mpi_h parent, mpi_h comm)
{
    int inter = 0, n = 0, e = -1;
    notes_++;
    if (!ceil_ip_active() || !test_inter)
        return;
    if (!trackable(comm) || (parent != world && parent != comm_self && (test_inter(parent, &inter) != 0 || inter)))
        return;
    if (parent == world)
        n = world_size;
    else if (parent == comm_self)
        n = 1;
    else if ((e = comm_find(parent)) >= 0)
        n = comms[e].n;
    int32_t *ranks = n > 0 ? malloc((size_t)n * sizeof *ranks) : NULL;
    if (!ranks)
        return;
    for (int i = 0; i < n; i++)
        ranks[i] = parent == world ? i : parent == comm_self ? world_rank : comms[e].world[i];
    const uint32_t id = comm_id_of(fnv_ranks(UINT64_C(0xcbf29ce484222325), ranks, n));
    trace_members(id, ranks, n);
    comm_note(comm, ranks, n, id);
}

static void note_dup(mpi_h parent, const void *newcomm)
{
    if (newcomm && mpi_handle_bytes())
        note_dup_handle(parent, mpi_handle_at(newcomm));
}

void mpi_comm_note_dup(mpi_h parent, mpi_h comm) { note_dup_handle(parent, comm); }

PMPI_DECL(MPI_Comm_idup, (mpi_h, void *, void *));
MPI_EXPORT(MPI_Comm_idup, (mpi_h comm, void *newcomm, void *request))
{
    const int rc = PMPI_REAL(MPI_Comm_idup)(comm, newcomm, request);
    if (rc == 0)
        note_dup(comm, newcomm);
    return rc;
}

PMPI_DECL(MPI_Comm_idup_with_info, (mpi_h, mpi_h, void *, void *));
MPI_EXPORT(MPI_Comm_idup_with_info, (mpi_h comm, mpi_h info, void *newcomm, void *request))
{
    const int rc = PMPI_REAL(MPI_Comm_idup_with_info)(comm, info, newcomm, request);
    if (rc == 0)
        note_dup(comm, newcomm);
    return rc;
}

/* Forgotten whatever the outcome (the handle is the program's no more once it asked). */
#define COMM_FREER(fn)                                                                             \
    PMPI_DECL(fn, (void *));                                                                       \
    MPI_EXPORT(fn, (void *comm))                                                                   \
    {                                                                                              \
        if (comm && mpi_handle_bytes())                                                            \
            comm_forget(mpi_handle_at(comm));                                                  \
        return PMPI_REAL(fn)(comm);                                                                \
    }
COMM_FREER(MPI_Comm_free)
COMM_FREER(MPI_Comm_disconnect)
