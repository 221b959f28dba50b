/* null.c - the template module: it interposes nothing, counts calls of a
 * function of its own and its own flushes, and shows every part a real
 * module (POSIX, stdio, MPI) has. Copy it, rename "null", and replace the
 * wrapper below with wrappers of the API's functions. Darshan's
 * darshan-null.c is the model.
 *
 * Its record lines (interpose.h has the format around them):
 *
 *     module name=null version=1 enabled=1
 *     null flushes=1 calls=8 threads=2
 *
 * flushes: how many times the runtime asked this module for its lines in
 * this process (1: the record is written once); calls: ceil_ip_null_touch
 * calls, all threads; threads: thread slots that made at least one (a
 * thread started after another ended may take over its slot, counts and all).
 */
#include <stdint.h>
#include "interpose.h"

/* 1. One thread's counters. The runtime gives every thread a zeroed block
 *    of block_bytes at its first counted call, so a wrapper never allocates
 *    and never takes a lock. Only counters of the calling thread are written
 *    (ceil_ip_add); sums over threads are made at flush. Keep it small:
 *    every thread slot reserves it. */
typedef struct null_counters {
    uint64_t calls;
} null_counters;

/* Module-wide state that is not per thread is written only at load or
 * flush, which run once at a time. */
static uint64_t null_flushes;

static ceil_ip_module null_module;

/* 2. init: at load, before any counting; return nonzero to stay off (an API
 *    that is not in this program, say). A real module resolves the functions
 *    it wraps here, so that no dlsym runs inside the program's first call:
 *        (void)CEIL_REAL(open);
 */
static int null_init(ceil_ip_module *self)
{
    (void)self;
    return 0;
}

/* 3. report: at flush, possibly from a signal handler, so no allocation, no
 *    lock, no stdio. Sum every thread's block (ceil_ip_read pairs with the
 *    owners' ceil_ip_add) and write lines that each start with
 *    ceil_ip_line. Name keys bare, with CEIL_IP_PUT_*: each must be in
 *    calls.def's CEIL_IP_KEYS (with its type), and the line in its
 *    CEIL_IP_LINES (null, counts, flushes: these keys), or the Python reader
 *    will not know it (tests/test_interpose_names.py). */
static void null_report(ceil_ip_module *self, ceil_ip_out *out)
{
    uint64_t calls = 0, threads = 0;
    for (int t = 0; t < ceil_ip_threads(); t++) {
        const null_counters *c = ceil_ip_block_of(self, t);
        uint64_t n = c ? ceil_ip_read(&c->calls) : 0;
        calls += n;
        threads += n > 0;
    }
    null_flushes++;
    ceil_ip_line(out, self);
    CEIL_IP_PUT_U64(out, flushes, null_flushes);
    CEIL_IP_PUT_U64(out, calls, calls);
    CEIL_IP_PUT_U64(out, threads, threads);
}

/* 4. The descriptor, registered into the runtime's module section: no list
 *    elsewhere to edit. Designated initialisers leave the runtime's fields
 *    zero. */
static ceil_ip_module null_module = {
    .name = "null",
    .version = 1,
    .block_bytes = sizeof(null_counters),
    .init = null_init,
    .report = null_report,
};
CEIL_IP_MODULE(null_module);

/* 5. A wrapper. This one wraps nothing (the name is our own, so it shadows
 *    no library's function); tests call it to see per-thread counting work.
 *    A real wrapper has the wrapped function's exact name and prototype,
 *    CEIL_IP_EXPORT, a CEIL_IP_REAL_DECL at file scope, an entry in
 *    calls.def's list of its module's calls (its name and class, and so its
 *    number CEIL_IP_CALL_<fn>), and calls the real function first:
 *
 *        CEIL_IP_REAL_DECL(int, close, (int));
 *        CEIL_IP_EXPORT int close(int fd)
 *        {
 *            const uint64_t t0 = ceil_ip_ticks();
 *            int rc = CEIL_REAL(close)(fd);
 *            posix_counters *c = ceil_ip_block(&posix_module);
 *            if (c) {
 *                const uint64_t t1 = ceil_ip_ticks();
 *                ceil_ip_add(&c->closes, 1);
 *                ceil_ip_add(&c->ticks, t1 - t0);
 *                ceil_ip_event(&posix_module, CEIL_IP_CALL_close, t0, t1, rc, 0);   // the trace's slot
 *            }
 *            return rc;
 *        }
 *
 *    and saves and restores errno around anything it does after the real
 *    call that could change it. */
CEIL_IP_EXPORT void ceil_ip_null_touch(void);
CEIL_IP_EXPORT void ceil_ip_null_touch(void)
{
    null_counters *c = ceil_ip_block(&null_module);
    if (c)
        ceil_ip_add(&c->calls, 1);
}
