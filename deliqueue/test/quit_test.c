/* SPDX-License-Identifier: Apache-2.0 */
/* quit versus quit_safely, post after quit, teardown accounting. */
#include <pthread.h>
#include <unistd.h>

#include "test_util.h"

TestSuite(quit, .init = fixture_setup, .fini = fixture_teardown);

Test(quit, quit_drops_everything_and_reports_each_once)
{
    int64_t t = test_now();
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
    int64_t t = test_now();
    cr_assert_eq(post_at(1, t), 0);
    cr_assert_eq(post_at(2, t - 5), 0);
    cr_assert_eq(post_at(3, t + 1), 0); /* due later: dropped */
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
    int64_t t = test_now();
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
    cr_assert_eq(dq_cancel(q, 1), -ENOENT, "gone, not refused");
    cr_assert_eq(dq_remove_sync_barrier(q, 1), -ENOENT);
    dq_match match = { .target = &target_a };
    cr_assert_eq(dq_remove(q, &match), 0);
    cr_assert_eq(dq_has(q, &match), false);
    cr_assert_eq(dq_pending(q), 0);
    cr_assert_eq(dq_is_idle(q), true);
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
    cr_assert_eq(post_at(1, test_now()), 0);
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
    fixture_real_time();
    pthread_t t;
    pthread_create(&t, NULL, quit_later, q);
    dq_msg out;
    cr_assert_eq(dq_next(q, &out), -ESHUTDOWN);
    pthread_join(t, NULL);
}

struct holder {
    dq_queue *q;
    _Atomic int go;
    int rejected, accepted;
};

/* Posts until the quit rejects one.  Past BURST accepted posts it posts
   once a millisecond: a consumer starved of CPU (sanitizers, a loaded
   machine) must not face an unbounded backlog before it gets to quit. */
#define BURST 100000

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
        if (++h->accepted >= BURST)
            usleep(1000);
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

struct canceller {
    dq_queue *q;
    dq_token *tokens;
    int count;
    _Atomic int *go;
};

static _Thread_local bool in_canceller;

static void *cancel_all(void *arg)
{
    struct canceller *c = arg;
    in_canceller = true;
    while (!atomic_load(c->go))
        ;
    for (int i = 0; i < c->count; i++) {
        int err = dq_cancel(c->q, c->tokens[i]);
        cr_assert(err == 0 || err == -ENOENT, "cancel: %d", err);
    }
    dq_unref(c->q);
    return NULL;
}

/* A canceller's report takes a while before it is recorded (the
   teardown's own reports are quick), so a teardown that does not wait for
   the canceller returns with its report still to come: what
   teardown_waits_for_racing_cancellers checks. */
static void slow_discard(const dq_msg *m, void *ctx)
{
    if (m->arg1 == 1 && in_canceller) {
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
    record_discard(m, ctx);
}

/* Teardown must wait for cancellers inside the core, their discard
   callbacks included (the tagged user count). */
Test(quit, teardown_waits_for_racing_cancellers)
{
    enum { N = 300, THREADS = 2 };
    static dq_token tokens[THREADS][N];
    for (int round = 0; round < 20; round++) {
        dq_options o = { .on_discard = slow_discard, .ctx = &rec, .clock = test_clock };
        dq_queue *r = dq_create(&o);
        atomic_store(&rec.discards, 0);
        dq_msg m = msg_what(&target_a, 1);
        m.arg1 = 1;
        for (int t = 0; t < THREADS; t++)
            for (int i = 0; i < N; i++)
                cr_assert_eq(dq_post_delayed(r, &m, 1000000, &tokens[t][i]), 0);
        _Atomic int go = 0;
        struct canceller c[THREADS];
        pthread_t th[THREADS];
        for (int t = 0; t < THREADS; t++) {
            c[t] = (struct canceller){ dq_ref(r), tokens[t], N, &go };
            pthread_create(&th[t], NULL, cancel_all, &c[t]);
        }
        atomic_store(&go, 1);
        struct timespec ts = { 0, 200000 * (round % 4) };
        nanosleep(&ts, NULL);
        dq_quit(r);
        dq_msg out;
        cr_assert_eq(dq_next(r, &out), -ESHUTDOWN);
        /* the teardown is over: every report, the cancellers' included,
           has been made; a canceller still inside would add one later */
        size_t at_teardown = atomic_load(&rec.discards);
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        cr_assert_eq(atomic_load(&rec.discards), (size_t)THREADS * N,
                     "each message discarded once, by a canceller or the teardown");
        cr_assert_eq(at_teardown, (size_t)THREADS * N,
                     "every discard reported before the teardown returned");
        dq_unref(r);
    }
}

/* The consumer's own cancels take no user count (core_enter in any_claim.c):
   they must still discard exactly once, and after the teardown, which
   only the consumer itself runs, they must answer -ENOENT (the message is
   gone) without touching the freed core. */
Test(quit, consumer_cancels_its_own_messages_before_and_after_teardown)
{
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* this thread consumes */
    dq_msg m = msg_what(&target_a, 1);
    dq_token t[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(dq_post_delayed(q, &m, 1000000000, &t[i]), 0);
    cr_assert_eq(dq_cancel(q, t[1]), 0);
    cr_assert_eq(atomic_load(&rec.discards), 1, "on_discard before the return");
    cr_assert_eq(dq_cancel(q, t[1]), -ENOENT, "twice");
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_cancel(q, t[0]), 0, "a swept message");
    cr_assert_eq(atomic_load(&rec.discards), 2);
    dq_quit(q);
    cr_assert_eq(dq_cancel(q, t[2]), -ENOENT, "quit, not yet torn down");
    cr_assert_eq(dq_next(q, &out), -ESHUTDOWN); /* the teardown */
    cr_assert_eq(atomic_load(&rec.discards), 3, "t[2] by the teardown");
    cr_assert_eq(dq_cancel(q, t[2]), -ENOENT, "after the teardown");
    cr_assert_eq(dq_cancel(q, t[0]), -ENOENT);
}

struct quitter {
    dq_queue *q;
    _Atomic int *go;
};

static void *quit_when_told(void *arg)
{
    struct quitter *p = arg;
    while (!atomic_load(p->go))
        ;
    dq_quit(p->q);
    return NULL;
}

/* Another thread's quit racing the consumer's cancels: every message is
   discarded exactly once, by the cancel or by the teardown, and every
   cancel answers 0 or -ENOENT (TSan runs this too). */
Test(quit, consumer_cancels_racing_a_quit_account_exactly)
{
    enum { N = 400 };
    static dq_token tok[N];
    for (int round = 0; round < 20; round++) {
        dq_options o = { .on_discard = record_discard,
                         .ctx = &rec,
                         .clock = test_clock };
        dq_queue *r = dq_create(&o);
        atomic_store(&rec.discards, 0);
        dq_msg out, m = msg_what(&target_a, 1);
        cr_assert_eq(dq_try_next(r, &out), -EAGAIN);
        for (int i = 0; i < N; i++)
            cr_assert_eq(dq_post_delayed(r, &m, 1000000000, &tok[i]), 0);
        _Atomic int go = 0;
        struct quitter p = { r, &go };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, quit_when_told, &p), 0);
        atomic_store(&go, 1);
        int cancelled = 0;
        for (int i = 0; i < N; i++) {
            int err = dq_cancel(r, tok[i]);
            cr_assert(err == 0 || err == -ENOENT, "cancel %d: %d", i, err);
            cancelled += err == 0;
        }
        pthread_join(th, NULL);
        cr_assert_eq(dq_next(r, &out), -ESHUTDOWN);
        cr_assert_eq(atomic_load(&rec.discards), N, "round %d: %d cancelled", round,
                     cancelled);
        dq_unref(r);
    }
}

/* ---- the quit_safely drain ---------------------------------------------- */

/* Until the drain ends, removal works on what remains, exactly as before
   the quit; only posting is refused.  Manual clock, one thread. */
Test(quit, removal_works_while_quit_safely_drains)
{
    int64_t t = test_now();
    dq_msg m1 = msg_what(&target_a, 1), m2 = msg_what(&target_a, 2),
           m3 = msg_what(&target_b, 3), m4 = msg_what(&target_a, 4);
    dq_token t1, t2, t4;
    cr_assert_eq(dq_post_at(q, &m1, t, &t1), 0);
    cr_assert_eq(dq_post_at(q, &m2, t, &t2), 0);
    cr_assert_eq(dq_post_at(q, &m3, t, NULL), 0);
    cr_assert_eq(dq_post_at(q, &m4, t + 1, &t4), 0); /* due later: trimmed */
    dq_quit_safely(q);
    cr_assert_eq(atomic_load(&rec.discards), 1, "the trim reports inside the call");
    cr_assert_eq(rec.what[0], 4);
    cr_assert_eq(dq_cancel(q, t4), -ENOENT, "trimmed: gone");
    cr_assert_eq(dq_pending(q), 3);
    cr_assert_eq(dq_is_idle(q), false);
    dq_match b_only = { .target = &target_b };
    cr_assert_eq(dq_has(q, &b_only), true);
    cr_assert_eq(dq_remove(q, &b_only), 1);
    cr_assert_eq(dq_has(q, &b_only), false);
    cr_assert_eq(dq_cancel(q, t2), 0, "cancel during the drain");
    cr_assert_eq(atomic_load(&rec.discards), 3);
    cr_assert_eq(dq_pending(q), 1);
    dq_msg late = msg_what(&target_a, 9);
    cr_assert_eq(dq_post(q, &late, NULL), -ESHUTDOWN, "posting is refused");
    cr_assert_eq(next_what(), 1, "what was neither removed nor trimmed");
    cr_assert_eq(dq_cancel(q, t1), -ENOENT, "delivered: gone");
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN, "the drain ends");
    cr_assert_eq(dq_cancel(q, t1), -ENOENT, "after the drain");
    cr_assert_eq(dq_pending(q), 0);
    cr_assert_eq(dq_is_idle(q), true);
    cr_assert_eq(atomic_load(&rec.discards), 3, "nothing removed was delivered");
}

/* The consumer's own thread removes during the drain: its scans of the
   heaps and the unswept posts keep working too. */
Test(quit, consumer_removes_its_own_messages_while_draining)
{
    dq_msg out;
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN); /* this thread consumes */
    int64_t t = test_now();
    dq_token t2;
    cr_assert_eq(post_at(1, t), 0);
    dq_msg m2 = msg_what(&target_a, 2);
    cr_assert_eq(dq_post_at(q, &m2, t, &t2), 0);
    cr_assert_eq(post_at(3, t), 0);
    cr_assert_eq(post_at(4, t), 0);
    dq_quit_safely(q);
    cr_assert_eq(next_what(), 1); /* now swept: in the heaps */
    cr_assert_eq(dq_cancel(q, t2), 0);
    dq_match three = { .target = &target_a, .fields = DQ_MATCH_WHAT, .what = 3 };
    cr_assert_eq(dq_has(q, &three), true);
    cr_assert_eq(dq_remove(q, &three), 1);
    cr_assert_eq(next_what(), 4);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 2);
}

/* A barrier posted before the quit can be released during the drain, and
   what it held is then delivered, not dropped. */
Test(quit, barrier_released_during_the_drain_lets_its_messages_through)
{
    dq_token b;
    cr_assert_eq(post_at(1, test_now()), 0);
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    cr_assert_eq(post_at(2, test_now()), 0); /* held */
    dq_quit_safely(q);
    cr_assert_eq(next_what(), 1);
    cr_assert_eq(dq_is_idle(q), true, "held");
    cr_assert_eq(dq_remove_sync_barrier(q, b), 0, "released during the drain");
    cr_assert_eq(next_what(), 2);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 0);
    cr_assert_eq(dq_remove_sync_barrier(q, b), -ENOENT);
}

/* What a barrier still holds when the drain ends is dropped; its tokens
   then answer -ENOENT, the barrier's too. */
Test(quit, what_a_barrier_holds_at_the_drains_end_is_gone)
{
    dq_token b, held;
    cr_assert_eq(dq_post_sync_barrier(q, &b), 0);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, &held), 0);
    dq_quit_safely(q);
    cr_assert_eq(next_what(), -1000000 - ESHUTDOWN);
    cr_assert_eq(atomic_load(&rec.discards), 1);
    cr_assert_eq(dq_cancel(q, held), -ENOENT);
    cr_assert_eq(dq_remove_sync_barrier(q, b), -ENOENT);
}

/* A message handler removes by criteria and cancels on its own looper
   while dq_loop drains after quit_safely (Android's removeMessages in a
   handler during quitSafely). */
static dq_queue *handler_q;
static dq_token handler_cancel_tok;
static int handler_seen[8];
static void handler_removes_the_rest(dq_msg *m)
{
    handler_seen[m->what]++;
    if (m->what == 1) {
        dq_match five = { .target = &target_a, .fields = DQ_MATCH_WHAT, .what = 5 };
        cr_assert_eq(dq_remove(handler_q, &five), 2);
        cr_assert_eq(dq_cancel(handler_q, handler_cancel_tok), 0);
    }
}

Test(quit, handler_removes_during_the_drain_of_dq_loop)
{
    memset(handler_seen, 0, sizeof handler_seen);
    handler_q = q;
    int64_t t = test_now();
    dq_msg m = msg_what(&target_a, 1);
    m.callback = handler_removes_the_rest;
    cr_assert_eq(dq_post_at(q, &m, t, NULL), 0);
    m.what = 5;
    cr_assert_eq(dq_post_at(q, &m, t, NULL), 0);
    m.what = 6;
    cr_assert_eq(dq_post_at(q, &m, t, &handler_cancel_tok), 0);
    m.what = 5;
    cr_assert_eq(dq_post_at(q, &m, t, NULL), 0);
    m.what = 7;
    cr_assert_eq(dq_post_at(q, &m, t, NULL), 0);
    dq_quit_safely(q);
    cr_assert_eq(dq_loop(q), 0);
    cr_assert_eq(handler_seen[1], 1);
    cr_assert_eq(handler_seen[5], 0, "removed during the drain, not delivered");
    cr_assert_eq(handler_seen[6], 0, "cancelled during the drain, not delivered");
    cr_assert_eq(handler_seen[7], 1);
    cr_assert_eq(atomic_load(&rec.discards), 3);
}

/* Another thread removes while the consumer drains (real clock): each
   message is delivered or discarded exactly once, and a cancel that
   answers 0 means the message did not run. */
struct drain_remover {
    dq_queue *q;
    dq_token *tok;
    int n;
    int cancelled;
};
static void *cancel_while_draining(void *arg)
{
    struct drain_remover *d = arg;
    for (int i = d->n - 1; i >= 0; i--) {
        int err = dq_cancel(d->q, d->tok[i]);
        cr_assert(err == 0 || err == -ENOENT, "cancel during the drain: %d", err);
        d->cancelled += err == 0;
    }
    return NULL;
}

static _Atomic int drain_delivered_what[2000];
static void count_delivery(dq_msg *m)
{
    atomic_fetch_add(&drain_delivered_what[m->arg1], 1);
}

Test(quit, cancels_racing_the_drain_account_exactly)
{
    enum { N = 2000 };
    static dq_token tok[N];
    fixture_real_time();
    for (int round = 0; round < 10; round++) {
        dq_options o = recording_options();
        atomic_store(&rec.discards, 0);
        dq_queue *r = dq_create(&o);
        for (int i = 0; i < N; i++)
            atomic_store(&drain_delivered_what[i], 0);
        dq_msg m = msg_what(&target_a, 1);
        m.callback = count_delivery;
        for (int i = 0; i < N; i++) {
            m.arg1 = i;
            cr_assert_eq(dq_post(r, &m, &tok[i]), 0);
        }
        dq_quit_safely(r);
        struct drain_remover d = { r, tok, N, 0 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, cancel_while_draining, &d), 0);
        cr_assert_eq(dq_loop(r), 0);
        pthread_join(th, NULL);
        int delivered = 0;
        for (int i = 0; i < N; i++)
            delivered += atomic_load(&drain_delivered_what[i]);
        cr_assert_eq((size_t)d.cancelled, atomic_load(&rec.discards),
                     "every discard is a cancel's: nothing due was trimmed");
        cr_assert_eq(delivered + d.cancelled, N, "round %d: exactly once", round);
        dq_unref(r);
    }
}

/* Posts racing quit_safely (real clock): every post accepted is due by
   the quit, so it is delivered, never trimmed. */
struct racing_poster {
    dq_queue *q;
    _Atomic int *go;
    int accepted;
};
static void *post_until_shut(void *arg)
{
    struct racing_poster *p = arg;
    while (!atomic_load(p->go))
        ;
    dq_msg m = msg_what(&target_a, 1);
    while (dq_post(p->q, &m, NULL) == 0)
        p->accepted++;
    return NULL;
}

Test(quit, posts_racing_quit_safely_are_delivered_not_trimmed)
{
    enum { POSTERS = 2 };
    fixture_real_time();
    for (int round = 0; round < 40; round++) {
        dq_options o = recording_options();
        atomic_store(&rec.discards, 0);
        dq_queue *r = dq_create(&o);
        _Atomic int go = 0;
        struct racing_poster p[POSTERS];
        pthread_t th[POSTERS];
        for (int i = 0; i < POSTERS; i++) {
            p[i] = (struct racing_poster){ r, &go, 0 };
            cr_assert_eq(pthread_create(&th[i], NULL, post_until_shut, &p[i]), 0);
        }
        atomic_store(&go, 1);
        struct timespec ts = { 0, 100000 * (round % 8) };
        nanosleep(&ts, NULL);
        dq_quit_safely(r);
        int accepted = 0;
        for (int i = 0; i < POSTERS; i++) {
            pthread_join(th[i], NULL);
            accepted += p[i].accepted;
        }
        dq_msg out;
        int delivered = 0;
        while (dq_next(r, &out) == 0)
            delivered++;
        cr_assert_eq(atomic_load(&rec.discards), 0,
                     "round %d: a due-now post accepted before the quit was trimmed "
                     "(%d accepted, %d delivered)",
                     round, accepted, delivered);
        cr_assert_eq(delivered, accepted);
        dq_unref(r);
    }
}

struct delayed_quitter {
    dq_queue *q;
    _Atomic int *arrived;
    unsigned delay;
};
static void *quit_at_start(void *arg)
{
    struct delayed_quitter *t = arg;
    spin_start(t->arrived, 2);
    spin_for(t->delay);
    dq_quit(t->q);
    return NULL;
}

/* dq_quit racing dq_quit_safely: whichever lands first, dq_quit's promise
   holds once both return: nothing more is delivered, every message is
   discarded once.  quit_safely raises the mode last, so a raise that is
   not one atomic step could lower dq_quit's mode back to "safely" and let
   the consumer deliver what is due. */
Test(quit, quit_racing_quit_safely_delivers_nothing_after)
{
    enum { ROUNDS = 4000, DELAYS = 64 };
    for (unsigned round = 0; round < ROUNDS; round++) {
        dq_options o = recording_options();
        atomic_store(&rec.discards, 0);
        dq_queue *r = dq_create(&o);
        cr_assert_not_null(r);
        dq_msg m = msg_what(&target_a, 1);
        cr_assert_eq(dq_post(r, &m, NULL), 0, "due now on the manual clock");
        _Atomic int arrived = 0;
        struct delayed_quitter t = { r, &arrived, round % DELAYS };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, quit_at_start, &t), 0);
        spin_start(&arrived, 2);
        spin_for((round / DELAYS) % 8);
        dq_quit_safely(r);
        pthread_join(th, NULL);
        dq_msg out;
        cr_assert_eq(dq_next(r, &out), -ESHUTDOWN,
                     "round %u: delivered after dq_quit returned", round);
        cr_assert_eq(atomic_load(&rec.discards), 1);
        dq_unref(r);
    }
}

struct counter_user {
    dq_queue *q;
    _Atomic int *arrived;
    _Atomic bool *stop;
};
static void *enter_and_leave(void *arg)
{
    struct counter_user *u = arg;
    spin_start(u->arrived, 2);
    while (!atomic_load_explicit(u->stop, memory_order_relaxed))
        (void)dq_pending(u->q);
    return NULL;
}

/* A walker entering while dq_quit shuts the users out: it is either
   refused or counted, never lost, so the teardown waits for it and no
   call after the teardown reaches the freed core.  A lost count shows as
   a teardown that never ends (the count never returns to zero) or one
   that frees the core under the walker (ASan, or a crash). */
Test(quit, walkers_entering_during_quit_are_counted_or_refused, .timeout = 60)
{
    enum { ROUNDS = 2000, DELAYS = 64 };
    for (unsigned round = 0; round < ROUNDS; round++) {
        dq_options o = recording_options();
        dq_queue *r = dq_create(&o);
        cr_assert_not_null(r);
        dq_msg m = msg_what(&target_a, 1);
        cr_assert_eq(dq_post_delayed(r, &m, 1000, NULL), 0);
        _Atomic int arrived = 0;
        _Atomic bool stop = false;
        struct counter_user u = { r, &arrived, &stop };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, enter_and_leave, &u), 0);
        spin_start(&arrived, 2);
        spin_for(round % DELAYS);
        dq_quit(r);
        dq_msg out;
        cr_assert_eq(dq_next(r, &out), -ESHUTDOWN);
        atomic_store(&stop, true);
        pthread_join(th, NULL);
        cr_assert_eq(dq_pending(r), 0, "round %u: shut out after the teardown", round);
        dq_unref(r);
    }
}
