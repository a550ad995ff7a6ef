/* SPDX-License-Identifier: Apache-2.0 */
/* Criterion tests of the legacy queue: every function and error path,
   timing driven by a manual clock (no sleeps). */
#include "bench/baselines/legacy.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <deliqueue_internal/msg.h>

static int target_a, target_b;
static int discards;
static int32_t discarded_arg1[64];

static void count_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    if (discards < 64)
        discarded_arg1[discards] = m->arg1;
    discards++;
}

static dq_legacy *q;
static dq_clock *clk; /* q's clock */

static void setup(void)
{
    discards = 0;
    clk = dq_clock_create_manual(1000000000);
    cr_assert_not_null(clk);
    dq_options o = { .on_discard = count_discard, .clock = clk };
    q = dq_legacy_create(&o);
    cr_assert_not_null(q);
}

static void teardown(void)
{
    dq_legacy_destroy(q);
    dq_clock_destroy(clk); /* after q, which takes no hold on it */
}

static int64_t clk_now(void)
{
    return dq_clock_now(clk);
}

/* Move q's clock forward by ns; any thread. */
static void advance(int64_t ns)
{
    if (dq_clock_advance(clk, ns) != 0)
        abort();
}

TestSuite(legacy, .init = setup, .fini = teardown);

static dq_msg msg(const void *target, int32_t what, int32_t arg1)
{
    dq_msg m = { .target = target, .what = what, .arg1 = arg1 };
    return m;
}

static int32_t next_arg1(void)
{
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), 0);
    return out.arg1;
}

Test(legacy, order_when_then_fifo)
{
    int64_t now = clk_now();
    dq_msg m = msg(&target_a, 0, 0);
    m.arg1 = 1;
    cr_assert_eq(dq_legacy_post_at(q, &m, now + 30, NULL), 0);
    m.arg1 = 2;
    cr_assert_eq(dq_legacy_post_at(q, &m, now + 10, NULL), 0);
    m.arg1 = 3;
    cr_assert_eq(dq_legacy_post_at(q, &m, now + 10, NULL), 0);
    m.arg1 = 4;
    cr_assert_eq(dq_legacy_post_at(q, &m, now + 20, NULL), 0);
    m.arg1 = 5;
    cr_assert_eq(dq_legacy_post_at(q, &m, now + 30, NULL), 0);
    cr_assert_eq(dq_legacy_pending(q), 5);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN); /* never early */
    advance(30);
    cr_assert_eq(next_arg1(), 2);
    cr_assert_eq(next_arg1(), 3);
    cr_assert_eq(next_arg1(), 4);
    cr_assert_eq(next_arg1(), 1);
    cr_assert_eq(next_arg1(), 5);
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_legacy_pending(q), 0);
}

Test(legacy, front_posts_are_lifo_and_first)
{
    dq_msg m = msg(&target_a, 0, 1);
    cr_assert_eq(dq_legacy_post(q, &m, NULL), 0);
    m.arg1 = 2;
    cr_assert_eq(dq_legacy_post_at_front(q, &m, NULL), 0);
    m.arg1 = 3;
    cr_assert_eq(dq_legacy_post_at(q, &m, 0, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), 0);
    cr_assert_eq(out.arg1, 3);
    cr_assert_eq(out.when, 0);
    cr_assert_eq(next_arg1(), 2);
    cr_assert_eq(next_arg1(), 1);
}

Test(legacy, delay_rules)
{
    dq_msg m = msg(&target_a, 0, 1);
    cr_assert_eq(dq_legacy_post_delayed(q, &m, -5, NULL), 0); /* due now */
    m.arg1 = 2;
    cr_assert_eq(dq_legacy_post_delayed(q, &m, INT64_MAX, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), 0);
    cr_assert_eq(out.arg1, 1);
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN);
    advance(INT64_MAX - clk_now());
    cr_assert_eq(dq_legacy_try_next(q, &out), 0);
    cr_assert_eq(out.when, INT64_MAX); /* saturated */
}

Test(legacy, errors)
{
    dq_msg m = msg(&target_a, 0, 1);
    dq_msg bad = msg(NULL, 0, 0);
    cr_assert_eq(dq_legacy_post(NULL, &m, NULL), -EINVAL);
    cr_assert_eq(dq_legacy_post(q, NULL, NULL), -EINVAL);
    cr_assert_eq(dq_legacy_post(q, &bad, NULL), -EINVAL);
    m.flags = 2;
    cr_assert_eq(dq_legacy_post(q, &m, NULL), -EINVAL);
    m.flags = 0;
    cr_assert_eq(dq_legacy_post_at(q, &m, -1, NULL), -EINVAL);
    cr_assert_eq(dq_legacy_cancel(q, 0), -EINVAL);
    cr_assert_eq(dq_legacy_cancel(NULL, 2), -EINVAL);
    cr_assert_eq(dq_legacy_remove_sync_barrier(q, 0), -EINVAL);
    cr_assert_eq(dq_legacy_remove(q, NULL), 0);
    dq_match mt = { .target = &target_a, .fields = 8 };
    cr_assert_eq(dq_legacy_remove(q, &mt), 0);
    cr_assert(!dq_legacy_has(q, &mt));
    cr_assert_eq(dq_legacy_try_next(q, NULL), -EINVAL);
    cr_assert_eq(dq_legacy_add_idle_handler(q, NULL, NULL), -EINVAL);
    cr_assert_eq(dq_legacy_pending(q), 0);
    cr_assert_eq(discards, 0);
}

Test(legacy, cancel_by_token)
{
    dq_msg m = msg(&target_a, 0, 7);
    dq_token t1, t2, b;
    cr_assert_eq(dq_legacy_post(q, &m, &t1), 0);
    cr_assert_eq(dq_legacy_post(q, &m, &t2), 0);
    cr_assert_neq(t1, t2);
    cr_assert_eq(dq_legacy_cancel(q, t1), 0);
    cr_assert_eq(discards, 1);
    cr_assert_eq(dq_legacy_cancel(q, t1), -ENOENT); /* double cancel */
    cr_assert_eq(dq_legacy_post_sync_barrier(q, &b), 0);
    cr_assert_eq(dq_legacy_cancel(q, b), -EINVAL); /* barrier token */
    cr_assert_eq(dq_legacy_remove_sync_barrier(q, b), 0);
    cr_assert_eq(dq_legacy_remove_sync_barrier(q, b), -ENOENT);
    cr_assert_eq(dq_legacy_cancel(q, b), -ENOENT); /* a removed barrier's: stale */
    cr_assert_eq(next_arg1(), 7);
    cr_assert_eq(dq_legacy_cancel(q, t2), -ENOENT); /* delivered */
    cr_assert_eq(discards, 1);
}

static void cb1(dq_msg *m)
{
    (void)m;
}
static void cb2(dq_msg *m)
{
    (void)m;
}

Test(legacy, remove_and_has_every_field_combination)
{
    static int obj1, obj2;
    for (uint32_t fields = 0; fields <= DQ_MATCH_ALL_FIELDS; fields++) {
        /* eight messages: every (what, obj, callback) choice among two */
        for (int i = 0; i < 8; i++) {
            dq_msg m = msg(&target_a, i & 1, i);
            m.obj = (i & 2) ? &obj2 : &obj1;
            m.callback = (i & 4) ? cb2 : cb1;
            cr_assert_eq(dq_legacy_post(q, &m, NULL), 0);
        }
        dq_msg other = msg(&target_b, 0, 100);
        cr_assert_eq(dq_legacy_post(q, &other, NULL), 0);
        dq_match mt = { .target = &target_a,
                        .fields = fields,
                        .what = 1,
                        .obj = &obj2,
                        .callback = cb2 };
        size_t expect = 8;
        for (uint32_t f = 1; f <= 4; f <<= 1)
            if (fields & f)
                expect /= 2;
        cr_assert(dq_legacy_has(q, &mt));
        cr_assert_eq(dq_legacy_remove(q, &mt), expect, "fields %u", fields);
        cr_assert(!dq_legacy_has(q, &mt));
        cr_assert_eq(dq_legacy_pending(q), 9 - expect);
        dq_match all = { .target = &target_a };
        dq_legacy_remove(q, &all);
        dq_match b = { .target = &target_b };
        cr_assert_eq(dq_legacy_remove(q, &b), 1);
        cr_assert_eq(dq_legacy_pending(q), 0);
    }
}

Test(legacy, barrier_holds_sync_passes_async)
{
    dq_msg m = msg(&target_a, 0, 1);
    cr_assert_eq(dq_legacy_post(q, &m, NULL), 0); /* before barrier */
    dq_token b;
    advance(1);
    cr_assert_eq(dq_legacy_post_sync_barrier(q, &b), 0);
    m.arg1 = 2;
    cr_assert_eq(dq_legacy_post(q, &m, NULL), 0);
    m.arg1 = 3;
    m.flags = DQ_ASYNC;
    cr_assert_eq(dq_legacy_post(q, &m, NULL), 0);
    m.arg1 = 4;
    m.flags = 0;
    cr_assert_eq(dq_legacy_post_at_front(q, &m, NULL), 0); /* ahead of it */
    cr_assert_eq(next_arg1(), 4);
    cr_assert_eq(next_arg1(), 1);
    cr_assert_eq(next_arg1(), 3);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN);
    cr_assert(dq_legacy_is_idle(q));
    cr_assert_eq(dq_legacy_pending(q), 1);
    cr_assert_eq(dq_legacy_remove_sync_barrier(q, b), 0);
    cr_assert_eq(next_arg1(), 2);
}

Test(legacy, quit_drops_everything)
{
    dq_msg m = msg(&target_a, 0, 1);
    dq_legacy_post(q, &m, NULL);
    dq_legacy_post_delayed(q, &m, 100, NULL);
    dq_legacy_quit(q);
    cr_assert_eq(discards, 2);
    cr_assert_eq(dq_legacy_post(q, &m, NULL), -ESHUTDOWN);
    dq_token t = 0;
    cr_assert_eq(dq_legacy_cancel(q, 2), -ENOENT, "gone, not refused");
    cr_assert_eq(dq_legacy_post_sync_barrier(q, &t), -ESHUTDOWN);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -ESHUTDOWN);
    dq_legacy_quit(q);
    cr_assert_eq(discards, 2);
}

Test(legacy, quit_safely_delivers_due)
{
    dq_msg m = msg(&target_a, 0, 1);
    dq_legacy_post(q, &m, NULL);
    m.arg1 = 2;
    dq_legacy_post_delayed(q, &m, 100, NULL);
    m.arg1 = 3;
    dq_legacy_post_at_front(q, &m, NULL);
    dq_legacy_quit_safely(q);
    cr_assert_eq(discards, 1);
    cr_assert_eq(discarded_arg1[0], 2);
    cr_assert_eq(next_arg1(), 3);
    cr_assert_eq(next_arg1(), 1);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -ESHUTDOWN);
    cr_assert_eq(dq_legacy_next(q, &out), -ESHUTDOWN);
}

Test(legacy, destroy_reports_pending)
{
    dq_msg m = msg(&target_a, 0, 1);
    dq_legacy_post(q, &m, NULL);
    dq_legacy_post_delayed(q, &m, INT64_MAX, NULL);
    dq_token b;
    dq_legacy_post_sync_barrier(q, &b);
    dq_legacy_destroy(q);
    q = NULL;
    cr_assert_eq(discards, 2); /* barriers are not reported */
}

static void *advance_later(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 2000000 };
    nanosleep(&ts, NULL);
    advance(50);
    return NULL;
}

static int idle_calls;
static bool idle_once(void *ctx)
{
    (void)ctx;
    idle_calls++;
    return false;
}
static bool idle_keep(void *ctx)
{
    (void)ctx;
    idle_calls++;
    return true;
}

Test(legacy, idle_handlers)
{
    idle_calls = 0;
    cr_assert_eq(dq_legacy_add_idle_handler(q, idle_once, NULL), 0);
    cr_assert_eq(dq_legacy_add_idle_handler(q, idle_keep, &idle_calls), 0);
    dq_msg out;
    pthread_t t;
    /* the deadline is taken before the clock can move */
    int64_t deadline = clk_now() + 10;
    pthread_create(&t, NULL, advance_later, NULL);
    cr_assert_eq(dq_legacy_next_until(q, &out, deadline), -ETIMEDOUT);
    pthread_join(t, NULL);
    cr_assert_eq(idle_calls, 2);
    cr_assert_eq(dq_legacy_remove_idle_handler(q, idle_once, NULL), -ENOENT);
    deadline = clk_now() + 10;
    pthread_create(&t, NULL, advance_later, NULL);
    cr_assert_eq(dq_legacy_next_until(q, &out, deadline), -ETIMEDOUT);
    pthread_join(t, NULL);
    cr_assert_eq(idle_calls, 3);
    cr_assert_eq(dq_legacy_remove_idle_handler(q, idle_keep, &idle_calls), 0);
    dq_legacy_quit(q);
    cr_assert_eq(dq_legacy_add_idle_handler(q, idle_keep, NULL), -ESHUTDOWN);
}

static void *other_consumer(void *arg)
{
    dq_msg out;
    return (void *)(intptr_t)dq_legacy_try_next(arg, &out);
}

Test(legacy, second_consumer_eperm)
{
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN);
    pthread_t t;
    void *rc;
    pthread_create(&t, NULL, other_consumer, q);
    pthread_join(t, &rc);
    cr_assert_eq((intptr_t)rc, -EPERM);
}

Test(legacy, blocking_next_follows_test_clock)
{
    dq_msg m = msg(&target_a, 0, 9);
    dq_legacy_post_delayed(q, &m, 50, NULL);
    pthread_t t;
    pthread_create(&t, NULL, advance_later, NULL);
    dq_msg out;
    cr_assert_eq(dq_legacy_next(q, &out), 0);
    cr_assert_eq(out.arg1, 9);
    pthread_join(t, NULL);
}

Test(legacy, quit_after_quit_safely_drops_the_rest)
{
    dq_msg m = msg(&target_a, 0, 1);
    dq_token b;
    dq_legacy_post(q, &m, NULL);
    dq_legacy_post_sync_barrier(q, &b);
    dq_legacy_quit_safely(q);
    cr_assert_eq(discards, 0);
    cr_assert_eq(dq_legacy_pending(q), 1, "the drain has not ended");
    dq_legacy_quit(q);
    cr_assert_eq(discards, 1);
    cr_assert_eq(dq_legacy_pending(q), 0);
    cr_assert_eq(dq_legacy_remove_sync_barrier(q, b), -ENOENT, "gone");
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -ESHUTDOWN);
}

Test(legacy, try_next_runs_idle_handlers)
{
    idle_calls = 0;
    dq_legacy_add_idle_handler(q, idle_once, NULL);
    dq_msg out;
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_legacy_try_next(q, &out), -EAGAIN);
    cr_assert_eq(idle_calls, 1); /* removed after false */
}
