/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: moving a manual clock, and a queue's time (clock.h).
 */
#include <errno.h>

#include <deliqueue/deliqueue.h>

#include "clock.h"
#include "core.h"
#include "queue.h"

int dq_clock_advance(dq_clock *c, int64_t ns)
{
    if (c == NULL || ns < 0)
        return -EINVAL;
    dq_clock_wake_due(c, dq_clock_add(c, ns));
    return 0;
}

int64_t dq_queue_now(dq_queue *q)
{
    return q == NULL ? -EINVAL : dq_queue_time(q);
}
