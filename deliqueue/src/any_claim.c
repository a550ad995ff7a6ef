/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: claiming pending messages (cancel by token, barrier removal,
 * removal by criteria, the quit_safely trim) and the read-only walks
 * (dq_has, dq_pending, dq_is_idle).  A claim is one CAS on the node's
 * state, PENDING to REMOVED, racing the looper's PENDING to DELIVERED:
 * exactly one wins.  Claimed nodes go to the looper on the removal list
 * (core_walk.c).  On the consumer's own thread a match walk hands over to
 * dq_looper_match_walk (looper_walk.c), the one call from an any-thread
 * file into a consumer-only one; nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "looper_walk.h"
#include "trace.h"
#include "walk.h"

/* ---- claiming ----------------------------------------------------------- */

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

static int claim_token(dq_queue *q, dq_token tok, bool barrier)
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
    /* Life before kind: a token whose node is no longer pending is stale
       whatever it named, so a removed barrier's token gives -ENOENT at
       once, not -EINVAL until the looper happens to retire the node. */
    if (n == NULL || dq_state_life(s) != DQ_PENDING) {
        err = -ENOENT;
    } else if (dq_node_is_barrier(s) != barrier) {
        err = barrier ? -ENOENT : -EINVAL;
    } else if (/* acq_rel: acquire the payload for on_discard, release our
                  claim to the looper's delivery CAS, which then fails */
               !atomic_compare_exchange_strong_explicit(
                   &n->state, &s, dq_state_with_life(s, DQ_REMOVED),
                   memory_order_acq_rel, memory_order_relaxed)) {
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

int dq_cancel(dq_queue *q, dq_token tok)
{
    return claim_token(q, tok, false);
}

int dq_remove_sync_barrier(dq_queue *q, dq_token tok)
{
    return claim_token(q, tok, true);
}

/* ---- walking the stack -------------------------------------------------- */

static size_t match_walk_run(dq_queue *q, const dq_match *match, bool remove)
{
    if (q == NULL || dq_match_check(match) != 0 || dq_users_enter(q) != 0)
        return 0;
    dq_core *core = dq_queue_core(q);
    dq_match_walk w = { .q = q, .match = match, .remove = remove };
    if (dq_looper_is_self(q)) {
        dq_looper_match_walk(&w, core);
    } else {
        uint64_t e = dq_walk_begin(core);
        uint64_t s;
        for (dq_node *n = dq_walk_first(q); n != NULL; n = dq_walk_next(n))
            if (dq_match_walk_hit(match, n, &s) && dq_match_walk_take(&w, n, s))
                break;
        dq_walk_end(core, e);
    }
    if (w.first != NULL)
        dq_push_removals(core, w.first, w.last);
    dq_users_leave(q);
    return w.found;
}

size_t dq_remove(dq_queue *q, const dq_match *match)
{
    return match_walk_run(q, match, true);
}

bool dq_has(dq_queue *q, const dq_match *match)
{
    return match_walk_run(q, match, false) != 0;
}

size_t dq_pending(dq_queue *q)
{
    if (q == NULL || dq_users_enter(q) != 0)
        return 0;
    dq_core *core = dq_queue_core(q);
    uint64_t e = dq_walk_begin(core);
    size_t count = 0;
    for (dq_node *n = dq_walk_first(q); n != NULL; n = dq_walk_next(n)) {
        uint64_t s;
        count += dq_pending_message(n, &s);
    }
    dq_walk_end(core, e);
    dq_users_leave(q);
    return count;
}

/* Idle: nothing deliverable is due.  A due sync message is held when a
   pending barrier comes before it in (due, insertion) order; the stack
   lists nodes newest first, so "inserted before" is "further down". */
bool dq_is_idle(dq_queue *q)
{
    if (q == NULL || dq_users_enter(q) != 0)
        return true;
    dq_core *core = dq_queue_core(q);
    uint64_t e = dq_walk_begin(core);
    int64_t now = dq_now();
    /* first pass: the earliest barrier (smallest due; among equals the
       oldest, i.e. the deepest) */
    int64_t barrier_due = INT64_MAX;
    size_t barrier_depth = 0, depth = 0;
    bool have_barrier = false;
    for (dq_node *n = dq_walk_first(q); n != NULL; n = dq_walk_next(n), depth++) {
        /* acquire: as in dq_pending_message, the due read after it is
           the payload of the generation whose life we checked */
        uint64_t s = atomic_load_explicit(&n->state, memory_order_acquire);
        if (dq_state_life(s) == DQ_PENDING && dq_node_is_barrier(s) &&
            (!have_barrier || n->due <= barrier_due)) {
            have_barrier = true;
            barrier_due = n->due;
            barrier_depth = depth;
        }
    }
    bool idle = true;
    depth = 0;
    for (dq_node *n = dq_walk_first(q); n != NULL && idle;
         n = dq_walk_next(n), depth++) {
        uint64_t s;
        if (!dq_pending_message(n, &s) || n->due > now)
            continue;
        bool held =
            have_barrier && !(n->msg.flags & DQ_ASYNC) &&
            (n->due > barrier_due || (n->due == barrier_due && depth < barrier_depth));
        idle = held;
    }
    dq_walk_end(core, e);
    dq_users_leave(q);
    return idle;
}
