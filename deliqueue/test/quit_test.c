/* SPDX-License-Identifier: Apache-2.0 */
/* quit versus quit_safely, post after quit, teardown accounting. */
#include <pthread.h>

#include "test_util.h"

TestSuite(quit, .init = fixture_setup, .fini = fixture_teardown);

Test(quit, quit_drops_everything_and_reports_each_once)
{
    int64_t t = dq_now();
    cr_assert_eq(post_at(1, t), 0);
    cr_assert_eq(post_at(2, t + 100), 0);
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    dq_quit(q);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 2);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN, "stays shut down");
}

Test(quit, quit_safely_delivers_what_is_due)
{
    int64_t t = dq_now();
    cr_assert_eq(post_at(1, t), 0);
    cr_assert_eq(post_at(2, t - 5), 0);
    cr_assert_eq(post_at(3, t + 1), 0);   /* due later: dropped */
    cr_assert_eq(post_at(4, INT64_MAX), 0);
    dq_quit_safely(q);
    dq_msg m = msg_what(&target_a, 9);
    cr_assert_eq(dq_post(q, &m, NULL), -ESHUTDOWN);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 2);
}

Test(quit, quit_safely_then_quit_drops_the_rest)
{
    int64_t t = dq_now();
    cr_assert_eq(post_at(1, t), 0);
    cr_assert_eq(post_at(2, t), 0);
    dq_quit_safely(q);
    cr_assert_eq(next_what(), 1);
    dq_quit(q);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(quit, post_after_quit_is_eshutdown_and_not_accepted)
{
    dq_quit(q);
    dq_msg m = msg_what(&target_a, 1);
    dq_token t = 5;
    cr_assert_eq(dq_post(q, &m, &t), -ESHUTDOWN);
    cr_assert_eq(dq_post_at_front(q, &m, &t), -ESHUTDOWN);
    cr_assert_eq(dq_post_sync_barrier(q, &t), -ESHUTDOWN);
    cr_assert_eq(t, 5);
    cr_assert_eq(dq_cancel(q, 1), -ESHUTDOWN);
    dq_match match = { .target = &target_a };
    cr_assert_eq(dq_remove(q, &match), 0);
    cr_assert_eq(dq_add_idle_handler(q, (bool (*)(void *))1, NULL), -ESHUTDOWN);
    dq_quit(q); /* idempotent */
    dq_quit_safely(q);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}

Test(quit, last_unref_quits_and_reports)
{
    dq_msg m = msg_what(&target_a, 1);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(dq_post_delayed(q, &m, i * 1000, NULL), 0);
    dq_unref(q);
    q = dq_create(NULL); /* for the fixture's teardown */
    cr_assert_eq(atomic_load(&rec.discards), 10);
}

Test(quit, quit_safely_with_a_barrier_drops_what_it_holds)
{
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(post_at(1, dq_now()), 0);
    dq_quit_safely(q);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

static void *quit_later(void *arg)
{
    struct timespec ts = { 0, 20000000 };
    nanosleep(&ts, NULL);
    dq_quit(arg);
    return NULL;
}

Test(quit, quit_wakes_a_blocked_consumer)
{
    dq_test_clock_real();
    pthread_t t;
    pthread_create(&t, NULL, quit_later, q);
    dq_msg out;
    cr_assert_eq(dq_next(q, &out), -ESHUTDOWN);
    pthread_join(t, NULL);
}

struct holder { dq_queue *q; _Atomic int go; int rejected, accepted; };

static void *post_until_rejected(void *arg)
{
    struct holder *h = arg;
    while (!atomic_load(&h->go))
        ;
    dq_msg m = msg_what(&target_a, 1);
    for (;;) {
        int err = dq_post(h->q, &m, NULL);
        if (err == -ESHUTDOWN) {
            h->rejected++;
            break;
        }
        cr_assert_eq(err, 0);
        h->accepted++;
    }
    dq_unref(h->q);
    return NULL;
}

Test(quit, producers_racing_quit_account_exactly)
{
    struct holder h[3] = { 0 };
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        h[i].q = dq_ref(q);
        pthread_create(&t[i], NULL, post_until_rejected, &h[i]);
    }
    for (int i = 0; i < 3; i++)
        atomic_store(&h[i].go, 1);
    dq_msg out;
    int delivered = 0;
    for (int i = 0; i < 1000; i++)
        delivered += dq_try_next(q, &out) == 0;
    dq_quit(q);
    cr_assert_eq(dq_next(q, &out), -ESHUTDOWN);
    int accepted = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        accepted += h[i].accepted;
        cr_assert_eq(h[i].rejected, 1);
    }
    cr_assert_eq((size_t)delivered + atomic_load(&rec.discards), (size_t)accepted);
}
