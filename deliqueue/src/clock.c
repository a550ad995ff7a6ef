/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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

#ifdef DQ_TEST_CLOCK
#include <deliqueue/testing.h>

/* -1: real clock.  relaxed: the manual time is a value, not a publication;
   tests order their own steps. */
static _Atomic(int64_t) manual_now = -1;

void dq_test_clock_set(int64_t now_ns)
{
    atomic_store_explicit(&manual_now, now_ns < 0 ? 0 : now_ns, memory_order_relaxed);
}

void dq_test_clock_advance(int64_t delta_ns)
{
    if (delta_ns <= 0)
        return;
    /* relaxed, and the CAS too: see manual_now */
    int64_t now = atomic_load_explicit(&manual_now, memory_order_relaxed);
    while (now >= 0) {
        int64_t next = now > INT64_MAX - delta_ns ? INT64_MAX : now + delta_ns;
        if (atomic_compare_exchange_weak_explicit(
                &manual_now, &now, next, memory_order_relaxed, memory_order_relaxed))
            return;
    }
}

void dq_test_clock_real(void)
{
    atomic_store_explicit(&manual_now, -1, memory_order_relaxed);
}

int dq_clock_is_manual(void)
{
    /* relaxed: see manual_now */
    return atomic_load_explicit(&manual_now, memory_order_relaxed) >= 0;
}

int64_t dq_now(void)
{
    /* relaxed: see manual_now */
    int64_t now = atomic_load_explicit(&manual_now, memory_order_relaxed);
    return now >= 0 ? now : dq_clock_real();
}

#else

int dq_clock_is_manual(void)
{
    return 0;
}

int64_t dq_now(void)
{
    return dq_clock_real();
}

#endif
