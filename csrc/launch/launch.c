/* ceiling-launch: what `ceiling profile` runs between itself and the program
 * (src/ceiling/probes/launch.py speaks to it).
 *
 *   ceiling-launch CTL CMD WATCH UNBLOCK EXE ARGV0 [ARGS...]
 *
 * Why a process of its own, in C:
 *   - Peak memory. Linux carries a process's peak RSS across exec (signal->maxrss
 *     keeps the pre-exec image's high-water mark), so a program forked from ceiling's
 *     Python and exec'd reports at least Python's ~16 MiB. Forked from this small
 *     process instead, its wait4 ru_maxrss is its own, as under GNU time.
 *   - Exact I/O totals. When the program ends, this process sees it with
 *     waitid(WNOWAIT) and reads /proc/PID/io while it is a zombie: the program's
 *     final bytes with those of every descendant it waited for (the kernel adds a
 *     reaped child's I/O to its parent), each counted once. Then wait4 reaps it.
 *   - A witness for signals. It is in ceiling's process group: a signal sent to the
 *     group (a terminal's Ctrl-C or hangup, kill -- -PGID, Slurm signalling every pid
 *     of a step) reaches it too, one sent to ceiling's pid alone does not. It reports
 *     each signal of WATCH it gets, and survives them (blocked, read from a signalfd);
 *     ceiling decides what to pass on and asks it to (CMD).
 *
 * CTL: a pipe ceiling reads lines from:
 *   pid N                the program is forked and waits for "g" on CMD (ceiling opens
 *                        its hardware counters meanwhile, before its exec)
 *   started              its exec succeeded
 *   error ERRNO          fork or exec failed (this process then exits 127)
 *   signal S CODE PID    this process got signal S (si_code, sender's pid)
 *   exit status=W utime_us=U stime_us=S maxrss_kb=M [io_errno=E | rchar=.. wchar=.. ...]
 *                        the program ended: its wait status, its wait4 rusage and its
 *                        /proc/PID/io read as a zombie; this process then exits 0
 * CMD: a pipe ceiling writes to: "g" once (start the program), then one byte per
 *   signal number to send to the program. EOF: ceiling is gone; the program runs on.
 * WATCH, UNBLOCK: comma-separated signal numbers: those to report, and those ceiling
 *   blocked only to hand them here safely, which the program gets unblocked.
 * The program gets this process's environment, where CEILING_LAUNCH_PRELOAD (if set)
 * becomes LD_PRELOAD: ceiling keeps its interposer out of this process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int ctl = -1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    for (int off = 0; off < n;) {         /* one write: a line under PIPE_BUF arrives whole */
        ssize_t w = write(ctl, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;                        /* ceiling is gone (EPIPE: SIGPIPE is blocked) */
        off += (int)w;
    }
}

static int parse_set(const char *text, sigset_t *set)
{
    sigemptyset(set);
    while (*text) {
        char *end;
        long s = strtol(text, &end, 10);
        if (end == text || s <= 0 || s >= NSIG)
            return -1;
        sigaddset(set, (int)s);
        text = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return 0;
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
    ssize_t r;
    do
        r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    return r;
}

/* The program, forked: waits for the go, takes back ceiling's signal mask and its
 * LD_PRELOAD, execs; the exec's errno goes up ``err`` (close-on-exec). */
static void child(const char *exe, char **argv, int go, int err, const sigset_t *orig, const sigset_t *unblock)
{
    char b = 0;
    if (read_full(go, &b, 1) != 1 || b != 'g')
        _exit(127);
    const char *pre = getenv("CEILING_LAUNCH_PRELOAD");
    if (pre) {
        setenv("LD_PRELOAD", pre, 1);
        unsetenv("CEILING_LAUNCH_PRELOAD");
    }
    sigprocmask(SIG_SETMASK, orig, NULL);
    sigprocmask(SIG_UNBLOCK, unblock, NULL);
    if (strchr(exe, '/'))
        execv(exe, argv);
    else
        execvp(exe, argv);
    int e = errno ? errno : ENOEXEC;
    ssize_t w = write(err, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* The program ended (a zombie now): its /proc/PID/io, then reap it and say everything. */
static void finish(pid_t pid)
{
    char path[64], io[1024], line[2048];
    size_t len = 0;
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int io_errno = 0;
    if (fd < 0) {
        io_errno = errno;
    } else {
        ssize_t r;
        while (len < sizeof io - 1 && (r = read_full(fd, io + len, sizeof io - 1 - len)) > 0)
            len += (size_t)r;
        if (r < 0 && len == 0)
            io_errno = errno;
        close(fd);
    }
    io[len] = 0;
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    int n = snprintf(line, sizeof line, "exit status=%d utime_us=%lld stime_us=%lld maxrss_kb=%ld", status,
                     (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                     (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, (long)ru.ru_maxrss);
    if (io_errno) {
        n += snprintf(line + n, sizeof line - (size_t)n, " io_errno=%d", io_errno);
    } else {
        /* "rchar: 123\nwchar: 45\n..." -> " rchar=123 wchar=45 ..." */
        for (char *p = io, *save = NULL, *tok; (tok = strtok_r(p, "\n", &save)); p = NULL) {
            char *colon = strchr(tok, ':');
            if (!colon || (size_t)n >= sizeof line - 64)
                continue;
            *colon = 0;
            n += snprintf(line + n, sizeof line - (size_t)n, " %s=%lld", tok, strtoll(colon + 1, NULL, 10));
        }
    }
    say("%s\n", line);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "ceiling-launch: run by ceiling profile only (CTL CMD WATCH UNBLOCK EXE ARGV0 ...)\n");
        return 2;
    }
    ctl = atoi(argv[1]);
    int cmd = atoi(argv[2]);
    sigset_t watch, unblock, orig, blocked;
    if (parse_set(argv[3], &watch) < 0 || parse_set(argv[4], &unblock) < 0) {
        fprintf(stderr, "ceiling-launch: bad signal list\n");
        return 2;
    }
    fcntl(ctl, F_SETFD, FD_CLOEXEC);
    fcntl(cmd, F_SETFD, FD_CLOEXEC);
    sigprocmask(SIG_SETMASK, NULL, &orig);
    blocked = watch;
    sigaddset(&blocked, SIGCHLD);
    sigaddset(&blocked, SIGPIPE);
    sigprocmask(SIG_BLOCK, &blocked, NULL);

    int go[2], err[2];
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        say("error %d\n", errno);
        return 127;
    }
    pid_t pid = fork();
    if (pid < 0) {
        say("error %d\n", errno);
        return 127;
    }
    if (pid == 0) {
        close(ctl);
        close(cmd);
        close(go[1]);
        close(err[0]);
        child(argv[5], argv + 6, go[0], err[1], &orig, &unblock);
    }
    close(go[0]);
    close(err[1]);
    say("pid %d\n", (int)pid);
    char b = 0;
    if (read_full(cmd, &b, 1) != 1 || b != 'g') {        /* ceiling gave up: the child exits unexec'd */
        close(go[1]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return 127;
    }
    ssize_t w = write(go[1], "g", 1);
    (void)w;
    close(go[1]);
    int e = 0;
    if (read_full(err[0], &e, sizeof e) == (ssize_t)sizeof e) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        say("error %d\n", e);
        return 127;
    }
    close(err[0]);
    say("started\n");

    sigset_t wake = watch;
    sigaddset(&wake, SIGCHLD);
    int sfd = signalfd(-1, &wake, SFD_CLOEXEC);
    if (sfd < 0) {                          /* no signalfd: just wait; signals stay blocked here */
        siginfo_t si;
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
            ;
        finish(pid);
    }
    struct pollfd fds[2] = {{.fd = sfd, .events = POLLIN}, {.fd = cmd, .events = POLLIN}};
    for (;;) {
        if (poll(fds, fds[1].fd >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read_full(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGCHLD) {
                    siginfo_t wi;
                    memset(&wi, 0, sizeof wi);
                    if (waitid(P_PID, (id_t)pid, &wi, WEXITED | WNOHANG | WNOWAIT) == 0 && wi.si_pid == pid)
                        finish(pid);
                } else {
                    say("signal %u %d %u\n", si.ssi_signo, si.ssi_code, si.ssi_pid);
                }
            }
        }
        if (fds[1].fd >= 0 && fds[1].revents) {
            unsigned char sigs[64];
            ssize_t r = read(cmd, sigs, sizeof sigs);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
                fds[1].fd = -1;            /* ceiling is gone: the program runs on, reaped here */
            } else {
                for (ssize_t i = 0; i < r; i++)
                    if (sigs[i] > 0 && sigs[i] < NSIG)
                        kill(pid, sigs[i]);
            }
        }
    }
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
        ;
    finish(pid);
    return 0;
}
