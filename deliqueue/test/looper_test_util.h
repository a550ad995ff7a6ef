/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the looper tests (looper_test_*.c): consumer threads, real
   time sleeps and bounds, and a record of deliveries. */
#ifndef DELIQUEUE_LOOPER_TEST_UTIL_H
#define DELIQUEUE_LOOPER_TEST_UTIL_H

#include <pthread.h>
#include <time.h>

#include "test_util.h"

#define MS        (INT64_C(1000000))
/* A call the library must answer promptly answers within this (real
   time), far above a scheduling delay even under TSan on a loaded host. */
#define PROMPT_NS (INT64_C(5) * 1000 * MS)

static inline void sleep_ns(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Spin (with short sleeps) until *flag is nonzero, at most PROMPT_NS;
   whether it came. */
static inline bool wait_flag(_Atomic int *flag)
{
    int64_t end = real_ns() + PROMPT_NS;
    while (atomic_load(flag) == 0) {
        if (real_ns() > end)
            return false;
        sleep_ns(100000);
    }
    return true;
}

/* A thread running dq_loop on a queue until it quits. */
typedef struct loop_thread {
    dq_queue *q;
    pthread_t thread;
    int rc;
} loop_thread;

static void *loop_thread_main(void *arg)
{
    loop_thread *l = arg;
    l->rc = dq_loop(l->q);
    return NULL;
}

static inline void loop_thread_start(loop_thread *l, dq_queue *queue)
{
    l->q = queue;
    l->rc = -1;
    cr_assert_eq(pthread_create(&l->thread, NULL, loop_thread_main, l), 0);
}

static inline int loop_thread_stop(loop_thread *l)
{
    dq_quit(l->q);
    pthread_join(l->thread, NULL);
    return l->rc;
}

/* Deliveries a test's callbacks record: what and when of each. */
#define MAX_DELIVERIES 1024
typedef struct deliveries {
    _Atomic int count;
    int32_t what[MAX_DELIVERIES];
    int64_t when[MAX_DELIVERIES];
} deliveries;

static inline void deliveries_add(deliveries *d, const dq_msg *m)
{
    int i = atomic_load(&d->count);
    if (i < MAX_DELIVERIES) {
        d->what[i] = m->what;
        d->when[i] = m->when;
    }
    atomic_store(&d->count, i + 1);
}

#endif /* DELIQUEUE_LOOPER_TEST_UTIL_H */
