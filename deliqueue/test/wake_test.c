/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A consumer asleep in dq_next is woken by every post that can be
 * delivered before it would wake by itself, barriers or not.
 *
 * A sync barrier holds only what sorts after it: a sync message that sorts
 * before a pending barrier is deliverable at once.  Three posts do that: a
 * front post, a post at a when earlier than the barrier's, and a plain post
 * whose clock read came before a concurrent barrier post (two producers
 * racing; the state that race leaves is built here by reading the clock
 * before the barrier is posted and posting at that time after it).  Each is
 * posted while the consumer sleeps behind the barrier, with no deadline and
 * nothing else to wake it, under every idle-spin setting; the test library
 * is built with the futex wait and with the portable one.  Real clock:
 * the suite has no fixture, so recording_options() gives its queues no
 * manual clock, and only a post can end the consumer's sleep.
 */
#include <pthread.h>
#include <time.h>

#include "test_util.h"

/* Long enough for the consumer to finish any idle spin and sleep. */
#define SETTLE_NS         (20 * 1000000)
/* A lost wake-up waits forever; a delivered message comes within a
   scheduling latency, far below this even under QEMU and TSan. */
#define DELIVERY_BOUND_NS (INT64_C(2) * 1000000000)

static void sleep_ns(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

typedef struct blocked_consumer {
    dq_queue *q;
    pthread_t thread;
    _Atomic int32_t last_what; /* 0: nothing delivered yet */
    _Atomic int64_t delivered_at;
} blocked_consumer;

static void *consume(void *arg)
{
    blocked_consumer *c = arg;
    dq_msg out;
    while (dq_next(c->q, &out) == 0) {
        atomic_store(&c->delivered_at, dq_now());
        atomic_store(&c->last_what, out.what);
    }
    return NULL;
}

static void consumer_start(blocked_consumer *c, int64_t idle_spin_ns)
{
    dq_options o = recording_options();
    o.idle_spin_ns = idle_spin_ns;
    c->q = dq_create(&o);
    cr_assert_not_null(c->q);
    atomic_store(&c->last_what, 0);
    cr_assert_eq(pthread_create(&c->thread, NULL, consume, c), 0);
}

static void consumer_stop(blocked_consumer *c)
{
    dq_quit(c->q);
    pthread_join(c->thread, NULL);
    dq_unref(c->q);
}

/* Wait until the consumer delivered `what`; the latency from posted_at,
   or -1 past the bound. */
static int64_t delivery_latency(blocked_consumer *c, int32_t what, int64_t posted_at)
{
    while (atomic_load(&c->last_what) != what) {
        if (dq_now() - posted_at > DELIVERY_BOUND_NS)
            return -1;
        sleep_ns(100000);
    }
    return atomic_load(&c->delivered_at) - posted_at;
}

enum way { FRONT, EARLIER_WHEN, CLOCK_READ_BEFORE_BARRIER };
static const char *const way_names[] = {
    "dq_post_at_front",
    "dq_post_at before the barrier's when",
    "dq_post whose clock read preceded the barrier post",
};

/* A barrier, a consumer asleep behind it, then a post that sorts before
   it: delivered within the bound, under each idle-spin setting. */
static void check_wakes_behind_barrier(enum way way)
{
    static const int64_t spins[] = { -1, 0 /* default */, 1, DQ_IDLE_SPIN_MAX_NS };
    for (size_t i = 0; i < sizeof spins / sizeof spins[0]; i++) {
        blocked_consumer c;
        consumer_start(&c, spins[i]);
        int64_t before_barrier = dq_now();
        sleep_ns(1000); /* the barrier's due is strictly later */
        dq_token b;
        cr_assert_eq(dq_post_sync_barrier(c.q, &b), 0);
        sleep_ns(SETTLE_NS);
        dq_msg m = msg_what(&target_a, 7);
        int64_t posted_at = dq_now();
        switch (way) {
        case FRONT: cr_assert_eq(dq_post_at_front(c.q, &m, NULL), 0); break;
        case EARLIER_WHEN:
            cr_assert_eq(dq_post_at(c.q, &m, before_barrier - 1000, NULL), 0);
            break;
        case CLOCK_READ_BEFORE_BARRIER:
            cr_assert_eq(dq_post_at(c.q, &m, before_barrier, NULL), 0);
            break;
        }
        int64_t latency = delivery_latency(&c, 7, posted_at);
        cr_assert(latency >= 0,
                  "%s, idle spin %lld: a deliverable message behind a barrier was "
                  "not delivered within %lld ms (the consumer was not woken)",
                  way_names[way], (long long)spins[i],
                  (long long)(DELIVERY_BOUND_NS / 1000000));
        cr_assert_eq(dq_remove_sync_barrier(c.q, b), 0);
        consumer_stop(&c);
    }
}

TestSuite(wake, .fini = leak_check);

Test(wake, front_post_behind_a_barrier)
{
    check_wakes_behind_barrier(FRONT);
}

Test(wake, earlier_when_behind_a_barrier)
{
    check_wakes_behind_barrier(EARLIER_WHEN);
}

Test(wake, clock_read_before_a_concurrent_barrier)
{
    check_wakes_behind_barrier(CLOCK_READ_BEFORE_BARRIER);
}

/* The other side: a sync message that sorts after the barrier stays held
   until the barrier goes, then comes at once; an async one passes. */
Test(wake, held_until_the_barrier_goes_async_passes)
{
    blocked_consumer c;
    consumer_start(&c, -1);
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(c.q, &b), 0);
    sleep_ns(SETTLE_NS);
    dq_msg held = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(c.q, &held, NULL), 0);
    dq_msg async = msg_what(&target_a, 2);
    async.flags = DQ_ASYNC;
    int64_t posted_at = dq_now();
    cr_assert_eq(dq_post(c.q, &async, NULL), 0);
    cr_assert(delivery_latency(&c, 2, posted_at) >= 0, "async passes the barrier");
    sleep_ns(SETTLE_NS);
    cr_assert_eq(atomic_load(&c.last_what), 2, "the sync message is held");
    posted_at = dq_now();
    cr_assert_eq(dq_remove_sync_barrier(c.q, b), 0);
    cr_assert(delivery_latency(&c, 1, posted_at) >= 0, "released with the barrier");
    consumer_stop(&c);
}

/* A sleeper with a deadline (a delayed message pending) is woken by a
   post due before that deadline. */
Test(wake, earlier_post_wakes_a_sleeper_with_a_deadline)
{
    blocked_consumer c;
    consumer_start(&c, -1);
    dq_msg later = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_delayed(c.q, &later, INT64_C(60) * 1000000000, NULL), 0);
    sleep_ns(SETTLE_NS);
    dq_msg now = msg_what(&target_a, 2);
    int64_t posted_at = dq_now();
    cr_assert_eq(dq_post(c.q, &now, NULL), 0);
    cr_assert(delivery_latency(&c, 2, posted_at) >= 0);
    consumer_stop(&c);
}
