/* SPDX-License-Identifier: Apache-2.0 */
/* dq_invoke and dq_call: inline on the consumer, posted elsewhere; the
   call's wait, its timeout (fn never runs after -ETIMEDOUT), quits that
   release its waiter, a call from inside fn to another queue, and two
   consumers calling each other until the timeout. */
#include "looper_test_util.h"

TestSuite(invoke, .init = fixture_setup, .fini = fixture_teardown, .timeout = 60);

typedef struct probe {
    _Atomic int runs;
    _Atomic int started;
    _Atomic int release; /* fn waits for it when hold is set */
    bool hold;
    pthread_t ran_on;
    int value;        /* plain: written by fn, read after dq_call */
    dq_queue *call_q; /* fn calls dq_call on it when set */
    int call_rc;
    int64_t call_timeout;
    _Atomic int *arrive; /* fn meets another fn here before calling */
} probe;

static void probe_fn(void *ctx)
{
    probe *p = ctx;
    p->ran_on = pthread_self();
    atomic_store(&p->started, 1);
    if (p->arrive != NULL)
        spin_start(p->arrive, 2);
    if (p->call_q != NULL)
        p->call_rc = dq_call(p->call_q, probe_fn, p + 1, p->call_timeout);
    if (p->hold)
        cr_assert(wait_flag(&p->release), "fn was never released");
    p->value = 42;
    atomic_fetch_add(&p->runs, 1);
}

/* ---- dq_invoke -------------------------------------------------------------- */

Test(invoke, on_the_consumer_it_runs_inline)
{
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* this thread consumes q */
    probe p = { 0 };
    cr_assert_eq(dq_invoke(q, probe_fn, &p), 0);
    cr_assert_eq(atomic_load(&p.runs), 1, "ran before dq_invoke returned");
    cr_assert(pthread_equal(p.ran_on, pthread_self()));
    cr_assert_eq(dq_pending(q), 0, "nothing posted");
}

static deliveries order;

static void order_cb(dq_msg *m)
{
    deliveries_add(&order, m);
}

static void order_fn(void *ctx)
{
    dq_msg m = { .what = (int32_t)(intptr_t)ctx };
    deliveries_add(&order, &m);
}

Test(invoke, elsewhere_it_is_posted_fifo_with_due_now_posts)
{
    memset(&order, 0, sizeof(order));
    /* this thread is not the consumer yet: everything is posted */
    dq_msg m1 = { .target = &target_a, .what = 1, .callback = order_cb };
    dq_msg m3 = { .target = &target_a, .what = 3, .callback = order_cb };
    cr_assert_eq(dq_post(q, &m1, NULL), 0);
    cr_assert_eq(dq_invoke(q, order_fn, (void *)(intptr_t)2), 0);
    cr_assert_eq(dq_post(q, &m3, NULL), 0);
    cr_assert_eq(dq_pending(q), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    cr_assert_eq(atomic_load(&order.count), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(order.what[i], i + 1, "delivery %d", i);
}

Test(invoke, a_dq_next_consumer_runs_the_callback)
{
    probe p = { 0 };
    cr_assert_eq(dq_invoke(q, probe_fn, &p), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert(dq_is_invoke(&out));
    cr_assert_not_null(out.callback);
    cr_assert_eq(atomic_load(&p.runs), 0);
    out.callback(&out);
    cr_assert_eq(atomic_load(&p.runs), 1);
    dq_msg plain = msg_what(&target_a, 1);
    cr_assert_not(dq_is_invoke(&plain));
    cr_assert_not(dq_is_invoke(NULL));
}

static _Atomic int invoke_discards;

static void count_invoke_discards(const dq_msg *m, void *ctx)
{
    (void)ctx;
    if (dq_is_invoke(m))
        atomic_fetch_add(&invoke_discards, 1);
}

Test(invoke, a_quit_discards_and_reports_it)
{
    atomic_store(&invoke_discards, 0);
    dq_options o = { .on_discard = count_invoke_discards };
    dq_queue *d = dq_create(&o);
    probe p = { 0 };
    cr_assert_eq(dq_invoke(d, probe_fn, &p), 0);
    dq_quit(d);
    cr_assert_eq(dq_invoke(d, probe_fn, &p), -ESHUTDOWN);
    dq_msg out;
    cr_assert_eq(dq_next(d, &out), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&invoke_discards), 1);
    cr_assert_eq(atomic_load(&p.runs), 0);
    /* on the consumer, after the quit: refused too, fn not run */
    cr_assert_eq(dq_invoke(d, probe_fn, &p), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&p.runs), 0);
    dq_unref(d);
}

Test(invoke, errors)
{
    probe p = { 0 };
    cr_assert_eq(dq_invoke(NULL, probe_fn, &p), -EINVAL);
    cr_assert_eq(dq_invoke(q, NULL, &p), -EINVAL);
    cr_assert_eq(dq_pending(q), 0);
    cr_assert_eq(dq_call(NULL, probe_fn, &p, 0), -EINVAL);
    cr_assert_eq(dq_call(q, NULL, &p, 0), -EINVAL);
    cr_assert_eq(dq_call(q, probe_fn, &p, -1), -EINVAL);
    cr_assert_eq(dq_call(q, probe_fn, &p, INT64_MIN), -EINVAL);
    cr_assert_eq(dq_pending(q), 0);
    cr_assert_eq(atomic_load(&rec.discards), 0);
    dq_quit(q);
    cr_assert_eq(dq_call(q, probe_fn, &p, INT64_MAX), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&p.runs), 0);
    cr_assert_eq(atomic_load(&rec.discards), 0, "a refused call is no message");
}

/* ---- dq_call -------------------------------------------------------------- */

Test(invoke, call_runs_on_the_consumer_and_its_writes_are_visible)
{
    loop_thread l;
    loop_thread_start(&l, q);
    for (int i = 0; i < 100; i++) {
        probe p = { 0 };
        cr_assert_eq(dq_call(q, probe_fn, &p, INT64_MAX), 0);
        cr_assert_eq(atomic_load(&p.runs), 1);
        cr_assert_eq(p.value, 42); /* a plain read: TSan checks the order */
        cr_assert(pthread_equal(p.ran_on, l.thread));
    }
    cr_assert_eq(loop_thread_stop(&l), 0);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}

Test(invoke, call_on_the_consumer_runs_inline)
{
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    probe p = { 0 };
    cr_assert_eq(dq_call(q, probe_fn, &p, 0), 0);
    cr_assert_eq(atomic_load(&p.runs), 1);
    cr_assert_eq(dq_pending(q), 0);
}

Test(invoke, call_times_out_in_real_time_and_fn_never_runs)
{
    /* no consumer at all, and the manual clock stands still: the timeout
       is real time */
    probe p = { 0 };
    int64_t t0 = real_ns();
    cr_assert_eq(dq_call(q, probe_fn, &p, 30 * MS), -ETIMEDOUT);
    int64_t took = real_ns() - t0;
    cr_assert(took >= 30 * MS, "returned after %lld ns", (long long)took);
    cr_assert_eq(atomic_load(&rec.discards), 1, "the cancelled call is reported once");
    cr_assert_eq(dq_pending(q), 0);
    /* a consumer now finds nothing: fn never runs */
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    cr_assert_eq(atomic_load(&p.runs), 0);
}

static void *call_with_zero_timeout(void *arg)
{
    probe *p = arg;
    return (void *)(intptr_t)dq_call(q, probe_fn, p, 0);
}

Test(invoke, zero_timeout_with_an_unready_consumer_times_out_at_once)
{
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* this thread consumes */
    probe p = { 0 };
    pthread_t t;
    void *rc;
    cr_assert_eq(pthread_create(&t, NULL, call_with_zero_timeout, &p), 0);
    pthread_join(t, &rc);
    cr_assert_eq((int)(intptr_t)rc, -ETIMEDOUT);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    cr_assert_eq(atomic_load(&p.runs), 0);
}

typedef struct caller {
    pthread_t thread;
    dq_queue *q;
    probe *p;
    int64_t timeout;
    _Atomic int done;
    int rc;
} caller;

static void *caller_main(void *arg)
{
    caller *c = arg;
    c->rc = dq_call(c->q, probe_fn, c->p, c->timeout);
    atomic_store(&c->done, 1);
    return NULL;
}

static void caller_start(caller *c, dq_queue *queue, probe *p, int64_t timeout)
{
    c->q = queue;
    c->p = p;
    c->timeout = timeout;
    atomic_store(&c->done, 0);
    cr_assert_eq(pthread_create(&c->thread, NULL, caller_main, c), 0);
}

Test(invoke, call_started_when_the_time_is_up_waits_for_fn)
{
    loop_thread l;
    loop_thread_start(&l, q);
    probe p = { .hold = true };
    caller c;
    caller_start(&c, q, &p, 300 * MS);
    cr_assert(wait_flag(&p.started), "fn did not start");
    sleep_ns(600 * MS); /* well past the timeout, fn still running */
    cr_assert_eq(atomic_load(&c.done), 0, "dq_call returned while fn ran");
    atomic_store(&p.release, 1);
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, 0);
    cr_assert_eq(p.value, 42);
    cr_assert_eq(atomic_load(&rec.discards), 0);
    cr_assert_eq(loop_thread_stop(&l), 0);
}

/* A consumer held inside a callback until released: what is posted after
   waits behind it. */
static _Atomic int blocker_in, blocker_release;

static void blocker(dq_msg *m)
{
    (void)m;
    atomic_store(&blocker_in, 1);
    cr_assert(wait_flag(&blocker_release), "blocker never released");
}

static void block_consumer(loop_thread *l)
{
    atomic_store(&blocker_in, 0);
    atomic_store(&blocker_release, 0);
    loop_thread_start(l, q);
    dq_msg m = { .target = &target_b, .callback = blocker };
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    cr_assert(wait_flag(&blocker_in));
}

Test(invoke, a_quit_releases_the_waiter_at_once_while_the_consumer_is_busy)
{
    loop_thread l;
    block_consumer(&l);
    probe p = { 0 };
    caller c;
    caller_start(&c, q, &p, INT64_MAX);
    while (dq_pending(q) == 0)
        sleep_ns(MS);
    dq_quit(q);
    int64_t t0 = real_ns();
    while (atomic_load(&c.done) == 0 && real_ns() - t0 < PROMPT_NS)
        sleep_ns(MS);
    cr_assert_eq(atomic_load(&c.done), 1,
                 "the waiter hangs while the consumer is busy");
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, -ESHUTDOWN);
    atomic_store(&blocker_release, 1);
    pthread_join(l.thread, NULL);
    cr_assert_eq(l.rc, 0);
    cr_assert_eq(atomic_load(&p.runs), 0, "fn ran after dq_call said -ESHUTDOWN");
    cr_assert_eq(atomic_load(&rec.discards), 1, "the call's message, reported once");
}

Test(invoke, a_quit_releases_a_waiter_on_a_queue_nobody_consumes)
{
    probe p = { 0 };
    caller c;
    caller_start(&c, q, &p, INT64_MAX);
    while (dq_pending(q) == 0)
        sleep_ns(MS);
    dq_quit(q);
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, -ESHUTDOWN);
    cr_assert_eq(atomic_load(&p.runs), 0);
    /* the message is reported when the queue is torn down */
    dq_unref(q);
    q = NULL;
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(invoke, a_call_taken_by_a_dq_next_consumer_waits_for_its_callback)
{
    probe p = { 0 };
    caller c;
    caller_start(&c, q, &p, 200 * MS);
    while (dq_pending(q) == 0)
        sleep_ns(MS);
    dq_quit_safely(q); /* due now: the drain delivers it ... */
    dq_msg out;
    /* ... this consumer takes it and does not run its callback: the
       waiter waits for it (fn started), until the consumer runs it */
    cr_assert_eq(dq_next(q, &out), 0);
    cr_assert(dq_is_invoke(&out));
    sleep_ns(400 * MS); /* past the timeout: taken, so the call waits */
    cr_assert_eq(atomic_load(&c.done), 0);
    out.callback(&out);
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, 0);
    cr_assert_eq(dq_next(q, &out), -ESHUTDOWN);
}

Test(invoke, quit_safely_runs_a_pending_call_in_the_drain)
{
    loop_thread l;
    block_consumer(&l);
    probe p = { 0 };
    caller c;
    caller_start(&c, q, &p, INT64_MAX);
    while (dq_pending(q) == 0)
        sleep_ns(MS);
    dq_quit_safely(q);
    atomic_store(&blocker_release, 1);
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, 0);
    cr_assert_eq(atomic_load(&p.runs), 1);
    pthread_join(l.thread, NULL);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}

Test(invoke, a_call_held_by_a_barrier_to_the_drain_end_is_eshutdown)
{
    dq_msg out;
    dq_token b;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    probe p = { 0 };
    caller c;
    caller_start(&c, q, &p, INT64_MAX);
    while (dq_pending(q) == 0)
        sleep_ns(MS);
    dq_quit_safely(q);
    /* the drain: nothing deliverable; the teardown drops the held call */
    cr_assert_eq(dq_next(q, &out), -ESHUTDOWN);
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, -ESHUTDOWN);
    cr_assert_eq(atomic_load(&p.runs), 0);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(invoke, a_call_removed_by_criteria_is_ecanceled)
{
    /* learn the invoke messages' target from one */
    probe p0 = { 0 };
    cr_assert_eq(dq_invoke(q, probe_fn, &p0), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0); /* this thread consumes now */
    cr_assert(dq_is_invoke(&out));
    probe p = { 0 };
    caller c;
    caller_start(&c, q, &p, INT64_MAX);
    while (dq_pending(q) == 0)
        sleep_ns(MS);
    dq_match match = { .target = out.target };
    cr_assert_eq(dq_remove(q, &match), 1);
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.rc, -ECANCELED);
    cr_assert_eq(atomic_load(&p.runs), 0);
    cr_assert_eq(atomic_load(&rec.discards), 1);
}

Test(invoke, a_call_from_inside_fn_to_another_queue)
{
    dq_queue *b = dq_create(NULL);
    loop_thread la, lb;
    loop_thread_start(&la, q);
    loop_thread_start(&lb, b);
    probe p[2] = { { .call_q = b, .call_timeout = INT64_MAX }, { 0 } };
    cr_assert_eq(dq_call(q, probe_fn, &p[0], INT64_MAX), 0);
    cr_assert_eq(p[0].call_rc, 0);
    cr_assert_eq(atomic_load(&p[1].runs), 1);
    cr_assert_eq(p[1].value, 42);
    cr_assert(pthread_equal(p[0].ran_on, la.thread));
    cr_assert(pthread_equal(p[1].ran_on, lb.thread));
    cr_assert_eq(loop_thread_stop(&la), 0);
    cr_assert_eq(loop_thread_stop(&lb), 0);
    dq_unref(b);
}

Test(invoke, two_consumers_calling_each_other_wait_until_the_timeout)
{
    dq_options o = recording_options();
    dq_queue *b = dq_create(&o);
    loop_thread la, lb;
    loop_thread_start(&la, q);
    loop_thread_start(&lb, b);
    _Atomic int arrive = 0;
    /* fn on A calls B, fn on B calls A, both inside their callbacks at
       once: neither consumer can run the other's call */
    probe pa[2] = { { .call_q = b, .call_timeout = 100 * MS, .arrive = &arrive },
                    { 0 } };
    probe pb[2] = { { .call_q = q, .call_timeout = 100 * MS, .arrive = &arrive },
                    { 0 } };
    int64_t t0 = real_ns();
    cr_assert_eq(dq_invoke(q, probe_fn, &pa[0]), 0);
    cr_assert_eq(dq_invoke(b, probe_fn, &pb[0]), 0);
    while (atomic_load(&pa[0].runs) == 0 || atomic_load(&pb[0].runs) == 0)
        sleep_ns(MS);
    cr_assert(real_ns() - t0 >= 100 * MS, "the calls waited for each other");
    /* the first timeout breaks the cycle: that call is cancelled, and the
       other may then complete (its consumer is free again) */
    int timeouts = 0;
    probe *outer[2] = { &pa[0], &pb[0] };
    for (int i = 0; i < 2; i++) {
        int rc = outer[i]->call_rc;
        cr_assert(rc == 0 || rc == -ETIMEDOUT, "call %d: %d", i, rc);
        cr_assert_eq(atomic_load(&outer[i][1].runs), rc == 0 ? 1 : 0,
                     "call %d: fn ran iff the call answered 0", i);
        timeouts += rc == -ETIMEDOUT;
    }
    cr_assert(timeouts >= 1, "only the timeout ends the cycle");
    cr_assert_eq(loop_thread_stop(&la), 0);
    cr_assert_eq(loop_thread_stop(&lb), 0);
    dq_unref(b);
    /* each cancelled call reported once (both queues record into rec) */
    cr_assert_eq((int)atomic_load(&rec.discards), timeouts);
}

/* Calls racing their timeouts against a busy consumer: each ends either
   0 with fn run once, or -ETIMEDOUT with fn never run and one discard. */
Test(invoke, timeouts_racing_the_delivery_keep_exactly_once)
{
    loop_thread l;
    loop_thread_start(&l, q);
    enum { CALLS = 300 };
    static probe p[CALLS];
    memset(p, 0, sizeof(p));
    int ok = 0, timed_out = 0;
    for (int i = 0; i < CALLS; i++) {
        int rc = dq_call(q, probe_fn, &p[i], (i % 7) * 20000);
        cr_assert(rc == 0 || rc == -ETIMEDOUT, "rc %d", rc);
        if (rc == 0) {
            ok++;
            cr_assert_eq(atomic_load(&p[i].runs), 1);
        } else {
            timed_out++;
        }
    }
    cr_assert_eq(loop_thread_stop(&l), 0);
    for (int i = 0; i < CALLS; i++)
        cr_assert_eq(atomic_load(&p[i].runs) == 1, p[i].value == 42);
    int runs = 0;
    for (int i = 0; i < CALLS; i++)
        runs += atomic_load(&p[i].runs);
    cr_assert_eq(runs, ok, "fn ran for a call that timed out");
    cr_assert_eq((int)atomic_load(&rec.discards), timed_out);
    cr_log_info("%d ran, %d timed out", ok, timed_out);
}
