/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the fd listener tests (fd_test_*.c, one test binary, suite "fd")
 * share: pipes, a consumer thread running dq_loop, and listeners that
 * count their calls.
 *
 * The tests: every call and error path (fd_test_errors.c), where and
 * when listeners run (fd_test_dispatch.c), the cases of Android's CTS
 * MessageQueueTest (256 KiB through a pipe and EPIPE, fd_test_pipe.c;
 * the fd reuse cases and the closed dup that must not make the looper
 * spin, fd_test_reuse.c), fairness between fds and messages
 * (fd_test_fairness.c), teardown (fd_test_teardown.c), and the backend
 * fd (fd_test_backend.c).  The suite itself is declared once, in
 * fd_test_errors.c.  Real clock throughout: no queue here has a manual
 * clock, so the bounds below are real time.
 */
#ifndef DELIQUEUE_TEST_FD_TEST_UTIL_H
#define DELIQUEUE_TEST_FD_TEST_UTIL_H

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

/* Anything that should happen does so within a scheduling latency; this
   bounds a lost wake-up, even under QEMU and TSan. */
#define BOUND_NS (INT64_C(5) * 1000000000)

static inline void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static inline void make_pipe(int p[2])
{
    cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
}

static inline void write_byte(int fd)
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

static inline void *loop_main(void *arg)
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

static inline void looper_start_with(looper *l, const dq_options *o)
{
    l->q = dq_create(o);
    cr_assert_not_null(l->q);
    atomic_store(&l->running, 0);
    cr_assert_eq(pthread_create(&l->thread, NULL, loop_main, l), 0);
    while (!atomic_load(&l->running))
        sleep_ms(1);
}

static inline void looper_start(looper *l)
{
    looper_start_with(l, NULL);
}

static inline void looper_stop(looper *l)
{
    dq_quit(l->q);
    pthread_join(l->thread, NULL);
    dq_unref(l->q);
}

/* Wait for *flag to reach at least want; false past the bound. */
static inline bool await_count(_Atomic int *flag, int want)
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
static inline void sync_callback(dq_msg *m)
{
    atomic_store((_Atomic int *)m->obj, 1);
}

static inline void sync_wait(looper *l)
{
    _Atomic int done = 0;
    dq_msg m = { .target = &target_a, .obj = (void *)&done, .callback = sync_callback };
    cr_assert_eq(dq_post(l->q, &m, NULL), 0);
    cr_assert(await_count(&done, 1), "the looper got stuck");
}

static inline int64_t cpu_ns(clockid_t c)
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

static inline uint32_t count_listener(int fd, uint32_t events, void *ctx)
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

static inline uint32_t never_listener(int fd, uint32_t events, void *ctx)
{
    (void)fd, (void)events, (void)ctx;
    cr_assert_fail("a listener that must not run ran");
    return 0;
}

#endif /* DELIQUEUE_TEST_FD_TEST_UTIL_H */
