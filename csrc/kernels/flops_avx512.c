/* flops_avx512.c - peak FMA chains on 512-bit AVX-512F registers.
 *
 * 24 accumulators: two 512-bit FMA ports at 4 cycles (Skylake-SP to
 * Sapphire Rapids) need 8 in flight, Zen 4's double-pumped units fewer; 24
 * covers longer latencies too and, with a and b, uses 26 of the 32 zmm
 * registers (the "v" constraint reaches zmm16-31). Compiled with -mavx512f;
 * the driver (flops_scalar.c, baseline ISA) calls a body only after checking
 * the CPU and OS run AVX-512.
 */
#include <immintrin.h>
#include "ceiling.h"
#include "flops.h"

#define ACCS 24
#define STEPS 1

#define L1_11(F) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define L13_23(F) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
#define L0_23(F) F(0) L1_11(F) F(12) L13_23(F)
#define OUT(i) , [x##i] "+v"(x##i)
/* AT&T order: vfmadd213pd b, a, x  is  x = a * x + b. */
#define FMA_PD(i) "vfmadd213pd %[b], %[a], %[x" #i "]\n\t"
#define FMA_PS(i) "vfmadd213ps %[b], %[a], %[x" #i "]\n\t"
#define LOAD_PD(i) __m512d x##i = _mm512_load_pd(s + 8 * i);
#define LOAD_PS(i) __m512 x##i = _mm512_load_ps(s + 16 * i);
#define STORE_PD(i) _mm512_store_pd(s + 8 * i, x##i);
#define STORE_PS(i) _mm512_store_ps(s + 16 * i, x##i);

static void body_avx512_dp(int64_t trips, void *state)
{
    double *s = state;
    const __m512d a = _mm512_set1_pd(ceil_opaque_one()), b = _mm512_set1_pd(ceil_opaque_one());
    L0_23(LOAD_PD)
    /* Two statements per trip: an asm takes at most 30 operands, and an
     * in-out operand counts twice. */
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(FMA_PD(0) L1_11(FMA_PD) : [x0] "+v"(x0) L1_11(OUT) : [a] "v"(a), [b] "v"(b));
        __asm__ volatile(FMA_PD(12) L13_23(FMA_PD) : [x12] "+v"(x12) L13_23(OUT) : [a] "v"(a), [b] "v"(b));
    }
    L0_23(STORE_PD)
}

static void body_avx512_sp(int64_t trips, void *state)
{
    float *s = state;
    const __m512 a = _mm512_set1_ps(ceil_opaque_onef()), b = _mm512_set1_ps(ceil_opaque_onef());
    L0_23(LOAD_PS)
    /* Two statements per trip: an asm takes at most 30 operands, and an
     * in-out operand counts twice. */
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(FMA_PS(0) L1_11(FMA_PS) : [x0] "+v"(x0) L1_11(OUT) : [a] "v"(a), [b] "v"(b));
        __asm__ volatile(FMA_PS(12) L13_23(FMA_PS) : [x12] "+v"(x12) L13_23(OUT) : [a] "v"(a), [b] "v"(b));
    }
    L0_23(STORE_PS)
}

static const ceil_chain chain_dp = {"avx512", 0, ACCS, 8, STEPS, NULL, body_avx512_dp};
static const ceil_chain chain_sp = {"avx512", 1, ACCS, 16, STEPS, NULL, body_avx512_sp};

/* AVX-512 peak DP FMA rate; p->iters = loop trips per thread. */
static int run_peak_fma_dp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_dp); }
/* AVX-512 peak SP FMA rate; p->iters = loop trips per thread. */
static int run_peak_fma_sp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_sp); }

static const ceil_kernel ceil_flops_avx512[] = {
    {"peak_fma_dp", "flops", "avx512", 0.0, ACCS * STEPS * 2 * 8,
     "one loop trip: 24 vfmadd213pd on 24 zmm chains, 24 x 2 x 8 = 384 DP flops", run_peak_fma_dp},
    {"peak_fma_sp", "flops", "avx512", 0.0, ACCS * STEPS * 2 * 16,
     "one loop trip: 24 vfmadd213ps on 24 zmm chains, 24 x 2 x 16 = 768 SP flops", run_peak_fma_sp},
    {NULL, NULL, NULL, 0.0, 0.0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_flops_avx512, CEIL_ORDER_FLOPS + CEIL_ORDER_AVX512);
