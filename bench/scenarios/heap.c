/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap: the consumer's heap work (bench/heap_work.h) with the branchless
 * (library) and branchy comparators, and two candidate branchless
 * spellings (andor, wide); branchless_twin is the library's again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>

#include "bench/heap_work.h"
#include "bench/machine.h"
#include "bench/scenarios/scenario.h"

void run_heap_point(const config *cfg, int col, int rep, long depth, int64_t quantum)
{
    /* CPU time of this one thread: its wall time minus the time the
       shared machine ran something else instead */
    int64_t t0 = bench_thread_cpu_ns();
    uint64_t sum = bench_heap_comparators[col].work(
        (uint32_t)depth, (uint64_t)cfg->heap_ops, 42 + (uint64_t)rep, quantum);
    int64_t t1 = bench_thread_cpu_ns();
    if (sum == 0)
        die("heap workload", NULL, ENOMEM);
    char name[96];
    snprintf(name, sizeof(name), "heap hold (pop+push), depth %ld, due times %s", depth,
             quantum == 1 ? "in ns (no ties)" : "in ms (ties)");
    stats_put(
        stats_metric_get(&results, "heap", "heap", name, "CPU ns/op", false, depth, 0),
        col, rep, (double)(t1 - t0) / (double)(cfg->heap_ops + depth));
}
