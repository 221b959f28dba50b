/* flops_scalar.c - the flops driver shared by every ISA variant, and the
 * scalar peak multiply-add kernels.
 *
 * Scalar means one element per instruction. On aarch64 the baseline ISA has
 * a fused multiply-add (fmadd). On x86-64 it does not (FMA3 came with
 * Haswell and Piledriver), so where the CPU has FMA3 the chain is
 * vfmadd213sd from flops_avx2.c, picked at run time, and only older CPUs run
 * mulsd + addsd: two instructions for the same two flops, which on cores
 * whose adders and multipliers share pipes (Intel) is half the FMA rate.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include "ceiling.h"
#include "flops.h"

/* ---------------------------------------------------------------- driver */

static void state_init(const ceil_chain *c, void *state, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        if (c->sp)
            ((float *)state)[k] = (float)k;
        else
            ((double *)state)[k] = (double)k;
    }
}

/* The closed form of the chain (see flops.h): element k after `steps` exact
 * increments, saturating at 2^p where x + 1 rounds back to x. */
static int64_t expected(int64_t k, int64_t steps, int sp)
{
    const int64_t cap = (int64_t)1 << (sp ? 24 : 53);
    if (steps >= cap || k + steps >= cap)
        return cap;
    return k + steps;
}

/* 1 when every element matches; else 0 with the first mismatch in *bad_k. */
static int state_ok(const ceil_chain *c, const void *state, int64_t n, int64_t steps,
                    int64_t *bad_k, double *got, double *want)
{
    for (int64_t k = 0; k < n; k++) {
        double v = c->sp ? (double)((const float *)state)[k] : ((const double *)state)[k];
        double e = (double)expected(k, steps, c->sp);
        if (v != e) {
            *bad_k = k;
            *got = v;
            *want = e;
            return 0;
        }
    }
    return 1;
}

int ceil_flops_drive(const ceil_params *p, ceil_result *r, const ceil_chain *c)
{
    ceil_result_clear(r);
    int unread = ceil_params_unread(p, 0, 0, c->sp ? "peak_fma_sp" : "peak_fma_dp", r);
    if (unread)
        return unread;
    if (p->iters < 1 || p->reps < 1 || p->warmup < 0 || p->nthreads < 1 || !r->times) {
        ceil_set_msg(r, "need iters >= 1, reps >= 1, warmup >= 0, nthreads >= 1 and a times array");
        return CEIL_EINVAL;
    }
    if (!ceil_isa_supported(c->isa)) {
        ceil_set_msg(r, "this CPU or OS does not run %s code", c->isa);
        return CEIL_ENOISA;
    }
    const int lanes = c->lanes_now ? c->lanes_now() : c->lanes;
    const int64_t nelem = (int64_t)c->accs * lanes;
    if (lanes < c->lanes || lanes % c->lanes != 0 ||
        nelem * (c->sp ? 4 : 8) > CEIL_FLOPS_STATE_BYTES) {
        ceil_set_msg(r, "%s vector of %d lanes is not supported by this kernel", c->isa, lanes);
        return CEIL_EINVAL;
    }
    /* Steps per accumulator per repetition; saturating, the closed form caps it anyway. */
    const int64_t steps = p->iters > ((int64_t)1 << 54) / c->steps_per_trip
                              ? ((int64_t)1 << 54)
                              : p->iters * c->steps_per_trip;

    int pin_err = 0, pin_cpu = -1, nt_run = 0, bad = 0, bad_tid = -1;
    int64_t bad_k = -1;
    double bad_got = 0.0, bad_want = 0.0, check = 0.0, t0 = 0.0;

#pragma omp parallel num_threads(p->nthreads)
    {
        const int tid = omp_get_thread_num();
        _Alignas(64) unsigned char state[CEIL_FLOPS_STATE_BYTES];
        ceil_affinity old;
        ceil_pin_member(p, tid, &old, &pin_err, &pin_cpu);
#pragma omp single
        nt_run = omp_get_num_threads();
        /* The single's barrier makes pin_err the same for every thread, so
         * all of them take the same path through the barriers below. */
        const int go = pin_err == 0;
        for (int rep = -p->warmup; go && rep < p->reps; rep++) {
            state_init(c, state, nelem);
#pragma omp barrier
#pragma omp master
            t0 = ceil_now();
            c->body(p->iters, state);
#pragma omp barrier
#pragma omp master
            {
                if (rep >= 0)
                    r->times[rep] = ceil_now() - t0;
            }
            int64_t k;
            double got, want;
            if (!state_ok(c, state, nelem, steps, &k, &got, &want)) {
#pragma omp critical(ceil_flops_bad)
                if (!bad) {
                    bad = 1;
                    bad_tid = tid;
                    bad_k = k;
                    bad_got = got;
                    bad_want = want;
                }
            }
            if (tid == 0 && rep == p->reps - 1)
                check = c->sp ? (double)((float *)state)[0] : ((double *)state)[0];
        }
        ceil_affinity_restore(&old);
    }

    if (pin_err != 0) {
        ceil_set_msg(r, "could not pin a thread to CPU %d (error %d)", pin_cpu, -pin_err);
        return CEIL_EPIN;
    }
    r->nthreads = nt_run;
    r->iters = p->iters * nt_run * (lanes / c->lanes);
    r->check = check;
    r->valid = !bad;
    if (bad)
        ceil_set_msg(r, "thread %d lane %lld holds %.17g after %lld steps, expected %.17g",
                     bad_tid, (long long)bad_k, bad_got, (long long)steps, bad_want);
    return 0;
}

/* ---------------------------------------------------------------- scalar bodies */

#define L1_11(F) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define L0_11(F) F(0) L1_11(F)
#define L13_23(F) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
#define L0_23(F) L0_11(F) F(12) L13_23(F)

#if defined(__x86_64__)

/* 12 chains of mul (3-4 cycles) + add (3-4 cycles): 12 steps in flight cover
 * 2 multiplies and 2 adds per cycle; each chain steps twice per trip. */
#define SC_ACCS 12
#define SC_STEPS 2
#define DECL_D(i) double x##i = s[i];
#define DECL_F(i) float x##i = s[i];
#define STORE(i) s[i] = x##i;
#define MADD_SD(i) "mulsd %[a], %[x" #i "]\n\taddsd %[b], %[x" #i "]\n\t"
#define MADD_SS(i) "mulss %[a], %[x" #i "]\n\taddss %[b], %[x" #i "]\n\t"
#define OUT(i) , [x##i] "+x"(x##i)

static void body_scalar_dp(int64_t trips, void *state)
{
    double *s = state;
    const double a = ceil_opaque_one(), b = ceil_opaque_one();
    L0_11(DECL_D)
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(L0_11(MADD_SD) L0_11(MADD_SD)
                         : [x0] "+x"(x0) L1_11(OUT)
                         : [a] "x"(a), [b] "x"(b));
    L0_11(STORE)
}

static void body_scalar_sp(int64_t trips, void *state)
{
    float *s = state;
    const float a = ceil_opaque_onef(), b = ceil_opaque_onef();
    L0_11(DECL_F)
    for (int64_t t = 0; t < trips; t++)
        __asm__ volatile(L0_11(MADD_SS) L0_11(MADD_SS)
                         : [x0] "+x"(x0) L1_11(OUT)
                         : [a] "x"(a), [b] "x"(b));
    L0_11(STORE)
}

#define SC_DOC_DP "one loop trip: 24 dependent-chain steps x = x*a + b on 12 chains (vfmadd213sd with FMA3, " \
                  "else mulsd + addsd), 48 DP flops"
#define SC_DOC_SP "one loop trip: 24 dependent-chain steps x = x*a + b on 12 chains (vfmadd213ss with FMA3, " \
                  "else mulss + addss), 48 SP flops"

#elif defined(__aarch64__)

/* 24 chains of fmadd: covers 4 pipes x 4 cycles (Neoverse V1/V2) and 2 x 9
 * (A64FX) with room to spare; 32 FP registers hold them and a, b. The chain
 * runs through the addend, x = a * b + x, because that is the operand fmadd
 * does not overwrite; a * b = 1 exactly, so the closed form is the same. */
#define SC_ACCS 24
#define SC_STEPS 1
#define DECL_D(i) double x##i = s[i];
#define DECL_F(i) float x##i = s[i];
#define STORE(i) s[i] = x##i;
#define FMADD_D(i) "fmadd %d[x" #i "], %d[a], %d[b], %d[x" #i "]\n\t"
#define FMADD_S(i) "fmadd %s[x" #i "], %s[a], %s[b], %s[x" #i "]\n\t"
#define OUT(i) , [x##i] "+w"(x##i)

/* Two asm statements per trip: an asm takes at most 30 operands, and an
 * in-out operand counts twice. */
static void body_scalar_dp(int64_t trips, void *state)
{
    double *s = state;
    const double a = ceil_opaque_one(), b = ceil_opaque_one();
    L0_23(DECL_D)
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(L0_11(FMADD_D) : [x0] "+w"(x0) L1_11(OUT) : [a] "w"(a), [b] "w"(b));
        __asm__ volatile(FMADD_D(12) L13_23(FMADD_D) : [x12] "+w"(x12) L13_23(OUT) : [a] "w"(a), [b] "w"(b));
    }
    L0_23(STORE)
}

static void body_scalar_sp(int64_t trips, void *state)
{
    float *s = state;
    const float a = ceil_opaque_onef(), b = ceil_opaque_onef();
    L0_23(DECL_F)
    for (int64_t t = 0; t < trips; t++) {
        __asm__ volatile(L0_11(FMADD_S) : [x0] "+w"(x0) L1_11(OUT) : [a] "w"(a), [b] "w"(b));
        __asm__ volatile(FMADD_S(12) L13_23(FMADD_S) : [x12] "+w"(x12) L13_23(OUT) : [a] "w"(a), [b] "w"(b));
    }
    L0_23(STORE)
}

#define SC_DOC_DP "one loop trip: 24 fused multiply-adds x = a*b + x (fmadd, 24 chains), 48 DP flops"
#define SC_DOC_SP "one loop trip: 24 fused multiply-adds x = a*b + x (fmadd, 24 chains), 48 SP flops"

#endif

#if defined(__x86_64__) || defined(__aarch64__)

static const ceil_chain chain_dp = {"scalar", 0, SC_ACCS, 1, SC_STEPS, NULL, body_scalar_dp};
static const ceil_chain chain_sp = {"scalar", 1, SC_ACCS, 1, SC_STEPS, NULL, body_scalar_sp};

#if defined(__x86_64__)
/* Same shape (12 chains x 2 steps, one element each), one FMA per step. */
static const ceil_chain chain_fma3_dp = {"scalar", 0, SC_ACCS, 1, SC_STEPS, NULL, ceil_fma3_scalar_dp};
static const ceil_chain chain_fma3_sp = {"scalar", 1, SC_ACCS, 1, SC_STEPS, NULL, ceil_fma3_scalar_sp};
#define PICK(plain, fused) (ceil_isa_supported("fma") ? &(fused) : &(plain))
#else
#define PICK(plain, fused) (&(plain))
#endif

/* Scalar peak DP multiply-add rate; p->iters = loop trips per thread. */
static int run_peak_fma_dp(const ceil_params *p, ceil_result *r)
{
    return ceil_flops_drive(p, r, PICK(chain_dp, chain_fma3_dp));
}

/* Scalar peak SP multiply-add rate; p->iters = loop trips per thread. */
static int run_peak_fma_sp(const ceil_params *p, ceil_result *r)
{
    return ceil_flops_drive(p, r, PICK(chain_sp, chain_fma3_sp));
}

/* 24 steps per trip on both architectures: 12 x 2 on x86-64, 24 x 1 on aarch64. */
_Static_assert(SC_ACCS * SC_STEPS == 24, "flops_per_iter below assumes 24 steps per trip");

static const ceil_kernel ceil_flops_scalar[] = {
    {"peak_fma_dp", "flops", "scalar", 0.0, 24 * 2, SC_DOC_DP, run_peak_fma_dp},
    {"peak_fma_sp", "flops", "scalar", 0.0, 24 * 2, SC_DOC_SP, run_peak_fma_sp},
    {NULL, NULL, NULL, 0.0, 0.0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_flops_scalar, CEIL_ORDER_FLOPS + CEIL_ORDER_SCALAR);

#endif /* other architectures: no hand-written chain yet, so no table is
        * registered and the kernel is simply absent. */
