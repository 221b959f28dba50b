/* flops_avx2.c - peak FMA chains on 256-bit AVX2 + FMA3 registers.
 *
 * 12 accumulators: two FMA pipes with 4-5 cycles of latency (Haswell to
 * Raptor Lake, Zen 1-5) need 8-10 FMAs in flight; 12 leaves slack for the
 * loop's own instructions and still fits the 16 ymm registers with a and b.
 * Each accumulator steps twice per trip, so the loop branch is 1 in 25
 * instructions. Compiled with -mavx2 -mfma; the driver (flops_scalar.c,
 * baseline ISA) calls a body only after checking the CPU runs it.
 */
#include <immintrin.h>
#include "ceiling.h"
#include "flops.h"

#define ACCS 12
#define STEPS 2

#define L1_11(F) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define L0_11(F) F(0) L1_11(F)
#define OUT(i) , [x##i] "+x"(x##i)
/* AT&T order: vfmadd213pd b, a, x  is  x = a * x + b. */
#define FMA_PD(i) "vfmadd213pd %[b], %[a], %[x" #i "]\n\t"
#define FMA_PS(i) "vfmadd213ps %[b], %[a], %[x" #i "]\n\t"
#define LOAD_PD(i) __m256d x##i = _mm256_load_pd(s + 4 * i);
#define LOAD_PS(i) __m256 x##i = _mm256_load_ps(s + 8 * i);
#define STORE_PD(i) _mm256_store_pd(s + 4 * i, x##i);
#define STORE_PS(i) _mm256_store_ps(s + 8 * i, x##i);

static void body_avx2_dp(int64_t trips, void *state)
{
    double *s = state;
    const __m256d a = _mm256_set1_pd(ceil_opaque_one()), b = _mm256_set1_pd(ceil_opaque_one());
    L0_11(LOAD_PD)
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(L0_11(FMA_PD) L0_11(FMA_PD)
                         : [x0] "+x"(x0) L1_11(OUT)
                         : [a] "x"(a), [b] "x"(b));
    L0_11(STORE_PD)
}

static void body_avx2_sp(int64_t trips, void *state)
{
    float *s = state;
    const __m256 a = _mm256_set1_ps(ceil_opaque_onef()), b = _mm256_set1_ps(ceil_opaque_onef());
    L0_11(LOAD_PS)
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(L0_11(FMA_PS) L0_11(FMA_PS)
                         : [x0] "+x"(x0) L1_11(OUT)
                         : [a] "x"(a), [b] "x"(b));
    L0_11(STORE_PS)
}

/* The scalar variant's chain on x86-64 CPUs with FMA3 (flops_scalar.c picks
 * it at run time): the same 12 chains x 2 steps as its mulsd + addsd body,
 * one vfmadd213sd/ss per step, so the scalar peak is the FMA pipes' rate on
 * every x86 core, not only on those with separate add and multiply pipes. */
#define FMA_SD(i) "vfmadd213sd %[b], %[a], %[x" #i "]\n\t"
#define FMA_SS(i) "vfmadd213ss %[b], %[a], %[x" #i "]\n\t"
#define DECL_D(i) double x##i = s[i];
#define DECL_F(i) float x##i = s[i];
#define STORE(i) s[i] = x##i;

void ceil_fma3_scalar_dp(int64_t trips, void *state)
{
    double *s = state;
    L0_11(DECL_D)
    const double a = ceil_opaque_one(), b = ceil_opaque_one();
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(L0_11(FMA_SD) L0_11(FMA_SD)
                         : [x0] "+x"(x0) L1_11(OUT)
                         : [a] "x"(a), [b] "x"(b));
    L0_11(STORE)
}

void ceil_fma3_scalar_sp(int64_t trips, void *state)
{
    float *s = state;
    L0_11(DECL_F)
    const float a = ceil_opaque_onef(), b = ceil_opaque_onef();
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(L0_11(FMA_SS) L0_11(FMA_SS)
                         : [x0] "+x"(x0) L1_11(OUT)
                         : [a] "x"(a), [b] "x"(b));
    L0_11(STORE)
}

static const ceil_chain chain_dp = {"avx2", 0, ACCS, 4, STEPS, NULL, body_avx2_dp};
static const ceil_chain chain_sp = {"avx2", 1, ACCS, 8, STEPS, NULL, body_avx2_sp};

/* AVX2 peak DP FMA rate; p->iters = loop trips per thread. */
static int run_peak_fma_dp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_dp); }
/* AVX2 peak SP FMA rate; p->iters = loop trips per thread. */
static int run_peak_fma_sp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_sp); }

static const ceil_kernel ceil_flops_avx2[] = {
    {"peak_fma_dp", "flops", "avx2", 0.0, ACCS * STEPS * 2 * 4,
     "one loop trip: 24 vfmadd213pd on 12 ymm chains, 24 x 2 x 4 = 192 DP flops", run_peak_fma_dp},
    {"peak_fma_sp", "flops", "avx2", 0.0, ACCS * STEPS * 2 * 8,
     "one loop trip: 24 vfmadd213ps on 12 ymm chains, 24 x 2 x 8 = 384 SP flops", run_peak_fma_sp},
    {NULL, NULL, NULL, 0.0, 0.0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_flops_avx2, CEIL_ORDER_FLOPS + CEIL_ORDER_AVX2);
