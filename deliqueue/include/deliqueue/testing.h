/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test hooks, present only in the //deliqueue:deliqueue_testing builds
 * (compiled with DQ_TEST_HOOKS); release builds have none of this.  They
 * reach into the library's internals: the trace sink and the node pool's
 * slow paths and failures.  What a user's tests need (a manual clock,
 * stepping a looper) is in the public API: dq_clock_create_manual,
 * dq_run_until_idle, dq_fast_forward.
 */
#ifndef DELIQUEUE_TESTING_H
#define DELIQUEUE_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#ifndef DQ_TEST_HOOKS
#error "deliqueue/testing.h needs the //deliqueue:deliqueue_testing build"
#endif

#ifdef __cplusplus
extern "C" {
#endif

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
