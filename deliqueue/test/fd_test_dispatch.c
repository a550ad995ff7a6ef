/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd listeners: where and when they run.  On the consumer thread; adds
 * and posts from other threads wake a sleeping or spinning consumer;
 * first adds racing wakers and each other; replacing and removing
 * listeners; a listener's return value.
 */
#include "fd_test_util.h"

/* ---- where and when listeners run --------------------------------------- */

Test(fd, listener_runs_on_the_consumer_thread)
{
    looper l;
    looper_start(&l);
    int p[2];
    make_pipe(p);
    counter c = { .keep = DQ_EVENT_INPUT, .drain = true };
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, count_listener, &c), 0);
    sleep_ms(20); /* let the consumer fall asleep in epoll */
    write_byte(p[1]);
    cr_assert(await_count(&c.calls, 1));
    cr_assert(pthread_equal(c.thread, l.thread));
    cr_assert_eq(atomic_load(&c.fd), p[0]);
    cr_assert_eq(atomic_load(&c.events), DQ_EVENT_INPUT);
    looper_stop(&l);
    close(p[0]), close(p[1]);
}

/* The consumer sleeps on the futex (no fd watched yet, nothing due); a
   listener added from another thread for an fd that is already readable
   must run without any message to wake the consumer. */
Test(fd, add_from_another_thread_wakes_a_sleeping_consumer)
{
    for (int round = 0; round < 20; round++) {
        looper l;
        looper_start(&l);
        int p[2];
        make_pipe(p);
        write_byte(p[1]);
        sleep_ms(round % 3); /* the add lands before, during and after the sleep */
        counter c = { .keep = 0 };
        cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, count_listener, &c),
                     0);
        cr_assert(await_count(&c.calls, 1),
                  "round %d: the add did not wake the consumer", round);
        looper_stop(&l);
        close(p[0]), close(p[1]);
    }
}

/* The same, with the add landing while the consumer polls before it
   sleeps (the longest idle spin): the spin, and the re-check after the
   sleep word, must see the change, since the adder found the consumer
   awake and woke no one. */
Test(fd, add_while_the_consumer_spins_before_sleeping)
{
    for (int round = 0; round < 20; round++) {
        dq_options o = { .idle_spin_ns = DQ_IDLE_SPIN_MAX_NS };
        looper l;
        looper_start_with(&l, &o);
        int p[2];
        make_pipe(p);
        write_byte(p[1]);
        /* a message through the looper, waited for without sleeping: the
           consumer then spins for up to 1 ms before it sleeps */
        _Atomic int done = 0;
        dq_msg m = { .target = &target_a,
                     .obj = (void *)&done,
                     .callback = sync_callback };
        cr_assert_eq(dq_post(l.q, &m, NULL), 0);
        while (!atomic_load(&done))
            ;
        counter c = { .keep = 0 };
        cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, count_listener, &c),
                     0);
        cr_assert(await_count(&c.calls, 1), "round %d: the add was lost", round);
        looper_stop(&l);
        close(p[0]), close(p[1]);
    }
}

/* Posts from other threads still wake a consumer that sleeps in epoll. */
Test(fd, posts_wake_a_consumer_waiting_in_epoll)
{
    looper l;
    looper_start(&l);
    int p[2];
    make_pipe(p);
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, never_listener, NULL),
                 0);
    for (int i = 0; i < 50; i++) {
        if (i % 10 == 0)
            sleep_ms(5);
        sync_wait(&l);
    }
    /* a delayed message wakes it at its due time, not later */
    _Atomic int done = 0;
    dq_msg m = { .target = &target_a, .obj = (void *)&done, .callback = sync_callback };
    int64_t t0 = dq_now();
    cr_assert_eq(dq_post_delayed(l.q, &m, 30 * 1000000, NULL), 0);
    cr_assert(await_count(&done, 1));
    cr_assert_geq(dq_now() - t0, 30 * 1000000);
    looper_stop(&l);
    close(p[0]), close(p[1]);
}

/* Wakers racing the queue's first listener add: a post whose wake CAS
   takes the sleep word just after the add published the queue's fd state
   reads that state (dq_fd_signal) with no other ordering to its
   initialisation than the acquire of the pointer itself, since the
   consumer fell asleep before the state existed.  TSan reports the read
   of a field the adder initialised if that acquire is missing. */
typedef struct waker {
    dq_queue *q;
    _Atomic int stop;
    _Atomic int delivered;
} waker;

static void count_delivery(dq_msg *m)
{
    atomic_fetch_add(&((waker *)m->obj)->delivered, 1);
}

static void *waker_main(void *arg)
{
    waker *w = arg;
    for (int sent = 0; !atomic_load(&w->stop);) {
        /* the next post once the last is delivered, so each finds the
           consumer going back to sleep or asleep */
        if (atomic_load(&w->delivered) < sent) {
            sched_yield();
            continue;
        }
        dq_msg m = { .target = &target_a, .obj = w, .callback = count_delivery };
        cr_assert_eq(dq_post(w->q, &m, NULL), 0);
        sent++;
    }
    return NULL;
}

Test(fd, wakers_race_the_first_listener_add)
{
    for (int round = 0; round < 100; round++) {
        dq_options o = { .idle_spin_ns = 0 };
        looper l;
        looper_start_with(&l, &o);
        waker w = { .q = l.q };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, waker_main, &w), 0);
        await_count(&w.delivered, 1 + round % 4);
        int p[2];
        make_pipe(p);
        write_byte(p[1]);
        counter c = { .keep = 0 };
        cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, count_listener, &c),
                     0);
        cr_assert(await_count(&c.calls, 1), "round %d: the add was lost", round);
        atomic_store(&w.stop, 1);
        pthread_join(t, NULL);
        looper_stop(&l);
        close(p[0]), close(p[1]);
    }
}

/* Two threads make the queue's first adds at once: each builds an fd
   state, one publishes it, and the other must drop its own and register
   in the winner's, or its listener would sit in an epoll set that no one
   waits on.  The two adders live across rounds and start each round
   together (spin_start); the test's thread is the consumer and runs the
   listeners. */
#define FIRST_ADD_ROUNDS 1000

typedef struct first_adders {
    dq_queue *_Atomic q;
    _Atomic int round, arrived, done;
    int fd[2];
    counter c[2];
    int err[2];
} first_adders;

typedef struct first_adder {
    first_adders *all;
    int i;
} first_adder;

static void *first_add_main(void *arg)
{
    first_adder *a = arg;
    first_adders *all = a->all;
    for (int round = 1; round <= FIRST_ADD_ROUNDS; round++) {
        while (atomic_load(&all->round) < round)
            sched_yield();
        spin_start(&all->arrived, 2 * round);
        all->err[a->i] =
            dq_add_fd_listener(atomic_load(&all->q), all->fd[a->i], DQ_EVENT_INPUT,
                               count_listener, &all->c[a->i]);
        atomic_fetch_add(&all->done, 1);
    }
    return NULL;
}

Test(fd, first_adds_from_two_threads_share_one_state)
{
    static first_adders all;
    first_adder a[2];
    pthread_t t[2];
    int p[2][2];
    for (int i = 0; i < 2; i++) {
        make_pipe(p[i]);
        write_byte(p[i][1]);
        all.fd[i] = p[i][0];
        a[i] = (first_adder){ .all = &all, .i = i };
        cr_assert_eq(pthread_create(&t[i], NULL, first_add_main, &a[i]), 0);
    }
    for (int round = 1; round <= FIRST_ADD_ROUNDS; round++) {
        dq_queue *q = dq_create(NULL);
        cr_assert_not_null(q);
        for (int i = 0; i < 2; i++)
            atomic_store(&all.c[i].calls, 0);
        atomic_store(&all.q, q);
        atomic_store(&all.round, round);
        while (atomic_load(&all.done) < 2 * round)
            sched_yield();
        int64_t end = dq_now() + BOUND_NS;
        while (atomic_load(&all.c[0].calls) == 0 || atomic_load(&all.c[1].calls) == 0) {
            cr_assert_eq(all.err[0], 0);
            cr_assert_eq(all.err[1], 0);
            cr_assert(dq_now() < end, "round %d: a listener never ran (%d, %d calls)",
                      round, atomic_load(&all.c[0].calls),
                      atomic_load(&all.c[1].calls));
            dq_msg out;
            (void)dq_next_until(q, &out, dq_now() + 1000000);
        }
        dq_quit(q);
        dq_unref(q);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        close(p[i][0]), close(p[i][1]);
    }
}

/* On the consumer's own thread (here the test's), a replacement or a
   removal takes effect at once. */
Test(fd, replacing_a_listener_changes_events_function_and_context)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    dq_msg out;
    counter a = { .keep = DQ_EVENT_INPUT }, b = { .keep = DQ_EVENT_OUTPUT };
    /* watch for errors only: a readable pipe does not call it */
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_ERROR, count_listener, &a), 0);
    write_byte(p[1]);
    cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
    cr_assert_eq(atomic_load(&a.calls), 0);
    /* the write end is writable: watched by a, then by b instead */
    cr_assert_eq(dq_add_fd_listener(d, p[1], DQ_EVENT_OUTPUT, count_listener, &a), 0);
    cr_assert_eq(dq_add_fd_listener(d, p[1], DQ_EVENT_OUTPUT, count_listener, &b), 0);
    cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
    cr_assert_eq(atomic_load(&b.calls), 1);
    cr_assert_eq(atomic_load(&b.events), DQ_EVENT_OUTPUT);
    cr_assert_eq(atomic_load(&b.fd), p[1]);
    cr_assert_eq(dq_remove_fd_listener(d, p[1]), 0);
    cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
    cr_assert_eq(dq_next_until(d, &out, dq_now() + 20 * 1000000), -ETIMEDOUT);
    cr_assert_eq(atomic_load(&b.calls), 1, "removed, yet called again");
    cr_assert_eq(atomic_load(&a.calls), 0, "replaced, yet called");
    dq_unref(d);
    close(p[0]), close(p[1]);
}

/* From another thread: once the remove has returned and the consumer
   has gone round once more, the listener is not called again. */
Test(fd, remove_from_another_thread)
{
    looper l;
    looper_start(&l);
    int p[2];
    make_pipe(p);
    counter c = { .keep = DQ_EVENT_OUTPUT };
    cr_assert_eq(dq_add_fd_listener(l.q, p[1], DQ_EVENT_OUTPUT, count_listener, &c), 0);
    cr_assert(await_count(&c.calls, 10),
              "an always-writable fd is called again and again");
    cr_assert_eq(dq_remove_fd_listener(l.q, p[1]), 0);
    sync_wait(&l);
    int seen = atomic_load(&c.calls);
    sync_wait(&l);
    sleep_ms(20);
    cr_assert_eq(atomic_load(&c.calls), seen, "removed, yet called again");
    looper_stop(&l);
    close(p[0]), close(p[1]);
}

/* A listener's return value: the events to keep (0 unregisters). */
static uint32_t input_then_error_only(int fd, uint32_t events, void *ctx)
{
    counter *c = ctx;
    char buf[16];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    atomic_store(&c->events, events);
    atomic_fetch_add(&c->calls, 1);
    return DQ_EVENT_ERROR; /* keep watching for the hang-up only */
}

Test(fd, return_value_sets_the_events_kept)
{
    looper l;
    looper_start(&l);
    int p[2];
    make_pipe(p);
    counter c = { 0 };
    cr_assert_eq(
        dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, input_then_error_only, &c), 0);
    write_byte(p[1]);
    cr_assert(await_count(&c.calls, 1));
    write_byte(p[1]); /* readable, but INPUT is no longer watched */
    sync_wait(&l);
    sleep_ms(20);
    cr_assert_eq(atomic_load(&c.calls), 1);
    close(p[1]); /* hang-up: reported */
    cr_assert(await_count(&c.calls, 2));
    cr_assert(atomic_load(&c.events) & DQ_EVENT_ERROR);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), 0);
    looper_stop(&l);
    close(p[0]);
}
