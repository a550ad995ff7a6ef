/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Any thread: setting a queue's observer, and dq_dump.  The dump reads
 * the stack as dq_pending does (a grace period, so no node it meets is
 * recycled under it), copies what it needs, and prints after: no lock a
 * post or a delivery takes, and idle handlers and fd listeners are
 * copied under their own locks, which neither holds for longer than a
 * copy.  Nothing here touches looper-only fields.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "fd.h"
#include "trace.h"
#include "walk.h"

int dq_set_observer(dq_queue *q, const dq_observer *o)
{
    if (q == NULL ||
        (o != NULL && (o->slow_delivery_ns < 0 || o->slow_dispatch_ns < 0)))
        return -EINVAL;
    /* relaxed: a hint; a teardown after it frees the copy at the last
       dq_unref */
    if (atomic_load_explicit(&q->core, memory_order_relaxed) == NULL)
        return -ESHUTDOWN;
    uintptr_t set = DQ_OBSERVER_NONE;
    if (o != NULL) {
        dq_observer *copy = (dq_observer *)malloc(sizeof(*copy));
        if (copy == NULL)
            return -ENOMEM;
        *copy = *o;
        set = (uintptr_t)copy;
    }
    /* release: the copy's fields, to the consumer's acquire exchange
       (looper_take_observer); acquire: a copy we take back out was
       written by its setter, and we free it */
    uintptr_t old =
        atomic_exchange_explicit(&q->observer_set, set, memory_order_acq_rel);
    if (old != 0 && old != DQ_OBSERVER_NONE)
        free((void *)old); /* never taken by the consumer */
    return 0;
}

/* ---- dq_dump ------------------------------------------------------------ */

/* One pending message or barrier as the walk met it. */
typedef struct dump_item {
    dq_msg msg;
    int64_t due; /* DQ_KEY_FRONT for a front post */
    int64_t period;
    uint32_t repeat_mode;
    bool barrier, repeating;
    dq_token token;
    size_t depth; /* 0 at the top of the stack: the newest post */
} dump_item;

/* Delivery order: front posts newest first, then by due, then oldest
   first (deepest in the stack). */
static int dump_order(const void *pa, const void *pb)
{
    const dump_item *a = (const dump_item *)pa, *b = (const dump_item *)pb;
    if (a->due != b->due)
        return a->due < b->due ? -1 : 1;
    if (a->depth == b->depth)
        return 0;
    bool newest_first = a->due == DQ_KEY_FRONT;
    return (a->depth < b->depth) == newest_first ? -1 : 1;
}

/* The live messages and pending barriers, copied inside a grace period:
   *items (malloc'd, the caller frees), *count.  -ENOMEM. */
static int dump_collect(dq_queue *q, dump_item **items, size_t *count)
{
    *items = NULL;
    *count = 0;
    if (dq_users_enter(q) != 0)
        return 0; /* quit: nothing remains */
    dq_core *core = dq_queue_core(q);
    uint64_t e = dq_walk_begin(core);
    size_t cap = 0, depth = 0;
    int err = 0;
    for (dq_node *n = dq_walk_first(q); n != NULL; n = dq_walk_next(n), depth++) {
        /* acquire: as dq_live_message; the payload read after it is the
           generation whose life we checked, and the grace period keeps
           the node from being recycled until dq_walk_end */
        uint64_t s = atomic_load_explicit(&n->state, memory_order_acquire);
        bool barrier = dq_node_is_barrier(s);
        if (barrier ? dq_state_life(s) != DQ_PENDING : !dq_state_live(s))
            continue;
        if (*count == cap) {
            size_t grown_cap = cap ? 2 * cap : 64;
            dump_item *grown = (dump_item *)realloc(*items, grown_cap * sizeof(*grown));
            if (grown == NULL) {
                err = -ENOMEM;
                break;
            }
            *items = grown;
            cap = grown_cap;
        }
        dump_item *it = &(*items)[(*count)++];
        memset(it, 0, sizeof(*it));
        it->barrier = barrier;
        it->due = dq_node_due(n);
        it->token = dq_node_token(n, dq_state_gen(s));
        it->depth = depth;
        if (!barrier) {
            dq_node_msg(n, &it->msg);
            it->repeating = dq_node_is_repeating(s);
            if (it->repeating) {
                it->period = n->period;
                it->repeat_mode = n->repeat_mode;
            }
        }
    }
    dq_walk_end(core, e);
    dq_users_leave(q);
    if (err == 0 && *count > 1) /* qsort's base may not be NULL, even for 0 */
        qsort(*items, *count, sizeof(**items), dump_order);
    return err;
}

/* The idle handlers, copied under their lock: -ENOMEM. */
static int dump_idle(dq_queue *q, dq_idle_handler **idle, size_t *count)
{
    pthread_mutex_lock(&q->idle_lock);
    *count = q->idle_count;
    *idle = NULL;
    int err = 0;
    if (*count > 0) {
        *idle = (dq_idle_handler *)malloc(*count * sizeof(**idle));
        if (*idle == NULL)
            err = -ENOMEM;
        else
            memcpy(*idle, q->idle, *count * sizeof(**idle));
    }
    pthread_mutex_unlock(&q->idle_lock);
    return err;
}

#ifdef DQ_FD_SUPPORTED
/* The fd listeners, copied under the table's lock: -ENOMEM. */
static int dump_fds(dq_queue *q, dq_fd_entry **fds, size_t *count)
{
    *fds = NULL;
    *count = 0;
    /* acquire: pairs with the state's publication (dq_fd_state_get) */
    dq_fd_state *fs = atomic_load_explicit(&q->fd_state, memory_order_acquire);
    if (fs == NULL)
        return 0;
    int err = 0;
    pthread_mutex_lock(&fs->lock);
    if (fs->count > 0) {
        *fds = (dq_fd_entry *)malloc(fs->count * sizeof(**fds));
        if (*fds == NULL)
            err = -ENOMEM;
        else
            memcpy(*fds, fs->entries, fs->count * sizeof(**fds));
        *count = *fds != NULL ? fs->count : 0;
    }
    pthread_mutex_unlock(&fs->lock);
    return err;
}
#endif

static void dump_due(FILE *out, const char *key, int64_t due, int64_t now)
{
    if (due == DQ_KEY_FRONT)
        fprintf(out, " %s=front", key);
    else
        fprintf(out, " %s=%+" PRId64, key, due - now);
}

static void dump_consumer(dq_queue *q, FILE *out, int64_t now)
{
    /* relaxed, all: a snapshot of words each of which is whole */
    int64_t s = atomic_load_explicit(&q->sleep, memory_order_relaxed);
    int mode = atomic_load_explicit(&q->quit_mode, memory_order_relaxed);
    bool gone = atomic_load_explicit(&q->core, memory_order_relaxed) == NULL;
    bool started = atomic_load_explicit(&q->consumer, memory_order_relaxed) != 0;
    bool asleep = dq_sleep_word_asleep(s);
    const char *state = gone       ? "gone"
                        : !started ? "none"
                        : asleep   ? "sleeping"
                                   : "running";
    fprintf(out, "consumer state=%s", state);
    int64_t until = asleep ? (s & ~DQ_HELD) : INT64_MAX;
    if (!asleep || until == (INT64_MAX & ~DQ_HELD))
        fprintf(out, " until=never");
    else
        fprintf(out, " until=%+" PRId64, until - now);
    fprintf(out, " held=%d quit=%s\n", asleep && (s & DQ_HELD) ? 1 : 0,
            mode == DQ_QUIT_NOW      ? "now"
            : mode == DQ_QUIT_SAFELY ? "safely"
                                     : "no");
}

/* What dq_dump prints, copied first. */
typedef struct dump_snapshot {
    dump_item *items;
    size_t count;
    dq_idle_handler *idle;
    size_t idle_count;
#ifdef DQ_FD_SUPPORTED
    dq_fd_entry *fds;
#endif
    size_t fd_count;
} dump_snapshot;

static int dump_print(dq_queue *q, FILE *out, const dump_snapshot *snap)
{
    int64_t now = dq_queue_time(q);
    /* acquire: pairs with dq_set_name's exchange, so the text is whole;
       the names stay until the handle is freed (trace.h) */
    dq_trace_name *name = atomic_load_explicit(&q->trace_name, memory_order_acquire);
    fprintf(out, "dq_dump queue=%p name=%s clock=%s now=%" PRId64 "\n", (void *)q,
            name != NULL ? name->text : "-",
            q->opts.clock != NULL ? "manual" : "monotonic", now);
    dump_consumer(q, out, now);
    size_t barriers = 0;
    for (size_t i = 0; i < snap->count; i++)
        barriers += snap->items[i].barrier;
    fprintf(out, "counts pending=%zu barriers=%zu idle_handlers=%zu fds=%zu\n",
            snap->count - barriers, barriers, snap->idle_count, snap->fd_count);
    for (size_t i = 0; i < snap->count; i++) {
        const dump_item *it = &snap->items[i];
        if (it->barrier) {
            fprintf(out, "barrier");
            dump_due(out, "due", it->due, now);
            fprintf(out, " token=%" PRIu64 "\n", it->token);
            continue;
        }
        const dq_msg *m = &it->msg;
        fprintf(out, "msg");
        dump_due(out, "due", it->due, now);
        fprintf(out,
                " target=%p what=%" PRId32 " arg1=%" PRId32 " arg2=%" PRId32
                " obj=%p callback=%p async=%d repeat=%s period=%" PRId64
                " token=%" PRIu64 "\n",
                m->target, m->what, m->arg1, m->arg2, m->obj,
                m->callback != NULL ? (void *)(uintptr_t)m->callback : NULL,
                (m->flags & DQ_ASYNC) ? 1 : 0,
                !it->repeating                      ? "no"
                : it->repeat_mode == DQ_FIXED_DELAY ? "delay"
                                                    : "rate",
                it->period, it->token);
    }
    for (size_t i = 0; i < snap->idle_count; i++)
        fprintf(out, "idle fn=%p ctx=%p\n", (void *)(uintptr_t)snap->idle[i].fn,
                snap->idle[i].ctx);
#ifdef DQ_FD_SUPPORTED
    for (size_t i = 0; i < snap->fd_count; i++) {
        uint32_t ev = snap->fds[i].events;
        fprintf(out, "fd fd=%d events=%s%s%s listener=%p ctx=%p\n", snap->fds[i].fd,
                (ev & DQ_EVENT_INPUT) ? "in," : "",
                (ev & DQ_EVENT_OUTPUT) ? "out," : "", "err",
                (void *)(uintptr_t)snap->fds[i].fn, snap->fds[i].ctx);
    }
#endif
    fprintf(out, "end\n");
    return fflush(out) != 0 || ferror(out) ? -EIO : 0;
}

int dq_dump(dq_queue *q, FILE *out)
{
    if (q == NULL || out == NULL)
        return -EINVAL;
    dump_snapshot snap;
    memset(&snap, 0, sizeof(snap));
    int err = dump_collect(q, &snap.items, &snap.count);
    if (err == 0)
        err = dump_idle(q, &snap.idle, &snap.idle_count);
#ifdef DQ_FD_SUPPORTED
    if (err == 0)
        err = dump_fds(q, &snap.fds, &snap.fd_count);
#endif
    if (err == 0)
        err = dump_print(q, out, &snap);
#ifdef DQ_FD_SUPPORTED
    free(snap.fds);
#endif
    free(snap.idle);
    free(snap.items);
    return err;
}
