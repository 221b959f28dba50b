/* mpi_fortran_comm.c - the communicators a Fortran program makes and frees,
 * for mpi_comm.c's table (peers and roots named by world rank on every
 * communicator; mpi_fortran.c has the counted Fortran calls and says why
 * they are wrapped under the Fortran names).
 *
 * Open MPI's Fortran library makes a communicator with the PMPI function
 * itself, so the C wrappers of mpi_comm.c never see it: its sends' peers
 * were unknown. Each wrapper below calls the real Fortran function, then
 * notes the new communicator by its C handle (PMPI_Comm_f2c) unless the C
 * wrapper already did (MPICH's Fortran goes through the C name:
 * mpi_comm_notes tells), and a free forgets the handle first. Nothing is
 * counted: these calls move no data (as in C). Both `use mpi`/mpif.h names
 * (mpi_comm_split_) and Open MPI's mpi_f08 ones (mpi_comm_split_f08_, its
 * ierror OPTIONAL: a local of ours stands in when the program gave none).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include "mpi_fortran.h"

/* fn(named) calls the real fn(args), then `after` once it succeeded and the C wrapper noted nothing. */
#define F_COMM_ONE(fn, IN, OUT, named, args, after)                                                \
    F_DECL(fn, named);                                                                             \
    CEIL_IP_EXPORT void fn named                                                                   \
    {                                                                                              \
        IN const unsigned before_ = mpi_comm_notes();                                              \
        F_REAL(fn) args;                                                                           \
        if (*ierr == 0 && mpi_comm_notes() == before_) {                                           \
            after                                                                                  \
        }                                                                                          \
        OUT                                                                                        \
    }
#define F_COMM(stem, named, args, after)                                                           \
    F_COMM_ONE(stem##_, F77_IN, F77_OUT, named, args, after)                                       \
    F_COMM_ONE(stem##_f08_, F08_IN, F08_OUT, named, args, after)
/* A maker whose new communicator is at `out` (an INTEGER). */
#define F_MAKER(stem, named, args, out) F_COMM(stem, named, args, mpi_comm_note(COMM(out));)

F_MAKER(mpi_comm_split, (fint *comm, void *color, void *key, fint *newcomm, fint *ierr),
        (comm, color, key, newcomm, ierr), newcomm)
F_MAKER(mpi_comm_split_type, (fint *comm, void *type, void *key, void *info, fint *newcomm, fint *ierr),
        (comm, type, key, info, newcomm, ierr), newcomm)
F_MAKER(mpi_comm_dup, (fint *comm, fint *newcomm, fint *ierr), (comm, newcomm, ierr), newcomm)
F_MAKER(mpi_comm_dup_with_info, (fint *comm, void *info, fint *newcomm, fint *ierr), (comm, info, newcomm, ierr),
        newcomm)
F_MAKER(mpi_comm_create, (fint *comm, void *group, fint *newcomm, fint *ierr), (comm, group, newcomm, ierr), newcomm)
F_MAKER(mpi_comm_create_group, (fint *comm, void *group, void *tag, fint *newcomm, fint *ierr),
        (comm, group, tag, newcomm, ierr), newcomm)
F_MAKER(mpi_intercomm_create,
        (fint *local, void *local_leader, void *peer, void *remote_leader, void *tag, fint *newcomm, fint *ierr),
        (local, local_leader, peer, remote_leader, tag, newcomm, ierr), newcomm)
F_MAKER(mpi_intercomm_merge, (fint *inter, void *high, fint *newcomm, fint *ierr), (inter, high, newcomm, ierr),
        newcomm)
F_MAKER(mpi_cart_create,
        (fint *comm, void *ndims, void *dims, void *periods, void *reorder, fint *newcomm, fint *ierr),
        (comm, ndims, dims, periods, reorder, newcomm, ierr), newcomm)
F_MAKER(mpi_cart_sub, (fint *comm, void *remain, fint *newcomm, fint *ierr), (comm, remain, newcomm, ierr), newcomm)
F_MAKER(mpi_graph_create,
        (fint *comm, void *nnodes, void *index, void *edges, void *reorder, fint *newcomm, fint *ierr),
        (comm, nnodes, index, edges, reorder, newcomm, ierr), newcomm)
F_MAKER(mpi_dist_graph_create,
        (fint *comm, void *n, void *sources, void *degrees, void *dests, void *weights, void *info, void *reorder,
         fint *newcomm, fint *ierr),
        (comm, n, sources, degrees, dests, weights, info, reorder, newcomm, ierr), newcomm)
F_MAKER(mpi_dist_graph_create_adjacent,
        (fint *comm, void *indegree, void *sources, void *sweights, void *outdegree, void *dests, void *dweights,
         void *info, void *reorder, fint *newcomm, fint *ierr),
        (comm, indegree, sources, sweights, outdegree, dests, dweights, info, reorder, newcomm, ierr), newcomm)
/* MPI_Comm_idup: its parent's members (mpi_comm.c's note_dup) */
F_COMM(mpi_comm_idup, (fint *comm, fint *newcomm, void *request, fint *ierr), (comm, newcomm, request, ierr),
       mpi_comm_note_dup(COMM(comm), COMM(newcomm));)

/* A free: the handle forgotten first (the real call sets the program's INTEGER to MPI_COMM_NULL). */
#define F_FREE_ONE(fn, IN, OUT)                                                                    \
    F_DECL(fn, (fint *, fint *));                                                                  \
    CEIL_IP_EXPORT void fn(fint *comm, fint *ierr)                                                 \
    {                                                                                              \
        IN if (comm) mpi_comm_forget(COMM(comm));                                                  \
        F_REAL(fn)(comm, ierr);                                                                    \
        OUT                                                                                        \
    }
F_FREE_ONE(mpi_comm_free_, F77_IN, F77_OUT)
F_FREE_ONE(mpi_comm_free_f08_, F08_IN, F08_OUT)
F_FREE_ONE(mpi_comm_disconnect_, F77_IN, F77_OUT)
F_FREE_ONE(mpi_comm_disconnect_f08_, F08_IN, F08_OUT)
