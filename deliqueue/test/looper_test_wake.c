/* SPDX-License-Identifier: Apache-2.0 */
/* dq_wake, dq_loop_once and dq_next_until's -EINTR: each outcome of one
   iteration, wakes pending and during the wait, coalescing, dq_next and
   dq_loop not interrupted, a wake from a signal handler, and a wake sent
   as the consumer goes to sleep never lost.  Most tests run on the
   fixture's manual clock, which another thread advances where a wait
   must end; the lost-wake tests run on the real clock with hour-long
   deadlines, so that only the wake can end their waits. */
#include <signal.h>
#include <unistd.h>

#include "looper_test_util.h"

TestSuite(wake_once, .init = fixture_setup, .fini = fixture_teardown, .timeout = 60);

static deliveries got;

static void record(dq_msg *m)
{
    deliveries_add(&got, m);
}

static int post_cb(int32_t what, int64_t when)
{
    dq_msg m = { .target = &target_a, .what = what, .callback = record };
    return dq_post_at(q, &m, when, NULL);
}

/* ---- dq_loop_once's outcomes ------------------------------------------- */

Test(wake_once, nothing_due_and_no_wait_times_out_at_once)
{
    int64_t t0 = real_ns();
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    cr_assert_eq(dq_loop_once(q, -1), DQ_ONCE_TIMEOUT, "a negative deadline: no wait");
    cr_assert_eq(dq_loop_once(q, test_now()), DQ_ONCE_TIMEOUT);
    cr_assert(real_ns() - t0 < PROMPT_NS);
}

Test(wake_once, dispatches_one_message_at_a_time)
{
    memset(&got, 0, sizeof(got));
    for (int i = 1; i <= 3; i++)
        cr_assert_eq(post_cb(i, test_now()), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(atomic_load(&got.count), 1);
    cr_assert_eq(dq_pending(q), 2);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    cr_assert_eq(atomic_load(&got.count), 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got.what[i], i + 1);
}

static _Atomic int dispatched;

static void count_dispatch(dq_msg *m, void *ctx)
{
    (void)m, (void)ctx;
    atomic_fetch_add(&dispatched, 1);
}

Test(wake_once, without_a_callback_it_calls_opts_dispatch)
{
    atomic_store(&dispatched, 0);
    dq_options o = { .dispatch = count_dispatch };
    dq_queue *d = dq_create(&o);
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(d, &m, NULL), 0);
    cr_assert_eq(dq_loop_once(d, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(atomic_load(&dispatched), 1);
    dq_unref(d);
}

static void *advance_clock_later(void *arg)
{
    (void)arg;
    sleep_ns(20 * MS);
    test_advance(1000);
    return NULL;
}

Test(wake_once, waits_until_the_deadline)
{
    int64_t deadline = test_now() + 500;
    int64_t t0 = real_ns(); /* before the thread starts its 20 ms */
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, advance_clock_later, NULL), 0);
    cr_assert_eq(dq_loop_once(q, deadline), DQ_ONCE_TIMEOUT);
    cr_assert(real_ns() - t0 >= 20 * MS,
              "returned before the clock reached the deadline");
    pthread_join(t, NULL);
}

Test(wake_once, a_message_falling_due_during_the_wait)
{
    memset(&got, 0, sizeof(got));
    cr_assert_eq(post_cb(5, test_now() + 500), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, advance_clock_later, NULL), 0);
    cr_assert_eq(dq_loop_once(q, test_now() + 100000), DQ_ONCE_MESSAGE);
    cr_assert_eq(got.what[0], 5);
    pthread_join(t, NULL);
}

static bool idle_ran;

static bool idle_once(void *ctx)
{
    (void)ctx;
    idle_ran = true;
    return false;
}

Test(wake_once, idle_handlers_run_before_it_would_wait)
{
    idle_ran = false;
    cr_assert_eq(dq_add_idle_handler(q, idle_once, NULL), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    cr_assert(idle_ran);
}

/* ---- fds ------------------------------------------------------------- */

static _Atomic int fd_calls;

static uint32_t drain_listener(int fd, uint32_t events, void *ctx)
{
    (void)ctx;
    char buf[64];
    if (events & DQ_EVENT_INPUT)
        (void)read(fd, buf, sizeof(buf));
    atomic_fetch_add(&fd_calls, 1);
    return DQ_EVENT_INPUT;
}

Test(wake_once, a_ready_fd_with_no_message_due)
{
    atomic_store(&fd_calls, 0);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(dq_add_fd_listener(q, p[0], DQ_EVENT_INPUT, drain_listener, NULL), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT, "nothing ready yet");
    cr_assert_eq(write(p[1], "x", 1), 1);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_FD, "no wait: polled once");
    cr_assert_eq(atomic_load(&fd_calls), 1);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT, "drained");
    cr_assert_eq(write(p[1], "y", 1), 1);
    cr_assert_eq(dq_loop_once(q, test_now() + 100000), DQ_ONCE_FD, "in the wait");
    cr_assert_eq(atomic_load(&fd_calls), 2);
    cr_assert_eq(dq_remove_fd_listener(q, p[0]), 0);
    close(p[0]);
    close(p[1]);
}

/* ---- waking ------------------------------------------------------------ */

Test(wake_once, a_wake_before_the_call_is_seen_by_it)
{
    cr_assert_eq(dq_wake(q), 0); /* no consumer yet */
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_WOKEN);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT, "taken");
    cr_assert_eq(dq_wake(q), 0);
    cr_assert_eq(dq_loop_once(q, test_now() + 1000000), DQ_ONCE_WOKEN,
                 "at once, no wait");
}

Test(wake_once, wakes_are_coalesced)
{
    for (int i = 0; i < 5; i++)
        cr_assert_eq(dq_wake(q), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_WOKEN);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
}

Test(wake_once, a_pending_wake_comes_before_due_work)
{
    memset(&got, 0, sizeof(got));
    cr_assert_eq(post_cb(1, test_now()), 0);
    cr_assert_eq(dq_wake(q), 0);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_WOKEN);
    cr_assert_eq(atomic_load(&got.count), 0, "nothing dispatched with the wake");
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_MESSAGE);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_TIMEOUT);
    /* dq_next_until: the same */
    cr_assert_eq(post_cb(2, test_now()), 0);
    cr_assert_eq(dq_wake(q), 0);
    dq_msg out;
    cr_assert_eq(dq_next_until(q, &out, 0), -EINTR);
    cr_assert_eq(dq_next_until(q, &out, 0), 0);
    cr_assert_eq(out.what, 2);
    /* dq_try_next and dq_next deliver and leave the wake pending */
    cr_assert_eq(post_cb(3, test_now()), 0);
    cr_assert_eq(dq_wake(q), 0);
    cr_assert_eq(dq_try_next(q, &out), 0);
    cr_assert_eq(post_cb(4, test_now()), 0);
    cr_assert_eq(dq_next(q, &out), 0);
    cr_assert_eq(out.what, 4);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_WOKEN);
}

Test(wake_once, next_until_answers_eintr_for_a_pending_wake)
{
    dq_msg out;
    cr_assert_eq(dq_wake(q), 0);
    int64_t t0 = real_ns();
    cr_assert_eq(dq_next_until(q, &out, test_now() + (INT64_C(1) << 40)), -EINTR);
    cr_assert(real_ns() - t0 < PROMPT_NS);
    cr_assert_eq(dq_next_until(q, &out, 0), -ETIMEDOUT, "taken");
    cr_assert_eq(dq_wake(q), 0);
    cr_assert_eq(dq_next_until(q, &out, 0), -EINTR, "also with the deadline passed");
    /* dq_try_next does not wait, and leaves a wake pending */
    cr_assert_eq(dq_wake(q), 0);
    cr_assert_eq(dq_try_next(q, &out), -EAGAIN);
    cr_assert_eq(dq_loop_once(q, 0), DQ_ONCE_WOKEN);
}

static void nothing(void *ctx)
{
    (void)ctx;
}

Test(wake_once, errors)
{
    cr_assert_eq(dq_wake(NULL), -EINVAL);
    cr_assert_eq(dq_loop_once(NULL, 0), -EINVAL);
    loop_thread l;
    loop_thread_start(&l, q);
    /* dq_call returns once the loop thread ran fn: it is the consumer */
    cr_assert_eq(dq_call(q, nothing, NULL, INT64_MAX), 0);
    cr_assert_eq(dq_loop_once(q, 0), -EPERM);
    cr_assert_eq(dq_wake(q), 0, "any thread may wake");
    cr_assert_eq(loop_thread_stop(&l), 0);
    cr_assert_eq(dq_wake(q), -ESHUTDOWN);
    cr_assert_eq(dq_loop_once(q, 0), -EPERM, "still not this thread's");
    dq_options o = recording_options();
    dq_queue *d = dq_create(&o);
    dq_quit(d);
    cr_assert_eq(dq_wake(d), -ESHUTDOWN);
    cr_assert_eq(dq_loop_once(d, 0), -ESHUTDOWN);
    cr_assert_eq(dq_loop_once(d, 0), -ESHUTDOWN);
    dq_unref(d);
}

/* ---- waking a waiting consumer (real clock) -------------------------- */

typedef struct waiter {
    dq_queue *q;
    pthread_t thread;
    int how; /* 0 dq_loop_once, 1 dq_next_until, 2 dq_next */
    int64_t deadline;
    _Atomic int rounds; /* calls begun */
    _Atomic int done;   /* calls returned */
    int rc[32768];
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    for (;;) {
        int i = atomic_load(&w->rounds);
        atomic_store(&w->rounds, i + 1);
        dq_msg out;
        int rc;
        switch (w->how) {
        case 0: rc = dq_loop_once(w->q, dq_queue_now(w->q) + w->deadline); break;
        case 1: rc = dq_next_until(w->q, &out, dq_queue_now(w->q) + w->deadline); break;
        default: rc = dq_next(w->q, &out); break;
        }
        if (i < 32768)
            w->rc[i] = rc;
        atomic_store(&w->done, i + 1);
        if (rc == -ESHUTDOWN)
            return NULL;
    }
}

static void waiter_start(waiter *w, int how, int64_t deadline)
{
    memset(w, 0, sizeof(*w));
    w->q = q;
    w->how = how;
    w->deadline = deadline;
    cr_assert_eq(pthread_create(&w->thread, NULL, waiter_main, w), 0);
}

Test(wake_once, a_wake_interrupts_the_wait)
{
    fixture_real_time();
    for (int how = 0; how < 2; how++) {
        waiter w;
        waiter_start(&w, how, INT64_C(3600) * 1000 * MS);
        while (atomic_load(&w.rounds) == 0)
            ;
        sleep_ns(20 * MS); /* asleep by now */
        cr_assert_eq(atomic_load(&w.done), 0);
        int64_t t0 = real_ns();
        cr_assert_eq(dq_wake(q), 0);
        while (atomic_load(&w.done) == 0 && real_ns() - t0 < PROMPT_NS)
            sleep_ns(100000);
        cr_assert_eq(atomic_load(&w.done), 1, "%s was not woken",
                     how ? "dq_next_until" : "dq_loop_once");
        cr_assert_eq(w.rc[0], how ? -EINTR : DQ_ONCE_WOKEN);
        dq_quit(q);
        pthread_join(w.thread, NULL);
        dq_unref(q);
        dq_options o = recording_options();
        q = dq_create(&o);
    }
}

Test(wake_once, dq_next_is_not_interrupted_and_the_wake_stays)
{
    fixture_real_time();
    waiter w;
    waiter_start(&w, 2, 0);
    while (atomic_load(&w.rounds) == 0)
        ;
    sleep_ns(20 * MS);
    cr_assert_eq(dq_wake(q), 0);
    sleep_ns(50 * MS);
    cr_assert_eq(atomic_load(&w.done), 0, "dq_next returned for a wake");
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post(q, &m, NULL), 0);
    while (atomic_load(&w.done) == 0)
        sleep_ns(MS);
    cr_assert_eq(w.rc[0], 0, "the message");
    /* stop the thread's dq_next calls: a quit; the wake was not taken */
    dq_quit(q);
    pthread_join(w.thread, NULL);
    cr_assert_eq(w.rc[1], -ESHUTDOWN);
}

Test(wake_once, dq_loop_is_not_interrupted)
{
    memset(&got, 0, sizeof(got));
    fixture_real_time();
    loop_thread l;
    loop_thread_start(&l, q);
    sleep_ns(20 * MS);
    cr_assert_eq(dq_wake(q), 0);
    sleep_ns(20 * MS);
    cr_assert_eq(post_cb(1, 0), 0);
    while (atomic_load(&got.count) == 0)
        sleep_ns(MS);
    cr_assert_eq(loop_thread_stop(&l), 0, "dq_loop returned only at the quit");
}

/* A handler that wakes the queue: async-signal-safe. */
static dq_queue *signal_q;
static _Atomic int handled;

static void on_sigusr1(int sig)
{
    (void)sig;
    (void)dq_wake(signal_q);
    atomic_store(&handled, 1);
}

static void *idle_thread(void *arg)
{
    _Atomic int *stop = arg;
    while (!atomic_load(stop))
        sleep_ns(MS);
    return NULL;
}

Test(wake_once, a_wake_from_a_signal_handler)
{
    fixture_real_time();
    signal_q = q;
    atomic_store(&handled, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr1;
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    /* the handler runs on a thread that holds nothing of the library's */
    _Atomic int stop = 0;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, idle_thread, &stop), 0);
    waiter w;
    waiter_start(&w, 0, INT64_C(3600) * 1000 * MS);
    while (atomic_load(&w.rounds) == 0)
        ;
    sleep_ns(20 * MS);
    cr_assert_eq(pthread_kill(t, SIGUSR1), 0);
    int64_t t0 = real_ns();
    /* the handler's store may land after the wake it sent */
    while ((atomic_load(&w.done) == 0 || !atomic_load(&handled)) &&
           real_ns() - t0 < PROMPT_NS)
        sleep_ns(100000);
    cr_assert(atomic_load(&handled));
    cr_assert_eq(atomic_load(&w.done), 1, "the consumer was not woken");
    cr_assert_eq(w.rc[0], DQ_ONCE_WOKEN);
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    dq_quit(q);
    pthread_join(w.thread, NULL);
}

/* A wake sent as the consumer goes to sleep: each round, the consumer
   starts a long wait and the waker wakes it at once, so the wake lands
   anywhere in the consumer's way to its sleep (spin, word, re-check,
   futex).  A lost wake leaves the consumer in a wait of an hour. */
Test(wake_once, a_wake_as_the_consumer_goes_to_sleep_is_never_lost)
{
    fixture_real_time();
    for (int spin = 0; spin < 2; spin++) {
        dq_options o = recording_options();
        o.idle_spin_ns = spin ? 0 : -1;
        dq_queue *d = dq_create(&o);
        dq_queue *keep = q;
        q = d;
        enum { ROUNDS = 20000 };
        waiter w;
        waiter_start(&w, spin ? 1 : 0, INT64_C(3600) * 1000 * MS);
        for (int i = 0; i < ROUNDS; i++) {
            while (atomic_load(&w.rounds) <= i)
                ;
            spin_for((unsigned)(i * 7 % 256));
            cr_assert_eq(dq_wake(d), 0);
            int64_t t0 = real_ns();
            while (atomic_load(&w.done) <= i) {
                cr_assert(real_ns() - t0 < PROMPT_NS, "round %d: the wake was lost", i);
                sched_yield();
            }
            cr_assert_eq(w.rc[i], spin ? -EINTR : DQ_ONCE_WOKEN, "round %d", i);
        }
        dq_quit(d);
        pthread_join(w.thread, NULL);
        q = keep;
        dq_unref(d);
    }
}
