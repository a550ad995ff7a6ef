/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor below both sides (core.h): the tagged user count, the
 * consumer's identity and the calling thread's current queue, discard
 * reports, waking the consumer, idle handler removal, the live cores'
 * registry and the core's teardown.  Calls only down or across the floor:
 * the pool, the wait, the fd table (core_fd.c), dq_call's records
 * (core_invoke.c) and tracing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fd.h"
#include "invoke.h"
#include "pool.h"
#include "registry.h"
#include "trace.h"
#include "wait.h"

/* ---- the tagged user count -------------------------------------------- */

int dq_users_enter(dq_queue *q)
{
    /* relaxed: the CAS's first guess; the CAS itself acquires */
    uint64_t u = atomic_load_explicit(&q->users, memory_order_relaxed);
    do {
        if (u & DQ_USERS_QUIT)
            return -ESHUTDOWN;
        /* acquire: the core's reads stay after we are counted.  The
           teardown does not rest on it: our leave's release, which its
           acquire of the count at zero pairs with, orders every read of
           ours before it frees the core; and a CAS that succeeds read a
           count without the quit bit, so there is no teardown write to
           acquire yet. */
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
/* ---- consumer identity ------------------------------------------------- */

/* The calling thread's identity: never 0, and never given to another
   thread, not even once this one has exited (an address of a thread-local
   would be: a new thread usually gets the dead one's TLS block).  Taken
   from a process-wide counter on the thread's first consumer call;
   relaxed: only uniqueness matters, which the RMW gives. */
static uint64_t looper_thread_id(void)
{
    static _Atomic(uint64_t) last_id;
    static DQ_THREAD_LOCAL(uint64_t, me);
    if (__builtin_expect(DQ_TLS(me) == 0, 0))
        DQ_TLS(me) = atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
    return DQ_TLS(me);
}
bool dq_looper_is_self(dq_queue *q)
{
    /* relaxed: compared with our own id only, which no other thread
       stores; a stale value is never our id unless we stored it */
    return atomic_load_explicit(&q->consumer, memory_order_relaxed) ==
           looper_thread_id();
}
int dq_looper_claim(dq_queue *q)
{
    uint64_t me = looper_thread_id();
    /* relaxed: the id is only compared; the consumer's state is handed on
       by whatever ordered the thread's access to q */
    uint64_t cur = atomic_load_explicit(&q->consumer, memory_order_relaxed);
    if (cur == me)
        return 0;
    if (cur == 0 && atomic_compare_exchange_strong_explicit(&q->consumer, &cur, me,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed))
        return 0;
    return -EPERM;
}
/* ---- the calling thread's current queue --------------------------------- */

/* Slots live for the process: a thread may hold one long after its queue
   is gone.  Taken and given back under a lock, once per queue's life. */
static pthread_mutex_t ident_lock = PTHREAD_MUTEX_INITIALIZER;
static DQ_PROCESS_STATIC(dq_ident *, ident_free);

int dq_ident_take(dq_queue *q)
{
    pthread_mutex_lock(&ident_lock);
    dq_ident *id = ident_free;
    if (id != NULL)
        ident_free = id->next_free;
    pthread_mutex_unlock(&ident_lock);
    if (id == NULL) {
        id = (dq_ident *)DQ_PROCESS_MALLOC(sizeof(*id));
        if (id == NULL)
            return -ENOMEM;
        atomic_init(&id->gen, 0);
    }
    q->ident = id;
    /* relaxed: the slot came through the lock (or is new); only this
       queue moves its generation from here on */
    q->ident_gen = atomic_load_explicit(&id->gen, memory_order_relaxed);
    return 0;
}

void dq_ident_end(dq_queue *q)
{
    dq_ident *id = q->ident;
    /* relaxed: a thread's dq_current only compares the generation, and
       reads nothing of the queue through it */
    atomic_store_explicit(&id->gen, q->ident_gen + 1, memory_order_relaxed);
    pthread_mutex_lock(&ident_lock);
    id->next_free = ident_free;
    ident_free = id;
    pthread_mutex_unlock(&ident_lock);
}

/* The innermost consumer call in progress on this thread, or, with none
   in progress, the queue of its latest one; depth counts the calls in
   progress. */
static DQ_THREAD_LOCAL(dq_consumer_frame, current);
static DQ_THREAD_LOCAL(unsigned, current_depth);

void dq_consumer_enter(dq_queue *q, dq_consumer_frame *saved)
{
    *saved = DQ_TLS(current);
    DQ_TLS(current_depth)++;
    DQ_TLS(current) = (dq_consumer_frame){ q, q->ident, q->ident_gen };
}

void dq_consumer_leave(const dq_consumer_frame *saved)
{
    if (--DQ_TLS(current_depth) > 0)
        DQ_TLS(current) = *saved;
}

dq_queue *dq_consumer_current(void)
{
    if (DQ_TLS(current).q == NULL)
        return NULL;
    /* relaxed: see dq_ident_end */
    if (atomic_load_explicit(&DQ_TLS(current).ident->gen, memory_order_relaxed) !=
        DQ_TLS(current).gen) {
        DQ_TLS(current).q = NULL; /* destroyed: forget it */
        return NULL;
    }
    return DQ_TLS(current).q;
}

/* ---- discards and wake-ups ---------------------------------------------- */

void dq_report_discard(dq_queue *q, const dq_node *n)
{
    if (q->opts.on_discard != NULL) {
        dq_msg copy;
        dq_node_msg(n, &copy);
        q->opts.on_discard(&copy, q->opts.ctx);
    }
    if (dq_invoke_is_call(n->msg.target, n->msg.what))
        dq_call_discarded(n->msg.obj);
}

void dq_wake_sleeper(dq_queue *q, int64_t seen)
{
    if (atomic_compare_exchange_strong_explicit(
            &q->sleep, &seen, DQ_AWAKE, memory_order_seq_cst, memory_order_relaxed)) {
        /* a consumer watching fds may sleep in epoll */
        if (!dq_fd_signal(q))
            dq_event_signal(&q->wake);
    }
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
        dq_wake_sleeper(q, s);
}

void dq_observer_free(dq_queue *q)
{
    /* acquire: the setter's copy is freed after its writes (release) */
    uintptr_t set = atomic_exchange_explicit(&q->observer_set, 0, memory_order_acquire);
    if (set != DQ_OBSERVER_NONE)
        free((void *)set);
    free(q->observer);
    q->observer = NULL;
}

void dq_clock_wake_due(dq_clock *c, int64_t now)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->count; i++) {
        dq_queue *q = c->queues[i];
        /* seq_cst: the second half of the Dekker pair with looper_sleep
           (clock.h).  The clock's RMW came before this load in the single
           total order; the consumer publishes its word and then re-reads
           the clock, so if we read an older word (or awake), or our CAS
           loses to a newer word, the consumer sees our time itself.  A
           word's deadline is rounded down to even (DQ_HELD): at worst an
           early wake, after which the consumer sleeps again. */
        int64_t s = atomic_load_explicit(&q->sleep, memory_order_seq_cst);
        if (dq_sleep_word_asleep(s) && (s & ~DQ_HELD) <= now)
            dq_wake_sleeper(q, s);
    }
    pthread_mutex_unlock(&c->lock);
}
/* ---- idle handlers ------------------------------------------------------ */

int dq_idle_handlers_remove(dq_queue *q, bool (*fn)(void *ctx), void *ctx)
{
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

/* ---- the live cores ------------------------------------------------------ */

/* Every core from dq_create to its teardown, so that dq_pool_stats can
   count the nodes their loopers hold retired. */
static dq_registry cores = DQ_REGISTRY_INIT;

void dq_core_register(dq_core *core)
{
    dq_registry_add(&cores, &core->reg);
}

static void core_unregister(dq_core *core)
{
    dq_registry_remove(&cores, &core->reg);
}
void dq_cores_retired(uint64_t *limbo_out, size_t *queues)
{
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
    *queues = cores.count;
    pthread_mutex_unlock(&cores.lock);
    *limbo_out = limbo;
}

/* ---- teardown ----------------------------------------------------------- */

#define DQ_LOOPER_TORN 4u /* teardown met it in the stack */

/* Teardown: no walker is left, so straight back to the pool. */
static void retire_now(dq_node *n, dq_pool_batch *batch)
{
    if (dq_node_reset(n))
        dq_pool_batch_add(batch, n);
}
void dq_looper_teardown(dq_queue *q)
{
    /* relaxed: the consumer's (or the last reference's) own view of the
       core, which only this function changes */
    dq_core *core = atomic_load_explicit(&q->core, memory_order_relaxed);
    /* Park until the last remover or walker is out.  We set the quit bit
       ourselves so no new one can enter whatever the caller did.  acq_rel:
       release, so a remover refused by the bit is ordered after it;
       acquire, as dq_quit's own setting of it */
    atomic_fetch_or_explicit(&q->users, DQ_USERS_QUIT, memory_order_acq_rel);
    for (;;) {
        uint32_t seen = dq_event_read(&q->wake);
        /* acquire: pairs with dq_users_leave's release, so all their
           pushes onto the removal list are visible */
        if (atomic_load_explicit(&q->users, memory_order_acquire) == DQ_USERS_QUIT)
            break;
        dq_event_wait(&q->wake, seen, INT64_MAX);
    }
    /* Alone now: no producer can push (quit tag), no remover is inside. */
    dq_pool_batch *batch = &core->recycled;
    /* acquire: pairs with the removers' push CAS (their claims and links) */
    dq_node *removed =
        atomic_exchange_explicit(&core->removals, NULL, memory_order_acquire);
    /* acquire: pairs with the push CASes, so every node's payload is
       visible; the links and states below were then written before those
       pushes or by this thread (the looper), or acquired with the users
       count at zero: relaxed */
    dq_node *top = dq_top_node(atomic_load_explicit(&q->top, memory_order_acquire));
    for (dq_node *n = top; n != NULL;
         n = atomic_load_explicit(&n->next, memory_order_relaxed)) {
        uint64_t s = atomic_load_explicit(&n->state, memory_order_relaxed);
        /* pending, or a repeating post its consumer left in a delivery
           (it has not called since): either way live, and its end is
           reported once, here */
        if (dq_state_live(s) && !dq_node_is_barrier(s))
            dq_report_discard(q, n);
        n->looper_flags |= DQ_LOOPER_TORN;
    }
    /* claimed nodes no longer in the stack: unlinked by a failed delivery
       or never pushed */
    dq_node *lists[2] = { removed, core->unswept };
    for (int l = 0; l < 2; l++) {
        for (dq_node *n = lists[l]; n != NULL;) {
            dq_node *next = n->aux_next;
            if (!(n->looper_flags & DQ_LOOPER_TORN))
                retire_now(n, batch);
            n = next;
        }
    }
    /* then the stack itself (retiring clears the TORN marks) */
    for (dq_node *n = top; n != NULL;) {
        /* relaxed: as in the walk above */
        dq_node *next = atomic_load_explicit(&n->next, memory_order_relaxed);
        retire_now(n, batch);
        n = next;
    }
    while (core->limbo_head != NULL) { /* no walker is left to protect */
        dq_node *n = core->limbo_head;
        core->limbo_head = n->limbo_next;
        dq_pool_batch_add(batch, n);
    }
    dq_pool_batch_flush(batch);
    core_unregister(core);
    dq_fd_drop_all(q); /* listeners go without a call, as Android's do */
    /* relaxed: no producer can push (the tag stays set) and no walker is
       inside; an empty tagged stack for whoever still holds a reference */
    atomic_store_explicit(&q->top, DQ_TOP_QUIT, memory_order_relaxed);
    dq_heap_fini(&core->sync_heap);
    dq_heap_fini(&core->async_heap);
    /* release: a later dq_unref on another thread (acquire) sees NULL */
    atomic_store_explicit(&q->core, NULL, memory_order_release);
    free(core);
}
