/* flops_neon.c - peak FMA chains on 128-bit Advanced SIMD (NEON) registers.
 *
 * 24 accumulators: 4 FMA pipes x 4 cycles (Neoverse V1/V2, Apple) need 16
 * in flight, 2 x 9 (A64FX) 18; 24 and a, b use 26 of the 32 v registers.
 * fmla accumulates into its destination, so the chain runs through the
 * addend: x = a * b + x with a * b = 1 exactly (closed form in flops.h).
 */
#include <arm_neon.h>
#include "ceiling.h"
#include "flops.h"

#define ACCS 24
#define STEPS 1

#define L1_11(F) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define L13_23(F) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
#define L0_23(F) F(0) L1_11(F) F(12) L13_23(F)
#define OUT(i) , [x##i] "+w"(x##i)
#define FMLA_D(i) "fmla %[x" #i "].2d, %[a].2d, %[b].2d\n\t"
#define FMLA_S(i) "fmla %[x" #i "].4s, %[a].4s, %[b].4s\n\t"
#define LOAD_D(i) float64x2_t x##i = vld1q_f64(s + 2 * i);
#define LOAD_S(i) float32x4_t x##i = vld1q_f32(s + 4 * i);
#define STORE_D(i) vst1q_f64(s + 2 * i, x##i);
#define STORE_S(i) vst1q_f32(s + 4 * i, x##i);

/* Two asm statements per trip: an asm takes at most 30 operands, and an
 * in-out operand counts twice. */
static void body_neon_dp(int64_t trips, void *state)
{
    double *s = state;
    const float64x2_t a = vdupq_n_f64(ceil_opaque_one()), b = vdupq_n_f64(ceil_opaque_one());
    L0_23(LOAD_D)
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(FMLA_D(0) L1_11(FMLA_D) : [x0] "+w"(x0) L1_11(OUT) : [a] "w"(a), [b] "w"(b));
        __asm__ volatile(FMLA_D(12) L13_23(FMLA_D) : [x12] "+w"(x12) L13_23(OUT) : [a] "w"(a), [b] "w"(b));
    }
    L0_23(STORE_D)
}

static void body_neon_sp(int64_t trips, void *state)
{
    float *s = state;
    const float32x4_t a = vdupq_n_f32(ceil_opaque_onef()), b = vdupq_n_f32(ceil_opaque_onef());
    L0_23(LOAD_S)
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(FMLA_S(0) L1_11(FMLA_S) : [x0] "+w"(x0) L1_11(OUT) : [a] "w"(a), [b] "w"(b));
        __asm__ volatile(FMLA_S(12) L13_23(FMLA_S) : [x12] "+w"(x12) L13_23(OUT) : [a] "w"(a), [b] "w"(b));
    }
    L0_23(STORE_S)
}

static const ceil_chain chain_dp = {"neon", 0, ACCS, 2, STEPS, NULL, body_neon_dp};
static const ceil_chain chain_sp = {"neon", 1, ACCS, 4, STEPS, NULL, body_neon_sp};

/* NEON peak DP FMA rate; p->iters = loop trips per thread. */
static int run_peak_fma_dp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_dp); }
/* NEON peak SP FMA rate; p->iters = loop trips per thread. */
static int run_peak_fma_sp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_sp); }

static const ceil_kernel ceil_flops_neon[] = {
    {"peak_fma_dp", "flops", "neon", 0.0, ACCS * STEPS * 2 * 2,
     "one loop trip: 24 fmla .2d on 24 chains, 24 x 2 x 2 = 96 DP flops", run_peak_fma_dp},
    {"peak_fma_sp", "flops", "neon", 0.0, ACCS * STEPS * 2 * 4,
     "one loop trip: 24 fmla .4s on 24 chains, 24 x 2 x 4 = 192 SP flops", run_peak_fma_sp},
    {NULL, NULL, NULL, 0.0, 0.0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_flops_neon, CEIL_ORDER_FLOPS + CEIL_ORDER_NEON);
