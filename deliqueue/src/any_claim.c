/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: claiming pending messages (cancel by token and barrier
 * removal, which dq_call's timeout shares from core_walk.c; removal by
 * criteria) and the read-only walks (dq_has, dq_pending, dq_is_idle).  A
 * claim is one CAS on the node's state, PENDING to REMOVED, racing the
 * looper's PENDING to DELIVERED: exactly one wins (a repeating post is
 * also claimed in a delivery, DELIVERED to REMOVED, racing its re-arm).
 * Claimed nodes go to the looper on the removal list (core_walk.c).  On
 * the consumer's own thread a match walk hands over to
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
#include "walk.h"

/* ---- claiming by token (core_walk.c) ------------------------------------ */

int dq_cancel(dq_queue *q, dq_token tok)
{
    return dq_claim_token(q, tok, false);
}

int dq_remove_sync_barrier(dq_queue *q, dq_token tok)
{
    return dq_claim_token(q, tok, true);
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
        count += dq_live_message(n, &s);
    }
    dq_walk_end(core, e);
    dq_users_leave(q);
    return count;
}

/* Idle: nothing deliverable is due (a repeating post in a delivery has
   no occurrence armed, so it is not due).  A due sync message is held when a
   pending barrier comes before it in (due, insertion) order; the stack
   lists nodes newest first, so "inserted before" is "further down". */
bool dq_is_idle(dq_queue *q)
{
    if (q == NULL || dq_users_enter(q) != 0)
        return true;
    dq_core *core = dq_queue_core(q);
    uint64_t e = dq_walk_begin(core);
    int64_t now = dq_queue_time(q);
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
            (!have_barrier || dq_node_due(n) <= barrier_due)) {
            have_barrier = true;
            barrier_due = dq_node_due(n);
            barrier_depth = depth;
        }
    }
    bool idle = true;
    depth = 0;
    for (dq_node *n = dq_walk_first(q); n != NULL && idle;
         n = dq_walk_next(n), depth++) {
        uint64_t s;
        if (!dq_pending_message(n, &s))
            continue;
        int64_t due = dq_node_due(n);
        if (due > now)
            continue;
        bool held =
            have_barrier && !(n->msg.flags & DQ_ASYNC) &&
            (due > barrier_due || (due == barrier_due && depth < barrier_depth));
        idle = held;
    }
    dq_walk_end(core, e);
    dq_users_leave(q);
    return idle;
}
