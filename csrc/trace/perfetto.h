/*
 * perfetto.h - the hot encoder of `ceiling trace`'s Perfetto file (TracePacket stream, TrackEvent).
 *
 * Python (src/ceiling/report/exporters/perfetto.py through src/ceiling/core/pftrace.py) prepares
 * the tables (names, file paths, communicators), the flow ids of MPI messages and the few
 * descriptor packets; this file turns the event columns into packets, row by row, because Python's
 * protobuf costs microseconds per event and a trace has 10^7 of them.
 *
 * Encoding (what the reader of the file may rely on):
 *   - One trusted packet sequence per thread. Its first packet clears the incremental state, sets
 *     the packet defaults (timestamp clock 64, the thread's track) and a clock snapshot that puts
 *     the sequence-scoped incremental clock 64 at an absolute CLOCK_MONOTONIC time; every later
 *     packet's timestamp is the delta, in ns, from the packet before it on that sequence.
 *   - Event names (iid 3c+1 for call c, 3r+2 for region r, 3i+3 for instant i) and string values
 *     (iid 2f+1 for file f, 2m+2 for communicator m) are interned on a sequence the first time the
 *     sequence uses them; categories (iid = the event's kind) and debug-annotation names
 *     (ceil_pf_static) are interned in the sequence's first packet.
 *   - A call or region is a SLICE_BEGIN/SLICE_END pair on its thread's track, an instant one
 *     INSTANT. Rows of a thread with the same start are written longest first, so a region that
 *     starts with its first call encloses it; a slice that would end after its enclosing one is
 *     cut at the enclosing end (counted in ceil_pf_stats.clipped), so nesting is always proper.
 *   - A send carries its flow id on its BEGIN (flow_ids), a receive on its END
 *     (terminating_flow_ids): the viewer draws the arrow from the send to the receive.
 *
 * Every function returns 0 (or a count) on success and a negative errno on failure; none exits.
 * Symbols are prefixed ceil_pf_.
 */
#ifndef CEILING_PERFETTO_H
#define CEILING_PERFETTO_H

#include <stdint.h>

typedef struct ceil_pf_writer ceil_pf_writer;

/* The columns of one chunk of events (results/events.py's COLUMNS), rows in time order per thread.
 * flow: per row the MPI flow id (0: none), or NULL when the chunk has none; dirtab: per call id,
 * 1 a send, 2 a receive, 0 neither (ndir entries). */
typedef struct {
    const int64_t *ts, *dur;
    const int32_t *pid, *tid;
    const uint8_t *kind;
    const uint16_t *call;
    const int32_t *file;
    const int64_t *offset, *nbytes, *result;
    const int32_t *peer, *tag, *comm;
    const uint64_t *flow;
    const uint8_t *dirtab;
    int64_t ndir;
    int64_t n;
} ceil_pf_cols;

/* What was written so far (ceil_pf_stats). */
typedef struct {
    int64_t bytes;          /* bytes handed to write(2), the file's size once closed */
    int64_t packets;
    int64_t slices;         /* BEGIN/END pairs */
    int64_t instants;
    int64_t clipped;        /* slices cut at their enclosing slice's end */
    int64_t flows_out;      /* sends that carry a flow id */
    int64_t flows_in;       /* receives that end one */
    int64_t counter_samples;
    int64_t sequences;
} ceil_pf_stats;

/* Open a writer on fd (kept open; the caller closes it), buffering about buf_bytes before each
 * write(2); t0_ns is the absolute CLOCK_MONOTONIC time of the trace's ts 0; first_seq the first
 * sequence id ceil_pf_threads hands out. NULL when out of memory. */
ceil_pf_writer *ceil_pf_open(int fd, int64_t buf_bytes, int64_t t0_ns, uint32_t first_seq);

/* Append packets already encoded by the caller (each a Trace.packet field: tag 0x0a, length). */
int ceil_pf_raw(ceil_pf_writer *w, const uint8_t *data, int64_t n);

/* The InternedData body every thread sequence's first packet carries (categories, annotation names). */
int ceil_pf_static(ceil_pf_writer *w, const uint8_t *interned, int64_t n);

/* The string tables, indexed by iid: entry k is blob[off[k] .. off[k+1]) (count+1 offsets).
 * The arrays stay the caller's and must live until the next ceil_pf_tables or ceil_pf_close. */
void ceil_pf_tables(ceil_pf_writer *w, const char *names, const int64_t *name_off, int64_t nnames,
                    const char *strings, const int64_t *string_off, int64_t nstrings);

/* Register the threads of rows [0, n) not seen before, in order of first appearance: each gets the
 * next sequence id and a track uuid, returned in out_* (at most cap). Returns how many were new;
 * when it returns cap, call again for the rest. */
int64_t ceil_pf_threads(ceil_pf_writer *w, const int32_t *pid, const int32_t *tid, int64_t n,
                        int32_t *out_pid, int32_t *out_tid, uint32_t *out_seq, uint64_t *out_uuid, int64_t cap);

/* Encode a chunk's rows (their threads registered first). -EINVAL: a row earlier than the one
 * before it on its thread, or an unregistered thread; -ENOMEM; -errno of write(2). */
int ceil_pf_events(ceil_pf_writer *w, const ceil_pf_cols *c);

/* A fresh sequence id (for a counter track or any sequence the caller writes itself). */
uint32_t ceil_pf_take_seq(ceil_pf_writer *w);

/* One counter track, whole: its own sequence seq, its track uuid, n samples (ts relative to t0). */
int ceil_pf_counter(ceil_pf_writer *w, uint32_t seq, uint64_t uuid, const int64_t *ts, const double *value,
                    int64_t n);

/* Close every open slice (the last rows of each thread), write the buffer out. */
int ceil_pf_finish(ceil_pf_writer *w);

void ceil_pf_stats_get(const ceil_pf_writer *w, ceil_pf_stats *out);

/* Free the writer (after ceil_pf_finish, or to abandon it). */
void ceil_pf_close(ceil_pf_writer *w);

#endif
