/* interpose.c - the runtime of libceiling_interpose.so: load, module
 * registry, per-thread slots, the record at exit, on a fatal signal and
 * after fork. The interface, what the runtime promises and the record's
 * format are in interpose.h.
 *
 * Everything here runs inside the user's program, so it keeps to what such
 * a guest may do: no OpenMP, no link to the kernel core, no allocation after
 * load but an mmap of more slots (the record is a static buffer), no lock, no
 * stdio (the program's may be what is failing), and its own I/O through
 * CEIL_REAL so that a module wrapping open/write never counts the runtime's
 * writes. The flush is written to be async-signal-safe (memcpy, open, write,
 * close, getpid), since a fatal signal runs it from a handler; a module's
 * report must keep to the same.
 *
 * Longer than 500 lines: the slots, the state that moves ACTIVE -> DONE
 * once, the record and fork's reset are one set of statics that each part
 * reads and writes; split, they would become globals every file could touch.
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
#define SLOT_HEAD SLOT_ALIGN   /* the runtime's part of a slot, before the modules' blocks */
#define MAX_CHUNKS 32   /* chunk k holds capacity << k slots: room enough for any program */
#define CHUNK_BYTES 16384   /* a streamed record's buffer (write_record) */

/* The head of every slot: its index, and the next free slot (index + 1,
 * 0: none) while it is on the free list. */
typedef struct slot_head {
    uint32_t index;
    uint32_t next_free;
} slot_head;

__thread char *ceil_ip_slot_ __attribute__((tls_model("initial-exec")));
__thread int ceil_ip_depth_ __attribute__((tls_model("initial-exec")));

#define BUCKET_NAME(b) b,
const char *const ceil_ip_bucket_names[] = {CEIL_IP_BUCKETS(BUCKET_NAME)};
_Static_assert(sizeof ceil_ip_bucket_names / sizeof *ceil_ip_bucket_names == CEIL_IP_HIST_BUCKETS,
               "calls.def's CEIL_IP_BUCKETS are the histogram's buckets");

static int state = ST_LOADING;          /* ST_*, read and written atomically */
static ceil_ip_module *mods[CEIL_IP_MAX_MODULES];
static int nmods;
static char *chunks[MAX_CHUNKS];        /* atomic: slots, one mmap each, the first at load */
static size_t slot_bytes;
static int capacity;                    /* slots of chunk 0 */
static int next_slot;                   /* atomic: slots given out */
static uint64_t free_slots;             /* atomic: (tag << 32) | (index + 1) of the first free slot */
static int claims;                      /* atomic: threads given a slot, a fresh or a freed one */
static int lost;                        /* atomic: threads that found no slot (no memory left) */
static pthread_key_t slot_key;          /* its destructor frees an ending thread's slot */
static int have_key;
static int forked;                      /* 1 in a child of fork() */
static uint64_t self_read, self_reads;  /* atomic: ceil_ip_self_read_, bytes and calls */
static int own_file;                    /* the record's file is this process's alone (%p in its pattern) */
static pid_t own_pid;                   /* getpid() of this image: another one is a vfork child */
static uint64_t start_ns, start_unix_ns;
static char out_pattern[PATH_MAX];
static char exe[PATH_MAX];
static char host[sizeof(((struct utsname *)0)->nodename)];
static char record[CEIL_IP_RECORD_BYTES];


/* The linker's bounds of the module section (see CEIL_IP_MODULE); weak, so
 * a build without modules links, hidden, so no other library's are seen. */
extern ceil_ip_module *const __start_ceil_ip_modules[] __attribute__((weak, visibility("hidden")));
extern ceil_ip_module *const __stop_ceil_ip_modules[] __attribute__((weak, visibility("hidden")));

/* CLOCK_REALTIME in nanoseconds: the record's start_unix_ns. */
static uint64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- slots ---------------------------------------------------------------- */

void ceil_ip_self_read_(long n)
{
    __atomic_fetch_add(&self_reads, 1, __ATOMIC_RELAXED);
    if (n > 0)
        __atomic_fetch_add(&self_read, (uint64_t)n, __ATOMIC_RELAXED);
}

int ceil_ip_active(void) { return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_ACTIVE; }

/* Slot i (NULL where its chunk is not there): chunk k holds slots
 * capacity * (2^k - 1) .. capacity * (2^(k+1) - 1) - 1. With `grow`, a
 * missing chunk is mapped; two threads racing keep the first mapping. */
static char *slot_at(int i, int grow)
{
    const uint64_t q = (uint64_t)i / (uint64_t)capacity + 1;
    const int k = 63 - __builtin_clzll(q);
    if (k >= MAX_CHUNKS)
        return NULL;
    const uint64_t first = (uint64_t)capacity * ((UINT64_C(1) << k) - 1);
    char *c = __atomic_load_n(&chunks[k], __ATOMIC_ACQUIRE);
    if (!c && grow) {
        const size_t bytes = ((size_t)capacity << k) * slot_bytes;
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        char *expect = NULL;
        if (__atomic_compare_exchange_n(&chunks[k], &expect, (char *)p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            c = p;
        } else {
            munmap(p, bytes);
            c = expect;
        }
    }
    return c ? c + ((uint64_t)i - first) * slot_bytes : NULL;
}

/* A freed slot, counts and all, or NULL. The tag in the list's head makes
 * a pop that raced a pop and a push fail its compare (no ABA); slots are
 * never unmapped, so reading a head that was taken meanwhile is safe. */
static char *pop_free_slot(void)
{
    uint64_t h = __atomic_load_n(&free_slots, __ATOMIC_ACQUIRE);
    for (;;) {
        const uint32_t first = (uint32_t)h;
        if (first == 0)
            return NULL;
        char *s = slot_at((int)first - 1, 0);
        const uint32_t next = __atomic_load_n(&((slot_head *)s)->next_free, __ATOMIC_RELAXED);
        const uint64_t nh = (((h >> 32) + 1) << 32) | next;
        if (__atomic_compare_exchange_n(&free_slots, &h, nh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return s;
    }
}

static void push_free_slot(char *s)
{
    slot_head *hd = (slot_head *)s;
    uint64_t h = __atomic_load_n(&free_slots, __ATOMIC_RELAXED);
    uint64_t nh;
    do {
        __atomic_store_n(&hd->next_free, (uint32_t)h, __ATOMIC_RELAXED);
        nh = (((h >> 32) + 1) << 32) | (hd->index + 1u);
    } while (!__atomic_compare_exchange_n(&free_slots, &h, nh, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* A thread ends (pthread key destructor, after its C++ thread_local
 * destructors): its slot, with what it counted, goes to the next thread
 * that needs one, so a program that starts thread after thread uses as
 * many slots as it has threads at once, and the counts stay in the sums.
 * A call the thread still makes (another key's destructor) claims again. */
static void thread_ends(void *slot)
{
    if (slot != NULL && slot == ceil_ip_slot_) {
        ceil_ip_trace_thread_end_();
        ceil_ip_slot_ = NULL;
        push_free_slot(slot);
    }
}

char *ceil_ip_claim_(void)
{
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (st == ST_LOADING || st == ST_WRITING)
        return NULL;              /* before the constructor, or during a checkpoint: ask again later */
    if (st != ST_ACTIVE) {
        ceil_ip_slot_ = CEIL_IP_NO_SLOT;
        return NULL;
    }
    char *s = pop_free_slot();
    if (!s) {
        const int i = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED);
        s = i >= 0 ? slot_at(i, 1) : NULL;
        if (!s) {                 /* no memory for another chunk */
            __atomic_fetch_add(&lost, 1, __ATOMIC_RELAXED);
            ceil_ip_slot_ = CEIL_IP_NO_SLOT;
            return NULL;
        }
        ((slot_head *)s)->index = (uint32_t)i;
    }
    __atomic_fetch_add(&claims, 1, __ATOMIC_RELAXED);
    ceil_ip_slot_ = s;
    if (have_key)
        pthread_setspecific(slot_key, s);
    return s;
}

int ceil_ip_threads(void) { return __atomic_load_n(&next_slot, __ATOMIC_RELAXED); }

const void *ceil_ip_block_of(const ceil_ip_module *m, int thread)
{
    if (thread < 0 || thread >= ceil_ip_threads() || !m->enabled_)
        return NULL;
    char *s = slot_at(thread, 0);
    return s ? s + m->offset_ : NULL;     /* offsets count the head in */
}

/* The record, rendered into o (made to hold the whole record, or streamed);
 * the length left in its buffer. */
static size_t render(ceil_ip_out *op, const char *reason, int sig, const char *by)
{
    ceil_ip_out o = *op;
    const pid_t pid = getpid();
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        memset(&ru, 0, sizeof ru);

    ceil_ip_out_begin_(&o, "ceiling-interpose ");
    ceil_ip_out_dec_(&o, CEIL_IP_FORMAT_VERSION);
    ceil_ip_out_begin_(&o, "process");
    CEIL_IP_PUT_U64(&o, pid, (uint64_t)pid);
    CEIL_IP_PUT_U64(&o, ppid, (uint64_t)getppid());
    CEIL_IP_PUT_U64(&o, forked, (uint64_t)forked);
    CEIL_IP_PUT_STR(&o, host, host);
    CEIL_IP_PUT_STR(&o, exe, exe);
    CEIL_IP_PUT_STR(&o, reason, reason);
    CEIL_IP_PUT_I64(&o, signal, sig);
    if (by)
        CEIL_IP_PUT_STR(&o, by, by);
    CEIL_IP_PUT_U64(&o, threads, (uint64_t)__atomic_load_n(&claims, __ATOMIC_RELAXED));
    CEIL_IP_PUT_U64(&o, slots, (uint64_t)ceil_ip_threads());
    CEIL_IP_PUT_U64(&o, threads_lost, (uint64_t)__atomic_load_n(&lost, __ATOMIC_RELAXED));
    CEIL_IP_PUT_U64(&o, start_ns, start_ns);
    CEIL_IP_PUT_U64(&o, end_ns, ceil_ip_now_ns());
    CEIL_IP_PUT_U64(&o, start_unix_ns, start_unix_ns);
    CEIL_IP_PUT_U64(&o, utime_us, (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec);
    CEIL_IP_PUT_U64(&o, stime_us, (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec);
    for (int i = 0; i < nmods; i++) {
        ceil_ip_module *m = mods[i];
        ceil_ip_out_begin_(&o, "module");
        CEIL_IP_PUT_STR(&o, name, m->name);
        CEIL_IP_PUT_U64(&o, version, m->version);
        CEIL_IP_PUT_U64(&o, enabled, (uint64_t)(m->enabled_ != 0));
        if (m->enabled_ && m->report)
            m->report(m, &o);
    }
    ceil_ip_out_end_(&o);
    if (o.sink)
        o.limit += END_RESERVE;
    else
        o.cap += END_RESERVE;
    const int truncated = o.truncated;
    o.truncated = 0;
    ceil_ip_out_begin_(&o, "end");
    CEIL_IP_PUT_U64(&o, pid, (uint64_t)pid);
    CEIL_IP_PUT_U64(&o, truncated, (uint64_t)truncated);
    CEIL_IP_PUT_U64(&o, self_read, __atomic_load_n(&self_read, __ATOMIC_RELAXED));
    CEIL_IP_PUT_U64(&o, self_reads, __atomic_load_n(&self_reads, __ATOMIC_RELAXED));
    ceil_ip_out_end_(&o);
    *op = o;
    return o.len;
}

/* The record whole in `record` (a checkpoint handed on: MPI's gather); its length. */
static size_t render_record(const char *reason, int sig, const char *by)
{
    ceil_ip_out o = {.buf = record, .cap = sizeof record - END_RESERVE};
    return render(&o, reason, sig, by);
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

/* The record into its file. Where the file is this process's alone (a
 * pattern with %p) it is streamed through a chunk of CHUNK_BYTES: rendered
 * whole, a record of 512 files (200 KiB) would sit in the program's
 * resident memory, and its peak, at its exit. */
static void write_record(const char *reason, int sig, const char *by)
{
    static char chunk[CHUNK_BYTES];
    char path[PATH_MAX];
    if (!own_file) {
        ceil_ip_append(record, render_record(reason, sig, by));
        return;
    }
    if (ceil_ip_expand_path_(path, sizeof path, out_pattern, getpid()) != 0) {
        ceil_ip_say("record path too long: ", out_pattern);
        return;
    }
    ceil_ip_out o;
    if (ceil_ip_out_open_(&o, path, chunk, sizeof chunk, sizeof record - END_RESERVE) != 0)
        return;
    render(&o, reason, sig, by);
    ceil_ip_out_close_(&o);
}

/* Write the record if nobody has: the state moves ACTIVE -> DONE once. */
static int flush_once(const char *reason, int sig, const char *by)
{
    int expect = ST_ACTIVE;
    if (!__atomic_compare_exchange_n(&state, &expect, ST_DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    const int saved = errno;
    ceil_ip_trace_flush_(1, reason);
    write_record(reason, sig, by);
    errno = saved;
    return 1;
}

int ceil_ip_flush(const char *by) { return flush_once("flush", 0, by); }

/* Write a record with `reason` and go on counting (ACTIVE -> WRITING ->
 * ACTIVE); a later record of this image (same pid and start_ns) supersedes it. */
static int write_and_go_on(const char *reason, const char *by, ceil_ip_hand_fn hand, void *arg)
{
    int expect = ST_ACTIVE;
    if (!__atomic_compare_exchange_n(&state, &expect, ST_WRITING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    const int saved = errno;
    ceil_ip_trace_flush_(0, reason);
    if (hand) {
        const size_t len = render_record(reason, 0, by);
        hand(record, len, arg);
        ceil_ip_append(record, len);
    } else {
        write_record(reason, 0, by);
    }
    errno = saved;
    __atomic_store_n(&state, ST_ACTIVE, __ATOMIC_RELEASE);
    return 1;
}

int ceil_ip_checkpoint(const char *by, ceil_ip_hand_fn hand, void *arg)
{
    return write_and_go_on("checkpoint", by, hand, arg);
}

/* Wait (1 s at most) for a checkpoint another thread is writing. */
static void wait_for_checkpoint(void)
{
    const struct timespec ms = {0, 1000000};
    for (int i = 0; i < 1000 && __atomic_load_n(&state, __ATOMIC_ACQUIRE) == ST_WRITING; i++)
        nanosleep(&ms, NULL);
}

/* Whether this is the image's own process, not a child of vfork (or a
 * clone sharing its memory) running in it until it execs or _exits: such a
 * child must not write the parent's counts as its own, nor mark them written. */
static int own_process(void) { return getpid() == __atomic_load_n(&own_pid, __ATOMIC_RELAXED); }

/* At exit; a fatal signal does not wait (it may have interrupted a
 * checkpoint in its own thread). */
static void at_exit(void)
{
    wait_for_checkpoint();
    flush_once("exit", 0, NULL);
}

void ceil_ip_before_exit_(const char *by)
{
    if (!own_process())
        return;
    wait_for_checkpoint();
    flush_once("exit", 0, by);
}

void ceil_ip_before_exec_(const char *by)
{
    /* A child of fork that execs before counting anything (a shell running
     * a command) would leave an empty record beside its new image's. */
    if (!own_process() || __atomic_load_n(&claims, __ATOMIC_RELAXED) == 0)
        return;
    wait_for_checkpoint();
    write_and_go_on("exec", by, NULL, NULL);
}

/* Flush, then die of the signal as the program would have: the default
 * action is put back and the signal raised again; it is blocked while this
 * handler runs, so it is delivered on return (a fault also recurs when the
 * instruction is retried). Installed only where the program has the default
 * action, and hidden from it (signals.c). */
static void on_fatal_signal(int sig)
{
    const int saved = errno;
    if (own_process())
        flush_once("signal", sig, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ceil_ip_sigaction_real_(sig, &dfl, NULL);
    raise(sig);
    errno = saved;
}

/* In the child of fork(): only the forking thread exists, and the counts so
 * far are the parent's, so the child starts a record of its own. vfork and
 * posix_spawn do not come here; they exec, and the new image loads afresh. */
static void at_fork_child(void)
{
    own_pid = getpid();
    ceil_ip_signals_forked_();
    ceil_ip_region_forked_();          /* the child's regions: its own names, no region open (profile and trace) */
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (st != ST_ACTIVE && st != ST_DONE)
        return;
    const int used = ceil_ip_threads();
    for (int k = 0; k < MAX_CHUNKS; k++) {
        const uint64_t first = (uint64_t)capacity * ((UINT64_C(1) << k) - 1);
        if (!chunks[k] || first >= (uint64_t)used)
            break;
        uint64_t n = (uint64_t)used - first;
        if (n > (uint64_t)capacity << k)
            n = (uint64_t)capacity << k;
        memset(chunks[k], 0, n * slot_bytes);
    }
    __atomic_store_n(&next_slot, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&free_slots, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&claims, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lost, 0, __ATOMIC_RELAXED);
    ceil_ip_slot_ = NULL;
    if (have_key)
        pthread_setspecific(slot_key, NULL);
    forked = 1;
    __atomic_store_n(&self_read, 0, __ATOMIC_RELAXED);     /* its own rchar starts at 0 too */
    __atomic_store_n(&self_reads, 0, __ATOMIC_RELAXED);
    start_ns = ceil_ip_now_ns();
    start_unix_ns = unix_ns();
    ceil_ip_trace_forked_();
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
    ceil_ip_note_stderr_();
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
    for (const char *c = out_pattern; *c; c++) {
        if (c[0] == '%' && c[1] == 'p')
            own_file = 1;
        if (c[0] == '%' && c[1])
            c++;
    }
    /* Resolved now, so that a flush in a signal handler calls no dlsym. */
    ceil_ip_record_resolve_();
    ceil_ip_exit_resolve_();

    gather_modules();
    size_t off = SLOT_HEAD;
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
    slot_bytes = off;
    capacity = thread_capacity();
    void *p = mmap(NULL, (size_t)capacity * slot_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        ceil_ip_say("cannot reserve the thread slots, not recording", NULL);
        __atomic_store_n(&state, ST_OFF, __ATOMIC_RELEASE);
        return;
    }
    chunks[0] = p;
    have_key = pthread_key_create(&slot_key, thread_ends) == 0;

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
    ceil_ip_trace_init_();

    for (int i = 0; i < nmods; i++) {
        ceil_ip_module *m = mods[i];
        if (m->block_bytes <= CEIL_IP_MAX_BLOCK)
            m->enabled_ = !m->init || m->init(m) == 0;
    }
    own_pid = getpid();
    ceil_ip_signals_start_(on_fatal_signal);
    pthread_atfork(NULL, ceil_ip_trace_fork_parent_, at_fork_child);
    atexit(at_exit);
    at_quick_exit(at_exit);     /* quick_exit ends in glibc's own _exit, not our wrapper */
    __atomic_store_n(&state, ST_ACTIVE, __ATOMIC_RELEASE);
}
