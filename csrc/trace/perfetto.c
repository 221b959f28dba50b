/*
 * perfetto.c - the Perfetto trace's hot encoder: event columns to TracePackets (see perfetto.h).
 *
 * Memory is bounded whatever the number of events: one output buffer (written out when full), and
 * per thread its open slices, the rows that share its latest start (so they can be written longest
 * first) and two bitmaps of what its sequence has interned. Nothing else outlives a row.
 *
 * Field numbers are those of perfetto's protos (trace_packet.proto, track_event.proto,
 * interned_data.proto, clock_snapshot.proto); the tests parse the file with the classes the
 * `perfetto` Python package ships, so a wrong number fails there.
 *
 * Longer than 500 lines: one encoder whose parts (varints, interning, the per-thread stack, the
 * packet layout) share one writer struct and are only ever used together; split, each part
 * would need that struct's layout in a header of its own.
 */
#include "perfetto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* TracePacket */
#define F_PKT_TIMESTAMP 8
#define F_PKT_SEQ_ID 10
#define F_PKT_TRACK_EVENT 11
#define F_PKT_INTERNED 12
#define F_PKT_FLAGS 13
#define F_PKT_CLOCK_SNAPSHOT 6
#define F_PKT_CLOCK_ID 58
#define F_PKT_DEFAULTS 59
#define F_PKT_FIRST_ON_SEQ 87
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE 2
/* TrackEvent */
#define F_TE_CATEGORY_IIDS 3
#define F_TE_ANNOTATIONS 4
#define F_TE_TYPE 9
#define F_TE_NAME_IID 10
#define F_TE_TRACK_UUID 11
#define F_TE_DOUBLE_COUNTER 44
#define F_TE_FLOW_IDS 47
#define F_TE_TERMINATING_FLOW_IDS 48
#define TYPE_SLICE_BEGIN 1
#define TYPE_SLICE_END 2
#define TYPE_INSTANT 3
#define TYPE_COUNTER 4
/* DebugAnnotation */
#define F_DA_NAME_IID 1
#define F_DA_INT 4
#define F_DA_STRING_IID 17
/* InternedData */
#define F_IN_EVENT_NAMES 2
#define F_IN_STRING_VALUES 29
/* ClockSnapshot and its Clock */
#define F_CS_CLOCKS 1
#define F_CL_ID 1
#define F_CL_TIMESTAMP 2
#define F_CL_INCREMENTAL 3
#define CLOCK_MONOTONIC_ID 3
#define CLOCK_INCREMENTAL_ID 64        /* the first sequence-scoped clock id, as Perfetto's SDK uses it */

/* annotation name iids: the order of ANNOTATIONS in src/ceiling/report/exporters/perfetto.py */
enum { A_BYTES = 1, A_OFFSET, A_FILE, A_RESULT, A_PEER, A_TAG, A_COMM, A_ROOT };
/* results/events.py's kinds */
enum { K_MPI_P2P = 5, K_MPI_COLL = 7, K_MPI_OTHER = 8, K_REGION = 9, K_INSTANT = 10 };

#define WT_VARINT 0
#define WT_FIXED64 1
#define WT_LEN 2

typedef struct {
    int64_t ts, dur, offset, nbytes, result;
    uint64_t flow;
    int32_t file, peer, tag, comm;
    uint16_t call;
    uint8_t kind, dir;
} pf_row;

typedef struct {
    int64_t end;
    uint64_t term;          /* flow id the END terminates (a receive), 0 none */
} pf_open;

typedef struct {
    uint32_t seq;
    uint64_t uuid;
    int started;
    int64_t last;           /* the incremental clock's value: the last timestamp written */
    pf_open *stack;
    int64_t depth, scap;
    pf_row *pend;           /* rows with the latest start, not yet written */
    int64_t npend, pcap;
    uint8_t *names, *strs;  /* bitmaps of interned iids */
    int64_t nnames, nstrs;  /* their sizes in bytes */
} pf_seq;

struct ceil_pf_writer {
    int fd, err;
    uint8_t *buf;
    int64_t len, cap;
    int64_t t0;
    uint32_t next_seq;
    uint8_t *stat;
    int64_t nstat;
    const char *names, *strings;
    const int64_t *name_off, *string_off;
    int64_t nnames, nstrings;
    uint64_t *hkeys;
    int64_t *hvals;
    int64_t hcap, hcount;
    pf_seq *seqs;
    int64_t nseq, seqcap;
    uint8_t *scratch;       /* interned data of the packet being built */
    int64_t scap;
    ceil_pf_stats st;
};

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline int64_t varint_len(uint64_t v)
{
    int64_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_key(uint8_t *p, uint32_t field, uint32_t wt) { return put_varint(p, (field << 3) | wt); }

static inline uint8_t *put_fixed64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return p + 8;
}

static inline uint8_t *put_bytes(uint8_t *p, uint32_t field, const void *data, int64_t n)
{
    p = put_key(p, field, WT_LEN);
    p = put_varint(p, (uint64_t)n);
    memcpy(p, data, (size_t)n);
    return p + n;
}

static int flush_out(ceil_pf_writer *w)
{
    int64_t off = 0;
    while (off < w->len) {
        ssize_t r = write(w->fd, w->buf + off, (size_t)(w->len - off));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            w->err = -errno;
            return w->err;
        }
        off += r;
    }
    w->st.bytes += w->len;
    w->len = 0;
    return 0;
}

/* Room for need more bytes in the output buffer. */
static int reserve(ceil_pf_writer *w, int64_t need)
{
    if (w->err)
        return w->err;
    if (w->len + need <= w->cap)
        return 0;
    int rc = flush_out(w);
    if (rc)
        return rc;
    if (need > w->cap) {
        uint8_t *nb = realloc(w->buf, (size_t)need);
        if (!nb)
            return -ENOMEM;
        w->buf = nb;
        w->cap = need;
    }
    return 0;
}

static int scratch_reserve(ceil_pf_writer *w, int64_t need)
{
    if (need <= w->scap)
        return 0;
    int64_t cap = w->scap ? w->scap : 4096;
    while (cap < need)
        cap *= 2;
    uint8_t *nb = realloc(w->scratch, (size_t)cap);
    if (!nb)
        return -ENOMEM;
    w->scratch = nb;
    w->scap = cap;
    return 0;
}

/* Set bit iid of a bitmap; 1 if it was clear (the iid must be interned now), <0 on no memory. */
static int mark(uint8_t **bits, int64_t *nbytes, uint64_t iid)
{
    int64_t byte = (int64_t)(iid >> 3);
    if (byte >= *nbytes) {
        int64_t n = *nbytes ? *nbytes : 16;
        while (n <= byte)
            n *= 2;
        uint8_t *nb = realloc(*bits, (size_t)n);
        if (!nb)
            return -ENOMEM;
        memset(nb + *nbytes, 0, (size_t)(n - *nbytes));
        *bits = nb;
        *nbytes = n;
    }
    uint8_t m = (uint8_t)(1u << (iid & 7));
    if ((*bits)[byte] & m)
        return 0;
    (*bits)[byte] |= m;
    return 1;
}

ceil_pf_writer *ceil_pf_open(int fd, int64_t buf_bytes, int64_t t0_ns, uint32_t first_seq)
{
    ceil_pf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->fd = fd;
    w->cap = buf_bytes > 4096 ? buf_bytes : 4096;
    w->buf = malloc((size_t)w->cap);
    w->hcap = 1024;
    w->hkeys = malloc(sizeof *w->hkeys * (size_t)w->hcap);
    w->hvals = malloc(sizeof *w->hvals * (size_t)w->hcap);
    if (!w->buf || !w->hkeys || !w->hvals) {
        ceil_pf_close(w);
        return NULL;
    }
    for (int64_t i = 0; i < w->hcap; i++)
        w->hvals[i] = -1;
    w->t0 = t0_ns;
    w->next_seq = first_seq;
    return w;
}

int ceil_pf_raw(ceil_pf_writer *w, const uint8_t *data, int64_t n)
{
    int rc = reserve(w, n);
    if (rc)
        return rc;
    memcpy(w->buf + w->len, data, (size_t)n);
    w->len += n;
    return 0;
}

int ceil_pf_static(ceil_pf_writer *w, const uint8_t *interned, int64_t n)
{
    uint8_t *nb = realloc(w->stat, (size_t)(n ? n : 1));
    if (!nb)
        return -ENOMEM;
    memcpy(nb, interned, (size_t)n);
    w->stat = nb;
    w->nstat = n;
    return 0;
}

void ceil_pf_tables(ceil_pf_writer *w, const char *names, const int64_t *name_off, int64_t nnames,
                    const char *strings, const int64_t *string_off, int64_t nstrings)
{
    w->names = names;
    w->name_off = name_off;
    w->nnames = nnames;
    w->strings = strings;
    w->string_off = string_off;
    w->nstrings = nstrings;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int64_t hfind(const ceil_pf_writer *w, uint64_t key)
{
    uint64_t mask = (uint64_t)w->hcap - 1;
    for (uint64_t h = mix64(key) & mask;; h = (h + 1) & mask) {
        if (w->hvals[h] < 0)
            return -1;
        if (w->hkeys[h] == key)
            return w->hvals[h];
    }
}

static int hput(ceil_pf_writer *w, uint64_t key, int64_t val)
{
    if (2 * (w->hcount + 1) > w->hcap) {
        int64_t ncap = 2 * w->hcap;
        uint64_t *nk = malloc(sizeof *nk * (size_t)ncap);
        int64_t *nv = malloc(sizeof *nv * (size_t)ncap);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return -ENOMEM;
        }
        for (int64_t i = 0; i < ncap; i++)
            nv[i] = -1;
        for (int64_t i = 0; i < w->hcap; i++) {
            if (w->hvals[i] < 0)
                continue;
            uint64_t h = mix64(w->hkeys[i]) & (uint64_t)(ncap - 1);
            while (nv[h] >= 0)
                h = (h + 1) & (uint64_t)(ncap - 1);
            nk[h] = w->hkeys[i];
            nv[h] = w->hvals[i];
        }
        free(w->hkeys);
        free(w->hvals);
        w->hkeys = nk;
        w->hvals = nv;
        w->hcap = ncap;
    }
    uint64_t mask = (uint64_t)w->hcap - 1;
    uint64_t h = mix64(key) & mask;
    while (w->hvals[h] >= 0)
        h = (h + 1) & mask;
    w->hkeys[h] = key;
    w->hvals[h] = val;
    w->hcount++;
    return 0;
}

static inline uint64_t thread_key(int32_t pid, int32_t tid) { return ((uint64_t)(uint32_t)pid << 32) | (uint32_t)tid; }

int64_t ceil_pf_threads(ceil_pf_writer *w, const int32_t *pid, const int32_t *tid, int64_t n,
                        int32_t *out_pid, int32_t *out_tid, uint32_t *out_seq, uint64_t *out_uuid, int64_t cap)
{
    int64_t found = 0;
    uint64_t last = 0;
    int have_last = 0;
    for (int64_t i = 0; i < n && found < cap; i++) {
        uint64_t key = thread_key(pid[i], tid[i]);
        if (have_last && key == last)
            continue;
        last = key;
        have_last = 1;
        if (hfind(w, key) >= 0)
            continue;
        if (w->nseq == w->seqcap) {
            int64_t ncap = w->seqcap ? 2 * w->seqcap : 64;
            pf_seq *ns = realloc(w->seqs, sizeof *ns * (size_t)ncap);
            if (!ns)
                return -ENOMEM;
            w->seqs = ns;
            w->seqcap = ncap;
        }
        pf_seq *s = &w->seqs[w->nseq];
        memset(s, 0, sizeof *s);
        s->seq = w->next_seq++;
        /* thread track: 2 in the top byte, pid and tid in 28 bits each (Linux's pid_max is 2^22) */
        s->uuid = (2ULL << 56) | ((uint64_t)((uint32_t)pid[i] & 0xfffffffu) << 28) | ((uint32_t)tid[i] & 0xfffffffu);
        if (hput(w, key, w->nseq) < 0)
            return -ENOMEM;
        out_pid[found] = pid[i];
        out_tid[found] = tid[i];
        out_seq[found] = s->seq;
        out_uuid[found] = s->uuid;
        found++;
        w->nseq++;
    }
    return found;
}

/* The first packet of a sequence: incremental state cleared, defaults, the clock 64 at base. */
static int first_packet(ceil_pf_writer *w, uint32_t seq, uint64_t uuid, int64_t base)
{
    uint8_t defaults[32], *d = defaults, ted[16], *t = ted, clk1[24], *c1 = clk1, clk2[24], *c2 = clk2, cs[64], *q = cs;
    t = put_key(t, F_TE_TRACK_UUID, WT_VARINT);
    t = put_varint(t, uuid);
    d = put_key(d, F_PKT_CLOCK_ID, WT_VARINT);
    d = put_varint(d, CLOCK_INCREMENTAL_ID);
    d = put_bytes(d, 11, ted, t - ted);                  /* TracePacketDefaults.track_event_defaults */
    c1 = put_key(c1, F_CL_ID, WT_VARINT);
    c1 = put_varint(c1, CLOCK_MONOTONIC_ID);
    c1 = put_key(c1, F_CL_TIMESTAMP, WT_VARINT);
    c1 = put_varint(c1, (uint64_t)base);
    c2 = put_key(c2, F_CL_ID, WT_VARINT);
    c2 = put_varint(c2, CLOCK_INCREMENTAL_ID);
    c2 = put_key(c2, F_CL_TIMESTAMP, WT_VARINT);
    c2 = put_varint(c2, (uint64_t)base);
    c2 = put_key(c2, F_CL_INCREMENTAL, WT_VARINT);
    c2 = put_varint(c2, 1);
    q = put_bytes(q, F_CS_CLOCKS, clk1, c1 - clk1);
    q = put_bytes(q, F_CS_CLOCKS, clk2, c2 - clk2);
    int64_t body = 1 + varint_len((uint64_t)base) + 2 + 1 + 1 + varint_len(seq) + 1 + 1
                   + 2 + varint_len((uint64_t)(d - defaults)) + (d - defaults)
                   + 1 + varint_len((uint64_t)(q - cs)) + (q - cs)
                   + (w->nstat ? 1 + varint_len((uint64_t)w->nstat) + w->nstat : 0) + 3;
    int rc = reserve(w, body + 11);
    if (rc)
        return rc;
    uint8_t *p = w->buf + w->len, *start;
    *p++ = 0x0a;
    p = put_varint(p, (uint64_t)body);
    start = p;
    p = put_key(p, F_PKT_TIMESTAMP, WT_VARINT);
    p = put_varint(p, (uint64_t)base);
    p = put_key(p, F_PKT_CLOCK_ID, WT_VARINT);
    p = put_varint(p, CLOCK_MONOTONIC_ID);
    p = put_key(p, F_PKT_SEQ_ID, WT_VARINT);
    p = put_varint(p, seq);
    p = put_key(p, F_PKT_FLAGS, WT_VARINT);
    p = put_varint(p, SEQ_INCREMENTAL_STATE_CLEARED);
    p = put_bytes(p, F_PKT_DEFAULTS, defaults, d - defaults);
    p = put_bytes(p, F_PKT_CLOCK_SNAPSHOT, cs, q - cs);
    if (w->nstat)
        p = put_bytes(p, F_PKT_INTERNED, w->stat, w->nstat);
    p = put_key(p, F_PKT_FIRST_ON_SEQ, WT_VARINT);
    p = put_varint(p, 1);
    if (p - start != body)
        return -EINVAL;       /* a size computed wrong above: never write a corrupt packet */
    w->len = p - w->buf;
    w->st.packets++;
    return 0;
}

/* One packet: a delta timestamp, the sequence's flags, a TrackEvent body and interned data. */
static int put_packet(ceil_pf_writer *w, pf_seq *s, int64_t t_abs, const uint8_t *te, int64_t telen, int64_t ilen)
{
    if (t_abs < s->last)
        return -EINVAL;
    uint64_t delta = (uint64_t)(t_abs - s->last);
    int64_t body = 1 + varint_len(delta) + 1 + varint_len(s->seq) + 2 + 1 + varint_len((uint64_t)telen) + telen
                   + (ilen ? 1 + varint_len((uint64_t)ilen) + ilen : 0);
    int rc = reserve(w, body + 11);
    if (rc)
        return rc;
    uint8_t *p = w->buf + w->len;
    *p++ = 0x0a;
    p = put_varint(p, (uint64_t)body);
    p = put_key(p, F_PKT_TIMESTAMP, WT_VARINT);
    p = put_varint(p, delta);
    p = put_key(p, F_PKT_SEQ_ID, WT_VARINT);
    p = put_varint(p, s->seq);
    p = put_key(p, F_PKT_FLAGS, WT_VARINT);
    p = put_varint(p, SEQ_NEEDS_INCREMENTAL_STATE);
    p = put_bytes(p, F_PKT_TRACK_EVENT, te, telen);
    if (ilen)
        p = put_bytes(p, F_PKT_INTERNED, w->scratch, ilen);
    w->len = p - w->buf;
    s->last = t_abs;
    w->st.packets++;
    return 0;
}

/* Append an interned entry {iid, string} (field of InternedData) to the scratch at *ilen. */
static int intern_entry(ceil_pf_writer *w, int64_t *ilen, uint32_t field, uint64_t iid, const char *blob,
                        const int64_t *off, int64_t count)
{
    if ((int64_t)iid >= count)
        return -EINVAL;
    int64_t slen = off[iid + 1] - off[iid];
    int64_t inner = 1 + varint_len(iid) + 1 + varint_len((uint64_t)slen) + slen;
    int rc = scratch_reserve(w, *ilen + inner + 16);
    if (rc)
        return rc;
    uint8_t *p = w->scratch + *ilen;
    p = put_key(p, field, WT_LEN);
    p = put_varint(p, (uint64_t)inner);
    p = put_key(p, 1, WT_VARINT);
    p = put_varint(p, iid);
    p = put_bytes(p, 2, blob + off[iid], slen);
    *ilen = p - w->scratch;
    return 0;
}

static inline uint8_t *put_int_annotation(uint8_t *p, uint32_t name, int64_t v)
{
    uint8_t a[24], *q = a;
    q = put_key(q, F_DA_NAME_IID, WT_VARINT);
    q = put_varint(q, name);
    q = put_key(q, F_DA_INT, WT_VARINT);
    q = put_varint(q, (uint64_t)v);
    return put_bytes(p, F_TE_ANNOTATIONS, a, q - a);
}

static inline uint8_t *put_str_annotation(uint8_t *p, uint32_t name, uint64_t iid)
{
    uint8_t a[24], *q = a;
    q = put_key(q, F_DA_NAME_IID, WT_VARINT);
    q = put_varint(q, name);
    q = put_key(q, F_DA_STRING_IID, WT_VARINT);
    q = put_varint(q, iid);
    return put_bytes(p, F_TE_ANNOTATIONS, a, q - a);
}

/* A BEGIN or an INSTANT: name, category, the row's arguments, and a send's flow. */
static int put_open(ceil_pf_writer *w, pf_seq *s, const pf_row *r, int type)
{
    uint8_t te[256], *p = te;
    int64_t ilen = 0;
    int rc;
    uint64_t name;
    if (r->kind == K_REGION)
        name = 3u * r->call + 2;
    else if (r->kind == K_INSTANT)
        name = 3u * r->call + 3;
    else
        name = 3u * r->call + 1;
    if ((rc = mark(&s->names, &s->nnames, name)) < 0)
        return rc;
    if (rc && (rc = intern_entry(w, &ilen, F_IN_EVENT_NAMES, name, w->names, w->name_off, w->nnames)) < 0)
        return rc;
    p = put_key(p, F_TE_TYPE, WT_VARINT);
    p = put_varint(p, (uint64_t)type);
    p = put_key(p, F_TE_CATEGORY_IIDS, WT_VARINT);
    p = put_varint(p, r->kind);
    p = put_key(p, F_TE_NAME_IID, WT_VARINT);
    p = put_varint(p, name);
    if (r->kind >= 1 && r->kind <= K_MPI_OTHER) {
        int io = r->kind < K_MPI_P2P;
        if (r->nbytes >= 0)
            p = put_int_annotation(p, A_BYTES, r->nbytes);
        if (io && r->offset >= 0)
            p = put_int_annotation(p, A_OFFSET, r->offset);
        if (io && r->file >= 0) {
            uint64_t iid = 2u * (uint64_t)r->file + 1;
            if ((rc = mark(&s->strs, &s->nstrs, iid)) < 0)
                return rc;
            if (rc && (rc = intern_entry(w, &ilen, F_IN_STRING_VALUES, iid, w->strings, w->string_off,
                                         w->nstrings)) < 0)
                return rc;
            p = put_str_annotation(p, A_FILE, iid);
        }
        /* I/O: the result only where it is not the bytes moved; MPI: only where it is not MPI_SUCCESS */
        if (io ? r->result != r->nbytes : r->result != 0)
            p = put_int_annotation(p, A_RESULT, r->result);
        if (!io) {
            if (r->peer >= 0)       /* a collective's peer is its root (results/events.py) */
                p = put_int_annotation(p, r->kind == K_MPI_COLL ? A_ROOT : A_PEER, r->peer);
            if (r->tag >= 0)
                p = put_int_annotation(p, A_TAG, r->tag);
            if (r->comm >= 0) {
                uint64_t iid = 2u * (uint64_t)r->comm + 2;
                if ((rc = mark(&s->strs, &s->nstrs, iid)) < 0)
                    return rc;
                if (rc && (rc = intern_entry(w, &ilen, F_IN_STRING_VALUES, iid, w->strings, w->string_off,
                                             w->nstrings)) < 0)
                    return rc;
                p = put_str_annotation(p, A_COMM, iid);
            }
        }
    }
    if (r->dir == 1 && r->flow) {
        p = put_key(p, F_TE_FLOW_IDS, WT_FIXED64);
        p = put_fixed64(p, r->flow);
        w->st.flows_out++;
    }
    return put_packet(w, s, w->t0 + r->ts, te, p - te, ilen);
}

static int put_end(ceil_pf_writer *w, pf_seq *s, const pf_open *o)
{
    uint8_t te[24], *p = te;
    p = put_key(p, F_TE_TYPE, WT_VARINT);
    p = put_varint(p, TYPE_SLICE_END);
    if (o->term) {
        p = put_key(p, F_TE_TERMINATING_FLOW_IDS, WT_FIXED64);
        p = put_fixed64(p, o->term);
        w->st.flows_in++;
    }
    return put_packet(w, s, w->t0 + o->end, te, p - te, 0);
}

static int pop_until(ceil_pf_writer *w, pf_seq *s, int64_t ts)
{
    while (s->depth && s->stack[s->depth - 1].end <= ts) {
        int rc = put_end(w, s, &s->stack[s->depth - 1]);
        if (rc)
            return rc;
        s->depth--;
    }
    return 0;
}

static int place(ceil_pf_writer *w, pf_seq *s, pf_row *r)
{
    int rc;
    if (!s->started) {
        if ((rc = first_packet(w, s->seq, s->uuid, w->t0 + r->ts)))
            return rc;
        s->started = 1;
        s->last = w->t0 + r->ts;
        w->st.sequences++;
    }
    if ((rc = pop_until(w, s, r->ts)))
        return rc;
    if (r->dur < 0) {
        w->st.instants++;
        return put_open(w, s, r, TYPE_INSTANT);
    }
    if (s->depth && r->ts + r->dur > s->stack[s->depth - 1].end) {
        r->dur = s->stack[s->depth - 1].end - r->ts;
        w->st.clipped++;
    }
    if ((rc = put_open(w, s, r, TYPE_SLICE_BEGIN)))
        return rc;
    if (s->depth == s->scap) {
        int64_t ncap = s->scap ? 2 * s->scap : 8;
        pf_open *ns = realloc(s->stack, sizeof *ns * (size_t)ncap);
        if (!ns)
            return -ENOMEM;
        s->stack = ns;
        s->scap = ncap;
    }
    s->stack[s->depth].end = r->ts + r->dur;
    s->stack[s->depth].term = r->dir == 2 ? r->flow : 0;
    s->depth++;
    w->st.slices++;
    return 0;
}

/* Write the rows sharing the latest start, longest first (an instant, dur -1, last). */
static int flush_pending(ceil_pf_writer *w, pf_seq *s)
{
    for (int64_t i = 1; i < s->npend; i++) {
        pf_row x = s->pend[i];
        int64_t j = i - 1;
        while (j >= 0 && s->pend[j].dur < x.dur) {
            s->pend[j + 1] = s->pend[j];
            j--;
        }
        s->pend[j + 1] = x;
    }
    for (int64_t i = 0; i < s->npend; i++) {
        int rc = place(w, s, &s->pend[i]);
        if (rc)
            return rc;
    }
    s->npend = 0;
    return 0;
}

int ceil_pf_events(ceil_pf_writer *w, const ceil_pf_cols *c)
{
    if (w->err)
        return w->err;
    uint64_t last_key = 0;
    pf_seq *s = NULL;
    for (int64_t i = 0; i < c->n; i++) {
        uint64_t key = thread_key(c->pid[i], c->tid[i]);
        if (!s || key != last_key) {
            int64_t idx = hfind(w, key);
            if (idx < 0)
                return -EINVAL;
            s = &w->seqs[idx];
            last_key = key;
        }
        pf_row r;
        r.ts = c->ts[i];
        r.dur = c->dur[i];
        r.offset = c->offset[i];
        r.nbytes = c->nbytes[i];
        r.result = c->result[i];
        r.file = c->file[i];
        r.peer = c->peer[i];
        r.tag = c->tag[i];
        r.comm = c->comm[i];
        r.call = c->call[i];
        r.kind = c->kind[i];
        r.dir = (r.kind == K_MPI_P2P && r.call < c->ndir) ? c->dirtab[r.call] : 0;
        r.flow = c->flow ? c->flow[i] : 0;
        if (s->npend) {
            if (r.ts < s->pend[0].ts)
                return -EINVAL;
            if (r.ts > s->pend[0].ts) {
                int rc = flush_pending(w, s);
                if (rc)
                    return rc;
            }
        }
        if (s->npend == s->pcap) {
            int64_t ncap = s->pcap ? 2 * s->pcap : 4;
            pf_row *np = realloc(s->pend, sizeof *np * (size_t)ncap);
            if (!np)
                return -ENOMEM;
            s->pend = np;
            s->pcap = ncap;
        }
        s->pend[s->npend++] = r;
    }
    return w->err;
}

uint32_t ceil_pf_take_seq(ceil_pf_writer *w) { return w->next_seq++; }

int ceil_pf_counter(ceil_pf_writer *w, uint32_t seq, uint64_t uuid, const int64_t *ts, const double *value,
                    int64_t n)
{
    if (n <= 0)
        return w->err;
    pf_seq s;
    memset(&s, 0, sizeof s);
    s.seq = seq;
    int rc = first_packet(w, seq, uuid, w->t0 + ts[0]);
    if (rc)
        return rc;
    s.last = w->t0 + ts[0];
    w->st.sequences++;
    for (int64_t i = 0; i < n; i++) {
        uint8_t te[16], *p = te;
        uint64_t bits;
        memcpy(&bits, &value[i], 8);
        p = put_key(p, F_TE_TYPE, WT_VARINT);
        p = put_varint(p, TYPE_COUNTER);
        p = put_key(p, F_TE_DOUBLE_COUNTER, WT_FIXED64);
        p = put_fixed64(p, bits);
        if ((rc = put_packet(w, &s, w->t0 + ts[i], te, p - te, 0)))
            return rc;
        w->st.counter_samples++;
    }
    return 0;
}

int ceil_pf_finish(ceil_pf_writer *w)
{
    for (int64_t i = 0; i < w->nseq; i++) {
        pf_seq *s = &w->seqs[i];
        int rc = flush_pending(w, s);
        if (!rc)
            rc = pop_until(w, s, INT64_MAX);
        if (rc)
            return rc;
    }
    if (w->err)
        return w->err;
    return flush_out(w);
}

void ceil_pf_stats_get(const ceil_pf_writer *w, ceil_pf_stats *out)
{
    *out = w->st;
    out->bytes += w->len;
}

void ceil_pf_close(ceil_pf_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->nseq; i++) {
        free(w->seqs[i].stack);
        free(w->seqs[i].pend);
        free(w->seqs[i].names);
        free(w->seqs[i].strs);
    }
    free(w->seqs);
    free(w->hkeys);
    free(w->hvals);
    free(w->buf);
    free(w->stat);
    free(w->scratch);
    free(w);
}
