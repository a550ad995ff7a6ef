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
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue/heap.h>
#include <deliqueue/msg.h>
#include <deliqueue_arch/cpu.h>

#include "registry.h"

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

/* The pool's free map has a bit per node, DQ_POOL_WORD_NODES nodes to a
   word; a thread takes words' free nodes at once and posts them in
   address order, prefetching DQ_POOL_AHEAD posts ahead (dq_pool_cache). */
#define DQ_POOL_WORD_NODES 64u
#define DQ_POOL_AHEAD 7u

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
   and payload).  Line 1 holds the owner, the removal list's link and the
   looper's bookkeeping: a post reads it for the owner (prefetched with
   line 0), and writes it only when the owner changes.  The pool keeps
   nothing in the node (its free map is apart), so a node a bug left
   linked in a stack is simply posted again over its link (a cycle in
   the stack, which the nomem test sees).  So a post moves the line it writes from the
   looper's core to the producer's and reads the other, a delivery reads
   one line the producer wrote, and a message costs the consumer two
   lines of cache, as a malloc'd handoff node of 80-96 bytes does
   (bench/push_decomp measures the post against the floor). */
struct dq_node {
    /* -- line 0: written by the producer, read by everyone -- */
    /* stack link toward older nodes */
    alignas(64) _Atomic(dq_node *) next;
    _Atomic uint64_t    state;
    int64_t             due;        /* heap key: when, or DQ_KEY_FRONT */
    dq_payload          msg;
    /* -- line 1: owner; the removal list's link; the looper's fields -- */
    alignas(64) _Atomic(void *) owner; /* the dq_queue it was posted to */
    dq_node            *aux_next;    /* removal and looper lists */
    uint32_t            index;       /* pool index, immutable */
    uint32_t            looper_flags;
    /* looper only; reset by the looper when it retires the node */
    dq_heap_elem        heap;
    dq_node            *prev;        /* back-link toward newer nodes (swept) */
    uint64_t            retire_epoch; /* in limbo */
    dq_node            *limbo_next;
};

_Static_assert(offsetof(dq_node, owner) == 64, "the producer writes line 0 only");
_Static_assert(sizeof(dq_node) == 128, "two lines");
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
   write, line 1 (the owner) for read.  Line 1 is not left to the
   hardware's adjacent-line prefetch: a word of the free map hands out its
   free nodes with gaps wherever nodes are still posted, and a demand miss
   on line 1 is one the post's locked CAS waits for (bench/RESULTS.md, "An
   aged pool"). */
static inline void dq_prefetch_node_for_post(const dq_node *n)
{
    dq_arch_prefetch_for_write(n);
    dq_arch_prefetch_for_read((const char *)n + 64);
}

/* Free-map words to a cache line: a taker takes every non-empty word of
   a line it takes from, so that one transfer of the line from the
   looper that gave the nodes back serves up to this many words. */
#define DQ_POOL_LINE_WORDS 8u
/* Words a thread holds taken but not yet in its magazine: four lines. */
#define DQ_POOL_STASH_WORDS (4u * DQ_POOL_LINE_WORDS)

/* Nodes in a thread's magazine: the posts take them in order. */
#define DQ_POOL_MAG_NODES 64u
_Static_assert(DQ_POOL_AHEAD < DQ_POOL_MAG_NODES, "prefetch within a magazine");

/* The calling thread's free nodes, taken from the pool's free map as whole
   words, so that only this thread touches them (given back when the
   thread exits).  The posts take them from the magazine, mag[next ..
   count), in address order, each prefetching the node DQ_POOL_AHEAD
   posts ahead; the words not yet moved into it wait in the stash, in
   address order (stash_mask: the bits still to move).  A magazine spans
   words, so a post refills once per DQ_POOL_MAG_NODES nodes however
   sparse the words are (under steady random delays they hold ~3 free
   nodes each, bench/RESULTS.md).  Past count the entries still point at
   nodes (earlier fills, or padding), so the prefetch needs no test.
   next, count and stash_nodes are atomics written by the owning thread
   alone, with relaxed stores (the code a plain access compiles to), so
   that dq_pool_stats may read them from another thread; a registered
   cache is on the pool's registry of caches (reg) until its thread
   exits. */
struct dq_pool_cache {
    _Atomic uint32_t next, count;
    dq_node *mag[DQ_POOL_MAG_NODES];
    uint32_t stash_next, stash_count;
    _Atomic uint32_t stash_nodes; /* nodes in stash_mask[stash_next ..) */
    uint32_t stash_word[DQ_POOL_STASH_WORDS];
    uint64_t stash_mask[DQ_POOL_STASH_WORDS];
    bool     registered;
    dq_reg_link reg;
};
extern _Thread_local struct dq_pool_cache dq_pool_cache
    __attribute__((visibility("hidden")));

/* Whether the calling thread's magazine is used up (then
   dq_pool_get_slow). */
static inline bool dq_pool_cache_empty(void)
{
    /* relaxed: this thread's own fields (see dq_pool_cache) */
    return atomic_load_explicit(&dq_pool_cache.next, memory_order_relaxed) ==
           atomic_load_explicit(&dq_pool_cache.count, memory_order_relaxed);
}
/* A node in state (gen, FREE) for the calling thread, the next of its
   magazine, which must not be empty.  Inline: this is every post's first
   step. */
static inline dq_node *dq_pool_take_cached(void)
{
    /* relaxed: this thread's own field (see dq_pool_cache) */
    uint32_t i = atomic_load_explicit(&dq_pool_cache.next, memory_order_relaxed);
    atomic_store_explicit(&dq_pool_cache.next, i + 1, memory_order_relaxed);
    dq_prefetch_node_for_post(dq_pool_cache.mag[(i + DQ_POOL_AHEAD) % DQ_POOL_MAG_NODES]);
    return dq_pool_cache.mag[i];
}
/* Refill the cache from the free map (or grow the pool), then take a
   node; NULL: out of memory (ENOMEM). */
dq_node *dq_pool_get_slow(void);
/* Give back a node the caller got from dq_pool_take_cached or
   dq_pool_get_slow and never published. */
void dq_pool_unget(dq_node *n);
/* The node with this index, or NULL if no such node was ever made. */
dq_node *dq_pool_node(uint32_t index);

/* A looper's retired nodes not yet given back: the bits of one free-map
   word, or'ed into the map when a node of another word comes, when the
   word is full, or at teardown (an idle looper keeps its word: at most 63
   nodes per queue wait there).  mask: written by its one owner with
   relaxed stores, read by dq_pool_stats. */
typedef struct dq_pool_batch {
    _Atomic uint64_t mask;
    uint32_t word;
} dq_pool_batch;

static inline void dq_pool_batch_init(dq_pool_batch *b)
{
    atomic_store_explicit(&b->mask, 0, memory_order_relaxed);
    b->word = 0;
}
/* Add a FREE node.  Caller: one thread per batch (the looper). */
void dq_pool_batch_add(dq_pool_batch *b, dq_node *n);
/* Give back what the batch holds (teardown). */
void dq_pool_batch_flush(dq_pool_batch *b);

/* The pool's side of dq_pool_stats: reserved bytes, nodes made, nodes in
   the free map, nodes in threads' caches, and threads with a cache.  Takes
   the pool's locks; a snapshot, exact while no thread posts or retires. */
void dq_pool_count(uint64_t *reserved_bytes, uint64_t *total, uint64_t *free_nodes,
                   uint64_t *cached, uint64_t *threads);

#endif /* DELIQUEUE_SRC_NODE_H */
