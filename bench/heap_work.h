/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/heap_work.h: the consumer's heap workload, shared by queue_bench
 * (wall time) and heap_cmp (run under cachegrind for simulated branch
 * mispredictions), so both measure exactly the same thing.
 *
 * The workload is the classic "hold" model of a priority queue at steady
 * depth: fill the heap with `depth` random keys (due within 5 s, as the
 * insert scenario), then `ops` times pop the earliest and push it back due
 * a random 0..5 s later with the next insertion sequence -- what a looper
 * does when every delivered message posts a delayed one.
 *
 * Thread contract: none (one thread, private heap).
 */
#ifndef BENCH_HEAP_WORK_H
#define BENCH_HEAP_WORK_H

#include <stdint.h>
#include <stdlib.h>

#include <deliqueue_internal/heap.h>
#include <deliqueue_internal/msg.h>

#include "bench/baselines/heap_variants.h"

/* The comparators measured.  "branchless" is the library's dq_key_less
   (dq_heap_* itself), "branchy" dq_key_less_branchy (bench/baselines).  The other
   two are candidates, measured here only: other branchless spellings of
   the same lexicographic order, to show what the library's spelling
   costs (gcc turns the sign arithmetic into two setcc pairs per compare,
   and the branchy one into cmp/jne/cmp/setcc). */
static inline bool bench_key_less_andor(dq_key a, dq_key b)
{
    return (a.when < b.when) | ((a.when == b.when) & (a.seq < b.seq));
}

/* (when, seq) as one signed 128-bit number: when is the high half, seq
   biased to unsigned the low half; compilers emit cmp + sbb. */
static inline bool bench_key_less_wide(dq_key a, dq_key b)
{
    __extension__ typedef __int128 wide;
    __extension__ typedef unsigned __int128 uwide;
    wide x =
        (wide)((uwide)(uint64_t)a.when << 64 | ((uint64_t)a.seq ^ (UINT64_C(1) << 63)));
    wide y =
        (wide)((uwide)(uint64_t)b.when << 64 | ((uint64_t)b.seq ^ (UINT64_C(1) << 63)));
    return x < y;
}

DQ_HEAP_DEFINE(bench_heap_branchy, dq_key_less_branchy)
DQ_HEAP_DEFINE(bench_heap_andor, bench_key_less_andor)
DQ_HEAP_DEFINE(bench_heap_wide, bench_key_less_wide)

#define BENCH_HEAP_SPAN_NS 5000000000LL

/* xorshift64*: fast, deterministic, good enough for keys. */
static inline uint64_t bench_rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A random delay in 0..5 s rounded down to a multiple of quantum (ns).
   quantum 1: keys practically never tie; quantum 1 ms (Android's
   uptimeMillis granularity): ties on `when` are common and the branchy
   comparator's first test becomes unpredictable. */
static inline int64_t bench_heap_delay(uint64_t *rng, int64_t quantum)
{
    int64_t d = (int64_t)(bench_rng_next(rng) % BENCH_HEAP_SPAN_NS);
    if (quantum > 1) /* predictable; spares the division when 1 */
        d -= d % quantum;
    return d;
}

/* Generates P##_hold_work(depth, ops, seed, quantum): returns a checksum of the
   popped keys (so nothing is optimised away), or 0 on allocation failure. */
#define BENCH_HEAP_WORK_DEFINE(P, HEAP)                                             \
    static __attribute__((noinline)) uint64_t P##_hold_work(                        \
        uint32_t depth, uint64_t ops, uint64_t seed, int64_t quantum)               \
    {                                                                               \
        dq_heap h;                                                                  \
        dq_heap_init(&h);                                                           \
        dq_heap_elem *elems = malloc((size_t)(depth ? depth : 1) * sizeof(*elems)); \
        if (elems == NULL || dq_heap_reserve(&h, depth ? depth : 1)) {              \
            free(elems);                                                            \
            return 0;                                                               \
        }                                                                           \
        uint64_t rng = seed | 1;                                                    \
        int64_t seq = 0;                                                            \
        for (uint32_t i = 0; i < depth; i++) {                                      \
            dq_key k = { bench_heap_delay(&rng, quantum), ++seq };                  \
            HEAP##_push(&h, &elems[i], k);                                          \
        }                                                                           \
        uint64_t sum = 0;                                                           \
        for (uint64_t i = 0; i < ops && h.count; i++) {                             \
            dq_key k = h.slots[0].key;                                              \
            dq_heap_elem *e = HEAP##_pop(&h);                                       \
            sum += (uint64_t)k.when ^ (uint64_t)k.seq;                              \
            k.when += bench_heap_delay(&rng, quantum);                              \
            k.seq = ++seq;                                                          \
            HEAP##_push(&h, e, k);                                                  \
        }                                                                           \
        dq_heap_fini(&h);                                                           \
        free(elems);                                                                \
        return sum ? sum : 1;                                                       \
    }

BENCH_HEAP_WORK_DEFINE(bench_branchless, dq_heap)
BENCH_HEAP_WORK_DEFINE(bench_branchy, bench_heap_branchy)
BENCH_HEAP_WORK_DEFINE(bench_andor, bench_heap_andor)
BENCH_HEAP_WORK_DEFINE(bench_wide, bench_heap_wide)

typedef uint64_t (*bench_heap_work_fn)(uint32_t depth, uint64_t ops, uint64_t seed,
                                       int64_t quantum);

/* The comparators by name, the library's first. */
static const struct bench_heap_comparator {
    const char *name;
    bench_heap_work_fn work;
} bench_heap_comparators[] = {
    { "branchless", bench_branchless_hold_work },
    { "branchy", bench_branchy_hold_work },
    { "andor", bench_andor_hold_work },
    { "wide", bench_wide_hold_work },
    /* the A/A control: branchless again, as a column of its own */
    { "branchless_twin", bench_branchless_hold_work },
};
#define BENCH_HEAP_NCOMPARATORS 5

#endif /* BENCH_HEAP_WORK_H */
