/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Message nodes: their layout, state word and tokens.  The pool that
 * recycles them is pool.h.
 *
 *   who          fields
 *   producer     line 0 (next, state, due, msg), and owner when it changes,
 *                and period and repeat_mode for a repeating post, while
 *                the node is FREE and its own (pool to push)
 *   any          next (acquire), state (CAS), owner (relaxed) at any time;
 *                the payload (msg, due) while it can prove the node is in
 *                the generation it expects (see DESIGN.md, "Reclamation")
 *   looper       prev, heap, looper_flags, limbo_next, retire_epoch; due
 *                of a repeating post it re-arms (relaxed: walkers and
 *                claimers read it meanwhile)
 *   remover      aux_next, between winning the state CAS and pushing the
 *                node onto the queue's removal list
 *   pool         nothing: a free node is a bit in the pool's free map
 *
 * Node memory is never returned to the system: a node is recycled only
 * through the pool, so any pointer to a node always points at a node (type
 * stability).  A node's identity for tokens is its pool index plus its
 * generation; the generation moves on every time the node is retired, so a
 * stale token never matches again.
 */
#ifndef DELIQUEUE_SRC_NODE_H
#define DELIQUEUE_SRC_NODE_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <deliqueue/deliqueue.h>
#include "atomic.h"
#include "heap.h"
#include "msg.h"

/* state word: generation << 4 | repeating << 3 | barrier << 2 | life */
enum dq_life {
    DQ_FREE = 0,      /* in the pool, in a producer's hands, or retired */
    DQ_PENDING = 1,   /* posted; waiting for delivery or removal */
    DQ_DELIVERED = 2, /* claimed by the looper; for a repeating post, "being
                         delivered": still live, and a claim may end it */
    DQ_REMOVED = 3,   /* claimed by a remover, canceller or teardown */
};
#define DQ_STATE_LIFE_MASK 3u
#define DQ_STATE_BARRIER   4u
#define DQ_STATE_REPEAT    8u /* a repeating post (dq_post_repeating) */
#define DQ_STATE_GEN_SHIFT 4

/* token: generation << DQ_INDEX_BITS | index.  The pool holds at most
   1 << DQ_INDEX_BITS nodes; a testing build may set fewer bits, to make a
   pool it can fill (//deliqueue:deliqueue_testing_small_pool). */
#ifndef DQ_INDEX_BITS
#define DQ_INDEX_BITS 28
#endif
#define DQ_GEN_BITS (64 - DQ_INDEX_BITS)
#define DQ_GEN_MAX  ((UINT64_C(1) << DQ_GEN_BITS) - 1)

static inline uint64_t dq_state_gen(uint64_t s)
{
    return s >> DQ_STATE_GEN_SHIFT;
}
static inline unsigned dq_state_life(uint64_t s)
{
    return (unsigned)(s & DQ_STATE_LIFE_MASK);
}
/* kind: 0, DQ_STATE_BARRIER or DQ_STATE_REPEAT */
static inline uint64_t dq_state_make(uint64_t gen, uint64_t kind, unsigned life)
{
    return gen << DQ_STATE_GEN_SHIFT | kind | life;
}
static inline uint64_t dq_state_with_life(uint64_t s, unsigned life)
{
    return (s & ~(uint64_t)DQ_STATE_LIFE_MASK) | life;
}

/* looper_flags */
#define DQ_LOOPER_SWEPT    1u /* the looper has met it in the stack */
#define DQ_LOOPER_UNLINKED 2u /* the looper has taken it out of the stack */

typedef struct dq_node dq_node;

/* The message as a node stores it: dq_msg's first 40 bytes, with flags in
   dq_msg's padding hole after arg2 and without `when`, which the node's due
   key implies (dq_node_msg).  That makes the whole producer half one line. */
typedef struct dq_payload {
    const void *target;
    int32_t what, arg1, arg2;
    uint32_t flags;
    void *obj;
    void (*callback)(dq_msg *m);
} dq_payload;

/* Layout, two cache lines: a post writes line 0 (link, state, due key
   and payload).  Line 1 holds the owner, the removal list's link and the
   looper's bookkeeping: a post reads it for the owner (prefetched with
   line 0), and writes it only when the owner changes.  The pool keeps
   nothing in the node (its free map is apart), so a node a bug left
   linked in a stack is simply posted again over its link (a cycle, which
   the nomem test sees).  So a post moves the line it writes from the
   looper's core to the producer's and reads the other, a delivery reads
   one line the producer wrote, and a message costs the consumer two
   lines of cache, as a malloc'd handoff node of 80-96 bytes does
   (bench/push_decomp measures the post against the floor). */
struct dq_node {
    /* -- line 0: written by the producer, read by everyone -- */
    /* stack link toward older nodes */
    alignas(64) _Atomic(dq_node *) next;
    _Atomic(uint64_t) state;
    /* heap key: when, or DQ_KEY_FRONT.  Atomic (relaxed everywhere,
       plain loads and stores in the code) because the looper moves a
       repeating post's due at each re-arm while walkers read it. */
    _Atomic(int64_t) due;
    dq_payload msg;
    /* -- line 1: owner; the removal list's link; the looper's fields -- */
    alignas(64) _Atomic(void *) owner; /* the dq_queue it was posted to */
    dq_node *aux_next;                 /* removal and looper lists */
    uint32_t index;                    /* pool index, immutable */
    uint32_t looper_flags;
    /* looper only; reset by the looper when it retires the node */
    dq_heap_elem heap;
    /* a repeating post: DQ_FIXED_RATE or DQ_FIXED_DELAY, and its period;
       written by the producer before the push, read by the looper */
    uint32_t repeat_mode;
    dq_node *prev;         /* back-link toward newer nodes (swept) */
    uint64_t retire_epoch; /* in limbo */
    dq_node *limbo_next;
    int64_t period;
};

DQ_ATOMIC_LAYOUT_ASSERT(offsetof(dq_node, owner) == 64,
                        "the producer writes line 0 only");
DQ_ATOMIC_LAYOUT_ASSERT(sizeof(dq_node) == 128, "two lines");
/* dq_node_set_msg/dq_node_msg copy dq_msg's head as one block */
_Static_assert(offsetof(dq_payload, obj) == offsetof(dq_msg, obj) &&
                   offsetof(dq_payload, callback) == offsetof(dq_msg, callback) &&
                   offsetof(dq_payload, arg2) == offsetof(dq_msg, arg2) &&
                   offsetof(dq_payload, flags) + sizeof(uint32_t) <=
                       offsetof(dq_msg, obj) &&
                   sizeof(dq_payload) == offsetof(dq_msg, when),
               "dq_payload mirrors dq_msg up to when");

/* Store *m (NULL: a barrier's empty payload) into a node the caller owns. */
static inline void dq_node_set_msg(dq_node *n, const dq_msg *m)
{
    if (m == NULL) {
        memset(&n->msg, 0, sizeof(n->msg));
        return;
    }
    /* one block copy, which fills flags' slot with dq_msg's padding; the
       flags store then overwrites it */
    memcpy(&n->msg, m, sizeof(n->msg));
    n->msg.flags = m->flags;
}

/* The due key.  relaxed: for every node but a repeating post it was
   written before the node was published (and the reader's acquire of the
   push or of the state orders it); a repeating post's moves at each
   re-arm, and a reader then sees the occurrence it is at or the next. */
static inline int64_t dq_node_due(const dq_node *n)
{
    return atomic_load_explicit(&n->due, memory_order_relaxed);
}

/* The message as posted: when is the due key, or 0 for a front post. */
static inline void dq_node_msg(const dq_node *n, dq_msg *out)
{
    memset(out, 0, sizeof(*out));
    out->target = n->msg.target;
    out->what = n->msg.what;
    out->arg1 = n->msg.arg1;
    out->arg2 = n->msg.arg2;
    out->obj = n->msg.obj;
    out->callback = n->msg.callback;
    out->flags = n->msg.flags;
    out->when = dq_node_due(n) == DQ_KEY_FRONT ? 0 : dq_node_due(n);
}

static inline bool dq_node_matches(const dq_match *match, const dq_node *n)
{
    return dq_match_fields(match, n->msg.target, n->msg.what, n->msg.obj,
                           n->msg.callback);
}

static inline dq_node *dq_node_of_heap(dq_heap_elem *e)
{
    return (dq_node *)((char *)e - offsetof(dq_node, heap));
}

static inline bool dq_node_is_barrier(uint64_t state)
{
    return (state & DQ_STATE_BARRIER) != 0;
}

static inline bool dq_node_is_repeating(uint64_t state)
{
    return (state & DQ_STATE_REPEAT) != 0;
}

/* A message a claim may still take: pending, or a repeating post in one
   of its deliveries (a cancel then ends it; the looper does not re-arm
   it).  Barriers are claimed by their own call. */
static inline bool dq_state_live(uint64_t s)
{
    return dq_state_life(s) == DQ_PENDING ||
           (dq_state_life(s) == DQ_DELIVERED && dq_node_is_repeating(s));
}

static inline dq_token dq_node_token(const dq_node *n, uint64_t gen)
{
    return gen << DQ_INDEX_BITS | n->index;
}

/* Looper only: end the node's generation and make it ready for its next post; false
   when its generations are exhausted (it is never reused, so tokens never
   repeat). */
static inline bool dq_node_reset(dq_node *n)
{
    /* relaxed: the state's last change was the caller's delivery CAS or
       a remover's claim, acquired through the removal list (the looper,
       or its teardown) */
    uint64_t gen = dq_state_gen(atomic_load_explicit(&n->state, memory_order_relaxed));
    if (gen >= DQ_GEN_MAX)
        return false;
    /* relaxed: a stale-token reader only needs to see a different
       generation; the node's next producer gets this value through the
       pool's free map (release/acquire) */
    atomic_store_explicit(&n->state, dq_state_make(gen + 1, 0, DQ_FREE),
                          memory_order_relaxed);
    n->looper_flags = 0;
    n->heap.index = DQ_HEAP_NONE;
    return true;
}

#endif /* DELIQUEUE_SRC_NODE_H */
