/* SPDX-License-Identifier: Apache-2.0 */
/*
 * File-descriptor events: the listener table and its state (core_fd.c,
 * below both sides), which any thread edits (any_fd.c) and the consumer
 * reads for its epoll set, dispatch and backend fd (looper_fd.c,
 * looper_fd.h).  DESIGN.md, "File descriptors", has the protocol.
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
 *   wake_fd                         creator                       any thread (dq_fd_signal)
 *   gen                             any thread, under lock        the consumer (relaxed hint)
 *   everything below "looper only"  the consumer                  the consumer
 *
 * Linux only: elsewhere the calls answer -ENOSYS and no state is made.
 */
#ifndef DELIQUEUE_SRC_FD_H
#define DELIQUEUE_SRC_FD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#include "atomic.h"
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
    _Atomic(uint64_t) gen;
    /* The consumer's current sleep is in epoll (or parked under a host
       loop), not on the futex: stored by the consumer before the sleep
       word it goes with, read by a waker after the CAS that took that
       word, which then writes the eventfd instead of waking the futex. */
    _Atomic(bool) epoll_sleep;

    /* -- looper only below -- */
    bool active;            /* wait in epoll: fds watched or backend in use */
    bool parked;            /* dq_try_next answered -EAGAIN in backend
                                     mode: the sleep word is still published */
    int backend_fd;         /* epoll of {epfd, timer_fd}, or -1 */
    int timer_fd;           /* timerfd at the next due time, or -1 */
    int64_t timer_deadline; /* what timer_fd is armed to, INT64_MAX: disarmed */
    int64_t polled_at;      /* q's time read before the last poll began */
    uint32_t delivered_since_poll;
    int pending; /* events of a blocking wait, to dispatch */
    struct epoll_event events[DQ_FD_BATCH];
    dq_fd_ready ready[DQ_FD_BATCH];
};
#endif

/* -- any thread (core_fd.c) -- */
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
/* The table, under fs->lock (core_fd.c). */
dq_fd_entry *dq_fd_find_locked(dq_fd_state *fs, int fd);
dq_fd_entry *dq_fd_find_serial_locked(dq_fd_state *fs, uint64_t serial);
void dq_fd_remove_locked(dq_fd_state *fs, dq_fd_entry *e);
/* DQ_EVENT_* watched as epoll events (errors and hang-ups need no bit). */
uint32_t dq_fd_epoll_events(uint32_t events);
#endif

#endif /* DELIQUEUE_SRC_FD_H */
