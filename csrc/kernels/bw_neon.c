/* bw_neon.c - Advanced SIMD (NEON) inner loops of the bandwidth kernels
 * (driver in bw_scalar.c).
 *
 * Four 128-bit vectors (one cache line) per trip. Non-temporal stores are
 * STNP, a hint that a pair of registers need not be allocated in the cache;
 * AArch64 needs no fence after it for the driver's barrier to order it. */
#include <arm_neon.h>
#include "bw.h"

#define W 2            /* doubles per vector */
#define U (4 * W)      /* doubles per trip */
#define AI static inline __attribute__((always_inline))

/* Stores four vectors at p, p+W, p+2W, p+3W. */
AI void put4(double *p, float64x2_t x0, float64x2_t x1, float64x2_t x2, float64x2_t x3, const int nt)
{
    if (nt) {
        __asm__ volatile("stnp %q1, %q2, [%0]\n\tstnp %q3, %q4, [%0, #32]"
                         : : "r"(p), "w"(x0), "w"(x1), "w"(x2), "w"(x3) : "memory");
    } else {
        vst1q_f64(p, x0);
        vst1q_f64(p + W, x1);
        vst1q_f64(p + 2 * W, x2);
        vst1q_f64(p + 3 * W, x3);
    }
}

/* nt is a compile-time constant in each instantiation below, so each loop
 * is compiled twice with no branch inside. */
AI void copy_body(const double *a, double *c, int64_t n, const int nt)
{
    int64_t i = 0;
    for (; i + U <= n; i += U)
        put4(c + i, vld1q_f64(a + i), vld1q_f64(a + i + W), vld1q_f64(a + i + 2 * W),
             vld1q_f64(a + i + 3 * W), nt);
    for (; i < n; i++)
        c[i] = a[i];
}

AI void scale_body(const double *c, double *b, int64_t n, const int nt)
{
    const float64x2_t q = vdupq_n_f64(CEIL_BW_Q);
    int64_t i = 0;
    for (; i + U <= n; i += U)
        put4(b + i, vmulq_f64(q, vld1q_f64(c + i)), vmulq_f64(q, vld1q_f64(c + i + W)),
             vmulq_f64(q, vld1q_f64(c + i + 2 * W)), vmulq_f64(q, vld1q_f64(c + i + 3 * W)), nt);
    for (; i < n; i++)
        b[i] = CEIL_BW_Q * c[i];
}

AI void add_body(const double *a, const double *b, double *c, int64_t n, const int nt)
{
    int64_t i = 0;
    for (; i + U <= n; i += U)
        put4(c + i, vaddq_f64(vld1q_f64(a + i), vld1q_f64(b + i)),
             vaddq_f64(vld1q_f64(a + i + W), vld1q_f64(b + i + W)),
             vaddq_f64(vld1q_f64(a + i + 2 * W), vld1q_f64(b + i + 2 * W)),
             vaddq_f64(vld1q_f64(a + i + 3 * W), vld1q_f64(b + i + 3 * W)), nt);
    for (; i < n; i++)
        c[i] = a[i] + b[i];
}

AI void triad_body(double *a, const double *b, const double *c, int64_t n, const int nt)
{
    int64_t i = 0;
    for (; i + U <= n; i += U)
        put4(a + i, vfmaq_n_f64(vld1q_f64(b + i), vld1q_f64(c + i), CEIL_BW_Q),
             vfmaq_n_f64(vld1q_f64(b + i + W), vld1q_f64(c + i + W), CEIL_BW_Q),
             vfmaq_n_f64(vld1q_f64(b + i + 2 * W), vld1q_f64(c + i + 2 * W), CEIL_BW_Q),
             vfmaq_n_f64(vld1q_f64(b + i + 3 * W), vld1q_f64(c + i + 3 * W), CEIL_BW_Q), nt);
    for (; i < n; i++)
        a[i] = b[i] + CEIL_BW_Q * c[i];
}

static void copy_neon(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        copy_body(a, c, n, 1);
    else
        copy_body(a, c, n, 0);
}

static void scale_neon(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        scale_body(c, b, n, 1);
    else
        scale_body(c, b, n, 0);
}

static void add_neon(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        add_body(a, b, c, n, 1);
    else
        add_body(a, b, c, n, 0);
}

static void triad_neon(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt)
        triad_body(a, b, c, n, 1);
    else
        triad_body(a, b, c, n, 0);
}

/* Eight accumulators: Neoverse cores issue up to four 128-bit adds per
 * cycle with a 2-cycle latency, so eight chains keep the loads the limit. */
static __attribute__((noipa)) double sum_neon(const double *a, int64_t n)
{
    float64x2_t s0 = vdupq_n_f64(0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    int64_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
        s0 = vaddq_f64(s0, vld1q_f64(a + i));
        s1 = vaddq_f64(s1, vld1q_f64(a + i + W));
        s2 = vaddq_f64(s2, vld1q_f64(a + i + 2 * W));
        s3 = vaddq_f64(s3, vld1q_f64(a + i + 3 * W));
        s4 = vaddq_f64(s4, vld1q_f64(a + i + 4 * W));
        s5 = vaddq_f64(s5, vld1q_f64(a + i + 5 * W));
        s6 = vaddq_f64(s6, vld1q_f64(a + i + 6 * W));
        s7 = vaddq_f64(s7, vld1q_f64(a + i + 7 * W));
    }
    for (; i + W <= n; i += W)
        s0 = vaddq_f64(s0, vld1q_f64(a + i));
    s0 = vaddq_f64(vaddq_f64(vaddq_f64(s0, s1), vaddq_f64(s2, s3)),
                   vaddq_f64(vaddq_f64(s4, s5), vaddq_f64(s6, s7)));
    double s = vaddvq_f64(s0);
    for (; i < n; i++)
        s += a[i];
    return s;
}

static const ceil_bw_ops neon_ops = {"neon", {copy_neon, scale_neon, add_neon, triad_neon}, sum_neon};

CEIL_BW_KERNELS(ceil_bw_neon, "neon", CEIL_ORDER_NEON, neon_ops);
