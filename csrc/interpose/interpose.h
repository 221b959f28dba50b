/*
 * interpose.h - the module interface of libceiling_interpose.so, the
 * LD_PRELOAD library `ceiling profile -- CMD` puts into the user's program.
 *
 * Separate from the kernel core (csrc/include/ceiling.h): its own library,
 * its own prefix (ceil_ip_), no OpenMP, no link to libceiling_core. The
 * model is Darshan's darshan-runtime: a small runtime (interpose.c, with
 * signals.c for its hidden signal handlers and exit.c for _exit and exec)
 * and one
 * module per API (null.c is the template that does nothing; posix.c counts
 * the POSIX file API, stdio.c the C stream API, files.c the per-file
 * records those two feed, mpi.c with mpi_p2p.c, mpi_coll.c, mpi_io.c and
 * mpi_fortran.c the MPI library through its PMPI names),
 * each wrapping the functions of its API, counting into per-thread blocks
 * and writing its lines of the record at the end.
 *
 * The runtime:
 *   - is active only when CEILING_INTERPOSE_OUT names the record's file
 *     (then ceil_ip_active() is 1); without it wrappers only pass through;
 *   - at load (constructor) reserves thread slots (CEILING_INTERPOSE_THREADS,
 *     default 1024, one mmap; a chunk twice as large as the last is mapped
 *     whenever more threads live at once), calls each module's init,
 *     resolves the real functions it needs itself, and puts its
 *     fatal-signal handler where the program has the default action, hidden
 *     from the program's queries (signals.c);
 *   - gives a thread its slot at its first counted call (one atomic add, or
 *     a pop from the free list), and nothing else on the hot path: no lock,
 *     no allocation. When a thread ends its slot, counts and all, goes to
 *     the next thread that needs one, so the sums keep every thread's;
 *   - writes the record (format below) once: at exit (atexit, at_quick_exit),
 *     at _exit/_Exit (exit.c), on a fatal signal (SIGSEGV, SIGBUS, SIGFPE,
 *     SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT left at the default
 *     action; then the signal is raised again with its default action, so
 *     the program still dies of it), or when a module calls ceil_ip_flush
 *     (an MPI module at MPI_Finalize); and as a record that later ones of
 *     the same image supersede before an exec (exit.c) and at a module's
 *     checkpoint. Not written: SIGKILL, a signal the program handles itself
 *     (unless it then exits), the exit_group system call made directly (Go),
 *     a statically linked or setuid program (the loader ignores LD_PRELOAD),
 *     anything from a child of vfork (it shares the parent's memory: the
 *     counts are the parent's);
 *   - after fork() in the child: every block is zeroed and the record is the
 *     child's own (pid, ppid, forked=1, start = the fork), so a parent and
 *     its children never count the same call twice. A threaded parent's
 *     other threads do not exist in the child and their slots are freed.
 *   - writes its notes on fd 2 only while fd 2 is the file it was at load.
 *
 * Writing a module (null.c is the commented template):
 *
 *     typedef struct { uint64_t calls, ticks; } my_counters;    // one thread's block
 *     static int my_init(ceil_ip_module *m) { return 0; }       // nonzero: module off
 *     static void my_report(ceil_ip_module *m, ceil_ip_out *o) { ...sum blocks, ceil_ip_put_* ... }
 *     static ceil_ip_module my_module = {.name = "my", .version = 1, .block_bytes = sizeof(my_counters),
 *                                        .init = my_init, .report = my_report};
 *     CEIL_IP_MODULE(my_module);
 *
 *     CEIL_IP_REAL_DECL(ssize_t, write, (int, const void *, size_t));
 *     CEIL_IP_EXPORT ssize_t write(int fd, const void *buf, size_t n)
 *     {
 *         uint64_t t0 = ceil_ip_ticks();
 *         ssize_t rc = CEIL_REAL(write)(fd, buf, n);
 *         my_counters *c = ceil_ip_block(&my_module);    // NULL: not counting
 *         if (c) { ceil_ip_add(&c->calls, 1); ceil_ip_add(&c->ticks, ceil_ip_ticks() - t0); }
 *         return rc;
 *     }
 *
 * ---- The record (CEIL_IP_FORMAT_VERSION 1) ----------------------------------
 * Line-oriented text appended, with one write(2) on an O_APPEND descriptor,
 * to the file CEILING_INTERPOSE_OUT names ("%p" in it becomes the pid, "%%"
 * a "%"), so that every process of a job (forked, exec'ed, launched by
 * mpirun) can add its record to one file without tearing another's, or
 * write a file of its own; to a file of its own (a pattern with %p) a record
 * is written 16 KiB at a time as it is rendered, whole lines each, so that
 * its text is not all resident in the program at its end. The caller gives a fresh path, in a directory of
 * its own that no one else can write (record.c refuses any other, and never
 * writes through a link or into another user's file). One record:
 *
 *     ceiling-interpose 1
 *     process pid=4242 ppid=4200 forked=0 host=node07 exe=/usr/bin/true reason=exit signal=0
 *             threads=1 slots=1 threads_lost=0 start_ns=... end_ns=... start_unix_ns=... utime_us=... stime_us=...
 *     module name=null version=1 enabled=1
 *     null flushes=1 calls=0 threads=0
 *     end pid=4242 truncated=0 self_read=13 self_reads=2
 *
 * (the process line is one line.) Every line is a word, then space-separated
 * key=value fields. The first line opens a record and carries the format
 * version; "end" closes it (a record without "end" was cut short: the
 * process died while writing). Values are decimal integers or strings in
 * which every byte outside '!'..'~' and every '%' and '=' is written %XX.
 * "process": reason is exit (`by` = _exit or _Exit when the program
 * ended through it), signal (signal = its number), flush (a
 * module's ceil_ip_flush; then the module's name is in `by`), checkpoint
 * (ceil_ip_checkpoint, `by` likewise: the same process writes a later
 * record, which supersedes it, unless it is killed first) or exec (`by` =
 * the exec function: written before it; when it fails the image goes on
 * and a later record supersedes this one, when it succeeds the new image
 * writes records of its own with the same pid and a later start_ns, so a
 * reader keys a process's image on host, pid and start_ns); *_ns are
 * CLOCK_MONOTONIC nanoseconds (comparable between processes of a node),
 * start_unix_ns is CLOCK_REALTIME at start (to align nodes); utime_us and
 * stime_us the process's user and system CPU time so far (getrusage, all
 * its threads, not its children); threads are the threads
 * that were given a slot, slots the slots given out (fewer when ended
 * threads' slots were reused), threads_lost the threads that counted
 * nothing because no memory was left for more slots. "end": self_read and
 * self_reads, the bytes and read calls the runtime made itself (/proc/self
 * and sysfs files), which the kernel counts in the program's rchar and syscr.
 * One "module" line per registered module, in name
 * order, each followed by that module's own lines, every one starting with
 * the module's name; each module documents its lines at the top of its file
 * (null.c, files.c, posix.c, stdio.c, mpi.c). Readers skip keys and lines they do not know: adding
 * fields does not change the version, changing a field's meaning does. Every line kind, key and
 * name is in calls.def, from which the build writes interpose_names.json for the Python reader.
 */
#ifndef CEIL_INTERPOSE_H
#define CEIL_INTERPOSE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CEIL_IP_FORMAT_VERSION 1

/* The names of the record: calls, classes, lines and keys (calls.def). */
#include "calls.def"
#define CEIL_IP_KT_U_(key) CEIL_IPK_##key = 'u',
#define CEIL_IP_KT_I_(key) CEIL_IPK_##key = 'i',
#define CEIL_IP_KT_S_(key) CEIL_IPK_##key = 's',
#define CEIL_IP_KT_P_(key) CEIL_IPK_##key = 'p',

/* Every wrapped call's number (calls.def, the per-event channel): CEIL_IP_CALL_open, CEIL_IP_CALL_MPI_Send_c. */
#define CEIL_IP_CALL_ENUM_(fn, cls) CEIL_IP_CALL_##fn,
#define CEIL_IP_CALL_ENUM_C_(fn, cls) CEIL_IP_CALL_##fn, CEIL_IP_CALL_##fn##_c,
enum ceil_ip_call { CEIL_IP_CALLS(CEIL_IP_CALL_ENUM_, CEIL_IP_CALL_ENUM_C_) CEIL_IP_CALL_COUNT };

#define CEIL_IP_ENV_OUT "CEILING_INTERPOSE_OUT"          /* the record's path; unset: runtime inactive */
#define CEIL_IP_ENV_THREADS "CEILING_INTERPOSE_THREADS"  /* thread slots reserved at load (default 1024; more are mapped as needed) */
#define CEIL_IP_DEFAULT_THREADS 1024
#define CEIL_IP_MAX_MODULES 32           /* registered modules beyond this are left off (noted on stderr) */
#define CEIL_IP_MAX_BLOCK 8192           /* bytes of one module's per-thread block, at most */
#define CEIL_IP_RECORD_BYTES (1 << 20)   /* the record is built in a static buffer this large */

/* What a wrapper the program must resolve to is marked with; everything
 * else in the library is hidden. */
#define CEIL_IP_EXPORT __attribute__((visibility("default")))

typedef struct ceil_ip_out ceil_ip_out;   /* the record being written (interpose.c) */

/* One module. The first five fields are the module's; the rest are the
 * runtime's, zero in the module's definition. */
typedef struct ceil_ip_module {
    const char *name;          /* [a-z0-9_]+, unique: the word starting its record lines */
    uint32_t version;          /* of the module's own lines; bump when their meaning changes */
    uint32_t block_bytes;      /* one thread's counters (zeroed at load and after fork), <= CEIL_IP_MAX_BLOCK */
    /* At load, before any wrapper counts, in name order; 0 = ready, else the
     * module stays off (enabled=0 in the record, ceil_ip_block gives NULL).
     * May call CEIL_REAL to resolve its functions early. Not called when the
     * runtime is inactive. */
    int (*init)(struct ceil_ip_module *self);
    /* At flush: write the module's lines with ceil_ip_line/ceil_ip_put_*,
     * reading every thread's block (ceil_ip_threads, ceil_ip_block_of). May
     * run in a signal handler: no allocation, no lock, no stdio. */
    void (*report)(struct ceil_ip_module *self, ceil_ip_out *out);
    /* runtime-owned */
    uint32_t offset_;          /* of this module's block in a thread's slot */
    int32_t enabled_;          /* 1 once init returned 0 */
} ceil_ip_module;

/* Register a module: a pointer to it in the linker section
 * "ceil_ip_modules", which interpose.c walks (__start_/__stop_), so the
 * runtime has no list of modules to keep in step. */
#define CEIL_IP_MODULE(mod)                                                                        \
    static ceil_ip_module *const mod##_regp_                                                       \
        __attribute__((section("ceil_ip_modules"), used, aligned(sizeof(void *)))) = &(mod)

/* ---- The hot path ---------------------------------------------------------- */

/* The calling thread's slot (its modules' blocks), NULL until it has one.
 * Internal to the library: initial-exec TLS, one load, no __tls_get_addr. */
extern __thread char *ceil_ip_slot_ __attribute__((tls_model("initial-exec"), visibility("hidden")));

/*
 * char *ceil_ip_claim_(void)
 *
 * Slow path of ceil_ip_block: give the calling thread a slot (one atomic
 * add, or a freed slot) and return it, or NULL when the runtime is inactive
 * or no memory is left for more slots (the thread is then counted in
 * threads_lost, once).
 */
char *ceil_ip_claim_(void) __attribute__((visibility("hidden")));

/* The thread's "no slot, do not ask again" marker. */
#define CEIL_IP_NO_SLOT ((char *)1)

/*
 * Nesting: a wrapper whose real function may itself call wrapped functions
 * (an MPI call whose progress engine reads a socket, MPI-IO calling pread,
 * an MPI-IO collective calling MPI_Allreduce) raises the calling thread's
 * depth around its real call (ceil_ip_enter / ceil_ip_leave), and while it
 * is raised ceil_ip_block gives every module NULL: the inner calls pass
 * through uncounted and their time is the outer call's, counted once.
 * Only a thread that counts raises it, so a pass-through never does.
 */
extern __thread int ceil_ip_depth_ __attribute__((tls_model("initial-exec"), visibility("hidden")));

static inline void ceil_ip_enter(void) { ceil_ip_depth_++; }
static inline void ceil_ip_leave(void) { ceil_ip_depth_--; }

/*
 * void *ceil_ip_block(const ceil_ip_module *m)
 *
 * The calling thread's block of module m, zeroed when first given, or NULL
 * when nothing is to be counted (runtime off, module off, no slot left).
 * After the record is written a thread that has a block keeps it, and what
 * it counts there is not reported. A wrapper calls it after the real
 * function; the first call of a thread pays the claim, every later one a
 * TLS load and a compare.
 */
static inline void *ceil_ip_block(const ceil_ip_module *m)
{
    char *s = ceil_ip_slot_;
    if (__builtin_expect(s == NULL, 0))
        s = ceil_ip_claim_();
    if (s == NULL || s == CEIL_IP_NO_SLOT || !m->enabled_ || ceil_ip_depth_ != 0)
        return NULL;
    return s + m->offset_;
}


/*
 * unsigned ceil_ip_size_bucket(uint64_t n)
 *
 * The size histogram every module keeps: CEIL_IP_HIST_BUCKETS power-of-two
 * buckets by bytes, named in the record by ceil_ip_bucket_names: lt1k =
 * 0 .. 1023 bytes, 1k = 1 KiB .. 2 KiB - 1, 2k, 4k, ..., 512k, 1m, ...,
 * 32m = 32 MiB .. 64 MiB - 1, ge64m = 64 MiB and more.
 */
#define CEIL_IP_HIST_BUCKETS 18
extern const char *const ceil_ip_bucket_names[CEIL_IP_HIST_BUCKETS] __attribute__((visibility("hidden")));

static inline unsigned ceil_ip_size_bucket(uint64_t n)
{
    if (n < 1024)
        return 0;
    const unsigned b = 63u - (unsigned)__builtin_clzll(n) - 9u;   /* 1 KiB .. 2 KiB - 1 -> 1 */
    return b < CEIL_IP_HIST_BUCKETS - 1 ? b : CEIL_IP_HIST_BUCKETS - 1;
}

/*
 * void ceil_ip_add(uint64_t *counter, uint64_t n)
 *
 * Add n to a counter of the caller's own block. A relaxed load and store,
 * not an atomic add: only the owning thread writes the block, and the flush
 * (another thread, or a signal handler) reads it with relaxed loads, so
 * there is no data race and no locked instruction on the hot path. A flush
 * during the add sees the old or the new value.
 */
static inline void ceil_ip_add(uint64_t *counter, uint64_t n)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ---- The per-event channel (trace.c; `ceiling trace`, issue 28) ------------
 * On when CEILING_TRACE_DIR names a directory: every counted call is also one
 * fixed-size event in the calling thread's buffer (trace.c has the file's
 * format). Off, a wrapper pays one load and a predicted branch. */
#define CEIL_IP_ENV_TRACE_DIR "CEILING_TRACE_DIR"        /* the event files' directory; unset: no events */
#define CEIL_IP_ENV_TRACE_BUFFER "CEILING_TRACE_BUFFER"  /* events per thread buffer (default 4096) */
#define CEIL_IP_ENV_TRACE_CALLS "CEILING_TRACE_CALLS"      /* keep only these calls or classes (comma list) */
#define CEIL_IP_ENV_TRACE_EXCLUDE "CEILING_TRACE_EXCLUDE"  /* drop these calls or classes (comma list) */
#define CEIL_IP_ENV_TRACE_MIN_NS "CEILING_TRACE_MIN_NS"    /* drop calls shorter than this */
#define CEIL_IP_ENV_TRACE_MAX_PER_CALL "CEILING_TRACE_MAX_PER_CALL"  /* keep the first N of each call per thread */
#define CEIL_IP_ENV_TRACE_WINDOW "CEILING_TRACE_WINDOW"    /* START:END[@ORIGIN]: seconds after ORIGIN (unix
                                                               ns, the run's start), else after the image's */
#define CEIL_IP_ENV_TRACE_MAX_BYTES "CEILING_TRACE_MAX_BYTES"  /* event bytes for the whole run (all processes) */
/* Why events were dropped: the DROP events' call, results/events.py Dropped's names in this order. */
enum { CEIL_IP_DROP_MAX_SIZE, CEIL_IP_DROP_CALLS, CEIL_IP_DROP_EXCLUDE, CEIL_IP_DROP_MIN_DURATION,
       CEIL_IP_DROP_MAX_PER_SITE, CEIL_IP_DROP_WINDOW, CEIL_IP_DROP_BUFFER, CEIL_IP_DROP_COUNT };
#define CEIL_IP_TRACE_MAGIC "CEILTRC1"
#define CEIL_IP_TRACE_VERSION 1

/* DROP: call = the reason, bytes = events dropped so far, t0 = the first one's ticks (cumulative: the last counts).
 * SYNC (mpi_clock.c, a wrapped launch's ranks): this rank's clock against world rank 0's, measured at MPI_Init
 * (call 0) or MPI_Finalize (call 1): t0 = ticks when the sync ended, dur = the ticks it took (the tracer's own
 * time), offset = this rank's CLOCK_MONOTONIC ns at the best round's midpoint, result = rank 0's clock minus this
 * one's then (ns), bytes = that round's round trip (ns; the offset's error is at most half of it; 0 on rank 0),
 * file = 1 when this rank's boot is rank 0's (one clock), 0 another boot, -1 unknown. Readers skip kinds they
 * do not know. */
enum { CEIL_IP_EV_CALL = 0, CEIL_IP_EV_INSTANT = 1, CEIL_IP_EV_CLOCK = 2, CEIL_IP_EV_REGION = 3, CEIL_IP_EV_DROP = 4,
       CEIL_IP_EV_SYNC = 5 };
/* instants: the codes of results/events.py's INSTANT_* */
enum { CEIL_IP_INSTANT_PROCESS_START = 0, CEIL_IP_INSTANT_PROCESS_END = 1, CEIL_IP_INSTANT_THREAD_START = 2,
       CEIL_IP_INSTANT_THREAD_END = 3, CEIL_IP_INSTANT_FORK = 4, CEIL_IP_INSTANT_EXEC = 5 };

/* One event, 48 bytes. dur: UINT64_MAX for an instant. file and offset by the call's kind:
 * - I/O (POSIX, stdio, copy) and MPI-IO: files.c's record id (0 none) and the byte offset in the file
 *   (-1 unknown; MPI-IO: mpi_io.c says how it is found);
 * - MPI point-to-point and waits: the peer as a world rank (a receive's from its status: ANY_SOURCE
 *   resolved; the communicator's ranks translated, mpi_comm.c; -1 unknown or none) and the communicator's
 *   id (high 32 bits: mpi_comm_id, 0 MPI_COMM_WORLD) with the tag (low 32 bits; -1 none);
 * - MPI collectives in C (not the neighbourhood ones): for a rooted one (Bcast, Reduce, Gather(v),
 *   Scatter(v), Ibcast, Ireduce) the root as a world rank (-1 unknown), else -1; the communicator's id
 *   with tag -1; the other MPI calls: -1 and -1. */
typedef struct ceil_ip_trace_ev {
    uint64_t t0;          /* ticks (ceil_ip_ticks) */
    uint64_t dur;         /* ticks */
    int64_t result;
    uint64_t bytes;
    int64_t offset;
    uint16_t call;        /* calls.def id, or the instant's code */
    uint16_t kind;        /* CEIL_IP_EV_* */
    int32_t file;
} ceil_ip_trace_ev;
_Static_assert(sizeof(ceil_ip_trace_ev) == 48, "an event is 48 bytes");

typedef struct ceil_ip_trace_hdr {
    char magic[8];
    uint32_t version, event_bytes;
    uint64_t calls_hash;        /* FNV-1a 64 of calls.def's names in id order, joined by newlines */
    double ns_per_tick;         /* at the header's writing; clock events give the rate over the file */
    uint64_t t0_ns, t0_unix_ns, t0_ticks;
    int32_t pid, ppid, tid, rank;
    char host[64];
    uint64_t boot;              /* FNV-1a 64 of /proc/sys/kernel/random/boot_id: one per node's boot, 0 unknown
                                   (files before it: pad, 0): processes of one boot share CLOCK_MONOTONIC */
    char pad[256 - 8 - 8 - 8 - 8 - 24 - 16 - 64 - 8];
} ceil_ip_trace_hdr;
_Static_assert(sizeof(ceil_ip_trace_hdr) == 256, "the header is 256 bytes");

extern int ceil_ip_trace_on_ __attribute__((visibility("hidden")));
extern int32_t ceil_ip_trace_rank_ __attribute__((visibility("hidden")));   /* MPI world rank, -1 */
void ceil_ip_trace_put_(const ceil_ip_trace_ev *e) __attribute__((visibility("hidden")));
void ceil_ip_trace_init_(void) __attribute__((visibility("hidden")));
void ceil_ip_trace_instant_(uint16_t code) __attribute__((visibility("hidden")));
/* write every thread's pending events (the record's places); final: and stop */
void ceil_ip_trace_flush_(int final, const char *reason) __attribute__((visibility("hidden")));
void ceil_ip_trace_thread_end_(void) __attribute__((visibility("hidden")));
void ceil_ip_trace_forked_(void) __attribute__((visibility("hidden")));
void ceil_ip_trace_fork_parent_(void) __attribute__((visibility("hidden")));
void ceil_ip_trace_line_(const char *suffix, const char *line, size_t n) __attribute__((visibility("hidden")));
void ceil_ip_region_forked_(void) __attribute__((visibility("hidden")));
/* A SYNC event (above) into the calling thread's stream, written at its next write-out beside the clock event
 * (no limit drops it); the boot's hash (0 unknown). */
void ceil_ip_trace_sync_(uint16_t phase, uint64_t cost_ticks, int64_t offset_ns, uint64_t rtt_ns, uint64_t at_ns,
                         int32_t same_boot) __attribute__((visibility("hidden")));
uint64_t ceil_ip_trace_boot_(void) __attribute__((visibility("hidden")));

/*
 * void ceil_ip_event_io(const ceil_ip_module *m, enum ceil_ip_call call, uint64_t t0, uint64_t t1,
 *                       int64_t result, uint64_t bytes, int32_t file, int64_t offset)
 * void ceil_ip_event(const ceil_ip_module *m, enum ceil_ip_call call, uint64_t t0, uint64_t t1,
 *                    int64_t result, uint64_t bytes)
 *
 * A wrapper that counted a call (its ceil_ip_block was not NULL) calls one
 * of them once, after its counts, with the call's number in calls.def
 * (CEIL_IP_CALL_<fn>), its start and end in ceil_ip_ticks, what it returned,
 * the bytes it moved and, for I/O, the file (files.c's id, 0 none) and the
 * offset (-1 unknown); null.c shows where. With the trace off: nothing.
 * The record (the counts) stays as it is: a reader that ignores events loses nothing.
 */
static inline void ceil_ip_event_io(const ceil_ip_module *m, enum ceil_ip_call call, uint64_t t0, uint64_t t1,
                                    int64_t result, uint64_t bytes, int32_t file, int64_t offset)
{
    (void)m;
    if (__builtin_expect(!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_RELAXED), 1))
        return;
    const ceil_ip_trace_ev e = {.t0 = t0, .dur = t1 - t0, .result = result, .bytes = bytes, .offset = offset,
                                .call = (uint16_t)call, .kind = CEIL_IP_EV_CALL, .file = file};
    ceil_ip_trace_put_(&e);
}

static inline uint64_t ceil_ip_ticks(void);

/* The same for a wrapper that kept only the call's duration (ticks): it ended now. */
static inline void ceil_ip_event_dur(const ceil_ip_module *m, enum ceil_ip_call call, uint64_t ticks, int64_t result,
                                     uint64_t bytes, int32_t file, int64_t offset)
{
    if (__builtin_expect(!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_RELAXED), 1))
        return;
    const uint64_t t1 = ceil_ip_ticks();
    ceil_ip_event_io(m, call, t1 - ticks, t1, result, bytes, file, offset);
}

static inline void ceil_ip_event(const ceil_ip_module *m, enum ceil_ip_call call, uint64_t t0, uint64_t t1,
                                 int64_t result, uint64_t bytes)
{
    ceil_ip_event_io(m, call, t0, t1, result, bytes, 0, -1);
}

/*
 * uint64_t ceil_ip_read(const uint64_t *counter)
 *
 * Read another thread's counter at flush time (the relaxed load that pairs
 * with ceil_ip_add).
 */
static inline uint64_t ceil_ip_read(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/*
 * uint64_t ceil_ip_now_ns(void)
 *
 * CLOCK_MONOTONIC in nanoseconds: the clock of every *_ns in the record.
 * Through the vDSO it costs a few tens of ns and no system call where the
 * clocksource allows (tsc, kvm-clock, arch timer).
 */
static inline uint64_t ceil_ip_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * uint64_t ceil_ip_ticks(void)
 * double ceil_ip_ns_per_tick(void)
 *
 * The wrappers' clock: what a module sums for the time spent in the real
 * functions. Two clock_gettime calls were nearly all of what a wrapper
 * added (24 ns each through the vDSO, 42-50 ns per call in all, on an AMD
 * EPYC KVM guest); rdtsc is 10. So where the kernel itself keeps time with
 * the TSC (clocksource "tsc": it found it invariant and in step across
 * CPUs) a tick is a TSC tick, and a module's report converts its sums with
 * ceil_ip_ns_per_tick(), the rate the TSC ran against CLOCK_MONOTONIC
 * between load and now (call it once per report). Elsewhere a tick is a
 * CLOCK_MONOTONIC nanosecond and the rate is 1. Chosen once at load, before
 * any module's init; before that (and when the runtime is inactive) ticks
 * are nanoseconds.
 */
extern int ceil_ip_use_tsc_ __attribute__((visibility("hidden")));

static inline uint64_t ceil_ip_ticks(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(ceil_ip_use_tsc_, 1))
        return __builtin_ia32_rdtsc();
#endif
    return ceil_ip_now_ns();
}

double ceil_ip_ns_per_tick(void) __attribute__((visibility("hidden")));

/*
 * uint64_t ceil_ip_ticks_ns(uint64_t ticks, double ns_per_tick)
 *
 * A sum of ticks in nanoseconds, rounded, at the rate ceil_ip_ns_per_tick gave.
 */
static inline uint64_t ceil_ip_ticks_ns(uint64_t ticks, double ns_per_tick)
{
    return (uint64_t)((double)ticks * ns_per_tick + 0.5);
}

/*
 * int ceil_ip_active(void)
 *
 * 1 while the runtime counts: loaded with CEILING_INTERPOSE_OUT set, and the
 * record not yet written. A wrapper may use it to skip its own timing.
 */
int ceil_ip_active(void) __attribute__((visibility("hidden")));

/* ---- Real functions ---------------------------------------------------------
 * Declare once per wrapped function, at file scope:
 *
 *     CEIL_IP_REAL_DECL(int, open, (const char *, int, ...));
 *
 * then CEIL_REAL(open)(path, flags, mode) calls the next definition of open
 * after this library (dlsym(RTLD_NEXT), Darshan's MAP_OR_FAIL), resolved at
 * the first use and cached; later uses are one relaxed load. Two threads
 * resolving at once both store the same pointer. A function that cannot be
 * found stops the program (message on stderr, abort): a wrapper without its
 * real function has nothing correct left to do. dlsym may allocate, so a
 * module that wraps the allocator must resolve it in its init, not lazily.
 */
#define CEIL_IP_REAL_DECL(ret, fn, params)                                                         \
    typedef ret(*ceil_ip_##fn##_fn_) params;                                                      \
    static ceil_ip_##fn##_fn_ ceil_ip_real_##fn##_

#define CEIL_REAL(fn)                                                                              \
    (__extension__({                                                                               \
        ceil_ip_##fn##_fn_ f_ = __atomic_load_n(&ceil_ip_real_##fn##_, __ATOMIC_RELAXED);          \
        if (__builtin_expect(f_ == NULL, 0))                                                       \
            f_ = (ceil_ip_##fn##_fn_)ceil_ip_resolve(#fn, (void **)&ceil_ip_real_##fn##_);         \
        f_;                                                                                        \
    }))

/*
 * void *ceil_ip_resolve(const char *name, void **cache)
 *
 * dlsym(RTLD_NEXT, name) (else in the object an earlier
 * ceil_ip_resolve_from found: it is that with no caller), stored in *cache;
 * aborts when there is none. The slow path of CEIL_REAL.
 */
void *ceil_ip_resolve(const char *name, void **cache) __attribute__((visibility("hidden")));

/*
 * void *ceil_ip_resolve_from(const char *name, void **cache, const void *caller)
 * CEIL_REAL_FROM(fn, caller)
 *
 * The same for an API whose library the program may have loaded with
 * dlopen(RTLD_LOCAL) (mpi4py loads libmpi that way), out of RTLD_NEXT's
 * reach: when RTLD_NEXT finds nothing, the name is looked up in the object
 * that made the call (caller: an address inside it, the wrapper's
 * __builtin_return_address(0)) and the libraries it depends on, and that
 * object is remembered for later lookups. Aborts like CEIL_REAL when the
 * name is nowhere. ceil_ip_lookup is the lookup without the abort (NULL:
 * not found), for names an API may or may not have.
 */
void *ceil_ip_resolve_from(const char *name, void **cache, const void *caller) __attribute__((visibility("hidden")));
void *ceil_ip_lookup(const char *name, const void *caller) __attribute__((visibility("hidden")));

#define CEIL_REAL_FROM(fn, caller)                                                                 \
    (__extension__({                                                                               \
        ceil_ip_##fn##_fn_ f_ = __atomic_load_n(&ceil_ip_real_##fn##_, __ATOMIC_RELAXED);          \
        if (__builtin_expect(f_ == NULL, 0))                                                       \
            f_ = (ceil_ip_##fn##_fn_)ceil_ip_resolve_from(#fn, (void **)&ceil_ip_real_##fn##_,     \
                                                          (caller));                               \
        f_;                                                                                        \
    }))

/*
 * void *ceil_ip_resolve_narrow(const char *name, void **cache, const void *caller, int *narrow)
 * CEIL_REAL_NARROW(fn, caller, narrow)
 *
 * CEIL_REAL_FROM for a function whose name ends in _c (MPI 4's large-count
 * forms): where it is nowhere, its name without the _c, with *narrow set to
 * 1 (before the cache, which is read with acquire). The caller calls that
 * with its own arguments only where the two signatures differ in integer
 * widths alone and every value fits the narrower (mpi.h, PMPI_REAL_S).
 */
void *ceil_ip_resolve_narrow(const char *name, void **cache, const void *caller, int *narrow)
    __attribute__((visibility("hidden")));

#define CEIL_REAL_NARROW(fn, caller, narrow)                                                       \
    (__extension__({                                                                               \
        ceil_ip_##fn##_fn_ f_ = __atomic_load_n(&ceil_ip_real_##fn##_, __ATOMIC_ACQUIRE);          \
        if (__builtin_expect(f_ == NULL, 0))                                                       \
            f_ = (ceil_ip_##fn##_fn_)ceil_ip_resolve_narrow(#fn, (void **)&ceil_ip_real_##fn##_,   \
                                                            (caller), (narrow));                   \
        f_;                                                                                        \
    }))

/* ---- Writing the record (from a module's report) ---------------------------
 * Async-signal-safe: no stdio, no allocation. Output past
 * CEIL_IP_RECORD_BYTES is dropped and the record says truncated=1. */

/*
 * void ceil_ip_line(ceil_ip_out *o, const ceil_ip_module *m)
 *
 * Start a line of module m's: ends the previous line, writes m's name.
 */
void ceil_ip_line(ceil_ip_out *o, const ceil_ip_module *m) __attribute__((visibility("hidden")));

/* A note on stderr ("ceiling interpose: " a b), through the raw system call:
 * usable before any real function is resolved, and from a signal handler. */
void ceil_ip_say(const char *a, const char *b) __attribute__((visibility("hidden")));

/* The runtime's constructor chooses the wrappers' clock (clock.c) before any module's init. */
void ceil_ip_clock_init_(void) __attribute__((visibility("hidden")));
/* clock.c: the kernel's boot_id (a UUID, new at every boot) hashed, FNV-1a 64, 0 unknown: the processes of one
 * boot share CLOCK_MONOTONIC (the trace's header carries it). Raw system calls, counted as the runtime's read. */
uint64_t ceil_ip_boot_id_(void) __attribute__((visibility("hidden")));

/* Bytes the runtime and its modules read themselves (/proc/self files at
 * the record): the kernel counts them in the program's rchar, so the
 * record's "end" line says them (self_read, and the calls: self_reads) for
 * the reader to take off. Called once per read call, whatever it returned. */
void ceil_ip_self_read_(long n) __attribute__((visibility("hidden")));

/*
 * void ceil_ip_put_u64(ceil_ip_out *o, const char *key, uint64_t v)
 * void ceil_ip_put_i64(ceil_ip_out *o, const char *key, int64_t v)
 * void ceil_ip_put_str(ceil_ip_out *o, const char *key, const char *v)
 *
 * Append " key=value" to the current line; key is [a-z0-9_]+, a string is
 * escaped as the format says.
 */
void ceil_ip_put_u64(ceil_ip_out *o, const char *key, uint64_t v) __attribute__((visibility("hidden")));
void ceil_ip_put_i64(ceil_ip_out *o, const char *key, int64_t v) __attribute__((visibility("hidden")));
void ceil_ip_put_str(ceil_ip_out *o, const char *key, const char *v) __attribute__((visibility("hidden")));

/*
 * CEIL_IP_PUT_U64(o, key, v)   CEIL_IP_PUT_I64(o, key, v)   CEIL_IP_PUT_STR(o, key, v)
 *
 * The same with the key named bare (CEIL_IP_PUT_U64(o, calls, n)): it must
 * be in calls.def's CEIL_IP_KEYS with that type, or the file does not compile
 * (a negative array size), so no module writes a key the Python reader does
 * not know. The keys named at run time (the buckets, files.c's counters,
 * proc.c's /proc/self/io fields) come from calls.def's lists themselves.
 */
enum ceil_ip_key_type_ { CEIL_IP_KEYS(CEIL_IP_KT_U_, CEIL_IP_KT_I_, CEIL_IP_KT_S_, CEIL_IP_KT_P_) CEIL_IP_KT_END_ };
#define CEIL_IP_KEY_(key, type) ((void)sizeof(char[CEIL_IPK_##key == (type) ? 1 : -1]), #key)
#define CEIL_IP_PUT_U64(o, key, v) ceil_ip_put_u64((o), CEIL_IP_KEY_(key, 'u'), (v))
#define CEIL_IP_PUT_I64(o, key, v) ceil_ip_put_i64((o), CEIL_IP_KEY_(key, 'i'), (v))
#define CEIL_IP_PUT_STR(o, key, v) ceil_ip_put_str((o), CEIL_IP_KEY_(key, 's'), (v))
/* peer: a world rank, or the word "other" */
#define CEIL_IP_PUT_PEER_U64(o, key, v) ceil_ip_put_u64((o), CEIL_IP_KEY_(key, 'p'), (v))
#define CEIL_IP_PUT_PEER_STR(o, key, v) ceil_ip_put_str((o), CEIL_IP_KEY_(key, 'p'), (v))

/*
 * void ceil_ip_put_fn_calls(ceil_ip_out *o, const ceil_ip_module *m, const char *const *names,
 *                           const uint64_t *calls, int n)
 *
 * One line "NAME fn=<names[i]> calls=<calls[i]>" per function called at least
 * once: the per-function counts every module that wraps an API writes.
 */
void ceil_ip_put_fn_calls(ceil_ip_out *o, const ceil_ip_module *m, const char *const *names, const uint64_t *calls,
                          int n) __attribute__((visibility("hidden")));

/*
 * int ceil_ip_threads(void)
 *
 * Slots given out so far: blocks 0 .. ceil_ip_threads() - 1 may exist
 * (ceil_ip_block_of gives NULL for one that does not).
 */
int ceil_ip_threads(void) __attribute__((visibility("hidden")));

/*
 * const void *ceil_ip_block_of(const ceil_ip_module *m, int thread)
 *
 * Thread slot `thread`'s block of module m (read its counters with
 * ceil_ip_read), NULL outside 0 .. ceil_ip_threads() - 1.
 */
const void *ceil_ip_block_of(const ceil_ip_module *m, int thread) __attribute__((visibility("hidden")));

/*
 * int ceil_ip_flush(const char *by)
 *
 * Write the record now, once (reason=flush, by=<by>, a module's name), and
 * stop counting: what follows is not recorded, and the flush at exit does
 * nothing. For a module whose API has an end the program reaches before
 * exit (MPI_Finalize). Returns 1 when this call wrote it, 0 when it was
 * already written or the runtime is inactive.
 */
int ceil_ip_flush(const char *by) __attribute__((visibility("hidden")));

/*
 * int ceil_ip_checkpoint(const char *by)
 *
 * Write the record now (reason=checkpoint, by=<by>) and go on counting: the
 * record at exit (or on a fatal signal) is written too and supersedes it;
 * a reader keeps a process's last complete record. For an API end after
 * which the process may be killed before it exits (MPI_Finalize: some
 * launchers end the ranks soon after), so that what was counted survives,
 * while what the program does after it is still counted. A thread that
 * first counts while the checkpoint is written counts from its next call.
 * `hand`, when not NULL, is given the record's text (and `arg`) before it
 * is written, to send it elsewhere too (the MPI module gathers every rank's
 * to one at MPI_Finalize). Returns 1 when this call wrote it, 0 when the
 * runtime was not active.
 */
typedef void (*ceil_ip_hand_fn)(const char *text, size_t len, void *arg);
int ceil_ip_checkpoint(const char *by, ceil_ip_hand_fn hand, void *arg) __attribute__((visibility("hidden")));

/*
 * int ceil_ip_append(const char *text, size_t len)
 * const char *ceil_ip_out_pattern(void)
 *
 * Append text (whole records, another process's included) to this
 * process's record file, with one write; 0, or -1 (said on stderr). The
 * file's pattern as CEILING_INTERPOSE_OUT gave it ("%p" not expanded).
 */
int ceil_ip_append(const char *text, size_t len) __attribute__((visibility("hidden")));
const char *ceil_ip_out_pattern(void) __attribute__((visibility("hidden")));

/* ---- Between the runtime's own files (interpose.c, signals.c, exit.c, resolve.c) ---- */
struct sigaction;

/* signals.c: put `handler` in place of the default action of the fatal
 * signals, hidden from the program's queries; the real sigaction. */
void ceil_ip_signals_start_(void (*handler)(int)) __attribute__((visibility("hidden")));
int ceil_ip_sigaction_real_(int sig, const struct sigaction *act, struct sigaction *old)
    __attribute__((visibility("hidden")));
void ceil_ip_signals_forked_(void) __attribute__((visibility("hidden")));

/* exit.c's wrappers, before the real call: the record at _exit (reason=exit,
 * by=<the function>), and before an exec (reason=exec; counting goes on, so
 * an exec that fails loses nothing and a later record of the same image
 * supersedes it; none where no thread has counted anything, as in a child
 * of fork that execs at once). Nothing in a vfork child. */
void ceil_ip_before_exit_(const char *by) __attribute__((visibility("hidden")));
void ceil_ip_before_exec_(const char *by) __attribute__((visibility("hidden")));
void ceil_ip_exit_resolve_(void) __attribute__((visibility("hidden")));   /* at load: no dlsym in a vfork child */

/* resolve.c: note which file fd 2 is at load; ceil_ip_say writes only while
 * fd 2 is still that file. */
void ceil_ip_note_stderr_(void) __attribute__((visibility("hidden")));

#endif /* CEIL_INTERPOSE_H */
