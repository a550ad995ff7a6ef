/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: adding and removing fd listeners, and the eventfd wake.
 *
 * The table of listeners is guarded by one mutex: a registration is rare
 * next to a post, and Android's Looper takes its lock for it too.  The
 * epoll set is changed here, under that lock, at once (epoll_ctl is
 * thread-safe and reaches a wait in progress), so an error such as a
 * regular file's -EPERM is the caller's answer.  Only the consumer
 * replaces the set (the rebuild, looper_fd.c), also under the lock, so a
 * thread here never holds a closed epoll fd.  After each change this
 * thread sets q->fd_changed and wakes the consumer: a consumer still on
 * the futex (no fd watched before) must move to epoll, and one in epoll
 * has a new fd or a rebuild to see to.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "fd.h"

#ifdef DQ_FD_SUPPORTED

/* The table changed: the consumer must see it before it next waits. */
static void fd_changed(dq_queue *q)
{
    /* seq_cst: with dq_wake_consumer's seq_cst load of the sleep word,
       one half of a Dekker pair whose other is the consumer's store of
       its sleep word and re-read of fd_changed (looper_has_news): either
       we see it asleep and wake it, or it sees the flag.  An exchange, not
       a store, for QEMU's sake, as looper_publish_sleep explains */
    (void)atomic_exchange_explicit(&q->fd_changed, 1, memory_order_seq_cst);
    dq_wake_consumer(q);
}

static bool quitting(dq_queue *q)
{
    /* relaxed: advisory, as for idle handlers; a listener added while
       the quit lands is dropped by the teardown (dq_fd_drop_all, under
       the lock that this add also takes) */
    return (atomic_load_explicit(&q->top, memory_order_relaxed) & DQ_TOP_QUIT) ||
           atomic_load_explicit(&q->quit_mode, memory_order_relaxed) != DQ_RUNNING;
}

static int fd_add_locked(dq_fd_state *fs, int fd, uint32_t events, dq_fd_listener fn,
                         void *ctx)
{
    dq_fd_entry *e = dq_fd_find_locked(fs, fd);
    uint64_t serial = fs->next_serial;
    struct epoll_event ev = { .events = dq_fd_epoll_events(events),
                              .data = { .u64 = serial } };
    if (e != NULL) {
        if (epoll_ctl(fs->epfd, EPOLL_CTL_MOD, fd, &ev) != 0) {
            /* ENOENT: the watched fd was closed and its number now names
               a file the set has not seen.  Add that one; the old file
               may linger (a dup keeps it open): rebuild. */
            if (errno != ENOENT || epoll_ctl(fs->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
                return -errno;
            fs->rebuild_wanted = true;
        }
    } else {
        if (fs->count == fs->capacity) {
            size_t cap = fs->capacity ? fs->capacity * 2 : 8;
            dq_fd_entry *a = (dq_fd_entry *)realloc(fs->entries, cap * sizeof(*a));
            if (a == NULL)
                return -ENOMEM;
            fs->entries = a;
            fs->capacity = cap;
        }
        if (epoll_ctl(fs->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
            return -errno;
        e = &fs->entries[fs->count++];
    }
    *e = (dq_fd_entry){
        .fd = fd, .events = events, .fn = fn, .ctx = ctx, .serial = serial
    };
    fs->next_serial++;
    /* relaxed: a hint for the consumer, which then takes the lock */
    atomic_fetch_add_explicit(&fs->gen, 1, memory_order_relaxed);
    return 0;
}

int dq_add_fd_listener(dq_queue *q, int fd, uint32_t events, dq_fd_listener fn,
                       void *ctx)
{
    if (q == NULL || fn == NULL || fd < 0 || (events & ~DQ_EVENT_ALL) != 0)
        return -EINVAL;
    if (fcntl(fd, F_GETFD) < 0)
        return -EBADF;
    if (quitting(q))
        return -ESHUTDOWN;
    if (events == 0) {
        int err = dq_remove_fd_listener(q, fd);
        return err == -ENOENT ? 0 : err;
    }
    int err = 0;
    dq_fd_state *fs = dq_fd_state_get(q, &err);
    if (fs == NULL)
        return err;
    pthread_mutex_lock(&fs->lock);
    err = fs->dropped ? -ESHUTDOWN : fd_add_locked(fs, fd, events, fn, ctx);
    pthread_mutex_unlock(&fs->lock);
    if (err == 0)
        fd_changed(q);
    return err;
}

int dq_remove_fd_listener(dq_queue *q, int fd)
{
    if (q == NULL || fd < 0)
        return -EINVAL;
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    if (fs == NULL)
        return -ENOENT;
    pthread_mutex_lock(&fs->lock);
    dq_fd_entry *e = dq_fd_find_locked(fs, fd);
    if (e != NULL)
        dq_fd_remove_locked(fs, e);
    pthread_mutex_unlock(&fs->lock);
    if (e == NULL)
        return -ENOENT;
    fd_changed(q);
    return 0;
}

#else /* !DQ_FD_SUPPORTED: no epoll; every call answers -ENOSYS */

int dq_add_fd_listener(dq_queue *q, int fd, uint32_t events, dq_fd_listener fn,
                       void *ctx)
{
    (void)ctx;
    if (q == NULL || fn == NULL || fd < 0 || (events & ~DQ_EVENT_ALL) != 0)
        return -EINVAL;
    return -ENOSYS;
}

int dq_remove_fd_listener(dq_queue *q, int fd)
{
    if (q == NULL || fd < 0)
        return -EINVAL;
    return -ENOSYS;
}

#endif
