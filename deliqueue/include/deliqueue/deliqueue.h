/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliqueue: DeliQueue, the lock-free message queue behind Android 17's
 * MessageQueue, in C11.
 *
 * Who may call what concurrently
 * ------------------------------
 *   role       functions                                        may race with
 *   producer   dq_post*, dq_post_sync_barrier                   everything
 *   remover    dq_cancel, dq_remove, dq_has,                    everything
 *              dq_remove_sync_barrier
 *   any        dq_ref, dq_unref, dq_quit, dq_quit_safely,       everything
 *              dq_add_idle_handler, dq_remove_idle_handler,
 *              dq_is_idle, dq_pending, dq_now, dq_atomics,
 *              dq_pool_stats, dq_set_name, dq_trace_enable,
 *              dq_trace_enabled, dq_add_fd_listener,
 *              dq_remove_fd_listener
 *   consumer   dq_next, dq_next_until, dq_try_next, dq_loop,    producers, removers, any;
 *              dq_backend_fd
 *                                                               never a second consumer
 *
 * The first thread that calls a consumer function becomes the queue's only
 * consumer (its "looper") for the queue's whole life; any other thread
 * calling one gets -EPERM, even after the consumer thread has exited.
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
 * -EPERM, -ESHUTDOWN, -EAGAIN, -ETIMEDOUT), and changes nothing when it
 * fails.  The exceptions, each documented at its function:
 *   dq_create        returns the queue, or NULL with errno set (EINVAL, ENOMEM);
 *   dq_ref           returns q (NULL for NULL);
 *   dq_remove        returns how many it removed (0 on bad input);
 *   dq_backend_fd    returns the fd (>= 0), or a negative errno;
 *   dq_has, dq_is_idle, dq_pending, dq_trace_enabled
 *                    answer the question (false, true, 0 on bad input);
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
 * Times are CLOCK_MONOTONIC nanoseconds (dq_now()).
 */
#ifndef DELIQUEUE_DELIQUEUE_H
#define DELIQUEUE_DELIQUEUE_H

#include <errno.h> /* the negative errno values every call returns */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dq_queue dq_queue; /* opaque, reference counted */
typedef uint64_t dq_token;        /* 0 = none; never reused (process-wide) */

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
   dq_next_until gives up at deadline (absolute, dq_now() clock) with
   -ETIMEDOUT; dq_try_next never blocks (-EAGAIN if nothing is due).
   -EINVAL for NULL q or out. */
int dq_next(dq_queue *q, dq_msg *out);
int dq_next_until(dq_queue *q, dq_msg *out, int64_t deadline);
int dq_try_next(dq_queue *q, dq_msg *out);
/* Deliver until quit: run each message's callback, or opts.dispatch.
   Returns 0 after quit, -EPERM / -EINVAL as dq_next. */
int dq_loop(dq_queue *q);

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

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_DELIQUEUE_H */
