/*
 * otf2.c - the OTF2 archive's writer (otf2.h): libotf2 opened and its functions resolved, the
 * archive opened with its callbacks, the definitions, the close; the rows are otf2_events.c's.
 *
 * libotf2 is opened with dlopen at the path Python found (core/otf2lib.py) and its functions
 * resolved once (O2_FUNCS, otf2_abi.h); every record is one call into it. OTF2 buffers each
 * location's records in chunks and writes them out when it can get no more (the allocator below
 * gives a buffer CHUNKS_PER_BUFFER, and the pre-flush callback says yes to every flush), so memory
 * is bounded whatever the number of events.
 */
#define _GNU_SOURCE
#include "otf2_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------ */

static o2_err on_error(void *user, const char *file, uint64_t line, const char *fn, o2_err code, const char *fmt,
                       va_list va)
{
    ceil_otf2_writer *w = user;
    (void)file, (void)line, (void)fn;
    if (w && fmt && !w->msg[0])
        vsnprintf(w->msg, sizeof w->msg, fmt, va);
    return code;
}

int o2_lib_error(ceil_otf2_writer *w, o2_err code, const char *what)
{
    if (!w->err) {
        char said[sizeof w->msg + 256];
        snprintf(said, sizeof said, "%s: %s (%s)%s%.400s", what, w->f.OTF2_Error_GetName(code),
                 w->f.OTF2_Error_GetDescription(code), w->msg[0] ? ": " : "", w->msg);
        memcpy(w->msg, said, sizeof w->msg - 1);       /* cut to the buffer: the start says what failed */
        w->msg[sizeof w->msg - 1] = '\0';
        w->err = -(CEIL_OTF2_LIB_ERROR + (code < 0 ? -code : code));
    }
    return w->err;
}


/* ---- maps: uint64 keys (never 0) to int64 values, open addressing ------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int64_t o2_map_get(const o2_map *m, uint64_t key)
{
    if (!m->cap)
        return -1;
    for (uint64_t i = mix(key) & (uint64_t)(m->cap - 1);; i = (i + 1) & (uint64_t)(m->cap - 1)) {
        if (m->keys[i] == key)
            return m->vals[i];
        if (!m->keys[i])
            return -1;
    }
}

int o2_map_put(o2_map *m, uint64_t key, int64_t val)
{
    if (2 * (m->count + 1) > m->cap) {
        o2_map n = {0};
        n.cap = m->cap ? 2 * m->cap : 64;
        n.keys = calloc((size_t)n.cap, sizeof *n.keys);
        n.vals = calloc((size_t)n.cap, sizeof *n.vals);
        if (!n.keys || !n.vals) {
            free(n.keys);
            free(n.vals);
            return -ENOMEM;
        }
        for (int64_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                o2_map_put(&n, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = n;
    }
    uint64_t i = mix(key) & (uint64_t)(m->cap - 1);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (uint64_t)(m->cap - 1);
    if (!m->keys[i])
        m->count++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void o2_map_free(o2_map *m)
{
    free(m->keys);
    free(m->vals);
}

int o2_grow(void **p, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    int64_t n = *cap ? *cap : 8;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * size);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}


/* ---- opening ------------------------------------------------------------------------------ */

static uint8_t flush_always(void *user, uint8_t type, uint64_t loc, void *caller, bool final)
{
    (void)user, (void)type, (void)loc, (void)caller, (void)final;
    return O2_FLUSH;
}

static const o2_flush_callbacks FLUSH_CALLBACKS = {flush_always, NULL};

/* libotf2 keeps a buffer's chunks until it cannot get another (its own allocator never says no, so a
 * whole archive would sit in memory until closed): this one gives each buffer at most CHUNKS_PER_BUFFER
 * chunks, then says no, and libotf2 writes the buffer out and frees its chunks (free_all). */
#define CHUNKS_PER_BUFFER 4
typedef struct {
    int n;
    uint64_t size;
    void *chunk[CHUNKS_PER_BUFFER];
} o2_chunks;

static void *chunk_allocate(void *user, uint8_t type, uint64_t loc, void **per_buffer, uint64_t size)
{
    ceil_otf2_writer *w = user;
    (void)type, (void)loc;
    o2_chunks *c = *per_buffer;
    if (!c && !(c = *per_buffer = calloc(1, sizeof *c)))
        return NULL;
    if (c->n == CHUNKS_PER_BUFFER)
        return NULL;
    void *p = malloc(size);
    if (p) {
        c->chunk[c->n++] = p;
        c->size = size;
        w->held += (int64_t)size;
        if (w->held > w->st.buffer_peak)
            w->st.buffer_peak = w->held;
    }
    return p;
}

static void chunks_free(void *user, uint8_t type, uint64_t loc, void **per_buffer, bool final)
{
    ceil_otf2_writer *w = user;
    (void)type, (void)loc;
    o2_chunks *c = *per_buffer;
    if (!c)
        return;
    for (int i = 0; i < c->n; i++)
        free(c->chunk[i]);
    w->held -= (int64_t)c->size * c->n;
    c->n = 0;
    if (final) {
        free(c);
        *per_buffer = NULL;
    }
}

static const o2_memory_callbacks MEMORY_CALLBACKS = {chunk_allocate, chunks_free};

/* libotf2 opened at path and every function of O2_FUNCS resolved into f; the handle, or NULL with the
 * reason in err. */
static void *resolve(const char *lib, o2_lib *f, char *err, int64_t errlen)
{
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(err, (size_t)errlen, "%s", dlerror());
        return NULL;
    }
#define O2_SYM_(ret, fn, args)                                                                     \
    if (!(*(void **)&f->fn = dlsym(dl, #fn))) {                                                    \
        snprintf(err, (size_t)errlen, "%s has no %s", lib, #fn);                                   \
        dlclose(dl);                                                                               \
        return NULL;                                                                               \
    }
    O2_FUNCS(O2_SYM_)
#undef O2_SYM_
    return dl;
}

int ceil_otf2_check(const char *lib, char *err, int64_t errlen)
{
    o2_lib f;
    void *dl = resolve(lib, &f, err, errlen);
    if (!dl)
        return -1;
    dlclose(dl);
    return 0;
}

ceil_otf2_writer *ceil_otf2_open(const char *lib, const char *dir, const char *name, int64_t chunk_bytes,
                                 int64_t t0_ns, uint32_t region_base, const char *creator, const char *machine,
                                 char *err, int64_t errlen)
{
    ceil_otf2_writer *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, (size_t)errlen, "out of memory");
        return NULL;
    }
    if (!(w->dl = resolve(lib, &w->f, err, errlen))) {
        free(w);
        return NULL;
    }
    w->old_cb = w->f.OTF2_Error_RegisterCallback(on_error, w);
    w->t0 = t0_ns;
    w->region_base = region_base;
    w->st.first_ts = INT64_MAX;
    w->st.last_ts = INT64_MIN;
    w->ar = w->f.OTF2_Archive_Open(dir, name, O2_FILEMODE_WRITE, (uint64_t)chunk_bytes, 4 << 20, O2_SUBSTRATE_POSIX,
                                   O2_COMPRESSION_NONE);
    int rc = 0;
    if (!w->ar)
        rc = o2_lib_error(w, 1, "OTF2_Archive_Open");
    else {
        o2_err e = w->f.OTF2_Archive_SetFlushCallbacks(w->ar, &FLUSH_CALLBACKS, NULL);
        if (!e)
            e = w->f.OTF2_Archive_SetMemoryCallbacks(w->ar, &MEMORY_CALLBACKS, w);
        if (!e)
            e = w->f.OTF2_Archive_SetSerialCollectiveCallbacks(w->ar);
        if (!e && creator)
            e = w->f.OTF2_Archive_SetCreator(w->ar, creator);
        if (!e && machine)
            e = w->f.OTF2_Archive_SetMachineName(w->ar, machine);
        if (!e)
            e = w->f.OTF2_Archive_OpenEvtFiles(w->ar);
        if (e)
            rc = o2_lib_error(w, e, "opening the archive");
    }
    if (rc) {
        snprintf(err, (size_t)errlen, "%s", w->msg);
        ceil_otf2_free(w);
        return NULL;
    }
    return w;
}

int ceil_otf2_calls_set(ceil_otf2_writer *w, const ceil_otf2_calls *c)
{
    uint8_t *t = malloc((size_t)(4 * (c->ncalls ? c->ncalls : 1)));
    if (!t)
        return -ENOMEM;
    free(w->p2p);
    w->p2p = t;
    w->collop = t + c->ncalls;
    w->iomode = t + 2 * c->ncalls;
    w->iopar = t + 3 * c->ncalls;
    memcpy(w->p2p, c->p2p, (size_t)c->ncalls);
    memcpy(w->collop, c->collop, (size_t)c->ncalls);
    memcpy(w->iomode, c->iomode, (size_t)c->ncalls);
    memcpy(w->iopar, c->iopar, (size_t)c->ncalls);
    w->ncalls = c->ncalls;
    return 0;
}

int ceil_otf2_comm(ceil_otf2_writer *w, int64_t index, const int32_t *xlat, int64_t n)
{
    if (index < 0)
        return -EINVAL;
    if (index >= w->ncomms) {
        if (o2_grow((void **)&w->comms, &w->ccap, index + 1, sizeof *w->comms))
            return -ENOMEM;
        memset(&w->comms[w->ncomms], 0, sizeof *w->comms * (size_t)(index + 1 - w->ncomms));
        w->ncomms = index + 1;
    }
    int32_t *x = NULL;
    if (xlat) {
        x = malloc(sizeof *x * (size_t)(n > 0 ? n : 1));
        if (!x)
            return -ENOMEM;
        memcpy(x, xlat, sizeof *x * (size_t)(n > 0 ? n : 0));
    }
    free(w->comms[index].xlat);
    w->comms[index].xlat = x;
    w->comms[index].n = xlat ? n : 0;
    w->comms[index].defined = 1;
    return 0;
}

/* ---- definitions -------------------------------------------------------------------------- */

#define U32(i) ((uint32_t)a[i])
#define U8(i) ((uint8_t)a[i])

int ceil_otf2_def(ceil_otf2_writer *w, int what, const int64_t *a, int64_t na, const char *s,
                  const uint64_t *members, int64_t nmembers)
{
    static const int8_t nargs[] = {
        [CEIL_OTF2_DEF_CLOCK] = 4, [CEIL_OTF2_DEF_PARADIGM] = 3, [CEIL_OTF2_DEF_STRING] = 1,
        [CEIL_OTF2_DEF_NODE] = 4, [CEIL_OTF2_DEF_LOCATION_GROUP] = 5, [CEIL_OTF2_DEF_LOCATION] = 4,
        [CEIL_OTF2_DEF_REGION] = 10, [CEIL_OTF2_DEF_GROUP] = 5, [CEIL_OTF2_DEF_COMM] = 5,
        [CEIL_OTF2_DEF_IO_PARADIGM] = 5, [CEIL_OTF2_DEF_IO_FILE] = 3, [CEIL_OTF2_DEF_IO_HANDLE] = 7,
        [CEIL_OTF2_DEF_METRIC_MEMBER] = 9, [CEIL_OTF2_DEF_METRIC_CLASS] = 3, [CEIL_OTF2_DEF_METRIC_INSTANCE] = 5,
        [CEIL_OTF2_DEF_DESCRIPTION] = 0,
    };
    if (w->err)
        return w->err;
    if (!w->finished || !w->ar || what < 0 || what > CEIL_OTF2_DEF_DESCRIPTION || na != nargs[what])
        return -EINVAL;
    if (what == CEIL_OTF2_DEF_DESCRIPTION) {
        CK(w, w->f.OTF2_Archive_SetDescription(w->ar, s ? s : ""), "SetDescription");
        return 0;
    }
    if (!w->defs && !(w->defs = w->f.OTF2_Archive_GetGlobalDefWriter(w->ar)))
        return o2_lib_error(w, 1, "OTF2_Archive_GetGlobalDefWriter");
    o2_def_writer *d = w->defs;
    switch (what) {
    case CEIL_OTF2_DEF_CLOCK:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteClockProperties(d, (uint64_t)a[0], (uint64_t)a[1], (uint64_t)a[2],
                                                               (uint64_t)a[3]), "WriteClockProperties");
        break;
    case CEIL_OTF2_DEF_PARADIGM:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteParadigm(d, U8(0), U32(1), U8(2)), "WriteParadigm");
        break;
    case CEIL_OTF2_DEF_STRING:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteString(d, U32(0), s ? s : ""), "WriteString");
        break;
    case CEIL_OTF2_DEF_NODE:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteSystemTreeNode(d, U32(0), U32(1), U32(2), U32(3)), "WriteSystemTreeNode");
        break;
    case CEIL_OTF2_DEF_LOCATION_GROUP:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteLocationGroup(d, U32(0), U32(1), U8(2), U32(3), U32(4)),
           "WriteLocationGroup");
        break;
    case CEIL_OTF2_DEF_LOCATION: {
        /* a: the location, its name, its type, its group; its number of events: those written on it */
        const int64_t n = ceil_otf2_location_events(w, (uint64_t)a[0]);
        CK(w, w->f.OTF2_GlobalDefWriter_WriteLocation(d, (uint64_t)a[0], U32(1), U8(2), (uint64_t)(n > 0 ? n : 0),
                                                        U32(3)), "WriteLocation");
        break;
    }
    case CEIL_OTF2_DEF_REGION:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteRegion(d, U32(0), U32(1), U32(2), U32(3), U8(4), U8(5), U32(6), U32(7),
                                                      U32(8), U32(9)), "WriteRegion");
        break;
    case CEIL_OTF2_DEF_GROUP:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteGroup(d, U32(0), U32(1), U8(2), U8(3), U32(4), (uint32_t)nmembers, members),
           "WriteGroup");
        break;
    case CEIL_OTF2_DEF_COMM:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteComm(d, U32(0), U32(1), U32(2), U32(3), U32(4)), "WriteComm");
        break;
    case CEIL_OTF2_DEF_IO_PARADIGM:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteIoParadigm(d, U8(0), U32(1), U32(2), U8(3), U32(4), 0, NULL, NULL, NULL),
           "WriteIoParadigm");
        break;
    case CEIL_OTF2_DEF_IO_FILE:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteIoRegularFile(d, U32(0), U32(1), U32(2)), "WriteIoRegularFile");
        break;
    case CEIL_OTF2_DEF_IO_HANDLE:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteIoHandle(d, U32(0), U32(1), U32(2), U8(3), U32(4), U32(5), U32(6)),
           "WriteIoHandle");
        break;
    case CEIL_OTF2_DEF_METRIC_MEMBER:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteMetricMember(d, U32(0), U32(1), U32(2), U8(3), U8(4), U8(5), U8(6), a[7],
                                                            U32(8)), "WriteMetricMember");
        break;
    case CEIL_OTF2_DEF_METRIC_CLASS: {
        uint32_t refs[255];
        if (nmembers < 1 || nmembers > 255)
            return -EINVAL;
        for (int64_t i = 0; i < nmembers; i++)
            refs[i] = (uint32_t)members[i];
        CK(w, w->f.OTF2_GlobalDefWriter_WriteMetricClass(d, U32(0), (uint8_t)nmembers, refs, U8(1), U8(2)),
           "WriteMetricClass");
        break;
    }
    case CEIL_OTF2_DEF_METRIC_INSTANCE:
        CK(w, w->f.OTF2_GlobalDefWriter_WriteMetricInstance(d, U32(0), U32(1), (uint64_t)a[2], U8(3), (uint64_t)a[4]),
           "WriteMetricInstance");
        break;
    }
    return 0;
}

int ceil_otf2_close(ceil_otf2_writer *w)
{
    if (w->err)
        return w->err;
    if (!w->ar)
        return 0;
    o2_archive *ar = w->ar;
    w->ar = NULL;
    w->defs = NULL;
    CK(w, w->f.OTF2_Archive_Close(ar), "OTF2_Archive_Close");
    return 0;
}

void ceil_otf2_stats_get(const ceil_otf2_writer *w, ceil_otf2_stats *out) { *out = w->st; }

const char *ceil_otf2_message(const ceil_otf2_writer *w) { return w->msg; }

void ceil_otf2_free(ceil_otf2_writer *w)
{
    if (!w)
        return;
    if (w->ar)
        w->f.OTF2_Archive_Close(w->ar);
    if (w->f.OTF2_Error_RegisterCallback)
        w->f.OTF2_Error_RegisterCallback(w->old_cb, NULL);
    for (int64_t i = 0; i < w->nthreads; i++) {
        free(w->threads[i].stack);
        free(w->threads[i].pend);
    }
    free(w->threads);
    free(w->mlocs);
    o2_map_free(&w->threads_by_key);
    o2_map_free(&w->thread_by_location);
    o2_map_free(&w->metric_by_loc);
    o2_map_free(&w->handle_by_key);
    free(w->h_group);
    free(w->h_file);
    free(w->h_par);
    free(w->region_of);
    free(w->region_src);
    free(w->p2p);
    for (int64_t i = 0; i < w->ncomms; i++)
        free(w->comms[i].xlat);
    free(w->comms);
    if (w->dl)
        dlclose(w->dl);
    free(w);
}
