/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd_bench: file-descriptor events and the backend fd, as ratios.
 *
 *   1. fd ready -> callback: a thread writes a timestamp into a pipe; the
 *      consumer, idle in its wait, reads it in a listener.  Against a bare
 *      epoll loop over the same pipe and an eventfd doing the same read.
 *      Goal: deliqueue's p50 at most 1.2x the bare loop's.
 *   2. post -> delivery on a consumer asleep in dq_next: a queue that
 *      watches 64 idle pipes against one that watches none, and none
 *      against none again (the A/A band).  Goal: within the band.
 *   3. the same post -> delivery with the consumer in a libuv loop polling
 *      dq_backend_fd, against dq_next.
 *
 * Each sample waits for the previous one to be seen, then pauses
 * --gap-us, so every sample meets an idle consumer (a wake-up, not a
 * handoff to a busy one).  Repetitions alternate the contenders; the
 * program prints each one's p50 and p99 per repetition and the median
 * ratios.  Numbers, not timed assertions.
 *
 * usage: fd_bench [--samples N] [--reps N] [--gap-us N]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h"

#define MAX_REPS 32
#define IDLE_FDS 64

static int samples = 2000, reps = 5, gap_us = 100;
static int target;

/* ---- samples ---------------------------------------------------------- */

typedef struct run {
    int64_t *lat;     /* ns, one per sample */
    _Atomic int seen; /* samples the consumer has taken */
    _Atomic bool stop;
} run;

static void run_init(run *r)
{
    r->lat = calloc((size_t)samples, sizeof(int64_t));
    atomic_store(&r->seen, 0);
    atomic_store(&r->stop, false);
}

static void take(run *r, int64_t sent_at)
{
    int i = atomic_load_explicit(&r->seen, memory_order_relaxed);
    if (i < samples)
        r->lat[i] = bench_now() - sent_at;
    atomic_store_explicit(&r->seen, i + 1, memory_order_release);
}

static void pause_gap(void)
{
    struct timespec ts = { 0, (long)gap_us * 1000 };
    nanosleep(&ts, NULL);
}

/* Wait until sample i is taken (bounded, so a lost wake-up shows as a
   missing sample rather than a hang). */
static bool await_seen(run *r, int i)
{
    int64_t end = bench_now() + INT64_C(2000000000);
    while (atomic_load_explicit(&r->seen, memory_order_acquire) <= i)
        if (bench_now() > end)
            return false;
    return true;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct result {
    double p50, p99;
} result;

static result summarize(run *r)
{
    int n = atomic_load(&r->seen);
    if (n > samples)
        n = samples;
    qsort(r->lat, (size_t)n, sizeof(int64_t), cmp_i64);
    result s = { 0, 0 };
    if (n > 0) {
        s.p50 = (double)r->lat[n / 2];
        s.p99 = (double)r->lat[(n * 99) / 100];
    }
    if (n < samples)
        fprintf(stderr, "fd_bench: only %d of %d samples (a lost wake-up?)\n", n,
                samples);
    free(r->lat);
    return s;
}

static double median(double *v, int n)
{
    double tmp[MAX_REPS];
    memcpy(tmp, v, (size_t)n * sizeof(double));
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && tmp[j - 1] > tmp[j]; j--) {
            double t = tmp[j];
            tmp[j] = tmp[j - 1];
            tmp[j - 1] = t;
        }
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* ---- 1. fd ready -> callback ------------------------------------------- */

typedef struct pipe_run {
    run r;
    int p[2];
    dq_queue *q;
} pipe_run;

static void write_stamp(int fd)
{
    int64_t t = bench_now();
    if (write(fd, &t, sizeof(t)) != sizeof(t))
        abort();
}

static void read_stamp(run *r, int fd)
{
    int64_t t;
    while (read(fd, &t, sizeof(t)) == sizeof(t))
        take(r, t);
}

static uint32_t on_stamp(int fd, uint32_t events, void *ctx)
{
    (void)events;
    read_stamp(ctx, fd);
    return DQ_EVENT_INPUT;
}

static void *dq_pipe_consumer(void *arg)
{
    pipe_run *pr = arg;
    (void)dq_loop(pr->q);
    return NULL;
}

static void *bare_pipe_consumer(void *arg)
{
    pipe_run *pr = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0 };
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    ev.data.u64 = 1;
    epoll_ctl(ep, EPOLL_CTL_ADD, pr->p[0], &ev);
    struct epoll_event out[8];
    while (!atomic_load_explicit(&pr->r.stop, memory_order_relaxed)) {
        int n = epoll_wait(ep, out, 8, -1);
        for (int i = 0; i < n; i++) {
            if (out[i].data.u64 == 0) {
                uint64_t v;
                if (read(efd, &v, sizeof(v)) < 0)
                    continue;
            } else {
                read_stamp(&pr->r, pr->p[0]);
            }
        }
    }
    close(ep);
    close(efd);
    return NULL;
}

static result fd_latency(bool bare)
{
    pipe_run pr;
    run_init(&pr.r);
    if (pipe2(pr.p, O_NONBLOCK | O_CLOEXEC) != 0)
        abort();
    pthread_t t;
    if (bare) {
        pthread_create(&t, NULL, bare_pipe_consumer, &pr);
    } else {
        pr.q = dq_create(NULL);
        if (dq_add_fd_listener(pr.q, pr.p[0], DQ_EVENT_INPUT, on_stamp, &pr.r) != 0)
            abort();
        pthread_create(&t, NULL, dq_pipe_consumer, &pr);
    }
    for (int i = 0; i < samples; i++) {
        pause_gap();
        write_stamp(pr.p[1]);
        if (!await_seen(&pr.r, i))
            break;
    }
    atomic_store(&pr.r.stop, true);
    if (bare) {
        char c = 0; /* an odd byte count: no stamp is taken from it */
        if (write(pr.p[1], &c, 1) != 1)
            abort();
    } else {
        dq_quit(pr.q);
    }
    pthread_join(t, NULL);
    if (!bare)
        dq_unref(pr.q);
    close(pr.p[0]);
    close(pr.p[1]);
    return summarize(&pr.r);
}

/* ---- 2. and 3. post -> delivery ----------------------------------------- */

typedef struct post_run {
    run r;
    dq_queue *q;
    int idle[IDLE_FDS][2];
    uv_loop_t loop;
    uv_poll_t poll;
} post_run;

static void deliver(run *r, const dq_msg *m)
{
    take(r, (int64_t)(intptr_t)m->obj);
}

static void *next_consumer(void *arg)
{
    post_run *pr = arg;
    dq_msg m;
    while (dq_next(pr->q, &m) == 0)
        deliver(&pr->r, &m);
    return NULL;
}

static uint32_t never(int fd, uint32_t events, void *ctx)
{
    (void)fd, (void)events, (void)ctx;
    abort();
}

static void on_backend(uv_poll_t *h, int status, int events)
{
    (void)status, (void)events;
    post_run *pr = h->data;
    dq_msg m;
    int err;
    while ((err = dq_try_next(pr->q, &m)) == 0)
        deliver(&pr->r, &m);
    if (err == -ESHUTDOWN) {
        uv_poll_stop(h);
        uv_close((uv_handle_t *)h, NULL);
    }
}

static void *uv_consumer(void *arg)
{
    post_run *pr = arg;
    uv_loop_init(&pr->loop);
    int fd = dq_backend_fd(pr->q);
    if (fd < 0)
        abort();
    uv_poll_init(&pr->loop, &pr->poll, fd);
    pr->poll.data = pr;
    uv_poll_start(&pr->poll, UV_READABLE, on_backend);
    uv_run(&pr->loop, UV_RUN_DEFAULT);
    uv_loop_close(&pr->loop);
    return NULL;
}

enum post_kind { PLAIN, IDLE_64, LIBUV };

static result post_latency(enum post_kind kind)
{
    post_run pr;
    run_init(&pr.r);
    pr.q = dq_create(NULL);
    if (kind == IDLE_64)
        for (int i = 0; i < IDLE_FDS; i++)
            if (pipe2(pr.idle[i], O_NONBLOCK | O_CLOEXEC) != 0 ||
                dq_add_fd_listener(pr.q, pr.idle[i][0], DQ_EVENT_INPUT, never, NULL) !=
                    0)
                abort();
    pthread_t t;
    pthread_create(&t, NULL, kind == LIBUV ? uv_consumer : next_consumer, &pr);
    for (int i = 0; i < samples; i++) {
        pause_gap();
        dq_msg m = { .target = &target, .obj = (void *)(intptr_t)bench_now() };
        if (dq_post(pr.q, &m, NULL) != 0 || !await_seen(&pr.r, i))
            break;
    }
    dq_quit(pr.q);
    pthread_join(t, NULL);
    dq_unref(pr.q);
    if (kind == IDLE_64)
        for (int i = 0; i < IDLE_FDS; i++)
            close(pr.idle[i][0]), close(pr.idle[i][1]);
    return summarize(&pr.r);
}

/* ---- output ------------------------------------------------------------- */

static void print_row(const char *name, double *p50, double *p99)
{
    printf("  %-34s", name);
    for (int i = 0; i < reps; i++)
        printf(" %7.2f/%-7.2f", p50[i] / 1e3, p99[i] / 1e3);
    printf("  median %7.2f/%.2f us\n", median(p50, reps) / 1e3,
           median(p99, reps) / 1e3);
}

static double ratio(double *a, double *b)
{
    double r[MAX_REPS];
    for (int i = 0; i < reps; i++)
        r[i] = a[i] / b[i];
    return median(r, reps);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc)
            samples = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--gap-us") == 0 && i + 1 < argc)
            gap_us = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: fd_bench [--samples N] [--reps N] [--gap-us N]\n");
            return 2;
        }
    }
    if (samples < 100 || reps < 1 || reps > MAX_REPS || gap_us < 0) {
        fprintf(stderr, "fd_bench: --samples >= 100, --reps 1..%d, --gap-us >= 0\n",
                MAX_REPS);
        return 2;
    }
    char cpu[128];
    bench_cpu_model(cpu, sizeof(cpu));
    printf("fd_bench: %s, load %.2f, %d samples x %d reps, gap %d us; p50/p99 in us\n",
           cpu, bench_loadavg(), samples, reps, gap_us);

    double dq50[MAX_REPS], dq99[MAX_REPS], bare50[MAX_REPS], bare99[MAX_REPS];
    double a50[MAX_REPS], a99[MAX_REPS], b50[MAX_REPS], b99[MAX_REPS];
    double aa50[MAX_REPS], aa99[MAX_REPS], uv50[MAX_REPS], uv99[MAX_REPS];
    for (int i = 0; i < reps; i++) {
        result r;
        r = fd_latency(true), bare50[i] = r.p50, bare99[i] = r.p99;
        r = fd_latency(false), dq50[i] = r.p50, dq99[i] = r.p99;
        r = post_latency(PLAIN), a50[i] = r.p50, a99[i] = r.p99;
        r = post_latency(IDLE_64), b50[i] = r.p50, b99[i] = r.p99;
        r = post_latency(PLAIN), aa50[i] = r.p50, aa99[i] = r.p99;
        r = post_latency(LIBUV), uv50[i] = r.p50, uv99[i] = r.p99;
    }
    printf("\nfd ready -> callback\n");
    print_row("bare epoll + eventfd loop", bare50, bare99);
    print_row("deliqueue listener (dq_loop)", dq50, dq99);
    double fd_ratio = ratio(dq50, bare50);
    printf("  ratio deliqueue/bare: p50 %.2fx (goal <= 1.20x: %s), p99 %.2fx\n",
           fd_ratio, fd_ratio <= 1.2 ? "met" : "not met", ratio(dq99, bare99));

    printf("\npost -> delivery, consumer asleep in dq_next\n");
    print_row("no fd watched (A)", a50, a99);
    print_row("no fd watched again (A')", aa50, aa99);
    print_row("64 idle fds watched (B)", b50, b99);
    double band50 = ratio(aa50, a50), band99 = ratio(aa99, a99);
    double r50 = ratio(b50, a50), r99 = ratio(b99, a99);
    double lo50 = band50 < 1 ? band50 : 1 / band50, hi50 = 1 / lo50;
    printf("  A/A band: p50 %.2fx, p99 %.2fx\n", band50, band99);
    printf(
        "  ratio B/A: p50 %.2fx (within the A/A band [%.2fx, %.2fx]: %s), p99 %.2fx\n",
        r50, lo50, hi50, r50 >= lo50 && r50 <= hi50 ? "yes" : "no", r99);

    printf("\npost -> delivery through dq_backend_fd under libuv\n");
    print_row("libuv loop, uv_poll on the backend fd", uv50, uv99);
    printf("  ratio libuv/dq_next: p50 %.2fx, p99 %.2fx\n", ratio(uv50, a50),
           ratio(uv99, a99));
    return 0;
}
