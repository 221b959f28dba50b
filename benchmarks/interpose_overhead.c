/* interpose_overhead.c - ns per call of a few cheap POSIX calls, for
 * benchmarks/interpose_overhead.py, which runs it with and without
 * libceiling_interpose.so preloaded and subtracts.
 *
 *     interpose_overhead ITERATIONS
 *
 * prints one line per call, "name ns_per_call", each the best of 5 timed
 * loops of ITERATIONS calls (the whole loop between two clock reads, never
 * a single call). The calls are ones the kernel answers at once, so that
 * what the interposer adds is a visible fraction: a 1-byte write to
 * /dev/null, a 1-byte read of /dev/zero, a 1-byte pread of /dev/zero, an
 * lseek of /dev/null and an fstat; and for the stdio module a 1-byte fwrite
 * and an fputc to a FILE * on /dev/null with its default (full) buffering,
 * so that nearly every call only copies into the buffer. Then the same on a
 * regular file (a 1-byte pwrite and pread at offset 0, in the page cache,
 * and a 1-byte fwrite to a stream on it), where the per-file records
 * (csrc/interpose/files.c) count too. The file is made with mkstemp in
 * $TMPDIR (default /tmp) and removed at once.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum { OP_WRITE, OP_READ, OP_PREAD, OP_LSEEK, OP_FSTAT, OP_FWRITE, OP_FPUTC, OP_PWRITE_FILE, OP_PREAD_FILE,
       OP_FWRITE_FILE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"write_1b_devnull", "read_1b_devzero", "pread_1b_devzero",
                                               "lseek_devnull", "fstat_devnull", "fwrite_1b_devnull",
                                               "fputc_devnull", "pwrite_1b_file", "pread_1b_file",
                                               "fwrite_1b_file"};

static int null_fd, zero_fd, file_fd;
static FILE *null_file, *file_stream;

/* One timed loop; a failing call stops the program, since its time would
 * not be the call's. */
static double loop_ns(int op, long n)
{
    char c = 'x';
    struct stat st;
    long bad = 0;
    const uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        switch (op) {
        case OP_WRITE: bad += write(null_fd, &c, 1) != 1; break;
        case OP_READ: bad += read(zero_fd, &c, 1) != 1; break;
        case OP_PREAD: bad += pread(zero_fd, &c, 1, 0) != 1; break;
        case OP_LSEEK: bad += lseek(null_fd, 0, SEEK_SET) != 0; break;
        case OP_FSTAT: bad += fstat(null_fd, &st) != 0; break;
        case OP_FWRITE: bad += fwrite(&c, 1, 1, null_file) != 1; break;
        case OP_FPUTC: bad += fputc(c, null_file) == EOF; break;
        case OP_PWRITE_FILE: bad += pwrite(file_fd, &c, 1, 0) != 1; break;
        case OP_PREAD_FILE: bad += pread(file_fd, &c, 1, 0) != 1; break;
        case OP_FWRITE_FILE: bad += fwrite(&c, 1, 1, file_stream) != 1; break;
        }
    }
    const uint64_t t1 = now_ns();
    if (bad) {
        fprintf(stderr, "%s failed %ld times\n", op_names[op], bad);
        exit(1);
    }
    return (double)(t1 - t0) / (double)n;
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 0;
    if (n <= 0) {
        fprintf(stderr, "usage: %s ITERATIONS\n", argv[0]);
        return 2;
    }
    null_fd = open("/dev/null", O_WRONLY);
    zero_fd = open("/dev/zero", O_RDONLY);
    null_file = fopen("/dev/null", "w");
    if (null_fd < 0 || zero_fd < 0 || !null_file) {
        perror("open /dev/null or /dev/zero");
        return 1;
    }
    char path[4096];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/interpose_overhead.XXXXXX", dir && *dir ? dir : "/tmp");
    file_fd = mkstemp(path);
    if (file_fd < 0 || unlink(path) != 0 || pwrite(file_fd, "x", 1, 0) != 1 ||
        !(file_stream = fdopen(dup(file_fd), "w"))) {
        perror("a file in $TMPDIR");
        return 1;
    }
    for (int op = 0; op < OP_COUNT; op++) {
        double best = loop_ns(op, n / 10);   /* warm-up: resolves, claims the thread's slot */
        for (int r = 0; r < 5; r++) {
            const double t = loop_ns(op, n);
            best = t < best ? t : best;
        }
        printf("%s %.2f\n", op_names[op], best);
    }
    return 0;
}
