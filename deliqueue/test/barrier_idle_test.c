/* SPDX-License-Identifier: Apache-2.0 */
/* Sync barriers hold sync messages, not async ones; idle handlers. */
#include "test_util.h"

TestSuite(barrier, .init = fixture_setup, .fini = fixture_teardown);

static int post_async(int32_t what, int64_t when)
{
    dq_msg m = msg_what(&target_a, what);
    m.flags = DQ_ASYNC;
    return dq_post_at(q, &m, when, NULL);
}

Test(barrier, holds_sync_passes_async)
{
    int64_t t = test_now();
    cr_assert_eq(post_at(1, t), 0); /* before the barrier */
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(post_at(2, t), 0);     /* after it: held */
    cr_assert_eq(post_async(3, t), 0);  /* passes */
    cr_assert_eq(post_at(4, t + 5), 0); /* held */
    cr_assert_eq(post_async(5, t + 5), 0);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 3);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(dq_is_idle(q), true, "the due sync message is held");
    test_advance(5);
    cr_assert_eq(next_what(), 5);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(dq_pending(q), 2, "barriers are not counted");
    cr_assert_eq(dq_remove_sync_barrier(q, b), 0);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), 4);
    cr_assert_eq(atomic_load(&rec.discards), 0, "a barrier is not a message");
}

Test(barrier, token_errors)
{
    dq_token b, m;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(post_at(1, test_now()), 0);
    dq_msg msg = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &msg, &m), 0);
    cr_assert_eq(dq_remove_sync_barrier(q, 0), -EINVAL);
    cr_assert_eq(dq_remove_sync_barrier(q, m), -ENOENT, "a message is no barrier");
    cr_assert_eq(dq_cancel(q, b), -EINVAL, "a barrier is no message");
    cr_assert_eq(dq_remove_sync_barrier(q, b), 0);
    cr_assert_eq(dq_remove_sync_barrier(q, b), -ENOENT);
    cr_assert_eq(dq_remove_sync_barrier(q, UINT64_MAX), -ENOENT);
}

/* A removed barrier's token is stale at once, not only once the looper has
   retired its node: the answer must not depend on the looper's timing. */
Test(barrier, removed_barrier_token_is_stale)
{
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(dq_remove_sync_barrier(q, b), 0);
    cr_assert_eq(dq_cancel(q, b), -ENOENT, "removed, not yet retired");
    cr_assert_eq(next_what(), NOTHING_DUE); /* the looper retires it */
    cr_assert_eq(dq_cancel(q, b), -ENOENT, "removed and retired");
    cr_assert_eq(dq_remove_sync_barrier(q, b), -ENOENT);
}

Test(barrier, front_post_is_not_held)
{
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    cr_assert_eq(next_what(), 1);
}

Test(barrier, two_barriers_need_both_removed)
{
    dq_token b1, b2;
    cr_assert_eq(dq_post_sync_barrier(q, &b1), 0);
    cr_assert_eq(dq_post_sync_barrier(q, &b2), 0);
    cr_assert_eq(post_at(1, test_now()), 0);
    cr_assert_eq(dq_remove_sync_barrier(q, b1), 0);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(dq_remove_sync_barrier(q, b2), 0);
    cr_assert_eq(next_what(), 1);
}

static int idle_calls_keep, idle_calls_once;
static bool idle_keep(void *ctx)
{
    (void)ctx;
    idle_calls_keep++;
    return true;
}
static bool idle_once(void *ctx)
{
    (void)ctx;
    idle_calls_once++;
    return false;
}
static bool idle_posts(void *ctx)
{
    (void)ctx;
    post_at(77, test_now());
    return false;
}

Test(barrier, idle_handlers_run_when_idle_and_false_removes)
{
    idle_calls_keep = idle_calls_once = 0;
    cr_assert_eq(dq_add_idle_handler(q, idle_keep, NULL), 0);
    cr_assert_eq(dq_add_idle_handler(q, idle_once, NULL), 0);
    cr_assert_eq(post_at(1, test_now()), 0);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(idle_calls_keep, 0, "not idle while something is due");
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(idle_calls_keep, 1);
    cr_assert_eq(idle_calls_once, 1);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(idle_calls_keep, 2);
    cr_assert_eq(idle_calls_once, 1, "returned false: removed");
    cr_assert_eq(dq_remove_idle_handler(q, idle_once, NULL), -ENOENT);
    cr_assert_eq(dq_remove_idle_handler(q, idle_keep, NULL), 0);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(idle_calls_keep, 2);
    cr_assert_eq(dq_add_idle_handler(q, NULL, NULL), -EINVAL);
}

Test(barrier, idle_handler_may_post)
{
    cr_assert_eq(dq_add_idle_handler(q, idle_posts, NULL), 0);
    cr_assert_eq(next_what(), 77, "the consumer re-checks after idle handlers");
    cr_assert_eq(next_what(), NOTHING_DUE);
}

Test(barrier, idle_handlers_run_behind_a_barrier)
{
    idle_calls_keep = 0;
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(post_at(1, test_now()), 0);
    cr_assert_eq(dq_add_idle_handler(q, idle_keep, NULL), 0);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(idle_calls_keep, 1);
}
