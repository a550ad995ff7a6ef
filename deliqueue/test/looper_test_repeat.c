/* SPDX-License-Identifier: Apache-2.0 */
/* Repeating posts on the manual clock: both modes on time, late and very
   late (never a burst), overrunning dispatches, the end of a delivery
   with dq_next; cancelled while pending, inside their own delivery,
   from another thread while being delivered, and racing the re-arm;
   ended by quits, by dq_remove and by the last dq_unref; one token and
   one discard throughout. */
#include "looper_test_util.h"

TestSuite(repeat, .init = fixture_setup, .fini = fixture_teardown, .timeout = 60);

static deliveries got;
static dq_token tok;
/* what each delivery's callback does besides recording it */
static int64_t dispatch_takes; /* advance the manual clock by this */
static bool cancel_inside;     /* cancel the post's own token */
static int cancel_rc;
static bool remove_inside;
static size_t removed_inside;
static bool has_inside;

static void on_occurrence(dq_msg *m)
{
    deliveries_add(&got, m);
    if (has_inside) {
        dq_match match = { .target = &target_a };
        has_inside = dq_has(q, &match);
    }
    if (cancel_inside)
        cancel_rc = dq_cancel(q, tok);
    if (remove_inside) {
        dq_match match = { .target = &target_a };
        removed_inside = dq_remove(q, &match);
    }
    if (dispatch_takes > 0)
        test_advance(dispatch_takes);
}

static void reset(void)
{
    memset(&got, 0, sizeof(got));
    tok = 0;
    dispatch_takes = 0;
    cancel_inside = remove_inside = has_inside = false;
    cancel_rc = 1;
    removed_inside = 0;
}

static int post_rep(int64_t first, int64_t period, uint32_t mode)
{
    dq_msg m = { .target = &target_a, .what = 7, .callback = on_occurrence };
    return dq_post_repeating(q, &m, first, period, mode, &tok);
}

/* Run everything due now; how many were delivered. */
static int run_due(void)
{
    int before = atomic_load(&got.count), rc;
    while ((rc = dq_loop_once(q, 0)) == DQ_ONCE_MESSAGE)
        ;
    cr_assert_eq(rc, DQ_ONCE_TIMEOUT);
    return atomic_load(&got.count) - before;
}

static int64_t last_when(void)
{
    int n = atomic_load(&got.count);
    cr_assert(n > 0);
    return got.when[n - 1];
}

/* ---- schedules ------------------------------------------------------------ */

Test(repeat, fixed_rate_on_time)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0 + 100, 10, DQ_FIXED_RATE), 0);
    cr_assert_eq(run_due(), 0);
    test_advance(99);
    cr_assert_eq(run_due(), 0, "never before first");
    for (int k = 0; k < 20; k++) {
        test_advance(k == 0 ? 1 : 10);
        cr_assert_eq(run_due(), 1, "occurrence %d", k);
        cr_assert_eq(last_when(), t0 + 100 + 10 * k, "when is its own due time");
    }
    cr_assert_eq(dq_pending(q), 1, "one message, however many occurrences");
}

Test(repeat, fixed_rate_late_delivers_once_and_skips_missed_periods)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0 + 100, 10, DQ_FIXED_RATE), 0);
    test_advance(100);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 100);
    /* 3.5 periods late: one late occurrence (110), 120 and 130 skipped */
    test_advance(35);
    cr_assert_eq(run_due(), 1, "one late occurrence, not a burst");
    cr_assert_eq(last_when(), t0 + 110);
    test_advance(4);
    cr_assert_eq(run_due(), 0, "nothing before the grid's next point");
    test_advance(1);
    cr_assert_eq(run_due(), 1, "back on the grid");
    cr_assert_eq(last_when(), t0 + 140);
    test_advance(10);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 150);
}

Test(repeat, fixed_rate_very_late_is_one_delivery)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0 + 10, 10, DQ_FIXED_RATE), 0);
    test_advance(10);
    cr_assert_eq(run_due(), 1);
    test_advance(1000 * 10 + 3); /* a thousand periods */
    cr_assert_eq(run_due(), 1, "never a burst");
    cr_assert_eq(last_when(), t0 + 20);
    int64_t now = test_now();
    test_advance(7); /* to the next grid point: t0 + 10 * 1002 */
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), now + 7);
    cr_assert_eq((last_when() - t0) % 10, 0, "on the first + k * period grid");
}

Test(repeat, fixed_rate_overrunning_dispatch_goes_back_to_the_grid)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0 + 10, 10, DQ_FIXED_RATE), 0);
    test_advance(10);
    dispatch_takes = 35; /* each dispatch overruns 3.5 periods */
    cr_assert_eq(run_due(), 1);
    /* ended at t0 + 45: the next is the grid point 50, due later */
    cr_assert_eq(run_due(), 0);
    dispatch_takes = 0;
    test_advance(4);
    cr_assert_eq(run_due(), 0);
    test_advance(1);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 50);
}

Test(repeat, fixed_rate_first_in_the_past_is_due_at_once)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0 - 1000, 100, DQ_FIXED_RATE), 0);
    /* the first occurrence at once, late; then the grid t0 - 1000 + 100 k
       from its first point not before now, t0, which is due now too; the
       nine points between were missed and are skipped */
    cr_assert_eq(run_due(), 2);
    cr_assert_eq(got.when[0], t0 - 1000);
    cr_assert_eq(got.when[1], t0);
    cr_assert_eq(run_due(), 0);
    test_advance(100);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 100);
}

Test(repeat, first_zero_is_a_time_not_the_front)
{
    reset();
    cr_assert_eq(post_rep(0, INT64_C(1) << 40, DQ_FIXED_DELAY), 0);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.what, 1, "the front post comes first");
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.what, 7);
    cr_assert_eq(out.when, 0);
}

Test(repeat, fixed_delay_counts_from_the_end_of_the_dispatch)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0 + 10, 100, DQ_FIXED_DELAY), 0);
    test_advance(10);
    dispatch_takes = 7;
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 10);
    dispatch_takes = 0;
    /* ended at t0 + 17: next due t0 + 117 */
    test_advance(99);
    cr_assert_eq(run_due(), 0);
    test_advance(1);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 117);
    /* very late: delivered once, the next period counted from its end */
    test_advance(5000);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 217);
    cr_assert_eq(run_due(), 0);
    test_advance(100);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(last_when(), t0 + 5117 + 100);
}

Test(repeat, with_dq_next_the_delivery_ends_at_the_next_call)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0, 50, DQ_FIXED_DELAY), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.when, t0);
    cr_assert_not_null(out.callback);
    test_advance(20);                            /* the consumer handles it for 20 ns */
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* ends it: next t0 + 70 */
    test_advance(49);
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    test_advance(1);
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.when, t0 + 70);
}

Test(repeat, one_token_for_every_occurrence)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0, 10, DQ_FIXED_RATE), 0);
    dq_token first = tok;
    for (int k = 0; k < 5; k++) {
        cr_assert_eq(run_due(), 1);
        test_advance(10);
    }
    cr_assert_eq(tok, first);
    cr_assert_eq(dq_cancel(q, first), 0);
    cr_assert_eq(run_due(), 0);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

/* ---- cancelling -------------------------------------------------------- */

Test(repeat, cancel_while_pending)
{
    for (uint32_t mode = 0; mode < 2; mode++) {
        reset();
        memset(&rec, 0, sizeof(rec));
        int64_t t0 = test_now();
        cr_assert_eq(post_rep(t0 + 10, 10, mode), 0);
        cr_assert_eq(dq_cancel(q, tok), 0);
        cr_assert_eq(atomic_load(&rec.discards), 1);
        cr_assert_eq(rec.what[0], 7);
        cr_assert_eq(dq_cancel(q, tok), -ENOENT, "a second cancel");
        test_advance(1000);
        cr_assert_eq(run_due(), 0);
        cr_assert_eq(dq_pending(q), 0);
        cr_assert_eq(atomic_load(&rec.discards), 1);
    }
}

Test(repeat, cancel_after_some_deliveries)
{
    for (uint32_t mode = 0; mode < 2; mode++) {
        reset();
        memset(&rec, 0, sizeof(rec));
        int64_t t0 = test_now();
        cr_assert_eq(post_rep(t0, 10, mode), 0);
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(run_due(), 1);
            test_advance(10);
        }
        cr_assert_eq(dq_cancel(q, tok), 0);
        cr_assert_eq(run_due(), 0);
        test_advance(1000);
        cr_assert_eq(run_due(), 0);
        cr_assert_eq(atomic_load(&rec.discards), 1);
        cr_assert_eq(dq_cancel(q, tok), -ENOENT);
    }
}

Test(repeat, cancel_inside_its_own_delivery)
{
    for (uint32_t mode = 0; mode < 2; mode++) {
        reset();
        memset(&rec, 0, sizeof(rec));
        int64_t t0 = test_now();
        cr_assert_eq(post_rep(t0, 10, mode), 0);
        cr_assert_eq(run_due(), 1);
        test_advance(10);
        cancel_inside = true;
        /* one iteration: the dispatch, then its re-arm, which must see
           the cancel (the next iteration's collect would retire the node
           whatever the re-arm did) */
        cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
        cr_assert_eq(cancel_rc, 0, "live during its delivery");
        cr_assert_eq(atomic_load(&rec.discards), 1, "its end reported, once");
        cr_assert_eq(dq_pending(q), 0, "re-armed after its cancel");
        cr_assert_eq(dq_cancel(q, tok), -ENOENT, "re-armed after its cancel");
        cr_assert_eq(atomic_load(&rec.discards), 1);
        cancel_inside = false;
        test_advance(1000);
        cr_assert_eq(run_due(), 0, "not re-armed after the cancel");
        cr_assert_eq(dq_cancel(q, tok), -ENOENT);
        cr_assert_eq(dq_pending(q), 0);
        cr_assert_eq(atomic_load(&rec.discards), 1);
    }
}

Test(repeat, cancel_between_dq_next_and_the_next_call)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0, 10, DQ_FIXED_RATE), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(dq_pending(q), 1, "live while the consumer holds it");
    dq_match match = { .target = &target_a };
    cr_assert(dq_has(q, &match));
    cr_assert_eq(dq_cancel(q, tok), 0);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(dq_pending(q), 0);
    test_advance(1000);
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_cancel(q, tok), -ENOENT);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(repeat, has_and_remove_inside_its_own_delivery)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0, 10, DQ_FIXED_DELAY), 0);
    has_inside = true;
    remove_inside = true;
    cr_assert_eq(run_due(), 1);
    cr_assert(has_inside, "dq_has sees it during its delivery");
    cr_assert_eq(removed_inside, 1);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    test_advance(1000);
    cr_assert_eq(run_due(), 0);
    cr_assert_eq(dq_cancel(q, tok), -ENOENT);
}

Test(repeat, remove_by_criteria_while_pending)
{
    reset();
    cr_assert_eq(post_rep(test_now() + 10, 10, DQ_FIXED_RATE), 0);
    dq_match match = { .target = &target_a, .fields = DQ_MATCH_WHAT, .what = 7 };
    cr_assert(dq_has(q, &match));
    cr_assert_eq(dq_remove(q, &match), 1);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(dq_cancel(q, tok), -ENOENT);
}

/* Cancelled from another thread while a delivery runs: 0, reported at
   once, and no occurrence after that delivery. */
static _Atomic int in_delivery, let_go, deliveries_seen;

static void held_occurrence(dq_msg *m)
{
    (void)m;
    atomic_fetch_add(&deliveries_seen, 1);
    atomic_store(&in_delivery, 1);
    cr_assert(wait_flag(&let_go));
    atomic_store(&let_go, 0);
}

Test(repeat, cancel_from_another_thread_during_a_delivery)
{
    for (uint32_t mode = 0; mode < 2; mode++) {
        memset(&rec, 0, sizeof(rec));
        atomic_store(&in_delivery, 0);
        atomic_store(&let_go, 0);
        atomic_store(&deliveries_seen, 0);
        dq_token t;
        dq_msg m = { .target = &target_a, .what = 9, .callback = held_occurrence };
        cr_assert_eq(dq_post_repeating(q, &m, test_now(), 1, mode, &t), 0);
        loop_thread l;
        loop_thread_start(&l, q);
        cr_assert(wait_flag(&in_delivery));
        cr_assert_eq(dq_cancel(q, t), 0, "live during its delivery");
        cr_assert_eq(atomic_load(&rec.discards), 1,
                     "reported before dq_cancel returns");
        cr_assert_eq(dq_cancel(q, t), -ENOENT);
        atomic_store(&let_go, 1);
        /* the clock moves on; the loop would deliver a re-armed one */
        for (int i = 0; i < 20; i++) {
            test_advance(10);
            sleep_ns(MS);
        }
        cr_assert_eq(atomic_load(&deliveries_seen), 1, "delivered after the cancel");
        cr_assert_eq(loop_thread_stop(&l), 0);
        cr_assert_eq(atomic_load(&rec.discards), 1);
        /* a fresh queue for the next mode: the loop thread consumed q */
        dq_unref(q);
        dq_options o = recording_options();
        q = dq_create(&o);
    }
}

/* Cancels racing the re-arm on the real clock: each post ends with one
   discard, and at most the delivery in progress comes after the cancel. */
static _Atomic int race_count;

static void race_occurrence(dq_msg *m)
{
    (void)m;
    atomic_fetch_add(&race_count, 1);
}

Test(repeat, cancels_racing_the_rearm_keep_exactly_once)
{
    fixture_real_time();
    loop_thread l;
    loop_thread_start(&l, q);
    for (int round = 0; round < 200; round++) {
        size_t before = atomic_load(&rec.discards);
        atomic_store(&race_count, 0);
        dq_token t;
        dq_msg m = { .target = &target_a, .what = round, .callback = race_occurrence };
        cr_assert_eq(dq_post_repeating(q, &m, 0, 1000, round & 1, &t), 0);
        while (atomic_load(&race_count) < 1 + round % 5)
            ;
        cr_assert_eq(dq_cancel(q, t), 0, "round %d", round);
        int at_cancel = atomic_load(&race_count);
        cr_assert_eq(dq_cancel(q, t), -ENOENT);
        cr_assert_eq(atomic_load(&rec.discards), before + 1, "round %d", round);
        sleep_ns(200000);
        cr_assert(atomic_load(&race_count) <= at_cancel + 1,
                  "round %d: %d deliveries after the cancel", round,
                  atomic_load(&race_count) - at_cancel);
    }
    cr_assert_eq(loop_thread_stop(&l), 0);
    cr_assert_eq(atomic_load(&rec.discards), 200);
}

/* ---- quitting and the last reference ------------------------------------ */

Test(repeat, a_quit_ends_it_reported_once)
{
    reset();
    cr_assert_eq(post_rep(test_now(), 10, DQ_FIXED_RATE), 0);
    cr_assert_eq(run_due(), 1);
    dq_quit(q);
    cr_assert_eq(dq_loop_once(q, 0), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(dq_cancel(q, tok), -ENOENT);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_repeating(q, &m, 0, 10, DQ_FIXED_RATE, NULL), -ESHUTDOWN);
}

static void quit_inside(dq_msg *m)
{
    deliveries_add(&got, m);
    dq_quit(q);
}

Test(repeat, a_quit_inside_its_delivery_ends_it)
{
    for (uint32_t mode = 0; mode < 2; mode++) {
        reset();
        memset(&rec, 0, sizeof(rec));
        dq_msg m = { .target = &target_a, .what = 3, .callback = quit_inside };
        cr_assert_eq(dq_post_repeating(q, &m, test_now(), 10, mode, &tok), 0);
        cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
        cr_assert_eq(atomic_load(&rec.discards), 1, "ended at its re-arm, reported");
        cr_assert_eq(dq_loop_once(q, 0), -ESHUTDOWN);
        cr_assert_eq(atomic_load(&rec.discards), 1, "once");
        cr_assert_eq(atomic_load(&got.count), 1);
        dq_unref(q);
        dq_options o = recording_options();
        q = dq_create(&o);
    }
}

static void quit_safely_inside(dq_msg *m)
{
    deliveries_add(&got, m);
    dq_quit_safely(q);
}

Test(repeat, quit_safely_delivers_what_is_due_and_ends_it)
{
    reset();
    /* due later than the quit: trimmed inside dq_quit_safely */
    cr_assert_eq(post_rep(test_now() + 100, 10, DQ_FIXED_RATE), 0);
    dq_quit_safely(q);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(dq_loop_once(q, 0), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 1);

    /* quit_safely during a delivery whose next occurrence is due by then
       (FIXED_RATE, late): the drain delivers nothing more of it */
    dq_unref(q);
    dq_options o = recording_options();
    q = dq_create(&o);
    reset();
    memset(&rec, 0, sizeof(rec));
    dq_msg m = { .target = &target_a, .what = 4, .callback = quit_safely_inside };
    cr_assert_eq(dq_post_repeating(q, &m, test_now() - 100, 1, DQ_FIXED_RATE, &tok), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(dq_loop_once(q, 0), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&got.count), 1);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(repeat, the_last_unref_reports_one_handed_out_by_dq_next)
{
    reset();
    cr_assert_eq(post_rep(test_now(), 10, DQ_FIXED_RATE), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    dq_unref(q); /* the consumer never called again */
    q = NULL;
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(repeat, a_pending_one_is_reported_once_by_the_last_unref)
{
    reset();
    cr_assert_eq(post_rep(test_now() + 10, 10, DQ_FIXED_DELAY), 0);
    dq_unref(q);
    q = NULL;
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

/* ---- errors ------------------------------------------------------------- */

Test(repeat, bad_input_is_einval_and_changes_nothing)
{
    dq_msg m = msg_what(&target_a, 1);
    dq_msg no_target = msg_what(NULL, 1);
    dq_msg bad_flags = msg_what(&target_a, 1);
    bad_flags.flags = 2;
    dq_token t = 77;
    cr_assert_eq(dq_post_repeating(NULL, &m, 0, 10, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, NULL, 0, 10, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &no_target, 0, 10, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &bad_flags, 0, 10, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &m, -1, 10, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &m, INT64_MIN, 10, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &m, 0, 0, DQ_FIXED_RATE, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &m, 0, -5, DQ_FIXED_DELAY, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &m, 0, 10, 2, &t), -EINVAL);
    cr_assert_eq(dq_post_repeating(q, &m, 0, 10, UINT32_MAX, &t), -EINVAL);
    cr_assert_eq(t, 77, "a rejected post writes no token");
    cr_assert_eq(dq_pending(q), 0);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}

Test(repeat, saturates_at_the_end_of_time)
{
    reset();
    int64_t t0 = test_now();
    cr_assert_eq(post_rep(t0, INT64_MAX, DQ_FIXED_RATE), 0);
    cr_assert_eq(run_due(), 1);
    test_advance(INT64_C(1) << 62);
    cr_assert_eq(run_due(), 0, "the next occurrence saturates at INT64_MAX");
    cr_assert_eq(dq_pending(q), 1);
    dq_msg m = { .target = &target_a, .what = 7, .callback = on_occurrence };
    cr_assert_eq(dq_post_repeating(q, &m, t0, INT64_MAX, DQ_FIXED_DELAY, NULL), 0);
    cr_assert_eq(run_due(), 1);
    cr_assert_eq(run_due(), 0);
    cr_assert_eq(dq_pending(q), 2);
}
