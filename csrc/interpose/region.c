/*
 * region.c - user regions for the trace (`ceiling_region_begin/end`,
 * src/ceiling/include/ceiling/region.h; ceiling.region in Python): each
 * begin/end pair of a thread is one REGION event (trace.c's channel).
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
static const char *region_name[REGION_NAMES];   /* our copies of the names */
static int nregions;
static __thread struct { uint16_t idx; uint64_t t0; } open_[REGION_DEPTH];
static __thread int depth_;

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
    return i;
}

CEIL_IP_EXPORT void ceiling_region_begin(const char *name)
{
    if (!name || !__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE))
        return;
    const int d = depth_++;
    if (d >= REGION_DEPTH)
        return;
    const int i = region_index(name);
    open_[d].idx = i < 0 ? UINT16_MAX : (uint16_t)i;
    open_[d].t0 = ceil_ip_ticks();
}

CEIL_IP_EXPORT void ceiling_region_end(const char *name)
{
    if (!name || !__atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_ACQUIRE) || depth_ == 0)
        return;
    const uint64_t t1 = ceil_ip_ticks();
    int d = depth_ - 1;
    if (d < REGION_DEPTH) {
        const int i = region_index(name);
        while (d >= 0 && open_[d].idx != (uint16_t)i)     /* the innermost open region of that name */
            d--;
        if (d < 0)
            return;                                        /* an end without its begin */
        if (i >= 0) {
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
    nregions = 0;
    depth_ = 0;
}
