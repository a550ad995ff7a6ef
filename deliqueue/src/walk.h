/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Walking the stack: what a walk from any thread (dq_remove, dq_has,
 * dq_pending, dq_is_idle, the quit_safely trim; any_claim.c, core_walk.c)
 * and the consumer's own walk of its heaps (looper_walk.c) share.  Nodes met
 * through the stack are type-stable (pool.h), so these reads are safe
 * inside a grace period (dq_walk_begin) or on the consumer's thread.
 */
#ifndef DELIQUEUE_SRC_WALK_H
#define DELIQUEUE_SRC_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "queue.h"

static inline dq_node *dq_walk_first(dq_queue *q)
{
    /* acquire: pairs with the push CAS.  What a walk reads of a node's
       payload is ordered on its own, by dq_pending_message's acquire of
       the state that the poster released after writing it. */
    return dq_top_node(atomic_load_explicit(&q->top, memory_order_acquire));
}

static inline dq_node *dq_walk_next(dq_node *n)
{
    /* acquire: the link was written by a producer before its push or by
       the looper (release) when it unlinked the node in between */
    return atomic_load_explicit(&n->next, memory_order_acquire);
}

static inline bool dq_pending_message(dq_node *n, uint64_t *state)
{
    /* acquire: a node met through the stack is already published; this
       orders the payload reads after the life check */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_acquire);
    *state = s;
    return dq_state_life(s) == DQ_PENDING && !dq_node_is_barrier(s);
}

/* A message dq_remove, dq_has and dq_pending count: pending, or a
   repeating post in one of its deliveries (live until it ends). */
static inline bool dq_live_message(dq_node *n, uint64_t *state)
{
    /* acquire: as dq_pending_message */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_acquire);
    *state = s;
    return dq_state_live(s) && !dq_node_is_barrier(s);
}

/* What a matching walk does with each live message it meets. */
typedef struct dq_match_walk {
    dq_queue *q;
    const dq_match *match;
    bool remove; /* else stop at the first match (dq_has) */
    size_t found;
    dq_node *first, *last; /* claimed, chained through aux_next */
} dq_match_walk;

/* A live message that matches: what every node of the walk is asked
   (inline: it runs once per pending message). */
static inline bool dq_match_walk_hit(const dq_match *match, dq_node *n, uint64_t *s)
{
    return dq_live_message(n, s) && dq_node_matches(match, n);
}

/* A live message that matched: claim it (dq_remove) or end the walk
   (dq_has).  Returns whether the walk is over.  Any thread. */
bool dq_match_walk_take(dq_match_walk *w, dq_node *n, uint64_t s);

/* Claim a live node seen in state s (REMOVED by CAS): whether we won.  A
   repeating post that begins or ends a delivery meanwhile is tried
   again.  The winner reports the discard and pushes the node onto the
   removal list.  Any thread. */
bool dq_claim_live(dq_node *n, uint64_t s);

/* dq_cancel (barrier false) and dq_remove_sync_barrier (true), and
   dq_call's timeout: claim the message tok names, report it, hand it to
   the looper.  0, -ENOENT (gone, or never q's), -EINVAL (token 0, NULL
   q, a message's token given for a barrier's or the reverse).  Any
   thread. */
int dq_claim_token(dq_queue *q, dq_token tok, bool barrier);

/* Hand nodes the caller claimed (REMOVED), chained first .. last through
   aux_next, to the looper for unlinking.  Any thread. */
void dq_push_removals(dq_core *core, dq_node *first, dq_node *last);

/* A walker's grace period from any thread: the looper recycles nothing it
   unlinked after the walker's epoch began until dq_walk_end. */
uint64_t dq_walk_begin(dq_core *core);
void dq_walk_end(dq_core *core, uint64_t e);

/* dq_quit_safely's trim: claim and report every pending message due after
   cut (after the quit tag has frozen the stack). */
void dq_claim_due_after(dq_queue *q, int64_t cut);

#endif /* DELIQUEUE_SRC_WALK_H */
