/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Consumer-only code: the looper.  Everything named looper_ runs on the
 * queue's single consumer thread (or, at the last dq_unref, on the thread
 * that holds the only reference), and owns the heaps, the back-links and
 * every field marked "looper only" in node.h and queue.h.
 *
 * One step of the looper:
 *   1. reclaim: advance the walker epoch if it can; recycle retired nodes
 *      whose grace period is over;
 *   2. collect: take the removal list, sweep new nodes from the stack top
 *      down to the boundary (writing back-links, assigning insertion
 *      sequence numbers in push order, filling the heaps), then unlink the
 *      removed nodes from stack and heap;
 *   3. pick the earliest deliverable message; claim it by CAS; or sleep
 *      until it is due.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include <deliqueue_arch/cpu.h>

#include "clock.h"
#include "core.h"
#include "looper_fd.h"
#include "pool.h"
#include "trace.h"
#include "wait.h"

/* ---- heaps -------------------------------------------------------------- */

static bool node_is_barrier(const dq_node *n)
{
    /* relaxed: the barrier bit is fixed for the node's generation */
    return dq_node_is_barrier(atomic_load_explicit(&n->state, memory_order_relaxed));
}

static dq_heap *heap_of(dq_core *core, const dq_node *n)
{
    bool async = !node_is_barrier(n) && (n->msg.flags & DQ_ASYNC);
    return async ? &core->async_heap : &core->sync_heap;
}

static void looper_heap_remove(dq_core *core, dq_node *n)
{
    if (n->heap.index != DQ_HEAP_NONE)
        dq_heap_remove(heap_of(core, n), &n->heap);
}

/* ---- retiring and recycling --------------------------------------------- */

/* relaxed load and store: the looper is limbo_count's only writer;
   dq_pool_stats only reads it */
static inline uint32_t looper_limbo_count(const dq_core *core)
{
    return atomic_load_explicit(&core->limbo_count, memory_order_relaxed);
}
static inline void looper_limbo_count_add(dq_core *core, int32_t delta)
{
    atomic_store_explicit(&core->limbo_count,
                          (uint32_t)((int32_t)looper_limbo_count(core) + delta),
                          memory_order_relaxed);
}

/* Retire into limbo, to be recycled once walkers cannot hold it. */
static void looper_retire(dq_core *core, dq_node *n)
{
    if (!dq_node_reset(n))
        return;
    /* relaxed: the looper is the only writer of the epoch */
    n->retire_epoch = atomic_load_explicit(&core->epoch, memory_order_relaxed);
    n->limbo_next = NULL;
    if (core->limbo_tail != NULL)
        core->limbo_tail->limbo_next = n;
    else
        core->limbo_head = n;
    core->limbo_tail = n;
    looper_limbo_count_add(core, 1);
}

/* Grace periods.  A node retired in epoch r may be held by walkers that
   began in epoch r or earlier; the epoch reaches r + 2 only after the
   walkers counted in r's parity have left, so then it is free. */
static void looper_reclaim(dq_core *core, bool force)
{
    /* Advance only when enough waits for a grace period: the advance is a
       seq_cst store (a full barrier), not worth paying per message.  Going
       idle reclaims whatever is left (looper_next passes force). */
    if (core->limbo_head == NULL ||
        (looper_limbo_count(core) < DQ_LIMBO_BATCH && !force))
        return;
    uint64_t e = atomic_load_explicit(&core->epoch, memory_order_relaxed);
    /* seq_cst load and store: the looper's half of the Dekker pair in
       dq_walk_begin.  Parity (e + 1) & 1 counts the walkers of epoch e - 1. */
    if (atomic_load_explicit(&core->walkers[(e + 1) & 1], memory_order_seq_cst) == 0) {
        e++;
        atomic_store_explicit(&core->epoch, e, memory_order_seq_cst);
    }
    while (core->limbo_head != NULL && core->limbo_head->retire_epoch + 2 <= e) {
        dq_node *n = core->limbo_head;
        core->limbo_head = n->limbo_next;
        if (core->limbo_head == NULL)
            core->limbo_tail = NULL;
        looper_limbo_count_add(core, -1);
        dq_pool_batch_add(&core->recycled, n);
    }
}

/* ---- the stack ---------------------------------------------------------- */

static uintptr_t looper_read_top(dq_queue *q)
{
    /* acquire: pairs with the push CASes (a release sequence), so every
       node reached from here has its producer's payload visible */
    return atomic_load_explicit(&q->top, memory_order_acquire);
}

static void looper_sweep_node(dq_core *core, dq_node *n)
{
    n->looper_flags |= DQ_LOOPER_SWEPT;
    /* relaxed: only to skip a node already claimed; a claim we miss is
       caught by the delivery CAS */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_relaxed);
    if (dq_state_life(s) != DQ_PENDING)
        return;
    int64_t due = dq_node_due(n);
    int64_t seq = due == DQ_KEY_FRONT ? core->next_front_seq-- : core->next_seq++;
    dq_key key = { due, seq };
    /* cannot fail: looper_sweep reserved room in both parts.  A message
       due by sweep_now (a due-now post) goes to the due run when it sorts
       after the run's last: O(1), not a sift through the delayed ones. */
    (void)dq_heap_push_due(heap_of(core, n), &n->heap, key, core->sweep_now);
    core->barriers += dq_node_is_barrier(s);
}

/* Take the nodes pushed since the last sweep into the heaps.  They sit
   between the top and the boundary, newest first; back-links are written
   on the way down, sequence numbers handed out on the way back up, so
   insertion order is push order.  0 or -ENOMEM (nothing changed). */
static int looper_sweep(dq_queue *q, dq_core *core)
{
    dq_node *top = dq_top_node(looper_read_top(q));
    if (top == core->boundary)
        return 0;
    uint32_t count = 0, due = 0;
    dq_node *lowest = NULL;
    for (dq_node *n = top; n != core->boundary;
         /* relaxed: written before the push we acquired */
         n = atomic_load_explicit(&n->next, memory_order_relaxed)) {
        n->prev = lowest;
        lowest = n;
        count++;
        due += dq_node_due(n) <= core->sweep_now;
    }
    if (dq_heap_reserve(&core->sync_heap, core->sync_heap.count + count) != 0 ||
        dq_heap_reserve(&core->async_heap, core->async_heap.count + count) != 0 ||
        dq_heap_reserve_run(&core->sync_heap, due) != 0 ||
        dq_heap_reserve_run(&core->async_heap, due) != 0)
        return -ENOMEM;
    if (core->boundary != NULL)
        core->boundary->prev = lowest;
    for (dq_node *n = lowest; n != NULL; n = n->prev)
        looper_sweep_node(core, n);
    core->boundary = top;
    return 0;
}

/* n, the topmost swept node, is out of the stack: its successor next is
   the topmost swept node now. */
static void looper_unlinked_boundary(dq_core *core, dq_node *n, dq_node *next)
{
    core->boundary = next;
    if (next != NULL)
        next->prev = NULL;
    n->looper_flags |= DQ_LOOPER_UNLINKED;
}

/* The sweep had no heap room to give n, the topmost swept node, its
   back-link: find its newer neighbour among the unswept posts above it
   and unlink n below them; the posts above stay unswept for the next
   sweep.  No allocation, so an unlink always happens, and no node is
   retired while still linked. */
static void looper_unlink_below_new(dq_queue *q, dq_core *core, dq_node *n,
                                    dq_node *next)
{
    /* acquire: the unswept posts' links were written before their pushes;
       no one but the looper writes them after that */
    dq_node *m = dq_top_node(atomic_load_explicit(&q->top, memory_order_acquire));
    for (dq_node *below;
         (below = atomic_load_explicit(&m->next, memory_order_relaxed)) != n;)
        m = below;
    /* release: a walker that reads the new link sees the node it points
       to as the looper saw it */
    atomic_store_explicit(&m->next, next, memory_order_release);
    looper_unlinked_boundary(core, n, next);
}

/* Take a swept node out of the stack in O(1).  Its own next link is left
   as it is, so a walker standing on it goes on into the live stack. */
static void looper_unlink(dq_queue *q, dq_core *core, dq_node *n)
{
    /* relaxed: the looper is the only writer of swept nodes' links */
    dq_node *next = atomic_load_explicit(&n->next, memory_order_relaxed);
    if (n->prev == NULL) {
        /* n is the topmost swept node: it is the top unless producers
           pushed above it, and then a sweep gives it a back-link */
        uintptr_t top = atomic_load_explicit(&q->top, memory_order_relaxed);
        for (;;) {
            if (dq_top_node(top) != n) {
                if (looper_sweep(q, core) != 0) {
                    looper_unlink_below_new(q, core, n, next);
                    return;
                }
                break;
            }
            /* acq_rel: on success walkers that acquire the new top see
               what we saw; on failure (acquire) we see the new nodes */
            if (atomic_compare_exchange_weak_explicit(
                    &q->top, &top, (uintptr_t)next | (top & DQ_TOP_QUIT),
                    memory_order_acq_rel, memory_order_acquire)) {
                looper_unlinked_boundary(core, n, next);
                return;
            }
        }
    }
    /* release: a walker that reads the new link sees the node it points
       to as the looper saw it */
    atomic_store_explicit(&n->prev->next, next, memory_order_release);
    if (next != NULL)
        next->prev = n->prev;
    n->looper_flags |= DQ_LOOPER_UNLINKED;
}

/* A node claimed by a remover (REMOVED): out of heap and stack, retired. */
static void looper_finish_removed(dq_queue *q, dq_core *core, dq_node *n)
{
    /* the only way a barrier leaves the heaps (none is ever delivered) */
    if (n->heap.index != DQ_HEAP_NONE)
        core->barriers -= node_is_barrier(n);
    looper_heap_remove(core, n);
    if (!(n->looper_flags & DQ_LOOPER_UNLINKED))
        looper_unlink(q, core, n);
    looper_retire(core, n);
}

static void looper_process_removals(dq_queue *q, dq_core *core, dq_node *list)
{
    while (list != NULL) {
        dq_node *n = list;
        list = n->aux_next;
        if (n->looper_flags & DQ_LOOPER_SWEPT) {
            looper_finish_removed(q, core, n);
        } else {
            /* claimed before we met it in the stack: wait for the sweep */
            n->aux_next = core->unswept;
            core->unswept = n;
        }
    }
}

static int looper_collect(dq_queue *q, dq_core *core)
{
    /* relaxed test first: the exchange is a locked instruction, and most
       steps have no removal; one pushed after the test is taken by the
       next step, and looper_sleep re-reads the list (seq_cst) before it
       parks.  acquire: pairs with the removers' push CAS, so their claims
       and aux_next links are visible */
    dq_node *removed =
        atomic_load_explicit(&core->removals, memory_order_relaxed) == NULL
            ? NULL
            : atomic_exchange_explicit(&core->removals, NULL, memory_order_acquire);
    int err = looper_sweep(q, core);
    if (core->unswept != NULL) {
        dq_node *again = core->unswept;
        core->unswept = NULL;
        looper_process_removals(q, core, again);
    }
    looper_process_removals(q, core, removed);
    return err;
}

/* ---- picking and delivering -------------------------------------------- */

static dq_node *heap_min(dq_heap *h)
{
    dq_heap_elem *e = dq_heap_peek(h);
    return e ? dq_node_of_heap(e) : NULL;
}

/* The next message in delivery order, due or not, passing over a sync
   barrier first (then the earliest async message); NULL if none. */
static inline dq_node *looper_peek(dq_core *core)
{
    dq_node *s = heap_min(&core->sync_heap);
    dq_node *a = heap_min(&core->async_heap);
    if (s == NULL || node_is_barrier(s))
        return a;
    if (a == NULL)
        return s;
    return dq_key_less(*dq_heap_peek_key(&core->async_heap),
                       *dq_heap_peek_key(&core->sync_heap))
               ? a
               : s;
}

/* The earliest deliverable node if it is due; else NULL with the time it
   will be due (INT64_MAX if none), whether a barrier holds sync ones and,
   if so, that barrier's due. */
static dq_node *looper_pick(dq_core *core, int64_t now, int64_t *deadline, bool *held,
                            int64_t *held_due)
{
    dq_node *s = heap_min(&core->sync_heap);
    *held = s != NULL && node_is_barrier(s);
    if (*held)
        *held_due = dq_node_due(s);
    dq_node *next = looper_peek(core);
    if (next == NULL) {
        *deadline = INT64_MAX;
        return NULL;
    }
    int64_t due = dq_node_due(next);
    if (due <= now)
        return next;
    *deadline = due;
    return NULL;
}

/* Claim n for delivery.  Exactly one of this CAS and a remover's wins. */
static bool looper_take(dq_queue *q, dq_core *core, dq_node *n, dq_msg *out)
{
    /* relaxed: the CAS below validates it */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_relaxed);
    bool won;
    /* relaxed: the RMW's atomicity alone decides the winner; the payload
       was acquired when the node was swept and is not written again
       until the node is recycled */
    won = dq_state_life(s) == DQ_PENDING &&
          atomic_compare_exchange_strong_explicit(
              &n->state, &s, dq_state_with_life(s, DQ_DELIVERED), memory_order_relaxed,
              memory_order_relaxed);
    looper_heap_remove(core, n);
    if (won && dq_node_is_repeating(s)) {
        /* a repeating post stays in the stack, live, through its
           delivery: looper_rearm takes it on from here */
        dq_node_msg(n, out);
        core->in_flight = n;
        return true;
    }
    looper_unlink(q, core, n);
    if (!won)
        return false; /* the remover's entry in the removal list retires it */
    dq_node_msg(n, out);
    looper_retire(core, n);
    return true;
}

/* ---- repeating posts ---------------------------------------------------- */

/* The due of a repeating post's next occurrence, its last one due at
   dq_node_due(n), with the clock at now (the end of that delivery). */
static int64_t looper_next_due(const dq_node *n, int64_t now)
{
    int64_t due = dq_node_due(n), period = n->period;
    if (n->repeat_mode == DQ_FIXED_DELAY)
        return dq_when_after(now, period);
    /* DQ_FIXED_RATE: the first point of the grid due + k * period (k >=
       1) not before now.  A late delivery does not move the grid, and
       the points passed while late are skipped, not delivered at once.
       Saturates, as dq_post_delayed does. */
    if (due > INT64_MAX - period)
        return INT64_MAX;
    if (due + period >= now)
        return due + period;
    uint64_t behind = (uint64_t)(now - due); /* > period, < 2^63 */
    uint64_t k = (behind + (uint64_t)period - 1) / (uint64_t)period;
    if (k > (uint64_t)(INT64_MAX - due) / (uint64_t)period)
        return INT64_MAX;
    return due + (int64_t)(k * (uint64_t)period);
}

/* End a repeating post on the looper (the queue quits): claim it from
   state s (in a delivery, or just re-armed) and report it.  If a claimer
   won first, it reported the post and pushed it onto the removal list,
   which retires it. */
static void looper_end_repeating(dq_queue *q, dq_core *core, dq_node *n, uint64_t s)
{
    /* relaxed: atomicity alone decides, as the delivery CAS; we have the
       payload since the sweep */
    if (!atomic_compare_exchange_strong_explicit(
            &n->state, &s, dq_state_with_life(s, DQ_REMOVED), memory_order_relaxed,
            memory_order_relaxed))
        return;
    dq_report_discard(q, n);
    looper_heap_remove(core, n);
    looper_unlink(q, core, n);
    looper_retire(core, n);
}

/* The delivery of core->in_flight, a repeating post, is over (its dispatch
   returned, or the consumer called again): re-arm the same node, so its
   token stays good, with the next occurrence's due, back in its heap;
   unless a claim ended it meanwhile (then it waits on the removal list
   for the next collect) or the queue is quitting (then it ends here,
   reported once).  0, or -ENOMEM with nothing changed (no heap room: the
   next consumer call tries again). */
static int looper_rearm(dq_queue *q, dq_core *core)
{
    dq_node *n = core->in_flight;
    if (n == NULL)
        return 0;
    dq_heap *h = heap_of(core, n);
    if (dq_heap_reserve(h, h->count + 1) != 0 || dq_heap_reserve_run(h, 1) != 0)
        return -ENOMEM;
    core->in_flight = NULL;
    int64_t now = dq_queue_time(q);
    /* relaxed: only this thread moves a live node out of a delivery; a
       claimer's move is seen by the CAS */
    uint64_t s = atomic_load_explicit(&n->state, memory_order_relaxed);
    if (dq_state_life(s) != DQ_DELIVERED)
        return 0; /* claimed: the removal list's entry retires it */
    /* acquire: as looper_next's read of the tag; a tag we miss here is
       caught after the CAS below */
    if (atomic_load_explicit(&q->top, memory_order_acquire) & DQ_TOP_QUIT) {
        looper_end_repeating(q, core, n, s);
        return 0;
    }
    int64_t due = looper_next_due(n, now);
    /* relaxed: published by the CAS's release to walkers and claimers
       that acquire PENDING; one that reads the due while we move it sees
       this occurrence or the last (node.h, dq_node_due) */
    atomic_store_explicit(&n->due, due, memory_order_relaxed);
    /* seq_cst: release, for the due above; and the first half of a
       Dekker pair with dq_quit_safely, whose trim walks after its tag
       and a seq_cst fence (dq_claim_due_after): either we see the tag
       below or its walk sees PENDING.  Failure relaxed: a claim won, and
       its removal list entry retires the node. */
    if (!atomic_compare_exchange_strong_explicit(
            &n->state, &s, dq_state_with_life(s, DQ_PENDING), memory_order_seq_cst,
            memory_order_relaxed))
        return 0;
    if (atomic_load_explicit(&q->top, memory_order_seq_cst) & DQ_TOP_QUIT) {
        looper_end_repeating(q, core, n, dq_state_with_life(s, DQ_PENDING));
        return 0;
    }
    dq_key key = { due, core->next_seq++ };
    /* cannot fail: room reserved above */
    (void)dq_heap_push_due(h, &n->heap, key, now);
    return 0;
}

/* ---- quitting ----------------------------------------------------------- */

/* ---- idle handlers ------------------------------------------------------ */

/* Run the idle handlers once; returns whether there were any. */
static bool looper_run_idle(dq_queue *q)
{
    pthread_mutex_lock(&q->idle_lock);
    size_t count = q->idle_count;
    dq_idle_handler *copy =
        count ? (dq_idle_handler *)malloc(count * sizeof(*copy)) : NULL;
    if (copy != NULL)
        memcpy(copy, q->idle, count * sizeof(*copy));
    pthread_mutex_unlock(&q->idle_lock);
    if (copy == NULL)
        return false;
    for (size_t i = 0; i < count; i++)
        if (!copy[i].fn(copy[i].ctx))
            (void)dq_idle_handlers_remove(q, copy[i].fn, copy[i].ctx);
    free(copy);
    return true;
}

/* ---- sleeping ----------------------------------------------------------- */

/* Publish the consumer's sleep word before its seq_cst re-reads (the
   Dekker pairs with producers, barrier removal and quit).  An exchange,
   not a store: ARMv8 keeps a store-release before a later load-acquire
   (STLR, LDAR), but QEMU's user-mode emulation on an x86 host does not:
   it emits STLR as a barrier then a plain store and LDAR as a plain load
   then a barrier, so the host's store buffer lets the re-read pass the
   store and a wake-up is lost (stress/sleep_dekker_test: within seconds
   in the arm64 configs).  An RMW is a full barrier there (the host's
   locked exchange or CAS), costs what STLR does on ARMv8 hardware, and on
   x86 is the XCHG a seq_cst store compiles to anyway. */
static inline void looper_publish_sleep(dq_queue *q, int64_t word)
{
    (void)atomic_exchange_explicit(&q->sleep, word, memory_order_seq_cst);
}

/* Whether there is anything for the looper to look at: a push above the
   boundary, the quit tag, a removal, or a change of fd listeners.
   Acquire: what we then read of a new node or removal is its pusher's
   (the collect re-reads them anyway). */
static inline bool looper_has_news(dq_queue *q, dq_core *core, memory_order mo)
{
    uintptr_t top = atomic_load_explicit(&q->top, mo);
    return dq_top_node(top) != core->boundary || (top & DQ_TOP_QUIT) ||
           atomic_load_explicit(&core->removals, mo) != NULL ||
           atomic_load_explicit(&q->fd_changed, mo) != 0;
}

/* Whether a manual clock has reached deadline, read after the sleep word
   is published.  seq_cst: the second half of the Dekker pair with
   dq_clock_advance (its seq_cst RMW of the time, then its seq_cst load
   of the word in dq_clock_wake_due): either we see its time here, or it
   sees our word and wakes us. */
static inline bool looper_clock_reached(dq_clock *c, int64_t deadline)
{
    return atomic_load_explicit(&c->now, memory_order_seq_cst) >= deadline;
}

/* How a consumer call waits (looper_steps' flags).  LOOPER_WAKEABLE: a
   dq_wake ends the wait with -EINTR (dq_next_until, dq_loop_once).
   LOOPER_FD_RETURN: return LOOPER_RAN_FD once fd listeners ran, instead
   of going on (dq_loop_once). */
#define LOOPER_WAKEABLE  1u
#define LOOPER_FD_RETURN 2u
#define LOOPER_RAN_FD    1

/* News for a wakeable wait: the news, or a dq_wake.  The flag's load
   has the order mo, as the others': seq_cst after the sleep word is
   published, the second half of the Dekker pair with dq_wake (its
   seq_cst exchange of the flag, then its seq_cst load of the word). */
static inline bool looper_has_news_or_wake(dq_queue *q, dq_core *core, unsigned flags,
                                           memory_order mo)
{
    return looper_has_news(q, core, mo) ||
           ((flags & LOOPER_WAKEABLE) && atomic_load_explicit(&q->woken, mo) != 0);
}

/* Take a pending dq_wake: whether there was one.  A relaxed test first:
   the exchange is a locked instruction, and wakes are rare.  acquire:
   pairs with dq_wake's release (seq_cst) exchange, so what its caller did
   before happens before our return. */
static bool looper_take_wake(dq_queue *q)
{
    return atomic_load_explicit(&q->woken, memory_order_relaxed) != 0 &&
           atomic_exchange_explicit(&q->woken, 0, memory_order_acquire) != 0;
}

/* Sleep until deadline or news (with LOOPER_WAKEABLE in flags, or a
   dq_wake).  With park (dq_try_next under a host loop, dq_backend_fd)
   publish the sleep word and return false without waiting: the word
   stays published while the host loop waits on the backend fd, so posts
   and quits wake it as they would wake us.  True: awake again. */
static bool looper_sleep(dq_queue *q, dq_core *core, int64_t deadline, bool held,
                         int64_t held_due, bool park, unsigned flags)
{
    /* Poll a little before parking: a post that lands within the spin
       costs neither its producer the wake syscall nor the message the
       wake-up latency.  Bounded in time (pause latency differs tenfold
       between CPUs), so an idle transition burns at most idle_spin_ns of
       CPU (dq_options) and then sleeps. */
    int64_t spin_ns = park ? 0 : q->opts.idle_spin_ns;
    int64_t spin_end = spin_ns > 0 ? dq_clock_real() + spin_ns : 0;
    dq_clock *manual = q->opts.clock;
    if (spin_end > deadline && manual == NULL)
        spin_end = deadline; /* never past a due message (same clock) */
    for (unsigned i = 1; spin_ns > 0; i++) {
        /* acquire: see looper_has_news */
        if (looper_has_news_or_wake(q, core, flags, memory_order_acquire))
            return true;
        dq_arch_cpu_relax();
        if (i % 16 == 0 && dq_clock_real() >= spin_end)
            break;
    }
    uint32_t seen = dq_event_read(&q->wake);
    int64_t word = (deadline & ~DQ_HELD) | (held ? DQ_HELD : 0);
    bool in_epoll = park || dq_looper_fd_waits(q);
    dq_looper_fd_mark_sleep(q, in_epoll); /* which wait wakers must signal */
    assert(dq_sleep_word_asleep(word));   /* deadline > now >= 0 */
    /* relaxed: published by the seq_cst (release) exchange of the word below;
       a producer reads it only after an acquire load that returned a word
       with DQ_HELD, so it sees this value or a later sleep's */
    if (held)
        atomic_store_explicit(&q->held_due, held_due, memory_order_relaxed);
    /* seq_cst exchange then seq_cst loads: our half of the Dekker pairs with
       the producers (push, then read sleep), with quit / barrier
       removal (tag or removal push, then read sleep) and, in a wakeable
       wait, with dq_wake (flag, then read sleep) */
    looper_publish_sleep(q, word);
    if (!looper_has_news_or_wake(q, core, flags, memory_order_seq_cst) &&
        !(manual != NULL && looper_clock_reached(manual, deadline))) {
        /* a manual clock's deadline is no real time: only a wake ends
           the wait, and dq_clock_advance sends one when it is reached */
        int64_t real = manual != NULL ? INT64_MAX : deadline;
        if (park) {
            dq_looper_fd_park(q, real);
            return false;
        }
        bool traced = dq_trace_on();
        if (traced)
            dq_trace_sleep_begin(q, deadline);
        /* with fds watched, epoll over them and the eventfd that a wake
           writes instead of the futex (dq_fd_signal) */
        if (in_epoll)
            dq_looper_fd_wait(q, real);
        else
            dq_event_wait(&q->wake, seen, real);
        if (traced)
            dq_trace_end();
    }
    /* relaxed: a producer that still reads the old word only wakes us
       needlessly; we re-check everything before the next sleep */
    atomic_store_explicit(&q->sleep, DQ_AWAKE, memory_order_relaxed);
    return true;
}

/* The quit tag is set but no mode is published yet: a quit_safely reads
   its cut-off time after it sets the tag, so that every post accepted
   before the tag is due by then, and raises the mode only after.  Sleep
   until it does (the quitting thread wakes us after raising it), instead
   of spinning on another thread's progress.  Returns the mode. */
static int looper_await_quit_mode(dq_queue *q)
{
    for (;;) {
        /* acquire: pairs with raise_quit_mode's CAS (any.c) */
        int mode = atomic_load_explicit(&q->quit_mode, memory_order_acquire);
        if (mode != DQ_RUNNING)
            return mode;
        uint32_t seen = dq_event_read(&q->wake);
        /* seq_cst exchange, then seq_cst load of the mode: a Dekker pair with
           dq_quit_safely's seq_cst mode CAS followed by its seq_cst load of the
           sleep word (dq_wake_consumer), so either it sees us asleep and
           wakes us, or we see the mode */
        dq_looper_fd_mark_sleep(q, false); /* a futex wait, even under a host loop */
        looper_publish_sleep(q, INT64_MAX & ~DQ_HELD);
        if (atomic_load_explicit(&q->quit_mode, memory_order_seq_cst) == DQ_RUNNING)
            dq_event_wait(&q->wake, seen, INT64_MAX);
        /* relaxed: as after looper_sleep's wait */
        atomic_store_explicit(&q->sleep, DQ_AWAKE, memory_order_relaxed);
    }
}

/* ---- the consumer entry points ------------------------------------------ */

#define NO_WAIT (-1)

/* Tracing on: the backlog counter, when it changed (trace.h). */
static __attribute__((noinline)) void looper_trace_backlog(dq_queue *q, dq_core *core)
{
    size_t held = (size_t)dq_heap_size(&core->sync_heap) +
                  dq_heap_size(&core->async_heap) - core->barriers;
    if (held != core->traced_backlog) {
        core->traced_backlog = held;
        dq_trace_backlog(q, held);
    }
}

/* The first half of a consumer step: learn of a quit, read the clock,
   reclaim and collect.  0, with the step's time in *now and the quit
   mode in *mode; -ESHUTDOWN once a dq_quit's teardown is done; -ENOMEM. */
static inline __attribute__((always_inline)) int
looper_gather(dq_queue *q, dq_core *core, int64_t *now, int *mode)
{
    /* Learn about a quit BEFORE collecting: once the tag is set no push
       can succeed, so the collect below then sweeps every accepted
       message.  (Checked after the collect, a push between the sweep and
       the check would be missed and dropped by the teardown.)  The mode:
       dq_quit raises it before the tag, dq_quit_safely after
       (looper_await_quit_mode). */
    *mode = DQ_RUNNING;
    /* acquire: pairs with the tag's seq_cst RMW (tag_top), so the mode
       raised before it by dq_quit is visible */
    if (atomic_load_explicit(&q->top, memory_order_acquire) & DQ_TOP_QUIT)
        *mode = looper_await_quit_mode(q);
    /* one clock read per step, before the sweep: what was due by then is
       due at the pick after it too */
    *now = dq_queue_time(q);
    core->sweep_now = *now;
    looper_reclaim(core, false);
    int err = looper_collect(q, core);
    if (err)
        return err;
    if (dq_trace_on())
        looper_trace_backlog(q, core);
    if (*mode == DQ_QUIT_NOW) {
        dq_looper_teardown(q);
        return -ESHUTDOWN;
    }
    return 0;
}

/* One consumer call's steps, until a message is taken (0, in *out), or
   until: -ETIMEDOUT; NO_WAIT: -EAGAIN.  flags: LOOPER_WAKEABLE,
   LOOPER_FD_RETURN.  The caller is q's consumer. */
static int looper_steps(dq_queue *q, dq_msg *out, int64_t until, unsigned flags)
{
    /* The claimed consumer reads the core atomic_init stored before q was
       shared, or the NULL its own teardown stored (dq_queue_core); acquire
       pairs with the teardown's release for any other reader. */
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
    if (core == NULL)
        return -ESHUTDOWN;
    /* a repeating post handed out by the previous call: that delivery is
       over now */
    int err = looper_rearm(q, core);
    if (err)
        return err;
    /* a wake pending when a wakeable call begins is the first thing it
       reports, before any work; one that comes later ends its wait */
    if ((flags & LOOPER_WAKEABLE) && looper_take_wake(q))
        return -EINTR;
    bool idle_ran = false, fd_polled = false;
    for (;;) {
        int mode;
        int64_t now;
        err = looper_gather(q, core, &now, &mode);
        if (err)
            return err;
        int64_t deadline = INT64_MAX, held_due = 0;
        bool held;
        dq_node *n = looper_pick(core, now, &deadline, &held, &held_due);
        /* fd listeners first when fairness says so (looper_fd.c); they
           may post or remove, so the step starts again after them */
        if (dq_looper_fd_on(q) &&
            dq_looper_fd_step(q, now, n != NULL, n != NULL ? dq_node_due(n) : 0) > 0) {
            if (flags & LOOPER_FD_RETURN)
                return LOOPER_RAN_FD;
            continue;
        }
        if (n != NULL) {
            bool taken = looper_take(q, core, n, out);
            if (dq_trace_on())
                looper_trace_backlog(q, core);
            if (taken)
                return 0;
            continue;
        }
        looper_reclaim(core, true); /* about to idle: end a grace period */
        if (mode == DQ_QUIT_SAFELY) {
            /* The drain ends: everything deliverable is delivered (what
               dq_quit_safely's trim left is due by its cut-off, which is
               before now); what a barrier still holds is dropped. */
            dq_looper_teardown(q);
            return -ESHUTDOWN;
        }
        if (!idle_ran) {
            idle_ran = true;
            if (looper_run_idle(q))
                continue; /* a handler may have posted */
        }
        if (until == NO_WAIT) {
            /* poll the fds once per call; under a host loop, publish the
               sleep word for its wait on the backend fd */
            if (dq_looper_fd_on(q) && !fd_polled) {
                fd_polled = true;
                if (dq_looper_fd_poll(q) > 0) {
                    if (flags & LOOPER_FD_RETURN)
                        return LOOPER_RAN_FD;
                    continue;
                }
            }
            if ((flags & LOOPER_WAKEABLE) && looper_take_wake(q))
                return -EINTR;
            if (dq_looper_fd_on(q) && dq_looper_fd_backend(q) &&
                looper_sleep(q, core, deadline, held, held_due, true, flags))
                continue;
            return -EAGAIN;
        }
        /* a wake that came during the call ends it before it waits */
        if ((flags & LOOPER_WAKEABLE) && looper_take_wake(q))
            return -EINTR;
        if (now >= until)
            return -ETIMEDOUT;
        (void)looper_sleep(q, core, deadline < until ? deadline : until, held, held_due,
                           false, flags);
    }
}

/* A consumer call: checked, claimed, and with q as the thread's current
   queue while it runs. */
static int looper_next(dq_queue *q, dq_msg *out, int64_t until, unsigned flags)
{
    if (q == NULL || out == NULL)
        return -EINVAL;
    int err = dq_looper_claim(q);
    if (err)
        return err;
    dq_consumer_frame saved;
    dq_consumer_enter(q, &saved);
    err = looper_steps(q, out, until, flags);
    dq_consumer_leave(&saved);
    return err;
}

/* A delivery by dq_next*, as a trace event when tracing is on. */
static inline int looper_delivered(dq_queue *q, const dq_msg *out, int err)
{
    if (err == 0 && dq_trace_on())
        dq_trace_deliver(q, out->what);
    return err;
}

int dq_next(dq_queue *q, dq_msg *out)
{
    return looper_delivered(q, out, looper_next(q, out, INT64_MAX, 0));
}

int dq_next_until(dq_queue *q, dq_msg *out, int64_t deadline)
{
    return looper_delivered(
        q, out, looper_next(q, out, deadline < 0 ? 0 : deadline, LOOPER_WAKEABLE));
}

int dq_try_next(dq_queue *q, dq_msg *out)
{
    return looper_delivered(q, out, looper_next(q, out, NO_WAIT, 0));
}

/* Run a delivered message: its callback, or opts.dispatch. */
static void looper_run(dq_queue *q, dq_msg *m)
{
    /* sampled once: the slice the dispatch begins is the one it ends */
    bool traced = dq_trace_on();
    if (traced)
        dq_trace_dispatch_begin(q, m->what);
    if (m->callback != NULL)
        m->callback(m);
    else if (q->opts.dispatch != NULL)
        q->opts.dispatch(m, q->opts.ctx);
    if (traced)
        dq_trace_end();
}

/* dq_set_observer put a new observer in the slot: take it, and free the
   one it replaces (only this thread uses that one).  acquire: pairs with
   the setter's release exchange, so the copy's fields are visible. */
static __attribute__((noinline)) dq_observer *looper_take_observer(dq_queue *q)
{
    uintptr_t set = atomic_exchange_explicit(&q->observer_set, 0, memory_order_acquire);
    if (set != 0) {
        free(q->observer);
        q->observer = set == DQ_OBSERVER_NONE ? NULL : (dq_observer *)set;
    }
    return q->observer;
}

/* A dispatch reported to observer o (the copy the setter made is kept
   from its start to its end, whatever dq_set_observer does meanwhile).
   The callbacks see the message as delivered, before the dispatch could
   change it. */
static __attribute__((noinline)) void looper_run_observed(dq_queue *q, dq_msg *m,
                                                          const dq_observer *o)
{
    dq_msg seen = *m;
    int64_t start = dq_queue_time(q);
    if (o->dispatch_start != NULL)
        o->dispatch_start(&seen, start, o->ctx);
    looper_run(q, m);
    int64_t end = dq_queue_time(q);
    if (o->dispatch_end != NULL)
        o->dispatch_end(&seen, start, end, o->ctx);
    if (o->slow == NULL)
        return;
    if (o->slow_delivery_ns > 0 && seen.when > 0 &&
        start - seen.when > o->slow_delivery_ns)
        o->slow(&seen, DQ_SLOW_DELIVERY, start - seen.when, o->ctx);
    if (o->slow_dispatch_ns > 0 && end - start > o->slow_dispatch_ns)
        o->slow(&seen, DQ_SLOW_DISPATCH, end - start, o->ctx);
}

/* Run a delivered message as dq_loop does, reported to the observer if
   one is set.  relaxed: a test of the slot, which the exchange in
   looper_take_observer then reads again with acquire; a set we miss
   here is taken at the next dispatch. */
static void looper_dispatch(dq_queue *q, dq_msg *m)
{
    dq_observer *o = q->observer;
    if (__builtin_expect(
            atomic_load_explicit(&q->observer_set, memory_order_relaxed) != 0, 0))
        o = looper_take_observer(q);
    if (__builtin_expect(o != NULL, 0))
        looper_run_observed(q, m, o);
    else
        looper_run(q, m);
}

int dq_loop(dq_queue *q)
{
    if (q == NULL)
        return -EINVAL;
    int err = dq_looper_claim(q);
    if (err)
        return err;
    dq_consumer_frame saved;
    dq_consumer_enter(q, &saved);
    for (;;) {
        dq_msg m;
        /* a repeating post's re-arm, when m was one, is the next step's
           first act: right after its dispatch returns */
        err = looper_steps(q, &m, INT64_MAX, 0);
        if (err)
            break;
        looper_dispatch(q, &m);
    }
    dq_consumer_leave(&saved);
    return err == -ESHUTDOWN ? 0 : err;
}

int dq_loop_once(dq_queue *q, int64_t deadline)
{
    if (q == NULL)
        return -EINVAL;
    int err = dq_looper_claim(q);
    if (err)
        return err;
    dq_consumer_frame saved;
    dq_consumer_enter(q, &saved);
    dq_msg m;
    /* a deadline already passed: no wait, as dq_try_next (which polls the
       fds once), but a wake and the fds are still reported */
    int64_t until = deadline <= dq_queue_time(q) ? NO_WAIT : deadline;
    err = looper_steps(q, &m, until, LOOPER_WAKEABLE | LOOPER_FD_RETURN);
    if (err == 0) {
        looper_dispatch(q, &m);
        /* the dispatch returned: a repeating post's delivery ends here
           (-ENOMEM: the next consumer call re-arms it) */
        dq_core *core = atomic_load_explicit(&q->core, memory_order_relaxed);
        if (core != NULL)
            (void)looper_rearm(q, core);
        err = DQ_ONCE_MESSAGE;
    } else if (err == LOOPER_RAN_FD) {
        err = DQ_ONCE_FD;
    } else if (err == -EINTR) {
        err = DQ_ONCE_WOKEN;
    } else if (err == -ETIMEDOUT || err == -EAGAIN) {
        err = DQ_ONCE_TIMEOUT;
    }
    dq_consumer_leave(&saved);
    return err;
}

/* ---- test control ------------------------------------------------------- */

/* A test-control call on the consumer: checked, claimed, with q current
   while fn runs on the live core (a repeating post handed out by an
   earlier dq_next* re-armed first, as every consumer call does). */
static int64_t
looper_control(dq_queue *q, int64_t (*fn)(dq_queue *, dq_core *, int64_t), int64_t arg)
{
    if (q == NULL)
        return -EINVAL;
    int err = dq_looper_claim(q);
    if (err)
        return err;
    dq_consumer_frame saved;
    dq_consumer_enter(q, &saved);
    /* acquire: as looper_steps' read of the core */
    dq_core *core = atomic_load_explicit(&q->core, memory_order_acquire);
    int64_t r = core == NULL ? -ESHUTDOWN : looper_rearm(q, core);
    if (r == 0)
        r = fn(q, core, arg);
    dq_consumer_leave(&saved);
    return r;
}

static int64_t looper_peek_when(dq_queue *q, dq_core *core, int64_t unused)
{
    (void)unused;
    int mode;
    int64_t now;
    int err = looper_gather(q, core, &now, &mode);
    if (err)
        return err == -ESHUTDOWN ? -ENOENT : err;
    dq_node *n = looper_peek(core);
    if (n == NULL)
        return -ENOENT;
    int64_t due = dq_node_due(n);
    return due == DQ_KEY_FRONT ? 0 : due;
}

int64_t dq_peek_when(dq_queue *q)
{
    int64_t r = looper_control(q, looper_peek_when, 0);
    return r == -ESHUTDOWN ? -ENOENT : r;
}

/* A barrier first in the sync heap holds every sync message; blocked if
   one of them is due. */
static int64_t looper_blocked_on_barrier(dq_queue *q, dq_core *core, int64_t unused)
{
    (void)unused;
    int mode;
    int64_t now;
    if (looper_gather(q, core, &now, &mode) != 0)
        return 0;
    dq_node *b = heap_min(&core->sync_heap);
    if (b == NULL || !node_is_barrier(b))
        return 0;
    dq_heap_iter it = dq_heap_iter_start(&core->sync_heap);
    for (dq_heap_elem *e; (e = dq_heap_iter_next(&it)) != NULL;) {
        dq_node *n = dq_node_of_heap(e);
        if (!node_is_barrier(n) && dq_node_due(n) <= now)
            return 1;
    }
    return 0;
}

bool dq_is_blocked_on_barrier(dq_queue *q)
{
    return looper_control(q, looper_blocked_on_barrier, 0) == 1;
}

/* Dispatch what is deliverable and due at time at, as dq_loop does, up
   to the first message posted after this began: its heap key's sequence
   number is one the sweep handed out since (a timed post's counts up, a
   front post's down; a re-armed repeating post takes a new one).  Ready
   fd listeners run once at most, so a listener that leaves its fd
   readable cannot keep it going either.  Returns how many it
   dispatched, or a negative errno when it did none; the core is gone
   (q->core NULL) once it has answered -ESHUTDOWN or torn down. */
static int64_t looper_run_due(dq_queue *q, dq_core *core, int64_t at)
{
    int mode;
    int64_t now;
    int err = looper_gather(q, core, &now, &mode);
    if (err)
        return err;
    int64_t timed_from = core->next_seq, front_from = core->next_front_seq;
    int64_t ran = 0;
    bool fd_ran = false;
    for (;;) {
        int64_t deadline, held_due;
        bool held;
        dq_node *n = looper_pick(core, at, &deadline, &held, &held_due);
        if (!fd_ran && dq_looper_fd_on(q) &&
            dq_looper_fd_step(q, now, n != NULL, n != NULL ? dq_node_due(n) : 0) > 0) {
            fd_ran = true; /* listeners may post or remove: gather again */
        } else if (n == NULL) {
            if (mode == DQ_QUIT_SAFELY &&
                looper_pick(core, now, &deadline, &held, &held_due) == NULL) {
                /* the drain's end, as in looper_steps */
                looper_reclaim(core, true);
                dq_looper_teardown(q);
                return ran > 0 ? ran : -ESHUTDOWN;
            }
            return ran;
        } else {
            const dq_key *k = dq_heap_peek_key(heap_of(core, n));
            if (k->seq >= timed_from ||
                (k->when == DQ_KEY_FRONT && k->seq <= front_from))
                return ran;
            dq_msg m;
            if (looper_take(q, core, n, &m)) {
                looper_dispatch(q, &m);
                ran++;
                /* the dispatch returned: a repeating post's delivery ends */
                err = looper_rearm(q, core);
                if (err)
                    return ran;
            }
        }
        err = looper_gather(q, core, &now, &mode);
        if (err)
            return ran > 0 ? ran : err;
    }
}

static int64_t looper_run_until_idle(dq_queue *q, dq_core *core, int64_t unused)
{
    (void)unused;
    return looper_run_due(q, core, dq_queue_time(q));
}

int dq_run_until_idle(dq_queue *q)
{
    int64_t r = looper_control(q, looper_run_until_idle, 0);
    return r > INT32_MAX ? INT32_MAX : (int)r;
}

/* Move the clock to each next due time up to now + ns and run what is
   due there; then to now + ns.  Other queues on the clock are woken as
   by dq_clock_advance. */
static int64_t looper_fast_forward(dq_queue *q, dq_core *core, int64_t ns)
{
    dq_clock *c = q->opts.clock;
    int64_t start = dq_clock_manual_now(c);
    int64_t end = start > INT64_MAX - ns ? INT64_MAX : start + ns;
    int64_t ran = 0;
    for (;;) {
        int64_t r = looper_run_due(q, core, dq_clock_manual_now(c));
        if (r < 0)
            return ran > 0 ? ran : r;
        ran += r;
        /* relaxed: only this thread stores NULL there (the teardown) */
        if (atomic_load_explicit(&q->core, memory_order_relaxed) == NULL)
            return ran;
        int mode;
        int64_t now;
        if (looper_gather(q, core, &now, &mode) != 0)
            return ran;
        dq_node *n = looper_peek(core);
        if (n == NULL || dq_node_due(n) > end)
            break;
        int64_t due = dq_node_due(n);
        if (due > now)
            dq_clock_wake_due(c, dq_clock_raise(c, due));
        else if (r == 0)
            break; /* due, yet not deliverable: a barrier holds it */
    }
    dq_clock_wake_due(c, dq_clock_raise(c, end));
    return ran;
}

int dq_fast_forward(dq_queue *q, int64_t ns)
{
    if (q == NULL || ns < 0 || q->opts.clock == NULL)
        return -EINVAL;
    int64_t r = looper_control(q, looper_fast_forward, ns);
    return r > INT32_MAX ? INT32_MAX : (int)r;
}
