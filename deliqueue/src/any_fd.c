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
    fs = calloc(1, sizeof(*fs));
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
                              .data.u64 = DQ_FD_WAKE_DATA };
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
                              .data.u64 = serial };
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
            dq_fd_entry *a = realloc(fs->entries, cap * sizeof(*a));
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
