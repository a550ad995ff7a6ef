/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The legacy MessageQueue: one mutex, one sorted singly linked list.
 * See legacy.h for the contract.  Every field of struct
 * dq_legacy below is guarded by mu; nothing here is atomic except the
 * process-wide token counter.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bench/baselines/legacy.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <deliqueue_internal/msg.h>

/* Front posts carry when == 0 (Android's convention); timed ones when >= 1
   can't collide with it because dq_post_at maps when == 0 to the front. */
typedef struct legacy_node {
    struct legacy_node *next;
    dq_msg msg; /* msg.target == NULL: a sync barrier */
    int64_t when;
    dq_token tok;
} legacy_node;

typedef struct legacy_idle {
    bool (*fn)(void *ctx);
    void *ctx;
} legacy_idle;

struct dq_legacy {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; consumer waits here */
    legacy_node *head, *tail;
    size_t pending; /* messages, barriers not counted */
    dq_options opts;
    bool quitting; /* any quit: posts and idle-handler adds refused */
    bool quit_now; /* dq_legacy_quit (after quit_safely too) */
    bool closed;   /* quit_now, or the quit_safely drain has
                                   ended: nothing is left to remove */
    bool consumer_set;
    bool consumer_waiting;
    pthread_t consumer;
    legacy_idle *idle;
    size_t idle_len, idle_cap;
};

/* On a manual clock the consumer's condvar wait lasts at most this much
   real time before it reads the clock again: an advance moves the clock
   without signalling the condvar. */
#define LEGACY_MANUAL_POLL_NS 1000000

/* The queue's time: its manual clock's, or CLOCK_MONOTONIC (NULL). */
static int64_t legacy_now(const dq_legacy *q)
{
    return dq_clock_now(q->opts.clock);
}

/* Tokens never repeat process-wide; the low bit marks a barrier so that a
   barrier token is recognised even after the barrier is gone.  Relaxed:
   only uniqueness matters, the list itself is published by the mutex. */
static _Atomic uint64_t legacy_token_counter;

static dq_token legacy_new_token(bool barrier)
{
    uint64_t n =
        atomic_fetch_add_explicit(&legacy_token_counter, 1, memory_order_relaxed) + 1;
    return (n << 1) | (barrier ? 1u : 0u);
}

static bool legacy_token_is_barrier(dq_token tok)
{
    return (tok & 1u) != 0;
}

dq_legacy *dq_legacy_create(const dq_options *opts)
{
    dq_legacy *q = calloc(1, sizeof *q);
    if (q == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (opts != NULL)
        q->opts = *opts;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&q->mu, NULL) != 0 || pthread_cond_init(&q->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(q);
        errno = ENOMEM;
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    return q;
}

/* Report and free a detached chain of nodes; called without the mutex. */
static void legacy_discard_chain(dq_legacy *q, legacy_node *n)
{
    while (n != NULL) {
        legacy_node *next = n->next;
        if (n->msg.target != NULL && q->opts.on_discard != NULL)
            q->opts.on_discard(&n->msg, q->opts.ctx);
        free(n);
        n = next;
    }
}

/* Detach everything from `from` (whose predecessor is prev) to the end. */
static legacy_node *legacy_detach_suffix(dq_legacy *q, legacy_node *prev,
                                         legacy_node *from)
{
    for (legacy_node *n = from; n != NULL; n = n->next)
        if (n->msg.target != NULL)
            q->pending--;
    if (prev == NULL)
        q->head = NULL;
    else
        prev->next = NULL;
    q->tail = prev;
    return from;
}

static void legacy_unlink(dq_legacy *q, legacy_node *prev, legacy_node *n)
{
    if (prev == NULL)
        q->head = n->next;
    else
        prev->next = n->next;
    if (q->tail == n)
        q->tail = prev;
    n->next = NULL;
    if (n->msg.target != NULL)
        q->pending--;
}

void dq_legacy_destroy(dq_legacy *q)
{
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->mu);
    q->quitting = true;
    q->closed = true;
    legacy_node *chain = legacy_detach_suffix(q, NULL, q->head);
    pthread_mutex_unlock(&q->mu);
    legacy_discard_chain(q, chain);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->idle);
    free(q);
}

/* Insert n (when already set) in (when, insertion) order; front posts
   (when == 0) go to the head, which makes them LIFO.  Mutex held. */
static void legacy_insert(dq_legacy *q, legacy_node *n)
{
    if (q->head == NULL) {
        q->head = q->tail = n;
        return;
    }
    if (n->when == 0) {
        n->next = q->head;
        q->head = n;
        return;
    }
    if (n->when >= q->tail->when) { /* the tail fast path */
        q->tail->next = n;
        q->tail = n;
        return;
    }
    legacy_node *prev = NULL, *p = q->head; /* the O(N) walk */
    while (p != NULL && p->when <= n->when) {
        prev = p;
        p = p->next;
    }
    n->next = p;
    if (prev == NULL)
        q->head = n;
    else
        prev->next = n;
    if (p == NULL)
        q->tail = n;
}

static int legacy_enqueue(dq_legacy *q, const dq_msg *m, int64_t when, bool barrier,
                          dq_token *tok)
{
    legacy_node *n = malloc(sizeof *n);
    if (n == NULL)
        return -ENOMEM;
    n->next = NULL;
    if (barrier)
        memset(&n->msg, 0, sizeof n->msg);
    else
        n->msg = *m;
    pthread_mutex_lock(&q->mu);
    if (q->quitting) {
        pthread_mutex_unlock(&q->mu);
        free(n);
        return -ESHUTDOWN;
    }
    if (barrier)
        when = legacy_now(q); /* like postSyncBarrier: at now */
    n->when = when;
    n->msg.when = when;
    n->tok = legacy_new_token(barrier);
    legacy_insert(q, n);
    if (!barrier)
        q->pending++;
    if (q->consumer_waiting)
        pthread_cond_signal(&q->cv);
    if (tok != NULL)
        *tok = n->tok;
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int dq_legacy_post_at(dq_legacy *q, const dq_msg *m, int64_t when, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0 || when < 0)
        return -EINVAL;
    return legacy_enqueue(q, m, when, false, tok);
}

int dq_legacy_post(dq_legacy *q, const dq_msg *m, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0)
        return -EINVAL;
    return legacy_enqueue(q, m, legacy_now(q), false, tok);
}

int dq_legacy_post_delayed(dq_legacy *q, const dq_msg *m, int64_t delay, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0)
        return -EINVAL;
    return legacy_enqueue(q, m, dq_when_after(legacy_now(q), delay), false, tok);
}

int dq_legacy_post_at_front(dq_legacy *q, const dq_msg *m, dq_token *tok)
{
    if (q == NULL || dq_msg_check(m) != 0)
        return -EINVAL;
    return legacy_enqueue(q, m, 0, false, tok);
}

int dq_legacy_post_sync_barrier(dq_legacy *q, dq_token *tok)
{
    if (q == NULL)
        return -EINVAL;
    return legacy_enqueue(q, NULL, 0, true, tok);
}

/* Find the node holding tok; *prev_out receives its predecessor. */
static legacy_node *legacy_find_token(dq_legacy *q, dq_token tok,
                                      legacy_node **prev_out)
{
    legacy_node *prev = NULL;
    for (legacy_node *p = q->head; p != NULL; prev = p, p = p->next) {
        if (p->tok == tok) {
            *prev_out = prev;
            return p;
        }
    }
    return NULL;
}

int dq_legacy_cancel(dq_legacy *q, dq_token tok)
{
    if (q == NULL || tok == 0)
        return -EINVAL;
    pthread_mutex_lock(&q->mu);
    if (q->closed) { /* every message and barrier is gone */
        pthread_mutex_unlock(&q->mu);
        return -ENOENT;
    }
    legacy_node *prev, *n = legacy_find_token(q, tok, &prev);
    if (n != NULL && legacy_token_is_barrier(tok)) {
        /* a pending barrier is no message; a removed one's token is stale
           (-ENOENT below), as deliqueue.h says */
        pthread_mutex_unlock(&q->mu);
        return -EINVAL;
    }
    if (n != NULL)
        legacy_unlink(q, prev, n);
    pthread_mutex_unlock(&q->mu);
    if (n == NULL)
        return -ENOENT;
    legacy_discard_chain(q, n);
    return 0;
}

int dq_legacy_remove_sync_barrier(dq_legacy *q, dq_token tok)
{
    if (q == NULL || tok == 0)
        return -EINVAL;
    pthread_mutex_lock(&q->mu);
    if (q->closed) { /* as dq_cancel */
        pthread_mutex_unlock(&q->mu);
        return -ENOENT;
    }
    if (!legacy_token_is_barrier(tok)) {
        pthread_mutex_unlock(&q->mu);
        return -ENOENT;
    }
    legacy_node *prev, *n = legacy_find_token(q, tok, &prev);
    if (n != NULL) {
        legacy_unlink(q, prev, n);
        if (q->consumer_waiting)
            pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    if (n == NULL)
        return -ENOENT;
    free(n);
    return 0;
}

size_t dq_legacy_remove(dq_legacy *q, const dq_match *m)
{
    if (q == NULL || dq_match_check(m) != 0)
        return 0;
    legacy_node *removed = NULL, **removed_tail = &removed;
    size_t count = 0;
    pthread_mutex_lock(&q->mu);
    if (!q->closed) {
        legacy_node *prev = NULL, *p = q->head;
        while (p != NULL) {
            legacy_node *next = p->next;
            if (p->msg.target != NULL && dq_match_msg(m, &p->msg)) {
                legacy_unlink(q, prev, p);
                *removed_tail = p;
                removed_tail = &p->next;
                count++;
            } else {
                prev = p;
            }
            p = next;
        }
    }
    pthread_mutex_unlock(&q->mu);
    legacy_discard_chain(q, removed);
    return count;
}

bool dq_legacy_has(dq_legacy *q, const dq_match *m)
{
    if (q == NULL || dq_match_check(m) != 0)
        return false;
    bool found = false;
    pthread_mutex_lock(&q->mu);
    if (!q->closed)
        for (legacy_node *p = q->head; p != NULL && !found; p = p->next)
            found = p->msg.target != NULL && dq_match_msg(m, &p->msg);
    pthread_mutex_unlock(&q->mu);
    return found;
}

int dq_legacy_add_idle_handler(dq_legacy *q, bool (*fn)(void *ctx), void *ctx)
{
    if (q == NULL || fn == NULL)
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (q->quitting) {
        rc = -ESHUTDOWN;
    } else {
        if (q->idle_len == q->idle_cap) {
            size_t cap = q->idle_cap ? q->idle_cap * 2 : 4;
            legacy_idle *grown = realloc(q->idle, cap * sizeof *grown);
            if (grown == NULL)
                rc = -ENOMEM;
            else {
                q->idle = grown;
                q->idle_cap = cap;
            }
        }
        if (rc == 0)
            q->idle[q->idle_len++] = (legacy_idle){ fn, ctx };
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Drop one (fn, ctx) entry.  Mutex held. */
static bool legacy_idle_drop(dq_legacy *q, bool (*fn)(void *ctx), void *ctx)
{
    for (size_t i = q->idle_len; i-- > 0;) {
        if (q->idle[i].fn == fn && q->idle[i].ctx == ctx) {
            memmove(&q->idle[i], &q->idle[i + 1],
                    (q->idle_len - i - 1) * sizeof q->idle[0]);
            q->idle_len--;
            return true;
        }
    }
    return false;
}

int dq_legacy_remove_idle_handler(dq_legacy *q, bool (*fn)(void *ctx), void *ctx)
{
    if (q == NULL || fn == NULL)
        return -EINVAL;
    pthread_mutex_lock(&q->mu);
    bool found = legacy_idle_drop(q, fn, ctx);
    pthread_mutex_unlock(&q->mu);
    return found ? 0 : -ENOENT;
}

/* Run the idle handlers, without the mutex (a handler may post).  As in
   Android's next(), they run at most once per blocking call.  Called and returns with the mutex held. */
static void consumer_run_idle(dq_legacy *q)
{
    if (q->idle_len == 0)
        return;
    size_t n = q->idle_len;
    legacy_idle *snap = malloc(n * sizeof *snap);
    if (snap == NULL)
        return;
    memcpy(snap, q->idle, n * sizeof *snap);
    pthread_mutex_unlock(&q->mu);
    bool *keep = malloc(n * sizeof *keep);
    for (size_t i = 0; i < n; i++) {
        bool k = snap[i].fn(snap[i].ctx);
        if (keep != NULL)
            keep[i] = k;
    }
    pthread_mutex_lock(&q->mu);
    for (size_t i = 0; keep != NULL && i < n; i++)
        if (!keep[i])
            legacy_idle_drop(q, snap[i].fn, snap[i].ctx);
    free(keep);
    free(snap);
}

/* The message the consumer would deliver next (due or not), honouring a
   barrier at the head; NULL if none.  Mutex held. */
static legacy_node *consumer_candidate(dq_legacy *q, legacy_node **prev_out)
{
    legacy_node *prev = NULL, *p = q->head;
    if (p != NULL && p->msg.target == NULL) { /* barrier: next async only */
        while (p != NULL && (p->msg.target == NULL || (p->msg.flags & DQ_ASYNC) == 0)) {
            prev = p;
            p = p->next;
        }
    }
    *prev_out = prev;
    return p;
}

static int consumer_enter(dq_legacy *q)
{
    pthread_t self = pthread_self();
    if (!q->consumer_set) {
        q->consumer_set = true;
        q->consumer = self;
        return 0;
    }
    return pthread_equal(q->consumer, self) ? 0 : -EPERM;
}

/* One delivery attempt: 0 and *out filled, -EAGAIN (*due_out = when the
   candidate is due, INT64_MAX if none), or -ESHUTDOWN.  Mutex held; on
   -ESHUTDOWN *leftover receives what quit_safely left undeliverable. */
static int consumer_take(dq_legacy *q, dq_msg *out, int64_t *due_out,
                         legacy_node **leftover)
{
    legacy_node *prev, *n = consumer_candidate(q, &prev);
    if (n != NULL && n->when <= legacy_now(q)) {
        legacy_unlink(q, prev, n);
        *out = n->msg;
        out->when = n->when;
        free(n);
        return 0;
    }
    if (q->quitting) {
        /* quit_safely kept only due messages; whatever a barrier still holds
           can never be delivered now: the drain ends, drop (and report) it. */
        q->closed = true;
        *leftover = legacy_detach_suffix(q, NULL, q->head);
        return -ESHUTDOWN;
    }
    *due_out = n != NULL ? n->when : INT64_MAX;
    return -EAGAIN;
}

int dq_legacy_try_next(dq_legacy *q, dq_msg *out)
{
    if (q == NULL || out == NULL)
        return -EINVAL;
    legacy_node *leftover = NULL;
    int64_t due;
    pthread_mutex_lock(&q->mu);
    int rc = consumer_enter(q);
    if (rc == 0)
        rc = consumer_take(q, out, &due, &leftover);
    if (rc == -EAGAIN && q->idle_len != 0) {
        /* about to report "nothing due": that is an idle moment too */
        consumer_run_idle(q);
        rc = consumer_take(q, out, &due, &leftover);
    }
    pthread_mutex_unlock(&q->mu);
    legacy_discard_chain(q, leftover);
    return rc;
}

static int64_t legacy_real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int dq_legacy_next_until(dq_legacy *q, dq_msg *out, int64_t deadline)
{
    if (q == NULL || out == NULL)
        return -EINVAL;
    legacy_node *leftover = NULL;
    bool idle_ran = false;
    pthread_mutex_lock(&q->mu);
    int rc = consumer_enter(q);
    while (rc == 0) {
        int64_t due;
        rc = consumer_take(q, out, &due, &leftover);
        if (rc != -EAGAIN)
            break;
        if (!idle_ran && q->idle_len != 0) {
            idle_ran = true;
            consumer_run_idle(q); /* may drop and retake the mutex */
            rc = consumer_take(q, out, &due, &leftover);
            if (rc != -EAGAIN)
                break;
        }
        int64_t now = legacy_now(q);
        if (now >= deadline) {
            rc = -ETIMEDOUT;
            break;
        }
        rc = 0;
        int64_t wake = due < deadline ? due : deadline;
        int64_t wait = wake - now;
        /* the wait is in real time; a manual clock's time is not, and
           another thread may advance it at any moment */
        if (q->opts.clock != NULL && wait > LEGACY_MANUAL_POLL_NS)
            wait = LEGACY_MANUAL_POLL_NS;
        int64_t real = legacy_real_now();
        struct timespec ts;
        if (wait <= 0) {
            continue;
        } else if (wait > INT64_MAX - real) {
            ts.tv_sec = INT64_MAX / 1000000000 / 2;
            ts.tv_nsec = 0;
        } else {
            int64_t abs_ns = real + wait;
            ts.tv_sec = abs_ns / 1000000000;
            ts.tv_nsec = abs_ns % 1000000000;
        }
        q->consumer_waiting = true;
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
        q->consumer_waiting = false;
    }
    pthread_mutex_unlock(&q->mu);
    legacy_discard_chain(q, leftover);
    return rc;
}

int dq_legacy_next(dq_legacy *q, dq_msg *out)
{
    return dq_legacy_next_until(q, out, INT64_MAX);
}

void dq_legacy_quit(dq_legacy *q)
{
    if (q == NULL)
        return;
    legacy_node *chain = NULL;
    pthread_mutex_lock(&q->mu);
    if (!q->quit_now) { /* quit after quit_safely drops the rest */
        q->quitting = true;
        q->quit_now = true;
        q->closed = true;
        chain = legacy_detach_suffix(q, NULL, q->head);
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    legacy_discard_chain(q, chain);
}

void dq_legacy_quit_safely(dq_legacy *q)
{
    if (q == NULL)
        return;
    legacy_node *chain = NULL;
    pthread_mutex_lock(&q->mu);
    if (!q->quitting) {
        q->quitting = true;
        int64_t now = legacy_now(q);
        legacy_node *prev = NULL, *p = q->head;
        while (p != NULL && p->when <= now) { /* sorted: due ones first */
            prev = p;
            p = p->next;
        }
        chain = legacy_detach_suffix(q, prev, p);
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    legacy_discard_chain(q, chain);
}

bool dq_legacy_is_idle(dq_legacy *q)
{
    if (q == NULL)
        return true;
    pthread_mutex_lock(&q->mu);
    legacy_node *prev, *n = consumer_candidate(q, &prev);
    bool idle = q->closed || n == NULL || n->when > legacy_now(q);
    pthread_mutex_unlock(&q->mu);
    return idle;
}

size_t dq_legacy_pending(dq_legacy *q)
{
    if (q == NULL)
        return 0;
    pthread_mutex_lock(&q->mu);
    size_t n = q->closed ? 0 : q->pending; /* as dq_pending */
    pthread_mutex_unlock(&q->mu);
    return n;
}
