/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

#define MESSAGES 10000
#define BYTES    (64 * 1024)

static const char producer_target[] = "producer";

/* Set once the pipe writer is done: each producer posts its last message
   after that, so the run ends on wake-ups by posts, not by the pipe. */
static _Atomic int pipe_written;

static void *produce(void *arg)
{
    struct workload_producer *p = arg;
    for (int i = 0; i < MESSAGES; i++) {
        if (i == MESSAGES - 1)
            while (!pipe_written)
                usleep(100);
        dq_msg m = { .target = producer_target, .what = i, .arg1 = p->id };
        int err;
        while ((err = dq_post(p->q, &m, NULL)) == -ENOMEM)
            usleep(100);
        if (err != 0) {
            fprintf(stderr, "dq_post: %s\n", strerror(-err));
            return NULL;
        }
    }
    return NULL;
}

static void *write_pipe(void *arg)
{
    workload *w = arg;
    unsigned char buf[1024];
    for (long sent = 0; sent < BYTES;) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (unsigned char)(sent + (long)i);
        ssize_t n = write(w->pipe_fd[1], buf, sizeof(buf));
        if (n > 0)
            sent += n;
        else if (n < 0 && errno == EAGAIN)
            usleep(100);
        else
            break;
    }
    pipe_written = 1;
    return NULL;
}

static void maybe_done(workload *w)
{
    if (w->messages == (long)WORKLOAD_PRODUCERS * MESSAGES && w->bytes == BYTES)
        dq_quit(w->q);
}

/* On the consumer, inside dq_try_next. */
static uint32_t on_pipe(int fd, uint32_t events, void *ctx)
{
    workload *w = ctx;
    unsigned char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            w->errors += buf[i] != (unsigned char)(w->bytes + i);
        w->bytes += n;
    }
    maybe_done(w);
    /* keep reading until the writer hangs up */
    return (events & DQ_EVENT_ERROR) ? 0 : DQ_EVENT_INPUT;
}

int workload_open(workload *w)
{
    memset(w, 0, sizeof(*w));
    w->q = dq_create(NULL);
    if (w->q == NULL || pipe2(w->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        perror("setup");
        return -errno;
    }
    int fd = dq_backend_fd(w->q); /* this thread becomes the consumer */
    int err = fd < 0
                  ? fd
                  : dq_add_fd_listener(w->q, w->pipe_fd[0], DQ_EVENT_INPUT, on_pipe, w);
    if (err < 0) {
        fprintf(stderr, "deliqueue: %s\n", strerror(-err));
        return err;
    }
    return fd;
}

void workload_start(workload *w)
{
    for (int i = 0; i < WORKLOAD_PRODUCERS; i++) {
        w->producer_args[i] = (struct workload_producer){ w->q, i };
        pthread_create(&w->producers[i], NULL, produce, &w->producer_args[i]);
    }
    pthread_create(&w->writer, NULL, write_pipe, w);
}

void workload_on_message(workload *w, const dq_msg *m)
{
    w->errors += m->what != w->next_what[m->arg1]++;
    w->messages++;
    maybe_done(w);
}

int workload_finish(workload *w, const char *loop_name)
{
    for (int i = 0; i < WORKLOAD_PRODUCERS; i++)
        pthread_join(w->producers[i], NULL);
    pthread_join(w->writer, NULL);
    close(w->pipe_fd[0]);
    close(w->pipe_fd[1]);
    dq_unref(w->q);
    printf("%s: %ld messages, %ld bytes, %d errors\n", loop_name, w->messages, w->bytes,
           w->errors);
    return w->errors == 0 && w->messages == (long)WORKLOAD_PRODUCERS * MESSAGES &&
                   w->bytes == BYTES
               ? 0
               : 1;
}
