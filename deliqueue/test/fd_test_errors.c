/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd listeners: every call's error paths, and the queue's first add
 * racing its quit.  The "fd" suite of all the fd_test_*.c files is
 * declared here.
 */
#include "fd_test_util.h"

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
