/*
 * otf2_events.c - the OTF2 writer's rows (otf2.h says what records each gets): threads given their
 * locations, each thread's rows placed in time order with their Enter/Leave nested, the I/O handles
 * made at their first use, the metric samples. Memory per location: its open rows, the rows that share
 * its latest start (written longest first, as the Perfetto encoder does) and libotf2's chunks.
 */
#include "otf2_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t thread_key(int32_t pid, int32_t tid) { return ((uint64_t)(uint32_t)pid << 32) | (uint32_t)tid; }

int64_t ceil_otf2_threads(ceil_otf2_writer *w, const int32_t *pid, const int32_t *tid, int64_t n, int32_t *out_pid,
                          int32_t *out_tid, int64_t cap)
{
    int64_t got = 0;
    uint64_t last = 0;
    for (int64_t i = 0; i < n && got < cap; i++) {
        const uint64_t key = thread_key(pid[i], tid[i]);
        if (key == last || o2_map_get(&w->threads_by_key, key) >= 0) {
            last = key;
            continue;
        }
        last = key;
        if (o2_grow((void **)&w->threads, &w->tcap, w->nthreads + 1, sizeof *w->threads))
            return -ENOMEM;
        o2_thread *t = &w->threads[w->nthreads];
        memset(t, 0, sizeof *t);
        t->pid = pid[i];
        t->tid = tid[i];
        if (o2_map_put(&w->threads_by_key, key, w->nthreads))
            return -ENOMEM;
        w->nthreads++;
        out_pid[got] = pid[i];
        out_tid[got] = tid[i];
        got++;
    }
    return got;
}

int ceil_otf2_locate(ceil_otf2_writer *w, int32_t pid, int32_t tid, uint64_t location, uint32_t group)
{
    const int64_t i = o2_map_get(&w->threads_by_key, thread_key(pid, tid));
    if (i < 0)
        return -EINVAL;
    o2_thread *t = &w->threads[i];
    t->ew = w->f.OTF2_Archive_GetEvtWriter(w->ar, location);
    if (!t->ew)
        return o2_lib_error(w, 1, "OTF2_Archive_GetEvtWriter");
    t->location = location;
    t->group = group;
    t->located = 1;
    return o2_map_put(&w->thread_by_location, location + 1, i);
}

/* ---- the rows ----------------------------------------------------------------------------- */

static void seen(ceil_otf2_writer *w, int64_t at)
{
    if (at < w->st.first_ts)
        w->st.first_ts = at;
    if (at > w->st.last_ts)
        w->st.last_ts = at;
}

/* The I/O handle of (group, file, paradigm), made at its first use. */
static int64_t handle_of(ceil_otf2_writer *w, o2_thread *t, int32_t file, uint8_t par)
{
    const uint64_t key = ((uint64_t)t->group << 32) | ((uint64_t)file << 8) | par;
    if (key == t->hkey)
        return t->handle;
    int64_t h = o2_map_get(&w->handle_by_key, key);
    if (h < 0) {
        h = w->nhandles;
        if (h == w->hcap) {
            const int64_t cap = w->hcap ? 2 * w->hcap : 64;
            uint32_t *g = realloc(w->h_group, sizeof *g * (size_t)cap);
            if (g)
                w->h_group = g;
            int32_t *f = realloc(w->h_file, sizeof *f * (size_t)cap);
            if (f)
                w->h_file = f;
            uint8_t *p = realloc(w->h_par, (size_t)cap);
            if (p)
                w->h_par = p;
            if (!g || !f || !p)
                return -ENOMEM;
            w->hcap = cap;
        }
        w->h_group[h] = t->group;
        w->h_file[h] = file;
        w->h_par[h] = par;
        if (o2_map_put(&w->handle_by_key, key, h))
            return -ENOMEM;
        w->nhandles++;
    }
    t->hkey = key;
    t->handle = (uint32_t)h;
    return h;
}

/* The rank of world rank `world` in communicator `comm`, -1 none. */
static int64_t rank_in(const ceil_otf2_writer *w, int32_t comm, int32_t world)
{
    if (comm < 0 || comm >= w->ncomms || !w->comms[comm].defined || world < 0)
        return -1;
    if (!w->comms[comm].xlat)
        return world;
    return world < w->comms[comm].n ? w->comms[comm].xlat[world] : -1;
}

static int comm_known(const ceil_otf2_writer *w, int32_t comm)
{
    return comm >= 0 && comm < w->ncomms && w->comms[comm].defined;
}

static int close_row(ceil_otf2_writer *w, o2_thread *t, const o2_open *o)
{
    const uint64_t at = (uint64_t)(w->t0 + o->end);
    switch (o->what) {
    case W_IO:
        CK(w, w->f.OTF2_EvtWriter_IoOperationComplete(t->ew, NULL, at, o->handle, o->bytes, o->match),
           "IoOperationComplete");
        w->st.io_ops++;
        w->st.io_bytes += (int64_t)o->bytes;
        w->st.records++;
        break;
    case W_RECV:
        CK(w, w->f.OTF2_EvtWriter_MpiRecv(t->ew, NULL, at, o->peer, o->comm, o->tag, o->bytes), "MpiRecv");
        w->st.recvs++;
        w->st.records++;
        break;
    case W_COLL:
        CK(w, w->f.OTF2_EvtWriter_MpiCollectiveEnd(t->ew, NULL, at, o->op, o->comm, o->peer, o->bytes, o->bytes),
           "MpiCollectiveEnd");
        w->st.collectives++;
        w->st.records++;
        break;
    }
    CK(w, w->f.OTF2_EvtWriter_Leave(t->ew, NULL, at, o->region), "Leave");
    w->st.records++;
    seen(w, w->t0 + o->end);
    return 0;
}

static int pop_until(ceil_otf2_writer *w, o2_thread *t, int64_t ts)
{
    while (t->depth && t->stack[t->depth - 1].end <= ts) {
        int rc = close_row(w, t, &t->stack[t->depth - 1]);
        if (rc)
            return rc;
        t->depth--;
    }
    return 0;
}

static int place(ceil_otf2_writer *w, o2_thread *t, const o2_row *r)
{
    int rc = pop_until(w, t, r->ts);
    if (rc)
        return rc;
    if (r->dur < 0) {
        w->st.instants++;
        return 0;
    }
    o2_open o;
    memset(&o, 0, sizeof o);
    o.end = r->ts + r->dur;
    if (t->depth && o.end > t->stack[t->depth - 1].end) {
        o.end = t->stack[t->depth - 1].end;
        w->st.clipped++;
    }
    const uint32_t src = r->kind == K_REGION ? w->region_base + r->call : r->call;
    if (w->region_of[src] < 0) {
        if (o2_grow((void **)&w->region_src, &w->rcap, w->nregions + 1, sizeof *w->region_src))
            return -ENOMEM;
        w->region_src[w->nregions] = src;
        w->region_of[src] = (int32_t)w->nregions++;
    }
    o.region = (uint32_t)w->region_of[src];
    const uint64_t at = (uint64_t)(w->t0 + r->ts);
    CK(w, w->f.OTF2_EvtWriter_Enter(t->ew, NULL, at, o.region), "Enter");
    seen(w, w->t0 + r->ts);
    w->st.enters++;
    w->st.records++;
    const int known = r->call < w->ncalls;
    if (known && r->kind >= K_MPI_FIRST && r->kind <= K_MPI_LAST) {
        const uint8_t dir = w->p2p[r->call], op = w->collop[r->call];
        if (dir) {
            const int64_t peer = rank_in(w, r->comm, r->peer);
            if (peer < 0)
                w->st.unpaired++;
            else if (dir == 1) {
                CK(w, w->f.OTF2_EvtWriter_MpiSend(t->ew, NULL, at, (uint32_t)peer, (uint32_t)r->comm, (uint32_t)r->tag,
                                                   (uint64_t)r->nbytes), "MpiSend");
                w->st.sends++;
                w->st.msg_bytes += r->nbytes;
                w->st.records++;
            } else {
                o.what = W_RECV;
                o.peer = (uint32_t)peer;
                o.comm = (uint32_t)r->comm;
                o.tag = (uint32_t)r->tag;
                o.bytes = (uint64_t)r->nbytes;
            }
        } else if (op != NO_OP && comm_known(w, r->comm)) {
            const int64_t root = rank_in(w, r->comm, r->peer);
            CK(w, w->f.OTF2_EvtWriter_MpiCollectiveBegin(t->ew, NULL, at), "MpiCollectiveBegin");
            w->st.records++;
            o.what = W_COLL;
            o.op = op;
            o.comm = (uint32_t)r->comm;
            o.peer = root >= 0 ? (uint32_t)root : O2_UNDEFINED_UINT32;
            o.bytes = (uint64_t)(r->nbytes > 0 ? r->nbytes : 0);
        }
    } else if (known && r->kind >= K_IO_FIRST && r->kind <= K_IO_LAST && w->iomode[r->call] != NO_OP &&
               w->iopar[r->call] && r->file >= 0 && r->file < MAX_FILE) {
        const int64_t h = handle_of(w, t, r->file, w->iopar[r->call]);
        if (h < 0)
            return (int)h;
        o.what = W_IO;
        o.handle = (uint32_t)h;
        o.bytes = (uint64_t)(r->nbytes > 0 ? r->nbytes : 0);
        o.match = t->match++;
        CK(w, w->f.OTF2_EvtWriter_IoOperationBegin(t->ew, NULL, at, o.handle, w->iomode[r->call], 0, o.bytes, o.match),
           "IoOperationBegin");
        w->st.records++;
    }
    if (o2_grow((void **)&t->stack, &t->scap, t->depth + 1, sizeof *t->stack))
        return -ENOMEM;
    t->stack[t->depth++] = o;
    return 0;
}

/* Write the rows sharing the latest start, longest first (an instant, dur -1, last). */
static int flush_pending(ceil_otf2_writer *w, o2_thread *t)
{
    for (int64_t i = 1; i < t->npend; i++) {
        o2_row x = t->pend[i];
        int64_t j = i - 1;
        while (j >= 0 && t->pend[j].dur < x.dur) {
            t->pend[j + 1] = t->pend[j];
            j--;
        }
        t->pend[j + 1] = x;
    }
    for (int64_t i = 0; i < t->npend; i++) {
        int rc = place(w, t, &t->pend[i]);
        if (rc)
            return rc;
    }
    t->npend = 0;
    return 0;
}

int ceil_otf2_events(ceil_otf2_writer *w, const ceil_otf2_cols *c)
{
    if (w->err)
        return w->err;
    if (!w->region_of) {
        w->nsrc = (int64_t)w->region_base + 65536;          /* calls, then any uint16 region index */
        w->region_of = malloc(sizeof *w->region_of * (size_t)w->nsrc);
        if (!w->region_of)
            return -ENOMEM;
        memset(w->region_of, 0xFF, sizeof *w->region_of * (size_t)w->nsrc);
    }
    uint64_t last_key = 0;
    o2_thread *t = NULL;
    for (int64_t i = 0; i < c->n; i++) {
        const uint64_t key = thread_key(c->pid[i], c->tid[i]);
        if (!t || key != last_key) {
            const int64_t idx = o2_map_get(&w->threads_by_key, key);
            if (idx < 0 || !w->threads[idx].located || w->threads[idx].done)
                return -EINVAL;
            t = &w->threads[idx];
            last_key = key;
        }
        o2_row r = {c->ts[i], c->dur[i], c->nbytes[i], c->file[i], c->peer[i], c->tag[i], c->comm[i], c->call[i],
                    c->kind[i]};
        if (t->npend) {
            if (r.ts < t->pend[0].ts)
                return -EINVAL;
            if (r.ts > t->pend[0].ts) {
                int rc = flush_pending(w, t);
                if (rc)
                    return rc;
            }
        }
        if (o2_grow((void **)&t->pend, &t->pcap, t->npend + 1, sizeof *t->pend))
            return -ENOMEM;
        t->pend[t->npend++] = r;
    }
    return w->err;
}

/* The writer of a location that is not a thread's (a metric location, a rank without events). */
static int64_t extra(ceil_otf2_writer *w, uint64_t location)
{
    int64_t i = o2_map_get(&w->metric_by_loc, location + 1);
    if (i >= 0)
        return i;
    if (o2_grow((void **)&w->mlocs, &w->mcap, w->nmlocs + 1, sizeof *w->mlocs))
        return -ENOMEM;
    i = w->nmlocs;
    w->mlocs[i].location = location;
    w->mlocs[i].records = 0;
    w->mlocs[i].ew = w->f.OTF2_Archive_GetEvtWriter(w->ar, location);
    if (!w->mlocs[i].ew)
        return o2_lib_error(w, 1, "OTF2_Archive_GetEvtWriter");
    if (o2_map_put(&w->metric_by_loc, location + 1, i))
        return -ENOMEM;
    w->nmlocs++;
    return i;
}

int ceil_otf2_touch(ceil_otf2_writer *w, uint64_t location)
{
    if (w->err)
        return w->err;
    if (w->finished)
        return -EINVAL;
    const int64_t i = extra(w, location);
    return i < 0 ? (int)i : 0;
}

int ceil_otf2_metrics(ceil_otf2_writer *w, uint64_t location, const int64_t *ts, const uint32_t *metric,
                      const double *value, int64_t n)
{
    if (w->err)
        return w->err;
    if (w->finished)
        return -EINVAL;
    const int64_t i = extra(w, location);
    if (i < 0)
        return (int)i;
    const uint8_t type = O2_TYPE_DOUBLE;
    for (int64_t k = 0; k < n; k++) {
        o2_metric_value v;
        v.floating_point = value[k];
        CK(w, w->f.OTF2_EvtWriter_Metric(w->mlocs[i].ew, NULL, (uint64_t)(w->t0 + ts[k]), metric[k], 1, &type, &v),
           "Metric");
        seen(w, w->t0 + ts[k]);
        w->st.metrics++;
        w->st.records++;
    }
    return 0;
}

/* Thread (pid, tid) has no rows to come: its open rows closed, its record count kept, its event writer
 * closed, so that libotf2 writes its buffer out and frees it (memory for the threads still writing only). */
int ceil_otf2_thread_done(ceil_otf2_writer *w, int32_t pid, int32_t tid)
{
    const int64_t i = o2_map_get(&w->threads_by_key, thread_key(pid, tid));
    if (i < 0)
        return -EINVAL;
    o2_thread *t = &w->threads[i];
    if (!t->located || !t->ew || w->err)
        return w->err;
    int rc = flush_pending(w, t);
    if (!rc)
        rc = pop_until(w, t, INT64_MAX);
    if (rc)
        return rc;
    uint64_t n = 0;
    CK(w, w->f.OTF2_EvtWriter_GetNumberOfEvents(t->ew, &n), "GetNumberOfEvents");
    t->records = (int64_t)n;
    CK(w, w->f.OTF2_Archive_CloseEvtWriter(w->ar, t->ew), "CloseEvtWriter");
    t->ew = NULL;
    t->done = 1;
    return 0;
}

int ceil_otf2_finish(ceil_otf2_writer *w)
{
    if (w->finished)
        return w->err;
    for (int64_t i = 0; i < w->nthreads && !w->err; i++) {
        o2_thread *t = &w->threads[i];
        if (!t->located || t->done)
            continue;
        int rc = flush_pending(w, t);
        if (!rc)
            rc = pop_until(w, t, INT64_MAX);
        if (rc)
            return rc;
    }
    if (w->err)
        return w->err;
    w->finished = 1;
    for (int64_t i = 0; i < w->nthreads; i++) {
        o2_thread *t = &w->threads[i];
        if (!t->ew)
            continue;
        uint64_t n = 0;
        CK(w, w->f.OTF2_EvtWriter_GetNumberOfEvents(t->ew, &n), "GetNumberOfEvents");
        t->records = (int64_t)n;
        CK(w, w->f.OTF2_Archive_CloseEvtWriter(w->ar, t->ew), "CloseEvtWriter");
        t->ew = NULL;
    }
    for (int64_t i = 0; i < w->nmlocs; i++) {
        uint64_t n = 0;
        CK(w, w->f.OTF2_EvtWriter_GetNumberOfEvents(w->mlocs[i].ew, &n), "GetNumberOfEvents");
        w->mlocs[i].records = (int64_t)n;
        CK(w, w->f.OTF2_Archive_CloseEvtWriter(w->ar, w->mlocs[i].ew), "CloseEvtWriter");
        w->mlocs[i].ew = NULL;
    }
    CK(w, w->f.OTF2_Archive_CloseEvtFiles(w->ar), "CloseEvtFiles");
    /* an empty local definition file per location: readers (otf2-print) open one for each */
    CK(w, w->f.OTF2_Archive_OpenDefFiles(w->ar), "OpenDefFiles");
    for (int64_t i = 0; i < w->nthreads + w->nmlocs; i++) {
        const uint64_t loc = i < w->nthreads ? w->threads[i].location : w->mlocs[i - w->nthreads].location;
        if (i < w->nthreads && !w->threads[i].located)
            continue;
        o2_local_def_writer *d = w->f.OTF2_Archive_GetDefWriter(w->ar, loc);
        if (!d)
            return o2_lib_error(w, 1, "OTF2_Archive_GetDefWriter");
        CK(w, w->f.OTF2_Archive_CloseDefWriter(w->ar, d), "CloseDefWriter");
    }
    CK(w, w->f.OTF2_Archive_CloseDefFiles(w->ar), "CloseDefFiles");
    return 0;
}

int64_t ceil_otf2_location_events(const ceil_otf2_writer *w, uint64_t location)
{
    const int64_t t = o2_map_get(&w->thread_by_location, location + 1);
    if (t >= 0)
        return w->threads[t].records;
    const int64_t i = o2_map_get(&w->metric_by_loc, location + 1);
    return i >= 0 ? w->mlocs[i].records : -1;
}

int64_t ceil_otf2_regions(const ceil_otf2_writer *w, uint32_t *src, int64_t cap)
{
    int64_t k = 0;
    for (; k < w->nregions && k < cap; k++)
        src[k] = w->region_src[k];
    return w->nregions;
}

int64_t ceil_otf2_handles(const ceil_otf2_writer *w, int64_t start, uint32_t *group, int32_t *file, uint8_t *iopar,
                          int64_t cap)
{
    int64_t k = 0;
    for (int64_t h = start; h < w->nhandles && k < cap; h++, k++) {
        group[k] = w->h_group[h];
        file[k] = w->h_file[h];
        iopar[k] = w->h_par[h];
    }
    return k;
}

