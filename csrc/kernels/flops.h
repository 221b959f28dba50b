/* flops.h - private to the flops_*.c files: one driver for every ISA variant.
 *
 * Each ISA file only supplies the register-resident FMA chain (its "body");
 * the OpenMP driver, pinning, timing and validation live once, in
 * flops_scalar.c, which is compiled for the baseline ISA. That matters: code
 * built with -mavx512f may use AVX-512 anywhere in a function, so nothing
 * but the chain itself is compiled with the wide flags, and the driver checks
 * ceil_isa_supported() before it calls the chain.
 *
 * The chain every body runs, per lane, is x = x * 1 + 1 (or x = 1 * 1 + x
 * where the FMA accumulates into its addend, as on Arm) with x starting at
 * the lane's index k. The 1s reach the body through an empty asm, so the
 * compiler cannot simplify the multiply or fold the loop; FMA latency and
 * throughput do not depend on operand values for normal numbers, so the
 * constants cost nothing in speed. In exchange every step is exact, and the
 * final value is known in closed form: min(k + n, 2^p) for n steps and a
 * p-bit significand (past 2^p, x + 1 rounds back to x: a tie, to even). The
 * check is therefore equality, and it also catches a wrong step count.
 */
#ifndef CEIL_FLOPS_H
#define CEIL_FLOPS_H

#include <stdint.h>
#include "ceiling.h"

/* Largest accumulator state a body may keep, in bytes (24 accumulators of
 * 2048-bit SVE vectors). */
#define CEIL_FLOPS_STATE_BYTES (24 * 256)

typedef struct ceil_chain {
    const char *isa;        /* ISA the body needs (ceil_isa_supported) */
    int sp;                 /* 1: float lanes, 0: double lanes */
    int accs;               /* independent accumulators (vector registers) */
    int lanes;              /* lanes per accumulator counted in the table's flops_per_iter */
    int steps_per_trip;     /* FMAs each accumulator does per loop trip */
    /* Lanes per accumulator on this CPU when they differ from `lanes` (SVE's
     * vector length is a run-time property); NULL otherwise. */
    int (*lanes_now)(void);
    /* Run `trips` loop trips on the state: accs * lanes_now() elements of
     * float or double, loaded at entry and stored at exit. */
    void (*body)(int64_t trips, void *state);
} ceil_chain;

/* Run one flops kernel: pin, warm up, time each repetition between barriers,
 * validate every thread's final state against min(k + n, 2^p). Returns 0 or
 * a negative CEIL_E* code. Defined in flops_scalar.c. */
int ceil_flops_drive(const ceil_params *p, ceil_result *r, const ceil_chain *c);

#if defined(__x86_64__)
/* The scalar chain with FMA3 (vfmadd213sd/ss), compiled in flops_avx2.c with
 * -mfma; call only where ceil_isa_supported("fma"). */
void ceil_fma3_scalar_dp(int64_t trips, void *state);
void ceil_fma3_scalar_sp(int64_t trips, void *state);
#endif

/* An opaque 1: the compiler cannot see through the empty asm, so it cannot
 * turn x * one + one into x + 1, or the whole loop into x + n. */
static inline double ceil_opaque_one(void)
{
    double one = 1.0;
    __asm__ volatile("" : "+m"(one));
    return one;
}

static inline float ceil_opaque_onef(void)
{
    float one = 1.0f;
    __asm__ volatile("" : "+m"(one));
    return one;
}

#endif /* CEIL_FLOPS_H */
