/*
 * region.c - user regions (`ceiling_region_begin/end`,
 * src/ceiling/include/ceiling/region.h; ceiling.region in Python): for the
 * trace, each begin/end pair of a thread is one REGION event (trace.c's
 * channel); for the profile, the module "region" sums each region's calls
 * and time per process, so that `ceiling scale --profile` models each
 * region's time over the counts, as Extra-P models a call path's.
 *
 * Its record lines, one per region a thread ended at least once (the first
 * REGION_COUNTED names of the process), then one line only when more names
 * were used than that:
 *
 *     region name=solve calls=40 ns=812000000 threads=2
 *     region lost=3
 *
 * calls: the pairs ended, every thread; ns: their time from begin to end
 * summed (inclusive: a region nested in another counts in both; threads in
 * a region at once each add theirs); threads: the thread slots that ended
 * one; lost: the names past REGION_COUNTED, not counted (at most REGION_NAMES
 * - REGION_COUNTED: names past the whole table are neither counted nor traced).
 * A name is kept to its first 200 bytes; two names alike that far are one.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "interpose.h"

/* A region's name is interned once per process, at its first begin, into a table of REGION_NAMES
 * (added under a spin lock, read without one; past it a region is not recorded), and while tracing
 * appended at once, "index name\n", to DIR/trace-<pid>-<start_ns>.regions with one O_APPEND write, so a
 * killed process's regions are still named. Each thread keeps a stack of
 * REGION_DEPTH open regions; the end of one writes a REGION event (call: the
 * index, t0: its begin, dur) for the innermost open region of that name. */
#define REGION_NAMES 1024
#define REGION_DEPTH 64
#define REGION_COUNTED 128     /* names whose calls and time the profile keeps: 2 KiB per thread slot */
static const char *region_name[REGION_NAMES];   /* our copies of the names */
static int region_named[REGION_NAMES];          /* 1 once its line is in the trace's .regions file */
static int nregions;                            /* entries filled, at most REGION_NAMES */
static char region_lock;                        /* held while a name is added (region_index) */
#define REGION_NAME_MAX 200                     /* bytes of a name kept; longer ones are cut, and match so cut */
static __thread struct { uint16_t idx; uint64_t t0; } open_[REGION_DEPTH];
static __thread int depth_;

typedef struct region_counters {
    uint64_t calls[REGION_COUNTED], ticks[REGION_COUNTED];
} region_counters;

static ceil_ip_module region_module;

static int region_init(ceil_ip_module *self)
{
    (void)self;
    return 0;
}

static void region_report(ceil_ip_module *self, ceil_ip_out *out)
{
    const int n = __atomic_load_n(&nregions, __ATOMIC_ACQUIRE);
    const double npt = ceil_ip_ns_per_tick();
    for (int i = 0; i < n && i < REGION_COUNTED; i++) {
        const char *name = __atomic_load_n(&region_name[i], __ATOMIC_ACQUIRE);
        uint64_t calls = 0, ticks = 0, threads = 0;
        for (int t = 0; t < ceil_ip_threads(); t++) {
            const region_counters *c = ceil_ip_block_of(self, t);
            if (!c)
                continue;
            const uint64_t k = ceil_ip_read(&c->calls[i]);
            calls += k;
            ticks += ceil_ip_read(&c->ticks[i]);
            threads += k > 0;
        }
        if (!name || calls == 0)
            continue;
        ceil_ip_line(out, self);
        CEIL_IP_PUT_STR(out, name, name);
        CEIL_IP_PUT_U64(out, calls, calls);
        CEIL_IP_PUT_U64(out, ns, ceil_ip_ticks_ns(ticks, npt));
        CEIL_IP_PUT_U64(out, threads, threads);
    }
    if (n > REGION_COUNTED) {
        ceil_ip_line(out, self);
        CEIL_IP_PUT_U64(out, lost, (uint64_t)(n - REGION_COUNTED));
    }
}

static ceil_ip_module region_module = {
    .name = "region",
    .version = 1,
    .block_bytes = sizeof(region_counters),
    .init = region_init,
    .report = region_report,
};
CEIL_IP_MODULE(region_module);

/* The trace's .regions line "index name\n" of name i, once (only while the trace is on: its directory). */
static void region_line(int i, const char *name)
{
    if (!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE) || __atomic_load_n(&region_named[i], __ATOMIC_ACQUIRE)
        || __atomic_exchange_n(&region_named[i], 1, __ATOMIC_ACQ_REL))
        return;                            /* a plain load first: no atomic write at every begin of a named region */
    size_t len = strnlen(name, REGION_NAME_MAX);
    char line[256];
    int o = 0;
    char t[12];
    int k = 0, v = i;
    do t[k++] = (char)('0' + v % 10); while ((v /= 10) && k < 12);
    while (k)
        line[o++] = t[--k];
    line[o++] = ' ';
    line[o] = '\0';
    for (size_t j = 0; j < len && o < (int)sizeof line - 2; j++)   /* one line: no newline inside */
        line[o++] = name[j] == '\n' ? ' ' : name[j];
    line[o++] = '\n';
    ceil_ip_trace_line_(".regions", line, (size_t)o);
}

/* Whether regions are followed at all: the profile counts, or the trace records. */
static int regions_on(void)
{
    return __atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE) || ceil_ip_active();
}

/* Name i's stored copy is `name` (both cut at REGION_NAME_MAX bytes, as the copy was). */
static int same_name(const char *r, const char *name)
{
    const size_t len = strnlen(name, REGION_NAME_MAX);
    return r && strncmp(r, name, len) == 0 && r[len] == '\0';
}

/* The index of an interned name, or -1. Lock-free: an entry below nregions is filled. */
static int region_find(const char *name)
{
    const int n = __atomic_load_n(&nregions, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (same_name(__atomic_load_n(&region_name[i], __ATOMIC_ACQUIRE), name))
            return i;
    return -1;
}

/* The index of a name, interned at its first use; -1 when the table is full or no memory is left.
 * Threads that meet a new name at once (every thread of an OpenMP team beginning "solve") take a
 * spin lock to add it, and look again under it, so a name has one index. Never in a signal handler. */
static int region_index(const char *name)
{
    int i = region_find(name);
    if (i >= 0)
        return i;
    while (__atomic_test_and_set(&region_lock, __ATOMIC_ACQUIRE))
        ;
    i = region_find(name);
    const int n = __atomic_load_n(&nregions, __ATOMIC_RELAXED);
    if (i < 0 && n < REGION_NAMES) {
        const size_t len = strnlen(name, REGION_NAME_MAX);
        char *copy = mmap(NULL, len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy != MAP_FAILED) {
            memcpy(copy, name, len);
            __atomic_store_n(&region_name[n], copy, __ATOMIC_RELEASE);
            __atomic_store_n(&nregions, n + 1, __ATOMIC_RELEASE);
            i = n;
        }
    }
    __atomic_clear(&region_lock, __ATOMIC_RELEASE);
    return i;
}

CEIL_IP_EXPORT void ceiling_region_begin(const char *name)
{
    if (!name || !regions_on())
        return;
    const int d = depth_++;
    if (d >= REGION_DEPTH)
        return;
    const int i = region_index(name);
    if (i >= 0)
        region_line(i, region_name[i]);
    open_[d].idx = i < 0 ? UINT16_MAX : (uint16_t)i;
    open_[d].t0 = ceil_ip_ticks();
}

CEIL_IP_EXPORT void ceiling_region_end(const char *name)
{
    if (!name || !regions_on() || depth_ == 0)
        return;
    const uint64_t t1 = ceil_ip_ticks();
    int d = depth_ - 1;
    if (d < REGION_DEPTH) {
        const int i = region_find(name);                   /* an end names no new region */
        while (d >= 0 && open_[d].idx != (uint16_t)i)     /* the innermost open region of that name */
            d--;
        if (d < 0)
            return;                                        /* an end without its begin */
        region_counters *c = i >= 0 && i < REGION_COUNTED ? ceil_ip_block(&region_module) : NULL;
        if (c) {
            ceil_ip_add(&c->calls[i], 1);
            ceil_ip_add(&c->ticks[i], t1 - open_[d].t0);
        }
        if (i >= 0 && __atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE)) {
            ceil_ip_trace_ev e = {.t0 = open_[d].t0, .dur = t1 - open_[d].t0, .result = 0, .offset = -1,
                                  .call = (uint16_t)i, .kind = CEIL_IP_EV_REGION, .file = -1};
            ceil_ip_trace_put_(&e);
        }
    }
    depth_ = d;
}

/* In the child of fork: its regions file is its own, so the names are written again as they come. */
void ceil_ip_region_forked_(void)
{
    memset(region_name, 0, sizeof region_name);
    memset(region_named, 0, sizeof region_named);
    nregions = 0;
    region_lock = 0;                       /* a thread of the parent may have held it: it does not exist here */
    depth_ = 0;
}
