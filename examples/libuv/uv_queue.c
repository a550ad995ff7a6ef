/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue inside a libuv loop.
 *
 * The loop polls the queue's backend fd (dq_backend_fd) with uv_poll;
 * when it is readable, the callback drains the queue with dq_try_next
 * until -EAGAIN, which also runs the queue's fd listeners.  The queue's
 * consumer is the loop's thread.  When the queue has quit, dq_try_next
 * answers -ESHUTDOWN and the callback closes the poll, so uv_run returns.
 * The workload (producer threads, a watched pipe) is examples/workload.
 */
#define _GNU_SOURCE /* uv.h and glib.h use POSIX types -std=c11 hides */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "examples/workload/workload.h"

typedef struct app {
    workload w;
    uv_poll_t poll;
} app;

/* The backend fd is readable: the queue has work. */
static void on_queue(uv_poll_t *poll, int status, int events)
{
    (void)status, (void)events;
    app *a = poll->data;
    dq_msg m;
    int err;
    while ((err = dq_try_next(a->w.q, &m)) == 0)
        workload_on_message(&a->w, &m);
    if (err == -ESHUTDOWN) {
        uv_poll_stop(poll);
        uv_close((uv_handle_t *)poll, NULL);
    } else if (err != -EAGAIN) {
        fprintf(stderr, "dq_try_next: %s\n", strerror(-err));
        a->w.errors++;
    }
}

int main(void)
{
    static app a;
    uv_loop_t loop;
    uv_loop_init(&loop);
    int fd = workload_open(&a.w);
    if (fd < 0)
        return 1;
    uv_poll_init(&loop, &a.poll, fd);
    a.poll.data = &a;
    uv_poll_start(&a.poll, UV_READABLE, on_queue);
    workload_start(&a.w);
    uv_run(&loop, UV_RUN_DEFAULT); /* returns once the poll is closed */
    uv_loop_close(&loop);
    return workload_finish(&a.w, "libuv");
}
