/* SPDX-License-Identifier: Apache-2.0 */
/* Every function of the contract, and every error path. */
#include <pthread.h>
#include <stdint.h>

#include "test_util.h"

TestSuite(api, .init = fixture_setup, .fini = fixture_teardown);

Test(api, create_with_null_options_works)
{
    dq_queue *d = dq_create(NULL);
    cr_assert_not_null(d);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(d, &m, NULL), 0);
    dq_unref(d); /* pending message dropped, no callback to report to */
}

Test(api, null_queue_is_einval_everywhere)
{
    dq_msg m = msg_what(&target_a, 1), out;
    dq_token t;
    dq_match match = { .target = &target_a };
    cr_assert_eq(dq_post(NULL, &m, &t), -EINVAL);
    cr_assert_eq(dq_post_at(NULL, &m, 5, &t), -EINVAL);
    cr_assert_eq(dq_post_delayed(NULL, &m, 5, &t), -EINVAL);
    cr_assert_eq(dq_post_at_front(NULL, &m, &t), -EINVAL);
    cr_assert_eq(dq_cancel(NULL, 1), -EINVAL);
    cr_assert_eq(dq_remove(NULL, &match), 0);
    cr_assert_eq(dq_has(NULL, &match), false);
    cr_assert_eq(dq_post_sync_barrier(NULL, &t), -EINVAL);
    cr_assert_eq(dq_remove_sync_barrier(NULL, 1), -EINVAL);
    cr_assert_eq(dq_next(NULL, &out), -EINVAL);
    cr_assert_eq(dq_next_until(NULL, &out, 0), -EINVAL);
    cr_assert_eq(dq_try_next(NULL, &out), -EINVAL);
    cr_assert_eq(dq_loop(NULL), -EINVAL);
    cr_assert_eq(dq_add_idle_handler(NULL, NULL, NULL), -EINVAL);
    cr_assert_eq(dq_remove_idle_handler(NULL, NULL, NULL), -EINVAL);
    cr_assert_eq(dq_pending(NULL), 0);
    cr_assert_eq(dq_is_idle(NULL), true);
    cr_assert_null(dq_ref(NULL));
    dq_unref(NULL);
    dq_quit(NULL);
    dq_quit_safely(NULL);
}

Test(api, bad_messages_are_rejected_and_not_reported)
{
    dq_msg m = msg_what(NULL, 1);
    dq_token t = 77;
    cr_assert_eq(dq_post(q, NULL, &t), -EINVAL);
    cr_assert_eq(dq_post(q, &m, &t), -EINVAL); /* NULL target */
    m.target = &target_a;
    m.flags = 2; /* unknown flag */
    cr_assert_eq(dq_post(q, &m, &t), -EINVAL);
    m.flags = 0;
    cr_assert_eq(dq_post_at(q, &m, -1, &t), -EINVAL); /* negative when */
    cr_assert_eq(t, 77, "a rejected post must not write the token");
    cr_assert_eq(dq_pending(q), 0);
    cr_assert_eq(atomic_load(&rec.discards), 0);
}

Test(api, bad_matches_remove_nothing)
{
    cr_assert_eq(post_at(1, 10), 0);
    dq_match none = { .target = NULL };
    dq_match bad_fields = { .target = &target_a, .fields = 8 };
    cr_assert_eq(dq_remove(q, NULL), 0);
    cr_assert_eq(dq_remove(q, &none), 0);
    cr_assert_eq(dq_remove(q, &bad_fields), 0);
    cr_assert_eq(dq_has(q, &none), false);
    cr_assert_eq(dq_pending(q), 1);
}

Test(api, null_out_is_einval)
{
    cr_assert_eq(dq_next(q, NULL), -EINVAL);
    cr_assert_eq(dq_try_next(q, NULL), -EINVAL);
    cr_assert_eq(dq_next_until(q, NULL, 0), -EINVAL);
}

Test(api, tokens)
{
    dq_msg m = msg_what(&target_a, 1);
    dq_token t1, t2;
    cr_assert_eq(dq_post(q, &m, &t1), 0);
    cr_assert_eq(dq_post(q, &m, &t2), 0);
    cr_assert_neq(t1, 0);
    cr_assert_neq(t1, t2);
    cr_assert_eq(dq_cancel(q, 0), -EINVAL);
    cr_assert_eq(dq_cancel(q, t1), 0);
    cr_assert_eq(dq_cancel(q, t1), -ENOENT, "double cancel");
    cr_assert_eq(dq_cancel(q, UINT64_MAX), -ENOENT, "never issued");
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(dq_cancel(q, t2), -ENOENT, "delivered");
}

Test(api, tokens_are_never_reused)
{
    /* recycle nodes many times; no token may come back */
    enum { N = 20000 };
    static dq_token seen[N];
    dq_msg m = msg_what(&target_a, 1);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(dq_post(q, &m, &seen[i]), 0);
        cr_assert_eq(next_what(), 1);
    }
    for (int i = 1; i < N; i++)
        for (int j = i - 1; j >= 0 && j > i - 200; j--)
            cr_assert_neq(seen[i], seen[j]);
    /* a stale token never cancels the message now in its node */
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    for (int i = 0; i < N; i += 97)
        cr_assert_eq(dq_cancel(q, seen[i]), -ENOENT);
    cr_assert_eq(dq_pending(q), 1);
}

Test(api, token_of_another_queue_is_enoent)
{
    dq_queue *other = dq_create(NULL);
    dq_msg m = msg_what(&target_a, 1);
    dq_token t;
    cr_assert_eq(dq_post(other, &m, &t), 0);
    cr_assert_eq(dq_cancel(q, t), -ENOENT);
    cr_assert_eq(dq_cancel(other, t), 0);
    dq_unref(other);
}

Test(api, delays)
{
    dq_msg m = msg_what(&target_a, 1);
    int64_t now = test_now();
    cr_assert_eq(dq_post_delayed(q, &m, INT64_MAX, NULL), 0); /* saturates */
    m.what = 2;
    cr_assert_eq(dq_post_delayed(q, &m, -5, NULL), 0); /* = now */
    m.what = 3;
    cr_assert_eq(dq_post_delayed(q, &m, 100, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.what, 2);
    cr_assert_eq(out.when, now);
    cr_assert_eq(next_what(), NOTHING_DUE);
    test_advance(100);
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.what, 3);
    cr_assert_eq(out.when, now + 100);
    test_advance_to(INT64_MAX - 1);
    cr_assert_eq(next_what(), NOTHING_DUE, "saturated delay is due at INT64_MAX");
    test_advance_to(INT64_MAX);
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(out.when, INT64_MAX);
}

static void payload_callback(dq_msg *m)
{
    (void)m;
}

/* Every field a caller can set, as the node stores it (line 0 packs the
   payload; dq_node_msg unpacks it). */
static void expect_payload(const dq_msg *out, const dq_msg *want, int64_t when)
{
    cr_assert_eq(out->target, want->target);
    cr_assert_eq(out->what, want->what);
    cr_assert_eq(out->arg1, want->arg1);
    cr_assert_eq(out->arg2, want->arg2);
    cr_assert_eq(out->obj, want->obj);
    cr_assert_eq(out->callback, want->callback);
    cr_assert_eq(out->flags, want->flags);
    cr_assert_eq(out->when, when);
}

Test(api, payload_is_copied)
{
    int obj;
    dq_msg m = { .target = &target_b,
                 .what = 7,
                 .arg1 = -3,
                 .arg2 = 9,
                 .obj = &obj,
                 .callback = payload_callback,
                 .flags = DQ_ASYNC,
                 .when = 12345 /* ignored: dq_post_at's when is the one */ };
    dq_msg want = m;
    int64_t now = test_now();
    cr_assert_eq(dq_post_at(q, &m, now, NULL), 0);
    cr_assert_eq(dq_post_at_front(q, &m, NULL), 0);
    m.what = 99; /* the caller's struct is not the queued one */
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), 0);
    expect_payload(&out, &want, 0); /* the front post */
    cr_assert_eq(dq_try_next(q, &out), 0);
    expect_payload(&out, &want, now);
}

static dq_msg discarded;
static void keep_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    discarded = *m;
}

Test(api, discarded_payload_is_the_posted_one)
{
    dq_options o = { .on_discard = keep_discard };
    dq_queue *d = dq_create(&o);
    int obj;
    dq_msg m = { .target = &target_a,
                 .what = -1,
                 .arg1 = INT32_MIN,
                 .arg2 = INT32_MAX,
                 .obj = &obj,
                 .callback = payload_callback };
    dq_token t;
    cr_assert_eq(dq_post_at(d, &m, 777, &t), 0);
    cr_assert_eq(dq_cancel(d, t), 0);
    expect_payload(&discarded, &m, 777);
    dq_unref(d);
}

/* Nodes circulate between queues through the pool, and a node's owner is
   stored only when it changes: a token must name the queue of its own
   post however the node was used before. */
Test(api, recycled_node_tokens_belong_to_their_new_queue)
{
    enum { ROUNDS = 20, PER_ROUND = 300 };
    dq_queue *other = dq_create(NULL);
    dq_msg m = msg_what(&target_a, 1), out;
    static dq_token t[PER_ROUND];
    for (int round = 0; round < ROUNDS; round++) {
        dq_queue *from = round & 1 ? q : other, *to = round & 1 ? other : q;
        for (int i = 0; i < PER_ROUND; i++)
            cr_assert_eq(dq_post(to, &m, &t[i]), 0);
        for (int i = 0; i < PER_ROUND; i++)
            cr_assert_eq(dq_cancel(from, t[i]), -ENOENT, "round %d", round);
        for (int i = 0; i < PER_ROUND; i += 2)
            cr_assert_eq(dq_cancel(to, t[i]), 0, "round %d", round);
        for (int i = 1; i < PER_ROUND; i += 2)
            cr_assert_eq(dq_try_next(to, &out), 0, "round %d", round);
        cr_assert_eq(dq_try_next(to, &out), -EAGAIN); /* retires the rest */
    }
    dq_unref(other);
}

/* A post skips the owner when its cached batch is all the queue's own
   (dq_pool_cache): when the pool runs dry and grows, the fresh nodes
   still get their owner stored, and so their tokens name the queue. */
Test(api, tokens_of_fresh_nodes_after_recycled_ones)
{
    /* a multiple of the pool's chunk (4096 nodes), so that these posts use
       up every node the pool has made and, once delivered, every free node
       is q's; the posts below then drain q's batches and grow the pool */
    enum { RECYCLED = 65536, POSTED = 70000 };
    static dq_token t[POSTED];
    dq_msg m = msg_what(&target_a, 1), out;
    for (int i = 0; i < RECYCLED; i++)
        cr_assert_eq(dq_post(q, &m, NULL), 0);
    for (int i = 0; i < RECYCLED; i++)
        cr_assert_eq(dq_try_next(q, &out), 0);
    for (int i = 0; i < 4; i++) /* idle transitions end the grace periods */
        cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    for (int i = 0; i < POSTED; i++)
        cr_assert_eq(dq_post(q, &m, &t[i]), 0);
    dq_queue *other = dq_create(NULL);
    for (int i = 0; i < POSTED; i++) {
        cr_assert_eq(dq_cancel(other, t[i]), -ENOENT, "post %d", i);
        cr_assert_eq(dq_cancel(q, t[i]), 0, "post %d", i);
    }
    cr_assert_eq(dq_pending(q), 0);
    dq_unref(other);
}

static void *other_consumer(void *arg)
{
    dq_msg out;
    return (void *)(intptr_t)dq_try_next(arg, &out);
}

Test(api, second_consumer_thread_gets_eperm)
{
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* we are the consumer now */
    pthread_t t;
    void *ret;
    pthread_create(&t, NULL, other_consumer, q);
    pthread_join(t, &ret);
    cr_assert_eq((intptr_t)ret, -EPERM);
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
}

static void *consume_once(void *arg)
{
    dq_msg out;
    return (void *)(intptr_t)dq_try_next(arg, &out);
}

/* The consumer is one thread for the queue's life: once it has exited, a
   later thread (which may well get the dead one's thread-local storage and
   stack) is still not the consumer. */
Test(api, consumer_identity_is_not_inherited_by_later_threads)
{
    pthread_t t;
    void *ret;
    cr_assert_eq(pthread_create(&t, NULL, consume_once, q), 0);
    pthread_join(t, &ret);
    cr_assert_eq((intptr_t)ret, -EAGAIN, "the first thread becomes the consumer");
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(pthread_create(&t, NULL, consume_once, q), 0);
        pthread_join(t, &ret);
        cr_assert_eq((intptr_t)ret, -EPERM, "thread %d after the consumer exited", i);
    }
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EPERM);
}

struct claimant {
    dq_queue *q;
    _Atomic int *arrived;
    unsigned delay;
    int err;
};
static void *claim_at_start(void *arg)
{
    struct claimant *c = arg;
    spin_start(c->arrived, 2);
    spin_for(c->delay);
    dq_msg out;
    c->err = dq_try_next(c->q, &out);
    return NULL;
}

/* Two new threads ask for a new queue at once: each takes its first
   looper id and claims the queue in the same instant, and exactly one
   becomes the consumer.  Two ids handed out twice, or two claims that
   both see the queue unclaimed, would make both consumers.  Bounded in
   time too: under emulation a thread's creation costs a hundred times
   more, and the rounds that fit still check the claim. */
Test(api, racing_first_claims_make_one_consumer)
{
    enum { ROUNDS = 16000, DELAYS = 128 };
    const int64_t end = real_ns() + INT64_C(10000000000);
    for (int round = 0; round < ROUNDS && real_ns() < end; round++) {
        dq_queue *r = dq_create(NULL);
        cr_assert_not_null(r);
        _Atomic int arrived = 0;
        unsigned delay = (unsigned)(round / 2) % DELAYS;
        struct claimant c[2] = { { r, &arrived, round & 1 ? delay : 0, 1 },
                                 { r, &arrived, round & 1 ? 0 : delay, 1 } };
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, claim_at_start, &c[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        int won = (c[0].err == -EAGAIN) + (c[1].err == -EAGAIN);
        int refused = (c[0].err == -EPERM) + (c[1].err == -EPERM);
        cr_assert(won == 1 && refused == 1, "round %d: %d and %d", round, c[0].err,
                  c[1].err);
        dq_unref(r);
    }
}

Test(api, next_until_times_out)
{
    fixture_real_time();
    dq_msg out;
    int64_t start = dq_now();
    cr_assert_eq(dq_next_until(q, &out, start + 20000000), -ETIMEDOUT);
    cr_assert_geq(dq_now() - start, 20000000);
    cr_assert_eq(dq_next_until(q, &out, 0), -ETIMEDOUT, "past deadline");
}

struct poster {
    dq_queue *q;
    int64_t delay_ns;
};

static void *post_later(void *arg)
{
    struct poster *p = arg;
    struct timespec ts = { 0, p->delay_ns };
    nanosleep(&ts, NULL);
    dq_msg m = msg_what(&target_a, 42);
    dq_post(p->q, &m, NULL);
    return NULL;
}

/* A post 20 ms later reaches d's consumer, blocked with a 5 s deadline. */
static void expect_woken_by_a_post(dq_queue *d)
{
    struct poster p = { d, 20000000 };
    pthread_t t;
    pthread_create(&t, NULL, post_later, &p);
    dq_msg out;
    int64_t start = dq_now();
    cr_assert_eq(dq_next_until(d, &out, start + 5000000000), 0);
    cr_assert_eq(out.what, 42);
    cr_assert_lt(dq_now() - start, 2000000000, "woken by the post, not the deadline");
    pthread_join(t, NULL);
}

Test(api, blocked_consumer_is_woken_by_a_post)
{
    fixture_real_time();
    expect_woken_by_a_post(q);
}

Test(api, idle_spin_option_is_checked)
{
    dq_options o = { .idle_spin_ns = DQ_IDLE_SPIN_MAX_NS + 1 };
    errno = 0;
    cr_assert_null(dq_create(&o), "a spin above the cap is refused");
    cr_assert_eq(errno, EINVAL);
    int64_t fine[] = { DQ_IDLE_SPIN_MAX_NS, 1, 0, -1, INT64_MIN };
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        o.idle_spin_ns = fine[i];
        dq_queue *d = dq_create(&o);
        cr_assert_not_null(d, "idle_spin_ns %lld", (long long)fine[i]);
        dq_unref(d);
    }
}

/* Each spin setting still sleeps and is still woken: a post 20 ms later
   (far past any spin) reaches a consumer blocked with a 5 s deadline. */
Test(api, blocked_consumer_is_woken_whatever_the_spin)
{
    /* each queue here is on CLOCK_MONOTONIC (no clock in its options) */
    int64_t spins[] = { -1, 1, DQ_IDLE_SPIN_MAX_NS };
    for (size_t i = 0; i < sizeof(spins) / sizeof(spins[0]); i++) {
        dq_options o = { .idle_spin_ns = spins[i] };
        dq_queue *d = dq_create(&o);
        cr_assert_not_null(d, "idle_spin_ns %lld", (long long)spins[i]);
        expect_woken_by_a_post(d);
        /* and a timed wait still times out on time */
        dq_msg out;
        int64_t start = dq_now();
        cr_assert_eq(dq_next_until(d, &out, start + 5000000), -ETIMEDOUT);
        cr_assert_geq(dq_now() - start, 5000000);
        dq_unref(d);
    }
}

Test(api, blocked_consumer_wakes_when_due)
{
    fixture_real_time();
    dq_msg m = msg_what(&target_a, 5);
    int64_t start = dq_now();
    cr_assert_eq(dq_post_delayed(q, &m, 30000000, NULL), 0);
    dq_msg out;
    cr_assert_eq(dq_next(q, &out), 0);
    cr_assert_geq(dq_now(), out.when, "never early");
    cr_assert_geq(dq_now() - start, 30000000);
}

Test(api, ref_keeps_the_handle)
{
    dq_queue *extra = dq_ref(q);
    cr_assert_eq(extra, q);
    dq_quit(q);
    dq_unref(extra);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, NULL), -ESHUTDOWN);
}

/* References taken and dropped by many threads at once: each dq_ref
   must count.  A lost one makes an unref find the count at zero early
   and tear the queue down under the others (their posts then answer
   -ESHUTDOWN, or touch freed memory); a decrement overwritten leaves the
   queue alive after its last unref (dq_pool_stats still counts it). */
#define REF_THREADS 4
#define REF_ROUNDS  5000000

static dq_queue *ref_shared;
static _Atomic int ref_started;

static void *ref_unref_main(void *arg)
{
    (void)arg;
    dq_queue *shared = ref_shared;
    dq_msg m = msg_what(&target_a, 1);
    spin_start(&ref_started, REF_THREADS); /* the loops overlap from the first */
    for (int i = 0; i < REF_ROUNDS; i++) {
        dq_queue *mine = dq_ref(shared);
        int err = i % 1024 == 0 ? dq_post(mine, &m, NULL) : 0;
        dq_unref(mine);
        if (err != 0)
            return (void *)(intptr_t)err;
    }
    return NULL;
}

Test(api, refs_from_many_threads_all_count)
{
    struct dq_pool_stats before, after;
    cr_assert_eq(dq_pool_stats(&before), 0);
    dq_queue *shared = dq_create(NULL);
    cr_assert_not_null(shared);
    ref_shared = shared;
    pthread_t t[REF_THREADS];
    for (int i = 0; i < REF_THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, ref_unref_main, NULL), 0);
    for (int i = 0; i < REF_THREADS; i++) {
        void *err;
        pthread_join(t[i], &err);
        cr_assert_null(err, "a post answered %d: a reference was lost",
                       (int)(intptr_t)err);
    }
    dq_unref(shared);
    cr_assert_eq(dq_pool_stats(&after), 0);
    cr_assert_eq(after.queues, before.queues,
                 "the queue outlived its last reference (a release was lost)");
}

Test(api, atomics_and_clock)
{
    const char *a = dq_atomics();
    cr_assert_not_null(a);
    cr_assert(strcmp(a, "x86_64") == 0 || strcmp(a, "arm64-llsc") == 0 ||
                  strcmp(a, "arm64-lse") == 0 || strcmp(a, "arm64-outline") == 0,
              "dq_atomics() = %s", a);
    /* a manual clock reads what it was created at, plus its advances,
       and so does a queue on it */
    dq_clock *c = dq_clock_create_manual(5);
    cr_assert_not_null(c);
    dq_options o = { .clock = c };
    dq_queue *d = dq_create(&o);
    cr_assert_not_null(d);
    cr_assert_eq(dq_clock_now(c), 5);
    cr_assert_eq(dq_queue_now(d), 5);
    cr_assert_eq(dq_clock_advance(c, 10), 0);
    cr_assert_eq(dq_clock_now(c), 15);
    cr_assert_eq(dq_queue_now(d), 15);
    dq_unref(d);
    dq_clock_destroy(c);
    /* dq_now(), a NULL clock and a queue without one: CLOCK_MONOTONIC */
    int64_t a1 = dq_now(), a2 = dq_clock_now(NULL), a3 = dq_now();
    cr_assert_leq(a1, a2);
    cr_assert_leq(a2, a3);
    dq_queue *r = dq_create(NULL);
    cr_assert_not_null(r);
    int64_t a4 = dq_queue_now(r), a5 = dq_now();
    cr_assert_leq(a3, a4);
    cr_assert_leq(a4, a5);
    dq_unref(r);
}

/* A manual clock may be advanced from any thread: advances from two
   threads at once must add up, none lost to the other. */
enum { CLOCK_ADVANCES = 1000000 };
static _Atomic int clock_arrived;

static void *clock_advance_main(void *arg)
{
    (void)arg;
    spin_start(&clock_arrived, 2);
    for (int i = 0; i < CLOCK_ADVANCES; i++)
        if (dq_clock_advance(test_clock, 1) != 0)
            return (void *)1;
    return NULL;
}

Test(api, clock_advances_from_two_threads_add_up)
{
    int64_t start = test_now();
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, clock_advance_main, NULL), 0);
    for (int i = 0; i < 2; i++) {
        void *err;
        pthread_join(t[i], &err);
        cr_assert_null(err, "dq_clock_advance failed");
    }
    cr_assert_eq(test_now(), start + 2 * (int64_t)CLOCK_ADVANCES,
                 "an advance was lost: now %lld", (long long)test_now());
    cr_assert_eq(dq_queue_now(q), test_now());
}

static int loop_seen;
static void loop_callback(dq_msg *m)
{
    loop_seen += m->what;
}
static void loop_dispatch(dq_msg *m, void *ctx)
{
    (void)ctx;
    loop_seen += 100 * m->what;
    if (m->what == 3)
        dq_quit(q);
}

Test(api, loop_runs_callbacks_and_dispatch_until_quit)
{
    dq_unref(q);
    dq_options o = { .dispatch = loop_dispatch };
    q = dq_create(&o);
    loop_seen = 0;
    dq_msg m = msg_what(&target_a, 1);
    m.callback = loop_callback;
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    m.callback = NULL;
    m.what = 2;
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    m.what = 3;
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    m.what = 4;
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    cr_assert_eq(dq_loop(q), 0);
    cr_assert_eq(loop_seen, 1 + 200 + 300);
}
