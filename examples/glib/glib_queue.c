/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue inside a GLib main loop.
 *
 * g_unix_fd_add watches the queue's backend fd (dq_backend_fd); when it
 * is readable, the callback drains the queue with dq_try_next until
 * -EAGAIN, which also runs the queue's fd listeners.  The queue's
 * consumer is the main loop's thread.  When the queue has quit,
 * dq_try_next answers -ESHUTDOWN, and the callback removes its source and
 * quits the main loop.  The workload (producer threads, a watched pipe)
 * is examples/workload.
 */
#define _GNU_SOURCE /* uv.h and glib.h use POSIX types -std=c11 hides */
#include <errno.h>
#include <glib-unix.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "examples/workload/workload.h"

typedef struct app {
    workload w;
    GMainLoop *loop;
} app;

/* The backend fd is readable: the queue has work. */
static gboolean on_queue(gint fd, GIOCondition condition, gpointer data)
{
    (void)fd, (void)condition;
    app *a = data;
    dq_msg m;
    int err;
    while ((err = dq_try_next(a->w.q, &m)) == 0)
        workload_on_message(&a->w, &m);
    if (err == -ESHUTDOWN) {
        g_main_loop_quit(a->loop);
        return G_SOURCE_REMOVE;
    }
    if (err != -EAGAIN) {
        fprintf(stderr, "dq_try_next: %s\n", strerror(-err));
        a->w.errors++;
    }
    return G_SOURCE_CONTINUE;
}

int main(void)
{
    static app a;
    a.loop = g_main_loop_new(NULL, FALSE);
    int fd = workload_open(&a.w);
    if (fd < 0)
        return 1;
    g_unix_fd_add(fd, G_IO_IN, on_queue, &a);
    workload_start(&a.w);
    g_main_loop_run(a.loop); /* returns once the queue has quit */
    g_main_loop_unref(a.loop);
    return workload_finish(&a.w, "glib");
}
