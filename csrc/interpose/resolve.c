/* resolve.c - finding the real functions behind the wrappers (interpose.h:
 * CEIL_REAL, CEIL_REAL_FROM): the next definition after this library, or,
 * for an API loaded with dlopen(RTLD_LOCAL), the one its caller sees;
 * whether any loaded object defines a name (ceil_ip_defined, for the
 * wrappers an API may lack); and the runtime's notes on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "interpose.h"

/* A note on stderr through the raw system call: usable before the real
 * write is resolved, and from the resolver itself (interpose.h). */
void ceil_ip_say(const char *a, const char *b)
{
    const char *parts[] = {"ceiling interpose: ", a, b ? b : "", "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (syscall(SYS_write, 2, parts[i], strlen(parts[i])) < 0)
            return;
}

/* The object a wrapped API was found in through a caller (ceil_ip_resolve_from). */
static void *api_handle;

void *ceil_ip_lookup(const char *name, const void *caller)
{
    void *f = dlsym(RTLD_NEXT, name);
    void *h = __atomic_load_n(&api_handle, __ATOMIC_ACQUIRE);
    if (!f && h)
        f = dlsym(h, name);
    Dl_info info;
    if (!f && caller && dladdr(caller, &info) && info.dli_fname && info.dli_fname[0]) {
        /* The caller's object and its dependencies: RTLD_NOLOAD only finds
         * what is loaded already, and the reference it takes is kept. */
        h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (h && (f = dlsym(h, name)) != NULL)
            __atomic_store_n(&api_handle, h, __ATOMIC_RELEASE);
    }
    return f;
}

void *ceil_ip_resolve_from(const char *name, void **cache, const void *caller)
{
    void *f = ceil_ip_lookup(name, caller);
    if (!f) {
        ceil_ip_say("no real function after this library (nor where its caller is) for ", name);
        abort();
    }
    __atomic_store_n(cache, f, __ATOMIC_RELAXED);
    return f;
}

void *ceil_ip_resolve(const char *name, void **cache) { return ceil_ip_resolve_from(name, cache, NULL); }

/* ---- ceil_ip_defined: a loaded object's dynamic symbol table, read in place -------------
 * No dl* call (it runs inside the dynamic linker's relocation, from IFUNC
 * resolvers): dl_iterate_phdr gives each object's program headers, whose
 * PT_DYNAMIC gives its symbol table, string table and hash table (GNU's or
 * SysV's); the name is looked up as ld.so would. RTLD_LOCAL objects are
 * seen too, and an object being loaded by the dlopen whose relocation asks. */

/* A dynamic-section address: glibc rebases them in place on most machines, not on all. */
static const void *dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    return (const void *)(v < info->dlpi_addr ? info->dlpi_addr + v : v);
}

static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static int defines(const ElfW(Sym) *sym)
{
#if __ELF_NATIVE_CLASS == 64
    const unsigned type = ELF64_ST_TYPE(sym->st_info);
#else
    const unsigned type = ELF32_ST_TYPE(sym->st_info);
#endif
    return sym->st_shndx != SHN_UNDEF && sym->st_value != 0 && (type == STT_FUNC || type == STT_GNU_IFUNC);
}

struct wanted {
    const char *name;
    uint32_t gnu, sysv;   /* its two hashes */
    int found;
};

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct wanted *w = arg;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL, *sysv = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB)
            symtab = dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB)
            strtab = dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_GNU_HASH)
            gnu = dyn_ptr(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_HASH)
            sysv = dyn_ptr(info, dyn->d_un.d_ptr);
    }
    if (!symtab || !strtab)
        return 0;
    if (gnu) {
        const uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom_words);
        const uint32_t *chain = buckets + nbuckets;
        if (nbuckets == 0)
            return 0;
        uint32_t i = buckets[w->gnu % nbuckets];
        if (i < symoffset)
            return 0;
        for (;; i++) {
            const uint32_t h = chain[i - symoffset];
            if ((h | 1) == (w->gnu | 1) && same(w->name, strtab + symtab[i].st_name) && defines(&symtab[i])) {
                w->found = 1;
                return 1;
            }
            if (h & 1)
                return 0;
        }
    }
    if (sysv) {
        const uint32_t nbucket = sysv[0];
        const uint32_t *bucket = sysv + 2, *chain = bucket + nbucket;
        if (nbucket == 0)
            return 0;
        for (uint32_t i = bucket[w->sysv % nbucket]; i != STN_UNDEF; i = chain[i])
            if (same(w->name, strtab + symtab[i].st_name) && defines(&symtab[i])) {
                w->found = 1;
                return 1;
            }
    }
    return 0;
}

/* Set by a relocation: until this library is relocated it points elsewhere,
 * and nothing here may call through its own unrelocated PLT. */
static void *volatile relocated = (void *)&relocated;

int ceil_ip_defined(const char *name)
{
    if (relocated != (void *)&relocated)
        return 1;              /* too early to look: as if defined, the wrapper stands */
    struct wanted w = {name, 5381, 0, 0};
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        w.gnu = w.gnu * 33 + *p;
        w.sysv = (w.sysv << 4) + *p;
        const uint32_t g = w.sysv & 0xf0000000u;
        if (g)
            w.sysv ^= g >> 24;
        w.sysv &= ~g;
    }
    dl_iterate_phdr(visit, &w);
    return w.found;
}
