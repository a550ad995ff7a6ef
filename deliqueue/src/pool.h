/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process-wide, type-stable node pool (pool.c).  Any thread unless
 * stated.
 *
 * Node memory is never returned to the system (type stability, node.h).
 * Free nodes are bits in a free map; a thread takes whole words of it
 * into its own cache (dq_pool_cache) and posts from there with no atomic
 * of the pool's; a looper gives retired nodes back a word at a time
 * (dq_pool_batch).
 */
#ifndef DELIQUEUE_SRC_POOL_H
#define DELIQUEUE_SRC_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include <deliqueue_arch/cpu.h>

#include "atomic.h"
#include "node.h"

/* The pool's free map has a bit per node, DQ_POOL_WORD_NODES nodes to a
   word; a thread takes words' free nodes at once and posts them in
   address order, prefetching DQ_POOL_AHEAD posts ahead (dq_pool_cache). */
#define DQ_POOL_WORD_NODES 64u
#define DQ_POOL_AHEAD      7u

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
#define DQ_POOL_LINE_WORDS  8u
/* Words a thread holds taken but not yet in its magazine: four lines. */
#define DQ_POOL_STASH_WORDS (4u * DQ_POOL_LINE_WORDS)

/* Nodes in a thread's magazine: the posts take them in order.  The model
   build (model/relacy) may make it small, so that a thread's exit, which
   gives its magazine back a node at a time, fits a model-checked
   iteration; every other build uses 64. */
#if defined(DQ_RELACY) && defined(DQ_POOL_MODEL_MAG_NODES)
#define DQ_POOL_MAG_NODES ((unsigned)DQ_POOL_MODEL_MAG_NODES)
#else
#define DQ_POOL_MAG_NODES 64u
#endif
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
   that dq_pool_stats may read them from another thread, through the
   pool's registry slot the cache holds (slot) from its thread's first
   slow post until its exit. */
struct dq_pool_cache {
    _Atomic(uint32_t) next, count;
    dq_node *mag[DQ_POOL_MAG_NODES];
    uint32_t stash_next, stash_count;
    _Atomic(uint32_t) stash_nodes; /* nodes in stash_mask[stash_next ..) */
    uint32_t stash_word[DQ_POOL_STASH_WORDS];
    uint64_t stash_mask[DQ_POOL_STASH_WORDS];
    struct dq_pool_slot *slot;
};
extern DQ_THREAD_LOCAL(struct dq_pool_cache, dq_pool_cache)
    __attribute__((visibility("hidden")));

/* Whether the calling thread's magazine is used up (then
   dq_pool_get_slow). */
static inline bool dq_pool_cache_empty(void)
{
    /* relaxed: this thread's own fields (see dq_pool_cache) */
    return atomic_load_explicit(&DQ_TLS(dq_pool_cache).next, memory_order_relaxed) ==
           atomic_load_explicit(&DQ_TLS(dq_pool_cache).count, memory_order_relaxed);
}
/* A node in state (gen, FREE) for the calling thread, the next of its
   magazine, which must not be empty.  Inline: this is every post's first
   step. */
static inline dq_node *dq_pool_take_cached(void)
{
    /* relaxed: this thread's own field (see dq_pool_cache) */
    uint32_t i =
        atomic_load_explicit(&DQ_TLS(dq_pool_cache).next, memory_order_relaxed);
    atomic_store_explicit(&DQ_TLS(dq_pool_cache).next, i + 1, memory_order_relaxed);
    dq_prefetch_node_for_post(
        DQ_TLS(dq_pool_cache).mag[(i + DQ_POOL_AHEAD) % DQ_POOL_MAG_NODES]);
    return DQ_TLS(dq_pool_cache).mag[i];
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
    _Atomic(uint64_t) mask;
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
   no lock; a snapshot, exact while no thread posts or retires. */
void dq_pool_count(uint64_t *reserved_bytes, uint64_t *total, uint64_t *free_nodes,
                   uint64_t *cached, uint64_t *threads);

#endif /* DELIQUEUE_SRC_POOL_H */
