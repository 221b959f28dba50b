/*
 * otf2.h - the OTF2 archive of `ceiling trace --format otf2`: event columns to OTF2 records,
 * through OTF2's own library (libotf2 3.x, opened at run time: otf2_abi.h says why).
 *
 * Python (src/ceiling/report/exporters/otf2.py through src/ceiling/core/otf2lib.py) finds the
 * library, numbers the locations, communicators and metrics, and writes the definitions with
 * ceil_otf2_def once the events are written; this file writes the events, row by row, because
 * the otf2 package's Python bindings cost 3 to 5 us per record (measured: benchmarks/otf2_writer.py's
 * docstring) and an I/O call is four records.
 *
 * Records per row (what a reader of the archive may rely on):
 *   - a call or user region: Enter at its start and Leave at its end on its thread's location;
 *     rows of a thread with the same start are written longest first, and a row that would end
 *     after its enclosing one is cut at the enclosing end (ceil_otf2_stats.clipped), so Enter
 *     and Leave nest;
 *   - an I/O call with an I/O mode (read, write, flush) and a file: IoOperationBegin after its
 *     Enter (bytes requested: the bytes it moved) and IoOperationComplete before its Leave (the
 *     bytes it moved), on the handle of (its process, its file, its I/O paradigm);
 *   - an MPI send: MpiSend after its Enter; a receive: MpiRecv before its Leave (partner, tag,
 *     communicator, bytes), where the row names a partner and a communicator the partner is in;
 *   - a collective with an OTF2 operation: MpiCollectiveBegin after its Enter,
 *     MpiCollectiveEnd before its Leave (operation, communicator, root, bytes);
 *   - instants (dur -1: process and thread starts and ends): no record (counted).
 *   - counter samples (ceil_otf2_metrics): a Metric record each, on a metric location.
 *
 * Every function returns 0 (or a count) on success and a negative number on failure: -errno, or
 * -(1000 + OTF2's error code) for an error of the library (ceil_otf2_message says it). None exits.
 * Symbols are prefixed ceil_otf2_.
 */
#ifndef CEILING_OTF2_H
#define CEILING_OTF2_H

#include <stdint.h>

#define CEIL_OTF2_LIB_ERROR 1000

typedef struct ceil_otf2_writer ceil_otf2_writer;

/* Per call id (calls.def's ids, ncalls of them): what records a call gets beside Enter/Leave.
 * p2p: 1 a send, 2 a receive, 0 neither; collop: OTF2's collective operation, 255 none; iomode:
 * OTF2's I/O operation mode, 255 none; iopar: the I/O paradigm's ref + 1, 0 none. */
typedef struct {
    const uint8_t *p2p, *collop, *iomode, *iopar;
    int64_t ncalls;
} ceil_otf2_calls;

/* One chunk's columns (results/events.py's COLUMNS that matter here), rows in time order per thread. */
typedef struct {
    const int64_t *ts, *dur;
    const int32_t *pid, *tid;
    const uint8_t *kind;
    const uint16_t *call;
    const int32_t *file;
    const int64_t *nbytes;
    const int32_t *peer, *tag, *comm;
    int64_t n;
} ceil_otf2_cols;

typedef struct {
    int64_t enters;          /* Enter records (as many Leaves) */
    int64_t clipped;         /* rows cut at their enclosing row's end */
    int64_t instants;        /* rows with no record (dur -1) */
    int64_t sends, recvs;    /* MpiSend, MpiRecv records */
    int64_t unpaired;        /* sends and receives with no record: no partner, no communicator, not a member */
    int64_t collectives;     /* MpiCollectiveBegin/End pairs */
    int64_t io_ops;          /* IoOperationBegin/Complete pairs */
    int64_t io_bytes;        /* bytes in IoOperationComplete records */
    int64_t msg_bytes;       /* bytes in MpiSend records */
    int64_t metrics;         /* Metric records */
    int64_t records;         /* all event records */
    int64_t first_ts, last_ts;   /* absolute ns: the earliest and latest record (first > last: none) */
    int64_t buffer_peak;     /* the most bytes libotf2's buffers held at once (what bounds the memory) */
} ceil_otf2_stats;

/* Whether lib is OTF2 3.x's library: 0, or -1 with the reason in err (it cannot be opened, or lacks
 * a function the writer calls). */
int ceil_otf2_check(const char *lib, char *err, int64_t errlen);

/* Open libotf2 at lib (dlopen) and a new archive dir/name.otf2 (dir must not exist), events
 * buffered in chunks of chunk_bytes per location and written out as each fills; t0_ns is the
 * absolute time (ns) of the rows' ts 0, region_base the region id of user region 0 (calls are
 * regions 0 .. ncalls-1). NULL on failure, with the reason in err. */
ceil_otf2_writer *ceil_otf2_open(const char *lib, const char *dir, const char *name, int64_t chunk_bytes,
                                 int64_t t0_ns, uint32_t region_base, const char *creator, const char *machine,
                                 char *err, int64_t errlen);

/* The per-call tables (copied). */
int ceil_otf2_calls_set(ceil_otf2_writer *w, const ceil_otf2_calls *calls);

/* Communicator `index` (its OTF2 comm ref): world rank r is its rank xlat[r] for r < n (-1 not a
 * member), or, with xlat NULL, its ranks are world ranks (MPI_COMM_WORLD). Copied. A row on a
 * communicator not given here gets no message or collective record. */
int ceil_otf2_comm(ceil_otf2_writer *w, int64_t index, const int32_t *xlat, int64_t n);

/* The threads of rows [0, n) not registered yet, in order of first appearance (at most cap);
 * each must then be given its location with ceil_otf2_locate before ceil_otf2_events. */
int64_t ceil_otf2_threads(ceil_otf2_writer *w, const int32_t *pid, const int32_t *tid, int64_t n, int32_t *out_pid,
                          int32_t *out_tid, int64_t cap);

/* Thread (pid, tid) records on location `location` of location group `group` (its I/O handles
 * are the group's). */
int ceil_otf2_locate(ceil_otf2_writer *w, int32_t pid, int32_t tid, uint64_t location, uint32_t group);

/* Thread (pid, tid) has no more rows: its open rows closed and its event writer closed, so that its
 * buffer is written out and freed (memory for the threads still to come only). */
int ceil_otf2_thread_done(ceil_otf2_writer *w, int32_t pid, int32_t tid);

/* Write a chunk's rows. -EINVAL: a row earlier than the one before it on its thread, or a
 * thread without a location, or one said done. */
int ceil_otf2_events(ceil_otf2_writer *w, const ceil_otf2_cols *c);

/* n samples of metrics on metric location `location` (its own, not a thread's), in time order:
 * ts relative to t0, metric[i] the metric (class or instance) ref, value[i] a double. */
int ceil_otf2_metrics(ceil_otf2_writer *w, uint64_t location, const int64_t *ts, const uint32_t *metric,
                      const double *value, int64_t n);

/* A location that is not a thread's and has no records (a rank whose events never came): its empty
 * event and definition files, as readers expect for every location defined. */
int ceil_otf2_touch(ceil_otf2_writer *w, uint64_t location);

/* Close every open row, the event files and the (empty) local definition files: the events are
 * complete. */
int ceil_otf2_finish(ceil_otf2_writer *w);

/* Records written on a location (after ceil_otf2_finish); -1 for a location never written. */
int64_t ceil_otf2_location_events(const ceil_otf2_writer *w, uint64_t location);

/* The regions the events entered: region id k (dense, in order of first Enter) is source src[k]: a
 * call id below region_base, user region src[k] - region_base from it. Returns how many regions
 * there are (copies at most cap). */
int64_t ceil_otf2_regions(const ceil_otf2_writer *w, uint32_t *src, int64_t cap);

/* The I/O handles the events used, from the first: handle id k is (group[k], file[k], iopar[k]).
 * Returns how many are copied (at most cap), from handle `start` on. */
int64_t ceil_otf2_handles(const ceil_otf2_writer *w, int64_t start, uint32_t *group, int32_t *file, uint8_t *iopar,
                          int64_t cap);

/* One global definition (after ceil_otf2_finish): what is a CEIL_OTF2_DEF_*, a its arguments in
 * the OTF2 function's order after the writer (integers), s its string (DEF_STRING), members its
 * array (DEF_GROUP: uint64 members; DEF_METRIC_CLASS: member refs). */
enum {
    CEIL_OTF2_DEF_CLOCK, CEIL_OTF2_DEF_PARADIGM, CEIL_OTF2_DEF_STRING, CEIL_OTF2_DEF_NODE,
    CEIL_OTF2_DEF_LOCATION_GROUP, CEIL_OTF2_DEF_LOCATION, CEIL_OTF2_DEF_REGION, CEIL_OTF2_DEF_GROUP,
    CEIL_OTF2_DEF_COMM, CEIL_OTF2_DEF_IO_PARADIGM, CEIL_OTF2_DEF_IO_FILE, CEIL_OTF2_DEF_IO_HANDLE,
    CEIL_OTF2_DEF_METRIC_MEMBER, CEIL_OTF2_DEF_METRIC_CLASS, CEIL_OTF2_DEF_METRIC_INSTANCE,
    CEIL_OTF2_DEF_DESCRIPTION       /* the anchor file's description: s, no arguments */
};
int ceil_otf2_def(ceil_otf2_writer *w, int what, const int64_t *a, int64_t na, const char *s,
                  const uint64_t *members, int64_t nmembers);

/* Write the anchor file and close the archive (after the definitions). */
int ceil_otf2_close(ceil_otf2_writer *w);

void ceil_otf2_stats_get(const ceil_otf2_writer *w, ceil_otf2_stats *out);

/* The last error of the library, in words ("" none). */
const char *ceil_otf2_message(const ceil_otf2_writer *w);

/* Free the writer (after ceil_otf2_close, or to abandon an archive: its files stay, the caller
 * removes them). */
void ceil_otf2_free(ceil_otf2_writer *w);

#endif
