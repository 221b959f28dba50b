/* profile_vs_peers_pingpong.c - an MPI ping-pong with known call counts,
 * for benchmarks/profile_vs_peers.py (issue 26). Our own code.
 *
 *     mpiexec -n 2 profile_vs_peers_pingpong ITERATIONS BYTES
 *
 * Rank 0 sends BYTES to rank 1 and receives them back, ITERATIONS times
 * (MPI_Send and MPI_Recv only, nothing else between MPI_Init and
 * MPI_Finalize): every rank makes exactly ITERATIONS MPI_Send and
 * ITERATIONS MPI_Recv calls and sends ITERATIONS x BYTES bytes. Exit 1
 * unless the job has 2 ranks.
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
    const long iterations = argc > 2 ? atol(argv[1]) : 0, bytes = argc > 2 ? atol(argv[2]) : 0;
    char *buf = calloc(bytes > 0 ? bytes : 1, 1);
    if (size != 2 || iterations <= 0 || bytes < 0 || !buf) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 %s ITERATIONS BYTES (ranks: %d)\n", argv[0], size);
        MPI_Finalize();
        return 1;
    }
    for (long i = 0; i < iterations; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("pingpong ranks=%d iterations=%ld bytes=%ld\n", size, iterations, bytes);
    MPI_Finalize();
    return 0;
}
