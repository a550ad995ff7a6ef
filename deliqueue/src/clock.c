/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <deliqueue/deliqueue.h>

#include "atomic.h"
#include "clock.h"

int64_t dq_clock_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t dq_now(void)
{
    return dq_clock_real();
}

dq_clock *dq_clock_create_manual(int64_t start)
{
    if (start < 0) {
        errno = EINVAL;
        return NULL;
    }
    dq_clock *c = (dq_clock *)calloc(1, sizeof(*c));
    if (c == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    atomic_init(&c->now, start);
    atomic_init(&c->refs, 1);
    return c;
}

static void clock_unhold(dq_clock *c)
{
    /* acq_rel: the last holder frees the clock after every other holder's
       use of it (each one's release, our acquire) */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c->queues);
    free(c);
}

void dq_clock_destroy(dq_clock *c)
{
    if (c != NULL)
        clock_unhold(c);
}

int64_t dq_clock_now(const dq_clock *c)
{
    return dq_clock_time(c);
}

int64_t dq_clock_add(dq_clock *c, int64_t ns)
{
    /* relaxed: the CAS below validates it */
    int64_t now = atomic_load_explicit(&c->now, memory_order_relaxed);
    for (;;) {
        int64_t next = now > INT64_MAX - ns ? INT64_MAX : now + ns;
        /* seq_cst: the first half of the Dekker pair with looper_sleep */
        if (atomic_compare_exchange_weak_explicit(
                &c->now, &now, next, memory_order_seq_cst, memory_order_relaxed))
            return next;
    }
}

int64_t dq_clock_raise(dq_clock *c, int64_t target)
{
    /* relaxed: the CAS below validates it */
    int64_t now = atomic_load_explicit(&c->now, memory_order_relaxed);
    /* seq_cst: as dq_clock_add */
    while (now < target && !atomic_compare_exchange_weak_explicit(&c->now, &now, target,
                                                                  memory_order_seq_cst,
                                                                  memory_order_relaxed))
        ;
    return now < target ? target : now;
}

int dq_clock_attach(dq_clock *c, dq_queue *q)
{
    pthread_mutex_lock(&c->lock);
    if (c->count == c->capacity) {
        size_t cap = c->capacity ? 2 * c->capacity : 4;
        dq_queue **grown = (dq_queue **)realloc(c->queues, cap * sizeof(*grown));
        if (grown == NULL) {
            pthread_mutex_unlock(&c->lock);
            return -ENOMEM;
        }
        c->queues = grown;
        c->capacity = cap;
    }
    c->queues[c->count++] = q;
    pthread_mutex_unlock(&c->lock);
    /* relaxed: the caller holds a hold already (its dq_options came from
       a live clock) */
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return 0;
}

void dq_clock_detach(dq_clock *c, dq_queue *q)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->count; i++) {
        if (c->queues[i] == q) {
            c->queues[i] = c->queues[--c->count];
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    clock_unhold(c);
}
