/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 6: the floor of the producer side.  A bare intrusive push of a
 * preallocated node onto an atomic list, as the kernel's llist_add: one
 * CAS loop on the top pointer and nothing else (no copy of the message, no
 * allocation, no ordering, no consumer).  Each producer thread takes its
 * nodes from a private pool filled by producer_prepare, untimed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "bench/contender.h"
#include "bench/contenders/baseline.h"

typedef struct floor_node {
    struct floor_node *next;
    bench_node body; /* the same footprint as a baseline message */
} floor_node;

typedef struct floor_chunk {
    struct floor_chunk *next;
    floor_node nodes[];
} floor_chunk;

typedef struct floor_list {
    _Alignas(64) _Atomic(floor_node *) top;
    char pad[64];
    pthread_mutex_t chunks_lock; /* producer_prepare only, untimed */
    floor_chunk *chunks;
} floor_list;

/* A producer thread's pool for one floor_list. */
static _Thread_local struct {
    floor_list *owner;
    floor_node *next;
    size_t left;
} pool;

static void *create(void)
{
    floor_list *q = aligned_alloc(64, (sizeof(floor_list) + 63) / 64 * 64);
    if (q == NULL)
        return NULL;
    atomic_init(&q->top, NULL);
    pthread_mutex_init(&q->chunks_lock, NULL);
    q->chunks = NULL;
    return q;
}

static void destroy(void *qv)
{
    floor_list *q = qv;
    while (q->chunks) {
        floor_chunk *c = q->chunks;
        q->chunks = c->next;
        free(c);
    }
    pthread_mutex_destroy(&q->chunks_lock);
    if (pool.owner == q)
        pool.owner = NULL;
    free(q);
}

static void producer_prepare(void *qv, size_t n)
{
    floor_list *q = qv;
    floor_chunk *c = malloc(sizeof(*c) + (n ? n : 1) * sizeof(floor_node));
    if (c == NULL) {
        pool.owner = NULL;
        return;
    }
    /* touch the pool as a caller would have filled its nodes */
    for (size_t i = 0; i < n; i++)
        c->nodes[i].next = NULL;
    pthread_mutex_lock(&q->chunks_lock);
    c->next = q->chunks;
    q->chunks = c;
    pthread_mutex_unlock(&q->chunks_lock);
    pool.owner = q;
    pool.next = c->nodes;
    pool.left = n;
}

static int post_at(void *qv, const dq_msg *m, int64_t when, dq_token *tok)
{
    floor_list *q = qv;
    (void)m;
    (void)when;
    if (pool.owner != q || pool.left == 0)
        return -ENOMEM;
    floor_node *n = pool.next++;
    pool.left--;
    /* relaxed first read: the CAS validates it */
    floor_node *old = atomic_load_explicit(&q->top, memory_order_relaxed);
    do {
        n->next = old;
        /* release publishes n->next to whoever takes the list */
    } while (!atomic_compare_exchange_weak_explicit(
        &q->top, &old, n, memory_order_release, memory_order_relaxed));
    if (tok)
        *tok = 0;
    return 0;
}

const bench_contender bench_floor = {
    .name = "floor",
    .design = "bare CAS push of a preallocated node (llist_add), nothing else",
    .caps = 0,
    .create = create,
    .destroy = destroy,
    .producer_prepare = producer_prepare,
    .post_at = post_at,
};
