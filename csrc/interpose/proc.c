/* proc.c - the process's own threads as the kernel counted them, read from
 * /proc/self/task when the record is written: where each thread's life
 * went (on a CPU, waiting for a CPU). It wraps nothing.
 *
 * ceiling's /proc sampler watches the processes it started, on its own
 * node. When ceiling wraps each rank of an MPI job (`mpirun -n N ceiling
 * profile -- ./app`), every rank's record reaches rank 0's ceiling at
 * MPI_Finalize (mpi_gather.c), and these lines with it: so rank 0 can split
 * every rank's time, not only its own process's, whatever node it ran on.
 *
 * Its record lines:
 *
 *     module name=proc version=1 enabled=1
 *     proc task=4242 life_ns=... run_ns=... runq_ns=... utime_ticks=... stime_ticks=...
 *     proc task=4243 ...
 *     proc tasks=2 shown=2 schedstat=1 clk_tck=100 maxrss_kb=... rchar=... wchar=... read_bytes=... write_bytes=...
 *
 * tasks: the threads alive when the record was written (threads that ended
 * before are not listed; their CPU time is in the process line's utime_us
 * and stime_us); shown: the task lines written (at most PROC_TASKS);
 * schedstat: whether /proc/self/task/TID/schedstat was read (run_ns: time on
 * a CPU, runq_ns: runnable and waiting for one); without it run_ns is
 * utime + stime and runq_ns is 0. maxrss_kb: the peak resident size
 * (getrusage); rchar .. write_bytes: /proc/self/io, the process's I/O so far,
 * ended threads included (left out where it cannot be read). life_ns: since the thread started (its
 * stat's starttime against CLOCK_BOOTTIME). Read with raw system calls
 * (openat, read, getdents64): no allocation, no stdio, none of the wrapped
 * functions, so it may run in a fatal signal's handler.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "interpose.h"

#define PROC_TASKS 256            /* task lines at most: the rest are in tasks= only */

static uint64_t clk_tck;

static ceil_ip_module proc_module;

static int proc_init(ceil_ip_module *self)
{
    (void)self;
    clk_tck = getauxval(AT_CLKTCK);
    return clk_tck ? 0 : 1;
}

/* The file dir/name read into buf (NUL-terminated); its length, or -1. */
static long read_at(int dir, const char *name, char *buf, size_t cap)
{
    const long fd = syscall(SYS_openat, dir, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    const long n = syscall(SYS_read, (int)fd, buf, cap - 1);
    ceil_ip_self_read_(n);
    syscall(SYS_close, (int)fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static uint64_t number(const char **s)
{
    uint64_t v = 0;
    while (**s == ' ')
        (*s)++;
    while (**s >= '0' && **s <= '9')
        v = v * 10 + (uint64_t)(*(*s)++ - '0');
    return v;
}

typedef struct task_times {
    uint64_t start_ticks, utime, stime, run_ns, runq_ns;
    int schedstat;
} task_times;

/* One task's figures from TID/stat (after the command's closing parenthesis:
 * field 14 utime, 15 stime, 22 starttime) and TID/schedstat. */
/* Buffers are static, not on the stack: the report may run in a fatal
 * signal's handler on a small alternate stack, and records are written one
 * at a time. */
static char task_buf[1024], dir_buf[4096] __attribute__((aligned(8))), io_buf[1024];

static int task_read(int task_dir, const char *tid, task_times *t)
{
    char path[64], *buf = task_buf;
    const size_t cap = sizeof task_buf;
    size_t n = strlen(tid);
    if (n > 40)
        return -1;
    memcpy(path, tid, n);
    memcpy(path + n, "/stat", 6);
    if (read_at(task_dir, path, buf, cap) <= 0)
        return -1;
    const char *s = strrchr(buf, ')');
    if (!s)
        return -1;
    s += 2;                                    /* the state, field 3 */
    for (int field = 3; field < 14; field++) {
        while (*s && *s != ' ')
            s++;
        if (*s)
            s++;
    }
    t->utime = number(&s);
    t->stime = number(&s);
    for (int field = 16; field < 22; field++) {
        while (*s == ' ')
            s++;
        while (*s && *s != ' ')
            s++;
    }
    t->start_ticks = number(&s);
    memcpy(path + n, "/schedstat", 11);
    t->schedstat = 0;
    if (read_at(task_dir, path, buf, cap) > 0) {
        const char *q = buf;
        t->run_ns = number(&q);
        t->runq_ns = number(&q);
        /* "0 0 0" where the kernel keeps no sched_info: not a thread that never ran */
        t->schedstat = t->run_ns > 0 || t->utime + t->stime == 0;
    }
    return 0;
}

struct dirent64_ {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static void proc_report(ceil_ip_module *self, ceil_ip_out *out)
{
    const long dir = syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    struct timespec now;
    clock_gettime(CLOCK_BOOTTIME, &now);
    const uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    /* the task lines as they are read, the count line after them */
    char *const ents = dir_buf;
    uint64_t tasks = 0, shown = 0;
    int schedstat = 1;
    long got;
    while ((got = syscall(SYS_getdents64, (int)dir, ents, sizeof dir_buf)) > 0) {
        for (long off = 0; off < got;) {
            const struct dirent64_ *e = (const struct dirent64_ *)(ents + off);
            off += e->d_reclen;
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            task_times t;
            if (task_read((int)dir, e->d_name, &t) != 0)
                continue;
            tasks++;
            schedstat &= t.schedstat;
            if (shown == PROC_TASKS)
                continue;
            shown++;
            const char *p = e->d_name;
            const uint64_t start_ns = t.start_ticks * (1000000000u / clk_tck);
            const uint64_t cpu_ns = (t.utime + t.stime) * (1000000000u / clk_tck);
            ceil_ip_line(out, self);
            CEIL_IP_PUT_U64(out, task, number(&p));
            CEIL_IP_PUT_U64(out, life_ns, now_ns > start_ns ? now_ns - start_ns : 0);
            CEIL_IP_PUT_U64(out, run_ns, t.schedstat ? t.run_ns : cpu_ns);
            CEIL_IP_PUT_U64(out, runq_ns, t.schedstat ? t.runq_ns : 0);
            CEIL_IP_PUT_U64(out, utime_ticks, t.utime);
            CEIL_IP_PUT_U64(out, stime_ticks, t.stime);
        }
    }
    syscall(SYS_close, (int)dir);
    ceil_ip_line(out, self);
    CEIL_IP_PUT_U64(out, tasks, tasks);
    CEIL_IP_PUT_U64(out, shown, shown);
    CEIL_IP_PUT_U64(out, schedstat, (uint64_t)(schedstat && tasks));
    CEIL_IP_PUT_U64(out, clk_tck, clk_tck);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        CEIL_IP_PUT_U64(out, maxrss_kb, (uint64_t)ru.ru_maxrss);
    /* the process's I/O, its ended threads' included (absent where /proc/self/io is not readable) */
    char *const io = io_buf;
    if (read_at(AT_FDCWD, "/proc/self/io", io, sizeof io_buf) > 0) {
#define PROC_IO_NAME(key) #key,
        static const char *const keys[] = {CEIL_IP_PROC_IO(PROC_IO_NAME)};   /* calls.def */
        for (unsigned k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const size_t n = strlen(keys[k]);
            for (const char *line = io; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, keys[k], n) == 0 && line[n] == ':') {
                    const char *v = line + n + 1;
                    ceil_ip_put_u64(out, keys[k], number(&v));
                    break;
                }
        }
    }
}

static ceil_ip_module proc_module = {.name = "proc", .version = 1, .block_bytes = 8, .init = proc_init,
                                     .report = proc_report};
CEIL_IP_MODULE(proc_module);
