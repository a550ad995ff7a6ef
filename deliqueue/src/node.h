/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Message nodes and the process-wide type-stable node pool.
 *
 *   who          fields
 *   producer     line 0 (next, state, due, msg), and owner when it changes,
 *                while the node is FREE and its own (pool to push)
 *   any          next (acquire), state (CAS), owner (relaxed) at any time;
 *                the payload (msg, due) while it can prove the node is in
 *                the generation it expects (see DESIGN.md, "Reclamation")
 *   looper       prev, heap, looper_flags, limbo_next, retire_epoch
 *   remover      aux_next, between winning the state CAS and pushing the
 *                node onto the queue's removal list
 *   pool         while FREE in the pool: pool_ahead (over due) in line 0;
 *                aux_next (the batch's chain), batch_next, batch_owner
 *                and pool_first (over the looper's dead
 *                prev/retire_epoch/limbo_next) in line 1 of a batch's head
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
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue/heap.h>
#include <deliqueue/msg.h>
#include <deliqueue_arch/cpu.h>

/* state word: generation << 3 | barrier << 2 | life */
enum dq_life {
    DQ_FREE = 0,      /* in the pool, in a producer's hands, or retired */
    DQ_PENDING = 1,   /* posted; waiting for delivery or removal */
    DQ_DELIVERED = 2, /* claimed by the looper */
    DQ_REMOVED = 3,   /* claimed by a remover, canceller or teardown */
};
#define DQ_STATE_LIFE_MASK 3u
#define DQ_STATE_BARRIER   4u
#define DQ_STATE_GEN_SHIFT 3

/* token: generation << DQ_INDEX_BITS | index */
#define DQ_INDEX_BITS 28
#define DQ_GEN_BITS   (64 - DQ_INDEX_BITS)
#define DQ_GEN_MAX    ((UINT64_C(1) << DQ_GEN_BITS) - 1)

static inline uint64_t dq_state_gen(uint64_t s) { return s >> DQ_STATE_GEN_SHIFT; }
static inline unsigned dq_state_life(uint64_t s) { return (unsigned)(s & DQ_STATE_LIFE_MASK); }
static inline uint64_t dq_state_make(uint64_t gen, bool barrier, unsigned life)
{
    return gen << DQ_STATE_GEN_SHIFT | (barrier ? DQ_STATE_BARRIER : 0) | life;
}
static inline uint64_t dq_state_with_life(uint64_t s, unsigned life)
{
    return (s & ~(uint64_t)DQ_STATE_LIFE_MASK) | life;
}

/* looper_flags */
#define DQ_LOOPER_SWEPT    1u /* the looper has met it in the stack */
#define DQ_LOOPER_UNLINKED 2u /* the looper has taken it out of the stack */

/* Prefetch hints of a pooled batch (a chain through aux_next).  Popping
   member k of a batch prefetches member k + DQ_POOL_AHEAD (its pool_ahead),
   and taking a batch prefetches members 1 .. DQ_POOL_AHEAD - 1 (the head's
   pool_first indices), so no post pays a serial cache miss for the chase
   through recycled nodes the looper last wrote.  Hints only: they are
   prefetched, never dereferenced, so a stale one (after dq_pool_unget)
   costs a useless prefetch and nothing else.  A member with no member
   DQ_POOL_AHEAD further on names itself (a line the post is about to
   write anyway), never NULL, so a post prefetches without a test. */
#define DQ_POOL_AHEAD 7u
#define DQ_POOL_NO_INDEX UINT32_MAX /* beyond every index: dq_pool_node gives NULL */

typedef struct dq_node dq_node;

/* The message as a node stores it: dq_msg's first 40 bytes, with flags in
   dq_msg's padding hole after arg2 and without `when`, which the node's due
   key implies (dq_node_msg).  That makes the whole producer half one line. */
typedef struct dq_payload {
    const void *target;
    int32_t     what, arg1, arg2;
    uint32_t    flags;
    void       *obj;
    void      (*callback)(dq_msg *m);
} dq_payload;

/* Layout, two cache lines: a post writes line 0 (link, state, due key
   and payload); while the node is in the pool, line 0 also holds the
   prefetch hint (over due).  Line 1 holds the owner, the removal and pool
   links and the looper's bookkeeping: a post reads it for the pool's
   chain (prefetched with line 0), and writes it only when the owner
   changes (not even reads the owner when its batch is all the queue's,
   dq_pool_cache).  The chain stays out of next, so that a node a bug
   left linked in a stack cannot splice the stack into the pool
   (DQ_MUTANT_UNLINK_NEEDS_HEAP_ROOM is then a cycle the nomem test sees,
   tools/MUTANTS.notes.md).  So a post
   moves the line it writes from the looper's core to the producer's and
   reads the other, a delivery reads one line the producer wrote, and a
   message costs the consumer two lines of cache, as a malloc'd handoff
   node of 80-96 bytes does (bench/push_decomp measures the post against
   the floor). */
struct dq_node {
    /* -- line 0: written by the producer, read by everyone -- */
    /* stack link toward older nodes */
    alignas(64) _Atomic(dq_node *) next;
    _Atomic uint64_t    state;
    union {
        int64_t         due;        /* heap key: when, or DQ_KEY_FRONT */
        dq_node        *pool_ahead; /* pool: hint, see DQ_POOL_AHEAD */
    };
    dq_payload          msg;
    /* -- line 1: owner; removal list and pool links; the looper's fields -- */
    alignas(64) _Atomic(void *) owner; /* the dq_queue it was posted to */
    dq_node            *aux_next;    /* removal and looper lists; pool chain */
    _Atomic uint32_t    batch_next;  /* pool: index + 1 of the next batch */
    uint32_t            index;       /* pool index, immutable */
    void               *batch_owner; /* pool, a batch's head: see dq_pool_cache */
    /* looper only; reset by the looper when it retires the node */
    dq_heap_elem        heap;
    uint32_t            looper_flags;
    union {
        struct {               /* looper: while posted, then in limbo */
            dq_node *prev;     /* back-link toward newer nodes (swept) */
            uint64_t retire_epoch;
            dq_node *limbo_next;
        };
        /* pool: in a batch's head only, while the batch is in the pool,
           when none of the looper's fields above is live (every post is
           swept, which writes prev, before the looper reads it) */
        uint32_t pool_first[DQ_POOL_AHEAD - 1];
    };
};

_Static_assert(offsetof(dq_node, owner) == 64, "the producer writes line 0 only");
_Static_assert(sizeof(dq_node) == 128, "two lines");
_Static_assert(sizeof(((dq_node *)0)->pool_first) <=
               offsetof(dq_node, limbo_next) + sizeof(dq_node *) - offsetof(dq_node, prev),
               "the hints fit over the looper's dead fields");
/* dq_node_set_msg/dq_node_msg copy dq_msg's head as one block */
_Static_assert(offsetof(dq_payload, obj) == offsetof(dq_msg, obj) &&
               offsetof(dq_payload, callback) == offsetof(dq_msg, callback) &&
               offsetof(dq_payload, arg2) == offsetof(dq_msg, arg2) &&
               offsetof(dq_payload, flags) + sizeof(uint32_t) <= offsetof(dq_msg, obj) &&
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
    out->when = n->due == DQ_KEY_FRONT ? 0 : n->due;
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

static inline dq_token dq_node_token(const dq_node *n, uint64_t gen)
{
    return gen << DQ_INDEX_BITS | n->index;
}

/* -- the pool (pool.c) -- any thread unless stated -- */

/* Prefetch both lines a post touches (the layout above): line 0 for
   write, line 1 (the pool's chain) for read.  Line 1 is not left to the
   hardware's adjacent-line or stream prefetch: a pool aged by cancels,
   removals and out-of-order deliveries hands out nodes in no address
   order, and without this prefetch the read of aux_next was a demand
   miss that the post's locked CAS waits for (bench/RESULTS.md, "An aged
   pool"). */
static inline void dq_prefetch_node_for_post(const dq_node *n)
{
    dq_arch_prefetch_for_write(n);
    dq_arch_prefetch_for_read((const char *)n + 64);
}

/* DQ_POOL_MIXED as a batch's owner: its nodes' owners differ. */
extern const char dq_pool_mixed_owner __attribute__((visibility("hidden")));
#define DQ_POOL_MIXED ((void *)&dq_pool_mixed_owner)

/* The calling thread's cached batch: a chain through aux_next that only this
   thread touches (given back to the pool when the thread exits).  It
   keeps no count, so a post stores nothing here but the new head.
   owner is every cached node's owner, or DQ_POOL_MIXED: a looper retires
   only its own queue's nodes, so a batch is usually one queue's, and a
   post to that queue then neither reads nor writes the node's line 1. */
struct dq_pool_cache {
    dq_node *head;
    void    *owner;
    bool     registered;
};
extern _Thread_local struct dq_pool_cache dq_pool_cache
    __attribute__((visibility("hidden")));

/* A node in state (gen, FREE) for the calling thread from its cached
   batch, or NULL when the batch is used up (then dq_pool_get_slow).
   Inline: this is every post's first step. */
static inline dq_node *dq_pool_get_cached(void)
{
    dq_node *n = dq_pool_cache.head;
    if (__builtin_expect(n == NULL, 0))
        return NULL;
    dq_pool_cache.head = n->aux_next;
    dq_prefetch_node_for_post(n->pool_ahead);
    return n;
}
/* Refill the cache from the shared pool (or grow it), then take a node;
   NULL: out of memory (ENOMEM). */
dq_node *dq_pool_get_slow(void);
/* Give back a node the caller got from dq_pool_get_cached or
   dq_pool_get_slow and never published. */
void dq_pool_unget(dq_node *n);
/* The node with this index, or NULL if no such node was ever made. */
dq_node *dq_pool_node(uint32_t index);

/* Retired nodes are handed back in batches by their looper. */
#define DQ_POOL_BATCH 64u

typedef struct dq_pool_batch {
    dq_node *head;  /* member 0 */
    dq_node *tail;
    void    *owner; /* every member's owner, or DQ_POOL_MIXED */
    uint32_t count;
    dq_node *recent[DQ_POOL_AHEAD]; /* the last DQ_POOL_AHEAD members added */
} dq_pool_batch;

static inline void dq_pool_batch_init(dq_pool_batch *b)
{
    b->head = b->tail = NULL;
    b->count = 0;
}
/* Add a FREE node; publishes the batch once it is full.  Caller: one thread
   per batch (the looper). */
void dq_pool_batch_add(dq_pool_batch *b, dq_node *n);
/* Publish a partial batch (at teardown: an idle looper keeps its partial
   batch, so a paced queue does not fill the pool with tiny batches). */
void dq_pool_batch_flush(dq_pool_batch *b);

#endif /* DELIQUEUE_SRC_NODE_H */
