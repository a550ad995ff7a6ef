/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Consumer only: the epoll set's waits and polls, running listeners, the
 * rebuild, and the backend fd for host loops.
 *
 * Fairness (DESIGN.md, "File descriptors"): fds are polled, without
 * blocking, before the consumer delivers a message that fell due after
 * the last poll began (or when that poll is DQ_FD_POLL_INTERVAL_NS old),
 * and each poll runs every listener it found ready once before any
 * message is delivered.  Messages due before the poll began are
 * delivered without another poll.  So a ready fd waits behind no message
 * that fell due after it was ready, and a busy fd gets one call per poll
 * while every message due by then goes first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "core.h"
#include "looper_fd.h"

#ifdef DQ_FD_SUPPORTED

#include <sys/syscall.h>
#include <sys/timerfd.h>

/* A backlog of messages due before a ready fd delays it at most this
   long (on the queue's clock): then the fds are polled between two
   deliveries. */
#define DQ_FD_POLL_INTERVAL_NS 1000000
/* epoll data of the timer in the backend set */
#define DQ_FD_TIMER_DATA       1

static dq_fd_state *looper_fd_state(dq_queue *q)
{
    /* acquire: pairs with the publishing CAS in dq_fd_state_get.  The
       consumer may meet the pointer here first: an add from another
       thread publishes it at any moment, also between the step's
       dq_looper_fd_on and the sleep's dq_looper_fd_waits */
    return atomic_load_explicit(&q->fd_state, memory_order_acquire);
}

static uint32_t events_from_epoll(uint32_t e)
{
    return ((e & (EPOLLIN | EPOLLPRI)) ? DQ_EVENT_INPUT : 0) |
           ((e & EPOLLOUT) ? DQ_EVENT_OUTPUT : 0) |
           ((e & (EPOLLERR | EPOLLHUP)) ? DQ_EVENT_ERROR : 0);
}

/* ---- the rebuild -------------------------------------------------------- */

/* Under fs->lock.  A new epoll set with the wake eventfd and every
   listener, replacing the old one (in the backend set too).  This is
   the only way to drop a closed fd's file that a dup keeps open: epoll
   registers the file, a DEL needs an fd naming it, and there is none.
   A listener whose fd no longer takes an ADD (closed, or now naming a
   file epoll refuses) is dropped without a call: its file is gone.  If
   no new set can be made, the old one stays and the rebuild is retried
   at the next change. */
static void looper_fd_rebuild_locked(dq_fd_state *fs)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = DQ_FD_WAKE_EVENTS,
                              .data = { .u64 = DQ_FD_WAKE_DATA } };
    if (ep < 0)
        return;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fs->wake_fd, &ev) != 0) {
        close(ep);
        return;
    }
    for (size_t i = 0; i < fs->count;) {
        dq_fd_entry *e = &fs->entries[i];
        ev = (struct epoll_event){ .events = dq_fd_epoll_events(e->events),
                                   .data = { .u64 = e->serial } };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, e->fd, &ev) != 0) {
            *e = fs->entries[--fs->count];
            continue;
        }
        i++;
    }
    if (fs->backend_fd >= 0) {
        (void)epoll_ctl(fs->backend_fd, EPOLL_CTL_DEL, fs->epfd, NULL);
        ev = (struct epoll_event){ .events = EPOLLIN,
                                   .data = { .u64 = DQ_FD_WAKE_DATA } };
        (void)epoll_ctl(fs->backend_fd, EPOLL_CTL_ADD, ep, &ev);
    }
    close(fs->epfd);
    fs->epfd = ep;
    fs->rebuild_wanted = false;
    /* relaxed: a hint for this thread's own re-checks */
    atomic_fetch_add_explicit(&fs->gen, 1, memory_order_relaxed);
}

/* See what other threads changed: whether to wait in epoll, and a
   rebuild they asked for. */
static void looper_fd_refresh(dq_queue *q, dq_fd_state *fs)
{
    /* relaxed test first: a change is rare.  The exchange comes before
       the lock, so a change made after we read the table sets the flag
       again for the next step. */
    if (!atomic_load_explicit(&q->fd_changed, memory_order_relaxed))
        return;
    atomic_exchange_explicit(&q->fd_changed, 0, memory_order_seq_cst);
    pthread_mutex_lock(&fs->lock);
    if (fs->rebuild_wanted)
        looper_fd_rebuild_locked(fs);
    fs->active = fs->count > 0 || fs->backend_fd >= 0;
    pthread_mutex_unlock(&fs->lock);
}

/* ---- running listeners -------------------------------------------------- */

/* Turn n raw epoll events into listeners to run (fs->ready), under the
   lock, so each is the registration the event's serial names.  An event
   for no registration is a closed file lingering in the set: rebuild. */
static int looper_fd_take(dq_fd_state *fs, int n, uint64_t *gen)
{
    int k = 0;
    /* a wake alone (a post, an add): no listener, no lock */
    if (n == 1 && fs->events[0].data.u64 == DQ_FD_WAKE_DATA)
        return 0;
    pthread_mutex_lock(&fs->lock);
    for (int i = 0; i < n; i++) {
        struct epoll_event *ev = &fs->events[i];
        if (ev->data.u64 == DQ_FD_WAKE_DATA)
            continue; /* edge-triggered: nothing to read */
        dq_fd_entry *e = dq_fd_find_serial_locked(fs, ev->data.u64);
        if (e == NULL) {
            fs->rebuild_wanted = true;
            continue;
        }
        fs->ready[k++] = (dq_fd_ready){
            .fd = e->fd,
            .events = events_from_epoll(ev->events) & (e->events | DQ_EVENT_ERROR),
            .watched = e->events,
            .fn = e->fn,
            .ctx = e->ctx,
            .serial = e->serial,
        };
    }
    if (fs->rebuild_wanted)
        looper_fd_rebuild_locked(fs);
    /* relaxed: under the lock, which orders it with every change */
    *gen = atomic_load_explicit(&fs->gen, memory_order_relaxed);
    pthread_mutex_unlock(&fs->lock);
    return k;
}

/* A listener returned keep: apply it to its registration, if that is
   still the one that ran (a listener may have replaced itself). */
static void looper_fd_keep(dq_fd_state *fs, const dq_fd_ready *r, uint32_t keep)
{
    pthread_mutex_lock(&fs->lock);
    dq_fd_entry *e = dq_fd_find_serial_locked(fs, r->serial);
    if (e != NULL) {
        if (keep == 0) {
            dq_fd_remove_locked(fs, e);
        } else {
            struct epoll_event ev = { .events = dq_fd_epoll_events(keep),
                                      .data = { .u64 = e->serial } };
            if (epoll_ctl(fs->epfd, EPOLL_CTL_MOD, e->fd, &ev) == 0) {
                e->events = keep;
            } else {
                /* the fd was closed or now names another file: the one
                   watched is gone (and may linger: the remove rebuilds) */
                dq_fd_remove_locked(fs, e);
                fs->rebuild_wanted = true;
            }
        }
        if (fs->rebuild_wanted)
            looper_fd_rebuild_locked(fs);
        /* the last listener gone: back to the futex wait */
        fs->active = fs->count > 0 || fs->backend_fd >= 0;
    }
    pthread_mutex_unlock(&fs->lock);
}

/* Run the k listeners taken from a poll; returns how many ran.  Before
   each, if the table changed since the poll (a listener or another
   thread added or removed one), check under the lock that its
   registration is still there, so a listener removed or replaced from
   this thread is never called again. */
static int looper_fd_run(dq_queue *q, dq_fd_state *fs, int k, uint64_t gen)
{
    int ran = 0;
    for (int i = 0; i < k; i++) {
        dq_fd_ready r = fs->ready[i];
        /* relaxed: a hint; the lock orders the check itself */
        if (atomic_load_explicit(&fs->gen, memory_order_relaxed) != gen) {
            pthread_mutex_lock(&fs->lock);
            bool live = dq_fd_find_serial_locked(fs, r.serial) != NULL;
            gen = atomic_load_explicit(&fs->gen, memory_order_relaxed);
            pthread_mutex_unlock(&fs->lock);
            if (!live)
                continue;
        }
        uint32_t keep = r.fn(r.fd, r.events, r.ctx) & DQ_EVENT_ALL;
        ran++;
        if (keep != r.watched) {
            looper_fd_keep(fs, &r, keep);
            gen = atomic_load_explicit(&fs->gen, memory_order_relaxed);
        }
    }
    (void)q;
    return ran;
}

/* Poll without blocking and run what is ready. */
static int looper_fd_poll_at(dq_queue *q, dq_fd_state *fs, int64_t now)
{
    fs->polled_at = now;
    fs->delivered_since_poll = 0;
    int n = epoll_wait(fs->epfd, fs->events, DQ_FD_BATCH, 0);
    if (n <= 0)
        return 0;
    uint64_t gen;
    int k = looper_fd_take(fs, n, &gen);
    return looper_fd_run(q, fs, k, gen);
}

/* ---- the backend fd ----------------------------------------------------- */

/* The first step after dq_try_next parked: awake again (the host loop's
   wait is over), and the timer drained if it fired. */
static void looper_fd_unpark(dq_queue *q, dq_fd_state *fs)
{
    fs->parked = false;
    dq_looper_fd_mark_sleep(q, false);
    /* relaxed: as after a wait (looper_sleep): a producer that still
       reads the old word only wakes us needlessly */
    atomic_store_explicit(&q->sleep, DQ_AWAKE, memory_order_relaxed);
    if (fs->timer_deadline != INT64_MAX) {
        uint64_t expirations;
        if (read(fs->timer_fd, &expirations, sizeof(expirations)) ==
            sizeof(expirations))
            fs->timer_deadline = INT64_MAX; /* one-shot: it fired */
    }
    /* the host loop's wait was the poll: whatever is due now comes after
       it, so poll before delivering it */
    fs->polled_at = INT64_MIN;
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    return ts;
}

void dq_looper_fd_park(dq_queue *q, int64_t deadline)
{
    dq_fd_state *fs = looper_fd_state(q);
    if (deadline != fs->timer_deadline) {
        /* an absolute CLOCK_MONOTONIC time; all zero disarms */
        struct itimerspec its;
        memset(&its, 0, sizeof(its));
        if (deadline != INT64_MAX)
            its.it_value = to_timespec(deadline > 0 ? deadline : 1);
        if (timerfd_settime(fs->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
            fs->timer_deadline = deadline;
    }
    fs->parked = true;
}

int dq_backend_fd(dq_queue *q)
{
    if (q == NULL)
        return -EINVAL;
    int err = dq_looper_claim(q);
    if (err)
        return err;
    /* a consumer call like the others: q is the thread's current queue */
    dq_consumer_frame saved;
    dq_consumer_enter(q, &saved);
    dq_consumer_leave(&saved);
    /* acquire: as looper_next's read of the core */
    if (atomic_load_explicit(&q->core, memory_order_acquire) == NULL)
        return -ESHUTDOWN;
    dq_fd_state *fs = dq_fd_state_get(q, &err);
    if (fs == NULL)
        return err;
    if (fs->backend_fd >= 0)
        return fs->backend_fd;
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int outer = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event inner_ev = { .events = EPOLLIN,
                                    .data = { .u64 = DQ_FD_WAKE_DATA } };
    struct epoll_event timer_ev = { .events = EPOLLIN,
                                    .data = { .u64 = DQ_FD_TIMER_DATA } };
    /* the lock: adders read epfd under it (a rebuild is ours anyway) */
    pthread_mutex_lock(&fs->lock);
    if (timer < 0 || outer < 0 ||
        epoll_ctl(outer, EPOLL_CTL_ADD, fs->epfd, &inner_ev) != 0 ||
        epoll_ctl(outer, EPOLL_CTL_ADD, timer, &timer_ev) != 0) {
        err = -errno;
        pthread_mutex_unlock(&fs->lock);
        if (timer >= 0)
            close(timer);
        if (outer >= 0)
            close(outer);
        return err;
    }
    fs->backend_fd = outer;
    fs->timer_fd = timer;
    fs->active = true;
    pthread_mutex_unlock(&fs->lock);
    /* readable at first: the host loop's first dq_try_next is what
       publishes the sleep word and arms the timer */
    uint64_t one = 1;
    ssize_t w = write(fs->wake_fd, &one, sizeof(one));
    (void)w;
    return outer;
}

/* ---- the consumer's hooks ----------------------------------------------- */

bool dq_looper_fd_waits(dq_queue *q)
{
    dq_fd_state *fs = looper_fd_state(q);
    return fs != NULL && fs->active;
}

bool dq_looper_fd_backend(dq_queue *q)
{
    dq_fd_state *fs = looper_fd_state(q);
    return fs != NULL && fs->backend_fd >= 0;
}

int dq_looper_fd_step(dq_queue *q, int64_t now, bool have_due, int64_t due)
{
    dq_fd_state *fs = looper_fd_state(q);
    looper_fd_refresh(q, fs);
    if (fs->parked)
        looper_fd_unpark(q, fs);
    if (!fs->active)
        return 0;
    if (fs->pending > 0) {
        /* what the blocking wait found: its poll began at polled_at */
        int n = fs->pending;
        fs->pending = 0;
        uint64_t gen;
        int k = looper_fd_take(fs, n, &gen);
        int ran = looper_fd_run(q, fs, k, gen);
        if (ran > 0)
            return ran;
    }
    if (!have_due)
        return 0;
    /* A message due after the last poll began: poll first.  One due
       before it: deliver, unless a backlog has kept the fds unpolled for
       the interval; then poll, but only once something was delivered
       since the last poll, so listeners that each take longer than the
       interval still let a message through between two polls. */
    if (due > fs->polled_at ||
        (fs->delivered_since_poll > 0 && now - fs->polled_at >= DQ_FD_POLL_INTERVAL_NS))
        return looper_fd_poll_at(q, fs, now);
    fs->delivered_since_poll++;
    return 0;
}

int dq_looper_fd_poll(dq_queue *q)
{
    dq_fd_state *fs = looper_fd_state(q);
    looper_fd_refresh(q, fs);
    if (!fs->active)
        return 0;
    return looper_fd_poll_at(q, fs, dq_queue_time(q));
}

/* epoll_pwait2 takes a timespec; QEMU user mode (7.2) lacks it, and then
   the wait rounds up to epoll_wait's milliseconds. */
static _Atomic(int) no_pwait2;

void dq_looper_fd_wait(dq_queue *q, int64_t deadline)
{
    dq_fd_state *fs = looper_fd_state(q);
    fs->polled_at = dq_queue_time(q);
    fs->delivered_since_poll = 0;
    int64_t left = -1;
    if (deadline != INT64_MAX) {
        left = deadline - dq_clock_real();
        if (left < 0)
            left = 0;
    }
    int n = -1;
    /* relaxed: a cache of a fact about the kernel; a stale 0 costs one
       more ENOSYS */
    if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        struct timespec ts = to_timespec(left);
        n = (int)syscall(SYS_epoll_pwait2, fs->epfd, fs->events, DQ_FD_BATCH,
                         left < 0 ? NULL : &ts, NULL, (size_t)8);
        if (n < 0 && errno == ENOSYS)
            atomic_store_explicit(&no_pwait2, 1, memory_order_relaxed);
    }
    if (n < 0 && atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        int ms = left < 0                            ? -1
                 : left > INT64_C(1000000) * 1000000 ? 1000000000
                                                     : (int)((left + 999999) / 1000000);
        n = epoll_wait(fs->epfd, fs->events, DQ_FD_BATCH, ms);
    }
    /* EINTR and the rest: the caller re-checks everything, as after a
       futex wait */
    fs->pending = n > 0 ? n : 0;
    dq_looper_fd_mark_sleep(q, false);
}

#else /* !DQ_FD_SUPPORTED */

int dq_backend_fd(dq_queue *q)
{
    return q == NULL ? -EINVAL : -ENOSYS;
}

bool dq_looper_fd_waits(dq_queue *q)
{
    (void)q;
    return false;
}
bool dq_looper_fd_backend(dq_queue *q)
{
    (void)q;
    return false;
}
int dq_looper_fd_step(dq_queue *q, int64_t now, bool have_due, int64_t due)
{
    (void)q, (void)now, (void)have_due, (void)due;
    return 0;
}
int dq_looper_fd_poll(dq_queue *q)
{
    (void)q;
    return 0;
}
void dq_looper_fd_wait(dq_queue *q, int64_t deadline)
{
    (void)q, (void)deadline;
}
void dq_looper_fd_park(dq_queue *q, int64_t deadline)
{
    (void)q, (void)deadline;
}

#endif
