/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/contenders/baseline.h: what the baselines (mutex_heap, ck_handoff,
 * urcu_handoff) share, so that they differ from each other and from
 * deliqueue only in how a posted message reaches the consumer's heap.
 *
 * Every baseline message is a bench_node: a malloc'd copy of the posted
 * dq_msg (deliqueue also copies on post), ordered by the library's dq_key
 * in the library's dq_heap (branchless comparator), matched with
 * dq_match_msg.
 *
 * Thread contract: the helpers here touch one node or one heap and take no
 * lock; the caller owns what it passes (the heap under its lock, or as the
 * consumer).  `state` is the only field two threads race on (cancel vs
 * delivery); see bench_node_claim.
 */
#ifndef BENCH_CONTENDERS_BASELINE_H
#define BENCH_CONTENDERS_BASELINE_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue_internal/heap.h>
#include <deliqueue_internal/msg.h>
#include <deliqueue_arch/cpu.h>

#include "bench/contender.h"

/* bench_node.state */
#define BENCH_NODE_PENDING   0u
#define BENCH_NODE_CANCELLED 1u /* tombstone: the consumer frees it when met */
#define BENCH_NODE_TAKEN     2u /* delivered or removed by the consumer */

typedef struct bench_node {
    /* the stack link of a handoff (a ck_stack_entry or a cds_lfs_node, both
       one pointer); written only by the library that owns it */
    _Alignas(void *) unsigned char link[sizeof(void *)];
    struct bench_node *batch_next; /* consumer only: a drained batch */
    dq_heap_elem heap;
    _Atomic uint32_t state;
    dq_msg msg; /* msg.when is the due time */
} bench_node;

#define BENCH_NODE_OF_HEAP(e) ((bench_node *)((char *)(e)-offsetof(bench_node, heap)))

/* Producer: a node holding a copy of *m due at when; NULL if out of
   memory or m is invalid (*err says which). */
static inline bench_node *bench_node_new(const dq_msg *m, int64_t when, int *err)
{
    *err = dq_msg_check(m);
    if (*err)
        return NULL;
    if (when < 0) {
        *err = -EINVAL;
        return NULL;
    }
    bench_node *n = malloc(sizeof(*n));
    if (n == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    n->batch_next = NULL;
    n->heap.index = DQ_HEAP_NONE;
    atomic_init(&n->state, BENCH_NODE_PENDING);
    n->msg = *m;
    n->msg.when = when;
    return n;
}

/* The ordering key of a node given its insertion sequence (> 0): front
   posts (when == 0) are LIFO, as in deliqueue. */
static inline dq_key bench_node_key(const bench_node *n, int64_t seq)
{
    dq_key k;
    if (n->msg.when == 0) {
        k.when = DQ_KEY_FRONT;
        k.seq = -seq;
    } else {
        k.when = n->msg.when;
        k.seq = seq;
    }
    return k;
}

/* Consumer (or remover of a locked baseline): take the node for delivery
   or removal.  False if a canceller made it a tombstone first.  acq_rel:
   exactly one of this and bench_node_cancel wins; nothing else is
   published through state, so relaxed would do, but the cost is the same
   locked instruction on x86. */
static inline bool bench_node_claim(bench_node *n)
{
    uint32_t expect = BENCH_NODE_PENDING;
    return atomic_compare_exchange_strong_explicit(&n->state, &expect, BENCH_NODE_TAKEN,
                                                   memory_order_acq_rel,
                                                   memory_order_relaxed);
}

/* Any thread: make a pending node a tombstone.  0 or -ENOENT. */
static inline int bench_node_cancel(bench_node *n)
{
    uint32_t expect = BENCH_NODE_PENDING;
    return atomic_compare_exchange_strong_explicit(
               &n->state, &expect, BENCH_NODE_CANCELLED, memory_order_acq_rel,
               memory_order_relaxed)
               ? 0
               : -ENOENT;
}

/* Consumer, before it sleeps: poll news(arg) for as long as deliqueue's
   looper does by default (DQ_IDLE_SPIN_DEFAULT_NS, looper_sleep), never
   past deadline; true as soon as it holds.  Every consumer that can poll
   a word without its lock polls the same span the same way (a pause, the
   clock every 16), so that a post arriving within it finds every design
   awake and a latency row compares the queues, not which one sleeps
   sooner.  The legacy queue keeps Android's blocking wait. */
static inline bool bench_idle_poll(bool (*news)(const void *arg), const void *arg,
                                   int64_t deadline)
{
    int64_t end = bench_now() + DQ_IDLE_SPIN_DEFAULT_NS;
    if (end > deadline)
        end = deadline;
    for (unsigned i = 1;; i++) {
        if (news(arg))
            return true;
        dq_arch_cpu_relax();
        if (i % 16 == 0 && bench_now() >= end)
            return false;
    }
}

/* Owner of h: remove and free every pending node matching *match; returns
   how many.  Matches are collected first because each removal moves
   slots.  The scan is the one deliqueue's looper makes of its own heaps
   (match_walk_slots in deliqueue/src/looper_walk.c): each run of slots walked by
   pointer, the node 16 slots ahead prefetched, the criteria in a local
   copy that no store can alias, so that remove by criteria compares the
   designs and not two spellings of the same loop. */
#define BENCH_SCAN_PREFETCH_AHEAD 16u

static inline size_t bench_heap_remove_matching(dq_heap *h, const dq_match *match_arg)
{
    if (dq_match_check(match_arg) || dq_heap_size(h) == 0)
        return 0;
    const dq_match match = *match_arg;
    bench_node **hits = malloc((size_t)dq_heap_size(h) * sizeof(*hits));
    if (hits == NULL)
        return 0;
    size_t nhits = 0;
    dq_heap_segment seg[3];
    int k = dq_heap_segments(h, seg);
    for (int i = 0; i < k; i++) {
        const dq_heap_slot *sl = seg[i].slots, *end = sl + seg[i].n;
        for (; sl < end; sl++) {
            if ((size_t)(end - sl) > BENCH_SCAN_PREFETCH_AHEAD &&
                sl[BENCH_SCAN_PREFETCH_AHEAD].elem != NULL)
                __builtin_prefetch(
                    BENCH_NODE_OF_HEAP(sl[BENCH_SCAN_PREFETCH_AHEAD].elem));
            if (sl->elem == NULL)
                continue; /* a hole in the due run */
            bench_node *n = BENCH_NODE_OF_HEAP(sl->elem);
            if (dq_match_msg(&match, &n->msg))
                hits[nhits++] = n;
        }
    }
    size_t removed = 0;
    for (size_t i = 0; i < nhits; i++) {
        dq_heap_remove(h, &hits[i]->heap);
        if (bench_node_claim(hits[i]))
            removed++;
        free(hits[i]);
    }
    free(hits);
    return removed;
}

/* Owner of h: free every node in it. */
static inline void bench_heap_free_all(dq_heap *h)
{
    dq_heap_iter it = dq_heap_iter_start(h);
    for (dq_heap_elem *e; (e = dq_heap_iter_next(&it)) != NULL;)
        free(BENCH_NODE_OF_HEAP(e));
    dq_heap_fini(h);
}

#endif /* BENCH_CONTENDERS_BASELINE_H */
