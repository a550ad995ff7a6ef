/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/contenders/handoff.h: the handoff driver, all of the two handoff
 * baselines (Concurrency Kit's ck_stack, ck_handoff.c, and liburcu's
 * cds_lfs, urcu_handoff.c) but their stack.  Producers push a bench_node
 * onto a library's lock-free stack; the consumer takes the whole stack at
 * once, restores arrival order, numbers the batch and moves it into its
 * private dq_heap.  This is DeliQueue's idea without its stack traversal,
 * back-links and thread-safe removal: what a C engineer would build from
 * an off-the-shelf stack.  A contender supplies a handoff_stack (its
 * queue's layout and four stack operations) and HANDOFF_CONTENDER makes the
 * bench_contender; the stack's operations are constants of its translation
 * unit, so they inline as if written out in it.
 *
 * Who may call what concurrently
 *   producer   post_at (push, then handoff_producer_wake)  everything
 *   any        cancel (a tombstone, lazy cleanup)          everything
 *   consumer   try_next, next_until, remove, and the       producers, cancel
 *              handoff_* helpers they are made of
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
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench/contender.h"
#include "bench/contenders/baseline.h"

typedef struct handoff_looper {
    dq_heap heap;               /* consumer only */
    int64_t seq;                /* consumer only: last insertion sequence */
    int64_t sweep_now;          /* consumer only: the time before this drain
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

/* What a handoff contender supplies (HANDOFF_CONTENDER fills it in).  Its
   queue object holds the stack top alone on its cache line (the producers'
   one shared write) and a handoff_looper at looper_offset; every operation
   gets the whole queue. */
typedef struct handoff_stack {
    size_t size; /* of the queue object, allocated 64-aligned */
    size_t looper_offset;
    /* owner: an empty stack */
    void (*init)(void *q);
    /* producer: push n through its link field */
    void (*push)(void *q, bench_node *n);
    /* consumer, polled by bench_idle_poll: an atomic load of the top */
    bool (*is_empty)(const void *q);
    /* consumer, the only popper: take the whole stack; its newest node,
       NULL when empty */
    bench_node *(*pop_all)(void *q);
    /* consumer: the next older node of a taken stack, NULL after the last */
    bench_node *(*next)(const bench_node *n);
} handoff_stack;

static inline handoff_looper *handoff_looper_of(const handoff_stack *s, void *q)
{
    return (handoff_looper *)(void *)((char *)q + s->looper_offset);
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

/* Consumer: everything pushed so far into the heap. */
static inline void handoff_drain(const handoff_stack *s, void *q)
{
    if (s->is_empty(q))
        return;
    bench_node *newest_first = s->pop_all(q);
    for (bench_node *n = newest_first, *next; n != NULL; n = next) {
        next = s->next(n);
        n->batch_next = next;
    }
    handoff_absorb(handoff_looper_of(s, q), newest_first);
}

typedef struct handoff_news {
    const handoff_stack *s;
    const void *q;
} handoff_news;

static inline bool handoff_has_news(const void *arg)
{
    const handoff_news *n = arg;
    return !n->s->is_empty(n->q);
}

/* Consumer: sleep until deadline or a producer's wake, unless the stack
   turns non-empty while it polls or once parked is announced. */
static inline void handoff_park(const handoff_stack *s, void *q, int64_t deadline)
{
    handoff_looper *h = handoff_looper_of(s, q);
    if (bench_idle_poll(handoff_has_news, &(handoff_news){ s, q }, deadline))
        return;
    uint32_t word = atomic_load_explicit(&h->wake_word, memory_order_acquire);
    /* seq_cst store then the emptiness load: with the producer's locked
       push followed by its load of parked, one of the two sees the other */
    atomic_store_explicit(&h->parked, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (s->is_empty(q)) {
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

/* Consumer: one non-blocking step. */
static inline int handoff_try_next(const handoff_stack *s, void *q, dq_msg *out)
{
    handoff_looper *h = handoff_looper_of(s, q);
    int64_t now = bench_now();
    h->sweep_now = now;
    handoff_drain(s, q);
    return handoff_take(h, out, now);
}

/* Consumer: deliver the earliest message once due, or -ETIMEDOUT at
   deadline. */
static inline int handoff_next_until(const handoff_stack *s, void *q, dq_msg *out,
                                     int64_t deadline)
{
    handoff_looper *h = handoff_looper_of(s, q);
    for (;;) {
        int64_t now = bench_now();
        h->sweep_now = now;
        handoff_drain(s, q);
        if (handoff_take(h, out, now) == 0)
            return 0;
        if (now >= deadline)
            return -ETIMEDOUT;
        int64_t until = handoff_next_due(h);
        handoff_park(s, q, until < deadline ? until : deadline);
    }
}

static inline void *handoff_create(const handoff_stack *s)
{
    void *q = aligned_alloc(64, (s->size + 63) / 64 * 64);
    if (q == NULL)
        return NULL;
    s->init(q);
    handoff_init(handoff_looper_of(s, q));
    return q;
}

static inline void handoff_destroy(const handoff_stack *s, void *q)
{
    handoff_drain(s, q);
    bench_heap_free_all(&handoff_looper_of(s, q)->heap);
    free(q);
}

static inline int handoff_post_at(const handoff_stack *s, void *q, const dq_msg *m,
                                  int64_t when, dq_token *tok)
{
    int err;
    bench_node *n = bench_node_new(m, when, &err);
    if (n == NULL)
        return err;
    if (tok)
        *tok = (dq_token)(uintptr_t)n;
    s->push(q, n);
    handoff_producer_wake(handoff_looper_of(s, q));
    return 0;
}

static inline int handoff_cancel(void *q, dq_token tok)
{
    (void)q;
    if (tok == 0)
        return -EINVAL;
    return bench_node_cancel((bench_node *)(uintptr_t)tok);
}

static inline size_t handoff_remove(const handoff_stack *s, void *q, const dq_match *m)
{
    handoff_drain(s, q);
    return bench_heap_remove_matching(&handoff_looper_of(s, q)->heap, m);
}

/* The bench_contender `symbol` named `id`.  The including file defines
   queue_type, a struct with a handoff_looper `looper` after its stack, and
   the static functions init, push, is_empty, pop_all and next of its
   handoff_stack. */
#define HANDOFF_CONTENDER(symbol, id, design_line, queue_type)                         \
    static const handoff_stack symbol##_stack = {                                      \
        .size = sizeof(queue_type),                                                    \
        .looper_offset = offsetof(queue_type, looper),                                 \
        .init = init,                                                                  \
        .push = push,                                                                  \
        .is_empty = is_empty,                                                          \
        .pop_all = pop_all,                                                            \
        .next = next,                                                                  \
    };                                                                                 \
    static void *symbol##_create(void)                                                 \
    {                                                                                  \
        return handoff_create(&symbol##_stack);                                        \
    }                                                                                  \
    static void symbol##_destroy(void *q)                                              \
    {                                                                                  \
        handoff_destroy(&symbol##_stack, q);                                           \
    }                                                                                  \
    static int symbol##_post_at(void *q, const dq_msg *m, int64_t when, dq_token *tok) \
    {                                                                                  \
        return handoff_post_at(&symbol##_stack, q, m, when, tok);                      \
    }                                                                                  \
    static int symbol##_try_next(void *q, dq_msg *out)                                 \
    {                                                                                  \
        return handoff_try_next(&symbol##_stack, q, out);                              \
    }                                                                                  \
    static int symbol##_next_until(void *q, dq_msg *out, int64_t deadline)             \
    {                                                                                  \
        return handoff_next_until(&symbol##_stack, q, out, deadline);                  \
    }                                                                                  \
    static size_t symbol##_remove(void *q, const dq_match *m)                          \
    {                                                                                  \
        return handoff_remove(&symbol##_stack, q, m);                                  \
    }                                                                                  \
    const bench_contender symbol = {                                                   \
        .name = (id),                                                                  \
        .design = (design_line),                                                       \
        .caps = BENCH_CONSUMES | BENCH_REMOVE_LOOPER,                                  \
        .create = symbol##_create,                                                     \
        .destroy = symbol##_destroy,                                                   \
        .post_at = symbol##_post_at,                                                   \
        .try_next = symbol##_try_next,                                                 \
        .next_until = symbol##_next_until,                                             \
        .cancel = handoff_cancel,                                                      \
        .remove = symbol##_remove,                                                     \
    }

#endif /* BENCH_CONTENDERS_HANDOFF_H */
