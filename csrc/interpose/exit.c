/* exit.c - the record where the process ends without exit(3) or its image
 * is replaced: _exit and _Exit (a forked child's usual end: fio's jobs,
 * Python's os._exit, a shell's subshells), and the exec family. exit(3)
 * runs the runtime's atexit handler and quick_exit its at_quick_exit one
 * (interpose.c); these do not run either.
 *
 * Before an exec the record is written with reason=exec and counting goes
 * on: when the exec fails the program continues in the same image, and its
 * record at exit (same pid, same start_ns) supersedes the exec one, so
 * nothing is counted twice or lost; when it succeeds the new image loads the
 * interposer afresh and writes a record of its own (same pid, a later
 * start_ns). A reader tells a process's images apart by (host, pid,
 * start_ns). Where no thread has counted anything yet (a child of fork
 * that execs at once, as a shell runs a command) no exec record is written.
 *
 * glibc's exec functions call execve inside libc, not through the PLT, so
 * each is wrapped; the list forms (execl, execlp, execle) are turned into
 * the vector forms here, as glibc does. In a child of vfork (which shares
 * the parent's memory until it execs or _exits) nothing is written: the
 * counts are the parent's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include "interpose.h"

CEIL_IP_REAL_DECL(void, _exit, (int));
CEIL_IP_REAL_DECL(void, _Exit, (int));
CEIL_IP_REAL_DECL(int, execve, (const char *, char *const[], char *const[]));
CEIL_IP_REAL_DECL(int, execv, (const char *, char *const[]));
CEIL_IP_REAL_DECL(int, execvp, (const char *, char *const[]));
CEIL_IP_REAL_DECL(int, execvpe, (const char *, char *const[], char *const[]));
CEIL_IP_REAL_DECL(int, fexecve, (int, char *const[], char *const[]));

static int (*real_execveat)(int, const char *, char *const[], char *const[], int);

/* At load: a child of vfork (Python's subprocess execs from one) must not
 * run dlsym, which may allocate in the parent's heap and take its locks. */
void ceil_ip_exit_resolve_(void)
{
    (void)CEIL_REAL(_exit);
    (void)CEIL_REAL(_Exit);
    (void)CEIL_REAL(execve);
    (void)CEIL_REAL(execv);
    (void)CEIL_REAL(execvp);
    (void)CEIL_REAL(execvpe);
    (void)CEIL_REAL(fexecve);
    real_execveat = (int (*)(int, const char *, char *const[], char *const[], int))ceil_ip_lookup("execveat", NULL);
}

CEIL_IP_EXPORT void _exit(int status)
{
    ceil_ip_before_exit_("_exit");
    CEIL_REAL(_exit)(status);
    __builtin_unreachable();
}

CEIL_IP_EXPORT void _Exit(int status)
{
    ceil_ip_before_exit_("_Exit");
    CEIL_REAL(_Exit)(status);
    __builtin_unreachable();
}

CEIL_IP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    ceil_ip_before_exec_("execve");
    return CEIL_REAL(execve)(path, argv, envp);
}

CEIL_IP_EXPORT int execv(const char *path, char *const argv[])
{
    ceil_ip_before_exec_("execv");
    return CEIL_REAL(execv)(path, argv);
}

CEIL_IP_EXPORT int execvp(const char *file, char *const argv[])
{
    ceil_ip_before_exec_("execvp");
    return CEIL_REAL(execvp)(file, argv);
}

CEIL_IP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    ceil_ip_before_exec_("execvpe");
    return CEIL_REAL(execvpe)(file, argv, envp);
}

CEIL_IP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    ceil_ip_before_exec_("fexecve");
    return CEIL_REAL(fexecve)(fd, argv, envp);
}

/* execveat is in glibc from 2.34; where it is not, the call fails as the
 * kernel would have it without glibc's wrapper. Looked up at load when the
 * runtime is active, else at the first call. */
CEIL_IP_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    int (*f)(int, const char *, char *const[], char *const[], int) = __atomic_load_n(&real_execveat, __ATOMIC_RELAXED);
    if (!f) {
        f = (int (*)(int, const char *, char *const[], char *const[], int))ceil_ip_lookup("execveat", NULL);
        if (!f) {
            errno = ENOSYS;
            return -1;
        }
        __atomic_store_n(&real_execveat, f, __ATOMIC_RELAXED);
    }
    ceil_ip_before_exec_("execveat");
    return f(dirfd, path, argv, envp, flags);
}

/* The arguments of a list form, counted: argv has n + 1 entries (arg0 ..
 * the NULL). */
static size_t count_args(const char *arg0, va_list ap)
{
    size_t n = arg0 != NULL;
    while (arg0 && va_arg(ap, const char *) != NULL)
        n++;
    return n;
}

#define LIST_TO_VECTOR(arg0, last, argv, n)                                                      \
    va_list ap;                                                                                    \
    va_start(ap, last);                                                                            \
    const size_t n = count_args(arg0, ap);                                                         \
    va_end(ap);                                                                                    \
    char *argv[n + 1];                                                                             \
    argv[0] = (char *)(arg0);                                                                      \
    va_start(ap, last);                                                                            \
    for (size_t i_ = 1; i_ <= n; i_++)                                                             \
        argv[i_] = va_arg(ap, char *)   /* the last is the list's NULL */

CEIL_IP_EXPORT int execl(const char *path, const char *arg, ...)
{
    LIST_TO_VECTOR(arg, arg, argv, n);
    va_end(ap);
    ceil_ip_before_exec_("execl");
    return CEIL_REAL(execv)(path, argv);
}

CEIL_IP_EXPORT int execlp(const char *file, const char *arg, ...)
{
    LIST_TO_VECTOR(arg, arg, argv, n);
    va_end(ap);
    ceil_ip_before_exec_("execlp");
    return CEIL_REAL(execvp)(file, argv);
}

CEIL_IP_EXPORT int execle(const char *path, const char *arg, ...)
{
    LIST_TO_VECTOR(arg, arg, argv, n);
    char *const *envp = va_arg(ap, char *const *);   /* after the NULL */
    va_end(ap);
    ceil_ip_before_exec_("execle");
    return CEIL_REAL(execve)(path, argv, envp);
}
