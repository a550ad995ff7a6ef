/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: a queue's life.  Create and references, the tagged user
 * count that keeps the core alive for removers and walkers, idle handler
 * registration, quitting, and the pool's statistics over the live cores.
 * Reads of the core here are of its shared fields only (counts the
 * loopers publish); nothing here touches looper-only fields.
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
#include "trace.h"
#include "walk.h"
#include "wait.h"

int dq_pool_stats(struct dq_pool_stats *out)
{
    if (out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    uint64_t limbo;
    size_t queues;
    dq_cores_retired(&limbo, &queues);
    out->queues = queues;
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
    dq_trace_init_from_env();
    dq_queue *q = (dq_queue *)aligned_alloc(DQ_CACHE_LINE, sizeof(*q));
    dq_core *core = (dq_core *)aligned_alloc(DQ_CACHE_LINE, sizeof(*core));
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
    if (pthread_mutex_init(&q->calls.lock, NULL) != 0) {
        pthread_mutex_destroy(&q->idle_lock);
        dq_event_fini(&q->wake);
        goto fail;
    }
    if (dq_ident_take(q) != 0) {
        pthread_mutex_destroy(&q->calls.lock);
        pthread_mutex_destroy(&q->idle_lock);
        dq_event_fini(&q->wake);
        goto fail;
    }
    atomic_init(&q->top, 0);
    atomic_init(&q->sleep, DQ_AWAKE);
    atomic_init(&q->fd_state, NULL);
    atomic_init(&q->fd_changed, 0);
    atomic_init(&q->woken, 0);
    atomic_init(&q->users, 0);
    atomic_init(&q->refs, 1);
    atomic_init(&q->quit_mode, DQ_RUNNING);
    atomic_init(&q->quit_time, -1);
    atomic_init(&q->consumer, 0);
    atomic_init(&q->trace_name, NULL);
    if (opts != NULL)
        q->opts = *opts;
    if (q->opts.idle_spin_ns == 0)
        q->opts.idle_spin_ns = DQ_IDLE_SPIN_DEFAULT_NS;
    atomic_init(&q->observer_set, 0);
    if (q->opts.clock != NULL && dq_clock_attach(q->opts.clock, q) != 0) {
        dq_ident_end(q);
        pthread_mutex_destroy(&q->calls.lock);
        pthread_mutex_destroy(&q->idle_lock);
        dq_event_fini(&q->wake);
        goto fail;
    }

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
    dq_core_register(core);
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
    /* acquire: pairs with the teardown's release store of NULL, when the
       consumer already tore the core down */
    if (atomic_load_explicit(&q->core, memory_order_acquire) != NULL)
        dq_looper_teardown(q);
    /* off the clock first: an advance may wake q until this returns */
    if (q->opts.clock != NULL)
        dq_clock_detach(q->opts.clock, q);
    dq_fd_free(q);
    dq_observer_free(q);
    dq_ident_end(q); /* dq_current answers NULL for q from here on */
    dq_event_fini(&q->wake);
    pthread_mutex_destroy(&q->idle_lock);
    pthread_mutex_destroy(&q->calls.lock);
    free(q->idle);
    dq_trace_names_free(&q->trace_name);
    free(q);
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
        dq_idle_handler *a = (dq_idle_handler *)realloc(q->idle, cap * sizeof(*a));
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
    return dq_idle_handlers_remove(q, fn, ctx);
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
    /* relaxed: the CAS's first guess */
    int old = atomic_load_explicit(&q->quit_mode, memory_order_relaxed);
    while (old < mode &&
           !atomic_compare_exchange_weak_explicit(
               &q->quit_mode, &old, mode, memory_order_seq_cst, memory_order_relaxed))
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
    /* New removers and walkers back off from here on.  acq_rel is more
       than the bit needs: a thread refused by it reads nothing this
       thread wrote before (the mode and the tag are read through their
       own seq_cst locations), nothing here uses the old count, and the
       teardown, which waits on the count, orders itself with its own
       fetch_or and its acquire of the count at zero. */
    atomic_fetch_or_explicit(&q->users, DQ_USERS_QUIT, memory_order_acq_rel);
    dq_wake_consumer(q);
    /* dq_call's waiters leave now, each unless its fn has started,
       whatever the consumer is busy with (the mode is raised: they see
       it once signalled) */
    dq_calls_release(q);
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
    int64_t now = dq_queue_time(q), cut = -1;
    /* relaxed: only quit_safely callers read it, each through its own RMW
       on it.  The first quit_safely's time stands (a failed CAS leaves it
       in cut); a racing one trims with it too. */
    if (atomic_compare_exchange_strong_explicit(
            &q->quit_time, &cut, now, memory_order_relaxed, memory_order_relaxed))
        cut = now;
    dq_claim_due_after(q, cut);
    raise_quit_mode(q, DQ_QUIT_SAFELY);
    dq_wake_consumer(q);
}
