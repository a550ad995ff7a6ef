/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue: DeliQueue, the lock-free message queue behind Android 17's
 * MessageQueue, in C11.
 *
 * Who may call what concurrently
 * ------------------------------
 *   role       functions                                        may race with
 *   producer   dq_post*, dq_post_sync_barrier,                  everything
 *              dq_post_repeating, dq_invoke, dq_call
 *   remover    dq_cancel, dq_remove, dq_has,                    everything
 *              dq_remove_sync_barrier
 *   any        dq_ref, dq_unref, dq_quit, dq_quit_safely,       everything
 *              dq_add_idle_handler, dq_remove_idle_handler,
 *              dq_is_idle, dq_pending, dq_now, dq_atomics,
 *              dq_pool_stats, dq_set_name, dq_trace_enable,
 *              dq_trace_enabled, dq_add_fd_listener,
 *              dq_remove_fd_listener, dq_current,
 *              dq_is_consumer, dq_is_invoke, dq_wake,
 *              dq_set_observer, dq_dump, dq_clock_*,
 *              dq_queue_now
 *   consumer   dq_next, dq_next_until, dq_try_next, dq_loop,    producers, removers, any;
 *              dq_loop_once, dq_backend_fd, dq_peek_when,
 *              dq_is_blocked_on_barrier, dq_run_until_idle,
 *              dq_fast_forward
 *                                                               never a second consumer
 *
 * The first thread that calls a consumer function becomes the queue's only
 * consumer (its "looper") for the queue's whole life; any other thread
 * calling one gets -EPERM, even after the consumer thread has exited.
 * dq_invoke and dq_call run their function inline when called on the
 * consumer's own thread.
 *
 * A post is one CAS on the queue's stack top, plus a futex wake (one
 * syscall) when it finds the consumer asleep and its message could be
 * delivered before the consumer would wake by itself.  A post takes no
 * lock of the library's, so it never waits for a preempted thread of its
 * own process but in two first times: the process's first post creates a
 * pthread key (pthread_once), and a thread's first post claims a slot for
 * its node cache (a CAS) and sets that key (glibc allocates there only
 * when the process already has more than 32 keys).  A post that finds no
 * free node where its lock-free scan of the process-wide node pool looks
 * grows the pool without a lock (a full scan, then a new chunk, carved
 * from a 2 MiB slab with a CAS or from a new slab mapped with mmap, which
 * takes the kernel's lock on the address space).  Once the pool has grown
 * to a workload's peak, posts do neither.  The consumer owns the ordering
 * heap.
 *
 * Quitting.  dq_quit drops every pending message; dq_quit_safely drops
 * what is due later than now (inside the call) and lets the consumer
 * deliver the rest: the "drain", which ends when nothing deliverable is
 * left (what a barrier still holds then is dropped).  From either quit on,
 * posts and idle-handler adds return -ESHUTDOWN.  Through the drain,
 * dq_cancel, dq_remove, dq_has, dq_remove_sync_barrier, dq_pending and
 * dq_is_idle act on what remains, exactly as before the quit.  After
 * dq_quit, or once the drain has ended, nothing remains: dq_cancel and
 * dq_remove_sync_barrier return -ENOENT, dq_remove 0, dq_has false,
 * dq_pending 0, dq_is_idle true, and the consumer calls -ESHUTDOWN.
 *
 * Errors.  Every function that returns int returns 0 on success or a
 * negative errno value (-EINVAL for bad arguments, -ENOENT, -ENOMEM,
 * -EPERM, -ESHUTDOWN, -EAGAIN, -ETIMEDOUT, -EINTR, -ECANCELED), and
 * changes nothing when it fails.  The exceptions, each documented at its
 * function:
 *   dq_create        returns the queue, or NULL with errno set (EINVAL, ENOMEM);
 *   dq_ref           returns q (NULL for NULL);
 *   dq_remove        returns how many it removed (0 on bad input);
 *   dq_backend_fd    returns the fd (>= 0), or a negative errno;
 *   dq_loop_once     returns a DQ_ONCE_* value (> 0), or a negative errno;
 *   dq_current       returns a queue or NULL;
 *   dq_has, dq_is_idle, dq_pending, dq_trace_enabled, dq_is_consumer,
 *   dq_is_invoke     answer the question (false, true, 0 on bad input);
 *   dq_unref, dq_quit, dq_quit_safely
 *                    return nothing (NULL: no-op);
 *   dq_now, dq_atomics  cannot fail.
 * Nothing aborts, blocks forever or leaks on bad input.
 *
 * Exactly once: every accepted message is delivered once (returned by
 * dq_next*, or dispatched by dq_loop) or discarded once (removed, cancelled,
 * dropped by quit or by the last dq_unref); each discard is reported to
 * dq_options.on_discard, on the thread that discarded it.  A post that
 * returns an error was not accepted: the caller keeps what it posted and
 * nothing is reported.
 *
 * Times are nanoseconds on the queue's clock (dq_queue_now): CLOCK_MONOTONIC
 * (dq_now()) unless dq_options.clock gives the queue a manual clock.
 */
#ifndef DELIQUEUE_DELIQUEUE_H
#define DELIQUEUE_DELIQUEUE_H

#include <errno.h> /* the negative errno values every call returns */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* dq_dump's FILE */

/* This header's version, MODULE.bazel's (//:version_test checks it).
   DQ_VERSION is MAJOR << 16 | MINOR << 8 | PATCH, for #if; dq_version() is
   the library's, "MAJOR.MINOR.PATCH" (any thread, cannot fail). */
#define DQ_VERSION_MAJOR 0
#define DQ_VERSION_MINOR 1
#define DQ_VERSION_PATCH 0
#define DQ_VERSION \
    ((DQ_VERSION_MAJOR << 16) | (DQ_VERSION_MINOR << 8) | DQ_VERSION_PATCH)
#ifdef __cplusplus
extern "C" const char *dq_version(void);
#else
const char *dq_version(void);
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dq_queue dq_queue; /* opaque, reference counted */
typedef uint64_t dq_token;        /* 0 = none; never reused (process-wide) */
/* A manual clock for tests (dq_clock_create_manual). */
typedef struct dq_clock dq_clock;

#define DQ_ASYNC 1u /* dq_msg.flags: not held by barriers */

typedef struct dq_msg {
    const void *target; /* who handles it; must not be NULL */
    int32_t what, arg1, arg2;
    void *obj;
    void (*callback)(struct dq_msg *m); /* run by dq_loop when set */
    int64_t when;                       /* filled in on delivery (0 for front posts) */
    uint32_t flags;                     /* DQ_ASYNC; other bits: -EINVAL */
} dq_msg;

typedef struct dq_options {
    /* Called exactly once for every accepted message that is not delivered
       (removed, cancelled, dropped by quit or destroy), on the thread that
       discarded it; may run concurrently on several threads.  May be NULL.
       It must not call back into the same queue. */
    void (*on_discard)(const dq_msg *m, void *ctx);
    /* Called by dq_loop for a delivered message without a callback. */
    void (*dispatch)(dq_msg *m, void *ctx);
    void *ctx;
    /* How long the consumer polls for new work before it sleeps, in ns:
       0 takes DQ_IDLE_SPIN_DEFAULT_NS; negative never polls (every idle
       transition sleeps at once, and the next post pays the wake-up);
       above DQ_IDLE_SPIN_MAX_NS dq_create fails with EINVAL. */
    int64_t idle_spin_ns;
    /* The queue's clock: NULL for CLOCK_MONOTONIC, or a manual clock
       (dq_clock_create_manual), which the queue then reads for every due
       time, deadline and wait instead of CLOCK_MONOTONIC. */
    dq_clock *clock;
} dq_options;

#define DQ_IDLE_SPIN_DEFAULT_NS 2000    /* 2 us */
#define DQ_IDLE_SPIN_MAX_NS     1000000 /* 1 ms */

/* dq_match.fields */
#define DQ_MATCH_WHAT       1u
#define DQ_MATCH_OBJ        2u
#define DQ_MATCH_CALLBACK   4u
#define DQ_MATCH_ALL_FIELDS (DQ_MATCH_WHAT | DQ_MATCH_OBJ | DQ_MATCH_CALLBACK)

typedef struct dq_match {
    const void *target; /* always compared; must not be NULL */
    uint32_t fields;    /* which of the others to compare */
    int32_t what;
    const void *obj;
    void (*callback)(struct dq_msg *m);
} dq_match;

/* Create a queue.  NULL opts: defaults (no callbacks).
   Returns NULL with errno = EINVAL for bad options (idle_spin_ns above
   DQ_IDLE_SPIN_MAX_NS) or ENOMEM.  Thread: any. */
dq_queue *dq_create(const dq_options *opts);
/* Take another reference (e.g. for a producer thread).  Returns q.
   NULL q: returns NULL.  Thread: any. */
dq_queue *dq_ref(dq_queue *q);
/* Drop a reference.  The last one quits the queue if it was never quit
   (dropping and reporting what is pending) and frees it.  The caller must
   not be inside a call on q.  NULL: no-op.  Thread: any. */
void dq_unref(dq_queue *q);

/* Post a copy of *m.  On success *tok (if tok is not NULL) receives a token
   for dq_cancel.  Errors: -EINVAL (NULL q or m, NULL target, unknown flag
   bits, negative when), -ESHUTDOWN (queue is quitting; not accepted),
   -ENOMEM (out of memory, or all 2^28 of the process's message nodes in
   use: pending, retiring, or cached by posting threads).  Thread: any. */
int dq_post(dq_queue *q, const dq_msg *m, dq_token *tok); /* when = now */
/* when >= 0; when == 0 means front of queue (as dq_post_at_front). */
int dq_post_at(dq_queue *q, const dq_msg *m, int64_t when, dq_token *tok);
/* when = now + delay; a negative delay is 0; an overflowing one saturates
   to INT64_MAX. */
int dq_post_delayed(dq_queue *q, const dq_msg *m, int64_t delay, dq_token *tok);
/* Before every timed message; LIFO among front posts. */
int dq_post_at_front(dq_queue *q, const dq_msg *m, dq_token *tok);

/* O(1) cancel of one posted message; on success it is reported to
   on_discard before this returns, and it is never delivered.  -ENOENT if
   it is gone: delivered, removed, cancelled, dropped by a quit (dq_quit,
   the quit_safely trim, or the drain's end), or it never existed (stale
   tokens included, a removed barrier's too); -EINVAL for token 0, a
   pending barrier's token, or NULL q.  Works through a quit_safely drain.
   Thread: any. */
int dq_cancel(dq_queue *q, dq_token tok);
/* Remove every pending message matching *m; returns how many (each
   reported to on_discard before this returns).  0 on bad input
   (NULL q/m/target, unknown fields bits), and after dq_quit or the end of
   a quit_safely drain (nothing is pending then); works through the drain.
   Messages posted concurrently may or may not be removed.  Thread: any. */
size_t dq_remove(dq_queue *q, const dq_match *m);
/* Whether a pending message matches *m (same matching, no removal).
   false on bad input; through a quit as dq_remove. */
bool dq_has(dq_queue *q, const dq_match *m);

/* Post a sync barrier at now: while it is the earliest item, only
   DQ_ASYNC messages are delivered.  Errors as dq_post.  Thread: any. */
int dq_post_sync_barrier(dq_queue *q, dq_token *tok);
/* Release a barrier; what it held becomes deliverable (during a
   quit_safely drain too).  -ENOENT if unknown, already removed, or gone
   with a quit (dq_quit, or the drain's end); -EINVAL for token 0 or NULL
   q.  Thread: any. */
int dq_remove_sync_barrier(dq_queue *q, dq_token tok);

/* Idle handlers run on the consumer thread when it is about to block with
   nothing due, once per idle period; one that returns false is removed.
   The same (fn, ctx) may be added several times; remove drops one.
   Errors: -EINVAL (NULL q or fn), -ENOMEM, -ENOENT (remove: not found),
   -ESHUTDOWN (add on a quitting queue).  Thread: any. */
int dq_add_idle_handler(dq_queue *q, bool (*fn)(void *ctx), void *ctx);
int dq_remove_idle_handler(dq_queue *q, bool (*fn)(void *ctx), void *ctx);

/* File-descriptor events (Linux; elsewhere every call answers -ENOSYS).
   The consumer waits on its watched fds and its messages at once and
   runs a ready fd's listener on its own thread, inside dq_next,
   dq_next_until, dq_try_next and dq_loop.  Fairness: an fd that is ready
   when a message falls due is run before that message, and every message
   due when the fds were last polled is delivered before they are polled
   again, so neither a busy fd nor a stream of messages starves the other
   (DESIGN.md, "File descriptors").  Listeners are level-triggered: one
   that leaves data unread is called again.  A listener may add, replace
   and remove listeners (its own included), post, and close its fd; it
   must not call a consumer function.  Listeners still registered when the
   queue is torn down (the end of a quit) are dropped without a call. */
#define DQ_EVENT_INPUT  1u /* readable (EPOLLIN) */
#define DQ_EVENT_OUTPUT 2u /* writable (EPOLLOUT) */
#define DQ_EVENT_ERROR \
    4u /* error or hang-up (EPOLLERR, EPOLLHUP); reported
                                whether asked for or not */

/* Runs on the consumer thread with the events that occurred; returns the
   events to keep watching (0 unregisters this listener; bits other than
   the DQ_EVENT_* ones are ignored).  A listener whose fd was closed or
   replaced (dup2) inside the call and that returns nonzero is dropped:
   the file it watched is gone. */
typedef uint32_t (*dq_fd_listener)(int fd, uint32_t events, void *ctx);

/* Watch fd on the consumer thread.  One listener per fd: adding for an fd
   already watched replaces its events, listener and ctx (a poll already
   taken for the old one is not delivered to the new one); events 0
   removes it (0 whether or not it was watched).  Events DQ_EVENT_ERROR
   alone watch for errors and hang-ups only.
   Errors: -EINVAL (NULL q or fn, fd < 0, unknown bits), -EBADF (fd not
   open), -EPERM (fd cannot be polled: a regular file or a directory),
   -ESHUTDOWN (quitting), -ENOMEM, -EMFILE/-ENFILE (the queue's own fds:
   an eventfd and an epoll set, made by the first add), -ENOSYS where the
   platform has no support.
   Thread: any; takes effect before the consumer next waits, and wakes it.
   From another thread, a listener the consumer is already calling, or has
   already taken from a poll, may still run once after this returns; from
   the consumer's own thread (a listener or a message) the change is
   immediate. */
int dq_add_fd_listener(dq_queue *q, int fd, uint32_t events, dq_fd_listener fn,
                       void *ctx);
/* Stop watching fd: 0, or -ENOENT if it was not watched (nothing
   changes); -EINVAL for NULL q or fd < 0; -ENOSYS as above.  Thread: any,
   with the same "may still run once" as a replacement. */
int dq_remove_fd_listener(dq_queue *q, int fd);

/* For embedding in another loop: an fd owned by the queue (do not close
   it; it stays open until the last dq_unref) that polls readable whenever
   the consumer has work: a message due, a message posted that is due
   earlier than the one the host loop was last told about, a watched fd
   ready, a wake-up, a quit.  The host loop then calls dq_try_next until
   it answers -EAGAIN (or -ESHUTDOWN: stop polling); that call also runs
   ready fd listeners, and its -EAGAIN is what arms the fd for the next
   due time.  The fd is readable when first returned.  Consumer thread
   only (-EPERM otherwise); like dq_next, the first caller becomes the
   consumer.  Returns the fd (the same one on every call), or -EINVAL,
   -ESHUTDOWN (torn down), -ENOMEM, -EMFILE/-ENFILE, -ENOSYS. */
int dq_backend_fd(dq_queue *q);

/* Consumer side: one consumer thread per queue (-EPERM for another).
   dq_next blocks until a message is due and copies it to *out;
   -ESHUTDOWN when the queue has quit and nothing deliverable is left.
   dq_next_until gives up at deadline (absolute, the queue's clock) with
   -ETIMEDOUT, and returns -EINTR for a dq_wake: at once for one pending
   when it is called, or when one comes while it waits; dq_try_next never
   blocks (-EAGAIN if nothing is due).  -EINVAL for NULL q or out. */
int dq_next(dq_queue *q, dq_msg *out);
int dq_next_until(dq_queue *q, dq_msg *out, int64_t deadline);
int dq_try_next(dq_queue *q, dq_msg *out);
/* Deliver until quit: run each message's callback, or opts.dispatch.
   Returns 0 after quit, -EPERM / -EINVAL as dq_next. */
int dq_loop(dq_queue *q);

/* ---- the looper: identity, running on the consumer, repeating posts,
   waking, one iteration --------------------------------------------------

   Identity.  A thread that has made a consumer call on q (any of dq_next,
   dq_next_until, dq_try_next, dq_loop, dq_loop_once, dq_backend_fd) is
   q's consumer from then on, and dq_current() answers q on it: inside
   the call (in its callbacks, listeners, idle handlers and on_discard)
   and also between calls.  Nested consumption: inside a callback of A, a
   consumer call on B makes B current until it returns, then A again (the
   innermost call in progress wins; with none in progress, the queue of
   the thread's latest one).  dq_invoke's and dq_call's inline runs make
   their queue current the same way.  Once q is destroyed (its last
   dq_unref) dq_current() answers NULL, also if a new queue gets q's
   address.  No reference is taken: the pointer is good while the
   caller's own reference keeps q alive. */
dq_queue *dq_current(void); /* any thread; never fails */
/* True only on q's consumer thread (for every queue the thread consumes);
   false before q's first consumer call, and for NULL.  Any thread. */
bool dq_is_consumer(dq_queue *q);

/* Run fn(ctx) on q's consumer.  On the consumer's own thread fn runs at
   once, inside the call; elsewhere it is posted as dq_post would post it
   (FIFO with other due-now posts, held by sync barriers) and runs when
   the consumer gets to it.  The posted message is an ordinary callback
   message: dq_loop and dq_loop_once run it, and a consumer that uses
   dq_next* must run out.callback(&out) for it, as for any message with a
   callback.  Its target is the library's own (dq_is_invoke); if it is
   discarded (a quit), on_discard is called for it like for any message.
   Errors: -EINVAL (NULL q or fn), -ESHUTDOWN (q has quit, either way;
   fn does not run, inline or not), -ENOMEM.  Thread: any. */
int dq_invoke(dq_queue *q, void (*fn)(void *ctx), void *ctx);
/* Run fn(ctx) on q's consumer and wait until it has returned.
     0           fn ran; everything it wrote is visible to the caller
                 (happens-before).  On the consumer itself fn runs inline.
     -ETIMEDOUT  timeout ns (real CLOCK_MONOTONIC time, whatever clock
                 q runs on) passed before the consumer took fn's message
                 for delivery: the message is cancelled (reported to
                 on_discard exactly once) and fn never runs.  If the
                 consumer has taken it when the time is up, dq_call waits
                 for fn to return and answers 0.  INT64_MAX: no limit.
     -ESHUTDOWN  q quit before fn ran: at once for a dq_quit (whatever the
                 consumer is doing; fn then never runs); for
                 dq_quit_safely fn still runs in the drain (0) unless a
                 barrier holds it to the end.  Also when q had quit
                 before the call.
     -ECANCELED  the message was removed by criteria (dq_remove with
                 target dq_is_invoke's) before it ran.
     -EINVAL     NULL q or fn, timeout < 0.   -ENOMEM.
   The message is a callback message as dq_invoke's; a consumer on
   dq_next* must run its callback, or the caller waits to its timeout.
   fn may itself call dq_call on another queue.  Two consumers that
   dq_call each other at the same moment wait for each other: a deadlock
   of the caller's making, which only the timeout ends.  Thread: any. */
int dq_call(dq_queue *q, void (*fn)(void *ctx), void *ctx, int64_t timeout);
/* Whether m is a message dq_invoke or dq_call posted (an on_discard or a
   dispatch that owns its messages' payloads should pass over these:
   their obj is the library's).  false for NULL.  Any thread. */
bool dq_is_invoke(const dq_msg *m);

/* Repeating posts.  A copy of *m is due at `first` (absolute, the queue's
   clock; a time in the past is due at once), then every `period` ns
   (> 0), in one of two modes:
     DQ_FIXED_RATE   occurrence k is due at first + k * period; a late
                     delivery does not shift the next.  Grid points that
                     passed while a delivery was late are skipped: after
                     an overrun the next occurrence is the first grid
                     point not before the end of the late delivery, so at
                     most one late occurrence, never a burst.
     DQ_FIXED_DELAY  the next occurrence is due period ns after the end
                     of this delivery.
   The end of a delivery: when dq_loop's or dq_loop_once's dispatch
   returns; for a consumer on dq_next*, its next consumer call on q.
   Each delivery is an ordinary message whose `when` is its own due time.
   One token (*tok) covers every occurrence: dq_cancel(q, *tok) stops the
   post, whether an occurrence is pending or being delivered (also from
   inside its own delivery): it answers 0, no occurrence is delivered
   after it returns, and the post's end is reported to on_discard once
   (with the `when` of the occurrence it was at); a second cancel answers
   -ENOENT.  dq_remove and dq_has see a repeating post as one message,
   also during a delivery; dq_pending counts it as one.  A quit ends it
   like any pending message (a quit_safely drain delivers at most the
   occurrence due by then), reported once.
   Errors: -EINVAL (NULL q or m, a bad message as dq_post, first < 0,
   period <= 0, unknown mode), -ESHUTDOWN, -ENOMEM, as dq_post.
   Thread: any. */
#define DQ_FIXED_RATE  0u
#define DQ_FIXED_DELAY 1u
int dq_post_repeating(dq_queue *q, const dq_msg *m, int64_t first, int64_t period,
                      uint32_t mode, dq_token *tok);

/* Wake the consumer: its current or next wait in dq_loop_once or
   dq_next_until returns (DQ_ONCE_WOKEN, -EINTR).  Coalesced (wakes sent
   before the consumer sees one are one wake) and never lost: a wake sent
   while the consumer is not waiting is seen by its next dq_loop_once or
   dq_next_until, at once, before any message due or fd ready (which the
   call after it handles), and whatever its deadline.  dq_next, dq_loop
   and dq_try_next are not interrupted (the wake stays pending for the
   next dq_loop_once or dq_next_until).  Everything the caller did before
   dq_wake is visible to the consumer once its call returns the wake.
   0; -EINVAL (NULL q); -ESHUTDOWN (q has quit).  Any thread;
   async-signal-safe (atomics, and a futex wake or an eventfd write; with
   the portable wait, DQ_WAIT_PTHREAD builds, it takes the wait's mutex
   and is not). */
int dq_wake(dq_queue *q);

/* One iteration of the consumer: wait at most until deadline (absolute,
   the queue's clock; a deadline not after now: no wait), then do one thing:
     DQ_ONCE_MESSAGE  dispatched one due message as dq_loop does (its
                      callback, or opts.dispatch), on this thread
     DQ_ONCE_FD       ran the ready fd listeners (fairness as dq_next's:
                      a ready fd comes before a message that fell due
                      after it was ready)
     DQ_ONCE_WOKEN    a dq_wake (pending when called: reported first;
                      or one during the wait)
     DQ_ONCE_TIMEOUT  the deadline came with nothing of the above
   Idle handlers run before it would wait, as in dq_loop.  Errors:
   -ESHUTDOWN (quit and drained, as dq_next), -EPERM (not q's consumer),
   -EINVAL (NULL q), -ENOMEM.  Consumer only; the first caller becomes
   the consumer. */
#define DQ_ONCE_MESSAGE 1
#define DQ_ONCE_FD      2
#define DQ_ONCE_WOKEN   3
#define DQ_ONCE_TIMEOUT 4
int dq_loop_once(dq_queue *q, int64_t deadline);

/* dq_quit drops (and reports) everything pending: the consumer reports
   them on its next call (or the last dq_unref does).  dq_quit_safely drops
   (and reports, inside the call) what is due later than now and lets the
   consumer deliver the rest first; a post accepted before it, due by
   then, is delivered.  See "Quitting" above.  Idempotent; dq_quit after
   dq_quit_safely drops what is left.  NULL: no-op.  Thread: any. */
void dq_quit(dq_queue *q);
void dq_quit_safely(dq_queue *q);

/* True when nothing is due now (the consumer would block), a due sync
   message held by a barrier counting as not due.  O(pending).  NULL q, or
   after dq_quit or the drain's end: true. */
bool dq_is_idle(dq_queue *q);
/* Messages accepted and neither delivered nor discarded (barriers not
   counted).  O(pending).  A snapshot: may be stale under concurrency.
   NULL q, or after dq_quit or the drain's end: 0. */
size_t dq_pending(dq_queue *q);
int64_t dq_now(void);
/* Which atomics the running code uses: "x86_64", "arm64-llsc",
   "arm64-lse", "arm64-outline". */
const char *dq_atomics(void);

/* The process-wide node pool's memory, the C analogue of a dumpsys view.
   Every message node comes from the pool, which every queue shares; node
   memory is never returned to the system (a node is only recycled), so
   reserved_bytes only grows, up to the peak a workload needs.  The node
   counts add up to nodes_total. */
struct dq_pool_stats {
    uint64_t reserved_bytes; /* taken from the system for nodes and the free map */
    uint64_t nodes_total;    /* nodes made so far, 128 bytes each */
    uint64_t nodes_free;     /* in the pool, for any thread to take */
    uint64_t nodes_cached;   /* taken by posting threads for their next posts
                                (given back when a thread exits) */
    uint64_t nodes_limbo;    /* retired by consumers, not yet back in the pool
                                (waiting for a grace period, or for a batch) */
    uint64_t nodes_in_use;   /* the rest: posted and not yet retired */
    uint64_t threads;        /* threads holding a node cache */
    uint64_t queues;         /* queues not yet torn down */
};
/* Fill *out: 0, or -EINVAL for NULL.  A snapshot: exact while no thread
   posts, consumes or removes, approximate (each count a moment's) while
   they do.  Cost: a pass over the pool's free map (one word per 64 nodes),
   the posting threads and the live queues (under the queues' registry
   lock, which no post takes): cheap enough for a progress line every
   second, not for a hot path.  Not from on_discard.  Thread: any. */
int dq_pool_stats(struct dq_pool_stats *out);

/* Tracing: the queue's events (posts, deliveries, dq_loop's dispatches
   and the consumer's sleeps as slices, the backlog as a counter, cancels
   and removals) as atrace markers ("B|pid|name", "E|pid",
   "C|pid|name|value", "I|pid|name") written to tracefs trace_marker, for
   Perfetto and trace-cmd to record beside the kernel's scheduling events.
   Off by default: then a post pays one predictable branch for it.  On
   for the whole process with dq_trace_enable(true), or by the environment
   variable DQ_TRACE (any value but "" and "0") at the first dq_create.
   A post never fails because of tracing: if trace_marker cannot be
   opened or written, that is said once on stderr and events are dropped. */
#define DQ_NAME_MAX 32 /* a queue name's bytes, its NUL included */
/* Name q in its trace events ("dq:NAME ..."; unnamed queues show their
   address): 1 to DQ_NAME_MAX - 1 printable ASCII characters, no '|'.
   -EINVAL for NULL q, a NULL or bad name; -ENOMEM.  Thread: any. */
int dq_set_name(dq_queue *q, const char *name);
/* Turn tracing on or off.  On: 0, or the negative errno of opening
   trace_marker (said once on stderr; tracing stays off).  Off: 0.
   Thread: any. */
int dq_trace_enable(bool on);
bool dq_trace_enabled(void);

/* ---- observing the loop ---------------------------------------------------

   An observer sees every message dq_loop, dq_loop_once, dq_run_until_idle
   and dq_fast_forward dispatch, on the consumer thread, around the
   dispatch (not messages returned by dq_next*).  Times are on the
   queue's clock.  Any member may be NULL.  slow is called after
   dispatch_end when the delivery came late, start - m->when >
   slow_delivery_ns (ns is exactly that; front posts, whose when is 0,
   are never late), and when the dispatch took long, end - start >
   slow_dispatch_ns (ns is end - start); a threshold of 0 is off, and a
   negative one is -EINVAL.  The callbacks must not call dq_set_observer
   on the same queue. */
typedef struct dq_observer {
    void (*dispatch_start)(const dq_msg *m, int64_t start, void *ctx);
    void (*dispatch_end)(const dq_msg *m, int64_t start, int64_t end, void *ctx);
    void (*slow)(const dq_msg *m, uint32_t kind, int64_t ns, void *ctx);
    int64_t slow_delivery_ns, slow_dispatch_ns;
    void *ctx;
} dq_observer;
#define DQ_SLOW_DELIVERY 1u
#define DQ_SLOW_DISPATCH 2u
/* Set q's observer to a copy of *o (NULL removes it).  It takes effect
   from the consumer's next dispatch; one already under way finishes with
   the observer it began with.  0, -EINVAL (NULL q, negative threshold),
   -ENOMEM, -ESHUTDOWN (the queue is torn down).  Thread: any. */
int dq_set_observer(dq_queue *q, const dq_observer *o);

/* Write a human-readable snapshot of q to out.  Any thread; it takes no
   lock a post or a delivery takes and never makes them wait (pending
   messages are read as dq_pending reads them; idle handlers and fd
   listeners are copied under their locks, then printed).  Exact while
   nothing posts, removes or consumes; under concurrency each line is
   something that was true during the call.  Format, one record a line,
   fields "key=value" separated by one space, times in ns relative to
   the queue's clock at the call (+ for later, - for overdue):
     dq_dump queue=%p name=NAME clock=monotonic|manual now=NS
     consumer state=none|running|sleeping|gone until=+NS|never held=0|1 quit=no|safely|now
     counts pending=N barriers=N idle_handlers=N fds=N
     msg due=+NS|-NS|front target=%p what=%d arg1=%d arg2=%d obj=%p callback=%p async=0|1 repeat=no|rate|delay period=NS token=%llu
     barrier due=+NS|-NS token=%llu
     idle fn=%p ctx=%p
     fd fd=%d events=in,out,err listener=%p ctx=%p
     end
   msg and barrier lines come in delivery order: front posts (newest
   first), then by due time and, among equal ones, in posting order; a
   sync message behind a barrier is held until the barrier goes (held=1
   on the consumer line: the consumer waits on a barrier).  name is "-"
   for an unnamed queue.  0; -EINVAL (NULL q or out); -EIO if writing
   failed; -ENOMEM. */
int dq_dump(dq_queue *q, FILE *out);

/* ---- time, and driving a looper from a test --------------------------------

   A manual clock stands still until dq_clock_advance moves it.  A queue
   created with dq_options.clock set to one reads it for every due time
   (dq_post, dq_post_delayed, repeating posts, dq_quit_safely's cut),
   every deadline (dq_next_until, dq_loop_once) and every wait, and never
   reads CLOCK_MONOTONIC for them; dq_call's timeout stays real time.  A
   consumer asleep on such a queue wakes when an advance makes its
   earliest message (or its call's deadline) due, whichever thread
   advances.  Several queues may share one clock; one advance wakes all
   of them that it makes due. */
/* A manual clock reading start (>= 0).  NULL with errno EINVAL (start <
   0) or ENOMEM. */
dq_clock *dq_clock_create_manual(int64_t start);
/* Drop the creator's hold on c.  Queues still using c keep it alive
   until their last dq_unref; it must not be used through this pointer
   afterwards.  NULL: no-op. */
void dq_clock_destroy(dq_clock *c);
/* c's time; CLOCK_MONOTONIC for NULL (as dq_now()).  Any thread. */
int64_t dq_clock_now(const dq_clock *c);
/* Move c forward by ns (>= 0; the time saturates at INT64_MAX) and wake
   every consumer on c whose earliest message or deadline the new time
   reaches.  0; -EINVAL for NULL c or negative ns (nothing changes).  Any
   thread, a queue's consumer included. */
int dq_clock_advance(dq_clock *c, int64_t ns);
/* q's clock: its manual clock's time, or CLOCK_MONOTONIC.  -EINVAL for
   NULL q.  Any thread. */
int64_t dq_queue_now(dq_queue *q);

/* Consumer-side test control, after Android's TestLooperManager and
   Chromium's mock-time task environment.  Consumer only (-EPERM from
   another thread); like dq_next, the first caller becomes the consumer.
   After a quit and its drain they answer as an empty queue would
   (-ENOENT, false, 0).

   dq_peek_when: the due time of the next message the consumer would
   deliver, due or not: 0 for a front post; with a sync barrier first,
   the earliest async message's, or -ENOENT if there is none (what
   Android's peekWhen answers behind a barrier); -ENOENT for an empty
   queue; -EINVAL for NULL q. */
int64_t dq_peek_when(dq_queue *q);
/* Whether a barrier holds a sync message that is due.  false for NULL
   q and from another thread. */
bool dq_is_blocked_on_barrier(dq_queue *q);
/* Dispatch, as dq_loop does (callbacks, opts.dispatch, the observer, fd
   listeners that are ready), every message that was deliverable and due
   when the call began, in delivery order; never waits.  It stops at the
   first message posted during the call, so a message that re-posts
   itself due at once, or a repeating post, runs once per call and
   cannot keep it going.  Returns how many messages it dispatched (0:
   nothing was due); -EINVAL, -EPERM, -ESHUTDOWN (quit and drained),
   -ENOMEM. */
int dq_run_until_idle(dq_queue *q);
/* Manual clock only.  Move q's clock forward to each next due time up
   to now + ns (inclusive) and dispatch, in order, what falls due there,
   as dq_run_until_idle does at each of those times; a message posted
   meanwhile and due within the window runs too.  While a message is
   dispatched the clock reads its due time; at the end it reads exactly
   the start + ns (other queues on the clock are woken as by
   dq_clock_advance).  Returns how many messages it dispatched; -EINVAL
   (NULL q, ns < 0, a queue on CLOCK_MONOTONIC), -EPERM, -ESHUTDOWN,
   -ENOMEM. */
int dq_fast_forward(dq_queue *q, int64_t ns);

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_DELIQUEUE_H */
