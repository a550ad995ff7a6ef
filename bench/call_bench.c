/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/call_bench.c: a blocking cross-thread call's round trip.  The
 * caller hands a function to a worker thread and waits until it has
 * returned, three ways:
 *
 *   dq_call           dq_call on a queue whose consumer runs dq_loop
 *   mutex_condvar     a request slot under a mutex, a condition variable
 *                     each way (the worker sleeps on one, the caller on
 *                     the other)
 *   dq_post_futex     dq_post of a callback message, the reply a futex
 *                     word the callback sets and wakes
 *
 * Each repetition runs every contender for --iters round trips, in turn;
 * the table gives each one's median over --reps repetitions of the mean
 * ns per round trip, and its ratio to dq_call's (below 1: faster than
 * dq_call).  A program that prints, not a timed assertion:
 *
 *   bazel run -c opt //bench:call_bench -- --iters=20000 --reps=5
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h"

static long iters = 20000;
static int reps = 5;

/* the called function: what every contender runs on the worker */
static _Atomic uint64_t sink;
static void work(void *ctx)
{
    (void)ctx;
    atomic_fetch_add_explicit(&sink, 1, memory_order_relaxed);
}

/* ---- dq_call ------------------------------------------------------------ */

static void *loop_main(void *arg)
{
    dq_loop(arg);
    return NULL;
}

static double run_dq_call(void)
{
    dq_queue *q = dq_create(NULL);
    pthread_t t;
    pthread_create(&t, NULL, loop_main, q);
    /* the first call waits for the consumer thread to start */
    dq_call(q, work, NULL, INT64_MAX);
    int64_t t0 = bench_now();
    for (long i = 0; i < iters; i++)
        if (dq_call(q, work, NULL, INT64_MAX) != 0) {
            fprintf(stderr, "call_bench: dq_call failed\n");
            exit(1);
        }
    int64_t t1 = bench_now();
    dq_quit(q);
    pthread_join(t, NULL);
    dq_unref(q);
    return (double)(t1 - t0) / (double)iters;
}

/* ---- mutex + condvar ---------------------------------------------------- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t to_worker, to_caller;
    void (*fn)(void *); /* the request; NULL when none */
    bool done, quit;
} mc = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .to_worker = PTHREAD_COND_INITIALIZER,
    .to_caller = PTHREAD_COND_INITIALIZER,
};

static void *mc_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mc.lock);
    for (;;) {
        while (mc.fn == NULL && !mc.quit)
            pthread_cond_wait(&mc.to_worker, &mc.lock);
        if (mc.fn == NULL)
            break;
        void (*fn)(void *) = mc.fn;
        mc.fn = NULL;
        pthread_mutex_unlock(&mc.lock);
        fn(NULL);
        pthread_mutex_lock(&mc.lock);
        mc.done = true;
        pthread_cond_signal(&mc.to_caller);
    }
    pthread_mutex_unlock(&mc.lock);
    return NULL;
}

static void mc_call(void (*fn)(void *))
{
    pthread_mutex_lock(&mc.lock);
    mc.fn = fn;
    mc.done = false;
    pthread_cond_signal(&mc.to_worker);
    while (!mc.done)
        pthread_cond_wait(&mc.to_caller, &mc.lock);
    pthread_mutex_unlock(&mc.lock);
}

static double run_mutex_condvar(void)
{
    mc.quit = false;
    pthread_t t;
    pthread_create(&t, NULL, mc_worker, NULL);
    mc_call(work);
    int64_t t0 = bench_now();
    for (long i = 0; i < iters; i++)
        mc_call(work);
    int64_t t1 = bench_now();
    pthread_mutex_lock(&mc.lock);
    mc.quit = true;
    pthread_cond_signal(&mc.to_worker);
    pthread_mutex_unlock(&mc.lock);
    pthread_join(t, NULL);
    return (double)(t1 - t0) / (double)iters;
}

/* ---- dq_post + a futex reply -------------------------------------------- */

static int target;
static _Atomic uint32_t reply; /* 0 waiting, 1 done */

static void futex_cb(dq_msg *m)
{
    (void)m;
    work(NULL);
    /* release: what fn wrote happens before the caller's acquire load */
    atomic_store_explicit(&reply, 1, memory_order_release);
    syscall(SYS_futex, &reply, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void futex_call(dq_queue *q)
{
    atomic_store_explicit(&reply, 0, memory_order_relaxed);
    dq_msg m = { .target = &target, .callback = futex_cb };
    if (dq_post(q, &m, NULL) != 0) {
        fprintf(stderr, "call_bench: dq_post failed\n");
        exit(1);
    }
    while (atomic_load_explicit(&reply, memory_order_acquire) == 0)
        syscall(SYS_futex, &reply, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

static double run_dq_post_futex(void)
{
    dq_queue *q = dq_create(NULL);
    pthread_t t;
    pthread_create(&t, NULL, loop_main, q);
    futex_call(q);
    int64_t t0 = bench_now();
    for (long i = 0; i < iters; i++)
        futex_call(q);
    int64_t t1 = bench_now();
    dq_quit(q);
    pthread_join(t, NULL);
    dq_unref(q);
    return (double)(t1 - t0) / (double)iters;
}

/* ---- the table ---------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: call_bench [--iters=N] [--reps=N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--iters=", 8) == 0)
            iters = strtol(argv[i] + 8, NULL, 10);
        else if (strncmp(argv[i], "--reps=", 7) == 0)
            reps = (int)strtol(argv[i] + 7, NULL, 10);
        else
            usage();
    }
    if (iters < 1 || reps < 1)
        usage();
    static const struct {
        const char *name;
        double (*run)(void);
    } contenders[] = {
        { "dq_call", run_dq_call },
        { "mutex_condvar", run_mutex_condvar },
        { "dq_post_futex", run_dq_post_futex },
    };
    enum { N = sizeof contenders / sizeof contenders[0] };
    double *ns[N];
    for (int c = 0; c < N; c++)
        ns[c] = calloc((size_t)reps, sizeof(double));
    char cpu[128];
    bench_cpu_model(cpu, sizeof cpu);
    printf("# call_bench: a blocking call's round trip to a worker thread\n\n");
    printf("- machine: %s, %ld CPUs online, load average %.2f\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), bench_loadavg());
    printf("- %ld round trips per repetition, %d repetitions (contenders in turn)\n\n",
           iters, reps);
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < N; c++)
            ns[c][r] = contenders[c].run();
    double med[N];
    for (int c = 0; c < N; c++)
        med[c] = bench_median(ns[c], reps);
    printf("| contender | ns per round trip (median) | ratio to dq_call |\n");
    printf("| --- | ---: | ---: |\n");
    for (int c = 0; c < N; c++)
        printf("| %s | %.0f | %.2f |\n", contenders[c].name, med[c], med[c] / med[0]);
    for (int c = 0; c < N; c++)
        free(ns[c]);
    return 0;
}
