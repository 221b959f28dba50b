/* registry.c - the one table of kernels Python sees.
 *
 * Every family file registers its NULL-name-terminated ceil_kernel array
 * with CEIL_REGISTER_TABLE (ceiling.h), which places a pointer to it in the
 * linker section "ceil_tables". GNU ld, gold and lld define
 * __start_ceil_tables / __stop_ceil_tables around that section, so the
 * tables are found without a list here: a variant CMake did not compile on
 * this architecture (AVX-512 on aarch64, SVE on x86-64) is simply absent.
 *
 * The section's order is the link order, which is a build detail; the
 * tables are listed by their registered order instead (then by name), so
 * kernel i is the same kernel in every build of the same sources. Nothing is
 * sorted in place: the walk picks the next table by rank each time, which
 * for a dozen tables costs nothing and needs neither state nor a lock. */
#include <stdint.h>
#include <string.h>
#include "ceiling.h"

/* Hidden: each shared object sees its own section, never another library's.
 * Weak: a build with no table at all still links (both are then NULL). */
extern const ceil_table_reg *const __start_ceil_tables[] __attribute__((weak, visibility("hidden")));
extern const ceil_table_reg *const __stop_ceil_tables[] __attribute__((weak, visibility("hidden")));

/* a before b in the listing: a strict total order, so no table is skipped
 * (two static tables may share a name; their addresses still differ). */
static int before(const ceil_table_reg *a, const ceil_table_reg *b)
{
    if (a->order != b->order)
        return a->order < b->order;
    int c = strcmp(a->name, b->name);
    if (c != 0)
        return c < 0;
    return (uintptr_t)a < (uintptr_t)b;
}

/* The table that follows `prev` in the listing (the first when prev is
 * NULL), or NULL after the last. */
static const ceil_table_reg *next_table(const ceil_table_reg *prev)
{
    const ceil_table_reg *best = NULL;
    if (!__start_ceil_tables)
        return NULL;
    for (const ceil_table_reg *const *e = __start_ceil_tables; e < __stop_ceil_tables; e++) {
        const ceil_table_reg *t = *e;
        if (prev && !before(prev, t))
            continue;
        if (!best || before(t, best))
            best = t;
    }
    return best;
}

int ceil_abi_version(void) { return CEIL_ABI_VERSION; }

int ceil_kernel_count(void)
{
    int n = 0;
    for (const ceil_table_reg *t = next_table(NULL); t; t = next_table(t))
        for (const ceil_kernel *k = t->kernels; k->name; k++)
            n++;
    return n;
}

const ceil_kernel *ceil_kernel_get(int i)
{
    if (i < 0)
        return NULL;
    for (const ceil_table_reg *t = next_table(NULL); t; t = next_table(t))
        for (const ceil_kernel *k = t->kernels; k->name; k++)
            if (i-- == 0)
                return k;
    return NULL;
}
