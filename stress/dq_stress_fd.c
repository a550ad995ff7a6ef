/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress_fd: fd listeners under load.
 *
 *   dq_stress_fd [--duration=SECONDS] [--seed=N] [--producers=N]
 *
 * Producer threads interleave three things at random: posting messages
 * (some then cancelled by token), writing byte runs into their own pipe,
 * whose read end the consumer watches, and replacing that pipe: the
 * producer makes a new pipe, registers its read end from its own thread
 * (dq_add_fd_listener), then closes the old write end.  The consumer
 * (dq_next) drains each pipe in its listener, and on the old pipe's
 * hang-up reads the rest, returns 0, and closes the read end in a message
 * it posts to itself, so fd numbers are reused while listeners come and
 * go.  (Not inside the listener: the queue's DEL of a number closed there
 * may meet a file another thread has just opened with it, a race on the
 * number that Android's Looper also tolerates and that TSan reports;
 * fd_test_reuse.c closes inside listeners, on one thread.)
 *
 * Invariants, checked as it runs and at the end:
 *   - every byte written arrives once, in order, on the pipe it was
 *     written to (each byte's value is a function of its offset);
 *   - every message accepted is delivered once or discarded once
 *     (cancelled) and never both; per producer, deliveries keep post
 *     order;
 *   - every listener of a closed pipe sees its hang-up, and the run
 *     drains within a bound after the producers stop.
 * Ends with one summary line; exit status 0 iff no violation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#include "stress_util.h"

#define MAX_PRODUCERS  64
/* A run that has not drained this long after its producers stopped has
   lost a wake-up or a hang-up. */
#define DRAIN_BOUND_NS (INT64_C(60) * 1000000000)

static _Atomic uint64_t n_violations;

static void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dq_stress_fd: VIOLATION: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    atomic_fetch_add(&n_violations, 1);
}

static int64_t real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint8_t byte_at(int producer, uint32_t generation, uint64_t offset)
{
    return (uint8_t)(offset * 131 + (uint64_t)producer * 17 + generation * 29);
}

/* One pipe's reading side: owned by the consumer's listener. */
typedef struct pipe_reader {
    int producer;
    uint32_t generation;
    uint64_t offset; /* bytes read so far */
} pipe_reader;

typedef struct producer {
    int id;
    pthread_t thread;
    uint64_t rng;
    dq_queue *q;
    int wfd; /* write end of the current pipe */
    uint32_t generation;
    uint64_t offset; /* bytes written to the current pipe */
    /* totals over every pipe and message of this producer */
    uint64_t bytes_written;
    _Atomic uint64_t bytes_read;
    _Atomic uint64_t pipes_closed; /* hang-ups seen by the consumer */
    uint64_t pipes_opened;
    uint64_t accepted;
    _Atomic uint64_t delivered, discarded;
    int32_t last_delivered; /* consumer only: post order check */
} producer;

static producer producers[MAX_PRODUCERS];
static int n_producers = 2;
static _Atomic bool stop_producing;
static const char target[] = "fd-stress";
static const char closer[] = "close";
static dq_queue *queue;
static _Atomic int open_readers; /* read ends not yet closed */

/* ---- the consumer's side ------------------------------------------------ */

static uint32_t on_pipe(int fd, uint32_t events, void *ctx)
{
    pipe_reader *r = ctx;
    producer *p = &producers[r->producer];
    uint8_t buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] !=
                byte_at(r->producer, r->generation, r->offset + (uint64_t)i)) {
                violation("producer %d pipe %" PRIu32 ": byte %" PRIu64
                          " is %u, not %u",
                          r->producer, r->generation, r->offset + (uint64_t)i, buf[i],
                          byte_at(r->producer, r->generation, r->offset + (uint64_t)i));
                break;
            }
        r->offset += (uint64_t)n;
        atomic_fetch_add(&p->bytes_read, (uint64_t)n);
    }
    if (n == 0 || (events & DQ_EVENT_ERROR)) {
        if (n != 0) /* a hang-up reported with data still to read: read it next time */
            return DQ_EVENT_INPUT;
        /* end of file: the writer closed; close our end once the queue
           has let go of it */
        dq_msg m = { .target = closer, .arg1 = fd };
        int err = dq_post(queue, &m, NULL);
        if (err != 0)
            violation("posting the close of fd %d: %d", fd, err);
        free(r);
        atomic_fetch_add(&p->pipes_closed, 1);
        return 0;
    }
    return DQ_EVENT_INPUT;
}

static void on_message(const dq_msg *m)
{
    if (m->target == closer) {
        close(m->arg1);
        atomic_fetch_sub(&open_readers, 1);
        return;
    }
    if (m->target != target || m->what < 0 || m->what >= n_producers) {
        violation("a message that was never posted (what %d)", m->what);
        return;
    }
    producer *p = &producers[m->what];
    if (m->arg1 <= p->last_delivered)
        violation("producer %d: message %d delivered after %d", m->what, m->arg1,
                  p->last_delivered);
    p->last_delivered = m->arg1;
    atomic_fetch_add(&p->delivered, 1);
}

static void on_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    if (m->target == target && m->what >= 0 && m->what < n_producers)
        atomic_fetch_add(&producers[m->what].discarded, 1);
    else
        violation("a message of the run's own was discarded");
}

static void *consumer_main(void *arg)
{
    dq_queue *q = arg;
    dq_msg m;
    int err;
    while ((err = dq_next(q, &m)) == 0)
        on_message(&m);
    if (err != -ESHUTDOWN)
        violation("dq_next: %d", err);
    return NULL;
}

/* ---- the producers ------------------------------------------------------ */

static int open_pipe(producer *p)
{
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    pipe_reader *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        close(fds[0]), close(fds[1]);
        return -ENOMEM;
    }
    r->producer = p->id;
    atomic_fetch_add(&open_readers, 1);
    r->generation = p->generation + 1;
    int err = dq_add_fd_listener(p->q, fds[0], DQ_EVENT_INPUT, on_pipe, r);
    if (err != 0) {
        free(r);
        close(fds[0]), close(fds[1]);
        atomic_fetch_sub(&open_readers, 1);
        return err;
    }
    /* the old pipe hangs up only once the new one is watched */
    if (p->wfd >= 0)
        close(p->wfd);
    p->wfd = fds[1];
    p->generation++;
    p->offset = 0;
    p->pipes_opened++;
    return 0;
}

static void write_run(producer *p)
{
    uint8_t buf[2048];
    size_t len = 1 + rng_next(&p->rng) % sizeof(buf);
    for (size_t i = 0; i < len; i++)
        buf[i] = byte_at(p->id, p->generation, p->offset + i);
    ssize_t n = write(p->wfd, buf, len);
    if (n > 0) {
        p->offset += (uint64_t)n;
        p->bytes_written += (uint64_t)n;
    } else if (n < 0 && errno != EAGAIN) {
        violation("producer %d: write: %s", p->id, strerror(errno));
    } else {
        nap_ms(1); /* full: the consumer is behind */
    }
}

static void post_one(producer *p, int32_t seq)
{
    dq_msg m = { .target = target, .what = p->id, .arg1 = seq };
    dq_token tok;
    int err = dq_post(p->q, &m, &tok);
    if (err == -ENOMEM) {
        nap_ms(1);
        return;
    }
    if (err != 0) {
        violation("producer %d: dq_post: %d", p->id, err);
        return;
    }
    p->accepted++;
    /* cancel now and then; -ENOENT means it was delivered first */
    if (rng_next(&p->rng) % 8 == 0) {
        int c = dq_cancel(p->q, tok);
        if (c != 0 && c != -ENOENT)
            violation("producer %d: dq_cancel: %d", p->id, c);
    }
}

static void *producer_main(void *arg)
{
    producer *p = arg;
    int32_t seq = 0;
    while (!atomic_load(&stop_producing)) {
        uint64_t r = rng_next(&p->rng) % 64;
        if (r < 40) {
            post_one(p, ++seq);
        } else if (r < 63) {
            write_run(p);
        } else {
            int err = open_pipe(p);
            if (err != 0 && err != -EMFILE && err != -ENFILE)
                violation("producer %d: a new pipe: %d", p->id, err);
        }
    }
    close(p->wfd); /* the last pipe hangs up */
    p->wfd = -1;
    return NULL;
}

/* ---- the run ------------------------------------------------------------ */

static void usage(const char *why)
{
    fprintf(stderr,
            "dq_stress_fd: %s\n"
            "usage: dq_stress_fd [--duration=SECONDS] [--seed=N] [--producers=N]\n",
            why);
    exit(2);
}

int main(int argc, char **argv)
{
    double duration = 5;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strncmp(argv[i], "--duration=", 11) == 0) {
            duration = strtod(argv[i] + 11, &end);
            if (*end != '\0' || !(duration >= 0 && duration <= 1e7))
                usage("bad --duration");
        } else if (strncmp(argv[i], "--seed=", 7) == 0) {
            seed = strtoull(argv[i] + 7, &end, 10);
            if (*end != '\0' || argv[i][7] == '\0')
                usage("bad --seed");
        } else if (strncmp(argv[i], "--producers=", 12) == 0) {
            long n = strtol(argv[i] + 12, &end, 10);
            if (*end != '\0' || n < 1 || n > MAX_PRODUCERS)
                usage("bad --producers (1 to 64)");
            n_producers = (int)n;
        } else {
            usage("unknown argument");
        }
    }
    dq_options opts = { .on_discard = on_discard };
    dq_queue *q = dq_create(&opts);
    queue = q;
    if (q == NULL) {
        perror("dq_create");
        return 2;
    }
    for (int i = 0; i < n_producers; i++) {
        producer *p = &producers[i];
        p->id = i;
        p->q = q;
        p->wfd = -1;
        p->rng = seed * 1000003 + (uint64_t)i;
        int err = open_pipe(p);
        if (err != 0) {
            fprintf(stderr, "dq_stress_fd: a pipe: %s\n", strerror(-err));
            return 2;
        }
    }
    pthread_t consumer;
    pthread_create(&consumer, NULL, consumer_main, q);
    for (int i = 0; i < n_producers; i++)
        pthread_create(&producers[i].thread, NULL, producer_main, &producers[i]);
    int64_t start = real_now();
    nap_ms((int)(duration * 1000));
    atomic_store(&stop_producing, true);
    for (int i = 0; i < n_producers; i++)
        pthread_join(producers[i].thread, NULL);

    /* drain: every pipe hung up and read, every message accounted for */
    int64_t bound = real_now() + DRAIN_BOUND_NS;
    for (;;) {
        bool done = atomic_load(&open_readers) == 0;
        for (int i = 0; i < n_producers; i++) {
            producer *p = &producers[i];
            done &=
                atomic_load(&p->pipes_closed) == p->pipes_opened &&
                atomic_load(&p->delivered) + atomic_load(&p->discarded) == p->accepted;
        }
        if (done)
            break;
        if (real_now() > bound) {
            violation("not drained %d s after the producers stopped",
                      (int)(DRAIN_BOUND_NS / 1000000000));
            break;
        }
        nap_ms(5);
    }
    dq_quit(q);
    pthread_join(consumer, NULL);

    uint64_t bytes = 0, messages = 0, pipes = 0;
    for (int i = 0; i < n_producers; i++) {
        producer *p = &producers[i];
        uint64_t got = atomic_load(&p->bytes_read);
        if (got != p->bytes_written)
            violation("producer %d: %" PRIu64 " bytes written, %" PRIu64 " read", i,
                      p->bytes_written, got);
        uint64_t d = atomic_load(&p->delivered), x = atomic_load(&p->discarded);
        if (d + x != p->accepted)
            violation("producer %d: accepted %" PRIu64 " != delivered %" PRIu64
                      " + discarded %" PRIu64,
                      i, p->accepted, d, x);
        bytes += got;
        messages += p->accepted;
        pipes += p->pipes_opened;
    }
    dq_unref(q);
    uint64_t v = atomic_load(&n_violations);
    printf("dq_stress_fd: %.1f s, %d producers, %" PRIu64 " messages, %" PRIu64
           " bytes through %" PRIu64 " pipes, %" PRIu64 " violations: %s\n",
           (double)(real_now() - start) / 1e9, n_producers, messages, bytes, pipes, v,
           v == 0 ? "pass" : "FAIL");
    return v == 0 ? 0 : 1;
}
