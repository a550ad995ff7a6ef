/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/repeat_drift.c: how far a periodic callback drifts from its grid
 * under load.  An occurrence's drift is the time it ran minus the grid
 * point it was meant for: for dq_fixed_rate its own due time (m->when,
 * first + k * period for its grid index k; the periods it skips after an
 * overrun are counted as occurrences missing, not as drift), for the
 * others, which have no grid of their own, first + k * period for the
 * k-th occurrence in delivery order.  Three contenders, each on its own
 * loop thread:
 *
 *   dq_fixed_rate   dq_post_repeating(DQ_FIXED_RATE), consumer on dq_loop
 *   dq_repost       the callback re-posts itself with dq_post_at at
 *                   now + period (what code without repeating posts does)
 *   uv_timer        libuv's uv_timer_start with repeat = period (libuv
 *                   counts in whole milliseconds: the period is rounded up)
 *
 * The load: a thread that hands the loop a work item (spinning --load-us)
 * at random intervals averaging one period, through the loop's own
 * channel (dq_post; uv_async_send), so deliveries wait behind it; and
 * --burners threads spinning, so the loop thread competes for a CPU.
 *
 * Each contender runs for --periods periods of wall time per repetition;
 * the table gives, over --reps repetitions, the median of each run's
 * median drift and the largest drift seen, the occurrences delivered by
 * the end (median) against the periods expected, and the median drift's
 * ratio to dq_fixed_rate's.  A program that prints, not a timed assertion:
 *
 *   bazel run -c opt //bench:repeat_drift -- --periods=10000 --period-us=1000
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h"

static long periods = 10000;
static int64_t period_ns = 1000000;
static int64_t load_ns = 300000;
static int burners = 1;
static int reps = 3;

/* One run's record: the loop thread writes, main reads after the join. */
static int64_t *times; /* periods entries */
static int64_t *meant; /* the grid point of each, or 0: the k-th */
static long count;
static int64_t first;

static void record(int64_t grid_point)
{
    if (count < periods) {
        times[count] = bench_now();
        meant[count] = grid_point;
    }
    count++;
}

static void spin_ns(int64_t ns)
{
    int64_t end = bench_now() + ns;
    while (bench_now() < end)
        ;
}

static void nap_ns(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- the load ----------------------------------------------------------- */

static _Atomic bool load_stop, burn_stop;
static void (*load_post)(void);

static void *load_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    while (!atomic_load_explicit(&load_stop, memory_order_relaxed)) {
        nap_ns((int64_t)(rand_r(&seed) % 2000) * period_ns / 1000);
        load_post();
    }
    return NULL;
}

static void *burn_main(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&burn_stop, memory_order_relaxed))
        ;
    return NULL;
}

/* ---- deliqueue ---------------------------------------------------------- */

static dq_queue *dq;
static int target;
static bool repost;

static void dq_load_cb(dq_msg *m)
{
    (void)m;
    spin_ns(load_ns);
}

static void dq_load_post(void)
{
    dq_msg m = { .target = &target, .what = 1, .callback = dq_load_cb };
    (void)dq_post(dq, &m, NULL);
}

static void dq_tick(dq_msg *m)
{
    /* a repeating post's when is its own grid point (dq_now's clock,
       CLOCK_MONOTONIC as bench_now) */
    record(repost ? 0 : m->when);
    if (repost) {
        dq_msg next = *m;
        (void)dq_post_at(dq, &next, bench_now() + period_ns, NULL);
    }
}

static void *dq_loop_main(void *arg)
{
    (void)arg;
    dq_loop(dq);
    return NULL;
}

static void run_dq(bool re)
{
    repost = re;
    dq = dq_create(NULL);
    load_post = dq_load_post;
    pthread_t t;
    pthread_create(&t, NULL, dq_loop_main, NULL);
    first = bench_now() + period_ns;
    dq_msg m = { .target = &target, .what = 2, .callback = dq_tick };
    dq_token tok;
    if (re)
        dq_post_at(dq, &m, first, &tok);
    else
        dq_post_repeating(dq, &m, first, period_ns, DQ_FIXED_RATE, &tok);
    pthread_t l;
    atomic_store(&load_stop, false);
    pthread_create(&l, NULL, load_main, (void *)(uintptr_t)first);
    nap_ns(first + periods * period_ns - bench_now());
    atomic_store(&load_stop, true);
    pthread_join(l, NULL);
    dq_quit(dq);
    pthread_join(t, NULL);
    dq_unref(dq);
}

static void run_dq_fixed_rate(void)
{
    run_dq(false);
}

static void run_dq_repost(void)
{
    run_dq(true);
}

/* ---- libuv -------------------------------------------------------------- */

static uv_loop_t uvl;
static uv_timer_t uvt;
static uv_async_t uv_load, uv_stop_async;
static _Atomic uint32_t uv_pending; /* load items handed over, not yet run */

static void uv_tick(uv_timer_t *t)
{
    (void)t;
    record(0);
}

static void uv_load_cb(uv_async_t *a)
{
    (void)a;
    /* uv_async_send coalesces: run every item handed over so far */
    uint32_t n = atomic_exchange(&uv_pending, 0);
    spin_ns(load_ns * n);
}

static void uv_load_post(void)
{
    atomic_fetch_add(&uv_pending, 1);
    uv_async_send(&uv_load);
}

static void uv_stop_cb(uv_async_t *a)
{
    (void)a;
    uv_timer_stop(&uvt);
    uv_close((uv_handle_t *)&uvt, NULL);
    uv_close((uv_handle_t *)&uv_load, NULL);
    uv_close((uv_handle_t *)&uv_stop_async, NULL);
}

static void *uv_loop_main(void *arg)
{
    (void)arg;
    uv_run(&uvl, UV_RUN_DEFAULT);
    return NULL;
}

static void run_uv_timer(void)
{
    uv_loop_init(&uvl);
    uv_timer_init(&uvl, &uvt);
    uv_async_init(&uvl, &uv_load, uv_load_cb);
    uv_async_init(&uvl, &uv_stop_async, uv_stop_cb);
    atomic_store(&uv_pending, 0);
    uint64_t ms = (uint64_t)((period_ns + 999999) / 1000000);
    /* before the loop thread runs: libuv's handles are its thread's */
    uv_update_time(&uvl);
    first = bench_now() + (int64_t)ms * 1000000;
    uv_timer_start(&uvt, uv_tick, ms, ms);
    load_post = uv_load_post;
    pthread_t t, l;
    pthread_create(&t, NULL, uv_loop_main, NULL);
    atomic_store(&load_stop, false);
    pthread_create(&l, NULL, load_main, (void *)(uintptr_t)first);
    nap_ns(first + periods * period_ns - bench_now());
    atomic_store(&load_stop, true);
    pthread_join(l, NULL);
    uv_async_send(&uv_stop_async);
    pthread_join(t, NULL);
    uv_loop_close(&uvl);
}

/* ---- the table ---------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void usage(void)
{
    fprintf(stderr, "usage: repeat_drift [--periods=N] [--period-us=N] [--load-us=N] "
                    "[--burners=N] [--reps=N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--periods=", 10) == 0)
            periods = strtol(a + 10, NULL, 10);
        else if (strncmp(a, "--period-us=", 12) == 0)
            period_ns = strtoll(a + 12, NULL, 10) * 1000;
        else if (strncmp(a, "--load-us=", 10) == 0)
            load_ns = strtoll(a + 10, NULL, 10) * 1000;
        else if (strncmp(a, "--burners=", 10) == 0)
            burners = (int)strtol(a + 10, NULL, 10);
        else if (strncmp(a, "--reps=", 7) == 0)
            reps = (int)strtol(a + 7, NULL, 10);
        else
            usage();
    }
    if (periods < 1 || period_ns < 1000 || load_ns < 0 || burners < 0 || reps < 1)
        usage();
    static const struct {
        const char *name;
        void (*run)(void);
    } contenders[] = {
        { "dq_fixed_rate", run_dq_fixed_rate },
        { "dq_repost", run_dq_repost },
        { "uv_timer", run_uv_timer },
    };
    enum { N = sizeof contenders / sizeof contenders[0] };
    times = calloc((size_t)periods, sizeof *times);
    meant = calloc((size_t)periods, sizeof *meant);
    int64_t *drift = calloc((size_t)periods, sizeof *drift);
    double *med[N], *occ[N], worst[N];
    for (int c = 0; c < N; c++) {
        med[c] = calloc((size_t)reps, sizeof(double));
        occ[c] = calloc((size_t)reps, sizeof(double));
        worst[c] = 0;
    }
    char cpu[128];
    bench_cpu_model(cpu, sizeof cpu);
    printf("# repeat_drift: a periodic callback's drift from its grid under load\n\n");
    printf("- machine: %s, %ld CPUs online, load average %.2f\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), bench_loadavg());
    printf("- %ld periods of %.0f us (uv_timer: %lld ms), %d repetitions; load: a "
           "%.0f us item about once a period, %d burner threads\n\n",
           periods, (double)period_ns / 1e3,
           (long long)((period_ns + 999999) / 1000000), reps, (double)load_ns / 1e3,
           burners);
    pthread_t *burn = calloc((size_t)burners + 1, sizeof *burn);
    atomic_store(&burn_stop, false);
    for (int b = 0; b < burners; b++)
        pthread_create(&burn[b], NULL, burn_main, NULL);
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < N; c++) {
            count = 0;
            contenders[c].run();
            long n = count < periods ? count : periods;
            for (long k = 0; k < n; k++)
                drift[k] =
                    times[k] - (meant[k] != 0 ? meant[k] : first + k * period_ns);
            occ[c][r] = (double)n;
            if (n == 0) {
                med[c][r] = 0;
                continue;
            }
            qsort(drift, (size_t)n, sizeof *drift, cmp_i64);
            med[c][r] = (double)drift[n / 2] / 1e3;
            if ((double)drift[n - 1] / 1e3 > worst[c])
                worst[c] = (double)drift[n - 1] / 1e3;
        }
    atomic_store(&burn_stop, true);
    for (int b = 0; b < burners; b++)
        pthread_join(burn[b], NULL);
    double m[N], o[N];
    for (int c = 0; c < N; c++) {
        m[c] = bench_median(med[c], reps);
        o[c] = bench_median(occ[c], reps);
    }
    printf(
        "| contender | occurrences (median) | expected | drift median (us) | drift max "
        "(us) | median drift ratio to dq_fixed_rate |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int c = 0; c < N; c++) {
        char ratio[32];
        if (m[0] > 0)
            snprintf(ratio, sizeof ratio, "%.2f", m[c] / m[0]);
        else
            snprintf(ratio, sizeof ratio, "n/a");
        printf("| %s | %.0f | %ld | %.1f | %.1f | %s |\n", contenders[c].name, o[c],
               periods, m[c], worst[c], ratio);
    }
    free(burn);
    free(times);
    free(meant);
    free(drift);
    for (int c = 0; c < N; c++) {
        free(med[c]);
        free(occ[c]);
    }
    return 0;
}
