/* work.c - the work a program states it did (`ceiling_work(flops, bytes)`,
 * src/ceiling/include/ceiling/region.h; ceiling.region.work in Python; the
 * Fortran module ceiling_region), summed per process, so that `ceiling
 * profile` places the program on this node's roofline without numbers on
 * its command line (analysis/app_roofline.py sums the processes and ranks).
 *
 * Its record line, written only when the program called ceiling_work:
 *
 *     module name=work version=1 enabled=1
 *     work calls=3 flops=2400000000 bytes=600000000 refused=0 threads=1
 *
 * calls: ceiling_work calls that were counted, all threads; flops and bytes:
 * their sums, each value rounded to a whole number (a count of operations or
 * bytes has no fraction worth keeping) and added to the calling thread's
 * unsigned 64-bit sum, which stops at its largest value rather than wrap
 * (1.8e19: a core at 1e11 flop/s reaches it after 5 years); refused: calls
 * with a value that is negative, not a number or infinite (counted, not
 * added); threads: thread slots that made a call. Work stated after the
 * record was written (after MPI_Finalize, whose flush writes it) is not in
 * it.
 */
#include <math.h>
#include <stdint.h>
#include "interpose.h"

typedef struct work_counters {
    uint64_t calls, flops, bytes, refused;
} work_counters;

static ceil_ip_module work_module;

static int work_init(ceil_ip_module *self)
{
    (void)self;
    return 0;
}

static void work_report(ceil_ip_module *self, ceil_ip_out *out)
{
    uint64_t calls = 0, flops = 0, bytes = 0, refused = 0, threads = 0;
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const work_counters *c = ceil_ip_block_of(self, t);
        if (!c)
            continue;
        const uint64_t n = ceil_ip_read(&c->calls), r = ceil_ip_read(&c->refused);
        const uint64_t f = ceil_ip_read(&c->flops), b = ceil_ip_read(&c->bytes);
        calls += n;
        refused += r;
        flops = flops + f < flops ? UINT64_MAX : flops + f;
        bytes = bytes + b < bytes ? UINT64_MAX : bytes + b;
        threads += n + r > 0;
    }
    if (calls + refused == 0)
        return;                        /* a program that states nothing adds no line */
    ceil_ip_line(out, self);
    CEIL_IP_PUT_U64(out, calls, calls);
    CEIL_IP_PUT_U64(out, flops, flops);
    CEIL_IP_PUT_U64(out, bytes, bytes);
    CEIL_IP_PUT_U64(out, refused, refused);
    CEIL_IP_PUT_U64(out, threads, threads);
}

static ceil_ip_module work_module = {
    .name = "work",
    .version = 1,
    .block_bytes = sizeof(work_counters),
    .init = work_init,
    .report = work_report,
};
CEIL_IP_MODULE(work_module);

/* v rounded into a counter: nonnegative and finite (checked by the caller), at most UINT64_MAX. */
static uint64_t whole(double v)
{
    return v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)(v + 0.5);
}

static void saturating_add(uint64_t *counter, uint64_t n)
{
    const uint64_t was = ceil_ip_read(counter);
    ceil_ip_add(counter, was + n < was ? UINT64_MAX - was : n);
}

/*
 * void ceiling_work(double flops, double bytes)
 *
 * Add flops floating-point operations and bytes moved to and from memory to
 * the calling thread's sums. Outside ceiling (the runtime inactive) and in a
 * wrapped call's inner calls it does nothing: ceil_ip_block gives NULL.
 */
CEIL_IP_EXPORT void ceiling_work(double flops, double bytes);
CEIL_IP_EXPORT void ceiling_work(double flops, double bytes)
{
    work_counters *c = ceil_ip_block(&work_module);
    if (!c)
        return;
    if (!isfinite(flops) || !isfinite(bytes) || flops < 0 || bytes < 0) {
        ceil_ip_add(&c->refused, 1);
        return;
    }
    ceil_ip_add(&c->calls, 1);
    saturating_add(&c->flops, whole(flops));
    saturating_add(&c->bytes, whole(bytes));
}
