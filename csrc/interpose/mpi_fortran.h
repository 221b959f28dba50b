/* mpi_fortran.h - what the Fortran wrappers share (mpi_fortran.c: the counted calls;
 * mpi_fortran_comm.c: the communicators made and freed): the real function, looked up from the
 * program's call, a communicator's C handle, and the ierror argument's two forms. */
#ifndef CEILING_MPI_FORTRAN_H
#define CEILING_MPI_FORTRAN_H
#include "mpi.h"

typedef int fint;

/* The real Fortran function, looked up from the program's call. */
#define F_REAL(fn) CEIL_REAL_FROM(fn, __builtin_return_address(0))
#define F_DECL(fn, params) CEIL_IP_REAL_DECL(void, fn, params)

#define COMM(f) mpi_f2c(MPI_F2C_COMM, *(f))

/* ierror: mpif.h's and `use mpi`'s always there (F77_IN, F77_OUT: nothing to
 * do); mpi_f08's optional (F08_IN points the parameter at a local the real
 * function fills, F08_OUT copies it to the program's when it gave one). */
#define F77_IN
#define F77_OUT
#define F08_IN                                                                                     \
    fint ierr_own_ = 0, *const ierr_caller_ = ierr;                                                \
    ierr = &ierr_own_;
#define F08_OUT                                                                                    \
    if (ierr_caller_)                                                                              \
        *ierr_caller_ = ierr_own_;

#endif
