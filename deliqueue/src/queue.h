/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The queue's internal layout.  Two parts with two lifetimes:
 *
 *  - struct dq_queue, the handle: lives until the last dq_unref.  Holds
 *    what producers touch (the stack top and the consumer's sleep word),
 *    so posting needs no reference count of its own: a producer that holds
 *    a reference can always post, or learn from the quit tag in the top
 *    word that the queue is gone (-ESHUTDOWN).
 *  - struct dq_core: everything else (removal list, walker epochs, heaps,
 *    looper bookkeeping).  Freed by the looper at teardown, once the
 *    tagged user count says no remover or walker is inside.
 *
 * The functions on the core are declared by the files that define them
 * (core.h, walk.h, fd.h, looper_fd.h, looper_walk.h).
 *
 * Cache lines: the stack top (every producer) and the sleep word (written
 * by the consumer, read by every producer) are kept apart from each other
 * and from the handle's cold fields.
 */
#ifndef DELIQUEUE_SRC_QUEUE_H
#define DELIQUEUE_SRC_QUEUE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>
#include "atomic.h"
#include "clock.h"
#include "heap.h"

#include "node.h"
#include "pool.h"
#include "registry.h"
#include "wait.h"

#define DQ_CACHE_LINE 64

/* Retired nodes that make the looper try to end a grace period. */
#define DQ_LIMBO_BATCH 64u

/* q->top: a dq_node pointer, low bit set once the queue quits. */
#define DQ_TOP_QUIT ((uintptr_t)1)
static inline dq_node *dq_top_node(uintptr_t top)
{
    return (dq_node *)(top & ~DQ_TOP_QUIT);
}

/* q->observer_set: the observer was removed. */
#define DQ_OBSERVER_NONE ((uintptr_t)1)

/* q->users: count of removers/walkers inside, plus the quitting bit. */
#define DQ_USERS_QUIT (UINT64_C(1) << 63)

/* q->sleep: DQ_AWAKE, or the consumer's wake-up deadline with the low bit
   set while sync messages are held by a barrier (then q->held_due is that
   barrier's due: a sync post due strictly earlier sorts before it and is
   deliverable).  A deadline is always later than some time >= 0, so
   every word but DQ_AWAKE is >= 0 and a post tests the sign (a test, no
   64-bit constant to load and compare). */
#define DQ_AWAKE INT64_MIN
#define DQ_HELD  INT64_C(1)
_Static_assert(DQ_AWAKE < 0, "the sleep word's sign tells awake");
static inline bool dq_sleep_word_asleep(int64_t s)
{
    return s >= 0;
}

enum dq_quit_mode { DQ_RUNNING = 0, DQ_QUIT_SAFELY = 1, DQ_QUIT_NOW = 2 };

typedef struct dq_idle_handler {
    bool (*fn)(void *ctx);
    void *ctx;
} dq_idle_handler;

typedef struct dq_core {
    /* removers push claimed nodes; the looper takes them all at once */
    alignas(DQ_CACHE_LINE) _Atomic(dq_node *) removals;
    /* walker grace periods: walkers count themselves in walkers[epoch & 1] */
    alignas(DQ_CACHE_LINE) _Atomic(uint64_t) epoch; /* written by the looper only */
    _Atomic(uint64_t) walkers[2];

    /* -- looper only below -- */
    alignas(DQ_CACHE_LINE) dq_node *boundary; /* topmost node already swept */
    dq_heap sync_heap;                        /* sync messages and barriers */
    dq_heap async_heap;
    int64_t next_seq;                 /* timed posts: up from 2^62 */
    int64_t next_front_seq;           /* front posts: down from 2^62 - 1 (LIFO) */
    int64_t sweep_now;                /* q's time before this step's sweep: what is
                                                 due by then goes to the heaps' due runs */
    dq_node *limbo_head, *limbo_tail; /* retired, waiting for walkers */
    _Atomic(uint32_t) limbo_count;    /* looper's relaxed stores; read by
                                                 dq_pool_stats */
    dq_node *unswept;                 /* claimed before we met them */
    /* a repeating post in a delivery: re-armed when its dispatch returns
       (looper_rearm) */
    dq_node *in_flight;
    size_t barriers;       /* barriers in sync_heap */
    size_t traced_backlog; /* the backlog last traced (trace.h) */
    dq_pool_batch recycled;
    dq_reg_link reg; /* on the registry of live cores (dq_pool_stats) */
} dq_core;

struct dq_queue {
    /* producers: one CAS here per post */
    alignas(DQ_CACHE_LINE) _Atomic(uintptr_t) top;
    /* consumer writes when it sleeps and wakes; producers read */
    alignas(DQ_CACHE_LINE) _Atomic(int64_t) sleep;
    /* consumer writes before each sleep-word store that sets DQ_HELD; read
       only by a sync post that finds the consumer asleep and held */
    _Atomic(int64_t) held_due;
    dq_event wake;
    /* fd listeners (fd.h): NULL until the first dq_add_fd_listener or
       dq_backend_fd; set once, freed by the last dq_unref.  fd_changed:
       set by every listener add or remove, cleared by the consumer.  Both
       read by the consumer every step, so on this line, which it owns. */
    _Atomic(struct dq_fd_state *) fd_state;
    _Atomic(uint32_t) fd_changed;
    /* dq_wake's flag: set by any thread, taken by the consumer when it
       would wait in dq_loop_once or dq_next_until (looper_take_wake) */
    _Atomic(uint32_t) woken;

    alignas(DQ_CACHE_LINE) _Atomic(uint64_t) users;
    _Atomic(uint64_t) refs;
    _Atomic(int) quit_mode;
    _Atomic(int64_t) quit_time; /* quit_safely's cut: q's time read after the
                                        quit tag, -1 until then */
    _Atomic(uint64_t) consumer; /* looper_thread_id() of the looper, 0 = none */
    _Atomic(dq_core *) core;    /* NULL after teardown */
    dq_options opts;

    _Atomic(struct dq_trace_name *) trace_name; /* NULL until dq_set_name (trace.h) */
    /* dq_set_observer's newest copy, until the consumer takes it: 0 (no
       change), a dq_observer *, or DQ_OBSERVER_NONE (removed).  Whoever
       exchanges a copy out of the slot owns it. */
    _Atomic(uintptr_t) observer_set;
    dq_observer *observer;     /* looper only: what its dispatches report to */
    pthread_mutex_t idle_lock; /* guards the idle handler array */
    dq_idle_handler *idle;
    size_t idle_count, idle_capacity;
    /* dq_call's waiters, which dq_quit releases (invoke.h) */
    dq_registry calls;
    /* this queue's life, for dq_current: a slot that outlives the queue,
       and the slot's generation while the queue lives (core.h) */
    struct dq_ident *ident;
    uint64_t ident_gen;
};

/* The time on q's clock (dq_queue_now): its manual clock, or
   CLOCK_MONOTONIC. */
static inline int64_t dq_queue_time(const dq_queue *q)
{
    return dq_clock_time(q->opts.clock);
}

/* q's core, for a caller counted in by dq_users_enter, or on the
   consumer's thread: the teardown frees it only after both are gone, so
   this is the live core.  Such a caller reads the pointer atomic_init
   stored before q was shared (the handoff of q orders the core's
   initialisation) or, on the consumer's thread, the NULL that thread
   stored; acquire is not needed for either, and pairs with the teardown's
   release of NULL for any other reader. */
static inline dq_core *dq_queue_core(dq_queue *q)
{
    return atomic_load_explicit(&q->core, memory_order_acquire);
}

#endif /* DELIQUEUE_SRC_QUEUE_H */
