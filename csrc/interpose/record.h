/* record.h - the record's text, between the runtime (interpose.c), which
 * writes the process and module lines, and record.c, which formats values,
 * cuts lines that do not fit and appends the text to the record's file.
 * Internal to libceiling_interpose.so; the format is in interpose.h.
 */
#ifndef CEIL_RECORD_H
#define CEIL_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include "interpose.h"

struct ceil_ip_out {
    char *buf;
    size_t len, cap;
    size_t line_start;   /* where the open line began: a line that does not fit is dropped whole */
    int in_line;
    int truncated;
    /* Streamed (ceil_ip_out_open_): the finished lines in buf go to the file
     * whenever buf fills, so buf is a small chunk, not the whole record;
     * `limit` bounds the whole record as cap does an unstreamed one. */
    int sink;            /* 1 + the record file's descriptor; 0: not streamed */
    int raised;          /* the soft descriptor limit was raised to open it (`was`) */
    size_t flushed, limit;
    struct rlimit was;
};

#define CEIL_IP_HIDDEN __attribute__((visibility("hidden")))

/* Start a line with `word` (ending the open one), end the open line, and
 * append a decimal number to it. */
void ceil_ip_out_begin_(ceil_ip_out *o, const char *word) CEIL_IP_HIDDEN;
void ceil_ip_out_end_(ceil_ip_out *o) CEIL_IP_HIDDEN;
void ceil_ip_out_dec_(ceil_ip_out *o, uint64_t v) CEIL_IP_HIDDEN;

/* pattern with "%p" -> pid and "%%" -> "%" into dst; 0, or -1 when too long. */
int ceil_ip_expand_path_(char *dst, size_t cap, const char *pattern, pid_t pid) CEIL_IP_HIDDEN;

/* Resolve the real open, write and close the record is written with, at
 * load: a record written from a fatal signal's handler must call no dlsym. */
void ceil_ip_record_resolve_(void) CEIL_IP_HIDDEN;

/* Append text to the file at path (created 0600) with one write on
 * O_APPEND, through the real functions; 0, or -1 (said on stderr). Never
 * through a link, into a FIFO, a file of another user's or one with a second
 * name, nor in a directory others can swap entries in (record.c). */
int ceil_ip_append_file_(const char *path, const char *text, size_t len) CEIL_IP_HIDDEN;

/* A streamed record: the file at path opened as ceil_ip_append_file_ opens
 * it, o set to render into buf (cap bytes) and write each time it fills,
 * the whole record kept under limit; 0, or -1 (said on stderr, o unusable).
 * Then render, and ceil_ip_out_close_ writes what is left and closes (0 or
 * -1). Several writes: only for a file no other process appends to (a
 * pattern with %p), where the record's pages resident at exit are then
 * one chunk's, not the whole record's. */
int ceil_ip_out_open_(ceil_ip_out *o, const char *path, char *buf, size_t cap, size_t limit) CEIL_IP_HIDDEN;
int ceil_ip_out_close_(ceil_ip_out *o) CEIL_IP_HIDDEN;

#endif /* CEIL_RECORD_H */
