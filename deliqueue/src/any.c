/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Entry points any thread may call: create and references, posting,
 * cancel/remove/has, barriers, idle handlers, quit, snapshots.
 * Nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <deliqueue/msg.h>

#include "queue.h"

/* ---- the live cores ------------------------------------------------------ */

/* Every core from dq_create to its teardown, so that dq_pool_stats can
   count the nodes their loopers hold retired. */
static dq_registry cores = DQ_REGISTRY_INIT;

void dq_core_unregister(dq_core *core)
{
    dq_registry_remove(&cores, &core->reg);
}

int dq_pool_stats(struct dq_pool_stats *out)
{
    if (out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    uint64_t limbo = 0;
    pthread_mutex_lock(&cores.lock);
    /* relaxed: each looper stores its own counts (limbo_count, the
       recycled batch's mask) */
    for (dq_reg_link *l = cores.head; l != NULL; l = l->next) {
        dq_core *c = dq_reg_entry(l, dq_core, reg);
        limbo += atomic_load_explicit(&c->limbo_count, memory_order_relaxed) +
                 (uint64_t)__builtin_popcountll(
                     atomic_load_explicit(&c->recycled.mask, memory_order_relaxed));
    }
    out->queues = cores.count;
    pthread_mutex_unlock(&cores.lock);
    uint64_t reserved, total, free_nodes, cached, threads;
    dq_pool_count(&reserved, &total, &free_nodes, &cached, &threads);
    out->reserved_bytes = reserved;
    out->nodes_total = total;
    out->nodes_free = free_nodes;
    out->nodes_cached = cached;
    out->nodes_limbo = limbo;
    out->threads = threads;
    uint64_t accounted = free_nodes + cached + limbo;
    out->nodes_in_use = total > accounted ? total - accounted : 0;
    return 0;
}

/* ---- create / references ---------------------------------------------- */

dq_queue *dq_create(const dq_options *opts)
{
    if (opts != NULL && opts->idle_spin_ns > DQ_IDLE_SPIN_MAX_NS) {
        errno = EINVAL;
        return NULL;
    }
    dq_queue *q = aligned_alloc(DQ_CACHE_LINE, sizeof(*q));
    dq_core *core = aligned_alloc(DQ_CACHE_LINE, sizeof(*core));
    if (q == NULL || core == NULL)
        goto fail;
    memset(q, 0, sizeof(*q));
    memset(core, 0, sizeof(*core));
    if (dq_event_init(&q->wake) != 0)
        goto fail;
    if (pthread_mutex_init(&q->idle_lock, NULL) != 0) {
        dq_event_fini(&q->wake);
        goto fail;
    }
    atomic_init(&q->top, 0);
    atomic_init(&q->sleep, DQ_AWAKE);
    atomic_init(&q->users, 0);
    atomic_init(&q->refs, 1);
    atomic_init(&q->quit_mode, DQ_RUNNING);
    atomic_init(&q->quit_time, -1);
    atomic_init(&q->consumer, 0);
    if (opts != NULL)
        q->opts = *opts;
    if (q->opts.idle_spin_ns == 0)
        q->opts.idle_spin_ns = DQ_IDLE_SPIN_DEFAULT_NS;

    atomic_init(&core->removals, NULL);
    atomic_init(&core->epoch, 2);
    atomic_init(&core->walkers[0], 0);
    atomic_init(&core->walkers[1], 0);
    dq_heap_init(&core->sync_heap);
    dq_heap_init(&core->async_heap);
    /* both stay positive for 2^62 posts, as dq_key_less requires */
    core->next_seq = INT64_C(1) << 62;
    core->next_front_seq = (INT64_C(1) << 62) - 1;
    dq_pool_batch_init(&core->recycled);
    atomic_init(&core->limbo_count, 0);
    dq_registry_add(&cores, &core->reg);
    atomic_init(&q->core, core);
    return q;
fail:
    free(q);
    free(core);
    errno = ENOMEM;
    return NULL;
}

dq_queue *dq_ref(dq_queue *q)
{
    if (q != NULL) /* relaxed: the caller already holds a reference */
        atomic_fetch_add_explicit(&q->refs, 1, memory_order_relaxed);
    return q;
}

void dq_unref(dq_queue *q)
{
    if (q == NULL)
        return;
    /* acq_rel: the last dropper must see every other holder's writes
       before it tears down (release by them, acquire by it) */
    if (atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) != 1)
        return;
    dq_quit(q);
    /* We hold the only reference, so no other thread is inside a call on
       q: tearing down here is the consumer's job done on its behalf. */
    if (atomic_load_explicit(&q->core, memory_order_acquire) != NULL)
        dq_looper_teardown(q);
    dq_event_fini(&q->wake);
    pthread_mutex_destroy(&q->idle_lock);
    free(q->idle);
    free(q);
}

/* ---- the tagged user count -------------------------------------------- */

int dq_users_enter(dq_queue *q)
{
    uint64_t u = atomic_load_explicit(&q->users, memory_order_relaxed);
    do {
        if (u & DQ_USERS_QUIT)
            return -ESHUTDOWN;
        /* acquire: nothing of the core is read before we are counted;
           pairs with the teardown's release when it set the quit bit */
    } while (!atomic_compare_exchange_weak_explicit(
        &q->users, &u, u + 1, memory_order_acquire, memory_order_relaxed));
    return 0;
}

void dq_users_leave(dq_queue *q)
{
    /* release: our use of the core happens before the teardown that reads
       the count at zero with acquire */
    uint64_t u = atomic_fetch_sub_explicit(&q->users, 1, memory_order_release);
    if (u == (DQ_USERS_QUIT | 1))
        dq_event_signal(&q->wake); /* last one out while quitting */
}

/* ---- posting ------------------------------------------------------------ */

/* Flip the sleep word from the value we read to awake and wake the
   consumer; only the caller whose CAS wins pays for the syscall. */
static void wake_sleeper(dq_queue *q, int64_t seen)
{
    if (atomic_compare_exchange_strong_explicit(&q->sleep, &seen, DQ_AWAKE,
                                                memory_order_seq_cst,
                                                memory_order_relaxed))
        dq_event_signal(&q->wake);
}

void dq_wake_consumer(dq_queue *q)
{
    /* seq_cst: the caller's change (quit tag, barrier removal) came before
       this load in the single total order, and the consumer re-reads both
       after storing its sleep word, so if we read DQ_AWAKE, or our CAS
       loses to a newer sleep word, the consumer is bound to see the change
       itself. */
    int64_t s = atomic_load_explicit(&q->sleep, memory_order_seq_cst);
    if (dq_sleep_word_asleep(s))
        wake_sleeper(q, s);
}

/* Wake the consumer, which we saw asleep in word s, if this message can
   be deliverable before it wakes by itself: it is due before the sleeper's
   deadline and, when a barrier holds the sync messages, it is async or
   sorts before that barrier (due strictly earlier: a sync post with the
   barrier's own due was pushed after it, so it sorts after it).  A front
   post, a post at an earlier when, and a plain post whose clock was read
   before a concurrent barrier post all sort before the barrier.  Out of
   line: a post to a busy looper never comes here.  Returns the post's
   result (0), so the post ends in a tail call. */
static __attribute__((noinline)) int wake_for_post(dq_queue *q, int64_t s,
                                                   int64_t due, bool async)
{
    int64_t deadline = s & ~DQ_HELD;
    if (due >= deadline)
        return 0;
    /* relaxed: ordered after our seq_cst (acquire) load of s, which read
       the consumer's seq_cst (release) store of s, made after it stored
       held_due; a newer value is a later sleep's, whose re-read of top
       after its own store sees our push (we read s before that store) */
    if ((s & DQ_HELD) && !async &&
        due >= atomic_load_explicit(&q->held_due, memory_order_relaxed))
        return 0;
    wake_sleeper(q, s);
    return 0;
}

/* The push met the quit tag: the node was not accepted; take it back.
   Its generation was never handed out, so only a guessed token can have
   claimed it; then it was accepted and cancelled, and the discard is
   reported.  Out of line, as wake_for_post. */
static __attribute__((noinline)) int post_refused(dq_node *n, uint64_t gen,
                                                  bool barrier, dq_token *tok)
{
    uint64_t s = dq_state_make(gen, barrier, DQ_PENDING);
    if (!atomic_compare_exchange_strong_explicit(
            &n->state, &s, dq_state_make(gen, barrier, DQ_FREE),
            memory_order_relaxed, memory_order_relaxed)) {
        if (tok != NULL)
            *tok = dq_node_token(n, gen);
        return 0;
    }
    dq_pool_unget(n);
    return -ESHUTDOWN;
}

/* Where this thread's last push on a queue had to retry its CAS, the top
   it then installed: the expected value of its next push CAS there.  With
   producers contending the guess is usually wrong, and then the failing
   CAS has fetched the line for ownership along with the current top, so
   the retry usually wins at once; loading top first would fetch the line
   shared and then again for ownership, two transfers per push (queue_bench,
   2-producer inserts).  An uncontended push loads top as usual and stores
   nothing here.  Only a guess: the CAS validates it, and a push is immune
   to ABA. */
static _Thread_local struct {
    const dq_queue *q; /* NULL: no contention seen on the last push */
    uintptr_t       top;
} contended_push;

/* A push succeeded: hand out the token and wake a sleeping consumer.
   Returns the post's result (0). */
static inline __attribute__((always_inline)) int
post_pushed(dq_node *n, dq_queue *q, const dq_msg *m, int64_t due,
            uint64_t gen, dq_token *tok)
{
    if (tok != NULL)
        *tok = dq_node_token(n, gen);
    /* seq_cst: with the push CAS before it this is one half of a Dekker
       pair; the consumer stores its sleep word and then re-reads the top
       (both seq_cst), so either it sees our node or we see it asleep. */
    int64_t s = atomic_load_explicit(&q->sleep, memory_order_seq_cst);
    if (__builtin_expect(dq_sleep_word_asleep(s), 0))
        return wake_for_post(q, s, due, m != NULL && (m->flags & DQ_ASYNC));
    return 0;
}

/* The push CAS failed (another producer pushed first, or a spurious
   failure): retry with the top it returned, then remember the top we
   installed for this thread's next push here (contended_push).  Out of
   line, as post_refused. */
static __attribute__((noinline)) int
post_push_contended(dq_node *n, dq_queue *q, const dq_msg *m, int64_t due,
                    bool barrier, uint64_t gen, uintptr_t top, dq_token *tok)
{
    for (;;) {
        if (__builtin_expect(top & DQ_TOP_QUIT, 0))
            return post_refused(n, gen, barrier, tok);
        atomic_store_explicit(&n->next, dq_top_node(top), memory_order_relaxed);
        /* seq_cst, relaxed on failure: as in post_node_with */
        if (atomic_compare_exchange_weak_explicit(&q->top, &top, (uintptr_t)n,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
            break;
    }
    contended_push.q = q;
    contended_push.top = (uintptr_t)n;
    return post_pushed(n, q, m, due, gen, tok);
}

/* Every post, once it has node n.  Inlined into its callers; every rare
   path leaves by a tail call, so the common case is straight-line code
   around the one CAS with no value kept across a call, and it stores
   nothing but the node's line 0, the cache head, the contention note and
   the top.  On x86 the locked CAS lets no later
   instruction overlap it, so a post costs the CAS plus its instruction
   count: every instruction on this path counts (bench/push_decomp). */
static inline __attribute__((always_inline)) int
post_node_with(dq_node *n, dq_queue *q, const dq_msg *m, int64_t due,
               bool barrier, dq_token *tok)
{
    /* The node is ours until the push: plain writes, published by the
       push CAS (release). */
    uint64_t gen = dq_state_gen(atomic_load_explicit(&n->state,
                                                     memory_order_relaxed));
    dq_node_set_msg(n, m);
    n->due = due;
    /* relaxed: read only by dq_cancel after it has matched the generation
       with an acquire load of state, which this store precedes.  Stored
       only when it changes, so the common post writes no line but line
       0; an unchanged owner is the value any canceller of this
       generation must see anyway (it was stored before the release that
       handed the node to the looper, and so to the pool and to us). */
    if (atomic_load_explicit(&n->owner, memory_order_relaxed) != q)
        atomic_store_explicit(&n->owner, q, memory_order_relaxed);
    /* release: a canceller that acquires PENDING (via a token) sees the
       payload; the looper and walkers see it through the push below */
    atomic_store_explicit(&n->state, dq_state_make(gen, barrier, DQ_PENDING),
                          memory_order_release);

    uintptr_t top = contended_push.q == q
                        ? contended_push.top
                        : atomic_load_explicit(&q->top, memory_order_relaxed);
    if (__builtin_expect(top & DQ_TOP_QUIT, 0))
        return post_refused(n, gen, barrier, tok);
    /* top is a node pointer now (no tag bit): no mask */
    atomic_store_explicit(&n->next, (dq_node *)top, memory_order_relaxed);
    /* seq_cst (a release RMW at least): publishes the node to the
       looper's and walkers' acquire loads of top, and orders the push
       before our read of the sleep word (Dekker, post_pushed).  Failure:
       relaxed, the retry only needs the fresh top. */
    if (__builtin_expect(!atomic_compare_exchange_weak_explicit(
                             &q->top, &top, (uintptr_t)n, memory_order_seq_cst,
                             memory_order_relaxed), 0))
        return post_push_contended(n, q, m, due, barrier, gen, top, tok);
    contended_push.q = NULL; /* one store: cheaper here than a test */
    return post_pushed(n, q, m, due, gen, tok);
}

/* The pool cache ran dry: refill it, then post (a tail call from post_node). */
static __attribute__((noinline)) int
post_node_refill(dq_queue *q, const dq_msg *m, int64_t due, bool barrier,
                 dq_token *tok)
{
    dq_node *n = dq_pool_get_slow();
    if (n == NULL)
        return -ENOMEM;
    return post_node_with(n, q, m, due, barrier, tok);
}

static inline __attribute__((always_inline)) int
post_node(dq_queue *q, const dq_msg *m, int64_t due, bool barrier, dq_token *tok)
{
    if (__builtin_expect(dq_pool_cache_empty(), 0))
        return post_node_refill(q, m, due, barrier, tok);
    return post_node_with(dq_pool_take_cached(), q, m, due, barrier, tok);
}

int dq_post_at(dq_queue *q, const dq_msg *m, int64_t when, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0 || when < 0)
        return -EINVAL;
    return post_node(q, m, when == 0 ? DQ_KEY_FRONT : when, false, tok);
}

int dq_post(dq_queue *q, const dq_msg *m, dq_token *tok)
{
    return dq_post_at(q, m, dq_now(), tok);
}

int dq_post_delayed(dq_queue *q, const dq_msg *m, int64_t delay, dq_token *tok)
{
    return dq_post_at(q, m, dq_when_after(dq_now(), delay), tok);
}

int dq_post_at_front(dq_queue *q, const dq_msg *m, dq_token *tok)
{
    return dq_post_at(q, m, 0, tok);
}

int dq_post_sync_barrier(dq_queue *q, dq_token *tok)
{
    if (q == NULL)
        return -EINVAL;
    int64_t now = dq_now();
    return post_node(q, NULL, now, true, tok);
}

/* ---- claiming ----------------------------------------------------------- */

void dq_report_discard(dq_queue *q, const dq_node *n)
{
    if (q->opts.on_discard != NULL) {
        dq_msg copy;
        dq_node_msg(n, &copy);
        q->opts.on_discard(&copy, q->opts.ctx);
    }
}

/* Hand nodes we claimed (REMOVED), chained first .. last through
   aux_next, to the looper for unlinking. */
static void push_removals(dq_core *core, dq_node *first, dq_node *last)
{
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

static void push_removal(dq_core *core, dq_node *n)
{
    push_removals(core, n, n);
}

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
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
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
        push_removal(core, n);
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

/* A walker holds a grace period: the looper recycles nothing it unlinked
   after the walker's epoch began until the walker leaves (DESIGN.md). */
static uint64_t walk_begin(dq_core *core)
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

static void walk_end(dq_core *core, uint64_t e)
{
    /* release: our reads of nodes happen before the looper's acquire load
       of a zero count, after which it recycles them */
    atomic_fetch_sub_explicit(&core->walkers[e & 1], 1, memory_order_release);
}

static dq_node *walk_first(dq_queue *q)
{
    /* acquire: pairs with the push CAS, so the node's payload is visible */
    return dq_top_node(atomic_load_explicit(&q->top, memory_order_acquire));
}

static dq_node *walk_next(dq_node *n)
{
    /* acquire: the link was written by a producer before its push or by
       the looper (release) when it unlinked the node in between */
    return atomic_load_explicit(&n->next, memory_order_acquire);
}

static bool pending_message(dq_node *n, uint64_t *state)
{
    /* acquire: a node met through the stack is already published; this
       orders the payload reads after the life check */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_acquire);
    *state = s;
    return dq_state_life(s) == DQ_PENDING && !dq_node_is_barrier(s);
}

/* What a matching walk does with each pending message it meets. */
typedef struct match_walk {
    dq_queue       *q;
    const dq_match *match;
    bool            remove;      /* else stop at the first match (dq_has) */
    size_t          found;
    dq_node        *first, *last; /* claimed, chained through aux_next */
} match_walk;

/* A pending message that matches: what every node of the walk is asked
   (inline: it runs once per pending message). */
static inline bool match_walk_hit(const dq_match *match, dq_node *n, uint64_t *s)
{
    return pending_message(n, s) && dq_node_matches(match, n);
}

/* A hit: claim it (dq_remove) or stop (dq_has).  Returns whether the walk
   is over. */
static bool match_walk_take(match_walk *w, dq_node *n, uint64_t s)
{
    if (!w->remove) {
        w->found = 1;
        return true;
    }
    /* acq_rel as in claim_token */
    if (atomic_compare_exchange_strong_explicit(
            &n->state, &s, dq_state_with_life(s, DQ_REMOVED),
            memory_order_acq_rel, memory_order_relaxed)) {
        dq_report_discard(w->q, n);
        /* the node is ours now: chain it for one push at the end */
        n->aux_next = w->first;
        w->first = n;
        if (w->last == NULL)
            w->last = n;
        w->found++;
    }
    return false;
}

/* On the consumer's own thread between looper steps, the pending messages
   are the unswept posts (the top down to the boundary) and the members of
   the heaps, and nothing can be retired under the walk: so no grace
   period, and the heaps' slot arrays, read in order with the nodes
   prefetched ahead, replace the serial chase through the whole stack
   (bench/queue_bench, remove at depth). */
#define MATCH_PREFETCH_AHEAD 16u

/* One heap member: a hit is claimed (or ends a dq_has).  A member's
   payload is the one its sweep acquired and stays so until this thread
   retires it, so match first and read the state only for a hit (a
   barrier, with no target, never matches).  True when the walk is over. */
static inline bool match_walk_member(match_walk *w, const dq_match *match,
                                     dq_heap_elem *e)
{
    if (e == NULL)
        return false; /* a hole in the due run */
    dq_node *n = dq_node_of_heap(e);
    uint64_t s;
    return dq_node_matches(match, n) && pending_message(n, &s) && match_walk_take(w, n, s);
}

/* A segment of heap slots: the loop a remove at depth spends its time in,
   so a pointer walk, with the prefetch bound hoisted out of it. */
static bool match_walk_slots(match_walk *w, const dq_match *match, dq_heap_segment seg)
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

static void match_walk_on_looper(match_walk *w, dq_core *core)
{
    /* a private copy: no store of the walk can alias it, so its fields
       stay in registers across the loops */
    const dq_match match = *w->match;
    uint64_t s;
    for (dq_node *n = walk_first(w->q); n != core->boundary; n = walk_next(n))
        if (match_walk_hit(&match, n, &s) && match_walk_take(w, n, s))
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

static size_t match_walk_run(dq_queue *q, const dq_match *match, bool remove)
{
    if (q == NULL || dq_match_check(match) != 0 || dq_users_enter(q) != 0)
        return 0;
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
    match_walk w = { .q = q, .match = match, .remove = remove };
    if (dq_looper_is_self(q)) {
        match_walk_on_looper(&w, core);
    } else {
        uint64_t e = walk_begin(core);
        uint64_t s;
        for (dq_node *n = walk_first(q); n != NULL; n = walk_next(n))
            if (match_walk_hit(match, n, &s) && match_walk_take(&w, n, s))
                break;
        walk_end(core, e);
    }
    if (w.first != NULL)
        push_removals(core, w.first, w.last);
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
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
    uint64_t e = walk_begin(core);
    size_t count = 0;
    for (dq_node *n = walk_first(q); n != NULL; n = walk_next(n)) {
        uint64_t s;
        count += pending_message(n, &s);
    }
    walk_end(core, e);
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
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
    uint64_t e = walk_begin(core);
    int64_t now = dq_now();
    /* first pass: the earliest barrier (smallest due; among equals the
       oldest, i.e. the deepest) */
    int64_t barrier_due = INT64_MAX;
    size_t barrier_depth = 0, depth = 0;
    bool have_barrier = false;
    for (dq_node *n = walk_first(q); n != NULL; n = walk_next(n), depth++) {
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
    for (dq_node *n = walk_first(q); n != NULL && idle; n = walk_next(n), depth++) {
        uint64_t s;
        if (!pending_message(n, &s) || n->due > now)
            continue;
        bool held = have_barrier && !(n->msg.flags & DQ_ASYNC) &&
                    (n->due > barrier_due ||
                     (n->due == barrier_due && depth < barrier_depth));
        idle = held;
    }
    walk_end(core, e);
    dq_users_leave(q);
    return idle;
}

/* ---- idle handlers ------------------------------------------------------ */

int dq_add_idle_handler(dq_queue *q, bool (*fn)(void *ctx), void *ctx)
{
    if (q == NULL || fn == NULL)
        return -EINVAL;
    /* relaxed: advisory; a handler added while quitting is never run and
       is freed with the handle.  The tag: dq_quit_safely raises the mode
       only after it. */
    if ((atomic_load_explicit(&q->top, memory_order_relaxed) & DQ_TOP_QUIT) ||
        atomic_load_explicit(&q->quit_mode, memory_order_relaxed) != DQ_RUNNING)
        return -ESHUTDOWN;
    int err = 0;
    pthread_mutex_lock(&q->idle_lock);
    if (q->idle_count == q->idle_capacity) {
        size_t cap = q->idle_capacity ? q->idle_capacity * 2 : 4;
        dq_idle_handler *a = realloc(q->idle, cap * sizeof(*a));
        if (a == NULL) {
            err = -ENOMEM;
            goto out;
        }
        q->idle = a;
        q->idle_capacity = cap;
    }
    q->idle[q->idle_count++] = (dq_idle_handler){ fn, ctx };
out:
    pthread_mutex_unlock(&q->idle_lock);
    return err;
}

int dq_remove_idle_handler(dq_queue *q, bool (*fn)(void *ctx), void *ctx)
{
    if (q == NULL || fn == NULL)
        return -EINVAL;
    int err = -ENOENT;
    pthread_mutex_lock(&q->idle_lock);
    for (size_t i = 0; i < q->idle_count; i++) {
        if (q->idle[i].fn == fn && q->idle[i].ctx == ctx) {
            memmove(&q->idle[i], &q->idle[i + 1],
                    (q->idle_count - i - 1) * sizeof(q->idle[0]));
            q->idle_count--;
            err = 0;
            break;
        }
    }
    pthread_mutex_unlock(&q->idle_lock);
    return err;
}

/* ---- quitting ----------------------------------------------------------- */

/* Raise q's quit mode to at least mode.  seq_cst: a release, so that the
   consumer's acquire of the mode sees what the quitting thread did
   before (nothing it needs: the trim's claims reach it through the
   removal list); and, for quit_safely, the first half of a Dekker pair
   whose second is the wake's seq_cst load of the sleep word, against
   looper_await_quit_mode's store of the word and re-read of the mode. */
static void raise_quit_mode(dq_queue *q, int mode)
{
    int old = atomic_load_explicit(&q->quit_mode, memory_order_relaxed);
    while (old < mode &&
           !atomic_compare_exchange_weak_explicit(&q->quit_mode, &old, mode,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
        ;
}

/* Set the quit tag: after this no push can succeed (its CAS sees the tag),
   so a post is accepted iff its CAS came first.  seq_cst: the Dekker pair
   with the sleeping consumer (its re-read of top after storing its sleep
   word; our load of the word in dq_wake_consumer). */
static void tag_top(dq_queue *q)
{
    atomic_fetch_or_explicit(&q->top, DQ_TOP_QUIT, memory_order_seq_cst);
}

/* dq_quit: the mode before the tag, so a consumer that sees the tag sees
   DQ_QUIT_NOW; then removers and walkers are shut out (the core is going:
   every message is dropped by the teardown). */
void dq_quit(dq_queue *q)
{
    if (q == NULL)
        return;
    raise_quit_mode(q, DQ_QUIT_NOW);
    tag_top(q);
    /* acq_rel: new removers and walkers back off from here on */
    atomic_fetch_or_explicit(&q->users, DQ_USERS_QUIT, memory_order_acq_rel);
    dq_wake_consumer(q);
}

/* quit_safely's trim: claim and report every pending message due after
   cut, as dq_remove does.  After the tag the stack is frozen, so this one
   walk meets every accepted message still pending.  Skipped if dq_quit got
   there first: then the teardown drops everything. */
static void quit_safely_trim(dq_queue *q, int64_t cut)
{
    if (dq_users_enter(q) != 0)
        return;
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
    match_walk w = { .q = q, .remove = true };
    uint64_t e = walk_begin(core);
    for (dq_node *n = walk_first(q); n != NULL; n = walk_next(n)) {
        uint64_t s;
        if (pending_message(n, &s) && n->due > cut)
            (void)match_walk_take(&w, n, s);
    }
    walk_end(core, e);
    if (w.first != NULL)
        push_removals(core, w.first, w.last);
    dq_users_leave(q);
}

/* dq_quit_safely: the tag, then the cut-off time, then the trim, then the
   mode.  Every accepted post read its clock before its push, which came
   before the tag, which comes before our clock read: so every message
   accepted due by "now" is due by the cut-off and is delivered, never
   trimmed.  A consumer that sees the tag waits for the mode
   (looper_await_quit_mode), so it does not deliver what the trim is about
   to drop (a delivery whose step began before the tag may still land
   first; the trim's claim then fails, and that message is delivered
   once).  Removers keep
   working through the drain: only the teardown that ends it shuts them
   out. */
void dq_quit_safely(dq_queue *q)
{
    if (q == NULL)
        return;
    tag_top(q);
    int64_t now = dq_now(), cut = -1;
    /* relaxed: only quit_safely callers read it, each through its own RMW
       on it.  The first quit_safely's time stands (a failed CAS leaves it
       in cut); a racing one trims with it too. */
    if (atomic_compare_exchange_strong_explicit(&q->quit_time, &cut, now,
                                                memory_order_relaxed,
                                                memory_order_relaxed))
        cut = now;
    quit_safely_trim(q, cut);
    raise_quit_mode(q, DQ_QUIT_SAFELY);
    dq_wake_consumer(q);
}


