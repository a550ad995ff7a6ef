/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/contenders/handoff.h: the consumer half shared by the two handoff
 * baselines (Concurrency Kit's ck_stack and liburcu's cds_lfs).  Producers
 * push a bench_node onto a library's lock-free stack; the consumer takes
 * the whole stack at once, restores arrival order, numbers the batch and
 * moves it into its private dq_heap.  This is DeliQueue's idea without its
 * stack traversal, back-links and thread-safe removal: what a C engineer
 * would build from an off-the-shelf stack.
 *
 * Who may call what concurrently
 *   producer   handoff_producer_wake (after its push)     everything
 *   any        bench_node_cancel (tombstone, lazy cleanup) everything
 *   consumer   handoff_absorb, handoff_take, handoff_park,  producers, cancel
 *              handoff_remove
 *
 * Parking is an eventcount on a futex: after polling the stack for the
 * idle spin every consumer shares (bench_idle_poll), the consumer announces
 * `parked`, re-checks the stack, and sleeps on `wake_word`; the first
 * producer that takes `parked` back to 0 after its push bumps the word and
 * wakes it.
 */
#ifndef BENCH_CONTENDERS_HANDOFF_H
#define BENCH_CONTENDERS_HANDOFF_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench/contender.h"
#include "bench/contenders/baseline.h"

typedef struct handoff_looper {
    dq_heap          heap;      /* consumer only */
    int64_t          seq;       /* consumer only: last insertion sequence */
    int64_t          sweep_now; /* consumer only: the time before this drain
                                   (what is due by then takes the heap's
                                   due run, as in the library's looper) */
    _Atomic uint32_t parked;    /* 1 while the consumer may sleep */
    _Atomic uint32_t wake_word; /* futex word, bumped by waking producers */
} handoff_looper;

static inline void handoff_init(handoff_looper *h)
{
    dq_heap_init(&h->heap);
    h->seq = 0;
    h->sweep_now = 0;
    atomic_init(&h->parked, 0);
    atomic_init(&h->wake_word, 0);
}

/* Consumer: move a drained batch (linked by batch_next, newest first) into
   the heap in arrival order.  Tombstones are freed here. */
static inline void handoff_absorb(handoff_looper *h, bench_node *newest_first)
{
    bench_node *oldest_first = NULL;
    while (newest_first != NULL) {
        bench_node *next = newest_first->batch_next;
        newest_first->batch_next = oldest_first;
        oldest_first = newest_first;
        newest_first = next;
    }
    for (bench_node *n = oldest_first, *next; n != NULL; n = next) {
        next = n->batch_next;
        /* acquire pairs with the canceller's CAS: nothing else to see, but
           the consumer must not free a node a canceller still writes */
        if (atomic_load_explicit(&n->state, memory_order_acquire) !=
                BENCH_NODE_PENDING ||
            dq_heap_push_due(&h->heap, &n->heap, bench_node_key(n, ++h->seq),
                             h->sweep_now)) {
            free(n);
            continue;
        }
    }
}

/* Consumer: deliver the earliest due message into *out (0) or -EAGAIN;
   tombstones met at the top are freed. */
static inline int handoff_take(handoff_looper *h, dq_msg *out, int64_t now)
{
    for (;;) {
        const dq_key *k = dq_heap_peek_key(&h->heap);
        if (k == NULL || k->when > now)
            return -EAGAIN;
        bench_node *n = BENCH_NODE_OF_HEAP(dq_heap_pop(&h->heap));
        bool mine = bench_node_claim(n);
        if (mine)
            *out = n->msg;
        free(n);
        if (mine)
            return 0;
    }
}

/* Consumer: the due time of the earliest message, INT64_MAX if none. */
static inline int64_t handoff_next_due(const handoff_looper *h)
{
    const dq_key *k = dq_heap_peek_key(&h->heap);
    return k == NULL ? INT64_MAX : k->when;
}

typedef struct handoff_news {
    bool (*still_empty)(const void *stack);
    const void *stack;
} handoff_news;

static inline bool handoff_has_news(const void *arg)
{
    const handoff_news *n = arg;
    return !n->still_empty(n->stack);
}

/* Consumer: sleep until deadline or a producer's wake, unless
   still_empty(stack) turns false while it polls or once parked is
   announced. */
static inline void handoff_park(handoff_looper *h, int64_t deadline,
                                bool (*still_empty)(const void *stack),
                                const void *stack)
{
    if (bench_idle_poll(handoff_has_news, &(handoff_news){ still_empty, stack },
                        deadline))
        return;
    uint32_t word = atomic_load_explicit(&h->wake_word, memory_order_acquire);
    /* seq_cst store then the emptiness load: with the producer's locked
       push followed by its load of parked, one of the two sees the other */
    atomic_store_explicit(&h->parked, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (still_empty(stack)) {
        int64_t wait = deadline - bench_now();
        if (wait > 0) {
            struct timespec ts = { wait / 1000000000, wait % 1000000000 };
            syscall(SYS_futex, &h->wake_word, FUTEX_WAIT_PRIVATE, word,
                    deadline == INT64_MAX ? NULL : &ts, NULL, 0);
        }
    }
    /* relaxed: only a hint for producers; a stale 1 costs a spare wake
       (and is 0 already when a producer's exchange woke us) */
    atomic_store_explicit(&h->parked, 0, memory_order_relaxed);
}

/* Producer, right after its push (a locked read-modify-write, a full
   barrier on x86, which the handoff baselines are benchmarked on): wake a
   parked consumer.  The load is the only extra shared access of a post to
   a running consumer.  Only the producer whose exchange takes parked from
   1 to 0 makes the syscall: until the woken consumer runs, every other
   post would otherwise see parked still 1 and wake it again (a futex
   syscall of a microsecond or more per post during a wake-up; deliqueue
   flips its sleep word the same way).  A producer that reads 0 after the
   winner's exchange pushed before that read, and so before the consumer's
   next announcement of parked, whose re-check of the stack then sees it. */
static inline void handoff_producer_wake(handoff_looper *h)
{
#if !defined(__x86_64__) && !defined(__i386__)
    atomic_thread_fence(memory_order_seq_cst);
#endif
    /* relaxed: the push's full barrier above orders both after the push */
    if (atomic_load_explicit(&h->parked, memory_order_relaxed) &&
        atomic_exchange_explicit(&h->parked, 0, memory_order_relaxed)) {
        /* release pairs with the consumer's acquire load of the word */
        atomic_fetch_add_explicit(&h->wake_word, 1, memory_order_release);
        syscall(SYS_futex, &h->wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

/* Consumer: one non-blocking step, given how to drain the stack. */
static inline int handoff_try_next(handoff_looper *h, dq_msg *out,
                                   void (*drain)(void *q), void *q)
{
    int64_t now = bench_now();
    h->sweep_now = now;
    drain(q);
    return handoff_take(h, out, now);
}

/* Consumer: the whole next_until loop, given how to drain the stack. */
static inline int handoff_next_until(handoff_looper *h, dq_msg *out,
                                     int64_t deadline,
                                     void (*drain)(void *q), void *q,
                                     bool (*still_empty)(const void *stack),
                                     const void *stack)
{
    for (;;) {
        int64_t now = bench_now();
        h->sweep_now = now;
        drain(q);
        if (handoff_take(h, out, now) == 0)
            return 0;
        if (now >= deadline)
            return -ETIMEDOUT;
        int64_t until = handoff_next_due(h);
        handoff_park(h, until < deadline ? until : deadline, still_empty, stack);
    }
}

#endif /* BENCH_CONTENDERS_HANDOFF_H */
