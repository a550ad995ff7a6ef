/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The consumer's side of fd events (looper_fd.c), called by the looper
 * (looper.c) only: its per-step test, its epoll wait and polls, the
 * backend fd.  Consumer only.
 */
#ifndef DELIQUEUE_SRC_LOOPER_FD_H
#define DELIQUEUE_SRC_LOOPER_FD_H

#include <stdbool.h>
#include <stdint.h>

#include "fd.h"

/* The consumer's per-step test: whether q has fd machinery to run.  One
   load while no fd was ever watched.  Acquire: pairs with the release
   that published the state (dq_fd_state_get); a state seen is complete.
   fd_changed is set only after the state exists; relaxed, as a hint: the
   step that sees it takes the lock. */
static inline bool dq_looper_fd_on(dq_queue *q)
{
#ifdef DQ_FD_SUPPORTED
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    return __builtin_expect(fs != NULL, 0) &&
           (fs->active || atomic_load_explicit(&q->fd_changed, memory_order_relaxed));
#else
    (void)q;
    return false;
#endif
}

/* Which wait the sleep word about to be stored goes with (consumer,
   before each store of a sleeping word). */
static inline void dq_looper_fd_mark_sleep(dq_queue *q, bool epoll)
{
#ifdef DQ_FD_SUPPORTED
    /* acquire: pairs with the publishing CAS in dq_fd_state_get; the
       pointer may have been published since the consumer last read it */
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    /* relaxed: published by the seq_cst (release) store of the sleep word
       that follows; a waker reads it after its CAS (acquire) took that
       word, so it sees this value or a later sleep's, and a later sleep
       stores its word after its own mark (see DESIGN.md) */
    if (fs != NULL)
        atomic_store_explicit(&fs->epoll_sleep, epoll, memory_order_relaxed);
#else
    (void)q, (void)epoll;
#endif
}

/* One step of the consumer with fds watched.  have_due: the step is
   about to deliver a message, due at due.  Runs
   listeners when fairness says so (DESIGN.md); returns how many ran, and
   the caller then starts its step again. */
int dq_looper_fd_step(dq_queue *q, int64_t now, bool have_due, int64_t due);
/* Nothing is due and the caller will not block (dq_try_next): poll the
   fds once and run what is ready; returns how many listeners ran. */
int dq_looper_fd_poll(dq_queue *q);
/* Whether the consumer waits in epoll rather than on the futex. */
bool dq_looper_fd_waits(dq_queue *q);
/* Whether the host loop waits for us (dq_backend_fd was called). */
bool dq_looper_fd_backend(dq_queue *q);
/* The blocking wait in epoll, after the sleep word is published.  The
   events it returns are dispatched by the next dq_looper_fd_step. */
void dq_looper_fd_wait(dq_queue *q, int64_t deadline);
/* Backend mode, nothing due, the sleep word published: arm the timer
   for deadline and leave the word published for the host loop's wait. */
void dq_looper_fd_park(dq_queue *q, int64_t deadline);

#endif /* DELIQUEUE_SRC_LOOPER_FD_H */
