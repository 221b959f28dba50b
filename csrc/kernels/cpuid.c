/* cpuid.c - raw cpuid for the machine model (Python decodes the registers).
 *
 * /proc/cpuinfo carries neither the hypervisor's name (leaf 0x40000000) nor
 * Intel's nominal and maximum clock (leaf 0x16), so the machine model asks
 * the CPU directly. Not a kernel: it is not in the descriptor table. */
#include <stdint.h>
#include "ceiling.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* Execute cpuid(leaf, subleaf) on the calling CPU and store eax, ebx, ecx,
 * edx in out[0..3]. Returns 0, or CEIL_ENOISA on a CPU without cpuid (not
 * x86). The caller checks the maximum leaf (leaf 0 / 0x80000000) first: an
 * unsupported leaf returns whatever the CPU returns for it. */
int ceil_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t out[4])
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned int a, b, c, d;
    __cpuid_count(leaf, subleaf, a, b, c, d);
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
    return 0;
#else
    out[0] = out[1] = out[2] = out[3] = 0;
    (void)leaf;
    (void)subleaf;
    return CEIL_ENOISA;
#endif
}
