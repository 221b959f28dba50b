/* interpose.c - the runtime of libceiling_interpose.so: load, module
 * registry, per-thread slots, the record at exit, on a fatal signal and
 * after fork. The interface, what the runtime promises and the record's
 * format are in interpose.h.
 *
 * Everything here runs inside the user's program, so it keeps to what such
 * a guest may do: no OpenMP, no link to the kernel core, no allocation after
 * load (the slots are one mmap, the record a static buffer), no lock, no
 * stdio (the program's may be what is failing), and its own I/O through
 * CEIL_REAL so that a module wrapping open/write never counts the runtime's
 * writes. The flush is written to be async-signal-safe (memcpy, open, write,
 * close, getpid), since a fatal signal runs it from a handler; a module's
 * report must keep to the same.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "record.h"

/* ST_WRITING: a checkpoint record is being written; counting goes on after. */
enum { ST_LOADING = 0, ST_ACTIVE, ST_OFF, ST_DONE, ST_WRITING };

/* Room kept at the end of the record for its "end" line, so that a
 * truncated record still closes. */
#define END_RESERVE 128
#define SLOT_ALIGN 64   /* a cache line: threads' slots never share one */

__thread char *ceil_ip_slot_ __attribute__((tls_model("initial-exec")));
__thread int ceil_ip_depth_ __attribute__((tls_model("initial-exec")));

const char *const ceil_ip_bucket_names[CEIL_IP_HIST_BUCKETS] = {
    "lt1k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k",
    "1m", "2m", "4m", "8m", "16m", "32m", "ge64m"};

static int state = ST_LOADING;          /* ST_*, read and written atomically */
static ceil_ip_module *mods[CEIL_IP_MAX_MODULES];
static int nmods;
static char *slots;                     /* capacity * slot_bytes, one mmap at load */
static size_t slot_bytes;
static int capacity;
static int next_slot;                   /* atomic: slots given out; may pass capacity */
static int lost;                        /* atomic: threads that found no slot left */
static int forked;                      /* 1 in a child of fork() */
static uint64_t start_ns, start_unix_ns;
static char out_pattern[PATH_MAX];
static char exe[PATH_MAX];
static char host[sizeof(((struct utsname *)0)->nodename)];
static char record[CEIL_IP_RECORD_BYTES];


/* The linker's bounds of the module section (see CEIL_IP_MODULE); weak, so
 * a build without modules links, hidden, so no other library's are seen. */
extern ceil_ip_module *const __start_ceil_ip_modules[] __attribute__((weak, visibility("hidden")));
extern ceil_ip_module *const __stop_ceil_ip_modules[] __attribute__((weak, visibility("hidden")));

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT};

/* CLOCK_REALTIME in nanoseconds: the record's start_unix_ns. */
static uint64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- slots ---------------------------------------------------------------- */

int ceil_ip_active(void) { return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_ACTIVE; }

char *ceil_ip_claim_(void)
{
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (st == ST_LOADING || st == ST_WRITING)
        return NULL;              /* before the constructor, or during a checkpoint: ask again later */
    if (st != ST_ACTIVE) {
        ceil_ip_slot_ = CEIL_IP_NO_SLOT;
        return NULL;
    }
    int i = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED);
    if (i >= capacity) {
        __atomic_fetch_add(&lost, 1, __ATOMIC_RELAXED);
        ceil_ip_slot_ = CEIL_IP_NO_SLOT;
        return NULL;
    }
    ceil_ip_slot_ = slots + (size_t)i * slot_bytes;
    return ceil_ip_slot_;
}

int ceil_ip_threads(void)
{
    int n = __atomic_load_n(&next_slot, __ATOMIC_RELAXED);
    return n < capacity ? n : capacity;
}

const void *ceil_ip_block_of(const ceil_ip_module *m, int thread)
{
    if (thread < 0 || thread >= ceil_ip_threads() || !m->enabled_)
        return NULL;
    return slots + (size_t)thread * slot_bytes + m->offset_;
}

/* The record, rendered into `record`; its length. */
static size_t render_record(const char *reason, int sig, const char *by)
{
    const pid_t pid = getpid();
    ceil_ip_out o = {record, 0, sizeof record - END_RESERVE, 0, 0, 0};
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        memset(&ru, 0, sizeof ru);

    ceil_ip_out_begin_(&o, "ceiling-interpose ");
    ceil_ip_out_dec_(&o, CEIL_IP_FORMAT_VERSION);
    ceil_ip_out_begin_(&o, "process");
    ceil_ip_put_u64(&o, "pid", (uint64_t)pid);
    ceil_ip_put_u64(&o, "ppid", (uint64_t)getppid());
    ceil_ip_put_u64(&o, "forked", (uint64_t)forked);
    ceil_ip_put_str(&o, "host", host);
    ceil_ip_put_str(&o, "exe", exe);
    ceil_ip_put_str(&o, "reason", reason);
    ceil_ip_put_i64(&o, "signal", sig);
    if (by)
        ceil_ip_put_str(&o, "by", by);
    ceil_ip_put_u64(&o, "threads", (uint64_t)ceil_ip_threads());
    ceil_ip_put_u64(&o, "threads_lost", (uint64_t)__atomic_load_n(&lost, __ATOMIC_RELAXED));
    ceil_ip_put_u64(&o, "start_ns", start_ns);
    ceil_ip_put_u64(&o, "end_ns", ceil_ip_now_ns());
    ceil_ip_put_u64(&o, "start_unix_ns", start_unix_ns);
    ceil_ip_put_u64(&o, "utime_us", (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec);
    ceil_ip_put_u64(&o, "stime_us", (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec);
    for (int i = 0; i < nmods; i++) {
        ceil_ip_module *m = mods[i];
        ceil_ip_out_begin_(&o, "module");
        ceil_ip_put_str(&o, "name", m->name);
        ceil_ip_put_u64(&o, "version", m->version);
        ceil_ip_put_u64(&o, "enabled", (uint64_t)(m->enabled_ != 0));
        if (m->enabled_ && m->report)
            m->report(m, &o);
    }
    ceil_ip_out_end_(&o);
    o.cap = sizeof record;
    const int truncated = o.truncated;
    o.truncated = 0;
    ceil_ip_out_begin_(&o, "end");
    ceil_ip_put_u64(&o, "pid", (uint64_t)pid);
    ceil_ip_put_u64(&o, "truncated", (uint64_t)truncated);
    ceil_ip_out_end_(&o);
    return o.len;
}

const char *ceil_ip_out_pattern(void) { return out_pattern; }

int ceil_ip_append(const char *text, size_t len)
{
    char path[PATH_MAX];
    if (ceil_ip_expand_path_(path, sizeof path, out_pattern, getpid()) != 0) {
        ceil_ip_say("record path too long: ", out_pattern);
        return -1;
    }
    return ceil_ip_append_file_(path, text, len);
}

static void write_record(const char *reason, int sig, const char *by)
{
    ceil_ip_append(record, render_record(reason, sig, by));
}

/* Write the record if nobody has: the state moves ACTIVE -> DONE once. */
static int flush_once(const char *reason, int sig, const char *by)
{
    int expect = ST_ACTIVE;
    if (!__atomic_compare_exchange_n(&state, &expect, ST_DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    const int saved = errno;
    write_record(reason, sig, by);
    errno = saved;
    return 1;
}

int ceil_ip_flush(const char *by) { return flush_once("flush", 0, by); }

int ceil_ip_checkpoint(const char *by, ceil_ip_hand_fn hand, void *arg)
{
    int expect = ST_ACTIVE;
    if (!__atomic_compare_exchange_n(&state, &expect, ST_WRITING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    const int saved = errno;
    const size_t len = render_record("checkpoint", 0, by);
    if (hand)
        hand(record, len, arg);
    ceil_ip_append(record, len);
    errno = saved;
    __atomic_store_n(&state, ST_ACTIVE, __ATOMIC_RELEASE);
    return 1;
}

/* At exit, wait (1 s at most) for a checkpoint another thread is writing; a
 * fatal signal does not (it may have interrupted one in its own thread). */
static void at_exit(void)
{
    const struct timespec ms = {0, 1000000};
    for (int i = 0; i < 1000 && __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_WRITING; i++)
        nanosleep(&ms, NULL);
    flush_once("exit", 0, NULL);
}

/* Flush, then die of the signal as the program would have: the default
 * action is put back and the signal raised again; it is blocked while this
 * handler runs, so it is delivered on return (a fault also recurs when the
 * instruction is retried). */
static void on_fatal_signal(int sig)
{
    const int saved = errno;
    flush_once("signal", sig, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
    errno = saved;
}

/* Only where the program has left the default: a handler it installs later
 * replaces ours, and then its own exit path (exit -> at_exit) flushes. */
static void install_signal_handlers(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(fatal_signals[i], NULL, &old) != 0)
            continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigfillset(&sa.sa_mask);      /* no second signal in the middle of the flush */
        sa.sa_flags = SA_ONSTACK;     /* the program's alternate stack, if it has one */
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

/* In the child of fork(): only the forking thread exists, and the counts so
 * far are the parent's, so the child starts a record of its own. vfork and
 * posix_spawn do not come here; they exec, and the new image loads afresh. */
static void at_fork_child(void)
{
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (st != ST_ACTIVE && st != ST_DONE)
        return;
    memset(slots, 0, (size_t)ceil_ip_threads() * slot_bytes);
    __atomic_store_n(&next_slot, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lost, 0, __ATOMIC_RELAXED);
    ceil_ip_slot_ = NULL;
    forked = 1;
    start_ns = ceil_ip_now_ns();
    start_unix_ns = unix_ns();
    __atomic_store_n(&state, ST_ACTIVE, __ATOMIC_RELEASE);
}

/* The registered modules, in name order (the section's order is the link's). */
static void gather_modules(void)
{
    if (!__start_ceil_ip_modules)
        return;
    for (ceil_ip_module *const *e = __start_ceil_ip_modules; e < __stop_ceil_ip_modules; e++) {
        if (nmods == CEIL_IP_MAX_MODULES) {
            ceil_ip_say("too many modules, left off: ", (*e)->name);
            continue;
        }
        int i = nmods++;
        while (i > 0 && strcmp(mods[i - 1]->name, (*e)->name) > 0) {
            mods[i] = mods[i - 1];
            i--;
        }
        mods[i] = *e;
    }
}

static int thread_capacity(void)
{
    const char *s = getenv(CEIL_IP_ENV_THREADS);
    if (!s || !*s)
        return CEIL_IP_DEFAULT_THREADS;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > (1 << 20)) {
        ceil_ip_say(CEIL_IP_ENV_THREADS " is not a number in 1..1048576, using 1024: ", s);
        return CEIL_IP_DEFAULT_THREADS;
    }
    return (int)v;
}

__attribute__((constructor)) static void ceil_ip_load(void)
{
    const char *out = getenv(CEIL_IP_ENV_OUT);
    if (!out || !*out) {
        __atomic_store_n(&state, ST_OFF, __ATOMIC_RELEASE);
        return;
    }
    if (strlen(out) >= sizeof out_pattern) {
        ceil_ip_say(CEIL_IP_ENV_OUT " is too long, not recording: ", out);
        __atomic_store_n(&state, ST_OFF, __ATOMIC_RELEASE);
        return;
    }
    strcpy(out_pattern, out);
    /* Resolved now, so that a flush in a signal handler calls no dlsym. */
    ceil_ip_record_resolve_();

    gather_modules();
    size_t off = 0;
    for (int i = 0; i < nmods; i++) {
        ceil_ip_module *m = mods[i];
        m->enabled_ = 0;
        if (m->block_bytes > CEIL_IP_MAX_BLOCK) {
            ceil_ip_say("module block larger than CEIL_IP_MAX_BLOCK, module off: ", m->name);
            continue;
        }
        m->offset_ = (uint32_t)off;
        off += ((size_t)m->block_bytes + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    }
    slot_bytes = off > 0 ? off : SLOT_ALIGN;
    capacity = thread_capacity();
    void *p = mmap(NULL, (size_t)capacity * slot_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        ceil_ip_say("cannot reserve the thread slots, not recording", NULL);
        __atomic_store_n(&state, ST_OFF, __ATOMIC_RELEASE);
        return;
    }
    slots = p;

    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    struct utsname u;
    if (uname(&u) == 0) {
        strncpy(host, u.nodename, sizeof host - 1);
        host[sizeof host - 1] = '\0';
    }
    start_ns = ceil_ip_now_ns();
    start_unix_ns = unix_ns();
    ceil_ip_clock_init_();

    for (int i = 0; i < nmods; i++) {
        ceil_ip_module *m = mods[i];
        if (m->block_bytes <= CEIL_IP_MAX_BLOCK)
            m->enabled_ = !m->init || m->init(m) == 0;
    }
    install_signal_handlers();
    pthread_atfork(NULL, NULL, at_fork_child);
    atexit(at_exit);
    __atomic_store_n(&state, ST_ACTIVE, __ATOMIC_RELEASE);
}
