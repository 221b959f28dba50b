/* common.c - timing, pinning, allocation and ISA detection shared by kernels. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
#include "ceiling.h"

#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif
#endif

double ceil_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ceil_pin_self(int cpu)
{
    cpu_set_t set;
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return -EINVAL;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return -errno;
    return 0;
}

int ceil_pin_saving(int cpu, ceil_affinity *saved)
{
    saved->have = sched_getaffinity(0, sizeof saved->mask, (cpu_set_t *)(void *)saved->mask) == 0;
    return ceil_pin_self(cpu);
}

void ceil_affinity_restore(const ceil_affinity *saved)
{
    if (saved->have)
        sched_setaffinity(0, sizeof saved->mask, (const cpu_set_t *)(const void *)saved->mask);
}

void ceil_pin_member(const ceil_params *p, int tid, ceil_affinity *old, int *fail, int *fail_cpu)
{
    old->have = 0;
    if (!p->cpus)
        return;
    int rc = ceil_pin_saving(p->cpus[tid], old);
    if (rc != 0) {
#pragma omp critical(ceil_pin_fail)
        if (*fail == 0) {
            *fail = rc;
            *fail_cpu = p->cpus[tid];
        }
    }
}

#define HUGE_2M (2u << 20)

/* mmap rather than malloc: the pages are untouched until the thread that
 * uses them writes first (first touch), and 2 MiB alignment lets
 * transparent huge pages back the whole range when asked. */
void *ceil_alloc(size_t bytes, int hugepages, int *got_huge)
{
    size_t len = (bytes + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1);
    if (got_huge)
        *got_huge = 0;
    if (len == 0)
        len = HUGE_2M;
    /* mmap aligns to 2 MiB by itself only on recent kernels: map 2 MiB more
     * and trim both ends, so the range is exactly [p, p+len), aligned. */
    char *raw = mmap(NULL, len + HUGE_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + len + HUGE_2M > p + len)
        munmap(p + len, (size_t)(raw + len + HUGE_2M - (p + len)));
#ifdef MADV_HUGEPAGE
    if (hugepages) {
        if (madvise(p, len, MADV_HUGEPAGE) == 0 && got_huge)
            *got_huge = 1;   /* advised; the caller confirms with ceil_huge_backed if it must know */
    } else {
#ifdef MADV_NOHUGEPAGE
        madvise(p, len, MADV_NOHUGEPAGE);
#endif
    }
#endif
    return p;
}

void ceil_free(void *p, size_t bytes)
{
    size_t len = (bytes + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1);
    if (len == 0)
        len = HUGE_2M;
    if (p)
        munmap(p, len);
}

void ceil_result_clear(ceil_result *r)
{
    r->iters = 0;
    r->check = 0.0;
    r->valid = 0;
    r->hugepages = 0;
    r->nthreads = 0;
    r->msg[0] = '\0';
}

int ceil_params_unread(const ceil_params *p, unsigned reads, int32_t flags, const char *who, ceil_result *r)
{
    const struct {
        unsigned bit;
        const char *name;
        int64_t value;
    } sizes[] = {
        {CEIL_READS_ELEMENTS, "elements", p->elements},
        {CEIL_READS_WS_BYTES, "ws_bytes", p->ws_bytes},
        {CEIL_READS_THRESHOLD_NS, "threshold_ns", p->threshold_ns},
        {CEIL_READS_STRIDE, "stride", p->stride},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (!(reads & sizes[i].bit) && sizes[i].value != 0) {
            ceil_set_msg(r, "%s: %s = %lld is not a parameter of this kernel", who, sizes[i].name,
                         (long long)sizes[i].value);
            return CEIL_EINVAL;
        }
    }
    if (!(reads & CEIL_READS_MEM_NODE) && p->mem_node >= 0) {
        ceil_set_msg(r, "%s: mem_node = %d is not a parameter of this kernel (it places no memory)", who,
                     (int)p->mem_node);
        return CEIL_EINVAL;
    }
    if (p->flags & ~flags) {
        ceil_set_msg(r, "%s: unknown flags 0x%x", who, (unsigned)(p->flags & ~flags));
        return CEIL_EINVAL;
    }
    return 0;
}

void ceil_set_msg(ceil_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

int ceil_isa_supported(const char *isa)
{
    if (!isa)
        return 0;
    if (strcmp(isa, "scalar") == 0)
        return 1;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (strcmp(isa, "sse2") == 0)
        return __builtin_cpu_supports("sse2") != 0;
    if (strcmp(isa, "fma") == 0)
        return __builtin_cpu_supports("fma") != 0;
    if (strcmp(isa, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (strcmp(isa, "avx512") == 0)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#elif defined(__aarch64__)
    unsigned long hw = getauxval(AT_HWCAP);
    if (strcmp(isa, "neon") == 0)
        return (hw & HWCAP_ASIMD) != 0;
    if (strcmp(isa, "sve") == 0)
        return (hw & HWCAP_SVE) != 0;
#endif
    return 0;
}

/* Bind [p, p+bytes) to one NUMA node with the raw mbind syscall, so no
 * libnuma is needed. Must be called before the pages are first touched. */
int ceil_bind_node(void *p, size_t bytes, int node)
{
#ifdef SYS_mbind
    if (node < 0)
        return 0;
    unsigned long mask[16] = {0};   /* up to 1024 nodes */
    if (node >= (int)(8 * sizeof mask))
        return -EINVAL;
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    size_t len = (bytes + HUGE_2M - 1) & ~(size_t)(HUGE_2M - 1);
    const int MPOL_BIND_ = 2;
    if (syscall(SYS_mbind, p, len, MPOL_BIND_, mask, 8 * sizeof mask + 1, 0) != 0)
        return -errno;
    return 0;
#else
    return node < 0 ? 0 : -ENOSYS;
#endif
}

/* 1 when at least half of [p, p+bytes) is on transparent huge pages, from
 * /proc/self/smaps; -1 when that cannot be read. */
int ceil_huge_backed(const void *p, size_t bytes)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int in = 0, res = -1;
    uintptr_t addr = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        long kb;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = addr >= lo && addr < hi;
        } else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
            res = (size_t)kb * 1024 >= bytes / 2;
            break;
        }
    }
    fclose(f);
    return res;
}
