/* SPDX-License-Identifier: Apache-2.0 */
/* Remove and has by criteria (every field combination), cancel by token. */
#include <pthread.h>
#include <time.h>

#include "test_util.h"

TestSuite(remove, .init = fixture_setup, .fini = fixture_teardown);

static void cb1(dq_msg *m)
{
    (void)m;
}
static void cb2(dq_msg *m)
{
    (void)m;
}
static int obj1, obj2;

/* 2 targets x 2 whats x 2 objs x 2 callbacks: 16 distinct messages */
static void post_grid(void)
{
    int32_t id = 0;
    for (int t = 0; t < 2; t++)
        for (int w = 0; w < 2; w++)
            for (int o = 0; o < 2; o++)
                for (int c = 0; c < 2; c++) {
                    dq_msg m = { .target = t ? &target_b : &target_a,
                                 .what = w,
                                 .arg1 = id++,
                                 .obj = o ? &obj2 : &obj1,
                                 .callback = c ? cb2 : cb1 };
                    cr_assert_eq(dq_post(q, &m, NULL), 0);
                }
}

Test(remove, every_field_combination)
{
    for (uint32_t fields = 0; fields <= DQ_MATCH_ALL_FIELDS; fields++) {
        post_grid();
        dq_match m = { .target = &target_a,
                       .fields = fields,
                       .what = 1,
                       .obj = &obj2,
                       .callback = cb2 };
        /* target fixes half; each asked-for field halves again */
        size_t expect = 8 >> __builtin_popcount(fields);
        cr_assert_eq(dq_has(q, &m), true);
        size_t before = atomic_load(&rec.discards);
        cr_assert_eq(dq_remove(q, &m), expect, "fields %u", fields);
        cr_assert_eq(atomic_load(&rec.discards) - before, expect,
                     "each removal reported once, before dq_remove returns");
        cr_assert_eq(dq_has(q, &m), false);
        cr_assert_eq(dq_remove(q, &m), 0);
        cr_assert_eq(dq_pending(q), 16 - expect);
        /* what is left is delivered, and matches nothing removed */
        dq_msg out;
        size_t left = 0;
        while (dq_try_next(q, &out) == 0) {
            bool matched = out.target == &target_a &&
                           (!(fields & DQ_MATCH_WHAT) || out.what == 1) &&
                           (!(fields & DQ_MATCH_OBJ) || out.obj == &obj2) &&
                           (!(fields & DQ_MATCH_CALLBACK) || out.callback == cb2);
            cr_assert(!matched, "a removed message was delivered");
            left++;
        }
        cr_assert_eq(left, 16 - expect);
    }
}

Test(remove, other_target_untouched)
{
    post_grid();
    dq_match m = { .target = &target_a };
    cr_assert_eq(dq_remove(q, &m), 8);
    int other;
    dq_match none = { .target = &other };
    cr_assert_eq(dq_remove(q, &none), 0);
    cr_assert_eq(dq_has(q, &none), false);
    cr_assert_eq(dq_pending(q), 8);
}

Test(remove, removes_swept_and_unswept_messages)
{
    /* some messages already in the looper's heap, some only on the stack */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(post_at(1, test_now() + 100), 0);
    cr_assert_eq(next_what(), NOTHING_DUE); /* sweeps them */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(post_at(1, test_now() + 100), 0);
    dq_match m = { .target = &target_a, .fields = DQ_MATCH_WHAT, .what = 1 };
    cr_assert_eq(dq_remove(q, &m), 20);
    test_advance(100);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(atomic_load(&rec.discards), 20);
}

Test(remove, cancel_by_token_is_exact)
{
    dq_token t[5];
    for (int i = 0; i < 5; i++) {
        dq_msg m = msg_what(&target_a, i);
        cr_assert_eq(dq_post(q, &m, &t[i]), 0);
    }
    cr_assert_eq(dq_cancel(q, t[2]), 0);
    cr_assert_eq(rec.what[0], 2);
    cr_assert_eq(next_what(), 0);
    cr_assert_eq(dq_cancel(q, t[4]), 0);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(next_what(), 3);
    cr_assert_eq(next_what(), NOTHING_DUE);
    cr_assert_eq(dq_cancel(q, t[0]), -ENOENT);
    cr_assert_eq(atomic_load(&rec.discards), 2);
}

Test(remove, cancel_the_top_of_the_stack_and_the_boundary)
{
    dq_token t1, t2;
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_at(q, &m, test_now() + 10, &t1), 0);
    cr_assert_eq(next_what(), NOTHING_DUE); /* t1 is the boundary and the top */
    cr_assert_eq(dq_cancel(q, t1), 0);
    cr_assert_eq(next_what(), NOTHING_DUE); /* unlinks the top */
    m.what = 2;
    cr_assert_eq(dq_post(q, &m, &t2), 0);
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(dq_pending(q), 0);
}

Test(remove, has_does_not_remove)
{
    cr_assert_eq(post_at(9, test_now()), 0);
    dq_match m = { .target = &target_a, .fields = DQ_MATCH_WHAT, .what = 9 };
    cr_assert(dq_has(q, &m));
    cr_assert(dq_has(q, &m));
    cr_assert_eq(next_what(), 9);
    cr_assert(!dq_has(q, &m));
}

/* Walkers on other threads (dq_pending here) count themselves in and out
   of the looper's grace periods with RMWs on one counter; racing walkers
   must leave it at zero, or no grace period ends again and retired nodes
   stay in limbo for good. */
struct walker_run {
    dq_queue *q;
    int64_t until;
};

static void *walk_until(void *arg)
{
    const struct walker_run *r = arg;
    while (real_ns() < r->until)
        for (int i = 0; i < 1000; i++)
            (void)dq_pending(r->q);
    return NULL;
}

Test(remove, racing_walkers_let_grace_periods_end, .timeout = 30)
{
    dq_msg m = msg_what(&target_a, 1), out;
    cr_assert_eq(dq_post_delayed(q, &m, 1000000000, NULL), 0);
    struct walker_run r = { q, real_ns() + 600000000 };
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, walk_until, &r), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    enum { N = 256 };
    for (int i = 0; i < N; i++) {
        dq_token tok;
        cr_assert_eq(dq_post_delayed(q, &m, 1000000000, &tok), 0);
        cr_assert_eq(dq_cancel(q, tok), 0);
    }
    for (int i = 0; i < 4; i++) /* idle steps end the grace periods */
        cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    /* what is left is at most the looper's give-back batch, one word */
    struct dq_pool_stats s;
    cr_assert_eq(dq_pool_stats(&s), 0);
    cr_assert_lt(s.nodes_limbo, 64, "%llu of %d retired nodes stuck in limbo",
                 (unsigned long long)s.nodes_limbo, N);
}
