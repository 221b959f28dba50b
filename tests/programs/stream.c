/* STREAM Triad over three arrays of argv[2] MiB each, repeated for argv[1] seconds (about). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    double secs = atof(argc > 1 ? argv[1] : "1");
    size_t n = (size_t)atol(argc > 2 ? argv[2] : "128") << 17;
    double *a = malloc(n * 8), *b = malloc(n * 8), *c = malloc(n * 8);
    for (size_t i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
    double t0 = now();
    int reps = 0;
    while (now() - t0 < secs) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        reps++;
    }
    printf("%d %g\n", reps, a[n / 2]);
    return 0;
}
