/* SPDX-License-Identifier: Apache-2.0 */
/* A queue on a manual clock never reads CLOCK_MONOTONIC for its due
   times, deadlines or waits.  The test links the library statically and
   wraps clock_gettime, counting the library's reads of CLOCK_MONOTONIC
   while a manual-clock queue posts, sleeps, wakes, times out, quits and
   is driven by the test control; the same steps on a CLOCK_MONOTONIC
   queue show that the count sees the library's reads. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <deliqueue/deliqueue.h>

#include "leak_check.h"

#define MS INT64_C(1000000)

int __real_clock_gettime(clockid_t id, struct timespec *ts);

static _Atomic long monotonic_reads;

int __wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id == CLOCK_MONOTONIC)
        atomic_fetch_add(&monotonic_reads, 1);
    return __real_clock_gettime(id, ts);
}

static int target;
static _Atomic int delivered;

static void count(dq_msg *m)
{
    (void)m;
    atomic_fetch_add(&delivered, 1);
}

static void *consumer_main(void *p)
{
    dq_msg out;
    int err = dq_next(p, &out);
    cr_assert_eq(err, 0);
    out.callback(&out);
    return NULL;
}

/* Every timed path of a queue on clock c (NULL: CLOCK_MONOTONIC), with
   the consumer first asleep on another thread, then on this one. */
static void exercise(dq_clock *c)
{
    dq_options o = { .clock = c, .idle_spin_ns = -1 };
    dq_queue *q = dq_create(&o);
    cr_assert_not_null(q);
    dq_msg m = { .target = &target, .callback = count };
    int64_t t = dq_queue_now(q);
    cr_assert_eq(dq_post_delayed(q, &m, 5 * MS, NULL), 0);

    pthread_t consumer;
    cr_assert_eq(pthread_create(&consumer, NULL, consumer_main, q), 0);
    struct timespec pause = { 0, 20 * 1000000L };
    nanosleep(&pause, NULL); /* asleep until the message is due */
    if (c != NULL)
        cr_assert_eq(dq_clock_advance(c, 5 * MS), 0);
    pthread_join(consumer, NULL);
    /* that queue's consumer was the other thread: a second queue takes
       this thread's consumer calls */
    dq_unref(q);

    q = dq_create(&o);
    cr_assert_not_null(q);
    t = dq_queue_now(q);
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    cr_assert_eq(dq_post_at(q, &m, t + MS, NULL), 0);
    dq_token rep, barrier;
    cr_assert_eq(dq_post_repeating(q, &m, t, MS, DQ_FIXED_RATE, &rep), 0);
    cr_assert_eq(dq_post_sync_barrier(q, &barrier), 0);
    (void)dq_is_idle(q);
    cr_assert_eq(dq_remove_sync_barrier(q, barrier), 0);
    dq_msg out;
    cr_assert_eq(dq_next_until(q, &out, t), 0);
    cr_assert_eq(dq_loop_once(q, t), DQ_ONCE_MESSAGE);
    cr_assert_geq(dq_run_until_idle(q), 0);
    cr_assert_geq(dq_peek_when(q), 0);
    if (c != NULL)
        cr_assert_geq(dq_fast_forward(q, 3 * MS), 2);
    cr_assert_eq(dq_cancel(q, rep), 0);
    cr_assert_eq(dq_next_until(q, &out, dq_queue_now(q)), -ETIMEDOUT);
    cr_assert_eq(dq_post_delayed(q, &m, 10 * MS, NULL), 0);
    dq_quit_safely(q);
    cr_assert_eq(dq_run_until_idle(q), -ESHUTDOWN);
    dq_unref(q);
}

TestSuite(manual_clock, .fini = leak_check, .timeout = 60);

Test(manual_clock, never_reads_clock_monotonic)
{
    dq_clock *c = dq_clock_create_manual(1000 * MS);
    atomic_store(&monotonic_reads, 0);
    exercise(c);
    cr_assert_eq(atomic_load(&monotonic_reads), 0, "%ld reads of CLOCK_MONOTONIC",
                 atomic_load(&monotonic_reads));
    cr_assert_gt(atomic_load(&delivered), 3);
    dq_clock_destroy(c);
}

Test(manual_clock, the_count_sees_a_monotonic_queue)
{
    atomic_store(&monotonic_reads, 0);
    exercise(NULL);
    cr_assert_gt(atomic_load(&monotonic_reads), 5);
}
