/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library's heap (<deliqueue_internal/heap.h>) with other comparators
 * and the sift-down they suit, for the benchmarks to measure against the
 * library's own choice: the branchy comparator that Android's
 * compareMessages has, and DQ_HEAP_DEFINE, which instantiates the heap for
 * any comparator with a sift-down by index (the smaller child as the left
 * one's index plus LESS's 0/1, which compilers materialise with setcc and
 * an add).  The library itself uses DQ_HEAP_SIFT_DOWN_BY_OFFSET with the
 * branchless dq_key_less (heap.h says why).
 */
#ifndef BENCH_BASELINES_HEAP_VARIANTS_H
#define BENCH_BASELINES_HEAP_VARIANTS_H

#include <stdbool.h>
#include <stdint.h>

#include <deliqueue_internal/heap.h>
#include <deliqueue_internal/msg.h>

/* The branchy comparator: an early exit on `when`. */
static inline bool dq_key_less_branchy(dq_key a, dq_key b)
{
    if (a.when != b.when)
        return a.when < b.when;
    return a.seq < b.seq;
}

#define DQ_HEAP_SIFT_DOWN_BY_INDEX(P, LESS)                                            \
    static inline void P##_sift_down(dq_heap *h, uint32_t i, dq_heap_slot s)           \
    {                                                                                  \
        uint32_t n = h->count;                                                         \
        for (;;) {                                                                     \
            uint32_t child = 2 * i + 1;                                                \
            if (child >= DQ_HEAP_SIFT_LIMIT(n, 1))                                     \
                break;                                                                 \
            dq_heap_prefetch_grandchildren(h->slots, (size_t)i *DQ_HEAP_SLOT_SIZE);    \
            /* the smaller child, without a branch on the comparison */                \
            if (child + 1 < n)                                                         \
                child += (uint32_t)LESS(h->slots[child + 1].key, h->slots[child].key); \
            if (!LESS(h->slots[child].key, s.key))                                     \
                break;                                                                 \
            P##_place(h, i, h->slots[child]);                                          \
            i = child;                                                                 \
        }                                                                              \
        P##_place(h, i, s);                                                            \
    }

/* The division by the slot size is off the critical path: it only feeds
   the element's index, which nothing in the loop reads. */

/* A heap type P ordered by LESS, sifting down by index. */
#define DQ_HEAP_DEFINE(P, LESS) DQ_HEAP_DEFINE_WITH(P, LESS, DQ_HEAP_SIFT_DOWN_BY_INDEX)

#endif /* BENCH_BASELINES_HEAP_VARIANTS_H */
