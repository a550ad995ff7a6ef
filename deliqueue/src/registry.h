/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A registry: the live queues' cores, for dq_pool_stats to count.  An
 * intrusive doubly linked list under a mutex, changed only by a queue's
 * create and teardown, never by a post; a reader walks it with the lock
 * held, so a member it meets stays alive until it unlocks.  (The threads'
 * node caches have a lock-free registry of their own, pool.c, as a
 * thread's first post registers its cache.)
 */
#ifndef DELIQUEUE_SRC_REGISTRY_H
#define DELIQUEUE_SRC_REGISTRY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dq_reg_link {
    struct dq_reg_link *prev, *next;
} dq_reg_link;

typedef struct dq_registry {
    pthread_mutex_t lock;
    dq_reg_link *head;
    uint64_t count;
} dq_registry;

#define DQ_REGISTRY_INIT                   \
    {                                      \
        PTHREAD_MUTEX_INITIALIZER, NULL, 0 \
    }

/* The member that holds link l (a dq_reg_link field named member). */
#define dq_reg_entry(l, type, member) ((type *)((char *)(l)-offsetof(type, member)))

static inline void dq_registry_add(dq_registry *r, dq_reg_link *l)
{
    pthread_mutex_lock(&r->lock);
    l->prev = NULL;
    l->next = r->head;
    if (r->head != NULL)
        r->head->prev = l;
    r->head = l;
    r->count++;
    pthread_mutex_unlock(&r->lock);
}

static inline void dq_registry_remove(dq_registry *r, dq_reg_link *l)
{
    pthread_mutex_lock(&r->lock);
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        r->head = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    r->count--;
    pthread_mutex_unlock(&r->lock);
}

#endif /* DELIQUEUE_SRC_REGISTRY_H */
