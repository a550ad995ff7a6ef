/* SPDX-License-Identifier: Apache-2.0 */
/* Delivery order: by when, FIFO for equal when, front posts LIFO before
   everything, never early. */
#include <stdlib.h>

#include "test_util.h"

TestSuite(order, .init = fixture_setup, .fini = fixture_teardown);

Test(order, by_when)
{
    int64_t t = test_now();
    cr_assert_eq(post_at(3, t + 30), 0);
    cr_assert_eq(post_at(1, t + 10), 0);
    cr_assert_eq(post_at(2, t + 20), 0);
    test_advance(30);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), 3);
    cr_assert_eq(next_what(), NOTHING_DUE);
}

Test(order, equal_when_is_fifo)
{
    int64_t t = test_now() + 5;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(post_at(i, t), 0);
    test_advance(5);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(next_what(), i);
}

Test(order, fifo_holds_across_sweeps)
{
    /* posts interleaved with consumer calls: the sweep boundary moves */
    int64_t t = test_now() + 5;
    for (int i = 0; i < 50; i++) {
        cr_assert_eq(post_at(i, t), 0);
        if (i % 7 == 0)
            cr_assert_eq(next_what(), NOTHING_DUE);
    }
    test_advance(5);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(next_what(), i);
}

Test(order, front_posts_are_lifo_and_first)
{
    int64_t t = test_now();
    cr_assert_eq(post_at(10, t - 100), 0); /* already due */
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    m.what = 2;
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    cr_assert_eq(post_at(3, 0), 0); /* when == 0 is a front post too */
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.what, 3);
    cr_assert_eq(out.when, 0);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 10);
}

Test(order, never_early)
{
    int64_t t = test_now();
    cr_assert_eq(post_at(1, t + 1000), 0);
    test_advance(999);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(dq_is_idle(q), true);
    test_advance(1);
    cr_assert_eq(dq_is_idle(q), false);
    cr_assert_eq(next_what(), 1);
}

Test(order, past_when_is_due_at_once_in_time_order)
{
    int64_t t = test_now();
    cr_assert_eq(post_at(2, t - 5), 0);
    cr_assert_eq(post_at(1, t - 10), 0);
    cr_assert_eq(post_at(3, t), 0);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), 3);
}

Test(order, far_future_stays)
{
    cr_assert_eq(post_at(1, INT64_MAX), 0);
    cr_assert_eq(post_at(2, test_now()), 0);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(dq_pending(q), 1);
}

Test(order, async_and_sync_interleave_by_key)
{
    int64_t t = test_now();
    dq_msg m = msg_what(&target_a, 1);
    m.flags = DQ_ASYNC;
    cr_assert_eq(dq_post_at(q, &m, t + 2, NULL), 0);
    cr_assert_eq(post_at(2, t + 2), 0);
    m.what = 3;
    cr_assert_eq(dq_post_at(q, &m, t + 2, NULL), 0);
    cr_assert_eq(post_at(0, t + 1), 0);
    test_advance(2);
    cr_assert_eq(next_what(), 0);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), 3);
}

Test(order, many_random_times_come_out_sorted)
{
    srand(3);
    int64_t t = test_now();
    for (int i = 0; i < 3000; i++)
        cr_assert_eq(post_at(i, t + rand() % 500), 0);
    test_advance(500);
    dq_msg out, prev = { 0 };
    for (int i = 0; i < 3000; i++) {
        cr_assert_eq(dq_try_next(q, &out), 0);
        if (i > 0) {
            cr_assert_geq(out.when, prev.when);
            if (out.when == prev.when)
                cr_assert_gt(out.what, prev.what, "FIFO among equal when");
        }
        prev = out;
    }
    cr_assert_eq(next_what(), NOTHING_DUE);
}
