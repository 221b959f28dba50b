/* clock.c - the clock a core actually runs at, measured without counters.
 *
 * A chain of dependent integer adds retires one add per cycle on every core
 * we know (1-cycle ALU latency, and the chain forbids overlap), so adds per
 * second is cycles per second. That is what a VM guest, a container or a
 * node without cpufreq can still learn: /proc/cpuinfo's "MHz" is often the
 * nominal or the hypervisor's figure, not the clock reached under load.
 *
 * The adds are register-register: an add of an immediate can be folded away
 * at rename on some recent cores (Intel Golden Cove), which would make the
 * chain look faster than the clock; an add of a register whose value the
 * renamer does not know cannot.
 *
 * Adds over wall time is lower than the clock whenever another process
 * shares the thread's CPU: the thread waits in the run queue while the wall
 * clock runs. With CEIL_F_THREAD_CPU each thread also reads its own CPU time
 * (CLOCK_THREAD_CPUTIME_ID: the time it was on a CPU, to the nanosecond), so
 * the caller gets the clock the core ran at while it ran the chain, and how
 * long the threads waited besides.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include "ceiling.h"

/* Adds per unrolled loop trip: the loop's own compare-and-branch runs beside
 * the latency-bound chain, so 100 adds hide it completely. */
#define CHAIN_UNROLL 100

#define R10(s) s s s s s s s s s s
#define R100(s) R10(R10(s))

#if defined(__x86_64__)
#define ADD1 "add %[one], %[x]\n\t"
#define HAVE_CHAIN 1
#elif defined(__aarch64__)
#define ADD1 "add %[x], %[x], %[one]\n\t"
#define HAVE_CHAIN 1
#endif

#ifdef HAVE_CHAIN

static double thread_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return -1.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n dependent adds of `one` to x; returns the final x. */
static uint64_t add_chain(int64_t n, uint64_t x, uint64_t one)
{
    int64_t trips = n / CHAIN_UNROLL, rest = n % CHAIN_UNROLL;
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(R100(ADD1) : [x] "+r"(x) : [one] "r"(one));
    for (int64_t t = 0; t < rest; t++)
        __asm__ volatile(ADD1 : [x] "+r"(x) : [one] "r"(one));
    return x;
}

/* One thread per cpus[i], each running p->iters dependent adds per
 * repetition; valid when every thread's register ends at start + iters. */
static int run_clock_add(const ceil_params *p, ceil_result *r)
{
    ceil_result_clear(r);
    int unread = ceil_params_unread(p, 0, CEIL_F_THREAD_CPU, "clock_add", r);
    if (unread)
        return unread;
    if (p->iters < 1 || p->reps < 1 || p->warmup < 0 || p->nthreads < 1 || !r->times) {
        ceil_set_msg(r, "need iters >= 1, reps >= 1, warmup >= 0, nthreads >= 1 and a times array");
        return CEIL_EINVAL;
    }
    int pin_err = 0, pin_cpu = -1, nt_run = 0, bad = 0, bad_tid = -1;
    uint64_t bad_got = 0, bad_want = 0;
    double t0 = 0.0, check = 0.0;
    const int cpu_times = (p->flags & CEIL_F_THREAD_CPU) != 0;
    double *cpu_of = cpu_times ? r->times + p->reps : NULL;   /* the caller's second half */
    if (cpu_of)
        for (int rep = 0; rep < p->reps; rep++)
            cpu_of[rep] = 0.0;

#pragma omp parallel num_threads(p->nthreads)
    {
        const int tid = omp_get_thread_num();
        ceil_affinity old;
        ceil_pin_member(p, tid, &old, &pin_err, &pin_cpu);
#pragma omp single
        nt_run = omp_get_num_threads();
        const int go = pin_err == 0;   /* same for all threads after the single's barrier */
        /* The increment comes from memory the compiler cannot see into, so
         * it cannot replace the chain by one multiply-add. */
        volatile uint64_t one_mem = 1;
        const uint64_t one = one_mem, start = (uint64_t)tid << 48;
        for (int rep = -p->warmup; go && rep < p->reps; rep++) {
#pragma omp barrier
#pragma omp master
            t0 = ceil_now();
            const double c0 = cpu_of ? thread_cpu_s() : 0.0;
            uint64_t x = add_chain(p->iters, start, one);
            if (cpu_of && rep >= 0) {
                /* The slowest thread's own time: the barrier waits for it, as the wall time does. */
                const double c = thread_cpu_s() - c0;
#pragma omp critical(ceil_clock_cpu)
                if (c0 < 0.0 || c < 0.0)
                    cpu_of[rep] = -1.0;
                else if (cpu_of[rep] >= 0.0 && c > cpu_of[rep])
                    cpu_of[rep] = c;
            }
#pragma omp barrier
#pragma omp master
            {
                if (rep >= 0)
                    r->times[rep] = ceil_now() - t0;
            }
            uint64_t want = start + (uint64_t)p->iters;
            if (x != want) {
#pragma omp critical(ceil_clock_bad)
                if (!bad) {
                    bad = 1;
                    bad_tid = tid;
                    bad_got = x;
                    bad_want = want;
                }
            }
            if (tid == 0 && rep == p->reps - 1)
                check = (double)(x - start);
        }
        ceil_affinity_restore(&old);
    }

    if (pin_err != 0) {
        ceil_set_msg(r, "could not pin a thread to CPU %d (error %d)", pin_cpu, -pin_err);
        return CEIL_EPIN;
    }
    r->nthreads = nt_run;
    r->iters = p->iters * nt_run;
    r->check = check;
    r->valid = !bad;
    if (bad)
        ceil_set_msg(r, "thread %d ended at %llu, expected %llu", bad_tid,
                     (unsigned long long)bad_got, (unsigned long long)bad_want);
    return 0;
}

static const ceil_kernel ceil_clock[] = {
    {"clock_add", "clock", "scalar", 0.0, 0.0,
     "one dependent 1-cycle integer add per thread; GHz = iters / nthreads / seconds / 1e9",
     run_clock_add},
    {NULL, NULL, NULL, 0.0, 0.0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_clock, CEIL_ORDER_CLOCK);

#endif /* HAVE_CHAIN: other architectures have no chain whose latency is known
        * to be one cycle, so they register no table and the kernel is absent. */
