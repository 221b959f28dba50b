/* bw_avx2.c - AVX2 inner loops of the bandwidth kernels (driver in bw_scalar.c).
 *
 * Four 256-bit vectors per trip: enough to keep two loads and one store per
 * cycle in flight from L1 without the loop overhead showing. Chunks start on
 * 64-byte boundaries (bw.h), so aligned loads and vmovntpd are legal. */
#include <immintrin.h>
#include "bw.h"

#define W 4            /* doubles per vector */
#define U (4 * W)      /* doubles per trip */
#define AI static inline __attribute__((always_inline))

AI void put(double *p, __m256d v, const int nt)
{
    if (nt)
        _mm256_stream_pd(p, v);
    else
        _mm256_store_pd(p, v);
}

/* nt is a compile-time constant in each instantiation below, so each loop
 * is compiled twice with no branch inside. */
AI void copy_body(const double *a, double *c, int64_t n, const int nt)
{
    int64_t i = 0;
    for (; i + U <= n; i += U) {
        __m256d x0 = _mm256_load_pd(a + i), x1 = _mm256_load_pd(a + i + W);
        __m256d x2 = _mm256_load_pd(a + i + 2 * W), x3 = _mm256_load_pd(a + i + 3 * W);
        put(c + i, x0, nt);
        put(c + i + W, x1, nt);
        put(c + i + 2 * W, x2, nt);
        put(c + i + 3 * W, x3, nt);
    }
    for (; i < n; i++)
        c[i] = a[i];
}

AI void scale_body(const double *c, double *b, int64_t n, const int nt)
{
    const __m256d q = _mm256_set1_pd(CEIL_BW_Q);
    int64_t i = 0;
    for (; i + U <= n; i += U) {
        __m256d x0 = _mm256_mul_pd(q, _mm256_load_pd(c + i));
        __m256d x1 = _mm256_mul_pd(q, _mm256_load_pd(c + i + W));
        __m256d x2 = _mm256_mul_pd(q, _mm256_load_pd(c + i + 2 * W));
        __m256d x3 = _mm256_mul_pd(q, _mm256_load_pd(c + i + 3 * W));
        put(b + i, x0, nt);
        put(b + i + W, x1, nt);
        put(b + i + 2 * W, x2, nt);
        put(b + i + 3 * W, x3, nt);
    }
    for (; i < n; i++)
        b[i] = CEIL_BW_Q * c[i];
}

AI void add_body(const double *a, const double *b, double *c, int64_t n, const int nt)
{
    int64_t i = 0;
    for (; i + U <= n; i += U) {
        __m256d x0 = _mm256_add_pd(_mm256_load_pd(a + i), _mm256_load_pd(b + i));
        __m256d x1 = _mm256_add_pd(_mm256_load_pd(a + i + W), _mm256_load_pd(b + i + W));
        __m256d x2 = _mm256_add_pd(_mm256_load_pd(a + i + 2 * W), _mm256_load_pd(b + i + 2 * W));
        __m256d x3 = _mm256_add_pd(_mm256_load_pd(a + i + 3 * W), _mm256_load_pd(b + i + 3 * W));
        put(c + i, x0, nt);
        put(c + i + W, x1, nt);
        put(c + i + 2 * W, x2, nt);
        put(c + i + 3 * W, x3, nt);
    }
    for (; i < n; i++)
        c[i] = a[i] + b[i];
}

/* Two vectors per trip, not four: from DRAM on Zen 3 the four-vector loop ran 7%
 * below stream.c's compiled triad (medians of six interleaved rounds, 2 threads,
 * 640 MB arrays: 31.6 vs 34.0 GB/s), the two-vector one level with it (33.9). */
AI void triad_body(double *a, const double *b, const double *c, int64_t n, const int nt)
{
    const __m256d q = _mm256_set1_pd(CEIL_BW_Q);
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
        __m256d x0 = _mm256_fmadd_pd(q, _mm256_load_pd(c + i), _mm256_load_pd(b + i));
        __m256d x1 = _mm256_fmadd_pd(q, _mm256_load_pd(c + i + W), _mm256_load_pd(b + i + W));
        put(a + i, x0, nt);
        put(a + i + W, x1, nt);
    }
    for (; i < n; i++)
        a[i] = b[i] + CEIL_BW_Q * c[i];
}

static void copy_avx2(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt) {
        copy_body(a, c, n, 1);
        _mm_sfence();
    } else {
        copy_body(a, c, n, 0);
    }
}

static void scale_avx2(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt) {
        scale_body(c, b, n, 1);
        _mm_sfence();
    } else {
        scale_body(c, b, n, 0);
    }
}

static void add_avx2(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt) {
        add_body(a, b, c, n, 1);
        _mm_sfence();
    } else {
        add_body(a, b, c, n, 0);
    }
}

static void triad_avx2(double *a, double *b, double *c, int64_t n, int nt)
{
    if (nt) {
        triad_body(a, b, c, n, 1);
        _mm_sfence();
    } else {
        triad_body(a, b, c, n, 0);
    }
}

/* Eight accumulators: Zen 3 and recent Intel cores retire two 256-bit loads
 * and two adds per cycle with a 3-4 cycle add latency, so eight independent
 * chains keep the loads, not the adds, the limit. */
static __attribute__((noipa)) double sum_avx2(const double *a, int64_t n)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    int64_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
        s0 = _mm256_add_pd(s0, _mm256_load_pd(a + i));
        s1 = _mm256_add_pd(s1, _mm256_load_pd(a + i + W));
        s2 = _mm256_add_pd(s2, _mm256_load_pd(a + i + 2 * W));
        s3 = _mm256_add_pd(s3, _mm256_load_pd(a + i + 3 * W));
        s4 = _mm256_add_pd(s4, _mm256_load_pd(a + i + 4 * W));
        s5 = _mm256_add_pd(s5, _mm256_load_pd(a + i + 5 * W));
        s6 = _mm256_add_pd(s6, _mm256_load_pd(a + i + 6 * W));
        s7 = _mm256_add_pd(s7, _mm256_load_pd(a + i + 7 * W));
    }
    for (; i + W <= n; i += W)
        s0 = _mm256_add_pd(s0, _mm256_load_pd(a + i));
    s0 = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)),
                       _mm256_add_pd(_mm256_add_pd(s4, s5), _mm256_add_pd(s6, s7)));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s0), _mm256_extractf128_pd(s0, 1));
    double s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++)
        s += a[i];
    return s;
}

static const ceil_bw_ops avx2_ops = {"avx2", {copy_avx2, scale_avx2, add_avx2, triad_avx2}, sum_avx2};

CEIL_BW_KERNELS(ceil_bw_avx2, "avx2", CEIL_ORDER_AVX2, avx2_ops);
