/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <time.h>

#include "clock.h"
#include "wait.h"

#ifndef DQ_WAIT_PTHREAD
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    return ts;
}

#ifndef DQ_WAIT_PTHREAD

int dq_event_init(dq_event *e)
{
    atomic_init(&e->count, 0);
    return 0;
}

void dq_event_fini(dq_event *e)
{
    (void)e;
}

void dq_event_wait(dq_event *e, uint32_t seen, int64_t deadline)
{
    struct timespec ts, *tsp = NULL;
    if (deadline != INT64_MAX) {
        if (deadline <= dq_clock_real())
            return;
        ts = to_timespec(deadline);
        tsp = &ts;
    }
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline; EINTR,
       EAGAIN (count moved) and ETIMEDOUT all just return to the caller,
       which re-checks its condition. */
    (void)syscall(SYS_futex, &e->count, FUTEX_WAIT_BITSET_PRIVATE, seen, tsp, NULL,
                  FUTEX_BITSET_MATCH_ANY);
}

void dq_event_signal(dq_event *e)
{
    /* release: pairs with dq_event_read's acquire in the sleeper */
    atomic_fetch_add_explicit(&e->count, 1, memory_order_release);
    (void)syscall(SYS_futex, &e->count, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#else /* DQ_WAIT_PTHREAD */

int dq_event_init(dq_event *e)
{
    atomic_init(&e->count, 0);
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -ENOMEM;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int err = pthread_cond_init(&e->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (err != 0)
        return -err;
    if ((err = pthread_mutex_init(&e->lock, NULL)) != 0) {
        pthread_cond_destroy(&e->cond);
        return -err;
    }
    return 0;
}

void dq_event_fini(dq_event *e)
{
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
}

void dq_event_wait(dq_event *e, uint32_t seen, int64_t deadline)
{
    struct timespec ts = to_timespec(deadline);
    pthread_mutex_lock(&e->lock);
    /* the bump happens under the lock, so this check cannot miss it */
    /* relaxed: the lock orders it after any bump made under it */
    while (atomic_load_explicit(&e->count, memory_order_relaxed) == seen) {
        int err = deadline == INT64_MAX
                      ? pthread_cond_wait(&e->cond, &e->lock)
                      : pthread_cond_timedwait(&e->cond, &e->lock, &ts);
        if (err == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&e->lock);
}

void dq_event_signal(dq_event *e)
{
    pthread_mutex_lock(&e->lock);
    /* release: pairs with dq_event_read's acquire, as the futex bump */
    atomic_fetch_add_explicit(&e->count, 1, memory_order_release);
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

#endif
