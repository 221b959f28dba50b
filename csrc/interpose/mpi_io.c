/* mpi_io.c - the MPI module's MPI-IO calls (mpi.c has the module and its
 * record; mpi.h why one build serves every MPI).
 *
 * Classes: io_meta (open, close, set_view, set_size, seek), io_read,
 * io_write, io_sync. Bytes: a blocking read's as read (MPI_Get_count of
 * its status), a write's and a non-blocking read's as asked (count times
 * the datatype's size). The POSIX calls the MPI-IO layer makes underneath
 * (ROMIO's pread, pwrite, open) are inside these calls and counted here,
 * not by the posix module (interpose.h, nesting); the non-blocking forms
 * count their posting only, the transfer is in the wait that completes it.
 */
#include "mpi.h"

PMPI_DECL(MPI_File_open, (mpi_h, const char *, int, mpi_h, void *));
MPI_WRAP(MPI_File_open, -1, (mpi_h comm, const char *name, int amode, mpi_h info, void *fh),
         (comm, name, amode, info, fh), 0)

PMPI_DECL(MPI_File_close, (void *));
MPI_WRAP(MPI_File_close, -1, (void *fh), (fh), 0)

PMPI_DECL(MPI_File_set_view, (mpi_h, mpi_aint, mpi_h, mpi_h, const char *, mpi_h));
MPI_WRAP(MPI_File_set_view, -1,
         (mpi_h fh, mpi_aint disp, mpi_h etype, mpi_h ftype, const char *rep, mpi_h info),
         (fh, disp, etype, ftype, rep, info), 0)

PMPI_DECL(MPI_File_set_size, (mpi_h, mpi_aint));
MPI_WRAP(MPI_File_set_size, -1, (mpi_h fh, mpi_aint size), (fh, size), 0)

PMPI_DECL(MPI_File_seek, (mpi_h, mpi_aint, int));
MPI_WRAP(MPI_File_seek, -1, (mpi_h fh, mpi_aint off, int whence), (fh, off, whence), 0)

PMPI_DECL(MPI_File_sync, (mpi_h));
MPI_WRAP(MPI_File_sync, -1, (mpi_h fh), (fh), 0)

/* Blocking reads: the bytes from the status (ours when the caller ignores it). */
#define READ_BODY(fn, args)                                                                        \
    {                                                                                              \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL(fn) args;                                                             \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        status = mpi_status(status, own);                                                          \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL(fn) args;                                                         \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        mpi_done(c, FN_##fn, ticks, rc == 0 ? mpi_status_bytes(status, type) : 0, MH_IO);          \
        return rc;                                                                                 \
    }

/* read, read_all: (fh, buf, count, type, status); the _at forms add an offset. */
#define READ(fn, cnt)                                                                              \
    PMPI_DECL(fn, (mpi_h, void *, cnt, mpi_h, void *));                                            \
    CEIL_IP_EXPORT int fn(mpi_h fh, void *buf, cnt count, mpi_h type, void *status)                \
        READ_BODY(fn, (fh, buf, count, type, status))
#define READ_AT(fn, cnt)                                                                           \
    PMPI_DECL(fn, (mpi_h, mpi_aint, void *, cnt, mpi_h, void *));                                  \
    CEIL_IP_EXPORT int fn(mpi_h fh, mpi_aint off, void *buf, cnt count, mpi_h type, void *status)  \
        READ_BODY(fn, (fh, off, buf, count, type, status))
READ(MPI_File_read, int)
READ(MPI_File_read_c, mpi_count)
READ(MPI_File_read_all, int)
READ(MPI_File_read_all_c, mpi_count)
READ_AT(MPI_File_read_at, int)
READ_AT(MPI_File_read_at_c, mpi_count)
READ_AT(MPI_File_read_at_all, int)
READ_AT(MPI_File_read_at_all_c, mpi_count)

/* Writes, and the non-blocking reads (hist -1, a request where the status was): the bytes asked. */
#define ASKED(fn, hist, bufq, cnt)                                                                 \
    PMPI_DECL(fn, (mpi_h, bufq void *, cnt, mpi_h, void *));                                       \
    MPI_WRAP(fn, hist, (mpi_h fh, bufq void *buf, cnt count, mpi_h type, void *st),                \
             (fh, buf, count, type, st), mpi_bytes(count, type))
#define ASKED_AT(fn, hist, bufq, cnt)                                                              \
    PMPI_DECL(fn, (mpi_h, mpi_aint, bufq void *, cnt, mpi_h, void *));                             \
    MPI_WRAP(fn, hist, (mpi_h fh, mpi_aint off, bufq void *buf, cnt count, mpi_h type, void *st),  \
             (fh, off, buf, count, type, st), mpi_bytes(count, type))
ASKED(MPI_File_write, MH_IO, const, int)
ASKED(MPI_File_write_c, MH_IO, const, mpi_count)
ASKED(MPI_File_write_all, MH_IO, const, int)
ASKED(MPI_File_write_all_c, MH_IO, const, mpi_count)
ASKED_AT(MPI_File_write_at, MH_IO, const, int)
ASKED_AT(MPI_File_write_at_c, MH_IO, const, mpi_count)
ASKED_AT(MPI_File_write_at_all, MH_IO, const, int)
ASKED_AT(MPI_File_write_at_all_c, MH_IO, const, mpi_count)
ASKED(MPI_File_iwrite, -1, const, int)
ASKED(MPI_File_iwrite_c, -1, const, mpi_count)
ASKED_AT(MPI_File_iwrite_at, -1, const, int)
ASKED_AT(MPI_File_iwrite_at_c, -1, const, mpi_count)
ASKED(MPI_File_iread, -1, , int)
ASKED(MPI_File_iread_c, -1, , mpi_count)
ASKED_AT(MPI_File_iread_at, -1, , int)
ASKED_AT(MPI_File_iread_at_c, -1, , mpi_count)
