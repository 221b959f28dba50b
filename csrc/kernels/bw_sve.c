/* bw_sve.c - SVE inner loops of the bandwidth kernels (driver in bw_scalar.c).
 *
 * Vector-length agnostic: the main loop moves four full vectors per trip
 * with an all-true predicate, and one predicated loop (svwhilelt) finishes
 * the chunk, so no scalar tail is needed. Non-temporal stores are STNT1D. */
#include <arm_sve.h>
#include "bw.h"

#define AI static inline __attribute__((always_inline))

AI void put(svbool_t pg, double *p, svfloat64_t v, const int nt)
{
    if (nt)
        svstnt1_f64(pg, p, v);
    else
        svst1_f64(pg, p, v);
}

/* One loop shape for all four kernels: op selects the arithmetic, nt the
 * store; both are compile-time constants in each instantiation. */
AI svfloat64_t compute(svbool_t pg, const int op, const double *a, const double *b, const double *c, int64_t i)
{
    switch (op) {
    case CEIL_BW_COPY: return svld1_f64(pg, a + i);
    case CEIL_BW_SCALE: return svmul_n_f64_x(pg, svld1_f64(pg, c + i), CEIL_BW_Q);
    case CEIL_BW_ADD: return svadd_f64_x(pg, svld1_f64(pg, a + i), svld1_f64(pg, b + i));
    default: return svmla_n_f64_x(pg, svld1_f64(pg, b + i), svld1_f64(pg, c + i), CEIL_BW_Q);
    }
}

AI void body(const int op, double *a, double *b, double *c, int64_t n, const int nt)
{
    double *dst = op == CEIL_BW_COPY || op == CEIL_BW_ADD ? c : op == CEIL_BW_SCALE ? b : a;
    const int64_t vl = (int64_t)svcntd();
    const svbool_t all = svptrue_b64();
    int64_t i = 0;
    for (; i + 4 * vl <= n; i += 4 * vl) {
        svfloat64_t x0 = compute(all, op, a, b, c, i);
        svfloat64_t x1 = compute(all, op, a, b, c, i + vl);
        svfloat64_t x2 = compute(all, op, a, b, c, i + 2 * vl);
        svfloat64_t x3 = compute(all, op, a, b, c, i + 3 * vl);
        put(all, dst + i, x0, nt);
        put(all, dst + i + vl, x1, nt);
        put(all, dst + i + 2 * vl, x2, nt);
        put(all, dst + i + 3 * vl, x3, nt);
    }
    for (; i < n; i += vl) {
        svbool_t pg = svwhilelt_b64_s64(i, n);
        put(pg, dst + i, compute(pg, op, a, b, c, i), nt);
    }
}

static void copy_sve(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        body(CEIL_BW_COPY, a, b, c, n, 1);
    else
        body(CEIL_BW_COPY, a, b, c, n, 0);
}

static void scale_sve(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        body(CEIL_BW_SCALE, a, b, c, n, 1);
    else
        body(CEIL_BW_SCALE, a, b, c, n, 0);
}

static void add_sve(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        body(CEIL_BW_ADD, a, b, c, n, 1);
    else
        body(CEIL_BW_ADD, a, b, c, n, 0);
}

static void triad_sve(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        body(CEIL_BW_TRIAD, a, b, c, n, 1);
    else
        body(CEIL_BW_TRIAD, a, b, c, n, 0);
}

/* Eight accumulators, as in the other variants: enough add chains for the
 * widest SVE cores (two to four FP pipes, 2-4 cycle add latency). The tail
 * adds into s0 under its predicate (_m keeps inactive lanes). */
static __attribute__((noipa)) double sum_sve(const double *a, int64_t n)
{
    const int64_t vl = (int64_t)svcntd();
    const svbool_t all = svptrue_b64();
    svfloat64_t s0 = svdup_n_f64(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    int64_t i = 0;
    for (; i + 8 * vl <= n; i += 8 * vl) {
        s0 = svadd_f64_x(all, s0, svld1_f64(all, a + i));
        s1 = svadd_f64_x(all, s1, svld1_f64(all, a + i + vl));
        s2 = svadd_f64_x(all, s2, svld1_f64(all, a + i + 2 * vl));
        s3 = svadd_f64_x(all, s3, svld1_f64(all, a + i + 3 * vl));
        s4 = svadd_f64_x(all, s4, svld1_f64(all, a + i + 4 * vl));
        s5 = svadd_f64_x(all, s5, svld1_f64(all, a + i + 5 * vl));
        s6 = svadd_f64_x(all, s6, svld1_f64(all, a + i + 6 * vl));
        s7 = svadd_f64_x(all, s7, svld1_f64(all, a + i + 7 * vl));
    }
    for (; i < n; i += vl) {
        svbool_t pg = svwhilelt_b64_s64(i, n);
        s0 = svadd_f64_m(pg, s0, svld1_f64(pg, a + i));
    }
    s0 = svadd_f64_x(all, svadd_f64_x(all, svadd_f64_x(all, s0, s1), svadd_f64_x(all, s2, s3)),
                     svadd_f64_x(all, svadd_f64_x(all, s4, s5), svadd_f64_x(all, s6, s7)));
    return svaddv_f64(all, s0);
}

static const ceil_bw_ops sve_ops = {"sve", {copy_sve, scale_sve, add_sve, triad_sve}, sum_sve};

CEIL_BW_KERNELS(ceil_bw_sve, "sve", CEIL_ORDER_SVE, sve_ops);
