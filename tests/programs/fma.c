/* A pure FMA loop: 8 independent chains in registers, no memory; argv[1] times 1e8 iterations of 8 FMAs. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = (long)(atof(argc > 1 ? argv[1] : "1") * 1e8);
    volatile double seed = 0.5, mv = 0.999999, cv = 1e-7;
    double m = mv, c = cv, a0 = seed, a1 = seed + 1, a2 = seed + 2, a3 = seed + 3,
           a4 = seed + 4, a5 = seed + 5, a6 = seed + 6, a7 = seed + 7;
    for (long i = 0; i < n; i++) {
        a0 = a0 * m + c; a1 = a1 * m + c; a2 = a2 * m + c; a3 = a3 * m + c;
        a4 = a4 * m + c; a5 = a5 * m + c; a6 = a6 * m + c; a7 = a7 * m + c;
    }
    printf("%g\n", a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7);
    return 0;
}
