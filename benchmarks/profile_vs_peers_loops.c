/* profile_vs_peers_loops.c - three programs whose bound is known by
 * construction, for benchmarks/profile_vs_peers.py (issue 26): with
 * `ceiling profile --experiments`, the first must be called compute, the
 * second memory bandwidth, the third not memory bandwidth. Our own code.
 *
 *     profile_vs_peers_loops fma SECONDS
 *     profile_vs_peers_loops triad SECONDS MIB
 *     profile_vs_peers_loops chase SECONDS MIB
 *
 * fma: 8 independent chains of a*x+y in registers (no memory traffic at
 * all), until SECONDS have passed (the clock read every 2^20 steps).
 * triad: STREAM's a[i] = b[i] + s*c[i] over three arrays of MIB MiB each
 * (far beyond any last-level cache), repeated until SECONDS have passed
 * after the arrays were first touched (on a busy 2-vCPU guest, faulting in
 * 768 MiB took most of 2 seconds, and the program was its page faults).
 * chase: a dependent load after another over MIB MiB, one pointer per
 * 64-byte line in one random cycle (Sattolo's shuffle), until SECONDS have
 * passed after the cycle is made: each load waits for the one before (memory latency, a TLB miss a
 * load with 4 KiB pages), one line of each page touched at a time.
 * Each prints one line with its checksum, so the compiler keeps the work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s fma SECONDS | triad SECONDS MIB | chase SECONDS MIB\n", argv[0]);
        return 2;
    }
    const double seconds = atof(argv[2]);
    double t0 = now();
    if (strcmp(argv[1], "fma") == 0) {
        double x[8], a = 0.999999, y = 1e-7;
        for (int k = 0; k < 8; k++)
            x[k] = 1.0 + k;
        long steps = 0;
        do {
            for (long i = 0; i < (1L << 20); i++)
                for (int k = 0; k < 8; k++)
                    x[k] = x[k] * a + y;
            steps += 1L << 20;
        } while (now() - t0 < seconds);
        double s = 0;
        for (int k = 0; k < 8; k++)
            s += x[k];
        printf("fma steps=%ld checksum=%.17g\n", steps, s);
        return 0;
    }
    if (strcmp(argv[1], "triad") == 0 && argc > 3) {
        const size_t n = (size_t)atol(argv[3]) * 1048576 / sizeof(double);
        double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
        if (!a || !b || !c)
            return 1;
        for (size_t i = 0; i < n; i++)
            a[i] = 0, b[i] = 1, c[i] = 2;
        t0 = now();                     /* as STREAM: the loop timed, not the first touch of the arrays */
        long passes = 0;
        do {
            for (size_t i = 0; i < n; i++)
                a[i] = b[i] + 3.0 * c[i];
            passes++;
        } while (now() - t0 < seconds);
        printf("triad passes=%ld checksum=%.17g\n", passes, a[n / 2]);
        return 0;
    }
    if (strcmp(argv[1], "chase") == 0 && argc > 3) {
        const size_t lines = (size_t)atol(argv[3]) * 1048576 / 64;
        unsigned long long *p = malloc(lines * 64), x = 88172645463325252ULL;
        if (!p || lines < 2)
            return 1;
        for (size_t i = 0; i < lines; i++)
            p[i * 8] = i;
        for (size_t i = lines - 1; i > 0; i--) {        /* Sattolo: one cycle through every line */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t j = x % i, t = p[i * 8];
            p[i * 8] = p[j * 8], p[j * 8] = t;
        }
        size_t at = 0;
        long steps = 0;
        t0 = now();                     /* the chase timed, not the making of the cycle */
        do {
            for (long i = 0; i < (1L << 20); i++)
                at = p[at * 8];
            steps += 1L << 20;
        } while (now() - t0 < seconds);
        printf("chase steps=%ld at=%zu\n", steps, at);
        return 0;
    }
    fprintf(stderr, "%s: unknown kernel %s\n", argv[0], argv[1]);
    return 2;
}
