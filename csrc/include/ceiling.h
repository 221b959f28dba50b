/*
 * ceiling.h - the C core's one interface: a table of kernel descriptors.
 *
 * Python (src/ceiling/core.py) loads libceiling_core.so with ctypes, walks the
 * table and calls a kernel's run() with ceil_params; the kernel fills
 * ceil_result with the raw time of every repetition and the work it did.
 * Rates (GB/s, Gflop/s, ns) are computed in Python from bytes_per_iter and
 * flops_per_iter: the C side only times and validates.
 *
 * Conventions every kernel follows:
 *   - Threads are OpenMP threads, thread i pinned to cpus[i] when cpus != NULL
 *     (ceil_pin_self), memory first-touched by the thread that will use it.
 *   - Each repetition is timed as a whole loop between barriers
 *     (ceil_now(), CLOCK_MONOTONIC), never single calls.
 *   - warmup repetitions run before the timed ones and are not recorded.
 *   - result->iters is the number of iterations done per repetition by all
 *     threads together, so rate = iters * bytes_per_iter / times[r].
 *   - result->valid is 1 only when the kernel checked its own output
 *     against the analytic value; msg says why when it is 0.
 *   - run() returns 0 on success, a negative CEIL_E* code on bad parameters
 *     or failed allocation (msg says which); it never exits the process.
 *
 * Symbols are prefixed ceil_. ABI changes bump CEIL_ABI_VERSION, which core.py
 * checks at load time.
 */
#ifndef CEILING_H
#define CEILING_H

#include <stddef.h>
#include <stdint.h>

#define CEIL_ABI_VERSION 1

/* flags */
#define CEIL_F_NT_STORES  0x1  /* bandwidth: non-temporal (streaming) stores */
#define CEIL_F_HUGEPAGES  0x2  /* latency/bandwidth: ask for 2 MiB pages (madvise) */

/* error codes returned by run() */
#define CEIL_EINVAL  (-1)      /* a parameter is out of range */
#define CEIL_ENOMEM  (-2)      /* allocation failed */
#define CEIL_ENOISA  (-3)      /* the CPU lacks the ISA this variant needs */
#define CEIL_EPIN    (-4)      /* pinning a thread to its CPU failed */

typedef struct ceil_params {
    int64_t size;          /* kernel-specific: elements per array (bandwidth), working-set bytes (latency); 0 = n/a */
    int64_t iters;         /* kernel-specific: passes (bandwidth), loads (latency), loop trips per thread (flops, clock), round trips (c2c) */
    int32_t reps;          /* timed repetitions; result->times must hold reps doubles */
    int32_t warmup;        /* untimed repetitions before the timed ones */
    int32_t nthreads;      /* OpenMP threads to use (>= 1) */
    int32_t flags;         /* CEIL_F_* */
    const int32_t *cpus;   /* nthreads logical CPU ids; thread i runs on cpus[i]; NULL = leave placement to the OS */
    int64_t stride;        /* latency: bytes between chased lines (0 = kernel default) */
    uint64_t seed;         /* random permutations */
    int32_t mem_node;      /* NUMA node to bind the working set to (mbind); -1 = first touch by the using thread */
    int32_t reserved;
} ceil_params;

typedef struct ceil_result {
    double *times;         /* caller-allocated, reps entries: seconds of each timed repetition */
    int64_t iters;         /* iterations per repetition, all threads together */
    double check;          /* kernel-specific value used for validation (checksum, final index) */
    int32_t valid;         /* 1: output matched the analytic value; 0: it did not (see msg) */
    int32_t hugepages;     /* 1 when huge pages backed the working set */
    int32_t nthreads;      /* threads that actually ran */
    int32_t reserved;
    char msg[256];         /* why valid == 0 or run() < 0; empty otherwise */
} ceil_result;

typedef int (*ceil_run_fn)(const ceil_params *p, ceil_result *r);

/* One kernel, described once. */
typedef struct ceil_kernel {
    const char *name;        /* "stream_triad", "peak_fma", "chase", "c2c_pingpong", "clock_add" */
    const char *family;      /* "bandwidth" | "flops" | "latency" | "c2c" | "clock" */
    const char *isa;         /* "scalar" | "sse2" | "avx2" | "avx512" | "neon" | "sve" */
    double bytes_per_iter;   /* STREAM byte counting: bytes named in the source per iteration */
    double flops_per_iter;   /* floating-point operations per iteration (DP and SP are separate kernels) */
    const char *doc;         /* one line: what one iteration is */
    ceil_run_fn run;
} ceil_kernel;

/* The table (registry.c). */
int ceil_abi_version(void);
int ceil_kernel_count(void);
const ceil_kernel *ceil_kernel_get(int i);

/* 1 when this CPU and OS can run code of the named ISA ("scalar", "sse2",
 * "fma" (FMA3), "avx2" (with FMA3), "avx512", "neon", "sve"), else 0. */
int ceil_isa_supported(const char *isa);

/* Helpers shared by kernels (common.c). */
double ceil_now(void);                               /* seconds, CLOCK_MONOTONIC */
int ceil_pin_self(int cpu);                           /* 0 or -errno */

/* A thread's CPU affinity, saved so that it can be put back: pinning outlives
 * an OpenMP region (the caller is thread 0, and OpenMP keeps its workers). */
typedef struct ceil_affinity {
    unsigned long mask[16];   /* 1024 CPUs, as cpu_set_t */
    int have;                 /* 1 when mask was read */
} ceil_affinity;
int ceil_pin_saving(int cpu, ceil_affinity *saved);   /* ceil_pin_self after saving the old mask */
void ceil_affinity_restore(const ceil_affinity *saved);
/* Inside an OpenMP region: pin thread tid to p->cpus[tid] (when cpus is set),
 * saving its affinity in *old; the first failure of the team goes to *fail
 * (-errno; stays 0 when all pinned) and *fail_cpu. */
void ceil_pin_member(const ceil_params *p, int tid, ceil_affinity *old, int *fail, int *fail_cpu);
int ceil_huge_backed(const void *p, size_t bytes);    /* 1: >= half on huge pages, 0: not, -1: cannot tell */
void *ceil_alloc(size_t bytes, int hugepages, int *got_huge); /* 2 MiB aligned, zeroed lazily; free with ceil_free */
void ceil_free(void *p, size_t bytes);
void ceil_set_msg(ceil_result *r, const char *fmt, ...);

/* Zero a result's outputs (not its times buffer) before a kernel fills it. */
void ceil_result_clear(ceil_result *r);
int ceil_bind_node(void *p, size_t bytes, int node);   /* before first touch; 0, or -errno; node < 0: no-op */

/* The OS-noise probe (noise.c). Not a rate kernel, so not in the descriptor
 * table: Python calls it by name. Selfish-detour style: one thread pinned on
 * each p->cpus[i] reads CLOCK_MONOTONIC in a tight loop for duration_s, all
 * in one window, and every gap between consecutive reads longer than the
 * threshold is a detour (time the CPU spent elsewhere). */
typedef struct ceil_noise_gap {
    double start_s;        /* when the detour began, seconds after the window opened */
    double length_s;       /* its length, seconds */
} ceil_noise_gap;

typedef struct ceil_noise_stats {
    int64_t iters;         /* clock reads (loop trips) */
    int64_t detours;       /* gaps longer than the threshold */
    double detour_s;       /* their sum, seconds */
    double min_gap_s;      /* the shortest gap: the loop's own cost (one clock read) */
    double max_gap_s;      /* the longest gap, seconds */
    double window_s;       /* the thread's first read to its last, seconds */
    double start_s;        /* the thread's first read after the shared start, seconds */
    int32_t cpu;           /* CPU the thread ended on (sched_getcpu), -1 when unknown */
    int32_t ntop;          /* entries filled in the thread's part of top[] */
} ceil_noise_stats;

/* p->nthreads threads, thread i on p->cpus[i] (NULL: unpinned); p->size is the
 * detour threshold in ns (0 = 1000 ns); other fields are ignored. stats holds
 * p->nthreads entries; top holds p->nthreads * cap gaps, thread i's `cap`
 * longest detours at top[i * cap], longest first. r->valid is 1 when every
 * thread read the clock, its detours add up to no more than its window and it
 * ended on its CPU; r->iters is the reads of all threads, r->check the detour
 * seconds of all threads, r->times is not used. Returns 0, CEIL_EINVAL,
 * CEIL_EPIN; affinity is put back on return. */
int ceil_noise_detour(const ceil_params *p, double duration_s, ceil_noise_gap *top, int32_t cap,
                      ceil_noise_stats *stats, ceil_result *r);

/* Each family file provides NULL-name-terminated tables; registry.c collects
 * them. They are weak so that an ISA variant not built on this architecture
 * simply is not there. */
#define CEIL_TABLE(sym) extern const ceil_kernel sym[] __attribute__((weak))

#endif /* CEILING_H */
