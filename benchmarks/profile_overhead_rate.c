/* profile_overhead_rate.c - a program making about 10^5 intercepted calls
 * per second per thread, for benchmarks/profile_overhead.py, which runs it
 * plain, under `ceiling profile` and with the interposer preloaded, and
 * compares the times (issue 14: at most 3 % slower).
 *
 *     profile_overhead_rate calibrate PERIOD_NS
 *     profile_overhead_rate run THREADS ITERATIONS SPIN
 *
 * calibrate prints "write_ns=W spin_ns=S spin=K iteration_ns=I": the cost of
 * one 1-byte write to /dev/null in a loop of writes, of one step of the
 * compute block, the steps K that make one iteration (the write and K steps)
 * last PERIOD_NS, and an iteration's time measured with K (best of 5). The script
 * calibrates once and gives the same K to every run, so that every run does
 * the same work whatever it is timed under: a run under a profiler that
 * calibrated itself would do less work when slowed, and hide the slowdown.
 *
 * run starts THREADS threads, each doing ITERATIONS times: one 1-byte write
 * to /dev/null (an intercepted POSIX call the kernel answers at once), then
 * SPIN steps of pure computation (a multiply-xorshift chain in registers:
 * no memory traffic, no call, nothing the compiler can fold). It prints one
 * line of key=value fields: the calls made and the ones that failed, the
 * elapsed time from before the first thread starts to after the last one
 * ends, the achieved calls per second per thread, and a checksum of the
 * computation, which depends only on THREADS, ITERATIONS and SPIN: the
 * script refuses to compare runs whose checksums differ. Exit status 1 when
 * a write did not return 1.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* K steps of a multiply-xorshift chain. Each step depends on the last (a
 * multiply's latency and a shift), the empty asm keeps x in a register and
 * stops the compiler from vectorising, unrolling into something shorter or
 * computing the result at compile time. Nonzero in, nonzero out (both steps
 * are bijections), so no input makes it trivial. */
static inline uint64_t spin(uint64_t x, long k)
{
    for (long i = 0; i < k; i++) {
        x ^= x >> 31;
        x *= UINT64_C(0x9E3779B97F4A7C15);
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static int null_fd;

typedef struct {
    long iterations, spin;
    uint64_t x;      /* in: the seed; out: the chain's last value */
    long failed;     /* writes that did not return 1 */
} work;

static void *worker(void *arg)
{
    work *w = arg;
    uint64_t x = w->x;
    long failed = 0;
    const char c = 'x';
    for (long i = 0; i < w->iterations; i++) {
        failed += write(null_fd, &c, 1) != 1;
        x = spin(x, w->spin);
    }
    w->x = x;
    w->failed = failed;
    return NULL;
}

/* Best of 7 timings of n steps / n writes: the fastest is the one the host
 * interrupted least. */
static double best_ns_per(int writes, long n)
{
    const char c = 'x';
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        uint64_t x = 1;
        const uint64_t t0 = now_ns();
        if (writes) {
            for (long i = 0; i < n; i++)
                if (write(null_fd, &c, 1) != 1) {
                    perror("write /dev/null");
                    exit(1);
                }
        } else {
            x = spin(x, n);
        }
        const double t = (double)(now_ns() - t0) / (double)n;
        if (x == 0)                    /* never: keeps x alive */
            puts("");
        best = t < best ? t : best;
    }
    return best;
}

/* Best of 5 timings of n whole iterations (the write, then k steps), ns each. */
static double best_iteration_ns(long k, long n)
{
    work w = {.iterations = n, .spin = k, .x = 1};
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        const uint64_t t0 = now_ns();
        worker(&w);
        const double t = (double)(now_ns() - t0) / (double)n;
        best = t < best ? t : best;
    }
    if (w.failed) {
        fprintf(stderr, "a write to /dev/null did not return 1\n");
        exit(1);
    }
    return best;
}

/* K from the costs of a write and of a step measured apart, then corrected
 * once from whole iterations: a write between two compute blocks costs more
 * than in a loop of writes (its caches and predictors are cold), by some
 * percent of the period. */
static int calibrate(long period_ns)
{
    spin(1, 1L << 22);                 /* warm-up: the clock ramps up, the pages are in */
    const double w = best_ns_per(1, 20000), s = best_ns_per(0, 1L << 20);
    long k = (long)(((double)period_ns - w) / s + 0.5);
    if (k >= 1)
        k += (long)(((double)period_ns - best_iteration_ns(k, 1000)) / s + 0.5);
    if (k < 1) {
        fprintf(stderr, "a write alone takes %.0f ns, more than the period of %ld ns\n", w, period_ns);
        return 1;
    }
    const double it = best_iteration_ns(k, 1000);
    printf("write_ns=%.1f spin_ns=%.3f spin=%ld iteration_ns=%.1f\n", w, s, k, it);
    return 0;
}

static int run(int threads, long iterations, long k)
{
    work *ws = calloc((size_t)threads, sizeof *ws);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    if (!ws || !ids) {
        perror("calloc");
        return 1;
    }
    const uint64_t t0 = now_ns();
    for (int t = 0; t < threads; t++) {
        ws[t] = (work){.iterations = iterations, .spin = k, .x = (uint64_t)t + 1};
        int e = pthread_create(&ids[t], NULL, worker, &ws[t]);
        if (e) {
            fprintf(stderr, "pthread_create: %s\n", strerror(e));
            return 1;
        }
    }
    uint64_t sum = 0;
    long failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        sum ^= ws[t].x * (uint64_t)(2 * t + 1);
        failed += ws[t].failed;
    }
    const double elapsed = (double)(now_ns() - t0) / 1e9;
    printf("threads=%d iterations=%ld spin=%ld calls=%ld failed=%ld elapsed_s=%.6f rate_per_thread=%.0f "
           "checksum=%016" PRIx64 "\n",
           threads, iterations, k, (long)threads * iterations, failed, elapsed, (double)iterations / elapsed, sum);
    free(ws);
    free(ids);
    return failed != 0;
}

int main(int argc, char **argv)
{
    null_fd = open("/dev/null", O_WRONLY);
    if (null_fd < 0) {
        perror("open /dev/null");
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "calibrate") && atol(argv[2]) > 0)
        return calibrate(atol(argv[2]));
    if (argc == 5 && !strcmp(argv[1], "run") && atoi(argv[2]) > 0 && atol(argv[3]) > 0 && atol(argv[4]) > 0)
        return run(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
    fprintf(stderr, "usage: %s calibrate PERIOD_NS | run THREADS ITERATIONS SPIN\n", argv[0]);
    return 2;
}
