/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocking without spinning: the consumer sleeps on a 32-bit event count.
 * A waker bumps the count and wakes; a sleeper passes the value it read
 * before its last check, so a wake between that read and the sleep makes
 * the sleep return at once (no lost wake-up).
 *
 * Linux: futex with an absolute CLOCK_MONOTONIC deadline.  Elsewhere, or
 * with DQ_WAIT_PTHREAD: a mutex and a CLOCK_MONOTONIC condition variable.
 */
#ifndef DELIQUEUE_SRC_WAIT_H
#define DELIQUEUE_SRC_WAIT_H

#include <stdint.h>

#include "atomic.h"

#if !defined(__linux__) && !defined(DQ_WAIT_PTHREAD)
#define DQ_WAIT_PTHREAD 1
#endif

#ifdef DQ_WAIT_PTHREAD
#include <pthread.h>
#endif

typedef struct dq_event {
    _Atomic(uint32_t) count;
#ifdef DQ_WAIT_PTHREAD
    pthread_mutex_t lock;
    pthread_cond_t cond;
#endif
} dq_event;

int dq_event_init(dq_event *e);
void dq_event_fini(dq_event *e);
/* Current count, to pass to dq_event_wait.  acquire: whatever the waker did
   before its bump is visible once we see the bumped value. */
static inline uint32_t dq_event_read(dq_event *e)
{
    return atomic_load_explicit(&e->count, memory_order_acquire);
}
/* Sleep while the count is still seen; returns at the deadline (absolute
   monotonic ns, INT64_MAX for none), on a bump, or spuriously. */
void dq_event_wait(dq_event *e, uint32_t seen, int64_t deadline);
/* Bump and wake the sleeper, if any. */
void dq_event_signal(dq_event *e);

#endif /* DELIQUEUE_SRC_WAIT_H */
