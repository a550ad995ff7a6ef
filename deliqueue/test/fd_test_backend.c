/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend fd: the consumer's only, and readable whenever there is
 * work (a message due, an earlier post from another thread, a ready
 * watched fd, a quit).
 */
#include <poll.h>

#include "fd_test_util.h"

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
    /* read before the post, so the check holds however long the drain
       takes on a loaded machine: the message is due 300 ms after it */
    int64_t before_post = dq_now();
    cr_assert_eq(dq_post_delayed(d, &m, 300 * 1000000, NULL), 0);
    cr_assert_eq(drain_queue(d, NULL), 0);
    cr_assert(readable_within(bfd, 5000));
    cr_assert_geq(dq_now() - before_post, 300 * 1000000,
                  "readable before the message was due");
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
