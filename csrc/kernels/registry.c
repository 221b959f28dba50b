/* registry.c - the one table of kernels Python sees.
 *
 * Every family file defines one or more NULL-name-terminated ceil_kernel
 * arrays. They are declared weak here, so a variant that is not compiled on
 * this architecture (AVX-512 on aarch64, SVE on x86-64) is simply absent. */
#include <string.h>
#include "ceiling.h"

CEIL_TABLE(ceil_flops_scalar);
CEIL_TABLE(ceil_flops_avx2);
CEIL_TABLE(ceil_flops_avx512);
CEIL_TABLE(ceil_flops_neon);
CEIL_TABLE(ceil_flops_sve);
CEIL_TABLE(ceil_bw_scalar);
CEIL_TABLE(ceil_bw_avx2);
CEIL_TABLE(ceil_bw_avx512);
CEIL_TABLE(ceil_bw_neon);
CEIL_TABLE(ceil_bw_sve);
CEIL_TABLE(ceil_latency);
CEIL_TABLE(ceil_c2c);
CEIL_TABLE(ceil_clock);

/* Weak tables are NULL when absent, so the list is counted, not terminated. */
#define NTABLES 13
static const ceil_kernel *table(int t)
{
    switch (t) {
    case 0: return ceil_clock;
    case 1: return ceil_flops_scalar;
    case 2: return ceil_flops_avx2;
    case 3: return ceil_flops_avx512;
    case 4: return ceil_flops_neon;
    case 5: return ceil_flops_sve;
    case 6: return ceil_bw_scalar;
    case 7: return ceil_bw_avx2;
    case 8: return ceil_bw_avx512;
    case 9: return ceil_bw_neon;
    case 10: return ceil_bw_sve;
    case 11: return ceil_latency;
    case 12: return ceil_c2c;
    default: return NULL;
    }
}

int ceil_abi_version(void) { return CEIL_ABI_VERSION; }

int ceil_kernel_count(void)
{
    int n = 0;
    for (int t = 0; t < NTABLES; t++)
        for (const ceil_kernel *k = table(t); k && k->name; k++)
            n++;
    return n;
}

const ceil_kernel *ceil_kernel_get(int i)
{
    if (i < 0)
        return NULL;
    for (int t = 0; t < NTABLES; t++)
        for (const ceil_kernel *k = table(t); k && k->name; k++)
            if (i-- == 0)
                return k;
    return NULL;
}
