/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: the looper's identity (dq_current, dq_is_consumer, and
 * dq_is_invoke for the messages dq_invoke and dq_call post) and waking
 * the consumer (dq_wake).  Nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>

#include "core.h"
#include "invoke.h"

/* ---- identity ----------------------------------------------------------- */

dq_queue *dq_current(void)
{
    return dq_consumer_current();
}

bool dq_is_consumer(dq_queue *q)
{
    return q != NULL && dq_looper_is_self(q);
}

bool dq_is_invoke(const dq_msg *m)
{
    return m != NULL && m->target == &dq_invoke_mark;
}

/* ---- waking ------------------------------------------------------------- */

int dq_wake(dq_queue *q)
{
    if (q == NULL)
        return -EINVAL;
    /* relaxed: advisory, as dq_add_idle_handler's; a wake that races a
       quit is harmless */
    if (atomic_load_explicit(&q->top, memory_order_relaxed) & DQ_TOP_QUIT)
        return -ESHUTDOWN;
    /* seq_cst exchange, then dq_wake_consumer's seq_cst load of the sleep
       word: a Dekker pair with a wakeable wait (looper_sleep publishes its
       word, then re-reads the flag, both seq_cst), so either the consumer
       sees the flag and does not sleep, or we see its word and wake it.
       Release, toward the consumer's acquire exchange that takes the
       flag: what the caller did before is visible after the wait returns.
       A flag already set was set by a wake that did (or is doing) this
       check itself: coalesced, one RMW. */
    if (atomic_exchange_explicit(&q->woken, 1, memory_order_seq_cst) == 0)
        dq_wake_consumer(q);
    return 0;
}
