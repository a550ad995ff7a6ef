/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: posting.  A post takes a node from
 * the thread's pool cache, fills it, pushes it onto the queue's stack with
 * one CAS, and wakes the consumer only if it sleeps and the message is
 * due before it would wake.  Repeating posts are one node that the
 * looper re-arms.  dq_invoke and dq_call run their function inline on
 * the consumer's own thread, and elsewhere post it (invoke.h); dq_call
 * then waits on its record.  Nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core.h"
#include "invoke.h"
#include "pool.h"
#include "trace.h"
#include "walk.h"

/* ---- posting ------------------------------------------------------------ */

/* Wake the consumer, which we saw asleep in word s, if this message can
   be deliverable before it wakes by itself: it is due before the sleeper's
   deadline and, when a barrier holds the sync messages, it is async or
   sorts before that barrier (due strictly earlier: a sync post with the
   barrier's own due was pushed after it, so it sorts after it).  A front
   post, a post at an earlier when, and a plain post whose clock was read
   before a concurrent barrier post all sort before the barrier.  Out of
   line: a post to a busy looper never comes here.  Returns the post's
   result (0), so the post ends in a tail call. */
static __attribute__((noinline)) int wake_for_post(dq_queue *q, int64_t s, int64_t due,
                                                   bool async)
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
    dq_wake_sleeper(q, s);
    return 0;
}

/* The push met the quit tag: the node was not accepted; take it back.
   Its generation was never handed out, so only a guessed token can have
   claimed it; then it was accepted and cancelled, and the discard is
   reported.  Out of line, as wake_for_post. */
static __attribute__((noinline)) int post_refused(dq_node *n, uint64_t gen,
                                                  uint64_t kind, dq_token *tok)
{
    uint64_t s = dq_state_make(gen, kind, DQ_PENDING);
    /* relaxed: the node was never published, so no payload passes
       through this CAS; it only decides between us and a guessed token's
       claim (acq_rel there), which already read what it reports */
    if (!atomic_compare_exchange_strong_explicit(
            &n->state, &s, dq_state_make(gen, kind, DQ_FREE), memory_order_relaxed,
            memory_order_relaxed)) {
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
struct contended_push {
    const dq_queue *q; /* NULL: no contention seen on the last push */
    uintptr_t top;
};
static DQ_THREAD_LOCAL(struct contended_push, contended_push);

/* A push succeeded: hand out the token and wake a sleeping consumer.
   Returns the post's result (0). */
static inline __attribute__((always_inline)) int post_pushed(dq_node *n, dq_queue *q,
                                                             const dq_msg *m,
                                                             int64_t due, uint64_t gen,
                                                             dq_token *tok)
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
static __attribute__((noinline)) int post_push_contended(dq_node *n, dq_queue *q,
                                                         const dq_msg *m, int64_t due,
                                                         uint64_t kind, uint64_t gen,
                                                         uintptr_t top, dq_token *tok)
{
    for (;;) {
        if (__builtin_expect(top & DQ_TOP_QUIT, 0))
            return post_refused(n, gen, kind, tok);
        /* relaxed: published by the push CAS (release) below */
        atomic_store_explicit(&n->next, dq_top_node(top), memory_order_relaxed);
        /* seq_cst, relaxed on failure: as in post_node_with */
        if (atomic_compare_exchange_weak_explicit(&q->top, &top, (uintptr_t)n,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
            break;
    }
    DQ_TLS(contended_push).q = q;
    DQ_TLS(contended_push).top = (uintptr_t)n;
    return post_pushed(n, q, m, due, gen, tok);
}

/* A repeating post's schedule (NULL for every other post). */
typedef struct post_repeat {
    int64_t period;
    uint32_t mode;
} post_repeat;

/* Every post, once it has node n.  kind: 0, DQ_STATE_BARRIER or
   DQ_STATE_REPEAT (then rep is its schedule).  Inlined into its callers,
   where kind and rep are constants; every rare
   path leaves by a tail call, so the common case is straight-line code
   around the one CAS with no value kept across a call, and it stores
   nothing but the node's line 0, the cache head, the contention note and
   the top.  On x86 the locked CAS lets no later
   instruction overlap it, so a post costs the CAS plus its instruction
   count: every instruction on this path counts (bench/push_decomp). */
static inline __attribute__((always_inline)) int
post_node_with(dq_node *n, dq_queue *q, const dq_msg *m, int64_t due, uint64_t kind,
               const post_repeat *rep, dq_token *tok)
{
    /* The node is ours until the push: plain writes, published by the
       push CAS (release). */
    uint64_t gen = dq_state_gen(atomic_load_explicit(&n->state, memory_order_relaxed));
    dq_node_set_msg(n, m);
    /* relaxed: published by the push CAS, as the payload */
    atomic_store_explicit(&n->due, due, memory_order_relaxed);
    if (rep != NULL) { /* line 1, which only a repeating post writes */
        n->period = rep->period;
        n->repeat_mode = rep->mode;
    }
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
    atomic_store_explicit(&n->state, dq_state_make(gen, kind, DQ_PENDING),
                          memory_order_release);

    uintptr_t top = DQ_TLS(contended_push).q == q
                        ? DQ_TLS(contended_push).top
                        : atomic_load_explicit(&q->top, memory_order_relaxed);
    if (__builtin_expect(top & DQ_TOP_QUIT, 0))
        return post_refused(n, gen, kind, tok);
    /* top is a node pointer now (no tag bit): no mask.  relaxed: published
       by the push CAS (release) below */
    atomic_store_explicit(&n->next, (dq_node *)top, memory_order_relaxed);
    /* seq_cst (a release RMW at least): publishes the node to the
       looper's and walkers' acquire loads of top, and orders the push
       before our read of the sleep word (Dekker, post_pushed).  Failure:
       relaxed, the retry only needs the fresh top. */
    if (__builtin_expect(!atomic_compare_exchange_weak_explicit(
                             &q->top, &top, (uintptr_t)n, memory_order_seq_cst,
                             memory_order_relaxed),
                         0))
        return post_push_contended(n, q, m, due, kind, gen, top, tok);
    DQ_TLS(contended_push).q = NULL; /* one store: cheaper here than a test */
    return post_pushed(n, q, m, due, gen, tok);
}

/* The pool cache ran dry: refill it, then post (a tail call from post_node). */
static __attribute__((noinline)) int post_node_refill(dq_queue *q, const dq_msg *m,
                                                      int64_t due, uint64_t kind,
                                                      const post_repeat *rep,
                                                      dq_token *tok)
{
    dq_node *n = dq_pool_get_slow();
    if (n == NULL)
        return -ENOMEM;
    return post_node_with(n, q, m, due, kind, rep, tok);
}

static inline __attribute__((always_inline)) int post_node(dq_queue *q, const dq_msg *m,
                                                           int64_t due, uint64_t kind,
                                                           const post_repeat *rep,
                                                           dq_token *tok)
{
    if (__builtin_expect(dq_pool_cache_empty(), 0))
        return post_node_refill(q, m, due, kind, rep, tok);
    return post_node_with(dq_pool_take_cached(), q, m, due, kind, rep, tok);
}

/* Tracing on: the post's event, then the post (trace.h). */
static __attribute__((noinline)) int post_traced(dq_queue *q, const dq_msg *m,
                                                 int64_t when, int64_t due,
                                                 uint64_t kind, const post_repeat *rep,
                                                 dq_token *tok)
{
    bool barrier = kind == DQ_STATE_BARRIER;
    dq_trace_post(q, barrier ? 0 : m->what, when, barrier);
    int err = post_node(q, m, due, kind, rep, tok);
    if (err)
        dq_trace_post_refused(q, err);
    return err;
}

int dq_post_at(dq_queue *q, const dq_msg *m, int64_t when, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0 || when < 0)
        return -EINVAL;
    int64_t due = when == 0 ? DQ_KEY_FRONT : when;
    if (dq_trace_on())
        return post_traced(q, m, when, due, 0, NULL, tok);
    return post_node(q, m, due, 0, NULL, tok);
}

/* Now on q's clock, for a post that dq_post_at then checks (NULL q:
   any time; it fails there). */
static inline int64_t post_now(const dq_queue *q)
{
    return q != NULL ? dq_queue_time(q) : 0;
}

int dq_post(dq_queue *q, const dq_msg *m, dq_token *tok)
{
    return dq_post_at(q, m, post_now(q), tok);
}

int dq_post_delayed(dq_queue *q, const dq_msg *m, int64_t delay, dq_token *tok)
{
    return dq_post_at(q, m, dq_when_after(post_now(q), delay), tok);
}

int dq_post_at_front(dq_queue *q, const dq_msg *m, dq_token *tok)
{
    return dq_post_at(q, m, 0, tok);
}

int dq_post_sync_barrier(dq_queue *q, dq_token *tok)
{
    if (q == NULL)
        return -EINVAL;
    int64_t now = dq_queue_time(q);
    if (dq_trace_on())
        return post_traced(q, NULL, now, now, DQ_STATE_BARRIER, NULL, tok);
    return post_node(q, NULL, now, DQ_STATE_BARRIER, NULL, tok);
}

/* One node for every occurrence: the looper re-arms it after each
   delivery (looper_rearm), so the token stays the post's. */
int dq_post_repeating(dq_queue *q, const dq_msg *m, int64_t first, int64_t period,
                      uint32_t mode, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0 || first < 0 || period <= 0 ||
        (mode != DQ_FIXED_RATE && mode != DQ_FIXED_DELAY))
        return -EINVAL;
    post_repeat rep = { period, mode };
    if (dq_trace_on())
        return post_traced(q, m, first, first, DQ_STATE_REPEAT, &rep, tok);
    return post_node(q, m, first, DQ_STATE_REPEAT, &rep, tok);
}

/* ---- running a function on the consumer ---------------------------------- */

/* Whether q has quit (either way): the tag is set before both quits'
   other steps.  relaxed: a post after it fails by its own CAS anyway;
   this only answers the consumer's inline runs, which read the tag its
   own thread or the quitting one ordered before. */
static bool quitting(dq_queue *q)
{
    return (atomic_load_explicit(&q->top, memory_order_relaxed) & DQ_TOP_QUIT) != 0;
}

/* fn on the consumer's own thread, with q as its current queue. */
static void run_inline(dq_queue *q, void (*fn)(void *ctx), void *ctx)
{
    dq_consumer_frame saved;
    dq_consumer_enter(q, &saved);
    fn(ctx);
    dq_consumer_leave(&saved);
}

int dq_invoke(dq_queue *q, void (*fn)(void *ctx), void *ctx)
{
    if (q == NULL || fn == NULL)
        return -EINVAL;
    if (dq_looper_is_self(q)) {
        if (quitting(q))
            return -ESHUTDOWN;
        run_inline(q, fn, ctx);
        return 0;
    }
    dq_msg m;
    dq_invoke_msg(&m, fn, ctx);
    return dq_post(q, &m, NULL);
}

/* The real time timeout ns from now, saturated. */
static int64_t real_deadline_after(int64_t timeout)
{
    int64_t now = dq_clock_real();
    return timeout > INT64_MAX - now ? INT64_MAX : now + timeout;
}

int dq_call(dq_queue *q, void (*fn)(void *ctx), void *ctx, int64_t timeout)
{
    if (q == NULL || fn == NULL || timeout < 0)
        return -EINVAL;
    if (dq_looper_is_self(q)) {
        if (quitting(q))
            return -ESHUTDOWN;
        run_inline(q, fn, ctx);
        return 0;
    }
    int64_t deadline = real_deadline_after(timeout);
    dq_call_record *c = dq_call_new(q, fn, ctx);
    if (c == NULL)
        return -ENOMEM;
    dq_msg m;
    dq_call_msg(&m, c);
    dq_token tok;
    int err = dq_post(q, &m, &tok);
    if (err != 0) {
        dq_call_unposted(c); /* not accepted: no message holds it */
        return err;
    }
    uint32_t st = dq_call_wait(c, deadline);
    if (st == DQ_CALL_PENDING) {
        /* Time is up.  The cancel decides: if it claims the message, fn
           never runs and the discard is reported (and completes the
           record); if not, the consumer has taken it for delivery (fn is
           about to start), or it was discarded meanwhile: wait for
           whichever it was. */
        if (dq_claim_token(q, tok, false) == 0) {
            dq_call_leave(c);
            return -ETIMEDOUT;
        }
    }
    if (st == DQ_CALL_PENDING || st == DQ_CALL_RUNNING)
        st = dq_call_wait(c, INT64_MAX); /* fn has started: wait for its end */
    dq_call_leave(c);
    switch (st) {
    case DQ_CALL_DONE: return 0;
    case DQ_CALL_ABANDONED: return -ESHUTDOWN;
    default: /* discarded: by a quit, or removed by criteria */
        return quitting(q) ? -ESHUTDOWN : -ECANCELED;
    }
}
