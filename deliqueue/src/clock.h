/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clocks.  dq_now() and a queue without a clock of its own read
 * CLOCK_MONOTONIC; a queue created with dq_options.clock reads that
 * manual clock instead, for its due times, deadlines and waits.
 *
 * A manual clock holds its time and the queues that use it.  Its time
 * only grows (dq_clock_advance, any_clock.c), by a seq_cst RMW: the
 * first half of a Dekker pair with a consumer that publishes its sleep
 * word and then re-reads the time (looper_sleep), so an advance either
 * sees the consumer asleep and wakes it, or the consumer sees the new
 * time and does not sleep.  Any thread.
 */
#ifndef DELIQUEUE_SRC_CLOCK_H
#define DELIQUEUE_SRC_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>
#include "atomic.h"

struct dq_clock {
    _Atomic(int64_t) now;
    /* the creator's hold until dq_clock_destroy, plus one per queue
       until its last dq_unref; the last one frees the clock */
    _Atomic(uint64_t) refs;
    pthread_mutex_t lock; /* guards queues, count and capacity */
    dq_queue **queues;    /* every queue on this clock, for the advance */
    size_t count, capacity;
};

/* Real monotonic time in ns. */
int64_t dq_clock_real(void);

/* c's time, for a reader that only needs a value: relaxed, since a
   clock's reads by one thread never go backwards (coherence), and what
   an advancing thread did before its advance reaches a consumer through
   the queue's own orderings (a post's push, the wake's futex). */
static inline int64_t dq_clock_manual_now(const dq_clock *c)
{
    return atomic_load_explicit(&c->now, memory_order_relaxed);
}

/* The time on a queue's clock c (NULL: CLOCK_MONOTONIC). */
static inline int64_t dq_clock_time(const dq_clock *c)
{
    return c != NULL ? dq_clock_manual_now(c) : dq_clock_real();
}

/* Move c's time forward by ns (>= 0, saturating), or up to target (no
   change if it is already there): seq_cst RMWs (see above).  Return the
   new time. */
int64_t dq_clock_add(dq_clock *c, int64_t ns);
int64_t dq_clock_raise(dq_clock *c, int64_t target);

/* Put q on c (dq_create): takes a hold on c.  0 or -ENOMEM. */
int dq_clock_attach(dq_clock *c, dq_queue *q);
/* Take q off c and drop its hold (q's last dq_unref): no advance touches
   q after this returns. */
void dq_clock_detach(dq_clock *c, dq_queue *q);

#endif /* DELIQUEUE_SRC_CLOCK_H */
