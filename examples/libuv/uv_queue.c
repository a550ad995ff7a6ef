/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue inside a libuv loop.
 *
 * The loop polls the queue's backend fd (dq_backend_fd) with uv_poll;
 * when it is readable, the callback drains the queue with dq_try_next
 * until -EAGAIN, which also runs the queue's fd listeners.  The queue's
 * consumer is the loop's thread.
 *
 * The run: PRODUCERS threads post MESSAGES messages each; another thread
 * writes BYTES bytes into a pipe that the queue watches
 * (dq_add_fd_listener).  When every message and every byte has arrived,
 * the consumer quits the queue; the next dq_try_next answers -ESHUTDOWN
 * and the callback stops polling, so uv_run returns.  Exit status 0 iff
 * every message arrived once, in order per producer, and every byte in
 * order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include <deliqueue/deliqueue.h>

#define PRODUCERS 4
#define MESSAGES  10000
#define BYTES     (64 * 1024)

typedef struct app {
    dq_queue *q;
    uv_poll_t poll;
    int pipe_fd[2];
    int next_what[PRODUCERS]; /* per producer: the next what expected */
    long messages, bytes;
    int errors;
} app;

static const char producer_target[] = "producer";

/* Set once the pipe writer is done: each producer posts its last message
   after that, so the run ends on wake-ups by posts, not by the pipe. */
static _Atomic int pipe_written;

typedef struct producer {
    dq_queue *q;
    int id;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
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
    app *a = arg;
    unsigned char buf[1024];
    for (long sent = 0; sent < BYTES;) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (unsigned char)(sent + (long)i);
        ssize_t n = write(a->pipe_fd[1], buf, sizeof(buf));
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

static void maybe_done(app *a)
{
    if (a->messages == (long)PRODUCERS * MESSAGES && a->bytes == BYTES)
        dq_quit(a->q);
}

/* On the loop's thread, inside dq_try_next. */
static uint32_t on_pipe(int fd, uint32_t events, void *ctx)
{
    app *a = ctx;
    unsigned char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            a->errors += buf[i] != (unsigned char)(a->bytes + i);
        a->bytes += n;
    }
    maybe_done(a);
    /* keep reading until the writer hangs up */
    return (events & DQ_EVENT_ERROR) ? 0 : DQ_EVENT_INPUT;
}

static void on_message(app *a, const dq_msg *m)
{
    a->errors += m->what != a->next_what[m->arg1]++;
    a->messages++;
    maybe_done(a);
}

/* The backend fd is readable: the queue has work. */
static void on_queue(uv_poll_t *poll, int status, int events)
{
    (void)status, (void)events;
    app *a = poll->data;
    dq_msg m;
    int err;
    while ((err = dq_try_next(a->q, &m)) == 0)
        on_message(a, &m);
    if (err == -ESHUTDOWN) {
        uv_poll_stop(poll);
        uv_close((uv_handle_t *)poll, NULL);
    } else if (err != -EAGAIN) {
        fprintf(stderr, "dq_try_next: %s\n", strerror(-err));
        a->errors++;
    }
}

int main(void)
{
    app a = { 0 };
    uv_loop_t loop;
    uv_loop_init(&loop);
    a.q = dq_create(NULL);
    if (a.q == NULL || pipe2(a.pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        perror("setup");
        return 1;
    }
    int fd = dq_backend_fd(a.q); /* this thread becomes the consumer */
    int err = fd < 0
                  ? fd
                  : dq_add_fd_listener(a.q, a.pipe_fd[0], DQ_EVENT_INPUT, on_pipe, &a);
    if (err < 0) {
        fprintf(stderr, "deliqueue: %s\n", strerror(-err));
        return 1;
    }
    uv_poll_init(&loop, &a.poll, fd);
    a.poll.data = &a;
    uv_poll_start(&a.poll, UV_READABLE, on_queue);

    pthread_t threads[PRODUCERS], writer;
    producer producers[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        producers[i] = (producer){ a.q, i };
        pthread_create(&threads[i], NULL, produce, &producers[i]);
    }
    pthread_create(&writer, NULL, write_pipe, &a);

    uv_run(&loop, UV_RUN_DEFAULT); /* returns once the poll is closed */

    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    pthread_join(writer, NULL);
    close(a.pipe_fd[0]);
    close(a.pipe_fd[1]);
    dq_unref(a.q);
    uv_loop_close(&loop);
    printf("libuv: %ld messages, %ld bytes, %d errors\n", a.messages, a.bytes,
           a.errors);
    return a.errors == 0 && a.messages == (long)PRODUCERS * MESSAGES && a.bytes == BYTES
               ? 0
               : 1;
}
