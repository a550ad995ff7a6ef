/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The type-stable node pool, shared by every queue of the process.
 *
 * Nodes live in chunks that are never freed.  Which nodes are free is a
 * bitmap, the free map: one bit per node, 64 nodes (8 KiB) to a word, set
 * while the node waits in the pool.  A thread takes whole words (one
 * exchange with 0 each), every non-empty one of the cache line of words
 * it finds first and of the lines after it until it holds 64 nodes, and
 * posts their nodes in address order from a magazine of 64 node pointers
 * (pool.h, dq_pool_cache); a looper gives retired nodes back by or-ing
 * their bits in, one fetch_or per word.
 * Takers scan the map from its low end, so the pool hands out the lowest
 * free nodes first, whatever order they were retired in: the posts of a
 * busy queue stay packed into few words, and the looper's sweep over them
 * walks a few 8 KiB stretches instead of a pointer chase over the whole
 * pool (bench/RESULTS.md, "Address-ordered reuse").  A bitmap has no ABA:
 * a word's bits are the nodes free now, whoever set them.
 *
 * A thread that exits gives its cached nodes back (pthread key destructor),
 * so memory stays bounded however many threads come and go.
 *
 * Chunks are carved from 2 MiB slabs, 2 MiB aligned and advised for
 * transparent huge pages, so a 100k-deep queue's nodes are a handful of
 * TLB entries (bench/RESULTS.md, "An aged pool").  The price is that the
 * first post of a process commits a slab, 2 MiB where THP is on, rather
 * than one chunk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pool.h"

#define CHUNK_SHIFT 12
#define CHUNK_NODES (1u << CHUNK_SHIFT)
#define CHUNK_WORDS (CHUNK_NODES / DQ_POOL_WORD_NODES)
#define MAX_CHUNKS  (1u << (DQ_INDEX_BITS - CHUNK_SHIFT))
#define SLAB_BYTES  ((size_t)2 << 20) /* one x86-64/arm64 (4 KiB granule) huge page */
#define SLAB_CHUNKS (SLAB_BYTES / (CHUNK_NODES * sizeof(dq_node)))
_Static_assert(SLAB_CHUNKS *CHUNK_NODES * sizeof(dq_node) == SLAB_BYTES,
               "a slab is a whole number of chunks");
_Static_assert(CHUNK_WORDS *DQ_POOL_WORD_NODES == CHUNK_NODES,
               "a chunk is a whole number of free-map words");

/* Chunk table: entries are written once under grow_lock, with release, and
   read without the lock with acquire (dq_pool_node from any thread). */
static _Atomic(dq_node *) chunks[MAX_CHUNKS];
/* The free map, CHUNK_WORDS words per chunk.  Written once under
   grow_lock before word_count's release store covers it; read by threads
   that loaded word_count with acquire, or that hold one of the chunk's
   nodes (which reached them through that load). */
static _Atomic uint64_t *chunk_free[MAX_CHUNKS];
/* Words of the map that exist: the scan's end (release by grow). */
static _Atomic uint32_t word_count;
/* Where a scan starts: below it every word was empty when a scan passed,
   unless a give-back lowered it since.  Only a hint (relaxed): a give-back
   can race with a scan that raises it past the word just refilled, and
   such bits wait for the scan from 0 that grow makes before it adds a
   chunk, so the pool never grows while a free node is stranded. */
static _Atomic uint32_t scan_from;
static uint32_t chunk_count; /* under grow_lock */
static char *slab_next;      /* under grow_lock: the current slab's unused chunks */
static uint32_t slab_left;
static uint64_t reserved_bytes; /* under grow_lock: slabs and free-map words */
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

/* The registered threads' caches, for dq_pool_count: a thread's cache is
   on it from its first slow post until its exit. */
static dq_registry caches = DQ_REGISTRY_INIT;

_Thread_local struct dq_pool_cache dq_pool_cache;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

dq_node *dq_pool_node(uint32_t index)
{
    if (index >= (1u << DQ_INDEX_BITS))
        return NULL;
    /* acquire: pairs with the release store that published the chunk, so
       the node's immutable index and its atomics' initial values are seen */
    dq_node *chunk =
        atomic_load_explicit(&chunks[index >> CHUNK_SHIFT], memory_order_acquire);
    return chunk ? &chunk[index & (CHUNK_NODES - 1)] : NULL;
}

static _Atomic uint64_t *free_word(uint32_t w)
{
    return &chunk_free[w / CHUNK_WORDS][w % CHUNK_WORDS];
}

#define GIVE_BACK_ORDER memory_order_release
#define TAKE_ORDER      memory_order_acquire

/* Take every free node of word *p: the word's bits, which are then 0. */
static uint64_t take_word(_Atomic uint64_t *p)
{
    /* acquire: pairs with give_back's release (the nodes' resets) */
    return atomic_exchange_explicit(p, 0, TAKE_ORDER);
}

/* Take every free node of word w, if it looks non-empty: 0 if not, or if a
   racing taker had them first. */
static uint64_t take_if_free(uint32_t w)
{
    _Atomic uint64_t *p = free_word(w);
    /* relaxed: only whether to try; the exchange decides */
    if (atomic_load_explicit(p, memory_order_relaxed) == 0)
        return 0;
    return take_word(p);
}

/* The free-map word of node n, and its bit there. */
static uint32_t word_of(const dq_node *n)
{
    return n->index / DQ_POOL_WORD_NODES;
}
static uint64_t bit_of(const dq_node *n)
{
    return UINT64_C(1) << (n->index % DQ_POOL_WORD_NODES);
}

/* Put the nodes of mask in word w back into the map. */
static void give_back(uint32_t w, uint64_t mask)
{
    /* release: the nodes' resets (new generation, FREE) and owners happen
       before the taker's acquire exchange; every write to a word is an
       RMW, so whichever exchange takes these bits reads from this
       release sequence */
    atomic_fetch_or_explicit(free_word(w), mask, GIVE_BACK_ORDER);
    /* relaxed: a hint (see scan_from); lowered so the next scan finds
       these low nodes before higher ones */
    uint32_t from = atomic_load_explicit(&scan_from, memory_order_relaxed);
    while (w < from && !atomic_compare_exchange_weak_explicit(&scan_from, &from, w,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed))
        ;
}

/* Move nodes from the stash into the empty magazine, in address order,
   up to DQ_POOL_MAG_NODES (a word may be split: its remaining bits stay
   in the stash), and prefetch the first DQ_POOL_AHEAD; the posts prefetch
   the rest, each DQ_POOL_AHEAD ahead (dq_pool_take_cached).  Entries past
   the fill keep pointing at nodes: the ones just after it get the last
   node filled, so that the posts' prefetches stay on real nodes. */
static void mag_fill(void)
{
    uint32_t k = 0, i = dq_pool_cache.stash_next;
    while (k < DQ_POOL_MAG_NODES && i < dq_pool_cache.stash_count) {
        dq_node *base = dq_pool_node(dq_pool_cache.stash_word[i] * DQ_POOL_WORD_NODES);
        uint64_t mask = dq_pool_cache.stash_mask[i];
        for (; mask != 0 && k < DQ_POOL_MAG_NODES; mask &= mask - 1)
            dq_pool_cache.mag[k++] = base + __builtin_ctzll(mask);
        dq_pool_cache.stash_mask[i] = mask;
        if (mask == 0)
            i++;
    }
    dq_pool_cache.stash_next = i;
    assert(k > 0); /* callers fill the stash first, with non-empty words */
    for (uint32_t j = k; j < k + DQ_POOL_AHEAD && j < DQ_POOL_MAG_NODES; j++)
        dq_pool_cache.mag[j] = dq_pool_cache.mag[k - 1];
    for (uint32_t j = 0; j < k && j < DQ_POOL_AHEAD; j++)
        dq_prefetch_node_for_post(dq_pool_cache.mag[j]);
    uint32_t stashed = 0;
    for (; i < dq_pool_cache.stash_count; i++)
        stashed += (uint32_t)__builtin_popcountll(dq_pool_cache.stash_mask[i]);
    /* relaxed: this thread's own fields, read by dq_pool_count */
    atomic_store_explicit(&dq_pool_cache.stash_nodes, stashed, memory_order_relaxed);
    atomic_store_explicit(&dq_pool_cache.next, 0, memory_order_relaxed);
    atomic_store_explicit(&dq_pool_cache.count, k, memory_order_relaxed);
}

/* The stash holds exactly word w's free nodes (mask). */
static void stash_one(uint32_t w, uint64_t mask)
{
    dq_pool_cache.stash_word[0] = w;
    dq_pool_cache.stash_mask[0] = mask;
    dq_pool_cache.stash_next = 0;
    dq_pool_cache.stash_count = 1;
}

/* Take the lowest non-empty word at or above scan_from and the other
   non-empty words of its cache line into the (empty) stash; then the
   non-empty words of the lines after it while the claim holds less than
   a magazine's worth of nodes and the stash has room for a line: under
   steady random delays the looper gives nodes back a few to a word, and
   a claim's misses (the hint, the map line, the first node) are paid
   once per claim. */
static bool claim(void)
{
    /* acquire: pairs with grow's release, so chunk_free of every word
       below total is seen */
    uint32_t total = atomic_load_explicit(&word_count, memory_order_acquire);
    uint32_t from = atomic_load_explicit(&scan_from, memory_order_relaxed);
    uint32_t w = from;
    uint64_t mask = 0;
    for (; w < total && mask == 0; w++)
        mask = take_if_free(w);
    if (mask == 0)
        return false;
    uint32_t first = w - 1, n = 1, nodes = (uint32_t)__builtin_popcountll(mask);
    stash_one(first, mask);
    /* the rest of the line is here now: take its words too, and go on
       by whole lines while the claim is short */
    uint32_t line_end = (first | (DQ_POOL_LINE_WORDS - 1)) + 1;
    for (;;) {
        if (line_end > total)
            line_end = total;
        for (uint32_t v = w; v < line_end; v++) {
            uint64_t more = take_if_free(v);
            if (more != 0) {
                dq_pool_cache.stash_word[n] = v;
                dq_pool_cache.stash_mask[n] = more;
                n++;
                nodes += (uint32_t)__builtin_popcountll(more);
            }
        }
        w = line_end;
        if (nodes >= DQ_POOL_MAG_NODES || w == total ||
            n + DQ_POOL_LINE_WORDS > DQ_POOL_STASH_WORDS)
            break;
        line_end = w + DQ_POOL_LINE_WORDS;
    }
    dq_pool_cache.stash_count = n;
    uint32_t next = n > 1 ? w : first;
    if (next != from) /* relaxed: a hint; lost to a racing update, fine */
        atomic_compare_exchange_strong_explicit(
            &scan_from, &from, next, memory_order_relaxed, memory_order_relaxed);
    return true;
}

static void cache_release(void *unused)
{
    (void)unused;
    /* the magazine's nodes, one give-back per run of a word (a batch) */
    dq_pool_batch batch;
    dq_pool_batch_init(&batch);
    /* relaxed, loads and stores: this thread's own fields (dq_pool_cache) */
    uint32_t next = atomic_load_explicit(&dq_pool_cache.next, memory_order_relaxed);
    uint32_t count = atomic_load_explicit(&dq_pool_cache.count, memory_order_relaxed);
    for (uint32_t i = next; i < count; i++)
        dq_pool_batch_add(&batch, dq_pool_cache.mag[i]);
    dq_pool_batch_flush(&batch);
    for (uint32_t i = dq_pool_cache.stash_next; i < dq_pool_cache.stash_count; i++)
        if (dq_pool_cache.stash_mask[i] != 0)
            give_back(dq_pool_cache.stash_word[i], dq_pool_cache.stash_mask[i]);
    atomic_store_explicit(&dq_pool_cache.next, 0, memory_order_relaxed);
    atomic_store_explicit(&dq_pool_cache.count, 0, memory_order_relaxed);
    atomic_store_explicit(&dq_pool_cache.stash_nodes, 0, memory_order_relaxed);
    dq_pool_cache.stash_next = dq_pool_cache.stash_count = 0;
    dq_registry_remove(&caches, &dq_pool_cache.reg);
}

static void cache_key_create(void)
{
    (void)pthread_key_create(&cache_key, cache_release);
}

static void cache_register(void)
{
    (void)pthread_once(&cache_key_once, cache_key_create);
    /* any non-NULL value makes the destructor run at thread exit */
    (void)pthread_setspecific(cache_key, &dq_pool_cache);
    dq_pool_cache.registered = true;
    dq_registry_add(&caches, &dq_pool_cache.reg);
}

/* No word was found free from scan_from up: scan the whole map (bits a
   racing hint update stranded below scan_from, see there), and only if it
   is empty make a chunk, keeping its first word for this thread.  Fills
   the stash; -1: out of memory. */
static int grow(void)
{
    pthread_mutex_lock(&grow_lock);
    uint32_t total = chunk_count * CHUNK_WORDS;
    /* relaxed: scan_from is a hint where takers start (see its store) */
    uint32_t from = atomic_load_explicit(&scan_from, memory_order_relaxed);
    for (uint32_t w = 0; w < total; w++) {
        uint64_t mask = take_if_free(w);
        if (mask != 0) {
            pthread_mutex_unlock(&grow_lock);
            stash_one(w, mask);
            return 0;
        }
    }
    if (chunk_count == MAX_CHUNKS)
        goto fail;
    /* line-aligned, so that a claim's line of words is one cache line */
    _Atomic uint64_t *words = aligned_alloc(64, CHUNK_WORDS * sizeof(*words));
    if (words == NULL)
        goto fail;
    if (slab_left == 0) {
        slab_next = aligned_alloc(SLAB_BYTES, SLAB_BYTES);
        if (slab_next == NULL) {
            free((void *)words);
            goto fail;
        }
#ifdef MADV_HUGEPAGE
        /* a hint: EINVAL where the kernel has no THP, and a no-op when it
           is set to never; then the slab is 4 KiB pages as before */
        (void)madvise(slab_next, SLAB_BYTES, MADV_HUGEPAGE);
#endif
        slab_left = SLAB_CHUNKS;
        reserved_bytes += SLAB_BYTES;
    }
    reserved_bytes += CHUNK_WORDS * sizeof(*words);
    dq_node *chunk = (dq_node *)slab_next;
    slab_next += CHUNK_NODES * sizeof(*chunk);
    slab_left--;
    memset(chunk, 0, CHUNK_NODES * sizeof(*chunk));
    uint32_t base = chunk_count << CHUNK_SHIFT;
    for (uint32_t i = 0; i < CHUNK_NODES; i++) {
        dq_node *n = &chunk[i];
        n->index = base + i;
        n->heap.index = DQ_HEAP_NONE;
        atomic_init(&n->state, dq_state_make(1, false, DQ_FREE));
        atomic_init(&n->next, NULL);
        atomic_init(&n->owner, NULL);
    }
    /* word 0 is this thread's (the cache below); the others are free */
    atomic_init(&words[0], 0);
    for (uint32_t w = 1; w < CHUNK_WORDS; w++)
        atomic_init(&words[w], ~UINT64_C(0));
    chunk_free[chunk_count] = words;
    /* release: pairs with dq_pool_node's acquire, so a token's lookup
       sees the nodes' initial state */
    atomic_store_explicit(&chunks[chunk_count], chunk, memory_order_release);
    chunk_count++;
    /* release: publishes chunk_free's entry and the words' initial bits
       (and, through them, the nodes) to claim's acquire */
    atomic_store_explicit(&word_count, chunk_count * CHUNK_WORDS, memory_order_release);
    /* relaxed: a hint; the words below were all seen empty just now, but
       if a give-back lowered the hint meanwhile, its value stands */
    uint32_t first_new = total + 1;
    if (from < first_new)
        atomic_compare_exchange_strong_explicit(
            &scan_from, &from, first_new, memory_order_relaxed, memory_order_relaxed);
    pthread_mutex_unlock(&grow_lock);
    stash_one(total, ~UINT64_C(0));
    return 0;
fail:
    pthread_mutex_unlock(&grow_lock);
    return -1;
}

dq_node *dq_pool_get_slow(void)
{
    if (!dq_pool_cache.registered)
        cache_register();
    if (dq_pool_cache_empty()) {
        if (dq_pool_cache.stash_next == dq_pool_cache.stash_count && !claim() &&
            grow() != 0)
            return NULL;
        mag_fill();
    }
    return dq_pool_take_cached();
}

void dq_pool_unget(dq_node *n)
{
    /* the last node this thread took: back to the front of its magazine
       (relaxed: this thread's own field) */
    uint32_t i = atomic_load_explicit(&dq_pool_cache.next, memory_order_relaxed);
    if (i > 0 && dq_pool_cache.mag[i - 1] == n) {
        atomic_store_explicit(&dq_pool_cache.next, i - 1, memory_order_relaxed);
        return;
    }
    give_back(word_of(n), bit_of(n));
}

/* The batch's mask: relaxed, as its one owner writes it (dq_pool_batch). */
static uint64_t batch_mask(const dq_pool_batch *b)
{
    return atomic_load_explicit(&b->mask, memory_order_relaxed);
}

void dq_pool_batch_add(dq_pool_batch *b, dq_node *n)
{
    uint32_t w = word_of(n);
    uint64_t mask = batch_mask(b);
    if (mask != 0 && b->word != w) {
        give_back(b->word, mask);
        mask = 0;
    }
    b->word = w;
    mask |= bit_of(n);
    /* relaxed: the batch's one owner writes it; dq_pool_stats only reads
       it (the nodes reach the map through give_back's release) */
    atomic_store_explicit(&b->mask, mask, memory_order_relaxed);
    if (mask == ~UINT64_C(0))
        dq_pool_batch_flush(b);
}

void dq_pool_batch_flush(dq_pool_batch *b)
{
    uint64_t mask = batch_mask(b);
    if (mask != 0)
        give_back(b->word, mask);
    dq_pool_batch_init(b);
}

void dq_pool_count(uint64_t *reserved, uint64_t *total, uint64_t *free_nodes,
                   uint64_t *cached, uint64_t *threads)
{
    pthread_mutex_lock(&grow_lock);
    *reserved = reserved_bytes;
    uint32_t words = chunk_count * CHUNK_WORDS;
    *total = (uint64_t)chunk_count * CHUNK_NODES;
    pthread_mutex_unlock(&grow_lock);
    uint64_t nfree = 0;
    /* relaxed: a count, not a claim; under grow_lock's unlock every word
       below chunk_count's was initialised */
    for (uint32_t w = 0; w < words; w++)
        nfree += (uint64_t)__builtin_popcountll(
            atomic_load_explicit(free_word(w), memory_order_relaxed));
    *free_nodes = nfree;
    uint64_t held = 0;
    pthread_mutex_lock(&caches.lock);
    /* relaxed: each owner stores its own counts (dq_pool_cache) */
    for (dq_reg_link *l = caches.head; l != NULL; l = l->next) {
        struct dq_pool_cache *c = dq_reg_entry(l, struct dq_pool_cache, reg);
        uint32_t next = atomic_load_explicit(&c->next, memory_order_relaxed);
        uint32_t count = atomic_load_explicit(&c->count, memory_order_relaxed);
        held += (count > next ? count - next : 0) +
                atomic_load_explicit(&c->stash_nodes, memory_order_relaxed);
    }
    *threads = caches.count;
    pthread_mutex_unlock(&caches.lock);
    *cached = held;
}
