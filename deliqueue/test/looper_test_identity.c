/* SPDX-License-Identifier: Apache-2.0 */
/* dq_current and dq_is_consumer: which queue a thread consumes, between
   calls, nested, and once the queue is destroyed (also when a new queue
   reuses its address). */
#include "looper_test_util.h"

TestSuite(identity, .init = fixture_setup, .fini = fixture_teardown, .timeout = 30);

static void *current_on_thread(void *arg)
{
    dq_queue *queue = arg;
    bool ok = dq_current() == NULL && !dq_is_consumer(queue);
    return ok ? queue : NULL;
}

/* Whether another thread, which never consumed, sees no current queue and
   is not q's consumer. */
static bool other_thread_is_not_consumer(dq_queue *queue)
{
    pthread_t t;
    void *ret = NULL;
    cr_assert_eq(pthread_create(&t, NULL, current_on_thread, queue), 0);
    pthread_join(t, &ret);
    return ret == queue;
}

Test(identity, nothing_before_the_first_consumer_call)
{
    cr_assert_null(dq_current());
    cr_assert_not(dq_is_consumer(q));
    cr_assert_not(dq_is_consumer(NULL));
    /* posting, cancelling, asking: none of them makes a consumer */
    dq_token t;
    cr_assert_eq(post_at(1, 10), 0);
    dq_msg m = msg_what(&target_a, 2);
    cr_assert_eq(dq_post(q, &m, &t), 0);
    cr_assert_eq(dq_cancel(q, t), 0);
    cr_assert_eq(dq_pending(q), 1);
    cr_assert_null(dq_current());
    cr_assert_not(dq_is_consumer(q));
}

Test(identity, every_consumer_call_makes_the_consumer_current_between_calls)
{
    for (int how = 0; how < 5; how++) {
        dq_options o = recording_options();
        dq_queue *d = dq_create(&o);
        cr_assert_not_null(d);
        dq_msg out;
        int rc = 0;
        switch (how) {
        case 0: rc = dq_try_next(d, &out); break;
        case 1: rc = dq_next_until(d, &out, 0); break;
        case 2: rc = dq_loop_once(d, 0); break;
        case 3: rc = dq_backend_fd(d) >= 0 ? 0 : -1; break;
        case 4:
            dq_quit(d);
            rc = dq_next(d, &out);
            break;
        }
        cr_assert(rc == -EAGAIN || rc == -ETIMEDOUT || rc == DQ_ONCE_TIMEOUT ||
                      rc == 0 || rc == -ESHUTDOWN,
                  "call %d: %d", how, rc);
        cr_assert_eq(dq_current(), d, "call %d", how);
        cr_assert(dq_is_consumer(d), "call %d", how);
        cr_assert(other_thread_is_not_consumer(d), "call %d", how);
        dq_unref(d);
    }
}

static void nothing(void *ctx)
{
    (void)ctx;
}

Test(identity, a_thread_refused_with_eperm_is_not_the_consumer)
{
    loop_thread l;
    loop_thread_start(&l, q);
    /* dq_call returns once fn ran on the consumer: the loop thread is it */
    cr_assert_eq(dq_call(q, nothing, NULL, INT64_MAX), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EPERM);
    cr_assert_eq(dq_loop_once(q, 0), -EPERM);
    cr_assert_null(dq_current());
    cr_assert_not(dq_is_consumer(q));
    cr_assert_eq(loop_thread_stop(&l), 0);
}

/* ---- inside callbacks, and nested consumption ---------------------------- */

typedef struct nest {
    dq_queue *a, *b;
    _Atomic int steps;
    bool b_current_inside, a_current_after, both_consumed;
    bool a_current_in_a;
} nest;
static nest N;

static void in_b(dq_msg *m)
{
    (void)m;
    N.b_current_inside = dq_current() == N.b;
    N.both_consumed = dq_is_consumer(N.a) && dq_is_consumer(N.b);
    atomic_fetch_add(&N.steps, 1);
}

static void in_a(dq_msg *m)
{
    (void)m;
    N.a_current_in_a = dq_current() == N.a;
    dq_msg mb = { .target = &target_b, .callback = in_b };
    cr_assert_eq(dq_post(N.b, &mb, NULL), 0);
    /* consume B inside A's callback: B is current in B's callback */
    cr_assert_eq(dq_loop_once(N.b, 0), DQ_ONCE_MESSAGE);
    /* back in A: A again */
    N.a_current_after = dq_current() == N.a;
    atomic_fetch_add(&N.steps, 1);
}

Test(identity, nested_consumption_answers_the_innermost)
{
    memset(&N, 0, sizeof(N));
    N.a = q;
    N.b = dq_create(NULL);
    cr_assert_not_null(N.b);
    dq_msg ma = { .target = &target_a, .callback = in_a };
    cr_assert_eq(dq_post(N.a, &ma, NULL), 0);
    cr_assert_eq(dq_loop_once(N.a, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(atomic_load(&N.steps), 2);
    cr_assert(N.a_current_in_a, "A is current in A's callback");
    cr_assert(N.b_current_inside, "B is current in B's callback, called inside A's");
    cr_assert(N.both_consumed, "the thread consumes both");
    cr_assert(N.a_current_after, "back in A's callback, A is current again");
    /* outside every call: the outermost call's queue */
    cr_assert_eq(dq_current(), N.a);
    cr_assert(dq_is_consumer(N.a) && dq_is_consumer(N.b));
    dq_unref(N.b);
    /* B destroyed: A is still current */
    cr_assert_eq(dq_current(), N.a);
}

static _Atomic(dq_queue *) seen_in_fn;

static void record_current(void *ctx)
{
    (void)ctx;
    atomic_store(&seen_in_fn, dq_current());
}

static void invoke_on_a_inside_b(dq_msg *m)
{
    (void)m;
    /* the thread consumes A too: dq_invoke runs inline, A current in fn */
    cr_assert_eq(dq_invoke(N.a, record_current, NULL), 0);
    cr_assert_eq(atomic_load(&seen_in_fn), N.a);
    cr_assert_eq(dq_current(), N.b, "B again after the inline run");
    atomic_fetch_add(&N.steps, 1);
}

Test(identity, an_inline_invoke_makes_its_queue_current)
{
    memset(&N, 0, sizeof(N));
    N.a = q;
    N.b = dq_create(NULL);
    dq_msg out;
    cr_assert_eq(dq_try_next(N.a, &out), -EAGAIN); /* consume A */
    dq_msg mb = { .target = &target_b, .callback = invoke_on_a_inside_b };
    cr_assert_eq(dq_post(N.b, &mb, NULL), 0);
    cr_assert_eq(dq_loop_once(N.b, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(atomic_load(&N.steps), 1);
    dq_unref(N.b);
}

static void record_current_discard(const dq_msg *m, void *ctx)
{
    (void)m;
    *(dq_queue **)ctx = dq_current();
}

Test(identity, current_in_on_discard_on_the_consumer)
{
    dq_queue *seen = NULL;
    dq_options o = { .on_discard = record_current_discard, .ctx = &seen };
    dq_queue *d = dq_create(&o);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(d, &m, NULL), 0);
    dq_quit(d);
    dq_msg out;
    cr_assert_eq(dq_next(d, &out), -ESHUTDOWN); /* the teardown reports */
    cr_assert_eq(seen, d);
    dq_unref(d);
}

/* ---- destroyed queues ------------------------------------------------------ */

Test(identity, a_destroyed_queue_is_not_current_even_at_a_reused_address)
{
    dq_options o = recording_options();
    bool reused = false;
    for (int round = 0; round < 64; round++) {
        dq_queue *d = dq_create(&o);
        cr_assert_not_null(d);
        dq_msg out;
        cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
        cr_assert_eq(dq_current(), d);
        void *addr = d;
        dq_unref(d); /* destroyed: its last reference */
        cr_assert_null(dq_current(), "round %d: destroyed queue still current", round);
        /* a new queue, often at the same address: not consumed by this
           thread, so not current either */
        dq_queue *e = dq_create(&o);
        cr_assert_not_null(e);
        reused |= (void *)e == addr;
        cr_assert_null(dq_current(), "round %d: a new queue%s is current", round,
                       (void *)e == addr ? " at the destroyed one's address" : "");
        cr_assert_not(dq_is_consumer(e));
        dq_unref(e);
    }
    cr_log_info("an address was reused: %s", reused ? "yes" : "no (allocator)");
}

static void *consume_then_report(void *arg)
{
    dq_queue *d = arg;
    dq_msg out;
    (void)dq_try_next(d, &out);
    return dq_current();
}

Test(identity, destroyed_by_another_thread)
{
    dq_queue *d = dq_create(NULL);
    dq_msg out;
    cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
    pthread_t t;
    dq_ref(d);
    /* the other thread is refused (-EPERM): not its queue */
    void *ret = (void *)1;
    cr_assert_eq(pthread_create(&t, NULL, consume_then_report, d), 0);
    pthread_join(t, &ret);
    cr_assert_null(ret);
    dq_unref(d);
    cr_assert_eq(dq_current(), d, "one reference left: alive");
    dq_unref(d);
    cr_assert_null(dq_current());
}
