/* SPDX-License-Identifier: Apache-2.0 */
/* Shared fixtures for the deliqueue unit tests: a queue on a manual
   clock whose discards are recorded, the clock's helpers, and message
   helpers. */
#ifndef DELIQUEUE_TEST_UTIL_H
#define DELIQUEUE_TEST_UTIL_H

#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue/testing.h>

#include "leak_check.h"

#define MAX_RECORDED 4096

typedef struct recorder {
    _Atomic size_t discards;
    int32_t
        what[MAX_RECORDED]; /* what of each discard, in order (single-threaded tests) */
    size_t dispatched;
} recorder;

static recorder rec;
static int target_a __attribute__((unused)), target_b __attribute__((unused));
static dq_queue *q;

/* The fixture's manual clock, reading FIXTURE_START when a test begins;
   q runs on it.  NULL outside the fixture. */
#define FIXTURE_START INT64_C(1000000)
static dq_clock *test_clock;
/* The clock recording_options() gives a queue: test_clock, or NULL
   (CLOCK_MONOTONIC) once the test has called fixture_real_time(). */
static dq_clock *options_clock;

static inline void record_discard(const dq_msg *m, void *ctx)
{
    recorder *r = ctx;
    size_t i = atomic_fetch_add(&r->discards, 1);
    if (i < MAX_RECORDED)
        r->what[i] = m->what;
}

static inline dq_options recording_options(void)
{
    dq_options o = { .on_discard = record_discard,
                     .ctx = &rec,
                     .clock = options_clock };
    return o;
}

static inline void fixture_setup(void)
{
    memset(&rec, 0, sizeof(rec));
    test_clock = dq_clock_create_manual(FIXTURE_START);
    cr_assert_not_null(test_clock);
    options_clock = test_clock;
    dq_options o = recording_options();
    q = dq_create(&o);
    cr_assert_not_null(q);
}

static inline void fixture_teardown(void)
{
    dq_unref(q);
    q = NULL;
    dq_clock_destroy(test_clock);
    test_clock = options_clock = NULL;
    leak_check();
}

/* For a test that measures real time: q becomes a fresh queue on
   CLOCK_MONOTONIC, its discards recorded in rec, and so does every queue
   made from recording_options() from here on.  Call it before anything
   uses q. */
static inline void fixture_real_time(void)
{
    options_clock = NULL;
    dq_unref(q);
    dq_options o = recording_options();
    q = dq_create(&o);
    cr_assert_not_null(q);
}

/* The fixture clock's time: q's time (dq_queue_now) while q is on it. */
static inline int64_t test_now(void)
{
    return dq_clock_now(test_clock);
}

/* Move the fixture clock forward by ns (>= 0), waking every consumer on
   it that the new time makes due.  Any thread. */
static inline void test_advance(int64_t ns)
{
    int err = dq_clock_advance(test_clock, ns);
    cr_assert_eq(err, 0, "dq_clock_advance(%lld): %d", (long long)ns, err);
}

/* Move the fixture clock forward to t (not before its time). */
static inline void test_advance_to(int64_t t)
{
    int64_t now = test_now();
    cr_assert_geq(t, now, "the clock cannot go back from %lld to %lld", (long long)now,
                  (long long)t);
    test_advance(t - now);
}

static inline dq_msg msg_what(const void *target, int32_t what)
{
    dq_msg m = { .target = target, .what = what };
    return m;
}

static inline int post_at(int32_t what, int64_t when)
{
    dq_msg m = msg_what(&target_a, what);
    return dq_post_at(q, &m, when, NULL);
}

/* The what of the next due message, or the error as a negative number
   below -1000000 so a test failure says which. */
static inline int32_t next_what(void)
{
    dq_msg out;
    int err = dq_try_next(q, &out);
    return err ? -1000000 + err : out.what;
}

/* A spinning start: arrive, then wait until *arrived reaches want, so
   the threads that meet here leave within a few instructions of each
   other (a blocking barrier wakes the first to arrive only after the last
   has gone).  Yields now and then for a party that is off the CPU. */
static inline void spin_start(_Atomic int *arrived, int want)
{
    atomic_fetch_add(arrived, 1);
    for (unsigned spin = 1; atomic_load(arrived) < want; spin++)
        if (spin % 1024 == 0)
            sched_yield();
}

/* A short wait after a spinning start.  The party that arrives last
   leaves first, by about one cache-line transfer: racing calls that must
   meet at every offset of each other's steps vary n over the rounds. */
static inline void spin_for(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++)
        ;
}

/* The monotonic clock in ns, whatever clock the test's queues run on:
   for a test's own time bounds. */
static inline int64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The pool index of the node a token names: its low DQ_INDEX_BITS bits,
   28 unless the library's build sets fewer (and exports them). */
#ifdef DQ_INDEX_BITS
#define TEST_INDEX_BITS DQ_INDEX_BITS
#else
#define TEST_INDEX_BITS 28
#endif
static inline uint32_t index_of(dq_token t)
{
    return (uint32_t)(t & ((UINT64_C(1) << TEST_INDEX_BITS) - 1));
}

#define NOTHING_DUE (-1000000 - EAGAIN)

#endif
