/* signals.c - the runtime's signal handlers, hidden from the program.
 *
 * The record is written on a fatal signal (interpose.c), so the runtime puts
 * a handler of its own on SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM,
 * SIGINT, SIGHUP and SIGQUIT where the program has left the default action.
 * The program must not see it: Python reads every disposition at start and
 * `signal.getsignal(SIGTERM)` would give None instead of SIG_DFL, so the
 * common save-and-restore pattern raised TypeError; Go's runtime would take
 * it for a C handler to forward faults to. So every libc call that sets or
 * reads a disposition is wrapped here (sigaction, __sigaction, signal,
 * ssignal, bsd_signal, sysv_signal, __sysv_signal, sigset, sigignore,
 * siginterrupt: glibc's own calls between them do not go through the PLT,
 * so each is its own door), and for these signals:
 *
 *   - a query returns what the program would have seen without us: while our
 *     handler stands in, the disposition the kernel gave back when the
 *     program (or its parent, at load) last set SIG_DFL, with its flags and
 *     mask exactly as the kernel keeps them;
 *   - a handler or SIG_IGN the program sets is set for real and replaces
 *     ours (so it is what runs, and SIG_IGN survives an exec);
 *   - SIG_DFL the program sets is set for real, read back as the kernel
 *     keeps it, and then our handler stands in again.
 *
 * What still sees it: a raw rt_sigaction system call (a statically linked
 * program never loads the interposer; a dynamic one that bypasses libc
 * would), and the SigCgt mask in /proc/PID/status. An exec resets our
 * handlers to SIG_DFL, which is what the program believed they were.
 *
 * A lock (with every signal blocked, so a handler calling sigaction cannot
 * deadlock on it) keeps a set and its read-back together; these calls are
 * rare, and none is on a counted path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include "interpose.h"
#include "record.h"

CEIL_IP_REAL_DECL(int, sigaction, (int, const struct sigaction *, struct sigaction *));
CEIL_IP_REAL_DECL(int, __sigaction, (int, const struct sigaction *, struct sigaction *));
CEIL_IP_REAL_DECL(sighandler_t, signal, (int, sighandler_t));
CEIL_IP_REAL_DECL(sighandler_t, ssignal, (int, sighandler_t));
CEIL_IP_REAL_DECL(sighandler_t, bsd_signal, (int, sighandler_t));
CEIL_IP_REAL_DECL(sighandler_t, sysv_signal, (int, sighandler_t));
CEIL_IP_REAL_DECL(sighandler_t, __sysv_signal, (int, sighandler_t));
CEIL_IP_REAL_DECL(sighandler_t, sigset, (int, sighandler_t));
CEIL_IP_REAL_DECL(int, sigignore, (int));
CEIL_IP_REAL_DECL(int, siginterrupt, (int, int));

static const int kept_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT};

static void (*handler)(int);          /* the runtime's (interpose.c); NULL: nothing stands in */
static unsigned char kept[NSIG];      /* 1: a signal of kept_signals, the runtime active */
static struct sigaction shown[NSIG];  /* what a query returns while our handler stands in */
static int lock;

int ceil_ip_sigaction_real_(int sig, const struct sigaction *act, struct sigaction *old)
{
    return CEIL_REAL(sigaction)(sig, act, old);
}

static int is_kept(int sig) { return sig > 0 && sig < NSIG && kept[sig]; }

static void enter(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, saved);
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        ;
}

static void leave(const sigset_t *saved)
{
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* Our handler in place of the default action, which the kernel now holds
 * as `dfl` (what queries will return). */
static void stand_in(int sig, const struct sigaction *dfl)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigfillset(&sa.sa_mask);       /* no second signal in the middle of the flush */
    sa.sa_flags = SA_ONSTACK;      /* the program's alternate stack, if it has one */
    shown[sig] = *dfl;
    CEIL_REAL(sigaction)(sig, &sa, NULL);
}

/* After the program set sig's disposition: where it is now the default,
 * our handler stands in for it again. */
static void after_set(int sig)
{
    struct sigaction now;
    if (CEIL_REAL(sigaction)(sig, NULL, &now) == 0 && now.sa_handler == SIG_DFL)
        stand_in(sig, &now);
}

/* In a child of fork: a thread of the parent that held the lock is not there to let it go. */
void ceil_ip_signals_forked_(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }

void ceil_ip_signals_start_(void (*h)(int))
{
    handler = h;
    for (size_t i = 0; i < sizeof kept_signals / sizeof kept_signals[0]; i++) {
        const int sig = kept_signals[i];
        struct sigaction old;
        if (CEIL_REAL(sigaction)(sig, NULL, &old) != 0)
            continue;
        kept[sig] = 1;
        if (old.sa_handler == SIG_DFL)    /* also SA_SIGINFO with no function: the same union */
            stand_in(sig, &old);
    }
    /* resolved now, so that no wrapper below calls dlsym from a handler */
    (void)CEIL_REAL(signal);
    (void)CEIL_REAL(sigset);
}

static int sigaction_via(ceil_ip_sigaction_fn_ real, int sig, const struct sigaction *act, struct sigaction *oact)
{
    if (!is_kept(sig))
        return real(sig, act, oact);
    sigset_t saved;
    struct sigaction old;
    enter(&saved);
    const int rc = real(sig, act, &old);
    const int e = errno;
    if (rc == 0) {
        if (old.sa_handler == handler)
            old = shown[sig];
        if (act)
            after_set(sig);
        if (oact)
            *oact = old;
    }
    leave(&saved);
    errno = e;
    return rc;
}

CEIL_IP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
    return sigaction_via(CEIL_REAL(sigaction), sig, act, oact);
}

CEIL_IP_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
    return sigaction_via(CEIL_REAL(__sigaction), sig, act, oact);
}

/* signal() and its kin: the real one sets the disposition and gives back
 * the old handler, ours where it stood in. */
static sighandler_t signal_via(ceil_ip_signal_fn_ real, int sig, sighandler_t h)
{
    if (!is_kept(sig))
        return real(sig, h);
    sigset_t saved;
    enter(&saved);
    sighandler_t old = real(sig, h);
    const int e = errno;
    if (old != SIG_ERR) {
        if (old == handler)
            old = shown[sig].sa_handler;
        after_set(sig);
    }
    leave(&saved);
    errno = e;
    return old;
}

CEIL_IP_EXPORT sighandler_t signal(int sig, sighandler_t h) { return signal_via(CEIL_REAL(signal), sig, h); }
CEIL_IP_EXPORT sighandler_t ssignal(int sig, sighandler_t h)
{
    return signal_via((ceil_ip_signal_fn_)CEIL_REAL(ssignal), sig, h);
}
CEIL_IP_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
    return signal_via((ceil_ip_signal_fn_)CEIL_REAL(bsd_signal), sig, h);
}
CEIL_IP_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
    return signal_via((ceil_ip_signal_fn_)CEIL_REAL(sysv_signal), sig, h);
}
CEIL_IP_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
    return signal_via((ceil_ip_signal_fn_)CEIL_REAL(__sysv_signal), sig, h);
}
/* sigset, as glibc writes it, but through the wrapped sigaction: glibc's
 * tells SIG_HOLD from the signal mask, which the lock above has blocked. */
CEIL_IP_EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
    if (!is_kept(sig))
        return CEIL_REAL(sigset)(sig, h);
    sigset_t one, was;
    struct sigaction act, old;
    sigemptyset(&one);
    sigaddset(&one, sig);
    if (h == SIG_HOLD) {
        if (pthread_sigmask(SIG_BLOCK, &one, &was) != 0)
            return SIG_ERR;
        if (sigismember(&was, sig))
            return SIG_HOLD;
        return sigaction_via(CEIL_REAL(sigaction), sig, NULL, &old) < 0 ? SIG_ERR : old.sa_handler;
    }
    memset(&act, 0, sizeof act);
    act.sa_handler = h;
    sigemptyset(&act.sa_mask);
    if (sigaction_via(CEIL_REAL(sigaction), sig, &act, &old) < 0 || pthread_sigmask(SIG_UNBLOCK, &one, &was) != 0)
        return SIG_ERR;
    return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
}

CEIL_IP_EXPORT int sigignore(int sig)
{
    if (!is_kept(sig))
        return CEIL_REAL(sigignore)(sig);
    sigset_t saved;
    enter(&saved);
    const int rc = CEIL_REAL(sigignore)(sig);
    const int e = errno;
    leave(&saved);
    errno = e;
    return rc;
}

/* siginterrupt reads the disposition and sets it again with SA_RESTART
 * changed: on our handler while it stands in, so the change is carried to
 * what is shown. */
CEIL_IP_EXPORT int siginterrupt(int sig, int flag)
{
    if (!is_kept(sig))
        return CEIL_REAL(siginterrupt)(sig, flag);
    sigset_t saved;
    enter(&saved);
    const int rc = CEIL_REAL(siginterrupt)(sig, flag);
    const int e = errno;
    struct sigaction now;
    if (rc == 0 && CEIL_REAL(sigaction)(sig, NULL, &now) == 0 && now.sa_handler == handler)
        shown[sig].sa_flags = (shown[sig].sa_flags & ~SA_RESTART) | (now.sa_flags & SA_RESTART);
    leave(&saved);
    errno = e;
    return rc;
}
