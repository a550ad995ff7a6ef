/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor below both sides (fd.h): a queue's fd state and its table of
 * listeners, which any thread edits (any_fd.c) and the consumer reads
 * (looper_fd.c), and the eventfd that wakes a consumer sleeping in epoll
 * (dq_fd_signal, for core.c's wake).  Calls nothing above it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fd.h"

#ifdef DQ_FD_SUPPORTED

#include <sys/eventfd.h>

bool dq_fd_signal(dq_queue *q)
{
    /* acquire: pairs with the publishing CAS in dq_fd_state_get */
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    /* relaxed: see dq_looper_fd_mark_sleep (fd.h) */
    if (fs == NULL || !atomic_load_explicit(&fs->epoll_sleep, memory_order_relaxed))
        return false;
    /* Each write is an edge (DQ_FD_WAKE_EVENTS); the counter is never
       read, and would take centuries of writes to fill. */
    uint64_t one = 1;
    ssize_t w = write(fs->wake_fd, &one, sizeof(one));
    (void)w;
    return true;
}

static void fd_state_destroy(dq_fd_state *fs)
{
    if (fs->epfd >= 0)
        close(fs->epfd);
    if (fs->wake_fd >= 0)
        close(fs->wake_fd);
    if (fs->backend_fd >= 0)
        close(fs->backend_fd);
    if (fs->timer_fd >= 0)
        close(fs->timer_fd);
    pthread_mutex_destroy(&fs->lock);
    free(fs->entries);
    free(fs);
}

dq_fd_state *dq_fd_state_get(dq_queue *q, int *err)
{
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    if (fs != NULL)
        return fs;
    fs = (dq_fd_state *)calloc(1, sizeof(*fs));
    if (fs == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    fs->epfd = fs->wake_fd = fs->backend_fd = fs->timer_fd = -1;
    if (pthread_mutex_init(&fs->lock, NULL) != 0) {
        free(fs);
        *err = -ENOMEM;
        return NULL;
    }
    fs->next_serial = DQ_FD_WAKE_DATA + 1;
    fs->timer_deadline = INT64_MAX;
    fs->polled_at = INT64_MIN;
    atomic_init(&fs->gen, 0);
    atomic_init(&fs->epoll_sleep, false);
    fs->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    fs->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = DQ_FD_WAKE_EVENTS,
                              .data = { .u64 = DQ_FD_WAKE_DATA } };
    if (fs->wake_fd < 0 || fs->epfd < 0 ||
        epoll_ctl(fs->epfd, EPOLL_CTL_ADD, fs->wake_fd, &ev) != 0) {
        *err = -errno;
        fd_state_destroy(fs);
        return NULL;
    }
    dq_fd_state *none = NULL;
    /* release: the state is complete before any thread can reach it;
       acquire on failure: we use the winner's state */
    if (!atomic_compare_exchange_strong_explicit(
            &q->fd_state, &none, fs, memory_order_acq_rel, memory_order_acquire)) {
        fd_state_destroy(fs);
        return none;
    }
    return fs;
}

void dq_fd_free(dq_queue *q)
{
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    if (fs != NULL)
        fd_state_destroy(fs);
    atomic_store_explicit(&q->fd_state, NULL, memory_order_relaxed);
}

void dq_fd_drop_all(dq_queue *q)
{
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    if (fs == NULL)
        return;
    pthread_mutex_lock(&fs->lock);
    fs->dropped = true;
    fs->count = 0;
    /* relaxed: read as a hint by the consumer, which then takes the lock */
    atomic_fetch_add_explicit(&fs->gen, 1, memory_order_relaxed);
    pthread_mutex_unlock(&fs->lock);
}

/* Under fs->lock. */
dq_fd_entry *dq_fd_find_locked(dq_fd_state *fs, int fd)
{
    for (size_t i = 0; i < fs->count; i++)
        if (fs->entries[i].fd == fd)
            return &fs->entries[i];
    return NULL;
}

dq_fd_entry *dq_fd_find_serial_locked(dq_fd_state *fs, uint64_t serial)
{
    for (size_t i = 0; i < fs->count; i++)
        if (fs->entries[i].serial == serial)
            return &fs->entries[i];
    return NULL;
}

uint32_t dq_fd_epoll_events(uint32_t events)
{
    return ((events & DQ_EVENT_INPUT) ? (uint32_t)EPOLLIN : 0) |
           ((events & DQ_EVENT_OUTPUT) ? (uint32_t)EPOLLOUT : 0);
}

/* Under fs->lock: forget e and take its fd out of the epoll set.  The
   DEL fails when the fd was closed (EBADF) or now names another file
   (ENOENT): then the closed file may still be in the set, kept alive by a
   dup elsewhere, and only a new set gets rid of it. */
void dq_fd_remove_locked(dq_fd_state *fs, dq_fd_entry *e)
{
    if (epoll_ctl(fs->epfd, EPOLL_CTL_DEL, e->fd, NULL) != 0)
        fs->rebuild_wanted = true;
    *e = fs->entries[--fs->count];
    /* relaxed: a hint for the consumer, which then takes the lock */
    atomic_fetch_add_explicit(&fs->gen, 1, memory_order_relaxed);
}

#else /* !DQ_FD_SUPPORTED: no fd state is ever made */

bool dq_fd_signal(dq_queue *q)
{
    (void)q;
    return false;
}
void dq_fd_free(dq_queue *q)
{
    (void)q;
}
void dq_fd_drop_all(dq_queue *q)
{
    (void)q;
}

#endif
