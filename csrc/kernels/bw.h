/* bw.h - private to the bandwidth kernels (bw_*.c).
 *
 * One driver (ceil_bw_drive, in bw_scalar.c, compiled at the baseline ISA)
 * does what every variant shares: checking parameters, allocation, NUMA
 * binding, pinning, first touch, timing between barriers and validation.
 * Each ISA file supplies only the inner loops, so the variants cannot differ
 * in anything but the instructions that move the data.
 *
 * Data, chosen so that every result is exact in double precision and a
 * misplaced or skipped element shows (v(i) = i mod CEIL_BW_PERIOD):
 *   STREAM    a0 = 1 + v,  b0 = 2 + 2v,  c0 = 0.25 + 0.5v,  q = 3
 *             copy  c = a        -> c = 1 + v
 *             scale b = q*c      -> b = 0.75 + 1.5v
 *             add   c = a + b    -> c = 3 + 3v
 *             triad a = b + q*c  -> a = 2.75 + 3.5v
 *             Each kernel reads only arrays it does not write, so repeated
 *             passes leave the same analytic values; after the timed passes
 *             all three arrays are checked element by element (relative
 *             error < 1e-13), like stream.c's checkSTREAMresults.
 *             check = sum of the written array.
 *   load_sum  a = v; check = the sum of one pass over the whole array, which
 *             must equal the closed form (exact while n < 2^37).
 */
#ifndef CEIL_BW_H
#define CEIL_BW_H

#include <stdint.h>
#include "ceiling.h"

#define CEIL_BW_Q 3.0            /* STREAM's scalar */
#define CEIL_BW_PERIOD 65521     /* largest prime below 2^16: no power-of-two period */
#define CEIL_BW_ALIGN_ELEMS 8    /* thread chunks start on 64-byte boundaries */

typedef enum { CEIL_BW_COPY = 0, CEIL_BW_SCALE, CEIL_BW_ADD, CEIL_BW_TRIAD, CEIL_BW_LOAD_SUM } ceil_bw_op;

/* One pass of a STREAM kernel over n elements of a, b, c (each 64-byte
 * aligned): copy c = a, scale b = q*c, add c = a + b, triad a = b + q*c.
 * nt != 0: non-temporal stores, fenced before returning. */
typedef void (*ceil_bw_stream_fn)(double *a, double *b, double *c, int64_t n, int nt);

/* One pass of load_sum: the sum of a[0..n), a 64-byte aligned. */
typedef double (*ceil_bw_sum_fn)(const double *a, int64_t n);

/* The inner loops of one ISA variant. */
typedef struct ceil_bw_ops {
    const char *isa;
    ceil_bw_stream_fn stream[4];   /* indexed by CEIL_BW_COPY .. CEIL_BW_TRIAD */
    ceil_bw_sum_fn sum;
} ceil_bw_ops;

/* Run one bandwidth kernel with the given inner loops: p->elements doubles
 * per array, p->iters passes per repetition (the fields it reads: ceiling.h
 * at ceil_params). Returns 0 or a CEIL_E* code. */
int ceil_bw_drive(const ceil_params *p, ceil_result *r, ceil_bw_op op, const ceil_bw_ops *ops);

/* The five descriptors of one variant, written once here so that byte and
 * flop counts (STREAM's: bytes named in the source) cannot drift apart. */
#define CEIL_BW_KERNELS(table, isa_name, rank, ops)                                                 \
    static int table##_copy(const ceil_params *p, ceil_result *r)                               \
    { return ceil_bw_drive(p, r, CEIL_BW_COPY, &(ops)); }                                       \
    static int table##_scale(const ceil_params *p, ceil_result *r)                              \
    { return ceil_bw_drive(p, r, CEIL_BW_SCALE, &(ops)); }                                      \
    static int table##_add(const ceil_params *p, ceil_result *r)                                \
    { return ceil_bw_drive(p, r, CEIL_BW_ADD, &(ops)); }                                        \
    static int table##_triad(const ceil_params *p, ceil_result *r)                              \
    { return ceil_bw_drive(p, r, CEIL_BW_TRIAD, &(ops)); }                                      \
    static int table##_load_sum(const ceil_params *p, ceil_result *r)                           \
    { return ceil_bw_drive(p, r, CEIL_BW_LOAD_SUM, &(ops)); }                                   \
    static const ceil_kernel table[] = {                                                        \
        {"stream_copy", "bandwidth", isa_name, 16, 0, "c[i] = a[i]", table##_copy},             \
        {"stream_scale", "bandwidth", isa_name, 16, 1, "b[i] = q*c[i]", table##_scale},         \
        {"stream_add", "bandwidth", isa_name, 24, 1, "c[i] = a[i] + b[i]", table##_add},        \
        {"stream_triad", "bandwidth", isa_name, 24, 2, "a[i] = b[i] + q*c[i]", table##_triad},  \
        {"load_sum", "bandwidth", isa_name, 8, 1, "s += a[i] (read only)", table##_load_sum},   \
        {NULL, NULL, NULL, 0, 0, NULL, NULL},                                                   \
    };                                                                                          \
    CEIL_REGISTER_TABLE(table, CEIL_ORDER_BW + (rank))

#endif /* CEIL_BW_H */
