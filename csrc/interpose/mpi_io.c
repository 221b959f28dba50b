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
 *
 * Per file: every data call and sync also counts in the file module's
 * record of the file (files.c, api 4), found from the handle: MPI_File_open
 * maps the new handle to the record of the name it was given, MPI_File_close
 * forgets it. The handle is a pointer in every ABI here (ROMIO's
 * ADIOI_FileD *, Open MPI's ompi_file_t *, the MPI 5 ABI's), read through
 * the MPI_File * the program passed. At most MPI_IO_FILES handles are open
 * at once; more are counted in the totals only.
 *
 * The trace's event of each call names the file (files.c's id, as the file
 * table does; the open's is given after the call is counted, mpi_done_later,
 * since the file's record can be found only then) and, for the data calls, the byte
 * offset where the call starts: an explicit offset's (_at forms) and the
 * individual file pointer's before the call (the others), each made bytes
 * through the view by PMPI_File_get_byte_offset (the first byte of the
 * call's first element: a view with holes moves bytes past it non-
 * contiguously); -1 where the MPI refused to say, for a file opened
 * MPI_MODE_SEQUENTIAL (PMPI_File_get_amode), and on an MPI whose constant
 * for it is not known here (the MPI 5 ABI's). Asked only while the trace is
 * on: the counting-only profile makes no extra call.
 */
#include <string.h>
#include "files.h"
#include "mpi.h"

#define MPI_IO_FILES 64

/* Open handles and their files: key = the handle (0: free), claimed with a CAS. */
static struct { uintptr_t key; uint32_t fid; } open_files[MPI_IO_FILES];

static void files_put(uintptr_t fh, uint32_t fid)
{
    /* a handle whose close went unseen (closed from Fortran) names its new file now */
    for (int i = 0; fh && i < MPI_IO_FILES; i++)
        if (__atomic_load_n(&open_files[i].key, __ATOMIC_ACQUIRE) == fh) {
            __atomic_store_n(&open_files[i].fid, fid, __ATOMIC_RELEASE);
            return;
        }
    for (int i = 0; fh && fid && i < MPI_IO_FILES; i++) {
        uintptr_t free_key = 0;
        if (__atomic_compare_exchange_n(&open_files[i].key, &free_key, fh, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            __atomic_store_n(&open_files[i].fid, fid, __ATOMIC_RELEASE);
            return;
        }
    }
}

static uint32_t files_get(uintptr_t fh)
{
    for (int i = 0; fh && i < MPI_IO_FILES; i++)
        if (__atomic_load_n(&open_files[i].key, __ATOMIC_ACQUIRE) == fh)
            return __atomic_load_n(&open_files[i].fid, __ATOMIC_ACQUIRE);
    return 0;
}

static void files_drop(uintptr_t fh)
{
    for (int i = 0; fh && i < MPI_IO_FILES; i++)
        if (__atomic_load_n(&open_files[i].key, __ATOMIC_ACQUIRE) == fh) {
            __atomic_store_n(&open_files[i].fid, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&open_files[i].key, 0, __ATOMIC_RELEASE);
        }
}

uint32_t mpi_io_opened(mpi_h fh, const char *name, size_t len, uint64_t ticks)
{
    char path[4096];
    while (len > 0 && name[len - 1] == ' ')
        len--;
    if (len >= sizeof path)
        return 0;
    memcpy(path, name, len);
    path[len] = '\0';
    const uint32_t fid = ceil_ip_file_named(path, CEIL_IP_API_MPIIO, ticks);
    files_put(fh, fid);
    return fid;
}

uint32_t mpi_io_file(mpi_h fh) { return files_get(fh); }

typedef int (*file_position_fn)(mpi_h, mpi_aint *);
typedef int (*file_byte_offset_fn)(mpi_h, mpi_aint, mpi_aint *);
typedef int (*file_amode_fn)(mpi_h, int *);
static file_position_fn get_position;
static file_byte_offset_fn get_byte_offset;
static file_amode_fn get_amode;
static int mode_sequential;          /* MPI_MODE_SEQUENTIAL: 256 in MPICH's and Open MPI's mpi.h; 0 unknown */

void mpi_io_started(const void *caller)
{
    get_position = (file_position_fn)ceil_ip_lookup("PMPI_File_get_position", caller);
    get_byte_offset = (file_byte_offset_fn)ceil_ip_lookup("PMPI_File_get_byte_offset", caller);
    get_amode = (file_amode_fn)ceil_ip_lookup("PMPI_File_get_amode", caller);
    const char *f = mpi_family();
    mode_sequential = strcmp(f, "mpich") == 0 || strcmp(f, "openmpi") == 0 ? 256 : 0;
}

static inline int tracing(void) { return __atomic_load_n(&ceil_ip_trace_on_, __ATOMIC_RELAXED); }

/* The byte of the file where offset `off` (etypes, relative to the view) lands; -1 unknown. Never
 * asked of a file opened MPI_MODE_SEQUENTIAL (nor where that cannot be told), which has no offsets:
 * the MPI would raise an error through the file's handler, which the program may have made fatal. */
static int64_t byte_at(mpi_h fh, mpi_aint off)
{
    mpi_aint b = -1;
    int amode = 0;
    if (!get_byte_offset || off < 0 || !mode_sequential || !get_amode || get_amode(fh, &amode) != 0 ||
        (amode & mode_sequential))
        return -1;
    return get_byte_offset(fh, off, &b) == 0 && b >= 0 ? b : -1;
}

/* The byte of the file the individual file pointer is at; -1 unknown (byte_at's rule first). */
static int64_t byte_here(mpi_h fh)
{
    mpi_aint off = -1;
    int amode = 0;
    if (!get_position || !mode_sequential || !get_amode || get_amode(fh, &amode) != 0 || (amode & mode_sequential))
        return -1;
    return get_position(fh, &off) == 0 ? byte_at(fh, off) : -1;
}

void mpi_io_closed(mpi_h fh) { files_drop(fh); }

PMPI_DECL(MPI_File_open, (mpi_h, const char *, int, mpi_h, void *));
MPI_EXPORT(MPI_File_open, (mpi_h comm, const char *name, int amode, mpi_h info, void *fh))
{
    mpi_counters *c = mpi_enter();
    if (!c)
        return PMPI_REAL(MPI_File_open)(comm, name, amode, info, fh);
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_File_open)(comm, name, amode, info, fh);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const uint64_t t1 = mpi_done_later(c, FN_MPI_File_open, ticks, 0, -1);
    const uint32_t fid = rc == 0 && fh ? ceil_ip_file_named(name, CEIL_IP_API_MPIIO, ticks) : 0;
    mpi_event_ended(FN_MPI_File_open, t1, ticks, 0, fid, -1);
    if (rc == 0 && fh)
        files_put(*(uintptr_t *)fh, fid);
    return rc;
}

PMPI_DECL(MPI_File_close, (void *));
MPI_EXPORT(MPI_File_close, (void *fh))
{
    const uintptr_t key = fh ? *(uintptr_t *)fh : 0;
    mpi_counters *c = mpi_enter();
    if (!c) {
        const int r = PMPI_REAL(MPI_File_close)(fh);
        files_drop(key);
        return r;
    }
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_File_close)(fh);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    mpi_ev_file(files_get(key), -1);
    mpi_done(c, FN_MPI_File_close, ticks, 0, -1);
    files_drop(key);
    return rc;
}

/* A metadata call's bytes (none), its event naming its file while the trace is on. */
#define FILE_ONLY(fh) ((tracing() ? mpi_ev_file(files_get(fh), -1) : (void)0), 0)

PMPI_DECL(MPI_File_set_view, (mpi_h, mpi_aint, mpi_h, mpi_h, const char *, mpi_h));
MPI_WRAP(MPI_File_set_view, -1,
         (mpi_h fh, mpi_aint disp, mpi_h etype, mpi_h ftype, const char *rep, mpi_h info),
         (fh, disp, etype, ftype, rep, info), FILE_ONLY(fh))

PMPI_DECL(MPI_File_set_size, (mpi_h, mpi_aint));
MPI_WRAP(MPI_File_set_size, -1, (mpi_h fh, mpi_aint size), (fh, size), FILE_ONLY(fh))

PMPI_DECL(MPI_File_seek, (mpi_h, mpi_aint, int));
MPI_WRAP(MPI_File_seek, -1, (mpi_h fh, mpi_aint off, int whence), (fh, off, whence), FILE_ONLY(fh))

PMPI_DECL(MPI_File_sync, (mpi_h));
MPI_EXPORT(MPI_File_sync, (mpi_h fh))
{
    mpi_counters *c = mpi_enter();
    if (!c)
        return PMPI_REAL(MPI_File_sync)(fh);
    const uint64_t t0 = ceil_ip_ticks();
    const int rc = PMPI_REAL(MPI_File_sync)(fh);
    const uint64_t ticks = ceil_ip_ticks() - t0;
    const uint32_t fid = files_get(fh);
    mpi_ev_file(fid, -1);
    mpi_done(c, FN_MPI_File_sync, ticks, 0, -1);
    if (rc == 0)
        ceil_ip_file_sync_id(fid, ticks);
    return rc;
}

/* Blocking reads: the bytes from the status (ours when the caller ignores it); `where`: the byte
 * offset the call starts at (byte_here or byte_at), asked before the call while tracing. */
#define READ_BODY(fn, args, where)                                                                 \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn) args;                                                           \
        _Alignas(16) char own[MPI_STATUS_BYTES];                                                   \
        status = mpi_status(status, own);                                                          \
        const int64_t at = tracing() ? (where) : -1;                                               \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn) args;                                                       \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        const uint64_t bytes = rc == 0 ? mpi_status_bytes(status, type) : 0;                       \
        const uint32_t fid = files_get(fh);                                                        \
        mpi_ev_file(fid, at);                                                                      \
        mpi_done(c, FN_##fn, ticks, bytes, MH_IO);                                                 \
        if (rc == 0)                                                                               \
            ceil_ip_file_io_id(fid, 0, bytes, ticks, CEIL_IP_API_MPIIO);                           \
        return rc;                                                                                 \
    }

/* read, read_all: (fh, buf, count, type, status); the _at forms add an offset. */
#define READ(fn, cnt)                                                                              \
    PMPI_DECL(fn, (mpi_h, void *, cnt, mpi_h, void *));                                            \
    MPI_EXPORT(fn, (mpi_h fh, void *buf, cnt count, mpi_h type, void *status))                     \
        READ_BODY(fn, (fh, buf, count, type, status), byte_here(fh))
#define READ_AT(fn, cnt)                                                                           \
    PMPI_DECL(fn, (mpi_h, mpi_aint, void *, cnt, mpi_h, void *));                                  \
    MPI_EXPORT(fn, (mpi_h fh, mpi_aint off, void *buf, cnt count, mpi_h type, void *status))       \
        READ_BODY(fn, (fh, off, buf, count, type, status), byte_at(fh, off))
READ(MPI_File_read, int)
READ(MPI_File_read_c, mpi_count)
READ(MPI_File_read_all, int)
READ(MPI_File_read_all_c, mpi_count)
READ_AT(MPI_File_read_at, int)
READ_AT(MPI_File_read_at_c, mpi_count)
READ_AT(MPI_File_read_at_all, int)
READ_AT(MPI_File_read_at_all_c, mpi_count)

/* Writes, and the non-blocking reads (hist -1, a request where the status was): the bytes asked,
 * in the file's record too (write: 1 for the writes). */
#define ASKED_BODY(fn, hist, write, args, where)                                                   \
    {                                                                                              \
        if (MPI_COUNT_REFUSED(fn, MPI_FITS(count)))                                                \
            return MPI_ERR_COUNT_;                                                                 \
        mpi_counters *c = mpi_enter();                                                             \
        if (!c)                                                                                    \
            return PMPI_REAL_S(fn) args;                                                           \
        const int64_t at = tracing() ? (where) : -1;                                               \
        const uint64_t t0 = ceil_ip_ticks();                                                       \
        const int rc = PMPI_REAL_S(fn) args;                                                       \
        const uint64_t ticks = ceil_ip_ticks() - t0;                                               \
        const uint64_t bytes = mpi_bytes(count, type);                                             \
        const uint32_t fid = files_get(fh);                                                        \
        mpi_ev_file(fid, at);                                                                      \
        mpi_done(c, FN_##fn, ticks, bytes, (hist));                                                \
        if (rc == 0)                                                                               \
            ceil_ip_file_io_id(fid, (write), bytes, ticks, CEIL_IP_API_MPIIO);                     \
        return rc;                                                                                 \
    }
#define ASKED(fn, hist, write, bufq, cnt)                                                          \
    PMPI_DECL(fn, (mpi_h, bufq void *, cnt, mpi_h, void *));                                       \
    MPI_EXPORT(fn, (mpi_h fh, bufq void *buf, cnt count, mpi_h type, void *st))                    \
        ASKED_BODY(fn, hist, write, (fh, buf, count, type, st), byte_here(fh))
#define ASKED_AT(fn, hist, write, bufq, cnt)                                                       \
    PMPI_DECL(fn, (mpi_h, mpi_aint, bufq void *, cnt, mpi_h, void *));                             \
    MPI_EXPORT(fn, (mpi_h fh, mpi_aint off, bufq void *buf, cnt count, mpi_h type, void *st))      \
        ASKED_BODY(fn, hist, write, (fh, off, buf, count, type, st), byte_at(fh, off))
ASKED(MPI_File_write, MH_IO, 1, const, int)
ASKED(MPI_File_write_c, MH_IO, 1, const, mpi_count)
ASKED(MPI_File_write_all, MH_IO, 1, const, int)
ASKED(MPI_File_write_all_c, MH_IO, 1, const, mpi_count)
ASKED_AT(MPI_File_write_at, MH_IO, 1, const, int)
ASKED_AT(MPI_File_write_at_c, MH_IO, 1, const, mpi_count)
ASKED_AT(MPI_File_write_at_all, MH_IO, 1, const, int)
ASKED_AT(MPI_File_write_at_all_c, MH_IO, 1, const, mpi_count)
ASKED(MPI_File_iwrite, -1, 1, const, int)
ASKED(MPI_File_iwrite_c, -1, 1, const, mpi_count)
ASKED_AT(MPI_File_iwrite_at, -1, 1, const, int)
ASKED_AT(MPI_File_iwrite_at_c, -1, 1, const, mpi_count)
ASKED(MPI_File_iread, -1, 0, , int)
ASKED(MPI_File_iread_c, -1, 0, , mpi_count)
ASKED_AT(MPI_File_iread_at, -1, 0, , int)
ASKED_AT(MPI_File_iread_at_c, -1, 0, , mpi_count)
