/* A dependent-load chase over argv[2] MiB (one pointer per 64-byte line, a random cycle), argv[1] million steps
   (each a cache and, with 4 KiB pages, a TLB miss: about 0.4 us on the 2-vCPU Cascade Lake VM). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
int main(int argc, char **argv) {
    long steps = (long)(atof(argc > 1 ? argv[1] : "10") * 1e6);
    size_t lines = ((size_t)atol(argc > 2 ? argv[2] : "1024") << 20) / 64;
    uint64_t *p = malloc(lines * 64);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < lines; i++) p[i * 8] = i;
    for (size_t i = lines - 1; i > 0; i--) {          /* Sattolo: one cycle through every line */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = x % i, t = p[i * 8];
        p[i * 8] = p[j * 8]; p[j * 8] = t;
    }
    size_t at = 0;
    for (long s = 0; s < steps; s++) at = p[at * 8];
    printf("%zu\n", at);
    return 0;
}
