/* latency.c - load-to-use latency: one thread chasing a random pointer cycle.
 *
 * Every line of the working set (p->ws_bytes; one pointer each, p->stride
 * bytes apart)
 * points to the next line of a single random cycle through all of them
 * (Sattolo's algorithm), so each load depends on the one before and neither
 * the stride nor the page prefetchers can guess the next address: the time
 * per load is the latency of the level the working set lives in. This is
 * lmbench lat_mem_rd's loop (`p = *p`, unrolled) over a fully random chain,
 * with its timing done between whole loops like every other kernel here.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ceiling.h"

#define CHASE_DEFAULT_STRIDE 64
#define CHASE_UNROLL 16

/* splitmix64: a small, seedable generator that is good enough to shuffle. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) without the bias of a modulo (Lemire's multiply). */
static uint32_t below(uint64_t *state, uint32_t bound)
{
    return (uint32_t)(((unsigned __int128)next_random(state) * bound) >> 64);
}

/* Sattolo's algorithm: a uniformly random permutation that is one cycle
 * through all n elements; next[i] is the line visited after line i. */
static void sattolo(uint32_t *next, uint32_t n, uint64_t seed)
{
    uint64_t state = seed;
    for (uint32_t i = 0; i < n; i++)
        next[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = below(&state, i);     /* j < i: what makes it a single cycle */
        uint32_t t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
}

/* Follow the chain from line 0 of `base` (n lines, one pointer per `stride`
 * bytes) for at most n loads. Returns after how many loads it is first back
 * at line 0, or -1 when it is not back within n loads or a pointer leaves the
 * lines. A result of n means the chain is a single cycle that visits every
 * line exactly once. When order is not NULL it receives the line visited at
 * each step (n entries). Public so that tests can hand it a broken chain. */
int64_t ceil_chase_cycle_length(const void *base, int64_t n, int64_t stride, uint32_t *order)
{
    if (!base || n <= 0 || stride < (int64_t)sizeof(void *))
        return -1;
    const uintptr_t lo = (uintptr_t)base, span = (uintptr_t)n * (uintptr_t)stride;
    uintptr_t cur = lo;
    for (int64_t k = 1; k <= n; k++) {
        if (order)
            order[k - 1] = (uint32_t)((cur - lo) / (uintptr_t)stride);
        cur = (uintptr_t)*(void *const *)cur;
        if (cur - lo >= span || (cur - lo) % (uintptr_t)stride != 0)
            return -1;
        if (cur == lo)
            return k;
    }
    return -1;
}

/* The timed loop: `loads` dependent loads, 16 to a loop trip. */
static __attribute__((noinline)) void **chase(void **p, int64_t loads)
{
#define ONE p = (void **)*p;
#define FOUR ONE ONE ONE ONE
    for (int64_t b = loads / CHASE_UNROLL; b > 0; b--) {
        FOUR FOUR FOUR FOUR
    }
    for (int64_t i = loads % CHASE_UNROLL; i > 0; i--) {
        ONE
    }
#undef FOUR
#undef ONE
    return p;
}

static int run_chase(const ceil_params *p, ceil_result *r)
{
    ceil_result_clear(r);

    int bad = ceil_params_unread(p, CEIL_READS_WS_BYTES | CEIL_READS_STRIDE | CEIL_READS_MEM_NODE,
                                 CEIL_F_HUGEPAGES, "chase", r);
    if (bad)
        return bad;
    if (p->nthreads > 1) {
        ceil_set_msg(r, "chase: one thread chases (nthreads = %d)", (int)p->nthreads);
        return CEIL_EINVAL;
    }

    const int64_t stride = p->stride > 0 ? p->stride : CHASE_DEFAULT_STRIDE;
    if (stride < (int64_t)sizeof(void *) || stride % (int64_t)sizeof(void *) != 0) {
        ceil_set_msg(r, "chase: stride %lld must be a multiple of %zu bytes", (long long)stride, sizeof(void *));
        return CEIL_EINVAL;
    }
    if (p->ws_bytes < 2 * stride) {
        ceil_set_msg(r, "chase: working set of %lld bytes (ws_bytes) holds fewer than 2 lines of %lld bytes",
                     (long long)p->ws_bytes, (long long)stride);
        return CEIL_EINVAL;
    }
    const int64_t n = p->ws_bytes / stride;
    if (n > (int64_t)UINT32_MAX) {
        ceil_set_msg(r, "chase: %lld lines is more than this kernel indexes (2^32 - 1)", (long long)n);
        return CEIL_EINVAL;
    }
    if (p->iters < 1 || p->reps < 1 || p->warmup < 0 || !r->times) {
        ceil_set_msg(r, "chase: needs iters >= 1, reps >= 1, warmup >= 0 and a times array");
        return CEIL_EINVAL;
    }

    /* The caller's thread does the work: pin it, and give it back its own
     * affinity at the end so that Python is not left on one CPU. */
    ceil_affinity saved = {{0}, 0};
    if (p->cpus) {
        int e = ceil_pin_saving(p->cpus[0], &saved);
        if (e != 0) {
            ceil_affinity_restore(&saved);
            ceil_set_msg(r, "chase: cannot pin to CPU %d: %s", p->cpus[0], strerror(-e));
            return CEIL_EPIN;
        }
    }

    int rc = 0;
    const size_t bytes = (size_t)n * (size_t)stride;
    char *buf = NULL;
    uint32_t *next = malloc((size_t)n * sizeof *next);
    if (!next) {
        ceil_set_msg(r, "chase: cannot allocate the %lld-entry permutation", (long long)n);
        rc = CEIL_ENOMEM;
        goto out;
    }
    int advised = 0;
    buf = ceil_alloc(bytes, (p->flags & CEIL_F_HUGEPAGES) != 0, &advised);
    if (!buf) {
        ceil_set_msg(r, "chase: cannot allocate %zu bytes", bytes);
        rc = CEIL_ENOMEM;
        goto out;
    }
    int e = ceil_bind_node(buf, bytes, p->mem_node);
    if (e != 0) {
        ceil_set_msg(r, "chase: cannot bind memory to NUMA node %d: %s", p->mem_node, strerror(-e));
        rc = CEIL_EINVAL;
        goto out;
    }

    sattolo(next, (uint32_t)n, p->seed);
    /* Written in address order, so pages are first-touched by this (pinned)
     * thread front to back. */
    for (int64_t i = 0; i < n; i++)
        *(void **)(buf + i * stride) = buf + (int64_t)next[i] * stride;

    /* One full lap through memory proves the chain is one cycle over every
     * line (back at line 0 after exactly n loads, not before), records the
     * order that validates the end of the timed chase, and leaves the
     * working set in the caches and TLBs for the warm-up. */
    uint32_t *order = next;   /* the permutation is in memory now: reuse its array */
    int64_t len = ceil_chase_cycle_length(buf, n, stride, order);
    r->check = (double)len;
    if (len != n) {
        ceil_set_msg(r, "chase: the chain is not one cycle over all %lld lines (lap through line 0: %lld loads)",
                     (long long)n, (long long)len);
        goto out;   /* valid stays 0: nothing is timed on a broken chain */
    }
    void **q = (void **)buf;

    for (int w = 0; w < p->warmup; w++)
        q = chase(q, p->iters);
    for (int rep = 0; rep < p->reps; rep++) {
        double t0 = ceil_now();
        q = chase(q, p->iters);
        r->times[rep] = ceil_now() - t0;
    }

    /* Where the chase ended says it did every load it claims. */
    uint64_t total = (uint64_t)(p->warmup + p->reps) * (uint64_t)p->iters;
    void **want = (void **)(buf + (int64_t)order[total % (uint64_t)n] * stride);
    r->iters = p->iters;
    r->nthreads = 1;
    r->hugepages = ceil_huge_backed(buf, bytes) == 1;
    if (q == want) {
        r->valid = 1;
    } else {
        ceil_set_msg(r, "chase: ended on line %lld, expected line %lld after %llu loads",
                     (long long)(((char *)q - buf) / stride), (long long)(((char *)want - buf) / stride),
                     (unsigned long long)total);
    }

out:
    if (buf)
        ceil_free(buf, bytes);
    free(next);
    ceil_affinity_restore(&saved);
    return rc;
}

static const ceil_kernel ceil_latency[] = {
    {"chase", "latency", "scalar", (double)sizeof(void *), 0.0,
     "one dependent load through a random cyclic chain, one pointer per stride bytes", run_chase},
    {NULL, NULL, NULL, 0, 0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_latency, CEIL_ORDER_LATENCY);
