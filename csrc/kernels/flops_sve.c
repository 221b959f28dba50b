/* flops_sve.c - peak FMA chains on SVE registers of any vector length.
 *
 * The vector length is a property of the CPU, not of this build, so the
 * table counts flops per 128-bit granule and the driver multiplies the
 * iteration count by VL / 128 (lanes_now): one "iteration" here is one loop
 * trip's work on 128 bits of each register, and result->iters is
 * trips x threads x VL/128. 24 accumulators (A64FX: 2 pipes x 9 cycles;
 * Neoverse V1: 2 x 256-bit x 4) and a, b use 26 of the 32 z registers; the
 * chain runs through the addend, x = a * b + x, with a * b = 1 exactly.
 */
#include <arm_sve.h>
#include "ceiling.h"
#include "flops.h"

#define ACCS 24
#define STEPS 1

#define L1_11(F) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define L13_23(F) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
#define L0_23(F) F(0) L1_11(F) F(12) L13_23(F)
#define OUT(i) , [x##i] "+w"(x##i)
#define FMLA_D(i) "fmla %[x" #i "].d, %[pg]/m, %[a].d, %[b].d\n\t"
#define FMLA_S(i) "fmla %[x" #i "].s, %[pg]/m, %[a].s, %[b].s\n\t"
#define LOAD_D(i) svfloat64_t x##i = svld1_f64(pg, s + i * vl);
#define LOAD_S(i) svfloat32_t x##i = svld1_f32(pg, s + i * vl);
#define STORE_D(i) svst1_f64(pg, s + i * vl, x##i);
#define STORE_S(i) svst1_f32(pg, s + i * vl, x##i);

static int lanes_dp(void) { return (int)svcntd(); }
static int lanes_sp(void) { return (int)svcntw(); }

/* Two asm statements per trip: an asm takes at most 30 operands, and an
 * in-out operand counts twice. */
static void body_sve_dp(int64_t trips, void *state)
{
    double *s = state;
    const int64_t vl = (int64_t)svcntd();
    const svbool_t pg = svptrue_b64();
    const svfloat64_t a = svdup_f64(ceil_opaque_one()), b = svdup_f64(ceil_opaque_one());
    L0_23(LOAD_D)
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(FMLA_D(0) L1_11(FMLA_D)
                         : [x0] "+w"(x0) L1_11(OUT) : [a] "w"(a), [b] "w"(b), [pg] "Upl"(pg));
        __asm__ volatile(FMLA_D(12) L13_23(FMLA_D)
                         : [x12] "+w"(x12) L13_23(OUT) : [a] "w"(a), [b] "w"(b), [pg] "Upl"(pg));
    }
    L0_23(STORE_D)
}

static void body_sve_sp(int64_t trips, void *state)
{
    float *s = state;
    const int64_t vl = (int64_t)svcntw();
    const svbool_t pg = svptrue_b32();
    const svfloat32_t a = svdup_f32(ceil_opaque_onef()), b = svdup_f32(ceil_opaque_onef());
    L0_23(LOAD_S)
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(FMLA_S(0) L1_11(FMLA_S)
                         : [x0] "+w"(x0) L1_11(OUT) : [a] "w"(a), [b] "w"(b), [pg] "Upl"(pg));
        __asm__ volatile(FMLA_S(12) L13_23(FMLA_S)
                         : [x12] "+w"(x12) L13_23(OUT) : [a] "w"(a), [b] "w"(b), [pg] "Upl"(pg));
    }
    L0_23(STORE_S)
}

static const ceil_chain chain_dp = {"sve", 0, ACCS, 2, STEPS, lanes_dp, body_sve_dp};
static const ceil_chain chain_sp = {"sve", 1, ACCS, 4, STEPS, lanes_sp, body_sve_sp};

/* SVE peak DP FMA rate; p->iters = loop trips per thread, result->iters x VL/128. */
static int run_peak_fma_dp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_dp); }
/* SVE peak SP FMA rate; p->iters = loop trips per thread, result->iters x VL/128. */
static int run_peak_fma_sp(const ceil_params *p, ceil_result *r) { return ceil_flops_drive(p, r, &chain_sp); }

static const ceil_kernel ceil_flops_sve[] = {
    {"peak_fma_dp", "flops", "sve", 0.0, ACCS * STEPS * 2 * 2,
     "one loop trip on one 128-bit granule: 24 fmla .d on 24 chains, 24 x 2 x 2 = 96 DP flops (iters counts granules)",
     run_peak_fma_dp},
    {"peak_fma_sp", "flops", "sve", 0.0, ACCS * STEPS * 2 * 4,
     "one loop trip on one 128-bit granule: 24 fmla .s on 24 chains, 24 x 2 x 4 = 192 SP flops (iters counts granules)",
     run_peak_fma_sp},
    {NULL, NULL, NULL, 0.0, 0.0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_flops_sve, CEIL_ORDER_FLOPS + CEIL_ORDER_SVE);
