/*
 * ceiling.h - the C core's one interface: a table of kernel descriptors.
 *
 * Python (src/ceiling/core/) loads libceiling_core.so with ctypes, walks the
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
 *   - A kernel reads only the ceil_params fields of its family (the table at
 *     ceil_params) and refuses, with CEIL_EINVAL, a set field it would ignore
 *     (ceil_params_unread): a caller cannot pass a size to the wrong name.
 *
 * Adding a kernel family: a new csrc/kernels/<family>[_<isa>].c defines its
 * NULL-name-terminated table and registers it with CEIL_REGISTER_TABLE (end
 * of this file); CMake globs the file, the registry finds the table. Nothing
 * else is edited.
 *
 * Symbols are prefixed ceil_. ABI changes bump CEIL_ABI_VERSION, which
 * src/ceiling/core/__init__.py checks at load time. The LD_PRELOAD
 * interposer is a separate library with its own header
 * (csrc/interpose/interpose.h, prefix ceil_ip_) and shares nothing with this.
 */
#ifndef CEILING_H
#define CEILING_H

#include <stddef.h>
#include <stdint.h>

/* 2: ceil_params.size split into elements, ws_bytes and threshold_ns. */
#define CEIL_ABI_VERSION 2

/* flags */
#define CEIL_F_NT_STORES  0x1  /* bandwidth: non-temporal (streaming) stores */
#define CEIL_F_HUGEPAGES  0x2  /* latency/bandwidth: ask for 2 MiB pages (madvise) */
#define CEIL_F_THREAD_CPU 0x4  /* clock: also each repetition's own CPU time of its slowest thread
                                * (CLOCK_THREAD_CPUTIME_ID) in times[reps .. 2*reps-1]: times
                                * must then hold 2*reps doubles */

/* error codes returned by run() */
#define CEIL_EINVAL  (-1)      /* a parameter is out of range */
#define CEIL_ENOMEM  (-2)      /* allocation failed */
#define CEIL_ENOISA  (-3)      /* the CPU lacks the ISA this variant needs */
#define CEIL_EPIN    (-4)      /* pinning a thread to its CPU failed */

/* One parameter block for every kernel. The fields each family reads (any
 * other field must be left at its "unset" value: 0, mem_node -1, flags 0):
 *
 *   family     reads
 *   bandwidth  elements, iters, reps, warmup, nthreads, cpus, flags (NT_STORES, HUGEPAGES), mem_node
 *   latency    ws_bytes, stride, seed, iters, reps, warmup, cpus[0], flags (HUGEPAGES), mem_node;
 *              nthreads must be 1 (or 0)
 *   flops      iters, reps, warmup, nthreads, cpus
 *   clock      iters, reps, warmup, nthreads, cpus, flags (THREAD_CPU)
 *   c2c        iters, reps, warmup, nthreads (= 2), cpus (two distinct CPUs)
 *   noise      threshold_ns, nthreads, cpus (ceil_noise_detour; duration is its own argument)
 *   storage    nthreads, cpus, reps, warmup, seed (ceil_io_*: the rest is in ceil_io_spec)
 *
 * Every family but storage refuses a set elements, ws_bytes, threshold_ns or
 * stride it does not read, a mem_node >= 0 where it places no memory, and a
 * flag it does not know (ceil_params_unread). seed is never refused: it has
 * no unset value. */
typedef struct ceil_params {
    int64_t elements;      /* bandwidth: doubles per array (each of a, b, c; load_sum's one array) */
    int64_t ws_bytes;      /* latency: working-set bytes, chased stride bytes apart */
    int64_t threshold_ns;  /* noise: a gap between clock reads longer than this, ns, is a detour (0 = 1000) */
    int64_t iters;         /* passes (bandwidth), loads (latency), loop trips per thread (flops, clock), round trips (c2c) */
    int32_t reps;          /* timed repetitions; result->times must hold reps doubles */
    int32_t warmup;        /* untimed repetitions before the timed ones */
    int32_t nthreads;      /* OpenMP threads to use (>= 1) */
    int32_t flags;         /* CEIL_F_* */
    const int32_t *cpus;   /* nthreads logical CPU ids; thread i runs on cpus[i]; NULL = leave placement to the OS */
    int64_t stride;        /* latency: bytes between chased lines (0 = 64) */
    uint64_t seed;         /* latency: the chain's random permutation; storage: the data pattern */
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

/*
 * A kernel's entry point: run p->warmup untimed and p->reps timed
 * repetitions and fill *r (r->times is the caller's, p->reps doubles).
 * Returns 0 (then r->valid says whether the output checked out) or a
 * negative CEIL_E* code with r->msg saying why.
 */
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

/* ---- The table (registry.c) ---------------------------------------------- */

/*
 * int ceil_abi_version(void)
 *
 * CEIL_ABI_VERSION of the built library; the Python binding refuses any
 * other.
 */
int ceil_abi_version(void);

/*
 * int ceil_kernel_count(void)
 *
 * Number of kernels compiled into this library, on this architecture,
 * whether or not this CPU runs them (ceil_isa_supported says).
 */
int ceil_kernel_count(void);

/*
 * const ceil_kernel *ceil_kernel_get(int i)
 *
 * Kernel i, 0 <= i < ceil_kernel_count(), NULL outside. The order is fixed
 * for a build: tables by their CEIL_ORDER_* rank, kernels in table order
 * (what `ceiling bench --list` prints).
 */
const ceil_kernel *ceil_kernel_get(int i);

/*
 * int ceil_isa_supported(const char *isa)
 *
 * 1 when this CPU and OS can run code of the named ISA ("scalar", "sse2",
 * "fma" (FMA3), "avx2" (with FMA3), "avx512", "neon", "sve"), else 0.
 */
int ceil_isa_supported(const char *isa);

/*
 * int ceil_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t out[4])
 *
 * Raw cpuid(leaf, subleaf) on the calling CPU into out[0..3] = eax, ebx,
 * ecx, edx (cpuid.c). Returns 0, or CEIL_ENOISA where there is no cpuid (not
 * x86; out is zeroed). The caller checks the maximum leaf first.
 */
int ceil_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t out[4]);

/*
 * int64_t ceil_chase_cycle_length(const void *base, int64_t n, int64_t stride, uint32_t *order)
 *
 * Follow a pointer chain of n lines `stride` bytes apart from line 0 of
 * `base` (latency.c). Returns after how many loads it is first back at line
 * 0 (n: one cycle through every line), or -1 when it is not back within n
 * loads or a pointer leaves the lines. order, when not NULL, receives the
 * line visited at each step (n entries). Public so that tests can hand it a
 * broken chain.
 */
int64_t ceil_chase_cycle_length(const void *base, int64_t n, int64_t stride, uint32_t *order);

/* ---- Helpers shared by kernels (common.c) -------------------------------- */

/*
 * double ceil_now(void)
 *
 * Seconds on CLOCK_MONOTONIC: the clock every repetition is timed with.
 */
double ceil_now(void);

/*
 * int ceil_pin_self(int cpu)
 *
 * Pin the calling thread to one CPU. Returns 0 or -errno.
 */
int ceil_pin_self(int cpu);

/* A thread's CPU affinity, saved so that it can be put back: pinning outlives
 * an OpenMP region (the caller is thread 0, and OpenMP keeps its workers). */
typedef struct ceil_affinity {
    unsigned long mask[16];   /* 1024 CPUs, as cpu_set_t */
    int have;                 /* 1 when mask was read */
} ceil_affinity;

/*
 * int ceil_pin_saving(int cpu, ceil_affinity *saved)
 *
 * ceil_pin_self after saving the thread's affinity in *saved, which
 * ceil_affinity_restore puts back (also after a failed pin).
 */
int ceil_pin_saving(int cpu, ceil_affinity *saved);

/*
 * void ceil_affinity_restore(const ceil_affinity *saved)
 *
 * Put back an affinity saved by ceil_pin_saving or ceil_pin_member; nothing
 * when none was saved.
 */
void ceil_affinity_restore(const ceil_affinity *saved);

/*
 * void ceil_pin_member(const ceil_params *p, int tid, ceil_affinity *old, int *fail, int *fail_cpu)
 *
 * Inside an OpenMP region: pin thread tid to p->cpus[tid] (when cpus is set),
 * saving its affinity in *old; the first failure of the team goes to *fail
 * (-errno; stays 0 when all pinned) and *fail_cpu.
 */
void ceil_pin_member(const ceil_params *p, int tid, ceil_affinity *old, int *fail, int *fail_cpu);

/*
 * int ceil_huge_backed(const void *p, size_t bytes)
 *
 * 1 when at least half of [p, p+bytes) is on transparent huge pages, 0 when
 * not, -1 when /proc/self/smaps cannot tell.
 */
int ceil_huge_backed(const void *p, size_t bytes);

/*
 * void *ceil_alloc(size_t bytes, int hugepages, int *got_huge)
 *
 * bytes of anonymous memory, 2 MiB aligned, untouched (first touch is the
 * user's), MADV_HUGEPAGE when hugepages (then *got_huge = 1 if advised),
 * MADV_NOHUGEPAGE otherwise. NULL on failure. Free with ceil_free.
 */
void *ceil_alloc(size_t bytes, int hugepages, int *got_huge);

/*
 * void ceil_free(void *p, size_t bytes)
 *
 * Unmap what ceil_alloc(bytes, ...) returned; p may be NULL.
 */
void ceil_free(void *p, size_t bytes);

/*
 * int ceil_bind_node(void *p, size_t bytes, int node)
 *
 * Bind [p, p+bytes) to NUMA node `node` (mbind, before first touch).
 * Returns 0, or -errno; node < 0 is a no-op.
 */
int ceil_bind_node(void *p, size_t bytes, int node);

/*
 * void ceil_set_msg(ceil_result *r, const char *fmt, ...)
 *
 * printf into r->msg (truncated to its 256 bytes).
 */
void ceil_set_msg(ceil_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * void ceil_result_clear(ceil_result *r)
 *
 * Zero a result's outputs (not its times buffer) before a kernel fills it.
 */
void ceil_result_clear(ceil_result *r);

/* The fields of ceil_params a kernel reads beyond iters, reps, warmup,
 * nthreads, cpus and seed: the `reads` mask of ceil_params_unread. */
#define CEIL_READS_ELEMENTS     0x01
#define CEIL_READS_WS_BYTES     0x02
#define CEIL_READS_THRESHOLD_NS 0x04
#define CEIL_READS_STRIDE       0x08
#define CEIL_READS_MEM_NODE     0x10

/*
 * int ceil_params_unread(const ceil_params *p, unsigned reads, int32_t flags, const char *who, ceil_result *r)
 *
 * Refuse a field a kernel would silently ignore: elements, ws_bytes,
 * threshold_ns or stride not 0, or mem_node >= 0, where `reads`
 * (CEIL_READS_*) does not name it, or a flag outside `flags`. Returns 0, or
 * CEIL_EINVAL with r->msg "<who>: <field> = <value> is not a parameter of
 * this kernel".
 */
int ceil_params_unread(const ceil_params *p, unsigned reads, int32_t flags, const char *who, ceil_result *r);

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

/*
 * int ceil_noise_detour(const ceil_params *p, double duration_s, ceil_noise_gap *top, int32_t cap,
 *                       ceil_noise_stats *stats, ceil_result *r)
 *
 * p->nthreads threads, thread i on p->cpus[i] (NULL: unpinned);
 * p->threshold_ns is the detour threshold (0 = 1000 ns); the other size
 * fields, mem_node >= 0 and flags are refused (ceil_params_unread). stats holds
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
#define CEIL_EQUEUE   (-9)     /* random with depth > 1: Linux AIO refused (io_setup); out->err, msg say why */

#define CEIL_IO_FPP        0   /* one file per thread (IOR-easy, file per process) */
#define CEIL_IO_SEGMENTED  1   /* one shared file, thread t owns bytes [t*B, (t+1)*B) */
#define CEIL_IO_STRIDED    2   /* one shared file, transfer i of thread t at (i*N+t)*xfer (IOR-hard-like) */

#define CEIL_IO_DIRECT     0x1  /* open with O_DIRECT (xfer and offsets 4 KiB multiples, aligned buffers) */
#define CEIL_IO_EVICT      0x2  /* after the write phase's fsync: posix_fadvise(DONTNEED) on every file */
#define CEIL_IO_VERIFY_ALL 0x4  /* the read phase compares every byte, not only the stamp of each 512 B */
#define CEIL_IO_KEEP       0x8  /* leave the files (tests read them back); the caller removes them */
#define CEIL_IO_UNIQUE_DIR 0x10 /* metadata: a directory per thread (mdtest -u), not one shared */
#define CEIL_IO_SEQ_ORDER  0x20 /* random: the file's blocks in order, from its start and around again */

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
    void (*between)(void);     /* NULL, or called by one thread, seq: after the write phase (and
                                * eviction) and before the read phase; random: after the files are
                                * written, before the first repetition. Tests corrupt data here */
    /* Several processes (MPI ranks) in one measurement; all zero for a process alone. Each process
     * calls the same function with the same parameters; its threads are global threads
     * gbase .. gbase + nthreads - 1 of gthreads, and file names, file ids and shared-file offsets
     * use the global index. */
    int32_t gbase;             /* global index of this call's thread 0 */
    int32_t gthreads;          /* threads of all processes (0: nthreads, a process alone) */
    int32_t rbase;             /* seq: thread t reads back what global thread rbase + t wrote (IOR -C,
                                * task reordering: another node's data); -1 or gbase: its own */
    int32_t depth;             /* random: operations in flight per thread; 0 or 1: pread/pwrite, one at a
                                * time (fio psync); more: Linux AIO, which needs CEIL_IO_DIRECT (fio libaio) */
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
 * pread/pwrite, one operation in flight per thread (fio psync, iodepth=1), or
 * spec->depth in flight through Linux AIO with O_DIRECT (fio libaio, iodepth=
 * depth; CEIL_EQUEUE when AIO is refused). CEIL_IO_SEQ_ORDER: the blocks in
 * order instead (fio read/write at that depth). */
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

/* `ceiling probe` (csrc/kernels/io_probe.c): one operation each, timed alone.
 * ceil_probe_rw: one read (write = 0) or write of len bytes at off of the open
 * file fd. direct: fd has O_DIRECT (off and len 4096-aligned); else a read's
 * range is dropped from the page cache first (posix_fadvise DONTNEED) and a
 * write is followed by fdatasync, inside the time, and its range dropped.
 * 0 and *sec, or -errno (-EIO: the file ended before off + len).
 * ceil_probe_md: one MD-Workbench iteration on path, a file of md_bytes:
 * stat, read it whole, unlink, re-create it (O_EXCL, write, close); sec[4]
 * those four times. 0, or the step that failed (1..4) with *err its errno;
 * a negative errno for bad arguments. */
int ceil_probe_rw(int fd, int write, int64_t off, int64_t len, int direct, double *sec);
int ceil_probe_md(const char *path, int64_t md_bytes, double sec[4], int *err);

/* ---- Registering a table ------------------------------------------------
 * Each family file defines a NULL-name-terminated ceil_kernel array and
 * registers it once, at file scope:
 *
 *     static const ceil_kernel ceil_bw_avx2[] = { ..., {NULL} };
 *     CEIL_REGISTER_TABLE(ceil_bw_avx2, CEIL_ORDER_BW + CEIL_ORDER_AVX2);
 *
 * The macro puts a pointer to a ceil_table_reg into the linker section
 * "ceil_tables"; the linker gathers every object's entries between
 * __start_ceil_tables and __stop_ceil_tables, which registry.c walks. So
 * there is no list to keep beside the files: a file CMake does not compile
 * on this architecture (AVX-512 on aarch64) contributes no entry, and a new
 * family file adds itself. The section holds pointers only, so the entries
 * are packed whatever alignment the compiler gives the structures.
 *
 * `order` places the table among the others as ceil_kernel_get lists them
 * (lower first; equal orders fall back to the table's name): the family
 * rank plus the ISA rank below, which keeps the order `ceiling bench --list`
 * has always printed. */
enum {
    CEIL_ORDER_CLOCK = 0,
    CEIL_ORDER_FLOPS = 100,
    CEIL_ORDER_BW = 200,
    CEIL_ORDER_LATENCY = 300,
    CEIL_ORDER_C2C = 400,
};
enum {
    CEIL_ORDER_SCALAR = 0,
    CEIL_ORDER_SSE2 = 1,
    CEIL_ORDER_AVX2 = 2,
    CEIL_ORDER_AVX512 = 3,
    CEIL_ORDER_NEON = 4,
    CEIL_ORDER_SVE = 5,
};

typedef struct ceil_table_reg {
    int order;                    /* rank among tables, see above */
    const char *name;             /* the table's C name: ties and diagnostics */
    const ceil_kernel *kernels;   /* NULL-name-terminated */
} ceil_table_reg;

#define CEIL_REGISTER_TABLE(table, rank)                                                           \
    static const ceil_table_reg table##_reg_ = {(rank), #table, table};                           \
    static const ceil_table_reg *const table##_regp_                                               \
        __attribute__((section("ceil_tables"), used, aligned(sizeof(void *)))) = &table##_reg_

#endif /* CEILING_H */
