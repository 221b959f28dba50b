/* observe.c - prints what a C program can see of its process, for
 * tests/test_interpose_transparent.py, which runs it with and without the
 * interposer and compares: every signal's disposition as sigaction reports
 * it, what the signal() family gives back, fd numbers, errno, a fork+_exit
 * child, an exec that fails, exit status or death by a signal.
 * argv[1]: "exit" (exit 3), "_exit" (_exit 4), "term" (raise SIGTERM),
 * "segv" (a fault), "exec" (exec argv[2..] at the end). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_sig(int sig) { (void)sig; }

static const char *name(void (*h)(int))
{
    return h == SIG_DFL ? "DFL" : h == SIG_IGN ? "IGN" : h == on_sig ? "on_sig" : "OTHER";
}

static void show(const char *what, int sig)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) != 0) {
        printf("%s %d errno=%d\n", what, sig, errno);
        return;
    }
    unsigned long long mask = 0;
    for (int s = 1; s <= 64; s++)
        if (sigismember(&sa.sa_mask, s) == 1)
            mask |= 1ull << (s - 1);
    printf("%s %d %s flags=%#x mask=%#llx\n", what, sig, name(sa.sa_handler), (unsigned)sa.sa_flags, mask);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    for (int s = 1; s <= 64; s++)
        show("start", s);

    /* set, read back, restore: each kept signal and one other */
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGABRT, SIGUSR1};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        const int s = sigs[i];
        struct sigaction sa, old, old2;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sig;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGUSR2);
        sigaction(s, &sa, &old);
        printf("old %d %s flags=%#x\n", s, name(old.sa_handler), (unsigned)old.sa_flags);
        show("set", s);
        sa.sa_handler = SIG_DFL;
        sa.sa_flags = SA_NODEFER;
        sigaction(s, &sa, &old2);
        printf("old2 %d %s flags=%#x\n", s, name(old2.sa_handler), (unsigned)old2.sa_flags);
        show("dfl", s);
        printf("signal %d %s", s, name(signal(s, SIG_IGN)));
        printf(" %s", name(signal(s, on_sig)));
        printf(" %s", name(sysv_signal(s, SIG_DFL)));
        printf(" %s", name(sigset(s, SIG_DFL)));
        printf(" %s\n", name(signal(s, SIG_DFL)));
        siginterrupt(s, 1);
        show("interrupt", s);
        sigaction(s, &old, NULL);
        show("restored", s);
    }

    int a = open("/dev/null", O_RDONLY), b = open("/dev/null", O_RDONLY);
    close(a);
    int c = open("/dev/null", O_RDONLY);
    printf("fds %d %d %d\n", a, b, c);
    errno = 0;
    printf("close(999)=%d errno=%d\n", close(999), errno);
    errno = 0;
    printf("open=%d errno=%d\n", open("/nonexistent/x", O_RDONLY), errno);
    errno = 0;
    printf("execl=%d errno=%d\n", execl("/nonexistent/x", "x", (char *)NULL), errno);
    fflush(stdout);

    pid_t p = fork();
    if (p == 0) {
        printf("child %s\n", getpid() == getppid() ? "odd" : "here");
        fflush(stdout);
        _exit(7);
    }
    int st = 0;
    waitpid(p, &st, 0);
    printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
    fflush(stdout);

    if (!strcmp(mode, "_exit"))
        _exit(4);
    if (!strcmp(mode, "term"))
        raise(SIGTERM);
    if (!strcmp(mode, "segv"))
        *(volatile int *)0 = 1;
    if (!strcmp(mode, "exec") && argc > 2) {
        execvp(argv[2], argv + 2);
        return 99;
    }
    return 3;
}
