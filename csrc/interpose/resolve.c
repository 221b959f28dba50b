/* resolve.c - finding the real functions behind the wrappers (interpose.h:
 * CEIL_REAL, CEIL_REAL_FROM): the next definition after this library, or,
 * for an API loaded with dlopen(RTLD_LOCAL), the one its caller sees; and
 * the runtime's notes on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "interpose.h"

/* Which file fd 2 was at load: 0 not yet looked at (a note before the
 * constructor goes out), 1 the file below, 2 fd 2 was closed. */
static int stderr_known;
static dev_t stderr_dev;
static ino_t stderr_ino;

void ceil_ip_note_stderr_(void)
{
    struct stat st;
    if (syscall(SYS_fstat, 2, &st) != 0) {
        stderr_known = 2;
        return;
    }
    stderr_dev = st.st_dev;
    stderr_ino = st.st_ino;
    stderr_known = 1;
}

/* Whether fd 2 is still the program's stderr of load time: a program that
 * closed it and opened a file of its own there must not find our notes in
 * its data (stat as a raw call: the wrapped one would count). */
static int stderr_is_ours(void)
{
    struct stat st;
    if (stderr_known == 0)
        return 1;
    return stderr_known == 1 && syscall(SYS_fstat, 2, &st) == 0 && st.st_dev == stderr_dev &&
           st.st_ino == stderr_ino;
}

/* A note on stderr through the raw system call: usable before the real
 * write is resolved, and from the resolver itself (interpose.h). */
void ceil_ip_say(const char *a, const char *b)
{
    if (!stderr_is_ours())
        return;
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
        if (strncmp(name, "PMPI", 4) == 0) {
            /* an MPI call newer than the MPI: found by a program that tested for it */
            ceil_ip_say("this process's MPI has no ", name);
            ceil_ip_say("  the program called ceiling's wrapper of it, as one that tests for MPI 4 calls "
                        "does (mpi4py 4's PyPI wheels on an MPI 3 library such as Open MPI 4): profile it with "
                        "an mpi4py built against this MPI (pip install --no-binary mpi4py mpi4py) or an MPI 4 "
                        "library", NULL);
        } else {
            ceil_ip_say("no real function after this library (nor where its caller is) for ", name);
        }
        abort();
    }
    __atomic_store_n(cache, f, __ATOMIC_RELAXED);
    return f;
}

void *ceil_ip_resolve(const char *name, void **cache) { return ceil_ip_resolve_from(name, cache, NULL); }

void *ceil_ip_resolve_narrow(const char *name, void **cache, const void *caller, int *narrow)
{
    void *f = ceil_ip_lookup(name, caller);
    const size_t n = strlen(name);
    char base[128];
    if (!f && n > 2 && n < sizeof base && name[n - 2] == '_' && name[n - 1] == 'c') {
        memcpy(base, name, n - 2);
        base[n - 2] = '\0';
        if ((f = ceil_ip_lookup(base, caller)) != NULL)
            __atomic_store_n(narrow, 1, __ATOMIC_RELAXED);
    }
    if (!f)
        return ceil_ip_resolve_from(name, cache, caller);     /* says so and stops */
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);            /* after the flag */
    return f;
}
