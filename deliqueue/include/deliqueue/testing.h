/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test hooks, present only in the //deliqueue:deliqueue_testing build
 * (compiled with DQ_TEST_CLOCK); release builds have none of this.
 *
 * The manual clock makes timing semantics deterministic: while it is on,
 * dq_now() returns the manual time, and blocking consumer calls re-check it
 * at least every millisecond of real time (so a test that advances it from
 * another thread unblocks them).  Process-wide; any thread.
 */
#ifndef DELIQUEUE_TESTING_H
#define DELIQUEUE_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#ifndef DQ_TEST_CLOCK
#error "deliqueue/testing.h needs the //deliqueue:deliqueue_testing build"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Switch dq_now() to a manual clock reading now_ns (>= 0). */
void dq_test_clock_set(int64_t now_ns);
/* Advance the manual clock (no-op with a negative delta). */
void dq_test_clock_advance(int64_t delta_ns);
/* Back to CLOCK_MONOTONIC. */
void dq_test_clock_real(void);

/* Write trace events to fd instead of tracefs trace_marker (the fd stays
   the caller's), and report the next failure to write on stderr again.
   0, or -EBADF for a negative fd. */
int dq_test_trace_to_fd(int fd);

/* Points in the node pool's slow paths where a test may stall a thread,
   to show that no other thread's post waits for it. */
enum {
    DQ_TEST_POOL_GROW = 1,  /* a chunk's index taken, the chunk not yet published */
    DQ_TEST_POOL_PUBLISH,   /* a chunk's nodes published, its free-map words not yet */
    DQ_TEST_POOL_REGISTER,  /* a thread's first post: its registry slot taken */
    DQ_TEST_POOL_STATS,     /* dq_pool_stats reading a live thread's cache */
    DQ_TEST_POOL_SLOT_PAGE, /* a thread's first post: a new page of registry
                               slots made, the list's head read, the page
                               not yet pushed */
};
/* Call fn(point) at each of those points, on the thread there; NULL: none. */
void dq_test_pool_hook(void (*fn)(int point));

/* Steps of the node pool that a test may make fail as if out of memory. */
enum {
    DQ_TEST_POOL_MAP_SLAB = 1, /* mapping a new slab of chunks (mmap) */
    DQ_TEST_POOL_SET_KEY,      /* a thread's first post: setting its cache's
                                  pthread key (pthread_setspecific) */
};
/* Before each of those steps call fn(step), on the thread there; the step
   fails if it returns true.  NULL: none fails. */
void dq_test_pool_fault(bool (*fn)(int step));

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_TESTING_H */
