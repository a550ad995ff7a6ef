/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The type-stable node pool, shared by every queue of the process.
 *
 * Nodes live in chunks that are never freed.  Free nodes circulate in
 * batches of up to DQ_POOL_BATCH: a global Treiber stack of batches, whose
 * head is a (tag, index + 1) word so that popping is ABA-safe, and one
 * cached batch per thread.  A producer thus touches shared pool state once
 * per DQ_POOL_BATCH posts; the post itself is only its push CAS.
 *
 * A thread that exits gives its cached nodes back (pthread key destructor),
 * so memory stays bounded however many threads come and go.
 *
 * Chunks are carved from 2 MiB slabs, 2 MiB aligned and advised for
 * transparent huge pages.  Cancels, removals and deliveries of messages
 * posted with random delays return nodes in no address order, so after a
 * while a thread's next thousand posts land on a hundred or more 4 KiB
 * pages, past the first-level TLB: on huge pages the whole pool of a
 * 100k-deep queue is seven TLB entries (bench/RESULTS.md, "An aged
 * pool").  The price is that the first post of a
 * process commits a slab, 2 MiB where THP is on, rather than one chunk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "node.h"

#define CHUNK_SHIFT 12
#define CHUNK_NODES (1u << CHUNK_SHIFT)
#define MAX_CHUNKS  (1u << (DQ_INDEX_BITS - CHUNK_SHIFT))
#define SLAB_BYTES  ((size_t)2 << 20) /* one x86-64/arm64 (4 KiB granule) huge page */
#define SLAB_CHUNKS (SLAB_BYTES / (CHUNK_NODES * sizeof(dq_node)))
_Static_assert(SLAB_CHUNKS * CHUNK_NODES * sizeof(dq_node) == SLAB_BYTES,
               "a slab is a whole number of chunks");

/* Chunk table: entries are written once under grow_lock, with release, and
   read without the lock with acquire (dq_pool_node from any thread). */
static _Atomic(dq_node *) chunks[MAX_CHUNKS];
static uint32_t chunk_count; /* under grow_lock */
static char *slab_next;      /* under grow_lock: the current slab's unused chunks */
static uint32_t slab_left;
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;

/* (tag << 32) | (index + 1) of the top batch; 0 when empty. */
static _Atomic uint64_t batch_top;

_Thread_local struct dq_pool_cache dq_pool_cache;
const char dq_pool_mixed_owner;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

dq_node *dq_pool_node(uint32_t index)
{
    if (index >= (1u << DQ_INDEX_BITS))
        return NULL;
    /* acquire: pairs with the release store that published the chunk, so
       the node's immutable index and its atomics' initial values are seen */
    dq_node *chunk = atomic_load_explicit(&chunks[index >> CHUNK_SHIFT],
                                          memory_order_acquire);
    return chunk ? &chunk[index & (CHUNK_NODES - 1)] : NULL;
}

/* Publish a batch whose members' owner is owner (or DQ_POOL_MIXED). */
static void batch_push(dq_node *head, void *owner)
{
    head->batch_owner = owner;
    uint64_t top = atomic_load_explicit(&batch_top, memory_order_relaxed);
    for (;;) {
        atomic_store_explicit(&head->batch_next, (uint32_t)top,
                              memory_order_relaxed);
        uint64_t next = ((top >> 32) + 1) << 32 | (head->index + 1);
        /* release: publishes the batch's chain, hints and owner to the
           popper's acquire; relaxed on failure, we only retry */
        if (atomic_compare_exchange_weak_explicit(&batch_top, &top, next,
                                                  memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

static dq_node *batch_pop(void)
{
    /* acquire: pairs with batch_push's release so batch_next, the chain,
       the hints and batch_owner of the batch we read are the pusher's */
    uint64_t top = atomic_load_explicit(&batch_top, memory_order_acquire);
    for (;;) {
        uint32_t slot = (uint32_t)top;
        if (slot == 0)
            return NULL;
        dq_node *head = dq_pool_node(slot - 1);
        /* may be stale if another thread popped the batch meanwhile: the
           tag in top then differs and the CAS below fails */
        uint32_t below = atomic_load_explicit(&head->batch_next,
                                              memory_order_relaxed);
        uint64_t next = ((top >> 32) + 1) << 32 | below;
        if (atomic_compare_exchange_weak_explicit(&batch_top, &top, next,
                                                  memory_order_acquire,
                                                  memory_order_acquire))
            return head;
    }
}

static void cache_release(void *unused)
{
    (void)unused;
    if (dq_pool_cache.head != NULL) {
        batch_push(dq_pool_cache.head, dq_pool_cache.owner);
    }
    dq_pool_cache.head = NULL;
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
}

/* Make a chunk; keep one batch for this thread, publish the others. */
static int grow(void)
{
    pthread_mutex_lock(&grow_lock);
    if (chunk_count == MAX_CHUNKS) {
        pthread_mutex_unlock(&grow_lock);
        return -1;
    }
    if (slab_left == 0) {
        slab_next = aligned_alloc(SLAB_BYTES, SLAB_BYTES);
        if (slab_next == NULL) {
            pthread_mutex_unlock(&grow_lock);
            return -1;
        }
#ifdef MADV_HUGEPAGE
        /* a hint: EINVAL where the kernel has no THP, and a no-op when it
           is set to never; then the slab is 4 KiB pages as before */
        (void)madvise(slab_next, SLAB_BYTES, MADV_HUGEPAGE);
#endif
        slab_left = SLAB_CHUNKS;
    }
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
        atomic_init(&n->batch_next, 0);
    }
    atomic_store_explicit(&chunks[chunk_count], chunk, memory_order_release);
    chunk_count++;
    pthread_mutex_unlock(&grow_lock);

    for (uint32_t b = 0; b < CHUNK_NODES; b += DQ_POOL_BATCH) {
        for (uint32_t i = b; i < b + DQ_POOL_BATCH; i++) {
            chunk[i].aux_next = i + 1 < b + DQ_POOL_BATCH ? &chunk[i + 1] : NULL;
            chunk[i].pool_ahead = i + DQ_POOL_AHEAD < b + DQ_POOL_BATCH
                                      ? &chunk[i + DQ_POOL_AHEAD] : &chunk[i];
        }
        for (uint32_t j = 0; j < DQ_POOL_AHEAD - 1; j++)
            chunk[b].pool_first[j] = base + b + 1 + j;
        if (b == 0) {
            dq_pool_cache.head = &chunk[0];
            dq_pool_cache.owner = NULL;
        } else {
            batch_push(&chunk[b], NULL); /* no node was ever posted */
        }
    }
    return 0;
}

/* Prefetch a batch's head (both lines a post writes) and the members its
   pool_first names; the rest come through pool_ahead as it is popped. */
static void prefetch_batch(dq_node *head)
{
    dq_prefetch_node_for_post(head);
    for (uint32_t j = 0; j < DQ_POOL_AHEAD - 1; j++) {
        dq_node *m = dq_pool_node(head->pool_first[j]); /* NULL: NO_INDEX */
        if (m == NULL)
            break;
        dq_prefetch_node_for_post(m);
    }
}

dq_node *dq_pool_get_slow(void)
{
    if (!dq_pool_cache.registered)
        cache_register();
    dq_node *head = batch_pop();
    if (head != NULL) {
        prefetch_batch(head);
        dq_pool_cache.head = head;
        dq_pool_cache.owner = head->batch_owner;
    } else if (grow() != 0) {
        return NULL;
    }
    return dq_pool_get_cached();
}

void dq_pool_unget(dq_node *n)
{
    n->aux_next = dq_pool_cache.head;
    n->pool_ahead = n; /* the post wrote due over it */
    dq_pool_cache.head = n;
    /* relaxed: our own store, if the post stored it */
    if (atomic_load_explicit(&n->owner, memory_order_relaxed) != dq_pool_cache.owner)
        dq_pool_cache.owner = DQ_POOL_MIXED;
}

void dq_pool_batch_add(dq_pool_batch *b, dq_node *n)
{
    n->aux_next = NULL;
    n->pool_ahead = n;
    /* relaxed: the looper's own store, or one it acquired with the node */
    void *owner = atomic_load_explicit(&n->owner, memory_order_relaxed);
    b->owner = b->count == 0 || b->owner == owner ? owner : DQ_POOL_MIXED;
    if (b->count == 0) {
        for (uint32_t j = 0; j < DQ_POOL_AHEAD - 1; j++)
            n->pool_first[j] = DQ_POOL_NO_INDEX;
    } else if (b->count < DQ_POOL_AHEAD) {
        b->head->pool_first[b->count - 1] = n->index;
    }
    dq_node **slot = &b->recent[b->count % DQ_POOL_AHEAD];
    if (b->count >= DQ_POOL_AHEAD)
        (*slot)->pool_ahead = n;
    *slot = n;
    if (b->tail != NULL)
        b->tail->aux_next = n;
    else
        b->head = n;
    b->tail = n;
    if (++b->count == DQ_POOL_BATCH)
        dq_pool_batch_flush(b);
}

void dq_pool_batch_flush(dq_pool_batch *b)
{
    if (b->head != NULL) {
        batch_push(b->head, b->owner);
    }
    dq_pool_batch_init(b);
}
