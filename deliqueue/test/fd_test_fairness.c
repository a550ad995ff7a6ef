/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd listeners: fairness between ready fds and due messages, dq_try_next
 * with ready listeners, and a listener that posts.
 */
#include "fd_test_util.h"

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
