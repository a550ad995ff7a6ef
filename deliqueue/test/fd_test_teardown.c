/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd listeners: what a queue's teardown does with those still added.
 */
#include "fd_test_util.h"

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
