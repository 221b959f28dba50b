/* bw_scalar.c - the bandwidth driver shared by every ISA variant, and the
 * scalar variant's loops (plain C the compiler vectorises at the baseline).
 *
 * The data, the validation rule and the byte counting are described in bw.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "bw.h"

#define MAX_ELEMS (INT64_C(1) << 56)
#define REL_TOL 1e-13

/* ---- scalar loops ------------------------------------------------------
 * noipa: the driver calls them through the ops table; without it GCC may
 * see load_sum as pure and fold repeated passes into one. */

#define SCALAR static __attribute__((noipa))

/* The copy loop must stay a loop: as a memcpy call it would take glibc's
 * non-temporal path for large arrays whatever CEIL_F_NT_STORES says. */
#if defined(__clang__)
#define NO_MEMCPY __attribute__((no_builtin("memcpy")))
#elif defined(__GNUC__)
#define NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_MEMCPY
#endif

#if defined(__SSE2__)
/* Baseline x86-64 has SSE2, whose movntpd is the one non-temporal store the
 * scalar variant may use. Tails (n odd) use ordinary stores. */
#define NT_LOOP(dst, expr)                                          \
    do {                                                            \
        int64_t i = 0;                                              \
        for (; i + 2 <= n; i += 2) {                                \
            __m128d v_ = _mm_set_pd(expr(i + 1), expr(i));          \
            _mm_stream_pd(dst + i, v_);                             \
        }                                                           \
        for (; i < n; i++)                                          \
            dst[i] = expr(i);                                       \
        _mm_sfence();                                               \
    } while (0)
#else
#define NT_LOOP(dst, expr)                                          \
    do {                                                            \
        for (int64_t i = 0; i < n; i++)                             \
            dst[i] = expr(i);                                       \
    } while (0)
#endif

#define COPY_E(i) (a[i])
#define SCALE_E(i) (q * c[i])
#define ADD_E(i) (a[i] + b[i])
#define TRIAD_E(i) (b[i] + q * c[i])

SCALAR NO_MEMCPY void copy_scalar(double *restrict a, double *restrict b, double *restrict c, int64_t n, int nt)
{
    if (nt) {
        NT_LOOP(c, COPY_E);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        c[i] = a[i];
}

SCALAR void scale_scalar(double *restrict a, double *restrict b, double *restrict c, int64_t n, int nt)
{
    const double q = CEIL_BW_Q;
    if (nt) {
        NT_LOOP(b, SCALE_E);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        b[i] = q * c[i];
}

SCALAR void add_scalar(double *restrict a, double *restrict b, double *restrict c, int64_t n, int nt)
{
    if (nt) {
        NT_LOOP(c, ADD_E);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

SCALAR void triad_scalar(double *restrict a, double *restrict b, double *restrict c, int64_t n, int nt)
{
    const double q = CEIL_BW_Q;
    if (nt) {
        NT_LOOP(a, TRIAD_E);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        a[i] = b[i] + q * c[i];
}

/* Eight accumulators: enough independent add chains to cover the FP add
 * latency, and a reduction the compiler may keep in order (no -ffast-math). */
SCALAR double sum_scalar(const double *restrict a, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += a[i];
        s1 += a[i + 1];
        s2 += a[i + 2];
        s3 += a[i + 3];
        s4 += a[i + 4];
        s5 += a[i + 5];
        s6 += a[i + 6];
        s7 += a[i + 7];
    }
    for (; i < n; i++)
        s0 += a[i];
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

static const ceil_bw_ops scalar_ops = {
    "scalar", {copy_scalar, scale_scalar, add_scalar, triad_scalar}, sum_scalar};

CEIL_BW_KERNELS(ceil_bw_scalar, "scalar", CEIL_ORDER_SCALAR, scalar_ops);

/* ---- the driver --------------------------------------------------------- */

static const char *const op_name[] = {"stream_copy", "stream_scale", "stream_add", "stream_triad", "load_sum"};

/* Thread t of T gets [lo, hi): whole 64-byte units, balanced to one unit. */
static void chunk(int64_t n, int t, int T, int64_t *lo, int64_t *hi)
{
    int64_t units = (n + CEIL_BW_ALIGN_ELEMS - 1) / CEIL_BW_ALIGN_ELEMS;
    int64_t per = units / T, extra = units % T;
    int64_t u0 = per * t + (t < extra ? t : extra);
    int64_t u1 = u0 + per + (t < extra ? 1 : 0);
    *lo = u0 * CEIL_BW_ALIGN_ELEMS < n ? u0 * CEIL_BW_ALIGN_ELEMS : n;
    *hi = u1 * CEIL_BW_ALIGN_ELEMS < n ? u1 * CEIL_BW_ALIGN_ELEMS : n;
}

/* First touch of [lo, hi) by the thread that will use it. */
static void init_chunk(ceil_bw_op op, double *a, double *b, double *c, int64_t lo, int64_t hi)
{
    int64_t v = lo % CEIL_BW_PERIOD;
    for (int64_t i = lo; i < hi; i++) {
        double x = (double)v;
        if (op == CEIL_BW_LOAD_SUM) {
            a[i] = x;
        } else {
            a[i] = 1.0 + x;
            b[i] = 2.0 + 2.0 * x;
            c[i] = 0.25 + 0.5 * x;
        }
        if (++v == CEIL_BW_PERIOD)
            v = 0;
    }
}

typedef struct {
    int64_t bad;        /* elements off by more than REL_TOL */
    int64_t first;      /* index of the first one, -1 if none */
    int array;          /* 0 = a, 1 = b, 2 = c */
    double got, want;
    double sum;         /* sum of the written array over [lo, hi) */
} check_t;

static void note_bad(check_t *ck, int64_t i, int array, double got, double want)
{
    if (ck->bad++ == 0 || i < ck->first) {
        ck->first = i;
        ck->array = array;
        ck->got = got;
        ck->want = want;
    }
}

static int off(double got, double want)
{
    double d = got - want;
    if (d < 0)
        d = -d;
    return !(d <= REL_TOL * (want < 0 ? -want : want));
}

/* Element-by-element check of all three arrays against bw.h's table. */
static void check_chunk(ceil_bw_op op, const double *a, const double *b, const double *c,
                        int64_t lo, int64_t hi, check_t *ck)
{
    int64_t v = lo % CEIL_BW_PERIOD;
    double sum = 0;
    ck->bad = 0;
    ck->first = -1;
    for (int64_t i = lo; i < hi; i++) {
        double x = (double)v;
        double wa = 1.0 + x, wb = 2.0 + 2.0 * x, wc = 0.25 + 0.5 * x;
        switch (op) {
        case CEIL_BW_COPY: wc = 1.0 + x; sum += c[i]; break;
        case CEIL_BW_SCALE: wb = 0.75 + 1.5 * x; sum += b[i]; break;
        case CEIL_BW_ADD: wc = 3.0 + 3.0 * x; sum += c[i]; break;
        default: wa = 2.75 + 3.5 * x; sum += a[i]; break;
        }
        if (off(a[i], wa))
            note_bad(ck, i, 0, a[i], wa);
        if (off(b[i], wb))
            note_bad(ck, i, 1, b[i], wb);
        if (off(c[i], wc))
            note_bad(ck, i, 2, c[i], wc);
        if (++v == CEIL_BW_PERIOD)
            v = 0;
    }
    ck->sum = sum;
}

/* Sum of v(i) = i mod P over i < n, in closed form. */
static double load_sum_expected(int64_t n)
{
    unsigned __int128 P = CEIL_BW_PERIOD, q = (uint64_t)n / CEIL_BW_PERIOD, rem = (uint64_t)n % CEIL_BW_PERIOD;
    unsigned __int128 s = q * (P * (P - 1) / 2) + rem * (rem - 1) / 2;
    return (double)s;
}

int ceil_bw_drive(const ceil_params *p, ceil_result *r, ceil_bw_op op, const ceil_bw_ops *ops)
{
    ceil_result_clear(r);
    const char *name = op_name[op];

    if (!ceil_isa_supported(ops->isa)) {
        ceil_set_msg(r, "%s: this CPU cannot run the %s variant", name, ops->isa);
        return CEIL_ENOISA;
    }
    int bad = ceil_params_unread(p, CEIL_READS_ELEMENTS | CEIL_READS_MEM_NODE, CEIL_F_NT_STORES | CEIL_F_HUGEPAGES,
                                 name, r);
    if (bad)
        return bad;
    if (p->elements < 1 || p->elements > MAX_ELEMS) {
        ceil_set_msg(r, "%s: elements (per array) must be in 1..2^56, got %lld", name, (long long)p->elements);
        return CEIL_EINVAL;
    }
    if (p->iters < 1 || p->iters > INT64_MAX / p->elements) {
        ceil_set_msg(r, "%s: iters (passes per repetition) must be >= 1 and elements*iters fit in 64 bits", name);
        return CEIL_EINVAL;
    }
    if (p->reps < 1 || p->warmup < 0 || p->nthreads < 1 || !r->times) {
        ceil_set_msg(r, "%s: need reps >= 1, warmup >= 0, nthreads >= 1 and a times buffer", name);
        return CEIL_EINVAL;
    }

    const int narrays = op == CEIL_BW_LOAD_SUM ? 1 : 3;
    const int huge = (p->flags & CEIL_F_HUGEPAGES) != 0;
    const int nt = (p->flags & CEIL_F_NT_STORES) != 0;
    const size_t bytes = (size_t)p->elements * sizeof(double);
    /* Separate 2 MiB-aligned mappings, so a[i], b[i] and c[i] share their
     * offset in the page, as in stream.c (OFFSET 0) and likwid-bench; shifting
     * them apart made no measurable difference on Zen 3 from L1 to DRAM. */
    double *arr[3] = {NULL, NULL, NULL};
    int rc = 0;

    for (int k = 0; k < narrays; k++) {
        int got_huge = 0;
        arr[k] = ceil_alloc(bytes, huge, &got_huge);
        if (!arr[k]) {
            ceil_set_msg(r, "%s: cannot allocate %zu bytes for array %d", name, bytes, k);
            rc = CEIL_ENOMEM;
            goto out;
        }
        int e = ceil_bind_node(arr[k], bytes, p->mem_node);
        if (e != 0) {
            ceil_set_msg(r, "%s: cannot bind memory to NUMA node %d: %s", name, p->mem_node, strerror(-e));
            rc = CEIL_EINVAL;
            goto out;
        }
    }

    double *const a = arr[0], *const b = arr[1], *const c = arr[2];
    const int64_t n = p->elements, iters = p->iters;
    const int reps = p->reps, warmup = p->warmup;
    ceil_bw_stream_fn loop = op == CEIL_BW_LOAD_SUM ? NULL : ops->stream[op];
    ceil_bw_sum_fn sum = ops->sum;

    int pin_cpu = -1, pin_err = 0, T_ran = 0;
    check_t *cks = calloc((size_t)p->nthreads, sizeof *cks);
    /* padded per-thread slots: load_sum results, written every pass */
    double *sums = calloc((size_t)p->nthreads * 8, sizeof *sums);
    if (!cks || !sums) {
        free(cks);
        free(sums);
        ceil_set_msg(r, "%s: out of memory", name);
        rc = CEIL_ENOMEM;
        goto out;
    }

    double t0 = 0;
#pragma omp parallel num_threads(p->nthreads) shared(t0, pin_cpu, pin_err, T_ran)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        ceil_affinity old;
        ceil_pin_member(p, t, &old, &pin_err, &pin_cpu);
        if (t == 0)
            T_ran = T;
        int64_t lo, hi;
        chunk(n, t, T, &lo, &hi);
#pragma omp barrier
        if (pin_err == 0) {
            init_chunk(op, a, b, c, lo, hi);
#pragma omp barrier
            for (int rep = -warmup; rep < reps; rep++) {
                /* The clock starts before the barrier that releases the
                 * workers, as stream.c's does before its parallel loop: if
                 * thread 0 were descheduled after the barrier, the others'
                 * work would run untimed and the rate come out too high. */
                if (t == 0)
                    t0 = ceil_now();
#pragma omp barrier
                if (loop) {
                    for (int64_t it = 0; it < iters; it++)
                        loop(a + lo, b + lo, c + lo, hi - lo, nt);
                } else {
                    for (int64_t it = 0; it < iters; it++)
                        sums[8 * t] = sum(a + lo, hi - lo);
                }
#pragma omp barrier
                if (t == 0 && rep >= 0)
                    r->times[rep] = ceil_now() - t0;
            }
            if (loop)
                check_chunk(op, a, b, c, lo, hi, &cks[t]);
        }
        ceil_affinity_restore(&old);
    }

    if (pin_err != 0) {
        ceil_set_msg(r, "%s: cannot pin a thread to CPU %d: %s", name, pin_cpu, strerror(-pin_err));
        rc = CEIL_EPIN;
    } else {
        r->nthreads = T_ran;
        r->iters = n * iters;
        if (huge) {
            int h = 1;
            for (int k = 0; k < narrays; k++)
                if (ceil_huge_backed(arr[k], bytes) != 1)
                    h = 0;
            r->hugepages = h;
        }
        if (op == CEIL_BW_LOAD_SUM) {
            double s = 0, want = load_sum_expected(n);
            for (int t = 0; t < T_ran; t++)
                s += sums[8 * t];
            r->check = s;
            r->valid = !off(s, want);
            if (!r->valid)
                ceil_set_msg(r, "load_sum: sum %.17g, expected %.17g", s, want);
        } else {
            int64_t bad = 0;
            check_t *first = NULL;
            double s = 0;
            for (int t = 0; t < T_ran; t++) {
                s += cks[t].sum;
                bad += cks[t].bad;
                if (cks[t].bad && (!first || cks[t].first < first->first))
                    first = &cks[t];
            }
            r->check = s;
            r->valid = bad == 0;
            if (first)
                ceil_set_msg(r, "%s: %lld of %lld elements wrong, first %c[%lld] = %.17g, expected %.17g",
                             name, (long long)bad, (long long)(3 * n), "abc"[first->array],
                             (long long)first->first, first->got, first->want);
        }
    }
    free(cks);
    free(sums);

out:
    for (int k = 0; k < narrays; k++)
        ceil_free(arr[k], bytes);
    return rc;
}
