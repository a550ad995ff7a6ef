/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor both sides stand on (core.c, core_walk.c, core_fd.c): what the
 * any-thread files (any_*.c) and the consumer-only files (looper*.c) both
 * need, so that each calls down into it and never across or back up.  The
 * user count, the consumer's identity, reporting a discard, waking the
 * consumer (its futex or its eventfd), the registry of live cores and the
 * core's teardown.  Callable from any thread, as each function says.
 */
#ifndef DELIQUEUE_SRC_CORE_H
#define DELIQUEUE_SRC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node.h"
#include "queue.h"

/* ---- the tagged user count (any thread) ---- */

/* Enter as a remover/walker: 0, or -ESHUTDOWN once the core is going:
   after dq_quit, or once a quit_safely drain has ended (the teardown sets
   the bit; a drain in progress still lets removers in). */
int dq_users_enter(dq_queue *q);
void dq_users_leave(dq_queue *q);

/* ---- the consumer's identity (any thread) ---- */

/* Whether the calling thread is q's consumer: then the heaps and the
   boundary are its own to read between looper steps, and nothing it can
   reach is retired while it reads. */
bool dq_looper_is_self(dq_queue *q);
/* Make the calling thread q's consumer if it has none: 0, or -EPERM if
   another thread is. */
int dq_looper_claim(dq_queue *q);

/* ---- the calling thread's queue, for dq_current (any thread) ---- */

/* A queue's life as dq_current checks it: a slot that is never freed,
   whose generation moves when the queue that holds it is destroyed, so a
   thread that remembers (queue, slot, generation) can tell a destroyed
   queue from a live one, even one made later at the same address. */
typedef struct dq_ident {
    _Atomic(uint64_t) gen;
    struct dq_ident *next_free; /* under the slots' lock */
} dq_ident;

/* Give q a slot (dq_create): 0 or -ENOMEM. */
int dq_ident_take(dq_queue *q);
/* q is destroyed (its last dq_unref): the slot's generation moves on. */
void dq_ident_end(dq_queue *q);

/* What a consumer call saved of the thread's current queue. */
typedef struct dq_consumer_frame {
    dq_queue *q;
    dq_ident *ident;
    uint64_t gen;
} dq_consumer_frame;

/* Around every consumer call on q (and every run of a function on q's
   consumer, dq_invoke and dq_call inline): q is the thread's current
   queue inside.  Leaving a call made inside another one's callback gives
   the outer queue back; leaving the outermost keeps q, so dq_current
   answers q between calls too. */
void dq_consumer_enter(dq_queue *q, dq_consumer_frame *saved);
void dq_consumer_leave(const dq_consumer_frame *saved);
/* The current queue, or NULL (none, or destroyed). */
dq_queue *dq_consumer_current(void);

/* ---- discards and wake-ups (any thread) ---- */

/* Report a claimed message to on_discard (copy of its payload); a
   dq_call message's discard also releases its waiter (invoke.h). */
void dq_report_discard(dq_queue *q, const dq_node *n);
/* Wake the consumer if it sleeps (quit, barrier removal, fd changes). */
void dq_wake_consumer(dq_queue *q);
/* Flip the sleep word from seen, a word that says asleep, to awake and
   wake the consumer; only the caller whose CAS wins pays for the syscall. */
void dq_wake_sleeper(dq_queue *q, int64_t seen);
/* A manual clock c has moved to now (its seq_cst RMW came first): wake
   every consumer on c asleep with a deadline now reaches.  Any thread. */
void dq_clock_wake_due(dq_clock *c, int64_t now);
/* Free q's observers, the consumer's and one set after it took it (the
   last dq_unref). */
void dq_observer_free(dq_queue *q);

/* ---- idle handlers (any thread) ---- */

/* Take fn/ctx off q's idle handlers: 0, or -ENOENT. */
int dq_idle_handlers_remove(dq_queue *q, bool (*fn)(void *ctx), void *ctx);

/* ---- the live cores and the teardown ---- */

/* Put a new core on the live cores' list (dq_create). */
void dq_core_register(dq_core *core);
/* The nodes the live cores' loopers hold retired, and how many cores live
   (dq_pool_stats). */
void dq_cores_retired(uint64_t *limbo, size_t *queues);
/* Tear down the core: only with the queue quitting and no other thread
   able to consume (the consumer, or the last reference). */
void dq_looper_teardown(dq_queue *q);

#endif /* DELIQUEUE_SRC_CORE_H */
