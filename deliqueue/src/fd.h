/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File-descriptor events: the listener table any thread edits
 * (any_fd.c) and the consumer's epoll set, dispatch and backend fd
 * (looper_fd.c).  DESIGN.md, "File descriptors", has the protocol.
 *
 * A queue that never watches an fd and never hands out its backend fd
 * has no dq_fd_state (q->fd_state stays NULL): its consumer pays one
 * load per step and keeps the futex wait.  The first dq_add_fd_listener
 * or dq_backend_fd creates the state: an eventfd (the consumer's wake in
 * epoll), the epoll set of watched fds with that eventfd in it, and the
 * table of listeners.
 *
 * Who touches what
 *   field                           written by                    read by
 *   lock, entries, count, serial,   any thread, under lock        any thread, under lock
 *   dropped, rebuild_wanted
 *   epfd                            creator; then the consumer    any thread under lock; the
 *                                   (rebuild), under lock         consumer without it
 *   wake_fd                         creator                       any thread (wake_sleeper)
 *   gen                             any thread, under lock        the consumer (relaxed hint)
 *   everything below "looper only"  the consumer                  the consumer
 *
 * Linux only: elsewhere the calls answer -ENOSYS and no state is made.
 */
#ifndef DELIQUEUE_SRC_FD_H
#define DELIQUEUE_SRC_FD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#include "queue.h"

#if defined(__linux__)
#define DQ_FD_SUPPORTED 1
#include <sys/epoll.h>
#endif

#define DQ_EVENT_ALL (DQ_EVENT_INPUT | DQ_EVENT_OUTPUT | DQ_EVENT_ERROR)

/* Ready events taken from the epoll set in one poll: a poll reports at
   most this many fds, and level-triggered epoll rotates its ready list,
   so with more ready fds the next poll reports the others. */
#define DQ_FD_BATCH 64

/* epoll data of the queue's own eventfd; listeners' data are their
   serials, which start at 1. */
#define DQ_FD_WAKE_DATA   0
/* The eventfd is edge-triggered: every write queues an event, which the
   wait consumes, so the consumer never has to read (drain) it. */
#define DQ_FD_WAKE_EVENTS (EPOLLIN | EPOLLET)

typedef struct dq_fd_state dq_fd_state;

#ifdef DQ_FD_SUPPORTED
typedef struct dq_fd_entry {
    int fd;
    uint32_t events; /* DQ_EVENT_* watched (ERROR always reported) */
    dq_fd_listener fn;
    void *ctx;
    uint64_t serial; /* this registration's epoll data; never reused */
} dq_fd_entry;

/* One ready listener as the consumer took it from a poll. */
typedef struct dq_fd_ready {
    int fd;
    uint32_t events; /* what occurred, as DQ_EVENT_* */
    uint32_t watched;
    dq_fd_listener fn;
    void *ctx;
    uint64_t serial;
} dq_fd_ready;

struct dq_fd_state {
    pthread_mutex_t lock;
    dq_fd_entry *entries; /* unordered; one per fd */
    size_t count, capacity;
    uint64_t next_serial;
    bool dropped;        /* teardown: listeners gone, adds refused */
    bool rebuild_wanted; /* a closed fd may linger in the epoll set */
    int epfd;            /* the watched set plus wake_fd */
    int wake_fd;         /* eventfd */
    /* bumped (relaxed, under lock) by every change to entries: the
       consumer re-checks a listener it took from a poll only when this
       moved since */
    _Atomic uint64_t gen;
    /* The consumer's current sleep is in epoll (or parked under a host
       loop), not on the futex: stored by the consumer before the sleep
       word it goes with, read by a waker after the CAS that took that
       word, which then writes the eventfd instead of waking the futex. */
    _Atomic bool epoll_sleep;

    /* -- looper only below -- */
    bool active;            /* wait in epoll: fds watched or backend in use */
    bool parked;            /* dq_try_next answered -EAGAIN in backend
                                     mode: the sleep word is still published */
    int backend_fd;         /* epoll of {epfd, timer_fd}, or -1 */
    int timer_fd;           /* timerfd at the next due time, or -1 */
    int64_t timer_deadline; /* what timer_fd is armed to, INT64_MAX: disarmed */
    int64_t polled_at;      /* dq_now() read before the last poll began */
    uint32_t delivered_since_poll;
    int pending; /* events of a blocking wait, to dispatch */
    struct epoll_event events[DQ_FD_BATCH];
    dq_fd_ready ready[DQ_FD_BATCH];
};
#endif

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

/* -- any thread (any_fd.c) -- */
/* Wake a consumer that sleeps in epoll: write the eventfd and return
   true; false when its sleep is on the futex (or q watches no fd), for
   the caller to wake that.  Called by every wake of a sleep word. */
bool dq_fd_signal(dq_queue *q);
/* The state, created on first use: NULL with *err set on failure. */
dq_fd_state *dq_fd_state_get(dq_queue *q, int *err);
/* Free the state and close its fds (the last dq_unref). */
void dq_fd_free(dq_queue *q);
/* Teardown: forget every listener without calling it; adds are refused
   from now on. */
void dq_fd_drop_all(dq_queue *q);

#ifdef DQ_FD_SUPPORTED
/* The table, under fs->lock (any_fd.c). */
dq_fd_entry *dq_fd_find_locked(dq_fd_state *fs, int fd);
dq_fd_entry *dq_fd_find_serial_locked(dq_fd_state *fs, uint64_t serial);
void dq_fd_remove_locked(dq_fd_state *fs, dq_fd_entry *e);
/* DQ_EVENT_* watched as epoll events (errors and hang-ups need no bit). */
uint32_t dq_fd_epoll_events(uint32_t events);
#endif

/* -- consumer only (looper_fd.c) -- */
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

#endif /* DELIQUEUE_SRC_FD_H */
