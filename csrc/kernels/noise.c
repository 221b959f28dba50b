/* noise.c - OS noise: how much of a CPU the system takes from a program that
 * only wants to compute.
 *
 * The selfish-detour benchmark's method (Beckman et al., "The influence of
 * operating systems on the performance of collective operations at extreme
 * scale", Cluster 2006; netgauge's "noise" mode does the same): a thread
 * pinned on each CPU reads the clock in a tight loop for a fixed window.
 * Between two consecutive reads the loop itself takes a few tens of
 * nanoseconds; any longer gap is time the CPU spent elsewhere (an interrupt,
 * a softirq, a kernel thread, another process, the hypervisor), a "detour".
 * Every CPU is measured in the same window, because noise that lands on
 * different CPUs at different times is what slows a bulk-synchronous
 * application: each step waits for the unluckiest CPU.
 *
 * The clock is clock_gettime(CLOCK_MONOTONIC) in integer nanoseconds (the
 * same clock as ceil_now(), without the conversion to double, so gaps are
 * exact). Through the vDSO it costs 15-40 ns where the clocksource is tsc or
 * kvm-clock, two orders below the default threshold, needs no calibration,
 * is one clock for all CPUs (the window's deadline is shared) and is the same
 * code on aarch64. rdtsc would be about twice as cheap, but would need a
 * calibration against this clock and a TSC that is invariant and
 * synchronised across CPUs, which a VM does not always promise. Where the
 * clocksource has no vDSO path (hpet, acpi_pm, some hypervisors) every read
 * is a system call of about a microsecond: the minimal gap reported per
 * thread shows it, and the caller then says the threshold is too close.
 *
 * Not a rate kernel: it is not in the descriptor table (ceiling.h declares
 * it with the helpers), and Python calls it by name.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "ceiling.h"

#define NOISE_DEFAULT_THRESHOLD_NS 1000
#define NOISE_MAX_TOP 1024

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keep the `cap` longest detours in top[0..*n), unordered: replace the
 * shortest once full. Detours are rare, so a linear scan costs nothing. */
static void keep_top(ceil_noise_gap *top, int32_t cap, int32_t *n, double start_s, double length_s)
{
    if (cap <= 0)
        return;
    if (*n < cap) {
        top[*n].start_s = start_s;
        top[*n].length_s = length_s;
        (*n)++;
        return;
    }
    int32_t lo = 0;
    for (int32_t i = 1; i < cap; i++)
        if (top[i].length_s < top[lo].length_s)
            lo = i;
    if (length_s > top[lo].length_s) {
        top[lo].start_s = start_s;
        top[lo].length_s = length_s;
    }
}

/* Largest first, for the report (insertion sort: cap is small). */
static void sort_top(ceil_noise_gap *top, int32_t n)
{
    for (int32_t i = 1; i < n; i++) {
        ceil_noise_gap g = top[i];
        int32_t j = i - 1;
        while (j >= 0 && top[j].length_s < g.length_s) {
            top[j + 1] = top[j];
            j--;
        }
        top[j + 1] = g;
    }
}

/* One thread's window: spin reading the clock until `deadline_ns`. */
static void spin(int64_t start_ns, int64_t deadline_ns, int64_t threshold_ns, ceil_noise_gap *top,
                 int32_t cap, ceil_noise_stats *st)
{
    int64_t prev = now_ns(), first = prev;
    int64_t reads = 0, detours = 0, detour_ns = 0, min_gap = INT64_MAX, max_gap = 0;
    int32_t ntop = 0;
    for (;;) {
        int64_t t = now_ns();
        int64_t gap = t - prev;
        reads++;
        if (gap < min_gap)
            min_gap = gap;
        if (gap > max_gap)
            max_gap = gap;
        if (gap > threshold_ns) {
            detours++;
            detour_ns += gap;
            keep_top(top, cap, &ntop, 1e-9 * (double)(prev - start_ns), 1e-9 * (double)gap);
            /* The bookkeeping above is ours, not the system's: restart the
             * gap after it, so it is never counted as a detour. */
            t = now_ns();
        }
        prev = t;
        if (t >= deadline_ns)
            break;
    }
    sort_top(top, ntop);
    st->iters = reads;
    st->detours = detours;
    st->detour_s = 1e-9 * (double)detour_ns;
    st->min_gap_s = reads ? 1e-9 * (double)min_gap : 0.0;
    st->max_gap_s = 1e-9 * (double)max_gap;
    st->window_s = 1e-9 * (double)(prev - first);
    st->start_s = 1e-9 * (double)(first - start_ns);
    st->ntop = ntop;
}

int ceil_noise_detour(const ceil_params *p, double duration_s, ceil_noise_gap *top, int32_t cap,
                      ceil_noise_stats *stats, ceil_result *r)
{
    ceil_result_clear(r);
    int unread = ceil_params_unread(p, CEIL_READS_THRESHOLD_NS, 0, "noise", r);
    if (unread)
        return unread;
    if (p->nthreads < 1 || !stats || !(duration_s > 0.0) || duration_s > 3600.0 || p->threshold_ns < 0 ||
        cap < 0 || cap > NOISE_MAX_TOP || (cap > 0 && !top)) {
        ceil_set_msg(r, "noise: needs nthreads >= 1, 0 < duration <= 3600 s, threshold >= 0, "
                        "0 <= top <= %d and the arrays", NOISE_MAX_TOP);
        return CEIL_EINVAL;
    }
    const int64_t threshold_ns = p->threshold_ns > 0 ? p->threshold_ns : NOISE_DEFAULT_THRESHOLD_NS;
    const int64_t window_ns = (int64_t)(duration_s * 1e9);
    memset(stats, 0, (size_t)p->nthreads * sizeof *stats);
    int pin_err = 0, pin_cpu = -1, nt_run = 0, moved = 0, moved_tid = -1, moved_cpu = -1;
    int64_t start_ns = 0, deadline_ns = 0;

#pragma omp parallel num_threads(p->nthreads)
    {
        const int tid = omp_get_thread_num();
        ceil_affinity old;
        ceil_pin_member(p, tid, &old, &pin_err, &pin_cpu);
        /* every thread pinned (or failed) before the window opens */
#pragma omp barrier
#pragma omp single
        {
            nt_run = omp_get_num_threads();
            /* One window for all: the deadline is on a clock every CPU shares. */
            start_ns = now_ns();
            deadline_ns = start_ns + window_ns;
        }
        /* the single's barrier: everyone sees pin_err, nt_run and the deadline */
        if (pin_err == 0 && nt_run == p->nthreads) {
            ceil_noise_stats *st = &stats[tid];
            spin(start_ns, deadline_ns, threshold_ns, top ? top + (size_t)tid * (size_t)cap : NULL, cap, st);
            st->cpu = sched_getcpu();
            if (p->cpus && st->cpu != p->cpus[tid]) {
#pragma omp critical(ceil_noise_moved)
                if (!moved) {
                    moved = 1;
                    moved_tid = tid;
                    moved_cpu = st->cpu;
                }
            }
        }
        ceil_affinity_restore(&old);
    }

    if (pin_err != 0) {
        ceil_set_msg(r, "noise: could not pin a thread to CPU %d (error %d)", pin_cpu, -pin_err);
        return CEIL_EPIN;
    }
    if (nt_run != p->nthreads) {
        ceil_set_msg(r, "noise: OpenMP started %d threads, %d were asked for (OMP_THREAD_LIMIT?)",
                     nt_run, p->nthreads);
        return CEIL_EINVAL;
    }
    int64_t reads = 0;
    double detour_s = 0.0;
    const char *bad = NULL;
    int bad_tid = -1;
    for (int t = 0; t < nt_run; t++) {
        const ceil_noise_stats *st = &stats[t];
        reads += st->iters;
        detour_s += st->detour_s;
        if (!bad && st->iters < 1) {
            bad = "no clock read";
            bad_tid = t;
        } else if (!bad && (st->detour_s < 0.0 || st->detour_s > st->window_s * (1.0 + 1e-9) + 1e-9)) {
            bad = "detours add up to more than the window";
            bad_tid = t;
        }
    }
    r->nthreads = nt_run;
    r->iters = reads;
    r->check = detour_s;
    if (moved)
        ceil_set_msg(r, "noise: thread %d ended on CPU %d, not CPU %d", moved_tid, moved_cpu,
                     p->cpus[moved_tid]);
    else if (bad)
        ceil_set_msg(r, "noise: thread %d: %s", bad_tid, bad);
    else
        r->valid = 1;
    return 0;
}
