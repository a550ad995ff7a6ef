/* SPDX-License-Identifier: Apache-2.0 */
/*
 * heap_cmp: the consumer heap workload (heap_work.h) with one comparator,
 * chosen by argv, meant to be run under
 *   valgrind --tool=cachegrind --branch-sim=yes ./heap_cmp branchless
 *   valgrind --tool=cachegrind --branch-sim=yes ./heap_cmp branchy
 * so that the simulated conditional-branch mispredictions (Bcm) of the two
 * can be compared (hardware counters are not available on the farm).
 * "andor" and "wide" are two other branchless spellings (heap_work.h).
 *
 * usage: heap_cmp branchless|branchy|andor|wide [depth [ops [quantum_ns]]]
 * Defaults: depth 10000, ops 200000, quantum 1 (distinct keys); quantum
 * 1000000 rounds due times to milliseconds (ties, see heap_work.h).
 * Prints one line: comparator, depth, ops, quantum, checksum, ns per op.
 * Exit 0, or 2 on bad usage / allocation failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/heap_work.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const struct bench_heap_comparator *cmp = NULL;
    for (int i = 0; argc > 1 && i < BENCH_HEAP_NCOMPARATORS; i++)
        if (!strcmp(argv[1], bench_heap_comparators[i].name))
            cmp = &bench_heap_comparators[i];
    if (argc < 2 || argc > 5 || cmp == NULL) {
        fprintf(stderr,
                "usage: %s branchless|branchy|andor|wide "
                "[depth [ops [quantum_ns]]]\n",
                argv[0]);
        return 2;
    }
    uint32_t depth = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 10000;
    uint64_t ops = argc > 3 ? strtoull(argv[3], NULL, 10) : 200000;
    int64_t quantum = argc > 4 ? strtoll(argv[4], NULL, 10) : 1;
    if (quantum < 1)
        quantum = 1;
    int64_t t0 = now_ns();
    uint64_t sum = cmp->work(depth, ops, 42, quantum);
    int64_t t1 = now_ns();
    if (sum == 0) {
        fprintf(stderr, "heap_cmp: out of memory\n");
        return 2;
    }
    printf("heap_cmp comparator=%s depth=%u ops=%llu quantum=%lld checksum=%llx "
           "ns_per_op=%.1f\n",
           argv[1], depth, (unsigned long long)ops, (long long)quantum,
           (unsigned long long)sum, (double)(t1 - t0) / (double)(ops + depth));
    return 0;
}
