/* record.c - the record's text: values formatted and escaped as the
 * format says (interpose.h), lines that do not fit dropped whole, and the
 * text appended to its file. Async-signal-safe, as the flush that calls it:
 * no stdio, no allocation, only memcpy and the real open, write and close,
 * with stat and fstat as raw system calls (the wrapped ones would count).
 *
 * The record may be written as root into a directory another user can reach,
 * so nothing there is trusted: the directory must be this user's or root's and
 * writable by no one else unless sticky (/tmp), the file is opened without
 * following a link (O_NOFOLLOW) nor waiting on a FIFO (O_NONBLOCK), and written
 * only when it is a regular file of this user's with one name (a hard link to
 * another file has two). ceiling's own directory is 0700 and its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "record.h"

CEIL_IP_REAL_DECL(int, open, (const char *, int, ...));
CEIL_IP_REAL_DECL(ssize_t, write, (int, const void *, size_t));
CEIL_IP_REAL_DECL(int, close, (int));


static int write_all(int fd, const char *text, size_t len);

/* A streamed record's finished lines to its file, the open line moved to
 * the front of the chunk; 0, or -1 when the write failed (then nothing more
 * is written, as when the record is full). */
static int drain(ceil_ip_out *o)
{
    if (o->line_start == 0)
        return 0;
    if (write_all(o->sink - 1, o->buf, o->line_start) != 0)
        return -1;
    memmove(o->buf, o->buf + o->line_start, o->len - o->line_start);
    o->flushed += o->line_start;
    o->len -= o->line_start;
    o->line_start = 0;
    return 0;
}

static void put(ceil_ip_out *o, const char *s, size_t n)
{
    if (o->truncated)
        return;
    if (o->sink && (o->flushed + o->len + n > o->limit || (n > o->cap - o->len && drain(o) != 0))) {
        o->len = o->line_start;
        o->in_line = 0;
        o->truncated = 1;
        return;
    }
    if (n > o->cap - o->len) {
        o->len = o->line_start;
        o->in_line = 0;
        o->truncated = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void puts_(ceil_ip_out *o, const char *s) { put(o, s, strlen(s)); }

void ceil_ip_out_dec_(ceil_ip_out *o, uint64_t v)
{
    char b[24];
    int i = (int)sizeof b;
    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(o, b + i, sizeof b - (size_t)i);
}

void ceil_ip_out_end_(ceil_ip_out *o)
{
    if (o->in_line) {
        put(o, "\n", 1);
        o->in_line = 0;
    }
    o->line_start = o->len;
}

void ceil_ip_out_begin_(ceil_ip_out *o, const char *word)
{
    ceil_ip_out_end_(o);
    if (o->truncated)
        return;
    o->in_line = 1;
    puts_(o, word);
}

static void put_key(ceil_ip_out *o, const char *key)
{
    put(o, " ", 1);
    puts_(o, key);
    put(o, "=", 1);
}

void ceil_ip_line(ceil_ip_out *o, const ceil_ip_module *m) { ceil_ip_out_begin_(o, m->name); }

void ceil_ip_put_u64(ceil_ip_out *o, const char *key, uint64_t v)
{
    put_key(o, key);
    ceil_ip_out_dec_(o, v);
}

void ceil_ip_put_i64(ceil_ip_out *o, const char *key, int64_t v)
{
    put_key(o, key);
    if (v < 0) {
        put(o, "-", 1);
        ceil_ip_out_dec_(o, (uint64_t)0 - (uint64_t)v);
    } else {
        ceil_ip_out_dec_(o, (uint64_t)v);
    }
}

void ceil_ip_put_fn_calls(ceil_ip_out *o, const ceil_ip_module *m, const char *const *names, const uint64_t *calls,
                          int n)
{
    for (int f = 0; f < n; f++) {
        if (calls[f] == 0)
            continue;
        ceil_ip_line(o, m);
        CEIL_IP_PUT_STR(o, fn, names[f]);
        CEIL_IP_PUT_U64(o, calls, calls[f]);
    }
}

void ceil_ip_put_str(ceil_ip_out *o, const char *key, const char *v)
{
    static const char hex[] = "0123456789ABCDEF";
    put_key(o, key);
    for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
        if (*c < '!' || *c > '~' || *c == '%' || *c == '=') {
            char e[3] = {'%', hex[*c >> 4], hex[*c & 15]};
            put(o, e, 3);
        } else {
            put(o, (const char *)c, 1);
        }
    }
}

int ceil_ip_expand_path_(char *dst, size_t cap, const char *pattern, pid_t pid)
{
    ceil_ip_out o = {.buf = dst, .cap = cap - 1};
    for (const char *s = pattern; *s; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            ceil_ip_out_dec_(&o, (uint64_t)pid);
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            put(&o, "%", 1);
            s++;
        } else {
            put(&o, s, 1);
        }
    }
    if (o.truncated)
        return -1;
    dst[o.len] = '\0';
    return 0;
}

void ceil_ip_record_resolve_(void)
{
    (void)CEIL_REAL(open);
    (void)CEIL_REAL(write);
    (void)CEIL_REAL(close);
}

/* The directory part of path ("." or "/" where it has none), into dir. */
static void directory_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (slash == NULL) {
        dir[0] = '.';
        n = 1;
    } else {
        if (n >= cap)
            n = cap - 1;
        memcpy(dir, path, n);
    }
    dir[n] = '\0';
}

/* Whether someone other than this user (or root) could swap entries in the
 * directory of path: its owner, or anyone who can write in it without the
 * sticky bit. A directory that cannot be read is left to the open to refuse. */
static int directory_unsafe(const char *path)
{
    char dir[PATH_MAX];
    struct stat st;
    directory_of(path, dir, sizeof dir);
    if (syscall(SYS_newfstatat, AT_FDCWD, dir, &st, 0) != 0)
        return 0;
    const uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0)
        return 1;
    return (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX);
}

/* The record file at path, for appending (o's sink and raised set); 0 or -1. */
static int open_record(const char *path, ceil_ip_out *o)
{
    if (directory_unsafe(path)) {
        ceil_ip_say("not writing the record: others can replace files in the directory of ", path);
        return -1;
    }
    const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    int fd = CEIL_REAL(open)(path, flags, 0600);
    /* Out of descriptors (a program that used them all, or leaks them): the
     * soft limit is raised to the hard one for this write, and put back. */
    o->raised = 0;
    if (fd < 0 && errno == EMFILE && getrlimit(RLIMIT_NOFILE, &o->was) == 0 && o->was.rlim_cur < o->was.rlim_max) {
        struct rlimit more = {o->was.rlim_max, o->was.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &more) == 0) {
            o->raised = 1;
            fd = CEIL_REAL(open)(path, flags, 0600);
            if (fd < 0) {
                const int e = errno;
                setrlimit(RLIMIT_NOFILE, &o->was);
                o->raised = 0;
                errno = e;
            }
        }
    }
    if (fd < 0) {
        ceil_ip_say(errno == ELOOP ? "not writing the record through a symbolic link: " :
                    "cannot open the record file ", path);
        return -1;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
        ceil_ip_say("not writing the record: not a regular file of this user's with one name: ", path);
        CEIL_REAL(close)(fd);
        if (o->raised)
            setrlimit(RLIMIT_NOFILE, &o->was);
        return -1;
    }
    o->sink = fd + 1;
    return 0;
}

static void close_record(ceil_ip_out *o)
{
    CEIL_REAL(close)(o->sink - 1);
    o->sink = 0;
    if (o->raised)
        setrlimit(RLIMIT_NOFILE, &o->was);
}

static int write_all(int fd, const char *text, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = CEIL_REAL(write)(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ceil_ip_say("cannot write the record", NULL);
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

int ceil_ip_append_file_(const char *path, const char *text, size_t len)
{
    ceil_ip_out o;
    memset(&o, 0, sizeof o);
    if (open_record(path, &o) != 0)
        return -1;
    /* One write on O_APPEND: processes appending to one file do not tear
     * each other's records (a short write, e.g. a full disk, may). */
    const int rc = write_all(o.sink - 1, text, len);
    close_record(&o);
    return rc;
}

int ceil_ip_out_open_(ceil_ip_out *o, const char *path, char *buf, size_t cap, size_t limit)
{
    memset(o, 0, sizeof *o);
    if (open_record(path, o) != 0)
        return -1;
    o->buf = buf;
    o->cap = cap;
    o->limit = limit;
    return 0;
}

int ceil_ip_out_close_(ceil_ip_out *o)
{
    o->line_start = o->len;             /* the record ends with its end line */
    const int rc = drain(o);
    close_record(o);
    return rc;
}
