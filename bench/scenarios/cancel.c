/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cancel: cancel by token of D/10 (at most 1000) random pending messages
 * at depth D; the calls alone, and with the consumer's cleanup added.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/machine.h"
#include "bench/scenarios/scenario.h"

void run_cancel_point(const config *cfg, int col, int rep, long depth)
{
    const bench_contender *c = contenders[col];
    dq_token *toks = malloc((size_t)depth * sizeof(*toks));
    if (toks == NULL)
        die("malloc", c, ENOMEM);
    aged_heap aged;
    void *q = background_queue(cfg, c, depth, toks, &aged);
    long k = depth / 10 < 1000 ? depth / 10 : 1000;
    if (k < 1)
        k = 1;
    /* distinct pseudo-random victims: a stride coprime to depth */
    long stride = 7919 % depth ? 7919 : 7907;
    long start = (long)((uint64_t)rep * 104729u % (uint64_t)depth);
    int64_t t0 = bench_thread_cpu_ns();
    for (long i = 0; i < k; i++) {
        int err = c->cancel(q, toks[(start + i * stride) % depth]);
        if (err)
            die("cancel", c, err);
    }
    int64_t t1 = bench_thread_cpu_ns();
    consumer_sweep(c, q);
    int64_t t2 = bench_thread_cpu_ns();
    c->destroy(q);
    free(toks);
    aged_heap_free(&aged);
    char name[96];
    snprintf(name, sizeof(name), "cancel by token, depth %ld", depth);
    stats_put(stats_metric_get(&results, "queues", "cancel", name, "CPU ns/cancel",
                               false, depth, 1),
              col, rep, (double)(t1 - t0) / (double)k);
    snprintf(name, sizeof(name), "cancel by token + consumer cleanup, depth %ld",
             depth);
    stats_put(stats_metric_get(&results, "queues", "cancel", name, "CPU ns/cancel",
                               false, depth, 1),
              col, rep, (double)(t2 - t0) / (double)k);
}
