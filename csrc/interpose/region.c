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
 * one; lost: the names past REGION_COUNTED, not counted.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "interpose.h"

/* A region's name is interned once per process into a table of REGION_NAMES
 * (an atomic add claims an entry; past it a region is not recorded), and appended at once, "index name\n", to
 * DIR/trace-<pid>-<start_ns>.regions with one O_APPEND write, so a killed
 * process's regions are still named. Each thread keeps a stack of
 * REGION_DEPTH open regions; the end of one writes a REGION event (call: the
 * index, t0: its begin, dur) for the innermost open region of that name. */
#define REGION_NAMES 1024
#define REGION_DEPTH 64
#define REGION_COUNTED 128     /* names whose calls and time the profile keeps: 2 KiB per thread slot */
static const char *region_name[REGION_NAMES];   /* our copies of the names */
static int region_named[REGION_NAMES];          /* 1 once its line is in the trace's .regions file */
static int nregions;
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
        CEIL_IP_PUT_U64(out, lost, (uint64_t)((n < REGION_NAMES ? n : REGION_NAMES) - REGION_COUNTED));
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
    if (!__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&region_named[i], 1,
                                                                                     __ATOMIC_ACQ_REL))
        return;
    size_t len = strnlen(name, 200);
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

static int region_index(const char *name)
{
    const int n = __atomic_load_n(&nregions, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n && i < REGION_NAMES; i++) {
        const char *r = __atomic_load_n(&region_name[i], __ATOMIC_ACQUIRE);
        if (r && (r == name || strcmp(r, name) == 0))
            return i;
    }
    const int i = __atomic_fetch_add(&nregions, 1, __ATOMIC_ACQ_REL);
    if (i >= REGION_NAMES)
        return -1;
    size_t len = strnlen(name, 200);
    char *copy = mmap(NULL, len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return -1;
    memcpy(copy, name, len);
    __atomic_store_n(&region_name[i], copy, __ATOMIC_RELEASE);
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
        const int i = region_index(name);
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
    depth_ = 0;
}
