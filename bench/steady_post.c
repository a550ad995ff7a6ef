/* SPDX-License-Identifier: Apache-2.0 */
/*
 * steady_post: deliqueue alone in a steady state of random delays.  One
 * producer posts at a fixed pace messages due 0 .. max-delay later; the
 * consumer thread delivers them in due order, so nodes are retired in no
 * address order and the pool's free map comes back sparse, unlike
 * queue_bench's insert rounds (removed in posting order) and e2e points
 * (due now, delivered in posting order).  Prints the producer's wall ns
 * per post (its pacing excluded) and the consumer's CPU ns per message,
 * per repetition and their medians: a program that prints numbers, not a
 * timed assertion.
 *
 * usage: steady_post [--max-delay-ns N] [--gap-ns N] [--seconds S] [--reps N]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <deliqueue/deliqueue.h>

#include "bench/machine.h"

static int target;

struct consumer {
    dq_queue *q;
    long delivered;
    int64_t cpu_ns;
};

static void *consume(void *arg)
{
    struct consumer *c = arg;
    dq_msg m;
    int64_t c0 = bench_thread_cpu_ns();
    while (dq_next(c->q, &m) == 0)
        c->delivered++;
    c->cpu_ns = bench_thread_cpu_ns() - c0;
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long max_delay = 10000000, gap = 2000, reps = 5;
    double seconds = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--max-delay-ns") && atol(v) > 0)
            max_delay = atol(v), i++;
        else if (v && !strcmp(a, "--gap-ns") && atol(v) > 0)
            gap = atol(v), i++;
        else if (v && !strcmp(a, "--seconds") && atof(v) > 0)
            seconds = atof(v), i++;
        else if (v && !strcmp(a, "--reps") && atol(v) > 0)
            reps = atol(v), i++;
        else {
            fprintf(
                stderr,
                "usage: %s [--max-delay-ns N] [--gap-ns N] [--seconds S] [--reps N]\n",
                argv[0]);
            return 2;
        }
    }
    char model[128];
    bench_cpu_model(model, sizeof(model));
    printf("steady_post: %s, load %.2f; posts every %ld ns due 0-%ld ns later, %.1f s "
           "a repetition\n\n",
           model, bench_loadavg(), gap, max_delay, seconds);
    printf("| repetition | posts | post wall ns | consumer CPU ns/msg "
           "|\n|---:|---:|---:|---:|\n");
    double *post = calloc((size_t)reps, sizeof(double)),
           *cons = calloc((size_t)reps, sizeof(double));
    if (post == NULL || cons == NULL)
        return 2;
    uint64_t rng = 1;
    for (long r = 0; r < reps; r++) {
        struct consumer c = { dq_create(NULL), 0, 0 };
        pthread_t t;
        if (c.q == NULL || pthread_create(&t, NULL, consume, &c))
            return 2;
        dq_msg m = { .target = &target, .what = 1 };
        long posts = 0;
        int64_t posting = 0, start = dq_now(), end = start + (int64_t)(seconds * 1e9);
        for (int64_t next = start; dq_now() < end;) {
            int64_t w0 = dq_now();
            for (int k = 0; k < 16; k++, posts++) { /* 16 posts between clock reads */
                rng = rng * 6364136223846793005u + 1442695040888963407u;
                if (dq_post_delayed(c.q, &m,
                                    (int64_t)((rng >> 33) % (uint64_t)max_delay), NULL))
                    return 2;
            }
            posting += dq_now() - w0;
            next += 16 * gap;
            while (dq_now() < next)
                ;
        }
        dq_quit_safely(c.q);
        pthread_join(t, NULL);
        dq_unref(c.q);
        post[r] = (double)posting / (double)posts;
        cons[r] = (double)c.cpu_ns / (double)(c.delivered ? c.delivered : 1);
        printf("| %ld | %ld | %.1f | %.1f |\n", r + 1, posts, post[r], cons[r]);
    }
    qsort(post, (size_t)reps, sizeof(double), cmp_double);
    qsort(cons, (size_t)reps, sizeof(double), cmp_double);
    printf("| median | | %.1f | %.1f |\n", post[reps / 2], cons[reps / 2]);
    free(post);
    free(cons);
    return 0;
}
