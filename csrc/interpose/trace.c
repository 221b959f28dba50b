/*
 * trace.c - the per-event channel of libceiling_interpose.so (`ceiling
 * trace`, issue 28): ceil_ip_event's body (interpose.h).
 *
 * On only when CEILING_TRACE_DIR names a directory (and the runtime is
 * active); off, ceil_ip_event costs one load and a predicted branch. Each
 * thread appends fixed-size events (ceil_ip_trace_ev, 48 bytes) to a buffer
 * of its own, mapped at its first event (CEILING_TRACE_BUFFER events,
 * default 4096), with no lock and no allocation after that. The thread
 * writes the buffer out itself when it is full, into its file
 * DIR/trace-<pid>-<tid>-<start_ns>.bin (start_ns: its image's load, so an
 * exec'ed image never writes into the file of the one before); the runtime
 * writes every thread's pending events wherever it writes the record (exit,
 * _exit, exec, MPI_Finalize, fatal signals), with raw system calls only
 * (async-signal-safe). A buffer that another writer holds is skipped (the
 * busy flag), never waited on.
 *
 * The file: a 256-byte header (ceil_ip_trace_hdr: magic "CEILTRC1",
 * version, event size, the FNV-1a 64 hash of the call names in calls.def's
 * id order, ns per tick at the header's writing, t0 on CLOCK_MONOTONIC and
 * CLOCK_REALTIME with the ticks at t0, pid, ppid, tid, rank, host, boot), then
 * events. Besides the calls, events of kind CEIL_IP_EV_INSTANT (process and
 * thread start and end, fork, exec: call = the instant's code), and
 * CEIL_IP_EV_CLOCK, written at every write-out: its t0 in ticks, offset the
 * CLOCK_MONOTONIC ns of the same instant (so a reader fits the tick rate
 * over the whole file), dur the ticks the write-out before it took (the
 * tracer's own time), result the MPI world rank known then; and
 * CEIL_IP_EV_SYNC, a wrapped launch's clock measurements against rank 0's
 * (mpi_clock.c; interpose.h has their fields), written beside the clock
 * event at the next write-out. The header's boot (a hash of the kernel's
 * boot_id, read once at load) tells which processes share CLOCK_MONOTONIC.
 * A crash while a
 * write is under way leaves at most a torn last event, which a reader skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "interpose.h"
#include "mpi_trace.h"

#define TRACE_MAX_THREADS 4096
#define TRACE_DEFAULT_EVENTS 4096

typedef struct trace_buf {
    int busy;                      /* atomic: a write-out holds the buffer */
    int fd;                        /* the thread's file, -1 until its first write-out */
    int32_t tid;
    uint32_t n;                    /* events pending (atomic: the owner stores, a flush loads) */
    uint64_t written;              /* events written out */
    uint64_t own_ticks;            /* ticks of the last write-out, reported with the next */
    uint64_t dropped[CEIL_IP_DROP_COUNT];      /* events a limit cut, by reason (cumulative) */
    uint64_t dropped_from[CEIL_IP_DROP_COUNT]; /* ticks of the first one */
    uint32_t per_call[CEIL_IP_CALL_COUNT];     /* events kept per call (max-per-site) */
    ceil_ip_trace_ev sync[4];      /* SYNC events (the owner adds, nsync atomic), written from sync_done on */
    uint32_t nsync, sync_done;
    ceil_ip_trace_ev ev[];
} trace_buf;

int ceil_ip_trace_on_;
int32_t ceil_ip_trace_rank_ = -1;
__thread trace_buf *trace_tls_ __attribute__((tls_model("initial-exec")));
static __thread int trace_lost_;  /* 1: this thread gets no buffer */
static trace_buf *bufs[TRACE_MAX_THREADS];
static int nbufs;                  /* atomic */
static uint32_t cap = TRACE_DEFAULT_EVENTS;
static char dir[3072];
static uint64_t hash;
static uint64_t t0_ns, t0_unix_ns, t0_ticks;
static int32_t pid_, ppid_;
static char host[64];
static uint64_t boot;              /* the boot_id's hash, 0 unknown */

/* The limits (CEILING_TRACE_*), fixed at load. */
static uint8_t keep_call[CEIL_IP_CALL_COUNT];    /* 0 kept, else the CEIL_IP_DROP_* reason */
static uint32_t max_per_call;                     /* 0: no limit */
static double min_ns, win_start_ns, win_end_ns;   /* the window in ns since its origin; end 0: none */
static uint64_t win_origin_unix_ns;               /* the run's start (CLOCK_REALTIME); 0: this image's start */
static uint64_t min_ticks, win_start_ticks, win_end_ticks;
static int ticks_limits_set;                       /* the ns limits turned into ticks (at the first event) */
static uint64_t *budget;                           /* MAP_SHARED: bytes every process of the run has written */
static uint64_t max_bytes;                         /* 0: no budget */

#define NAME_(fn, cls) #fn "\n"
#define NAME_C_(fn, cls) #fn "\n" #fn "_c\n"
static const char call_names[] = CEIL_IP_CALLS(NAME_, NAME_C_);
#define CLS_(fn, cls) #cls,
#define CLS_C_(fn, cls) #cls, #cls,
static const char *const call_classes[CEIL_IP_CALL_COUNT] = {CEIL_IP_CALLS(CLS_, CLS_C_)};

/* Whether the comma-separated list names the call (its name) or its class (calls.def's, any case). */
static int listed(const char *list, const char *name, size_t name_len, const char *cls)
{
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if ((n == name_len && strncmp(p, name, n) == 0) || (n == strlen(cls) && strncasecmp(p, cls, n) == 0))
            return 1;
        p += n + (e ? 1 : 0);
    }
    return 0;
}

static void set_limits(void)
{
    const char *keep = getenv(CEIL_IP_ENV_TRACE_CALLS), *skip = getenv(CEIL_IP_ENV_TRACE_EXCLUDE);
    const char *p = call_names;
    for (int i = 0; i < CEIL_IP_CALL_COUNT; i++) {
        const char *e = strchr(p, '\n');
        const size_t n = (size_t)(e - p);
        if (keep && *keep && !listed(keep, p, n, call_classes[i]))
            keep_call[i] = CEIL_IP_DROP_CALLS;
        else if (skip && *skip && listed(skip, p, n, call_classes[i]))
            keep_call[i] = CEIL_IP_DROP_EXCLUDE;
        p = e + 1;
    }
    const char *v;
    if ((v = getenv(CEIL_IP_ENV_TRACE_MAX_PER_CALL)) && *v)
        max_per_call = (uint32_t)strtoul(v, NULL, 10);
    if ((v = getenv(CEIL_IP_ENV_TRACE_MIN_NS)) && *v)
        min_ns = strtod(v, NULL);
    if ((v = getenv(CEIL_IP_ENV_TRACE_WINDOW)) && *v) {
        char *end;
        win_start_ns = strtod(v, &end) * 1e9;
        win_end_ns = *end == ':' ? strtod(end + 1, &end) * 1e9 : 0;
        if (*end == '@')            /* START:END@ORIGIN: seconds after the run started, for every process */
            win_origin_unix_ns = strtoull(end + 1, NULL, 10);
    }
    if ((v = getenv(CEIL_IP_ENV_TRACE_MAX_BYTES)) && *v) {
        max_bytes = strtoull(v, NULL, 10);
        char path[sizeof dir + 16];
        strcpy(path, dir);
        strcat(path, "/trace-budget");
        /* every process of the run maps the same counter: the budget is the run's */
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 && syscall(SYS_ftruncate, fd, 64) == 0) {
            void *m = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED)
                budget = m;
        }
        if (fd >= 0)
            syscall(SYS_close, fd);
        if (!budget)
            ceil_ip_say("cannot map the trace's size budget, no size limit: ", path);
    }
}

/* The ns limits in ticks, once the tick rate is known (the first event's time). */
static void set_tick_limits(void)
{
    const double r = ceil_ip_ns_per_tick();
    const double rate = r > 0 ? r : 1.0;
    min_ticks = (uint64_t)(min_ns / rate);
    /* the window's ends in ns after this image's start: a process started after the run did has
     * the difference taken off (an end already past: every call is dropped, as the window says) */
    const double late = win_origin_unix_ns ? (double)t0_unix_ns - (double)win_origin_unix_ns : 0.0;
    const double from = win_start_ns - late, to = win_end_ns - late;
    win_start_ticks = t0_ticks + (from > 0 ? (uint64_t)(from / rate) : 0);
    win_end_ticks = win_end_ns <= 0 ? 0 : to > 0 ? t0_ticks + (uint64_t)(to / rate) : 1;
    __atomic_store_n(&ticks_limits_set, 1, __ATOMIC_RELEASE);
}

static void drop(trace_buf *b, int why, uint64_t t)
{
    if (b->dropped[why]++ == 0)
        b->dropped_from[why] = t;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
    return h;
}

uint64_t ceil_ip_trace_boot_(void) { return boot; }

static uint64_t unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void mark_start(void)
{
    pid_ = (int32_t)getpid();
    ppid_ = (int32_t)getppid();
    t0_ns = ceil_ip_now_ns();
    t0_unix_ns = unix_now();
    t0_ticks = ceil_ip_ticks();
}

void ceil_ip_trace_init_(void)
{
    const char *d = getenv(CEIL_IP_ENV_TRACE_DIR);
    if (!d || !*d)
        return;
    if (strlen(d) >= sizeof dir - 128) {
        ceil_ip_say("trace directory name too long, not tracing: ", d);
        return;
    }
    strcpy(dir, d);
    const char *c = getenv(CEIL_IP_ENV_TRACE_BUFFER);
    if (c && *c) {
        long v = strtol(c, NULL, 10);
        if (v >= 16 && v <= (1L << 24))
            cap = (uint32_t)v;
    }
    hash = fnv1a(call_names, sizeof call_names - 2);   /* the names joined by newlines, no last one */
    gethostname(host, sizeof host - 1);
    boot = ceil_ip_boot_id_();
    mark_start();
    set_limits();
    __atomic_store_n(&ceil_ip_trace_on_, 1, __ATOMIC_RELEASE);
}

static void put_u(char *p, size_t n, uint64_t v)
{
    char t[24];
    int k = 0;
    do t[k++] = (char)('0' + v % 10); while ((v /= 10) && k < 24);
    while (k && n > 1) {
        *p++ = t[--k];
        n--;
    }
    *p = '\0';
}

/* DIR/trace-<pid>[-<tid>]-<start_ns><suffix> into path (sizeof dir + 96 bytes); tid < 0: none. */
static void file_path(char *path, int64_t tid, const char *suffix)
{
    char num[24];
    strcpy(path, dir);
    strcat(path, "/trace-");
    put_u(num, sizeof num, (uint64_t)pid_);
    strcat(path, num);
    if (tid >= 0) {
        strcat(path, "-");
        put_u(num, sizeof num, (uint64_t)tid);
        strcat(path, num);
    }
    strcat(path, "-");
    put_u(num, sizeof num, t0_ns);
    strcat(path, num);
    strcat(path, suffix);
}

static int open_file(trace_buf *b)
{
    char path[sizeof dir + 96];
    file_path(path, (int64_t)b->tid, ".bin");
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        ceil_ip_say("cannot create the trace file: ", path);
        return -1;
    }
    ceil_ip_trace_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CEIL_IP_TRACE_MAGIC, 8);
    h.version = CEIL_IP_TRACE_VERSION;
    h.event_bytes = sizeof(ceil_ip_trace_ev);
    h.calls_hash = hash;
    h.ns_per_tick = ceil_ip_ns_per_tick();
    h.t0_ns = t0_ns;
    h.t0_unix_ns = t0_unix_ns;
    h.t0_ticks = t0_ticks;
    h.pid = pid_;
    h.ppid = ppid_;
    h.tid = b->tid;
    h.rank = __atomic_load_n(&ceil_ip_trace_rank_, __ATOMIC_RELAXED);
    memcpy(h.host, host, sizeof h.host - 1);
    h.boot = boot;
    if (syscall(SYS_write, fd, &h, sizeof h) != (long)sizeof h) {
        syscall(SYS_close, fd);
        return -1;
    }
    return fd;
}

/* Write b's pending events (and a clock event) unless someone else is. */
static void write_out(trace_buf *b)
{
    int expect = 0;
    if (!__atomic_compare_exchange_n(&b->busy, &expect, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    const uint64_t s = ceil_ip_ticks();
    const int saved = errno;
    if (b->fd == -1)
        b->fd = open_file(b);
    uint32_t n = __atomic_load_n(&b->n, __ATOMIC_ACQUIRE);
    if (b->fd >= 0) {
        ceil_ip_trace_ev clk = {.t0 = ceil_ip_ticks(), .dur = b->own_ticks, .result = ceil_ip_trace_rank_,
                                .offset = (int64_t)ceil_ip_now_ns(), .kind = CEIL_IP_EV_CLOCK, .file = -1};
        if (n > cap)
            n = cap;
        if (budget && n > 0) {
            const uint64_t want = (uint64_t)n * sizeof(ceil_ip_trace_ev);
            const uint64_t before = __atomic_fetch_add(budget, want, __ATOMIC_RELAXED);
            if (before + want > max_bytes) {
                const uint32_t fit = before >= max_bytes ? 0 : (uint32_t)((max_bytes - before) / sizeof(ceil_ip_trace_ev));
                for (uint32_t i = fit; i < n; i++)
                    drop(b, CEIL_IP_DROP_MAX_SIZE, b->ev[i].t0);
                n = fit;
            }
        }
        const char *p = (const char *)b->ev;
        size_t left = (size_t)n * sizeof(ceil_ip_trace_ev);
        while (left > 0) {
            long w = syscall(SYS_write, b->fd, p, left);
            if (w <= 0)
                break;
            p += w, left -= (size_t)w;
        }
        syscall(SYS_write, b->fd, &clk, sizeof clk);
        const uint32_t ns = __atomic_load_n(&b->nsync, __ATOMIC_ACQUIRE);
        if (ns > b->sync_done) {
            syscall(SYS_write, b->fd, &b->sync[b->sync_done], (ns - b->sync_done) * sizeof(ceil_ip_trace_ev));
            b->sync_done = ns;
        }
        for (int why = 0; why < CEIL_IP_DROP_COUNT; why++)
            if (b->dropped[why]) {
                ceil_ip_trace_ev d = {.t0 = b->dropped_from[why], .bytes = b->dropped[why], .offset = -1,
                                      .call = (uint16_t)why, .kind = CEIL_IP_EV_DROP, .file = -1};
                syscall(SYS_write, b->fd, &d, sizeof d);
            }
        b->written += n;
    }
    __atomic_store_n(&b->n, 0, __ATOMIC_RELEASE);
    b->own_ticks = ceil_ip_ticks() - s;
    errno = saved;
    __atomic_store_n(&b->busy, 0, __ATOMIC_RELEASE);
}

static void append(trace_buf *b, const ceil_ip_trace_ev *e);
static void drop(trace_buf *b, int why, uint64_t t);

static trace_buf *claim(uint64_t first)
{
    if (trace_lost_)
        return NULL;
    trace_lost_ = 1;             /* until it has one: no recursion, no second try */
    const int i = __atomic_fetch_add(&nbufs, 1, __ATOMIC_RELAXED);
    if (i >= TRACE_MAX_THREADS)
        return NULL;
    const size_t bytes = sizeof(trace_buf) + (size_t)cap * sizeof(ceil_ip_trace_ev);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    trace_buf *b = p;
    b->fd = -1;
    b->tid = (int32_t)syscall(SYS_gettid);
    __atomic_store_n(&bufs[i], b, __ATOMIC_RELEASE);
    trace_tls_ = b;
    trace_lost_ = 0;
    /* the process starts at the load (or fork); a thread no later than its first event */
    const int main_thread = b->tid == pid_;
    ceil_ip_trace_ev e = {.t0 = main_thread ? t0_ticks : first, .dur = UINT64_MAX, .kind = CEIL_IP_EV_INSTANT,
                          .file = -1, .offset = -1,
                          .call = main_thread ? CEIL_IP_INSTANT_PROCESS_START : CEIL_IP_INSTANT_THREAD_START};
    append(b, &e);
    return b;
}

static void append(trace_buf *b, const ceil_ip_trace_ev *e)
{
    uint32_t n = b->n;
    if (__builtin_expect(n >= cap, 0)) {
        write_out(b);
        n = b->n;
        if (n >= cap) {           /* held by another writer (only during a process flush): lost, and said */
            drop(b, CEIL_IP_DROP_BUFFER, e->t0);
            return;
        }
    }
    b->ev[n] = *e;
    __atomic_store_n(&b->n, n + 1, __ATOMIC_RELEASE);
}

void ceil_ip_trace_put_(const ceil_ip_trace_ev *e)
{
    trace_buf *b = trace_tls_;
    if (__builtin_expect(b == NULL, 0) && (b = claim(e->t0)) == NULL)
        return;
    if (e->kind == CEIL_IP_EV_CALL) {
        if (__builtin_expect(!__atomic_load_n(&ticks_limits_set, __ATOMIC_ACQUIRE), 0))
            set_tick_limits();
        const unsigned c = e->call < CEIL_IP_CALL_COUNT ? e->call : 0;
        if (keep_call[c])
            { drop(b, keep_call[c], e->t0); return; }
        if (e->t0 < win_start_ticks || (win_end_ticks && e->t0 > win_end_ticks))
            { drop(b, CEIL_IP_DROP_WINDOW, e->t0); return; }
        if (e->dur < min_ticks)
            { drop(b, CEIL_IP_DROP_MIN_DURATION, e->t0); return; }
        if (max_per_call && b->per_call[c]++ >= max_per_call)
            { drop(b, CEIL_IP_DROP_MAX_PER_SITE, e->t0); return; }
    }
    append(b, e);
}

void ceil_ip_trace_instant_(uint16_t code)
{
    if (!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE))
        return;
    ceil_ip_trace_ev e = {.t0 = ceil_ip_ticks(), .dur = UINT64_MAX, .kind = CEIL_IP_EV_INSTANT, .file = -1,
                          .offset = -1, .call = code};
    ceil_ip_trace_put_(&e);
}

void ceil_ip_trace_flush_(int final, const char *reason)
{
    if (!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE))
        return;
    uint16_t code = final ? CEIL_IP_INSTANT_PROCESS_END : (reason && strcmp(reason, "exec") == 0)
                                                             ? CEIL_IP_INSTANT_EXEC : 0xffff;
    if (code != 0xffff)
        ceil_ip_trace_instant_(code);
    int n = __atomic_load_n(&nbufs, __ATOMIC_RELAXED);
    if (n > TRACE_MAX_THREADS)
        n = TRACE_MAX_THREADS;
    for (int i = 0; i < n; i++) {
        trace_buf *b = __atomic_load_n(&bufs[i], __ATOMIC_ACQUIRE);
        if (b)
            write_out(b);
    }
    if (final)
        __atomic_store_n(&ceil_ip_trace_on_, 0, __ATOMIC_RELEASE);
}

void ceil_ip_trace_thread_end_(void)
{
    trace_buf *b = trace_tls_;
    if (!b || !__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE))
        return;
    ceil_ip_trace_instant_(CEIL_IP_INSTANT_THREAD_END);
    write_out(b);
}

/* In the child of fork: the parent's pending events are the parent's, its
 * files the parent's; the child keeps the forking thread's buffer, empty. */
void ceil_ip_trace_forked_(void)
{
    if (!dir[0])
        return;
    int n = __atomic_load_n(&nbufs, __ATOMIC_RELAXED);
    if (n > TRACE_MAX_THREADS)
        n = TRACE_MAX_THREADS;
    trace_buf *mine = trace_tls_;
    for (int i = 0; i < n; i++) {
        trace_buf *b = bufs[i];
        if (b && b->fd >= 0)
            syscall(SYS_close, b->fd);
        bufs[i] = NULL;
    }
    nbufs = 0;
    mark_start();
    __atomic_store_n(&ceil_ip_trace_on_, 1, __ATOMIC_RELEASE);
    trace_tls_ = NULL;
    trace_lost_ = 0;
    if (mine) {
        mine->fd = -1, mine->n = 0, mine->busy = 0, mine->written = 0, mine->own_ticks = 0;
        memset(mine->dropped, 0, sizeof mine->dropped);
        memset(mine->per_call, 0, sizeof mine->per_call);
        mine->nsync = 0, mine->sync_done = 0;
        mine->tid = (int32_t)syscall(SYS_gettid);
        bufs[nbufs++] = mine;
        trace_tls_ = mine;
        ceil_ip_trace_ev e = {.t0 = t0_ticks, .dur = UINT64_MAX, .kind = CEIL_IP_EV_INSTANT, .file = -1,
                              .offset = -1, .call = CEIL_IP_INSTANT_PROCESS_START};
        append(mine, &e);
    }
}

void ceil_ip_trace_sync_(uint16_t phase, uint64_t cost_ticks, int64_t offset_ns, uint64_t rtt_ns, uint64_t at_ns,
                         int32_t same_boot)
{
    if (!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE))
        return;
    const uint64_t now = ceil_ip_ticks();
    trace_buf *b = trace_tls_;
    if (!b && (b = claim(now)) == NULL)
        return;
    const uint32_t n = b->nsync;
    if (n >= sizeof b->sync / sizeof b->sync[0])
        return;
    b->sync[n] = (ceil_ip_trace_ev){.t0 = now, .dur = cost_ticks, .result = offset_ns, .bytes = rtt_ns,
                                    .offset = (int64_t)at_ns, .call = phase, .kind = CEIL_IP_EV_SYNC,
                                    .file = same_boot};
    __atomic_store_n(&b->nsync, n + 1, __ATOMIC_RELEASE);
}

void ceil_ip_trace_fork_parent_(void) { ceil_ip_trace_instant_(CEIL_IP_INSTANT_FORK); }

/* A line appended, with one O_APPEND write, to DIR/trace-<pid>-<start_ns><suffix>: region.c's names
 * (.regions), mpi_comm.c's communicators' members (.comms). */
void ceil_ip_trace_line_(const char *suffix, const char *line, size_t n)
{
    char path[sizeof dir + 96];
    file_path(path, -1, suffix);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        syscall(SYS_write, fd, line, n);
        syscall(SYS_close, fd);
    }
}

/* The directory, for the gather of a wrapped launch (mpi_trace.c). */
const char *ceil_ip_trace_dir_(void)
{
    return __atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE) && dir[0] ? dir : NULL;
}
