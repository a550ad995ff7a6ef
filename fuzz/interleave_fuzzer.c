/* SPDX-License-Identifier: Apache-2.0 */
/*
 * interleave_fuzzer: threads whose steps are ordered by the input.
 *
 * Three worker threads share one queue: a producer (posts at now, delayed,
 * at front, async, and sync barriers), a remover/canceller (dq_cancel with
 * live, stale and 0 tokens, dq_remove and dq_has by criteria, barrier
 * removal, a second-consumer probe) and the consumer (dq_try_next,
 * dq_next_until with a deadline already reached).  The main thread is the
 * turnstile: each schedule byte releases one worker for one step, or two
 * at once (then the two steps really race), and can advance the queue's
 * manual clock.  At the end it quits (dq_quit, dq_quit_safely, or only the last
 * dq_unref) while the consumer drains.
 *
 * Checked: exactly once (every accepted message delivered or discarded once,
 * refused ones never reported), never early, FIFO / (when, seq) order per
 * class for the producer's timed messages, a cancel that returned 0 reported
 * exactly that message, dq_remove's count equals its reports and each
 * matches, a sync message posted after a standing barrier is not delivered
 * while it stands, quit_safely delivers what was due, -EPERM for the second
 * consumer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue_internal/msg.h>

#include "fuzz/watchdog.h"

#define MAX_STEPS  400
#define MAX_IDS    512
#define MAX_BARS   32
#define CLOCK_BASE (INT64_C(1) << 40)

enum { W_PRODUCER, W_REMOVER, W_CONSUMER, N_WORKERS };

#define FAIL(...)                               \
    do {                                        \
        fprintf(stderr, "interleave_fuzzer: "); \
        fprintf(stderr, __VA_ARGS__);           \
        fputc('\n', stderr);                    \
        abort();                                \
    } while (0)

static int targets[2];
static int objs[2];

/* message records; ids are arg2 */
enum { K_TIMED, K_FRONT };
typedef struct rec {
    _Atomic int fate; /* 0, 1 delivered, 2 discarded */
    _Atomic bool accepted;
    _Atomic bool refused;
    _Atomic bool by_user; /* discarded by a cancel or remove */
    _Atomic dq_token tok;
    int64_t when; /* exact for timed posts */
    int kind;
    bool async;
    int held_by; /* barrier index + 1 it was posted behind */
} rec;
static rec recs[MAX_IDS];
static _Atomic int n_ids;

typedef struct bar {
    _Atomic dq_token tok;
    _Atomic bool up; /* posted and not yet (being) removed */
} bar;
static bar bars[MAX_BARS];
static _Atomic int n_bars;

static dq_queue *q;
static dq_clock *clk; /* q's clock, a fresh one for each input: runs replay exactly */
static int64_t last_when[2];  /* producer only */
static int last_delivered[2]; /* consumer only: last timed id per class */

/* per-thread discard accounting */
static _Thread_local bool tl_in_call;
static _Thread_local int tl_discards;
static _Thread_local const dq_match *tl_match;
static _Thread_local int tl_cancel_id;

static void on_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    int id = m->arg2;
    if (id < 0 || id >= atomic_load(&n_ids))
        FAIL("discard of unknown id %d", id);
    int old = atomic_exchange(&recs[id].fate, 2);
    if (old != 0)
        FAIL("id %d discarded after it was %s", id,
             old == 1 ? "delivered" : "discarded");
    if (atomic_load(&recs[id].refused))
        FAIL("refused id %d was discarded", id);
    if (tl_in_call) {
        atomic_store(&recs[id].by_user, true);
        tl_discards++;
        if (tl_match != NULL && !dq_match_msg(tl_match, m))
            FAIL("dq_remove discarded id %d, which does not match", id);
        if (tl_cancel_id >= 0 && tl_cancel_id != id)
            FAIL("dq_cancel of id %d discarded id %d", tl_cancel_id, id);
    }
}

/* ---- the turnstile -------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned turn_mask, done_mask;
static bool finish;
static uint8_t param[N_WORKERS][4];

typedef void (*step_fn)(const uint8_t *p);

/* ---- producer steps -------------------------------------------------------- */

static int new_id(void)
{
    int id = atomic_load(&n_ids);
    if (id >= MAX_IDS)
        return -1;
    memset(&recs[id], 0, sizeof recs[id]);
    atomic_store(&n_ids, id + 1);
    return id;
}

static void producer_step(const uint8_t *p)
{
    uint8_t kind = p[0] % 8;
    if (kind == 7) { /* a barrier */
        int b = atomic_load(&n_bars);
        if (b >= MAX_BARS)
            return;
        dq_token t;
        int err = dq_post_sync_barrier(q, &t);
        if (err == 0) {
            atomic_store(&bars[b].tok, t);
            atomic_store(&bars[b].up, true);
            atomic_store(&n_bars, b + 1);
        } else if (err != -ESHUTDOWN) {
            FAIL("dq_post_sync_barrier returned %d", err);
        }
        return;
    }
    int id = new_id();
    if (id < 0)
        return;
    rec *r = &recs[id];
    bool async = (p[1] & 1) != 0;
    dq_msg m = { .target = &targets[(p[1] >> 1) & 1],
                 .what = (p[1] >> 2) % 3,
                 .obj = &objs[(p[1] >> 4) & 1],
                 .flags = async ? DQ_ASYNC : 0,
                 .arg2 = id };
    r->async = async;
    /* the newest standing barrier, if any, holds a timed sync post (its
       when is >= the barrier's); front posts go before every barrier */
    int nb = atomic_load(&n_bars);
    for (int b = nb - 1; b >= 0 && !async && kind != 6; b--)
        if (atomic_load(&bars[b].up)) {
            r->held_by = b + 1;
            break;
        }
    int cls = async ? 1 : 0;
    int64_t now = dq_clock_now(clk);
    dq_token t = 0;
    int err;
    if (kind == 6) {
        r->kind = K_FRONT;
        r->when = 0;
        err = dq_post_at_front(q, &m, &t);
    } else {
        /* timed: non-decreasing per class, often equal (FIFO) */
        int64_t when = now + (kind < 3 ? 0 : p[2] % 16);
        if (when < last_when[cls] || (p[2] & 0x80))
            when = last_when[cls] > when ? last_when[cls] : when;
        last_when[cls] = when;
        r->kind = K_TIMED;
        r->when = when;
        err = dq_post_at(q, &m, when, &t);
    }
    if (err == 0) {
        atomic_store(&r->tok, t);
        atomic_store(&r->accepted, true);
    } else {
        atomic_store(&r->refused, true);
        if (err != -ESHUTDOWN)
            FAIL("post returned %d", err);
        if (atomic_load(&r->fate) != 0)
            FAIL("refused id %d was reported", id);
    }
}

/* ---- remover steps ----------------------------------------------------------- */

static void remover_step(const uint8_t *p)
{
    int n = atomic_load(&n_ids);
    switch (p[0] % 6) {
    case 0:
    case 1: { /* cancel a token: live or stale */
        if (n == 0)
            return;
        int id = (p[1] & 0x80) ? n - 1 - (p[1] & 0x7f) % n : p[1] % n;
        dq_token t = atomic_load(&recs[id].tok);
        if (t == 0)
            return;
        int before = atomic_load(&recs[id].fate);
        tl_in_call = true;
        tl_discards = 0;
        tl_cancel_id = id;
        int err = dq_cancel(q, t);
        tl_in_call = false;
        tl_cancel_id = -1;
        if (err == 0 && (before != 0 || tl_discards != 1))
            FAIL("dq_cancel(id %d) returned 0 (fate before %d, %d reports)", id, before,
                 tl_discards);
        if (err != 0 && err != -ENOENT)
            FAIL("dq_cancel returned %d", err);
        return;
    }
    case 2: { /* remove by criteria */
        dq_match mt = { .target = &targets[p[1] & 1],
                        .fields = (p[1] >> 1) & 7,
                        .what = (p[2] % 3),
                        .obj = &objs[(p[2] >> 2) & 1] };
        tl_in_call = true;
        tl_discards = 0;
        tl_match = &mt;
        size_t k = dq_remove(q, &mt);
        tl_in_call = false;
        tl_match = NULL;
        if ((int)k != tl_discards)
            FAIL("dq_remove returned %zu, reported %d", k, tl_discards);
        return;
    }
    case 3: {
        dq_match mt = { .target = &targets[p[1] & 1],
                        .fields = (p[1] >> 1) & 7,
                        .what = (p[2] % 3),
                        .obj = &objs[(p[2] >> 2) & 1] };
        (void)dq_has(q, &mt);
        if (dq_cancel(q, 0) != -EINVAL)
            FAIL("dq_cancel(0) did not return -EINVAL");
        return;
    }
    case 4: { /* remove a barrier */
        int nb = atomic_load(&n_bars);
        if (nb == 0)
            return;
        int b = p[1] % nb;
        bool was_up = atomic_exchange(&bars[b].up, false);
        int err = dq_remove_sync_barrier(q, atomic_load(&bars[b].tok));
        if (err == 0 && !was_up)
            FAIL("barrier %d removed twice", b);
        if (err == -ENOENT && was_up)
            FAIL("standing barrier %d not found", b);
        if (err != 0 && err != -ENOENT)
            FAIL("dq_remove_sync_barrier returned %d", err);
        return;
    }
    default: { /* a second consumer */
        dq_msg out;
        int err = dq_try_next(q, &out);
        if (err != -EPERM)
            FAIL("a second consumer thread got %d, not -EPERM", err);
        return;
    }
    }
}

/* ---- consumer steps ----------------------------------------------------------- */

static void check_delivery(const dq_msg *m)
{
    int id = m->arg2;
    if (id < 0 || id >= atomic_load(&n_ids))
        FAIL("delivered unknown id %d", id);
    rec *r = &recs[id];
    int old = atomic_exchange(&r->fate, 1);
    if (old != 0)
        FAIL("id %d delivered after it was %s", id,
             old == 1 ? "delivered" : "discarded");
    if (m->when > dq_clock_now(clk))
        FAIL("id %d delivered early (when %lld, now %lld)", id, (long long)m->when,
             (long long)dq_clock_now(clk));
    if (m->when != r->when)
        FAIL("id %d delivered with when %lld, posted %lld", id, (long long)m->when,
             (long long)r->when);
    if (r->held_by && atomic_load(&bars[r->held_by - 1].up))
        FAIL("sync id %d delivered while barrier %d stood", id, r->held_by - 1);
    if (r->kind == K_TIMED) {
        int cls = r->async ? 1 : 0;
        if (id < last_delivered[cls])
            FAIL("order: %s id %d delivered after id %d", cls ? "async" : "sync", id,
                 last_delivered[cls]);
        last_delivered[cls] = id;
    }
}

static bool draining; /* written by main before it releases the consumer */

static void consumer_step(const uint8_t *p)
{
    dq_msg out;
    if (draining) { /* after the quit: deliver until -ESHUTDOWN */
        for (int i = 0; i <= MAX_IDS; i++) {
            int err = dq_try_next(q, &out);
            if (err == -ESHUTDOWN)
                return;
            if (err != 0)
                FAIL("draining after quit: consumer call returned %d", err);
            check_delivery(&out);
        }
        FAIL("the consumer never got -ESHUTDOWN after the quit");
    }
    int err = (p[0] & 3) == 3 ? dq_next_until(q, &out, dq_clock_now(clk))
                              : dq_try_next(q, &out);
    if (err == 0)
        check_delivery(&out);
    else if (err != -EAGAIN && err != -ETIMEDOUT && err != -ESHUTDOWN)
        FAIL("consumer call returned %d", err);
}

static const step_fn steps[N_WORKERS] = { producer_step, remover_step, consumer_step };

static void *worker_main(void *arg)
{
    unsigned me = 1u << (uintptr_t)arg;
    int w = (int)(uintptr_t)arg;
    tl_cancel_id = -1;
    if (w == W_CONSUMER) { /* claim the consumer role first */
        dq_msg out;
        (void)dq_try_next(q, &out);
    }
    pthread_mutex_lock(&mu);
    done_mask |= me;
    pthread_cond_broadcast(&cv);
    for (;;) {
        while (!(turn_mask & me) && !finish)
            pthread_cond_wait(&cv, &mu);
        if (finish && !(turn_mask & me))
            break;
        turn_mask &= ~me;
        uint8_t p[4];
        memcpy(p, param[w], sizeof p);
        pthread_mutex_unlock(&mu);
        steps[w](p);
        pthread_mutex_lock(&mu);
        done_mask |= me;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void run_step(unsigned mask)
{
    pthread_mutex_lock(&mu);
    done_mask = 0;
    turn_mask = mask;
    pthread_cond_broadcast(&cv);
    while ((done_mask & mask) != mask)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_watchdog_begin("interleave_fuzzer");
    size_t pos = 0;
#define BYTE() (pos < size ? data[pos++] : 0)
    memset(bars, 0, sizeof bars);
    atomic_store(&n_ids, 0);
    atomic_store(&n_bars, 0);
    last_when[0] = last_when[1] = 0;
    last_delivered[0] = last_delivered[1] = -1;
    clk = dq_clock_create_manual(CLOCK_BASE);
    if (clk == NULL)
        abort();
    dq_options o = { .on_discard = on_discard, .clock = clk };
    q = dq_create(&o);
    if (q == NULL)
        abort();
    finish = false;
    turn_mask = 0;
    done_mask = 0;
    pthread_t th[N_WORKERS];
    for (uintptr_t w = 0; w < N_WORKERS; w++)
        pthread_create(&th[w], NULL, worker_main, (void *)w);
    pthread_mutex_lock(&mu);
    while (done_mask != (1u << N_WORKERS) - 1)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    for (int s = 0; s < MAX_STEPS && pos < size; s++) {
        uint8_t b = BYTE();
        unsigned mask;
        switch (b % 8) {
        case 0:
        case 1: mask = 1u << W_PRODUCER; break;
        case 2: mask = 1u << W_REMOVER; break;
        case 3:
        case 4: mask = 1u << W_CONSUMER; break;
        case 5: mask = (1u << W_PRODUCER) | (1u << W_CONSUMER); break; /* race */
        case 6: mask = (1u << W_REMOVER) | (1u << W_CONSUMER); break;  /* race */
        default:
            if (dq_clock_advance(clk, (b >> 3) % 4 == 0 ? 1000 : (b >> 3) % 4) != 0)
                abort();
            continue;
        }
        for (int w = 0; w < N_WORKERS; w++)
            if (mask & (1u << w))
                for (int i = 0; i < 4; i++)
                    param[w][i] = BYTE();
        run_step(mask);
    }

    /* the end: quit in one of three ways while the consumer drains */
    uint8_t how = BYTE() % 3;
    int64_t quit_at = dq_clock_now(clk);
    bool any_bar_up = false;
    for (int b = 0; b < atomic_load(&n_bars); b++)
        any_bar_up |= atomic_load(&bars[b].up);
    if (how == 0)
        dq_quit_safely(q);
    else if (how == 1)
        dq_quit(q);
    if (how != 2) {
        draining = true;
        run_step(1u << W_CONSUMER);
        draining = false;
    }
    pthread_mutex_lock(&mu);
    finish = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int w = 0; w < N_WORKERS; w++)
        pthread_join(th[w], NULL);
    dq_unref(q); /* the last reference: tears down (and quits for how == 2) */
    q = NULL;
    int n = atomic_load(&n_ids);
    for (int id = 0; id < n; id++) {
        rec *r = &recs[id];
        int f = atomic_load(&r->fate);
        if (atomic_load(&r->accepted) && f == 0)
            FAIL("accepted id %d neither delivered nor discarded", id);
        if (atomic_load(&r->refused) && f != 0)
            FAIL("refused id %d was reported", id);
        /* quit_safely delivers everything due at the quit (a standing
           barrier may still hold sync messages: those are excused) */
        if (how == 0 && atomic_load(&r->accepted) && f == 2 &&
            !atomic_load(&r->by_user) && r->when <= quit_at &&
            (r->async || !any_bar_up))
            FAIL("quit_safely dropped id %d, due at %lld before the quit at %lld", id,
                 (long long)r->when, (long long)quit_at);
    }
    dq_clock_destroy(clk);
    clk = NULL;
    fuzz_watchdog_end();
    return 0;
}
