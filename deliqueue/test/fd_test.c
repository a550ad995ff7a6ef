/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File-descriptor listeners: every call and error path, the cases of
 * Android's CTS MessageQueueTest (256 KiB through a pipe, EPIPE, the fd
 * reuse cases, the closed dup that must not make the looper spin),
 * fairness between fds and messages, wakes from other threads, teardown,
 * and the backend fd.  Real clock throughout: the manual clock makes
 * sleepers poll, which would hide a lost wake-up.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

/* Anything that should happen does so within a scheduling latency; this
   bounds a lost wake-up, even under QEMU and TSan. */
#define BOUND_NS (INT64_C(5) * 1000000000)

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void make_pipe(int p[2])
{
    cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

static void write_byte(int fd)
{
    char c = 'x';
    cr_assert_eq(write(fd, &c, 1), 1);
}

/* ---- a consumer thread running dq_loop --------------------------------- */

typedef struct looper {
    dq_queue *q;
    pthread_t thread;
    _Atomic int running;
    clockid_t cpu_clock; /* the consumer thread's CPU time */
} looper;

static void *loop_main(void *arg)
{
    looper *l = arg;
    dq_msg out;
    /* become the consumer before the test goes on */
    (void)dq_try_next(l->q, &out);
    pthread_getcpuclockid(pthread_self(), &l->cpu_clock);
    atomic_store(&l->running, 1);
    int err = dq_loop(l->q);
    (void)err;
    return NULL;
}

static void looper_start_with(looper *l, const dq_options *o)
{
    l->q = dq_create(o);
    cr_assert_not_null(l->q);
    atomic_store(&l->running, 0);
    cr_assert_eq(pthread_create(&l->thread, NULL, loop_main, l), 0);
    while (!atomic_load(&l->running))
        sleep_ms(1);
}

static void looper_start(looper *l)
{
    looper_start_with(l, NULL);
}

static void looper_stop(looper *l)
{
    dq_quit(l->q);
    pthread_join(l->thread, NULL);
    dq_unref(l->q);
}

/* Wait for *flag to reach at least want; false past the bound. */
static bool await_count(_Atomic int *flag, int want)
{
    int64_t end = dq_now() + BOUND_NS;
    while (atomic_load(flag) < want) {
        if (dq_now() > end)
            return false;
        sleep_ms(1);
    }
    return true;
}

/* A message through the looper and back: everything the looper had to
   do before it is done. */
static void sync_callback(dq_msg *m)
{
    atomic_store((_Atomic int *)m->obj, 1);
}

static void sync_wait(looper *l)
{
    _Atomic int done = 0;
    dq_msg m = { .target = &target_a, .obj = (void *)&done, .callback = sync_callback };
    cr_assert_eq(dq_post(l->q, &m, NULL), 0);
    cr_assert(await_count(&done, 1), "the looper got stuck");
}

static int64_t cpu_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- listeners --------------------------------------------------------- */

typedef struct counter {
    _Atomic int calls;
    _Atomic uint32_t events; /* events of the last call */
    _Atomic int fd;          /* fd of the last call */
    uint32_t keep;           /* what to return */
    bool drain;              /* read what is there */
    pthread_t thread;        /* the thread of the last call */
} counter;

static uint32_t count_listener(int fd, uint32_t events, void *ctx)
{
    counter *c = ctx;
    if (c->drain) {
        char buf[256];
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
    }
    c->thread = pthread_self();
    atomic_store(&c->events, events);
    atomic_store(&c->fd, fd);
    atomic_fetch_add(&c->calls, 1);
    return c->keep;
}

static uint32_t never_listener(int fd, uint32_t events, void *ctx)
{
    (void)fd, (void)events, (void)ctx;
    cr_assert_fail("a listener that must not run ran");
    return 0;
}

TestSuite(fd, .fini = leak_check, .timeout = 60);

/* ---- errors ------------------------------------------------------------ */

Test(fd, bad_arguments_are_einval)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    counter c = { .keep = DQ_EVENT_INPUT };
    cr_assert_eq(dq_add_fd_listener(NULL, p[0], DQ_EVENT_INPUT, count_listener, &c),
                 -EINVAL);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, NULL, &c), -EINVAL);
    cr_assert_eq(dq_add_fd_listener(d, -1, DQ_EVENT_INPUT, count_listener, &c),
                 -EINVAL);
    cr_assert_eq(dq_add_fd_listener(d, p[0], 8, count_listener, &c), -EINVAL);
    cr_assert_eq(
        dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT | 0x100, count_listener, &c),
        -EINVAL);
    cr_assert_eq(dq_remove_fd_listener(NULL, p[0]), -EINVAL);
    cr_assert_eq(dq_remove_fd_listener(d, -1), -EINVAL);
    cr_assert_eq(dq_backend_fd(NULL), -EINVAL);
    close(p[0]);
    close(p[1]);
    dq_unref(d);
}

Test(fd, closed_fd_is_ebadf)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    close(p[0]);
    close(p[1]);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, never_listener, NULL),
                 -EBADF);
    dq_unref(d);
}

Test(fd, regular_file_is_eperm)
{
    dq_queue *d = dq_create(NULL);
    char path[] = "/tmp/dq_fd_test_XXXXXX";
    const char *dir = getenv("TEST_TMPDIR");
    char buf[4096];
    if (dir != NULL) {
        snprintf(buf, sizeof(buf), "%s/regular_XXXXXX", dir);
    } else {
        snprintf(buf, sizeof(buf), "%s", path);
    }
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    unlink(buf);
    cr_assert_eq(dq_add_fd_listener(d, fd, DQ_EVENT_INPUT, never_listener, NULL),
                 -EPERM);
    cr_assert_eq(dq_remove_fd_listener(d, fd), -ENOENT);
    close(fd);
    dq_unref(d);
}

Test(fd, remove_unwatched_is_enoent_and_changes_nothing)
{
    looper l;
    looper_start(&l);
    int p[2], r[2];
    make_pipe(p);
    make_pipe(r);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), -ENOENT); /* before any state */
    counter c = { .keep = DQ_EVENT_INPUT, .drain = true };
    cr_assert_eq(dq_add_fd_listener(l.q, r[0], DQ_EVENT_INPUT, count_listener, &c), 0);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), -ENOENT);
    /* events 0 for an unwatched fd: nothing to remove, not an error */
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], 0, never_listener, NULL), 0);
    write_byte(r[1]);
    cr_assert(await_count(&c.calls, 1), "the watched fd still works");
    cr_assert_eq(dq_remove_fd_listener(l.q, r[0]), 0);
    cr_assert_eq(dq_remove_fd_listener(l.q, r[0]), -ENOENT);
    looper_stop(&l);
    close(p[0]), close(p[1]), close(r[0]), close(r[1]);
}

Test(fd, add_after_quit_is_eshutdown)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    dq_quit(d);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, never_listener, NULL),
                 -ESHUTDOWN);
    dq_unref(d);

    d = dq_create(NULL);
    dq_quit_safely(d);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, never_listener, NULL),
                 -ESHUTDOWN);
    dq_unref(d);
    close(p[0]), close(p[1]);
}

/* The queue's first add racing its quit: the add answers 0 (and the
   teardown drops the listener without a call) or -ESHUTDOWN, and the
   consumer's teardown, which may be the first of its reads of the fd
   state the adder has just published, is ordered after the state's
   initialisation. */
typedef struct quit_racer {
    dq_queue *q;
    _Atomic int *start;
    int fd;
    counter c;
    int err;
} quit_racer;

static void *racing_add_main(void *arg)
{
    quit_racer *r = arg;
    spin_start(r->start, 2);
    r->err = dq_add_fd_listener(r->q, r->fd, DQ_EVENT_INPUT, count_listener, &r->c);
    return NULL;
}

Test(fd, first_add_racing_the_quit)
{
    int p[2];
    make_pipe(p);
    write_byte(p[1]);
    int outcomes[2] = { 0, 0 };
    for (int round = 0; round < 600; round++) {
        looper l;
        looper_start(&l);
        _Atomic int start = 0;
        quit_racer r = { .q = l.q, .start = &start, .fd = p[0] };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, racing_add_main, &r), 0);
        spin_start(&start, 2);
        dq_quit(l.q);
        pthread_join(t, NULL);
        cr_assert(r.err == 0 || r.err == -ESHUTDOWN, "round %d: the add answered %d",
                  round, r.err);
        outcomes[r.err == 0]++;
        looper_stop(&l);
    }
    cr_log_info("first_add_racing_the_quit: %d adds accepted, %d refused", outcomes[1],
                outcomes[0]);
    close(p[0]), close(p[1]);
}

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

/* ---- 256 KiB through a pipe, then EPIPE (CTS testFileDescriptorCallbacks) */

#define PIPE_BYTES (256 * 1024)

typedef struct transfer {
    int rfd, wfd;
    size_t written, read;
    uint8_t next_in;
    bool bad_data, reader_error, writer_unexpected;
    _Atomic int reader_done, writer_error;
} transfer;

static uint32_t writer_listener(int fd, uint32_t events, void *ctx)
{
    transfer *t = ctx;
    if (events & DQ_EVENT_ERROR) {
        atomic_store(&t->writer_error, 1);
        return 0;
    }
    if (!(events & DQ_EVENT_OUTPUT) || fd != t->wfd) {
        t->writer_unexpected = true;
        return 0;
    }
    uint8_t buf[4096];
    size_t n = sizeof(buf);
    if (n > PIPE_BYTES - t->written)
        n = PIPE_BYTES - t->written;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(t->written + i);
    ssize_t w = write(fd, buf, n);
    if (w > 0)
        t->written += (size_t)w;
    return t->written < PIPE_BYTES ? DQ_EVENT_OUTPUT : DQ_EVENT_ERROR;
}

static uint32_t reader_listener(int fd, uint32_t events, void *ctx)
{
    transfer *t = ctx;
    if (events & DQ_EVENT_ERROR) {
        t->reader_error = true;
        return 0;
    }
    uint8_t buf[4096];
    ssize_t r = read(fd, buf, sizeof(buf));
    for (ssize_t i = 0; i < r; i++)
        if (buf[i] != (uint8_t)(t->read + (size_t)i))
            t->bad_data = true;
    if (r > 0)
        t->read += (size_t)r;
    if (t->read < PIPE_BYTES)
        return DQ_EVENT_INPUT;
    atomic_store(&t->reader_done, 1);
    return 0;
}

Test(fd, pipe_256k_between_listeners_then_epipe)
{
    signal(SIGPIPE, SIG_IGN);
    looper l;
    looper_start(&l);
    int p[2];
    make_pipe(p);
    transfer t = { .rfd = p[0], .wfd = p[1] };
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_INPUT, reader_listener, &t), 0);
    cr_assert_eq(dq_add_fd_listener(l.q, p[1], DQ_EVENT_OUTPUT, writer_listener, &t),
                 0);
    cr_assert(await_count(&t.reader_done, 1), "the reader saw %zu of %d bytes", t.read,
              PIPE_BYTES);
    sync_wait(&l);
    cr_assert_eq(t.read, PIPE_BYTES);
    cr_assert_eq(t.written, PIPE_BYTES);
    cr_assert(!t.bad_data, "bytes arrived out of order or changed");
    cr_assert(!t.reader_error);
    /* the reader unregistered itself; now it "crashes": the writer gets
       EPIPE as an error */
    close(p[0]);
    cr_assert(await_count(&t.writer_error, 1), "the writer saw no error");
    sync_wait(&l);
    cr_assert(!t.writer_unexpected);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), -ENOENT);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[1]), -ENOENT);
    looper_stop(&l);
    close(p[1]);
}

/* ---- the fd reuse cases (CTS testPathologicalFileDescriptorReuse*) ----- */

typedef struct reuse {
    int fd;       /* the watched number */
    int other[2]; /* the second pipe */
    looper *l;
    counter second;
    int mode; /* 0 close; 1 dup2 over it; 2 dup2 and register it */
    _Atomic int calls;
} reuse;

static uint32_t reuse_listener(int fd, uint32_t events, void *ctx)
{
    reuse *r = ctx;
    (void)events;
    atomic_fetch_add(&r->calls, 1);
    if (r->mode == 0) {
        close(fd);
    } else {
        /* closes the old pipe's reader and gives its number to the new
           pipe's reader */
        cr_assert_eq(dup2(r->other[0], fd), fd);
        close(r->other[0]);
        r->other[0] = fd;
        if (r->mode == 2)
            cr_assert_eq(dq_add_fd_listener(r->l->q, fd, DQ_EVENT_INPUT, count_listener,
                                            &r->second),
                         0);
    }
    return 0;
}

static void reuse_case(int mode)
{
    looper l;
    looper_start(&l);
    reuse r = { .l = &l, .mode = mode, .second = { .keep = 0 } };
    int p[2];
    make_pipe(p);
    if (mode != 0)
        make_pipe(r.other);
    r.fd = p[0];
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_ERROR, reuse_listener, &r), 0);
    close(p[1]); /* hang-up wakes the listener */
    cr_assert(await_count(&r.calls, 1));
    sync_wait(&l);
    cr_assert_eq(atomic_load(&r.calls), 1, "a listener that returned 0 ran again");
    int fd;
    if (mode == 0) {
        /* a new pipe: the lowest free numbers, which the closed one was
           among (unless the queue's rebuilt epoll set took it) */
        make_pipe(r.other);
    } else {
        cr_assert_eq(r.other[0], r.fd, "the number is reused");
    }
    fd = r.other[0];
    if (mode != 2) {
        int err =
            dq_add_fd_listener(l.q, fd, DQ_EVENT_INPUT, count_listener, &r.second);
        cr_assert_eq(err, 0, "re-adding fd %d: %d", fd, err);
    }
    close(r.other[1]); /* its own hang-up */
    cr_assert(await_count(&r.second.calls, 1), "the new fd got no events");
    cr_assert(atomic_load(&r.second.events) & DQ_EVENT_ERROR);
    sync_wait(&l);
    cr_assert_eq(atomic_load(&r.calls), 1);
    cr_assert_eq(atomic_load(&r.second.calls), 1);
    cr_assert_eq(dq_remove_fd_listener(l.q, fd), -ENOENT);
    looper_stop(&l);
    close(fd);
}

Test(fd, reuse_closed_in_callback_then_new_fd_same_number)
{
    reuse_case(0);
}

Test(fd, reuse_number_reassigned_in_callback_then_registered)
{
    reuse_case(1);
}

Test(fd, reuse_number_reassigned_and_registered_in_callback)
{
    reuse_case(2);
}

/* Closed inside the callback while a dup keeps its file open: the file
   stays in the epoll set, hung up, and only a rebuild drops it.  A looper
   that kept it would spin while it waits in epoll (another fd is
   watched): its thread's CPU time over 2 s of idleness says which.  An
   idle looper uses next to none; a spinning one all it is given, which on
   a loaded machine can be a quarter of the 2 s, so the bound is lower
   than Android's CTS (1000 ms). */
#define IDLE_CPU_BOUND_NS (INT64_C(200) * 1000000)

/* The CPU time the consumer thread spends over 2 s of idleness. */
static int64_t idle_cpu_ns(looper *l)
{
    int64_t cpu0 = cpu_ns(l->cpu_clock);
    sleep_ms(2000);
    return cpu_ns(l->cpu_clock) - cpu0;
}
static uint32_t close_and_unregister(int fd, uint32_t events, void *ctx)
{
    (void)events;
    close(fd);
    atomic_fetch_add((_Atomic int *)ctx, 1);
    return 0;
}

Test(fd, closed_fd_with_a_live_dup_does_not_spin)
{
    looper l;
    looper_start(&l);
    int p[2], idle[2];
    make_pipe(p);
    /* another listener keeps the consumer waiting in epoll */
    make_pipe(idle);
    cr_assert_eq(dq_add_fd_listener(l.q, idle[0], DQ_EVENT_INPUT, never_listener, NULL),
                 0);
    int dup_fd = dup(p[0]);
    cr_assert_geq(dup_fd, 0);
    _Atomic int calls = 0;
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_ERROR, close_and_unregister,
                                    (void *)&calls),
                 0);
    close(p[1]);
    cr_assert(await_count(&calls, 1));
    sync_wait(&l);
    int64_t cpu = idle_cpu_ns(&l);
    sync_wait(&l);
    cr_assert_eq(atomic_load(&calls), 1);
    cr_assert_lt(cpu, IDLE_CPU_BOUND_NS,
                 "the looper spent %lld ms of 2000 on the CPU: it spins",
                 (long long)(cpu / 1000000));
    looper_stop(&l);
    close(dup_fd);
    close(idle[0]), close(idle[1]);
}

/* Closed while registered (no callback involved) with a dup alive, then
   removed: the remove's DEL fails, and the rebuild drops the file. */
Test(fd, removed_after_close_with_a_live_dup_does_not_spin)
{
    looper l;
    looper_start(&l);
    int p[2], idle[2];
    make_pipe(p);
    make_pipe(idle);
    cr_assert_eq(dq_add_fd_listener(l.q, idle[0], DQ_EVENT_INPUT, never_listener, NULL),
                 0);
    int dup_fd = dup(p[0]);
    counter c = { .keep = DQ_EVENT_INPUT };
    cr_assert_eq(dq_add_fd_listener(l.q, p[0], DQ_EVENT_ERROR, count_listener, &c), 0);
    sync_wait(&l);
    close(p[0]);
    cr_assert_eq(dq_remove_fd_listener(l.q, p[0]), 0);
    close(p[1]); /* the lingering file hangs up */
    sync_wait(&l);
    int64_t cpu = idle_cpu_ns(&l);
    cr_assert_eq(atomic_load(&c.calls), 0);
    cr_assert_lt(cpu, IDLE_CPU_BOUND_NS, "the looper spent %lld ms of 2000 on the CPU",
                 (long long)(cpu / 1000000));
    looper_stop(&l);
    close(dup_fd);
    close(idle[0]), close(idle[1]);
}

/* ---- fairness ----------------------------------------------------------- */

typedef struct order_log {
    char what[64];
    int n;
} order_log;

static uint32_t log_fd(int fd, uint32_t events, void *ctx)
{
    (void)events;
    order_log *o = ctx;
    char c;
    if (read(fd, &c, 1) == 1 && o->n < 63)
        o->what[o->n++] = 'F';
    return DQ_EVENT_INPUT;
}

/* An fd ready before a message falls due runs before that message. */
Test(fd, ready_fd_runs_before_a_message_due_after_it)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    order_log o = { .n = 0 };
    dq_msg out, m = msg_what(&target_a, 1);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, log_fd, &o), 0);
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
        write_byte(p[1]);
        cr_assert_eq(dq_post(d, &m, NULL), 0);
        cr_assert_eq(dq_try_next(d, &out), 0);
        o.what[o.n++] = 'M';
        cr_assert_eq(o.n, 2 * (i + 1));
        cr_assert_eq(o.what[o.n - 2], 'F', "round %d: the message went before the fd",
                     i);
    }
    dq_unref(d);
    close(p[0]), close(p[1]);
}

/* A message due is not starved by an fd that is always ready (its
   listener never drains it), nor the fd by a stream of messages. */
static uint32_t busy_fd(int fd, uint32_t events, void *ctx)
{
    (void)fd, (void)events;
    (*(int *)ctx)++;
    return DQ_EVENT_INPUT;
}

Test(fd, busy_fd_and_messages_both_progress)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    write_byte(p[1]); /* readable for good: never read */
    int calls = 0;
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, busy_fd, &calls), 0);
    dq_msg out, m = msg_what(&target_a, 1);
    int delivered = 0;
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(dq_post(d, &m, NULL), 0);
        int before = calls;
        cr_assert_eq(dq_try_next(d, &out), 0, "message %d starved", i);
        delivered++;
        cr_assert_leq(calls - before, 1, "the fd ran %d times before one message",
                      calls - before);
    }
    cr_assert_eq(delivered, 200);
    cr_assert_geq(calls, 100, "the busy fd ran only %d times in 200 deliveries", calls);
    /* a backlog of messages all due before the poll goes out in one run */
    for (int i = 0; i < 100; i++)
        cr_assert_eq(dq_post_at(d, &m, 1, NULL), 0);
    int before = calls;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(dq_try_next(d, &out), 0);
    cr_assert_lt(calls - before, 50, "the fds were polled %d times in a backlog of 100",
                 calls - before);
    dq_unref(d);
    close(p[0]), close(p[1]);
}

Test(fd, try_next_runs_ready_listeners_when_nothing_is_due)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    counter c = { .keep = DQ_EVENT_INPUT, .drain = true };
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, count_listener, &c), 0);
    dq_msg out;
    cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
    cr_assert_eq(atomic_load(&c.calls), 0);
    write_byte(p[1]);
    cr_assert_eq(dq_try_next(d, &out), -EAGAIN);
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert_eq(dq_next_until(d, &out, dq_now() + 10 * 1000000), -ETIMEDOUT);
    cr_assert_eq(atomic_load(&c.calls), 1);
    write_byte(p[1]);
    cr_assert_eq(dq_next_until(d, &out, dq_now() + 10 * 1000000), -ETIMEDOUT);
    cr_assert_eq(atomic_load(&c.calls), 2);
    dq_unref(d);
    close(p[0]), close(p[1]);
}

/* A listener that posts: the message is delivered in the same loop. */
static uint32_t posting_listener(int fd, uint32_t events, void *ctx)
{
    (void)events;
    char c;
    while (read(fd, &c, 1) == 1)
        ;
    dq_msg m = msg_what(&target_b, 7);
    cr_assert_eq(dq_post((dq_queue *)ctx, &m, NULL), 0);
    return DQ_EVENT_INPUT;
}

Test(fd, a_listener_may_post)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, posting_listener, d), 0);
    write_byte(p[1]);
    dq_msg out;
    cr_assert_eq(dq_next_until(d, &out, dq_now() + BOUND_NS), 0);
    cr_assert_eq(out.what, 7);
    dq_unref(d);
    close(p[0]), close(p[1]);
}

/* ---- teardown ------------------------------------------------------------ */

Test(fd, listeners_at_teardown_are_dropped_without_a_call)
{
    dq_queue *d = dq_create(NULL);
    int p[2];
    make_pipe(p);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, never_listener, NULL), 0);
    cr_assert_eq(dq_add_fd_listener(d, p[1], DQ_EVENT_ERROR, never_listener, NULL), 0);
    write_byte(p[1]);
    dq_quit(d);
    dq_msg out;
    cr_assert_eq(dq_try_next(d, &out), -ESHUTDOWN);
    cr_assert_eq(dq_remove_fd_listener(d, p[0]), -ENOENT);
    cr_assert_eq(dq_remove_fd_listener(d, p[1]), -ENOENT);
    dq_unref(d);

    /* and at the last dq_unref of a queue never quit */
    d = dq_create(NULL);
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, never_listener, NULL), 0);
    dq_unref(d);
    close(p[0]), close(p[1]);
}

/* ---- the backend fd ----------------------------------------------------- */

static bool readable_within(int fd, int ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

/* What the host loop does when the fd is readable. */
static int drain_queue(dq_queue *d, int32_t *last_what)
{
    dq_msg out;
    int err, n = 0;
    while ((err = dq_try_next(d, &out)) == 0) {
        n++;
        if (last_what != NULL)
            *last_what = out.what;
    }
    cr_assert(err == -EAGAIN || err == -ESHUTDOWN, "dq_try_next: %d", err);
    return err == -ESHUTDOWN ? -1 : n;
}

static void *backend_other_thread(void *arg)
{
    dq_queue *d = arg;
    return (void *)(intptr_t)dq_backend_fd(d);
}

Test(fd, backend_fd_is_consumer_only)
{
    dq_queue *d = dq_create(NULL);
    int fd = dq_backend_fd(d);
    cr_assert_geq(fd, 0);
    cr_assert_eq(dq_backend_fd(d), fd, "the same fd every time");
    pthread_t t;
    void *res;
    cr_assert_eq(pthread_create(&t, NULL, backend_other_thread, d), 0);
    pthread_join(t, &res);
    cr_assert_eq((int)(intptr_t)res, -EPERM);
    dq_msg out;
    dq_quit(d);
    cr_assert_eq(dq_try_next(d, &out), -ESHUTDOWN);
    cr_assert_eq(dq_backend_fd(d), -ESHUTDOWN);
    dq_unref(d);
}

typedef struct poster {
    dq_queue *q;
    int what;
    int64_t delay;
    int wfd; /* >= 0: write a byte here instead */
    bool quit;
} poster;

static void *post_from_thread(void *arg)
{
    poster *p = arg;
    if (p->quit) {
        dq_quit(p->q);
    } else if (p->wfd >= 0) {
        char c = 'x';
        cr_assert_eq(write(p->wfd, &c, 1), 1);
    } else {
        dq_msg m = msg_what(&target_a, p->what);
        cr_assert_eq(dq_post_delayed(p->q, &m, p->delay, NULL), 0);
    }
    return NULL;
}

static void from_thread(poster p)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, post_from_thread, &p), 0);
    pthread_join(t, NULL);
}

Test(fd, backend_fd_readable_for_each_kind_of_work)
{
    dq_queue *d = dq_create(NULL);
    int bfd = dq_backend_fd(d);
    cr_assert_geq(bfd, 0);
    cr_assert(readable_within(bfd, 0), "readable when first returned");
    cr_assert_eq(drain_queue(d, NULL), 0);
    cr_assert(!readable_within(bfd, 20), "readable with nothing to do");

    /* a message falls due: not readable before, readable after */
    dq_msg m = msg_what(&target_a, 1);
    cr_assert_eq(dq_post_delayed(d, &m, 300 * 1000000, NULL), 0);
    cr_assert_eq(drain_queue(d, NULL), 0);
    int64_t t0 = dq_now();
    cr_assert(readable_within(bfd, 5000));
    cr_assert_geq(dq_now() - t0, 250 * 1000000, "readable before the message was due");
    int32_t last = 0;
    cr_assert_eq(drain_queue(d, &last), 1);
    cr_assert_eq(last, 1);

    /* another thread posts a message due earlier than the one the host
       loop was told about */
    cr_assert_eq(dq_post_delayed(d, &m, 60 * INT64_C(1000000000), NULL), 0);
    cr_assert_eq(drain_queue(d, NULL), 0);
    cr_assert(!readable_within(bfd, 20));
    from_thread((poster){ .q = d, .what = 2, .delay = 0, .wfd = -1 });
    cr_assert(readable_within(bfd, 5000), "an earlier post did not make it readable");
    cr_assert_eq(drain_queue(d, &last), 1);
    cr_assert_eq(last, 2);
    /* a later one does not */
    from_thread(
        (poster){ .q = d, .what = 3, .delay = 120 * INT64_C(1000000000), .wfd = -1 });
    cr_assert(!readable_within(bfd, 50), "a later post made it readable");

    /* a watched fd is ready */
    int p[2];
    make_pipe(p);
    counter c = { .keep = DQ_EVENT_INPUT, .drain = true };
    cr_assert_eq(dq_add_fd_listener(d, p[0], DQ_EVENT_INPUT, count_listener, &c), 0);
    cr_assert_eq(drain_queue(d, NULL), 0);
    cr_assert(!readable_within(bfd, 20));
    from_thread((poster){ .q = d, .wfd = p[1] });
    cr_assert(readable_within(bfd, 5000), "a ready fd did not make it readable");
    cr_assert_eq(drain_queue(d, NULL), 0);
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert(!readable_within(bfd, 20), "still readable once the fd was drained");

    /* a quit */
    from_thread((poster){ .q = d, .quit = true });
    cr_assert(readable_within(bfd, 5000), "a quit did not make it readable");
    cr_assert_eq(drain_queue(d, NULL), -1);
    dq_unref(d);
    close(p[0]), close(p[1]);
}
