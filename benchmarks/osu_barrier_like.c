/* osu_barrier_like.c - the mean time of MPI_Barrier in a loop, as OSU's
 * osu_barrier reports it, for benchmarks/profile_overhead.py, which runs it
 * plain, under `ceiling profile` and with the interposer preloaded into the
 * ranks (issue 14: at most 10 % slower). Our own code, not OSU's.
 *
 *     mpiexec -n 2 osu_barrier_like ITERATIONS WARMUP
 *
 * Every rank calls MPI_Barrier WARMUP times untimed (connections set up,
 * code and pages in), then ITERATIONS times between two MPI_Wtime reads.
 * Rank 0 prints OSU's table (the average, minimum and maximum over the
 * ranks of each rank's mean microseconds per barrier) and one line
 * "result ranks=N iterations=I done_min=A done_max=B failed=F avg_us=...
 * min_us=... max_us=..." that the script reads. The loop checks its own
 * work: errors return (MPI_ERRORS_RETURN) and are counted, every rank counts
 * the barriers it completed, and the exit status is 1 unless every rank did
 * all of them without an error, and 1 as well when the job has another size
 * than the one asked for in CEILING_BARRIER_RANKS (a program built with one
 * MPI and launched by another's mpiexec starts as separate singletons).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const long iterations = argc > 2 ? atol(argv[1]) : 0, warmup = argc > 2 ? atol(argv[2]) : -1;
    if (iterations <= 0 || warmup < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n N %s ITERATIONS WARMUP\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *want = getenv("CEILING_BARRIER_RANKS");
    if (want && atoi(want) != size) {
        fprintf(stderr, "osu_barrier_like: %d rank(s) in MPI_COMM_WORLD, %s asked for: is the program built with "
                        "the mpicc of the MPI library this mpiexec launches?\n", size, want);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    long failed = 0, done = 0;
    for (long i = 0; i < warmup; i++)
        failed += MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
    const double t0 = MPI_Wtime();
    for (long i = 0; i < iterations; i++) {
        failed += MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
        done++;
    }
    const double us = (MPI_Wtime() - t0) * 1e6 / (double)iterations;

    double sum = 0, lo = 0, hi = 0;
    long done_min = 0, done_max = 0, failed_all = 0;
    MPI_Reduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&us, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&us, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&done, &done_min, 1, MPI_LONG, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&done, &done_max, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failed, &failed_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    int bad = 0;
    if (rank == 0) {
        printf("# ceiling osu_barrier_like: MPI_Barrier, %d processes\n", size);
        printf("%-20s%-20s%-20s%s\n", "# Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations");
        printf("%-20.2f%-20.2f%-20.2f%ld\n", sum / size, lo, hi, iterations);
        printf("result ranks=%d iterations=%ld done_min=%ld done_max=%ld failed=%ld avg_us=%.4f min_us=%.4f "
               "max_us=%.4f\n", size, iterations, done_min, done_max, failed_all, sum / size, lo, hi);
        fflush(stdout);
        bad = failed_all != 0 || done_min != iterations || done_max != iterations;
    }
    MPI_Finalize();
    return bad;
}
