/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace_cost: what tracing costs per event when it is on.  One thread
 * posts N messages (due far in the future, so nothing is delivered) and
 * then, as the consumer, takes N due-now messages with dq_try_next, with
 * tracing off and on, alternating, several rounds; the difference per
 * call over the events each call writes (a post: 1; a delivery: its
 * instant, plus a backlog counter on each of the two looper steps that
 * change it) is the cost of one event.  Times are the thread's CPU time,
 * which includes the write(2) into the kernel's ring buffer.
 *
 * Needs tracefs trace_marker writable (root) and a recording session
 * (tracing_on = 1); run it under tools/trace.d's recorder or with
 * tracing on.  Usage: trace_cost [N (default 100000)] [ROUNDS (default 5)]
 * Exit 0; 2 when tracing cannot be turned on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h"

static char target;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ns per post and per delivery, tracing as given */
static void one_round(dq_queue *q, long n, bool on, double *post_ns, double *take_ns)
{
    if (dq_trace_enable(on) != 0)
        exit(2);
    dq_msg m = { .target = &target };
    int64_t far = dq_now() + 3600LL * 1000000000;
    int64_t t0 = bench_thread_cpu_ns();
    for (long i = 0; i < n; i++) {
        m.what = (int32_t)i;
        if (dq_post_at(q, &m, far, NULL) != 0)
            exit(1);
    }
    int64_t t1 = bench_thread_cpu_ns();
    dq_match all = { .target = &target };
    (void)dq_remove(q, &all);
    dq_msg out;
    (void)dq_try_next(q, &out); /* absorbs the removals, untimed */
    for (long i = 0; i < n; i++) {
        m.what = (int32_t)i;
        if (dq_post_at(q, &m, 1, NULL) != 0)
            exit(1);
    }
    (void)dq_trace_enable(on);
    int64_t t2 = bench_thread_cpu_ns();
    for (long i = 0; i < n; i++)
        if (dq_try_next(q, &out) != 0)
            exit(1);
    int64_t t3 = bench_thread_cpu_ns();
    *post_ns = (double)(t1 - t0) / (double)n;
    *take_ns = (double)(t3 - t2) / (double)n;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 1000 || n > 10000000 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: trace_cost [N (1000-10000000)] [ROUNDS (1-64)]\n");
        return 2;
    }
    int err = dq_trace_enable(true);
    if (err) {
        fprintf(stderr, "trace_cost: cannot turn tracing on: %s\n", strerror(-err));
        return 2;
    }
    dq_queue *q = dq_create(NULL);
    if (q == NULL || dq_set_name(q, "cost") != 0)
        return 1;
    double post_off[64], post_on[64], take_off[64], take_on[64];
    for (int r = 0; r < rounds; r++) {
        one_round(q, n, false, &post_off[r], &take_off[r]);
        one_round(q, n, true, &post_on[r], &take_on[r]);
    }
    (void)dq_trace_enable(false);
    dq_quit(q);
    dq_unref(q);
    double po = median(post_off, rounds), pn = median(post_on, rounds);
    double to = median(take_off, rounds), tn = median(take_on, rounds);
    printf("| call | tracing off (CPU ns) | tracing on (CPU ns) | events per call | "
           "cost per event (ns) |\n|---|---:|---:|---:|---:|\n");
    printf("| dq_post_at | %.1f | %.1f | 1 | %.0f |\n", po, pn, pn - po);
    /* a delivery writes its instant; the backlog changes once per take */
    printf("| dq_try_next (a delivery) | %.1f | %.1f | 2 | %.0f |\n", to, tn,
           (tn - to) / 2);
    printf("\nmedians of %d rounds of %ld calls; CPU model: ", rounds, n);
    char model[256];
    bench_cpu_model(model, sizeof(model));
    printf("%s\n", model);
    return 0;
}
