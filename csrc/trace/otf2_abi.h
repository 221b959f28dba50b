/*
 * otf2_abi.h - the part of OTF2's C API (libotf2, 3.x) that the OTF2 writer calls (otf2.c),
 * declared here because the library is found at run time, not at build time: the `otf2` wheel
 * bundles it without headers (_otf2/_otf2*.so, a plain C library), Debian ships it as
 * libopen-trace-format2.so.10, a site as libotf2.so. So the core builds with no OTF2 installed,
 * and `ceiling trace --format otf2` says what is missing when no library is found.
 *
 * Types and values are OTF2 3.x's (OTF2_GeneralDefinitions.h, OTF2_Definitions.h,
 * OTF2_Events.h, OTF2_Archive.h ...): refs are uint32_t (locations uint64_t), enums uint8_t or
 * uint32_t as OTF2 typedefs them; the opaque structs keep OTF2's tags, so that
 * tests/test_trace_otf2.py can compile O2_FUNCS and O2_CONSTS against the real headers
 * (Debian's libotf2-trace-dev) and fail on any difference. 3.0 changed signatures
 * (WriteLocationGroup, WriteComm, WriteClockProperties): otf2.c refuses a library without
 * OTF2_GlobalDefWriter_WriteInterComm, new in 3.0.
 */
#ifndef CEILING_OTF2_ABI_H
#define CEILING_OTF2_ABI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct OTF2_Archive_struct o2_archive;
typedef struct OTF2_EvtWriter_struct o2_evt_writer;
typedef struct OTF2_GlobalDefWriter_struct o2_def_writer;
typedef struct OTF2_DefWriter_struct o2_local_def_writer;
typedef struct OTF2_AttributeList_struct o2_attrs;
typedef union OTF2_AttributeValue_union o2_attr_value;           /* only passed as NULL */
typedef int o2_err;                 /* OTF2_ErrorCode: OTF2_SUCCESS is 0 */
typedef uint8_t (*o2_pre_flush)(void *user, uint8_t file_type, uint64_t location, void *caller, bool final);
typedef uint64_t (*o2_post_flush)(void *user, uint8_t file_type, uint64_t location);
typedef void *(*o2_allocate)(void *user, uint8_t file_type, uint64_t location, void **per_buffer, uint64_t chunk_size);
typedef void (*o2_free_all)(void *user, uint8_t file_type, uint64_t location, void **per_buffer, bool final);
#ifdef O2_CHECK_AGAINST_OTF2     /* the ABI test: OTF2's own definitions of these, whose layout it checks */
typedef OTF2_MetricValue o2_metric_value;
typedef OTF2_FlushCallbacks o2_flush_callbacks;
typedef OTF2_MemoryCallbacks o2_memory_callbacks;
#else
typedef union OTF2_MetricValue_union {
    int64_t signed_int;
    uint64_t unsigned_int;
    double floating_point;
} o2_metric_value;
typedef struct OTF2_FlushCallbacks {
    o2_pre_flush pre_flush;
    o2_post_flush post_flush;
} o2_flush_callbacks;
typedef struct OTF2_MemoryCallbacks {
    o2_allocate allocate;
    o2_free_all free_all;
} o2_memory_callbacks;
#endif
typedef o2_err (*o2_error_callback)(void *user, const char *file, uint64_t line, const char *function, o2_err code,
                                    const char *fmt, va_list va);

/* X(return type, name, (parameters)): every function otf2.c resolves with dlsym. */
#define O2_FUNCS(X)                                                                                                \
    X(o2_archive *, OTF2_Archive_Open, (const char *, const char *, uint8_t, uint64_t, uint64_t, uint8_t, uint8_t)) \
    X(o2_err, OTF2_Archive_Close, (o2_archive *))                                                                  \
    X(o2_err, OTF2_Archive_SetFlushCallbacks, (o2_archive *, const o2_flush_callbacks *, void *))                  \
    X(o2_err, OTF2_Archive_SetMemoryCallbacks, (o2_archive *, const o2_memory_callbacks *, void *))                \
    X(o2_err, OTF2_Archive_SetSerialCollectiveCallbacks, (o2_archive *))                                           \
    X(o2_err, OTF2_Archive_SetCreator, (o2_archive *, const char *))                                               \
    X(o2_err, OTF2_Archive_SetDescription, (o2_archive *, const char *))                                           \
    X(o2_err, OTF2_Archive_SetMachineName, (o2_archive *, const char *))                                           \
    X(o2_err, OTF2_Archive_OpenEvtFiles, (o2_archive *))                                                           \
    X(o2_err, OTF2_Archive_CloseEvtFiles, (o2_archive *))                                                          \
    X(o2_evt_writer *, OTF2_Archive_GetEvtWriter, (o2_archive *, uint64_t))                                        \
    X(o2_err, OTF2_Archive_CloseEvtWriter, (o2_archive *, o2_evt_writer *))                                        \
    X(o2_err, OTF2_Archive_OpenDefFiles, (o2_archive *))                                                           \
    X(o2_err, OTF2_Archive_CloseDefFiles, (o2_archive *))                                                          \
    X(o2_local_def_writer *, OTF2_Archive_GetDefWriter, (o2_archive *, uint64_t))                                  \
    X(o2_err, OTF2_Archive_CloseDefWriter, (o2_archive *, o2_local_def_writer *))                                  \
    X(o2_def_writer *, OTF2_Archive_GetGlobalDefWriter, (o2_archive *))                                            \
    X(o2_err, OTF2_Archive_CloseGlobalDefWriter, (o2_archive *, o2_def_writer *))                                  \
    X(const char *, OTF2_Error_GetName, (o2_err))                                                                  \
    X(const char *, OTF2_Error_GetDescription, (o2_err))                                                           \
    X(o2_error_callback, OTF2_Error_RegisterCallback, (o2_error_callback, void *))                                 \
    X(o2_err, OTF2_EvtWriter_GetNumberOfEvents, (o2_evt_writer *, uint64_t *))                                     \
    X(o2_err, OTF2_EvtWriter_Enter, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t))                             \
    X(o2_err, OTF2_EvtWriter_Leave, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t))                             \
    X(o2_err, OTF2_EvtWriter_MpiSend, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t, uint32_t, uint32_t,         \
                                       uint64_t))                                                                  \
    X(o2_err, OTF2_EvtWriter_MpiRecv, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t, uint32_t, uint32_t,         \
                                       uint64_t))                                                                  \
    X(o2_err, OTF2_EvtWriter_MpiCollectiveBegin, (o2_evt_writer *, o2_attrs *, uint64_t))                          \
    X(o2_err, OTF2_EvtWriter_MpiCollectiveEnd, (o2_evt_writer *, o2_attrs *, uint64_t, uint8_t, uint32_t,           \
                                                uint32_t, uint64_t, uint64_t))                                     \
    X(o2_err, OTF2_EvtWriter_IoOperationBegin, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t, uint8_t,           \
                                                uint32_t, uint64_t, uint64_t))                                     \
    X(o2_err, OTF2_EvtWriter_IoOperationComplete, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t, uint64_t,       \
                                                   uint64_t))                                                      \
    X(o2_err, OTF2_EvtWriter_Metric, (o2_evt_writer *, o2_attrs *, uint64_t, uint32_t, uint8_t, const uint8_t *,    \
                                      const o2_metric_value *))                                                    \
    X(o2_err, OTF2_GlobalDefWriter_WriteClockProperties, (o2_def_writer *, uint64_t, uint64_t, uint64_t, uint64_t)) \
    X(o2_err, OTF2_GlobalDefWriter_WriteParadigm, (o2_def_writer *, uint8_t, uint32_t, uint8_t))                   \
    X(o2_err, OTF2_GlobalDefWriter_WriteString, (o2_def_writer *, uint32_t, const char *))                         \
    X(o2_err, OTF2_GlobalDefWriter_WriteSystemTreeNode, (o2_def_writer *, uint32_t, uint32_t, uint32_t, uint32_t)) \
    X(o2_err, OTF2_GlobalDefWriter_WriteLocationGroup, (o2_def_writer *, uint32_t, uint32_t, uint8_t, uint32_t,    \
                                                        uint32_t))                                                 \
    X(o2_err, OTF2_GlobalDefWriter_WriteLocation, (o2_def_writer *, uint64_t, uint32_t, uint8_t, uint64_t,         \
                                                   uint32_t))                                                      \
    X(o2_err, OTF2_GlobalDefWriter_WriteRegion, (o2_def_writer *, uint32_t, uint32_t, uint32_t, uint32_t, uint8_t, \
                                                 uint8_t, uint32_t, uint32_t, uint32_t, uint32_t))                 \
    X(o2_err, OTF2_GlobalDefWriter_WriteGroup, (o2_def_writer *, uint32_t, uint32_t, uint8_t, uint8_t, uint32_t,   \
                                                uint32_t, const uint64_t *))                                       \
    X(o2_err, OTF2_GlobalDefWriter_WriteComm, (o2_def_writer *, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t)) \
    X(o2_err, OTF2_GlobalDefWriter_WriteInterComm, (o2_def_writer *, uint32_t, uint32_t, uint32_t, uint32_t,       \
                                                    uint32_t, uint32_t))                                           \
    X(o2_err, OTF2_GlobalDefWriter_WriteIoParadigm, (o2_def_writer *, uint8_t, uint32_t, uint32_t, uint8_t,        \
                                                     uint32_t, uint8_t, const uint8_t *, const uint8_t *,          \
                                                     const o2_attr_value *))                                                \
    X(o2_err, OTF2_GlobalDefWriter_WriteIoRegularFile, (o2_def_writer *, uint32_t, uint32_t, uint32_t))            \
    X(o2_err, OTF2_GlobalDefWriter_WriteIoHandle, (o2_def_writer *, uint32_t, uint32_t, uint32_t, uint8_t,         \
                                                   uint32_t, uint32_t, uint32_t))                                  \
    X(o2_err, OTF2_GlobalDefWriter_WriteMetricMember, (o2_def_writer *, uint32_t, uint32_t, uint32_t, uint8_t,     \
                                                       uint8_t, uint8_t, uint8_t, int64_t, uint32_t))              \
    X(o2_err, OTF2_GlobalDefWriter_WriteMetricClass, (o2_def_writer *, uint32_t, uint8_t, const uint32_t *,        \
                                                      uint8_t, uint8_t))                                           \
    X(o2_err, OTF2_GlobalDefWriter_WriteMetricInstance, (o2_def_writer *, uint32_t, uint32_t, uint64_t, uint8_t,   \
                                                         uint64_t))

/* X(name, value): OTF2's constants, named here O2_<name> (OTF2_<name> in OTF2's headers). */
#define O2_CONSTS(X)                                                                                               \
    X(SUCCESS, 0) X(FILEMODE_WRITE, 0) X(SUBSTRATE_POSIX, 1) X(COMPRESSION_NONE, 1) X(FLUSH, 1)                    \
    X(PARADIGM_UNKNOWN, 0) X(PARADIGM_USER, 1) X(PARADIGM_MPI, 4) X(PARADIGM_MEASUREMENT_SYSTEM, 6)                \
    X(PARADIGM_CLASS_PROCESS, 0)                                                                                   \
    X(LOCATION_GROUP_TYPE_PROCESS, 1) X(LOCATION_TYPE_CPU_THREAD, 1) X(LOCATION_TYPE_METRIC, 3)                    \
    X(REGION_ROLE_FUNCTION, 1) X(REGION_ROLE_BARRIER, 15) X(REGION_ROLE_COLL_ONE2ALL, 23)                          \
    X(REGION_ROLE_COLL_ALL2ONE, 24) X(REGION_ROLE_COLL_ALL2ALL, 25) X(REGION_ROLE_COLL_OTHER, 26)                  \
    X(REGION_ROLE_FILE_IO, 27) X(REGION_ROLE_POINT2POINT, 28) X(REGION_ROLE_RMA, 29)                               \
    X(REGION_ROLE_FILE_IO_METADATA, 38) X(REGION_FLAG_NONE, 0)                                                     \
    X(GROUP_TYPE_COMM_LOCATIONS, 4) X(GROUP_TYPE_COMM_GROUP, 5) X(GROUP_FLAG_NONE, 0) X(COMM_FLAG_NONE, 0)         \
    X(IO_PARADIGM_CLASS_SERIAL, 0) X(IO_PARADIGM_CLASS_PARALLEL, 1) X(IO_PARADIGM_FLAG_NONE, 0)                    \
    X(IO_PARADIGM_FLAG_OS, 1) X(IO_HANDLE_FLAG_NONE, 0)                                                            \
    X(IO_OPERATION_MODE_READ, 0) X(IO_OPERATION_MODE_WRITE, 1) X(IO_OPERATION_MODE_FLUSH, 2)                       \
    X(IO_OPERATION_FLAG_NONE, 0)                                                                                   \
    X(METRIC_TYPE_OTHER, 0) X(METRIC_ABSOLUTE_POINT, 17) X(TYPE_DOUBLE, 10) X(BASE_DECIMAL, 1)                     \
    X(METRIC_ASYNCHRONOUS, 2) X(RECORDER_KIND_ABSTRACT, 1) X(SCOPE_LOCATION_GROUP, 1)                              \
    X(SCOPE_SYSTEM_TREE_NODE, 2)                                                                                   \
    X(COLLECTIVE_OP_BARRIER, 0) X(COLLECTIVE_OP_BCAST, 1) X(COLLECTIVE_OP_GATHER, 2) X(COLLECTIVE_OP_GATHERV, 3)   \
    X(COLLECTIVE_OP_SCATTER, 4) X(COLLECTIVE_OP_SCATTERV, 5) X(COLLECTIVE_OP_ALLGATHER, 6)                         \
    X(COLLECTIVE_OP_ALLGATHERV, 7) X(COLLECTIVE_OP_ALLTOALL, 8) X(COLLECTIVE_OP_ALLTOALLV, 9)                      \
    X(COLLECTIVE_OP_ALLTOALLW, 10) X(COLLECTIVE_OP_ALLREDUCE, 11) X(COLLECTIVE_OP_REDUCE, 12)                      \
    X(COLLECTIVE_OP_REDUCE_SCATTER, 13) X(COLLECTIVE_OP_SCAN, 14) X(COLLECTIVE_OP_EXSCAN, 15)                      \
    X(COLLECTIVE_OP_REDUCE_SCATTER_BLOCK, 16)

#define O2_CONST_(name, value) O2_##name = value,
enum { O2_CONSTS(O2_CONST_) };
#undef O2_CONST_
/* OTF2_UNDEFINED_*: "none" in a field of its width */
#define O2_UNDEFINED_UINT8 ((uint8_t)0xFFu)
#define O2_UNDEFINED_UINT32 ((uint32_t)0xFFFFFFFFu)
#define O2_UNDEFINED_UINT64 ((uint64_t)0xFFFFFFFFFFFFFFFFull)

#endif
