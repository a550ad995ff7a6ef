/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remove: remove by criteria (target + what, ~D/1024 matches) at depth D,
 * on the consumer thread; the call alone, and with the consumer's cleanup
 * (its next try_next) added.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>

#include "bench/machine.h"
#include "bench/scenarios/scenario.h"

void run_remove_point(const config *cfg, int col, int rep, long depth)
{
    const bench_contender *c = contenders[col];
    aged_heap aged;
    void *q = background_queue(cfg, c, depth, NULL, &aged);
    double call_ns = 0, total_ns = 0;
    /* fill_queue gives message j target j % 8 and what j % 128, so what w
       (a multiple of 8) matches the j < D with j % 128 == w, and a what
       met again (every 16 calls) matches nothing left: every contender
       must remove exactly this many, or its timing is not of this work */
    long expected = 0, removed_total = 0;
    for (int i = 0; i < cfg->remove_calls && i < 16; i++)
        if (8L * i < depth)
            expected += (depth - 8L * i + 127) / 128;
    for (int i = 0; i < cfg->remove_calls; i++) {
        /* target 0 holds what 0, 8, 16, ...: what = 8 * i matches ~D/1024 */
        dq_match match = { .target = &fill_targets[0],
                           .fields = DQ_MATCH_WHAT,
                           .what = (int32_t)((8 * i) % 128) };
        int64_t t0 = bench_thread_cpu_ns();
        size_t removed = c->remove(q, &match);
        int64_t t1 = bench_thread_cpu_ns();
        consumer_sweep(c, q);
        int64_t t2 = bench_thread_cpu_ns();
        removed_total += (long)removed;
        call_ns += (double)(t1 - t0);
        total_ns += (double)(t2 - t0);
    }
    if (removed_total != expected) {
        fprintf(stderr,
                "queue_bench: %s removed %ld messages by criteria at depth %ld, "
                "not %ld\n",
                c->name, removed_total, depth, expected);
        die("remove by criteria", c, EPROTO);
    }
    c->destroy(q);
    aged_heap_free(&aged);
    char name[96];
    snprintf(name, sizeof(name), "remove by criteria, depth %ld", depth);
    stats_put(stats_metric_get(&results, "queues", "remove", name, "CPU us/call", false,
                               depth, 1),
              col, rep, call_ns / cfg->remove_calls / 1e3);
    snprintf(name, sizeof(name), "remove by criteria + consumer cleanup, depth %ld",
             depth);
    stats_put(stats_metric_get(&results, "queues", "remove", name, "CPU us/call", false,
                               depth, 1),
              col, rep, total_ns / cfg->remove_calls / 1e3);
}
