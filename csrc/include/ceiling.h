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

/* ---- Storage (io.c) ------------------------------------------------------
 * POSIX file I/O loops for `ceiling bench storage`. Not rate kernels: a run
 * needs a directory, has several timed phases (write and read; create, stat,
 * read, unlink), per-operation latencies and errno-level failures, none of
 * which the descriptor table's one time per repetition can carry, so they
 * are called by name, like the noise probe.
 *
 * Every file is created with O_CREAT|O_EXCL inside spec->dir (never an
 * existing file is opened for writing), named "<tag>.<...>" as documented at
 * each function; every file and directory a call created is removed before it
 * returns, on success and on error, unless CEIL_IO_KEEP. p->nthreads threads,
 * thread i pinned on p->cpus[i] (NULL: unpinned); p->reps timed repetitions,
 * p->warmup untimed ones before them; p->seed seeds the data pattern.
 *
 * Data pattern: every 512-byte-aligned file offset `off` holds the 64-bit
 * word ceil_io_stamp(seed, file_id, off) (native byte order); every other
 * byte of a transfer is the byte at the same position of a buffer filled by
 * ceil_io_fill_base(seed) (position within the transfer, not the file). The
 * read phase checks every stamp (and every byte with CEIL_IO_VERIFY_ALL). */
#define CEIL_EIO      (-5)     /* an I/O call failed: out->err is its errno, msg names the call, file, offset */
#define CEIL_EDIRECT  (-6)     /* O_DIRECT refused by the file system (EINVAL): run again without it */
#define CEIL_ECANCEL  (-7)     /* ceil_io_cancel(1) was called during the run */
#define CEIL_EPEER    (-8)     /* parallel: another process stopped (its error is the one to report) */

#define CEIL_IO_FPP        0   /* one file per thread (IOR-easy, file per process) */
#define CEIL_IO_SEGMENTED  1   /* one shared file, thread t owns bytes [t*B, (t+1)*B) */
#define CEIL_IO_STRIDED    2   /* one shared file, transfer i of thread t at (i*N+t)*xfer (IOR-hard-like) */

#define CEIL_IO_DIRECT     0x1  /* open with O_DIRECT (xfer and offsets 4 KiB multiples, aligned buffers) */
#define CEIL_IO_EVICT      0x2  /* after the write phase's fsync: posix_fadvise(DONTNEED) on every file */
#define CEIL_IO_VERIFY_ALL 0x4  /* the read phase compares every byte, not only the stamp of each 512 B */
#define CEIL_IO_KEEP       0x8  /* leave the files (tests read them back); the caller removes them */
#define CEIL_IO_UNIQUE_DIR 0x10 /* metadata: a directory per thread (mdtest -u), not one shared */

#define CEIL_IO_FILE_SEQ   1    /* file_id kinds (the top byte of a file id) */
#define CEIL_IO_FILE_RAND  2
#define CEIL_IO_FILE_MD    3
#define CEIL_IO_SHARED_TID 0xFFFF  /* the tid field of a shared file's id */

typedef struct ceil_io_spec {
    const char *dir;           /* existing directory; everything is created inside it */
    const char *tag;           /* file-name prefix, no '/' */
    int64_t bytes_per_thread;  /* seq: data each thread writes; random: each thread's file size */
    int64_t xfer;              /* seq: bytes per transfer; random: bytes per operation */
    int64_t ops;               /* random: most operations per thread and phase; metadata: files per thread */
    double duration_s;         /* random: a phase ends after this many seconds (0: after ops) */
    int32_t layout;            /* seq: CEIL_IO_FPP | CEIL_IO_SEGMENTED | CEIL_IO_STRIDED */
    int32_t flags;             /* CEIL_IO_* */
    int32_t md_bytes;          /* metadata: bytes written at create and read back (0..1 MiB) */
    int32_t lat_cap;           /* latency samples kept per thread, phase and repetition (reservoir) */
    void (*between)(void);     /* seq: NULL, or called on the calling thread after the write phase
                                * (and eviction) and before the read phase: tests corrupt data here */
    /* Several processes (MPI ranks) in one measurement; all zero for a process alone. Each process
     * calls the same function with the same parameters; its threads are global threads
     * gbase .. gbase + nthreads - 1 of gthreads, and file names, file ids and shared-file offsets
     * use the global index. */
    int32_t gbase;             /* global index of this call's thread 0 */
    int32_t gthreads;          /* threads of all processes (0: nthreads, a process alone) */
    int32_t rbase;             /* seq: thread t reads back what global thread rbase + t wrote (IOR -C,
                                * task reordering: another node's data); -1 or gbase: its own */
    int32_t reserved;
    int (*sync)(int stop);     /* NULL, or called by thread 0 of every process at the same points: before
                                * each timed phase and wherever the threads agree to go on or stop.
                                * It must wait for every process (a barrier) and return 1 when any of
                                * them passed stop = 1. A process that learns of another's stop returns
                                * CEIL_EPEER. Files other processes read are removed only after they
                                * all passed the next point. */
} ceil_io_spec;

typedef struct ceil_io_out {
    double *phase_s;           /* caller's, reps x nphases: seconds of each timed phase */
    int64_t *amount;           /* caller's, reps x nphases: bytes (seq) or operations (random, metadata), all threads */
    float *lat_s;              /* caller's or NULL, reps x nphases x nthreads x lat_cap: per-operation seconds */
    int64_t *lat_n;            /* caller's or NULL, reps x nphases x nthreads: samples stored */
    int64_t bad_offset;        /* first mismatching byte's file offset, -1 when none */
    double resident;           /* seq: the largest fraction of file pages found resident (mincore) after
                                * the write phase (and eviction) over the repetitions; -1: could not tell */
    int32_t err;               /* errno of the failed call (CEIL_EIO, CEIL_EDIRECT), 0 */
    int32_t direct;            /* 1 when the files were opened with O_DIRECT */
    int32_t nphases;           /* phases per repetition: seq 2, random 2, metadata 4 */
    int32_t reserved;
} ceil_io_out;

/* Sequential write then read. Files: "<tag>.r<rep>.t<g>" (FPP; g the global thread index) or
 * "<tag>.r<rep>.shared". Phase 0 (write): every thread's transfers, then its
 * fsync and close (IOR -e), between barriers; phase 1 (read): the same
 * transfers read back and checked. Files are created and opened before the
 * clock starts. r->valid: every transfer read back matched; msg names the
 * first mismatch (out->bad_offset). Returns 0, CEIL_EINVAL, CEIL_EPIN,
 * CEIL_ENOMEM, CEIL_EIO, CEIL_EDIRECT, CEIL_ECANCEL. */
int ceil_io_seq(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r);

/* Random operations of spec->xfer bytes at aligned offsets over one file per
 * thread ("<tag>.t<g>", bytes_per_thread each, written and fsynced untimed
 * first). Each repetition: evict (with CEIL_IO_EVICT), phase 0 random reads
 * (checked), phase 1 random writes of the same pattern then fsync (timed).
 * pread/pwrite, one operation in flight per thread (fio psync, iodepth=1). */
int ceil_io_random(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r);

/* Metadata: each thread creates spec->ops files of md_bytes, then stats,
 * reads (checked) and unlinks them, a barrier between phases (mdtest's
 * order). Files: "<tag>.r<rep>/f.<g>.<i>" (shared directory) or
 * "<tag>.r<rep>/t<g>/f.<i>" (CEIL_IO_UNIQUE_DIR). */
int ceil_io_meta(const ceil_params *p, const ceil_io_spec *s, ceil_io_out *o, ceil_result *r);

/* Ask a running ceil_io_* call to stop (on = 1) at its next operation; it then
 * removes its files and returns CEIL_ECANCEL. on = 0 clears the request. */
void ceil_io_cancel(int on);

/* The pattern, for callers that check files themselves. */
uint64_t ceil_io_stamp(uint64_t seed, uint64_t file_id, uint64_t offset);
uint64_t ceil_io_file_id(int kind, int rep, int tid, int64_t index);
void ceil_io_fill_base(uint64_t seed, void *buf, size_t bytes);

/* Each family file provides NULL-name-terminated tables; registry.c collects
 * them. They are weak so that an ISA variant not built on this architecture
 * simply is not there. */
#define CEIL_TABLE(sym) extern const ceil_kernel sym[] __attribute__((weak))

#endif /* CEILING_H */
