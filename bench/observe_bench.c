/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/observe_bench.c: what observing a looper costs.
 *
 *   dispatch   dq_loop draining --msgs due messages on its own thread,
 *              ns per dispatch: with no observer (twice: the second is
 *              the A/A twin, whose ratio to the first is noise alone),
 *              with an observer whose start and end callbacks count,
 *              and with an observer that has only slow thresholds (its
 *              clock reads, no report)
 *   dump       dq_dump of a queue holding --pending messages, to
 *              /dev/null: ms per dump
 *
 * Each repetition runs every row in turn; the tables give medians over
 * --reps repetitions and ratios to the first row.  A program that
 * prints, not a timed assertion:
 *
 *   bazel run -c opt //bench:observe_bench -- --msgs=200000 --pending=100000 --reps=7
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h"

static long msgs = 200000, pending = 100000;
static int reps = 7;
static int target;
static uint64_t sink;

static void count_dispatch(dq_msg *m, void *ctx)
{
    (void)m, (void)ctx;
    sink++;
}

static void on_start(const dq_msg *m, int64_t start, void *ctx)
{
    (void)m, (void)start;
    ++*(uint64_t *)ctx;
}

static void on_end(const dq_msg *m, int64_t start, int64_t end, void *ctx)
{
    (void)m, (void)start, (void)end;
    ++*(uint64_t *)ctx;
}

static void on_slow(const dq_msg *m, uint32_t kind, int64_t ns, void *ctx)
{
    (void)m, (void)kind, (void)ns;
    ++*(uint64_t *)ctx;
}

enum { NO_OBSERVER, NO_OBSERVER_TWIN, OBSERVER_CALLBACKS, OBSERVER_THRESHOLDS, ROWS };
static const char *row_names[ROWS] = { "no observer", "no observer (A/A twin)",
                                       "observer: start and end callbacks",
                                       "observer: slow thresholds only" };

/* ns per dispatch of a drain of msgs due messages under observer row */
static double run_dispatch(int row)
{
    dq_options opts = { .dispatch = count_dispatch };
    dq_queue *q = dq_create(&opts);
    uint64_t seen = 0;
    if (row == OBSERVER_CALLBACKS) {
        dq_observer o = { .dispatch_start = on_start,
                          .dispatch_end = on_end,
                          .ctx = &seen };
        dq_set_observer(q, &o);
    } else if (row == OBSERVER_THRESHOLDS) {
        dq_observer o = { .slow = on_slow,
                          .slow_delivery_ns = INT64_C(1000000000),
                          .slow_dispatch_ns = INT64_C(1000000000),
                          .ctx = &seen };
        dq_set_observer(q, &o);
    }
    dq_msg m = { .target = &target };
    for (long i = 0; i < msgs; i++) {
        m.what = (int32_t)i;
        dq_post(q, &m, NULL);
    }
    dq_quit_safely(q);
    int64_t t0 = bench_now();
    dq_loop(q);
    int64_t t1 = bench_now();
    dq_unref(q);
    return (double)(t1 - t0) / (double)msgs;
}

/* ms per dq_dump of pending messages */
static double run_dump(void)
{
    dq_queue *q = dq_create(NULL);
    dq_msg m = { .target = &target };
    for (long i = 0; i < pending; i++) {
        m.what = (int32_t)i;
        dq_post_delayed(q, &m, INT64_C(3600000000000) + i, NULL);
    }
    FILE *out = fopen("/dev/null", "w");
    int64_t t0 = bench_now();
    int err = dq_dump(q, out);
    int64_t t1 = bench_now();
    fclose(out);
    dq_unref(q);
    if (err != 0) {
        fprintf(stderr, "observe_bench: dq_dump: %s\n", strerror(-err));
        exit(1);
    }
    return (double)(t1 - t0) / 1e6;
}

static void usage(void)
{
    fprintf(stderr, "usage: observe_bench [--msgs=N] [--pending=N] [--reps=N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--msgs=", 7) == 0)
            msgs = strtol(argv[i] + 7, NULL, 10);
        else if (strncmp(argv[i], "--pending=", 10) == 0)
            pending = strtol(argv[i] + 10, NULL, 10);
        else if (strncmp(argv[i], "--reps=", 7) == 0)
            reps = (int)strtol(argv[i] + 7, NULL, 10);
        else
            usage();
    }
    if (msgs < 1 || pending < 1 || reps < 1)
        usage();
    double *ns[ROWS], *dump_ms = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < ROWS; r++)
        ns[r] = calloc((size_t)reps, sizeof(double));
    char cpu[128];
    bench_cpu_model(cpu, sizeof cpu);
    printf("# observe_bench: the dispatch observer's cost, and dq_dump's\n\n");
    printf("- machine: %s, %ld CPUs online, load average %.2f\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), bench_loadavg());
    printf("- %ld dispatches per repetition, a dump of %ld pending messages, %d "
           "repetitions (rows in turn)\n\n",
           msgs, pending, reps);
    for (int rep = 0; rep < reps; rep++) {
        for (int r = 0; r < ROWS; r++)
            ns[r][rep] = run_dispatch(r);
        dump_ms[rep] = run_dump();
    }
    double med[ROWS];
    for (int r = 0; r < ROWS; r++)
        med[r] = bench_median(ns[r], reps);
    printf("| dq_loop dispatch | ns per dispatch (median) | ratio to no observer |\n");
    printf("| --- | ---: | ---: |\n");
    for (int r = 0; r < ROWS; r++)
        printf("| %s | %.1f | %.2f |\n", row_names[r], med[r],
               med[r] / med[NO_OBSERVER]);
    printf("\n| dq_dump | pending messages | ms per dump (median) |\n");
    printf("| --- | ---: | ---: |\n");
    printf("| to /dev/null | %ld | %.1f |\n", pending, bench_median(dump_ms, reps));
    for (int r = 0; r < ROWS; r++)
        free(ns[r]);
    free(dump_ms);
    return 0;
}
