/* mpi_trace.h - the trace's event files to rank 0 at MPI_Finalize
 * (mpi_trace.c), for `mpirun -n N ceiling trace -- ./app`; trace.c gives
 * the directory. Internal to libceiling_interpose.so. */
#ifndef CEIL_MPI_TRACE_H
#define CEIL_MPI_TRACE_H

#include "mpi.h"

/* trace.c: the event files' directory while tracing is on, else NULL. */
const char *ceil_ip_trace_dir_(void) __attribute__((visibility("hidden")));

/* Every rank's event and region files to world rank 0's directory; called
 * by every rank alike (mpi_gather.c, once the ranks have agreed). */
void mpi_trace_gather(mpi_h world, mpi_h byte, int rank, int size, void *arg) __attribute__((visibility("hidden")));

#endif
