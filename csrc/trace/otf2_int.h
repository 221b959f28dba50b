/*
 * otf2_int.h - what the OTF2 writer's files share (otf2.c: opening, definitions, closing;
 * otf2_events.c: the rows): the writer's struct, libotf2's resolved functions, small maps.
 * Private to csrc/trace/.
 */
#ifndef CEILING_OTF2_INT_H
#define CEILING_OTF2_INT_H

#include "otf2.h"
#include "otf2_abi.h"

#include <stddef.h>

/* results/events.py's kinds */
enum { K_IO_FIRST = 1, K_IO_LAST = 4, K_MPI_FIRST = 5, K_MPI_LAST = 8, K_REGION = 9 };
enum { W_PLAIN, W_IO, W_RECV, W_COLL };     /* what closes an open row before its Leave */
#define NO_OP 255                           /* the tables' "none" */
#define MAX_FILE (1 << 23)                  /* file indexes a handle key holds */

typedef struct {
#define O2_FN_(ret, name, args) ret(*name) args;
    O2_FUNCS(O2_FN_)
#undef O2_FN_
} o2_lib;

typedef struct {
    int64_t ts, dur, nbytes;
    int32_t file, peer, tag, comm;
    uint16_t call;
    uint8_t kind;
} o2_row;

typedef struct {
    int64_t end;
    uint64_t bytes, match;
    uint32_t region, handle, comm, peer, tag;
    uint8_t what, op;
} o2_open;

typedef struct {
    int32_t pid, tid;
    uint64_t location;
    uint32_t group;
    int located;
    int done;                   /* ceil_otf2_thread_done: its event writer closed, no more rows */
    o2_evt_writer *ew;
    o2_open *stack;
    int64_t depth, scap;
    o2_row *pend;
    int64_t npend, pcap;
    int64_t records;            /* set at ceil_otf2_finish */
    uint64_t match;
    uint64_t hkey;              /* the last I/O handle's key and id: a thread mostly writes one file at a time */
    uint32_t handle;
} o2_thread;

typedef struct {
    uint64_t *keys;
    int64_t *vals;
    int64_t cap, count;
} o2_map;

struct ceil_otf2_writer {
    void *dl;
    o2_lib f;
    o2_archive *ar;
    o2_def_writer *defs;
    o2_error_callback old_cb;
    void *old_cb_data;
    int err;
    char msg[512];
    int64_t t0;
    uint32_t region_base;
    uint8_t *p2p, *collop, *iomode, *iopar;
    int64_t ncalls;
    struct { int32_t *xlat; int64_t n; int defined; } *comms;    /* xlat NULL: its ranks are world ranks */
    int64_t ncomms, ccap;
    o2_map threads_by_key;
    o2_map thread_by_location;  /* location + 1 -> thread index */
    o2_thread *threads;
    int64_t nthreads, tcap;
    o2_map metric_by_loc;
    struct { uint64_t location; o2_evt_writer *ew; int64_t records; } *mlocs;
    int64_t nmlocs, mcap;
    o2_map handle_by_key;
    uint32_t *h_group;
    int32_t *h_file;
    uint8_t *h_par;
    int64_t nhandles, hcap;
    int32_t *region_of;         /* source id (call, or region_base + user region) -> region id, -1 none yet */
    uint32_t *region_src;       /* region id -> source id: ids are dense, in order of first Enter */
    int64_t nsrc, nregions, rcap;
    int finished;
    int64_t held;               /* bytes of libotf2's chunks held now (the allocator's) */
    ceil_otf2_stats st;
};

int o2_lib_error(ceil_otf2_writer *w, o2_err code, const char *what);

/* Return from the calling function with the writer's error when a libotf2 call fails. */
#define CK(w, call, what)                                                                          \
    do {                                                                                           \
        const o2_err rc_ = (call);                                                                 \
        if (rc_ != O2_SUCCESS)                                                                     \
            return o2_lib_error((w), rc_, (what));                                                 \
    } while (0)

/* uint64 keys (never 0) to int64 values, open addressing */
int64_t o2_map_get(const o2_map *m, uint64_t key);
int o2_map_put(o2_map *m, uint64_t key, int64_t val);
void o2_map_free(o2_map *m);
/* *p grown to hold need items of size (doubling), -ENOMEM */
int o2_grow(void **p, int64_t *cap, int64_t need, size_t size);

#endif
