/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor below both sides (walk.h): what a walk of the stack from any
 * thread (any_claim.c, the quit_safely trim) and the consumer's own walk
 * of its heaps (looper_walk.c) share: the walker's grace period, claiming
 * a hit, and handing claimed nodes to the looper on the removal list.
 * Nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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
/* ---- claiming what a walk meets ------------------------------------------ */

bool dq_match_walk_take(dq_match_walk *w, dq_node *n, uint64_t s)
{
    if (!w->remove) {
        w->found = 1;
        return true;
    }
    /* acq_rel as in claim_token */
    if (atomic_compare_exchange_strong_explicit(
            &n->state, &s, dq_state_with_life(s, DQ_REMOVED), memory_order_acq_rel,
            memory_order_relaxed)) {
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
    for (dq_node *n = dq_walk_first(q); n != NULL; n = dq_walk_next(n)) {
        uint64_t s;
        if (dq_pending_message(n, &s) && n->due > cut)
            (void)dq_match_walk_take(&w, n, s);
    }
    dq_walk_end(core, e);
    if (w.first != NULL)
        dq_push_removals(core, w.first, w.last);
    dq_users_leave(q);
}
