/* c2c.c - core-to-core latency: two pinned threads bounce one cache line.
 *
 * The design is the one of nviennot/core-to-core-latency's default bench
 * ("CAS latency on a single shared cache line"): one counter on a line of
 * its own, the ping thread turns an even value odd with compare-and-swap, the
 * pong thread turns it even again, and each spins on its CAS until it
 * succeeds. A round trip moves the line's ownership there and back, so the
 * one-way latency is time / (2 x round trips), which is what that tool
 * reports. A counter rather than a two-state flag lets the end value prove
 * that every round trip happened.
 *
 * Plain pthreads, not OpenMP: the kernel needs exactly two threads running
 * at once, whatever OMP_NUM_THREADS or OMP_THREAD_LIMIT say, and must not
 * leave the caller's thread pinned.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ceiling.h"

/* 128 bytes: some CPUs fetch lines in adjacent pairs (Intel's spatial
 * prefetcher), so the counter gets a pair to itself. */
#define C2C_LINE 128

typedef struct c2c_shared {
    _Alignas(C2C_LINE) _Atomic int64_t counter;
    char pad0[C2C_LINE - sizeof(int64_t)];
    _Alignas(C2C_LINE) _Atomic int ready;   /* threads pinned (or failed) and waiting to start */
    _Atomic int abort;                      /* a thread could not pin: the other must not wait */
    const ceil_params *p;
    double *times;
} c2c_shared;

typedef struct c2c_side {
    c2c_shared *s;
    int role;          /* 0 = ping (timed), 1 = pong */
    int cpu;
    int pin_err;       /* -errno from ceil_pin_self, 0 when pinned */
} c2c_side;

/* Spin until the counter holds `from`, then make it from + 1. */
static inline void flip(_Atomic int64_t *c, int64_t from)
{
    int64_t want = from;
    while (!atomic_compare_exchange_weak_explicit(c, &want, from + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
        want = from;
}

static void *c2c_thread(void *arg)
{
    c2c_side *me = arg;
    c2c_shared *s = me->s;
    const ceil_params *p = s->p;

    me->pin_err = ceil_pin_self(me->cpu);
    if (me->pin_err != 0)
        atomic_store(&s->abort, 1);
    atomic_fetch_add(&s->ready, 1);
    while (atomic_load(&s->ready) < 2)
        ;
    if (atomic_load(&s->abort))
        return NULL;

    const int64_t iters = p->iters;
    const int total_reps = p->warmup + p->reps;
    if (me->role == 0) {
        int64_t v = 0;
        for (int rep = 0; rep < total_reps; rep++) {
            double t0 = ceil_now();
            for (int64_t i = 0; i < iters; i++, v += 2)
                flip(&s->counter, v);
            /* The round trip ends when the pong's last flip is seen here. */
            while (atomic_load_explicit(&s->counter, memory_order_relaxed) != v)
                ;
            double t1 = ceil_now();
            if (rep >= p->warmup)
                s->times[rep - p->warmup] = t1 - t0;
        }
    } else {
        int64_t n = (int64_t)total_reps * iters;
        for (int64_t k = 0, v = 1; k < n; k++, v += 2)
            flip(&s->counter, v);
    }
    return NULL;
}

static int run_pingpong(const ceil_params *p, ceil_result *r)
{
    ceil_result_clear(r);
    int unread = ceil_params_unread(p, 0, 0, "c2c_pingpong", r);
    if (unread)
        return unread;

    if (!p->cpus || p->nthreads != 2) {
        ceil_set_msg(r, "c2c_pingpong: needs nthreads = 2 and two CPUs");
        return CEIL_EINVAL;
    }
    if (p->cpus[0] == p->cpus[1]) {
        ceil_set_msg(r, "c2c_pingpong: both threads on CPU %d: a line cannot travel between a CPU and itself",
                     p->cpus[0]);
        return CEIL_EINVAL;
    }
    if (p->cpus[0] < 0 || p->cpus[1] < 0) {
        ceil_set_msg(r, "c2c_pingpong: CPU ids must be >= 0");
        return CEIL_EINVAL;
    }
    if (p->iters < 1 || p->reps < 1 || p->warmup < 0 || !r->times) {
        ceil_set_msg(r, "c2c_pingpong: needs iters >= 1, reps >= 1, warmup >= 0 and a times array");
        return CEIL_EINVAL;
    }

    c2c_shared *s = aligned_alloc(C2C_LINE, sizeof *s);
    if (!s) {
        ceil_set_msg(r, "c2c_pingpong: cannot allocate the shared line");
        return CEIL_ENOMEM;
    }
    memset(s, 0, sizeof *s);
    atomic_init(&s->counter, 0);
    atomic_init(&s->ready, 0);
    atomic_init(&s->abort, 0);
    s->p = p;
    s->times = r->times;

    c2c_side side[2] = {{s, 0, p->cpus[0], 0}, {s, 1, p->cpus[1], 0}};
    pthread_t th[2];
    int started = 0, rc = 0;
    for (; started < 2; started++) {
        if (pthread_create(&th[started], NULL, c2c_thread, &side[started]) != 0) {
            /* Release the thread already waiting for its partner. */
            atomic_store(&s->abort, 1);
            atomic_fetch_add(&s->ready, 2);
            ceil_set_msg(r, "c2c_pingpong: cannot start thread %d", started);
            rc = CEIL_ENOMEM;
            break;
        }
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    if (rc == 0) {
        for (int t = 0; t < 2; t++) {
            if (side[t].pin_err != 0) {
                ceil_set_msg(r, "c2c_pingpong: cannot pin a thread to CPU %d: %s", side[t].cpu,
                             strerror(-side[t].pin_err));
                rc = CEIL_EPIN;
                break;
            }
        }
    }
    if (rc == 0) {
        int64_t want = 2 * (int64_t)(p->warmup + p->reps) * p->iters;
        int64_t got = atomic_load(&s->counter);
        r->iters = p->iters;
        r->nthreads = 2;
        r->check = (double)got;
        r->valid = got == want;
        if (!r->valid)
            ceil_set_msg(r, "c2c_pingpong: counter ended at %lld, expected %lld", (long long)got, (long long)want);
    }
    free(s);
    return rc;
}

static const ceil_kernel ceil_c2c[] = {
    {"c2c_pingpong", "c2c", "scalar", 0.0, 0.0,
     "one round trip of a cache line between two CPUs (CAS on one shared counter)", run_pingpong},
    {NULL, NULL, NULL, 0, 0, NULL, NULL},
};
CEIL_REGISTER_TABLE(ceil_c2c, CEIL_ORDER_C2C);
