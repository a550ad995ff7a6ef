/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor below both sides (walk.h): what a walk of the stack from any
 * thread (any_claim.c, the quit_safely trim) and the consumer's own walk
 * of its heaps (looper_walk.c) share: the walker's grace period, claiming
 * a hit or a token (dq_cancel, dq_remove_sync_barrier, dq_call's
 * timeout), and handing claimed nodes to the looper on the removal list.
 * Nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>

#include "core.h"
#include "trace.h"
#include "walk.h"

/* ---- claimed nodes to the looper ---------------------------------------- */

/* Hand nodes we claimed (REMOVED), chained first .. last through
   aux_next, to the looper for unlinking. */
void dq_push_removals(dq_core *core, dq_node *first, dq_node *last)
{
    /* relaxed: only the CAS's first guess; the CAS publishes */
    dq_node *head = atomic_load_explicit(&core->removals, memory_order_relaxed);
    do {
        last->aux_next = head;
        /* release would do to publish aux_next and our claim to the
           looper's acquire exchange; seq_cst because a barrier removal then
           reads the sleep word (Dekker with the consumer's pre-sleep
           re-check of this list).  Failure relaxed: we retry. */
    } while (!atomic_compare_exchange_weak_explicit(
        &core->removals, &head, first, memory_order_seq_cst, memory_order_relaxed));
}
/* ---- grace periods ------------------------------------------------------ */

/* A walker holds a grace period: the looper recycles nothing it unlinked
   after the walker's epoch began until the walker leaves (DESIGN.md). */
uint64_t dq_walk_begin(dq_core *core)
{
    for (;;) {
        /* seq_cst on the load, the increment and the re-load: a Dekker
           pair with the looper's seq_cst check-then-advance; either it
           sees our count or we see its new epoch and retry */
        uint64_t e = atomic_load_explicit(&core->epoch, memory_order_seq_cst);
        atomic_fetch_add_explicit(&core->walkers[e & 1], 1, memory_order_seq_cst);
        if (atomic_load_explicit(&core->epoch, memory_order_seq_cst) == e)
            return e;
        atomic_fetch_sub_explicit(&core->walkers[e & 1], 1, memory_order_release);
    }
}
void dq_walk_end(dq_core *core, uint64_t e)
{
    /* release: our reads of nodes happen before the looper's acquire load
       of a zero count, after which it recycles them */
    atomic_fetch_sub_explicit(&core->walkers[e & 1], 1, memory_order_release);
}
/* ---- claiming ------------------------------------------------------------ */

bool dq_claim_live(dq_node *n, uint64_t s)
{
    uint64_t gen = dq_state_gen(s);
    /* acq_rel: acquire the payload for on_discard, release our claim to
       the looper's delivery CAS (or a repeating post's re-arm CAS), which
       then fails.  Failure relaxed: we only look at the new state's bits
       before trying again, and the next CAS acquires. */
    while (!atomic_compare_exchange_strong_explicit(
        &n->state, &s, dq_state_with_life(s, DQ_REMOVED), memory_order_acq_rel,
        memory_order_relaxed)) {
        /* Delivered, removed, or recycled: not ours.  A repeating post
           still live in the same generation has only begun or ended a
           delivery meanwhile: try again (each retry follows a step of
           the looper's). */
        if (!dq_node_is_repeating(s) || !dq_state_live(s) || dq_state_gen(s) != gen)
            return false;
    }
    return true;
}

/* ---- claiming by token -------------------------------------------------- */

/* The node for a token if it is q's, and its expected state. */
static dq_node *token_node(dq_queue *q, dq_token tok, uint64_t *state)
{
    dq_node *n = dq_pool_node((uint32_t)(tok & ((UINT64_C(1) << DQ_INDEX_BITS) - 1)));
    if (n == NULL)
        return NULL;
    /* acquire: pairs with post_node's release store of PENDING */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_acquire);
    if (dq_state_gen(s) != tok >> DQ_INDEX_BITS)
        return NULL;
    /* relaxed: set before the PENDING we matched; a newer value means the
       node was reused, and then the state CAS fails anyway */
    if (atomic_load_explicit(&n->owner, memory_order_relaxed) != q)
        return NULL;
    *state = s;
    return n;
}

/* Enter a call that uses the core, as dq_users_enter does, except on the
   consumer's own thread: the core is torn down only on that thread (a
   quitting dq_next) or by the last reference's drop, which cannot run
   while a caller is inside a call, so the consumer needs no count to keep
   it alive and saves the two locked RMWs on the users line (a handler
   cancelling its own messages on its looper, the common case).  Its
   answer once the core is going is the same as everyone's.  *counted
   says which leave is due (core_leave). */
static int core_enter(dq_queue *q, bool *counted)
{
    if (dq_looper_is_self(q)) {
        *counted = false;
        /* relaxed: this thread set the bit itself if it tore the core
           down; a quit by another thread racing with us only means the
           cancel lands just before it, which the teardown (on this
           thread, later) then retires like any other */
        return (atomic_load_explicit(&q->users, memory_order_relaxed) & DQ_USERS_QUIT)
                   ? -ENOENT
                   : 0;
    }
    *counted = true;
    return dq_users_enter(q);
}

static void core_leave(dq_queue *q, bool counted)
{
    if (counted)
        dq_users_leave(q);
}

int dq_claim_token(dq_queue *q, dq_token tok, bool barrier)
{
    if (q == NULL || tok == 0)
        return -EINVAL;
    bool counted;
    /* The core is going (after dq_quit, or once a quit_safely drain has
       ended): every message is gone, dropped by the quit or the teardown,
       which reports it; so is every barrier. */
    if (core_enter(q, &counted) != 0)
        return -ENOENT;
    int err = 0;
    dq_core *core = dq_queue_core(q);
    uint64_t s;
    dq_node *n = token_node(q, tok, &s);
    /* Life before kind: a token whose node is no longer live is stale
       whatever it named, so a removed barrier's token gives -ENOENT at
       once, not -EINVAL until the looper happens to retire the node. */
    if (n == NULL || !dq_state_live(s)) {
        err = -ENOENT;
    } else if (dq_node_is_barrier(s) != barrier) {
        err = barrier ? -ENOENT : -EINVAL;
    } else if (!dq_claim_live(n, s)) {
        err = -ENOENT;
    } else {
        if (!barrier)
            dq_report_discard(q, n);
        if (!barrier && dq_trace_on())
            dq_trace_cancel(q, n->msg.what);
        dq_push_removals(core, n, n);
        if (barrier)
            dq_wake_consumer(q); /* held sync messages may now be due */
    }
    core_leave(q, counted);
    return err;
}

/* ---- claiming what a walk meets ------------------------------------------ */

bool dq_match_walk_take(dq_match_walk *w, dq_node *n, uint64_t s)
{
    if (!w->remove) {
        w->found = 1;
        return true;
    }
    if (dq_claim_live(n, s)) {
        dq_report_discard(w->q, n);
        if (dq_trace_on())
            dq_trace_remove(w->q, n->msg.what);
        /* the node is ours now: chain it for one push at the end */
        n->aux_next = w->first;
        w->first = n;
        if (w->last == NULL)
            w->last = n;
        w->found++;
    }
    return false;
}
/* dq_quit_safely's trim: claim and report every pending message due
   after cut, as dq_remove does.  After the tag the stack is frozen, so this one
   walk meets every accepted message still pending.  Skipped if dq_quit got
   there first: then the teardown drops everything. */
void dq_claim_due_after(dq_queue *q, int64_t cut)
{
    if (dq_users_enter(q) != 0)
        return;
    dq_core *core = dq_queue_core(q);
    dq_match_walk w = { .q = q, .remove = true };
    uint64_t e = dq_walk_begin(core);
    /* seq_cst fence: a repeating post's re-arm moves it from a delivery
       back to PENDING (seq_cst CAS) and then reads the quit tag (seq_cst
       load); the tag (our caller's seq_cst RMW) comes before this fence,
       so either that load sees the tag and the looper ends the post, or
       our state loads below see PENDING and the trim decides (C11's
       fence rule for seq_cst operations: the CAS precedes the fence in
       the single total order, so the loads after it see it) */
    atomic_thread_fence(memory_order_seq_cst);
    for (dq_node *n = dq_walk_first(q); n != NULL; n = dq_walk_next(n)) {
        uint64_t s;
        if (dq_pending_message(n, &s) && dq_node_due(n) > cut)
            (void)dq_match_walk_take(&w, n, s);
    }
    dq_walk_end(core, e);
    if (w.first != NULL)
        dq_push_removals(core, w.first, w.last);
    dq_users_leave(q);
}
