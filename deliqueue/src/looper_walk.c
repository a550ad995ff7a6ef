/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Consumer only: dq_remove and dq_has called on the queue's own consumer
 * thread, between looper steps.  Reads the looper-only boundary and heaps.
 */
#include "looper_walk.h"
#include "walk.h"

/* On the consumer's own thread between looper steps, the live messages
   are the unswept posts (the top down to the boundary), the members of
   the heaps and a repeating post in a delivery (core->in_flight), and
   nothing can be retired under the walk: so no grace period, and the
   heaps' slot arrays, read in order with the nodes prefetched ahead,
   replace the serial chase through the whole stack (bench/queue_bench,
   remove at depth). */
#define MATCH_PREFETCH_AHEAD 16u

/* One heap member: a hit is claimed (or ends a dq_has).  A member's
   payload is the one its sweep acquired and stays so until this thread
   retires it, so match first and read the state only for a hit (a
   barrier, with no target, never matches).  True when the walk is over. */
static inline bool match_walk_member(dq_match_walk *w, const dq_match *match,
                                     dq_heap_elem *e)
{
    if (e == NULL)
        return false; /* a hole in the due run */
    dq_node *n = dq_node_of_heap(e);
    uint64_t s;
    return dq_node_matches(match, n) && dq_live_message(n, &s) &&
           dq_match_walk_take(w, n, s);
}

/* A segment of heap slots: the loop a remove at depth spends its time in,
   so a pointer walk, with the prefetch bound hoisted out of it. */
static bool match_walk_slots(dq_match_walk *w, const dq_match *match,
                             dq_heap_segment seg)
{
    const dq_heap_slot *s = seg.slots, *end = seg.slots + seg.n;
    if (seg.n > MATCH_PREFETCH_AHEAD)
        for (; s < end - MATCH_PREFETCH_AHEAD; s++) {
            dq_heap_elem *ahead = s[MATCH_PREFETCH_AHEAD].elem;
            if (ahead != NULL)
                __builtin_prefetch(dq_node_of_heap(ahead));
            if (match_walk_member(w, match, s->elem))
                return true;
        }
    for (; s < end; s++)
        if (match_walk_member(w, match, s->elem))
            return true;
    return false;
}

void dq_looper_match_walk(dq_match_walk *w, dq_core *core)
{
    /* a private copy: no store of the walk can alias it, so its fields
       stay in registers across the loops */
    const dq_match match = *w->match;
    uint64_t s;
    for (dq_node *n = dq_walk_first(w->q); n != core->boundary; n = dq_walk_next(n))
        if (dq_match_walk_hit(&match, n, &s) && dq_match_walk_take(w, n, s))
            return;
    /* a repeating post in a delivery is in neither part: live all the
       same (a handler may remove its own repeating post) */
    dq_node *f = core->in_flight;
    if (f != NULL && dq_match_walk_hit(&match, f, &s) && dq_match_walk_take(w, f, s))
        return;
    const dq_heap *heaps[2] = { &core->sync_heap, &core->async_heap };
    for (int h = 0; h < 2; h++) {
        dq_heap_segment seg[3];
        int k = dq_heap_segments(heaps[h], seg);
        for (int i = 0; i < k; i++)
            if (match_walk_slots(w, &match, seg[i]))
                return;
    }
}
