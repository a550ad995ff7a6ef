/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: the epoch.  Its roles (producers, removers, cancellers,
 * barrier threads, the consumer; the liveness barrier threads are in
 * dq_stress_liveness.c), the worker threads that serve them across
 * epochs, and the driver that runs one epoch, ends it one of three ways
 * and accounts for every message it saw.
 */
#include "stress/dq_stress.h"

#include <sched.h>
#include <sys/syscall.h>

/* ---- the epoch -------------------------------------------------------------- */

const char *const end_names[] = { "quit_safely", "quit", "unref" };

epoch_state ep;

/* a global ticket: protected posts take one after dq_post_at returns;
   the consumer reads it before each delivery call.  acq_rel/acquire so
   that "ticket < T" means the push happened before the consumer's sweep. */
static _Atomic uint64_t ticket;

int target_prot;       /* protected messages: never matched */
static int targets[4]; /* removable messages */
static int match_objs[4];
/* dq_loop runs these instead of dispatch: both check the delivery */
static void cb_a(dq_msg *m);
static void cb_b(dq_msg *m);
static void (*const callbacks[3])(dq_msg *) = { NULL, cb_a, cb_b };

rec *slot_take(int s)
{
    uint32_t i = atomic_load_explicit(&slots[s].count, memory_order_relaxed);
    if (i >= RECS_PER_SLOT)
        return NULL;
    rec *r = &slots[s].recs[i];
    atomic_store_explicit(&r->flags, 0, memory_order_relaxed);
    atomic_store_explicit(&r->tok, 0, memory_order_relaxed);
    atomic_store_explicit(&r->when_hi, INT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&r->done_ticket, UINT64_MAX, memory_order_relaxed);
    r->when_lo = 0;
    /* release: cancellers read records below count with acquire */
    atomic_store_explicit(&slots[s].count, i + 1, memory_order_release);
    return r;
}

void post_result(rec *r, int err, dq_token tok, const char *what)
{
    count_ops(1);
    if (err == 0) {
        atomic_store_explicit(&r->tok, tok, memory_order_release);
        atomic_fetch_or_explicit(&r->flags, R_ACCEPTED, memory_order_acq_rel);
        atomic_fetch_add_explicit(&n_accepted, 1, memory_order_relaxed);
    } else {
        uint32_t old =
            atomic_fetch_or_explicit(&r->flags, R_REJECTED, memory_order_acq_rel);
        if (old & (R_DELIVERED | R_DISCARDED))
            violation("%s returned %d but the message was %s", what, err,
                      (old & R_DELIVERED) ? "delivered" : "discarded");
        if (err != -ESHUTDOWN)
            violation("%s returned %d (expected 0 or -ESHUTDOWN)", what, err);
    }
}

static void *producer_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    int s = w->index;
    uint32_t tag = atomic_load(&epoch_tag) & 0xffff;
    int64_t last_when[2] = { 0, 0 };
    uint32_t pseq[2] = { 0, 0 };
    while (!atomic_load_explicit(&ep.stop_posting, memory_order_relaxed)) {
        rec *r = slot_take(s);
        if (r == NULL) { /* records exhausted for this epoch: idle */
            sleep_ns(200000);
            continue;
        }
        uint32_t idx = (uint32_t)(r - slots[s].recs);
        dq_msg m = { .arg1 = (int32_t)(tag << 16 | (uint32_t)s), .arg2 = (int32_t)idx };
        uint32_t kind = rng_below(&w->rng, 16);
        if (scenario == SC_ORDER)
            kind = kind & 1;
        else if (scenario == SC_CHURN && kind < 8)
            kind += 8;
        else if (scenario == SC_LIVENESS && kind < 4)
            kind += 8;
        dq_token tok = 0;
        int err;
        int64_t now = dq_now();
        if (kind < 4) {
            /* protected: non-decreasing when per class, often equal */
            int cls = kind & 1;
            m.target = &target_prot;
            m.flags = cls ? DQ_ASYNC : 0;
            int64_t when = now + rng_below(&w->rng, 2000000);
            if (when < last_when[cls] || rng_below(&w->rng, 3) == 0)
                when = last_when[cls] > 0 ? last_when[cls] : when;
            last_when[cls] = when;
            r->when_lo = when;
            atomic_store_explicit(&r->when_hi, when, memory_order_relaxed);
            r->pseq = ++pseq[cls];
            atomic_fetch_or_explicit(&r->flags, R_PROTECTED, memory_order_relaxed);
            err = dq_post_at(q, &m, when, &tok);
            atomic_store_explicit(
                &r->done_ticket,
                atomic_fetch_add_explicit(&ticket, 1, memory_order_acq_rel),
                memory_order_relaxed);
            post_result(r, err, tok, "dq_post_at");
            continue;
        }
        m.target = &targets[rng_below(&w->rng, 4)];
        m.what = (int32_t)rng_below(&w->rng, 4);
        m.obj = &match_objs[rng_below(&w->rng, 4)];
        m.callback = callbacks[rng_below(&w->rng, 3)];
        m.flags = rng_below(&w->rng, 4) == 0 ? DQ_ASYNC : 0;
        int64_t delay = (int64_t)rng_below(&w->rng, 5000000);
        if (scenario == SC_LIVENESS) {
            /* sync only (an async post would wake a consumer held by a
               barrier and hide a missed wake), paced so the consumer
               sleeps between posts */
            m.flags = 0;
            sleep_ns(20000 + rng_below(&w->rng, 200000));
        }
        const char *what;
        switch (kind) {
        case 4:
        case 5:
        case 6:
            r->when_lo = now;
            err = dq_post(q, &m, &tok);
            atomic_store_explicit(&r->when_hi, dq_now(), memory_order_relaxed);
            what = "dq_post";
            break;
        case 7:
        case 8:
        case 9:
            r->when_lo = dq_when_after(now, delay);
            err = dq_post_delayed(q, &m, delay, &tok);
            atomic_store_explicit(&r->when_hi, dq_when_after(dq_now(), delay),
                                  memory_order_relaxed);
            what = "dq_post_delayed";
            break;
        case 10:
            r->when_lo = INT64_MAX; /* far future */
            if (rng_below(&w->rng, 2))
                err = dq_post_at(q, &m, INT64_MAX, &tok);
            else
                err = dq_post_delayed(q, &m, INT64_MAX, &tok);
            what = "dq_post far future";
            break;
        case 11:
            r->when_lo = 0;
            atomic_store_explicit(&r->when_hi, 0, memory_order_relaxed);
            err = rng_below(&w->rng, 2) ? dq_post_at_front(q, &m, &tok)
                                        : dq_post_at(q, &m, 0, &tok);
            what = "dq_post_at_front";
            break;
        default: {
            /* liveness: earlier whens too, which sort before barriers
               posted since */
            int64_t when = scenario == SC_LIVENESS && (kind & 1)
                               ? (now > delay ? now - delay : 1)
                               : now + delay;
            r->when_lo = when;
            atomic_store_explicit(&r->when_hi, when, memory_order_relaxed);
            err = dq_post_at(q, &m, when, &tok);
            what = "dq_post_at";
            break;
        }
        }
        post_result(r, err, tok, what);
    }
    dq_unref(q);
    return NULL;
}

/* Pick a record of some producer slot (any state); NULL if none yet. */
static rec *random_rec(uint64_t *rng, int nslots)
{
    int s = (int)rng_below(rng, (uint32_t)nslots);
    uint32_t n = atomic_load_explicit(&slots[s].count, memory_order_acquire);
    if (n == 0)
        return NULL;
    /* mostly recent ones: those are still pending */
    uint32_t back =
        rng_below(rng, 4) ? rng_below(rng, n < 64 ? n : 64) : rng_below(rng, n);
    return &slots[s].recs[n - 1 - back];
}

static void *canceller_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    while (!atomic_load_explicit(&ep.stop_users, memory_order_relaxed)) {
        rec *r = random_rec(&w->rng, cfg.producers);
        if (r == NULL) {
            sched_yield();
            continue;
        }
        uint32_t before = atomic_load_explicit(&r->flags, memory_order_acquire);
        dq_token tok = atomic_load_explicit(&r->tok, memory_order_acquire);
        if (tok == 0 || !(before & R_ACCEPTED)) {
            /* token 0 must be refused */
            if (rng_below(&w->rng, 64) == 0 && dq_cancel(q, 0) != -EINVAL)
                violation("dq_cancel(0) did not return -EINVAL");
            continue;
        }
        bool fodder = !(before & R_PROTECTED);
        bool finished = (before & (R_DELIVERED | R_DISCARDED)) != 0;
        if (!fodder && !finished)
            continue; /* live protected messages are not ours to cancel */
        tl_cancel_rec = r;
        tl_discards = 0;
        tl_user_call = true;
        int err = dq_cancel(q, tok);
        tl_user_call = false;
        tl_cancel_rec = NULL;
        count_ops(1);
        if (err == 0) {
            uint32_t after = atomic_load_explicit(&r->flags, memory_order_acquire);
            if (finished)
                violation("dq_cancel of a stale token returned 0");
            if (tl_discards != 1 || !(after & R_BY_USER))
                violation("dq_cancel returned 0 but reported %u discards", tl_discards);
        } else if (err != -ENOENT) {
            violation("dq_cancel returned %d (expected 0 or -ENOENT)", err);
        }
    }
    dq_unref(q);
    return NULL;
}

/* One dq_has or dq_remove by random criteria, checked; on a remover
   thread, or on the consumer's own (which scans its heaps instead of
   walking the stack). */
static void remove_step(worker *w, dq_queue *q)
{
    dq_match mt = {
        .target = &targets[rng_below(&w->rng, 4)],
        .fields = rng_below(&w->rng, 8),
        .what = (int32_t)rng_below(&w->rng, 4),
        .obj = &match_objs[rng_below(&w->rng, 4)],
        .callback = callbacks[rng_below(&w->rng, 3)],
    };
    if (rng_below(&w->rng, 4) == 0) {
        (void)dq_has(q, &mt);
        count_ops(1);
        return;
    }
    tl_match = &mt;
    tl_discards = 0;
    tl_user_call = true;
    size_t n = dq_remove(q, &mt);
    tl_user_call = false;
    tl_match = NULL;
    count_ops(1);
    if (n != tl_discards)
        violation("dq_remove returned %zu but reported %u discards", n, tl_discards);
}

static void *remover_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    while (!atomic_load_explicit(&ep.stop_users, memory_order_relaxed)) {
        remove_step(w, q);
        if (rng_below(&w->rng, 8) == 0)
            sleep_ns(50000);
    }
    dq_unref(q);
    return NULL;
}

/* Barrier threads: barrier, then a held sync message and a passing async
   message; wait for the async one; release; also add/remove idle handlers. */
static void *barrier_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    int s = w->index;
    uint32_t tag = atomic_load(&epoch_tag) & 0xffff;
    while (!atomic_load_explicit(&ep.stop_posting, memory_order_relaxed) &&
           !atomic_load_explicit(&ep.stop_barriers, memory_order_relaxed)) {
        if (rng_below(&w->rng, 4) == 0) {
            idle_ctx *c = &idle_ctxs[rng_below(&w->rng, IDLE_CTXS)];
            int expect = 0;
            if (atomic_compare_exchange_strong(&c->state, &expect, 1)) {
                atomic_store(&c->runs, 0);
                c->keep_for = rng_below(&w->rng, 4);
                if (dq_add_idle_handler(q, idle_handler, c) != 0)
                    atomic_store(&c->state, 0);
            } else if (expect == 1 && dq_remove_idle_handler(q, idle_handler, c) == 0) {
                atomic_store(&c->state, 0);
            }
            count_ops(1);
        }
        dq_token b;
        int err = dq_post_sync_barrier(q, &b);
        count_ops(1);
        if (err == -ESHUTDOWN)
            break;
        if (err != 0) {
            violation("dq_post_sync_barrier returned %d", err);
            break;
        }
        err = dq_cancel(q, b);
        if (err != -EINVAL && err != -ENOENT) /* a quit's end may come in between */
            violation("dq_cancel of a barrier token returned %d, not -EINVAL", err);
        rec *held = slot_take(s), *pass = slot_take(s);
        if (held == NULL || pass == NULL) {
            dq_remove_sync_barrier(q, b);
            sleep_ns(1000000);
            continue;
        }
        dq_msg m = { .target = &targets[0],
                     .what = 100,
                     .arg1 = (int32_t)(tag << 16 | (uint32_t)s) };
        dq_token tok;
        atomic_fetch_or(&held->flags, R_HELD);
        m.arg2 = (int32_t)(held - slots[s].recs);
        held->when_lo = dq_now();
        err = dq_post(q, &m, &tok);
        atomic_store_explicit(&held->when_hi, dq_now(), memory_order_relaxed);
        post_result(held, err, tok, "dq_post (held)");
        m.flags = DQ_ASYNC;
        m.arg2 = (int32_t)(pass - slots[s].recs);
        pass->when_lo = dq_now();
        err = dq_post(q, &m, &tok);
        atomic_store_explicit(&pass->when_hi, dq_now(), memory_order_relaxed);
        post_result(pass, err, tok, "dq_post (async past barrier)");
        /* the async one must pass while the barrier stands (a remover may
           take it first: what=100 on targets[0] is matchable) */
        int64_t give_up = real_now() + 30000000000; /* QEMU, sanitizers */
        while (err == 0 && !(atomic_load(&pass->flags) & (R_DELIVERED | R_DISCARDED)) &&
               !atomic_load(&ep.stop_posting) && !atomic_load(&ep.stop_barriers) &&
               real_now() < give_up)
            sleep_ns(20000);
        if (err == 0 && real_now() >= give_up && !atomic_load(&ep.stop_posting) &&
            !atomic_load(&ep.stop_barriers))
            violation("async message not delivered within 30 s while a barrier stood");
        sleep_ns(rng_below(&w->rng, 200000));
        atomic_fetch_or(&held->flags, R_RELEASED);
        err = dq_remove_sync_barrier(q, b);
        count_ops(1);
        if (err != 0 && err != -ENOENT) /* -ENOENT: after dq_quit */
            violation("dq_remove_sync_barrier returned %d", err);
        if (err == 0) {
            err = dq_remove_sync_barrier(q, b);
            if (err != -ENOENT)
                violation("second dq_remove_sync_barrier returned %d, not -ENOENT",
                          err);
        }
    }
    dq_unref(q);
    return NULL;
}

/* ---- the consumer ----------------------------------------------------------- */

/* dq_loop: the ticket for a delivery must be read before dq_loop's
   dq_next picked it, so it is read at the end of the previous dispatch
   (consumer only; reset per epoch). */
static uint64_t loop_ticket;

static void consumer_dispatch(dq_msg *m, void *ctx)
{
    (void)ctx;
    check_delivery(m, loop_ticket);
    count_ops(1);
    loop_ticket = atomic_load_explicit(&ticket, memory_order_acquire);
}

static void cb_a(dq_msg *m)
{
    consumer_dispatch(m, NULL);
}

static void cb_b(dq_msg *m)
{
    consumer_dispatch(m, NULL);
}

static void *consumer_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    static pthread_t self;
    self = pthread_self();
    atomic_store(&consumer_id, &self);
    atomic_store(&consumer_tid, (pid_t)syscall(SYS_gettid));
    if (ep.use_loop) {
        int err = dq_loop(q);
        if (err != 0)
            violation("dq_loop returned %d", err);
        dq_unref(q);
        return NULL;
    }
    for (;;) {
        dq_msg out;
        if (cfg.removers > 0 &&
            !atomic_load_explicit(&ep.stop_users, memory_order_relaxed) &&
            rng_below(&w->rng, 16) == 0)
            remove_step(w, q);
        uint64_t t = atomic_load_explicit(&ticket, memory_order_acquire);
        int err;
        atomic_store(&consumer_call_since, real_now());
        if (ep.mode == END_UNREF)
            err = dq_next_until(
                q, &out, dq_now() + (scenario == SC_LIVENESS ? 200000000 : 2000000));
        else if (scenario != SC_LIVENESS && rng_below(&w->rng, 8) == 0)
            err = dq_try_next(q, &out);
        else
            err = dq_next(q, &out);
        atomic_store(&consumer_call_since, 0);
        count_ops(1);
        if (err == 0) {
            check_delivery(&out, t);
            continue;
        }
        if (err == -ESHUTDOWN)
            break;
        if (err == -ETIMEDOUT || err == -EAGAIN) {
            if (ep.mode == END_UNREF && atomic_load(&ep.stop_consumer))
                break;
            if (err == -EAGAIN)
                sched_yield();
            continue;
        }
        violation("consumer call returned %d", err);
        break;
    }
    dq_unref(q);
    return NULL;
}

/* ---- epoch driver ---------------------------------------------------------- */

int64_t epoch_length_ns(void)
{
    double ms = cfg.duration * 1000 / 8; /* at least a few epochs */
    if (scenario == SC_CHURN)
        ms = 20;
    if (scenario == SC_LOOPER && ms > 200)
        ms = 200; /* a quit every epoch: many of them */
    if (ms < 50)
        ms = 50;
    if (ms > 500)
        ms = 500;
    return (int64_t)(ms * 1e6);
}

/* Workers keep their threads for the whole run: each epoch hands every
   worker a role and a reference to the epoch's queue (start) and waits
   for it to finish (finish).  With --thread-churn=1 every epoch starts and
   joins threads instead, which exercises the pool's give-back at thread
   exit; under emulation that stops after max_thread_starts (QEMU keeps
   about 300 KB of every thread it ever ran). */
static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t workers_cv = PTHREAD_COND_INITIALIZER;
uint64_t thread_starts;
worker *workers; /* every epoch's, in role order */
int n_workers;

static void *worker_loop(void *arg)
{
    worker *w = arg;
    uint64_t served = 0;
    for (;;) {
        pthread_mutex_lock(&workers_lock);
        while (w->go == served && !w->leave)
            pthread_cond_wait(&workers_cv, &workers_lock);
        if (w->go == served) { /* told to leave, nothing handed over */
            pthread_mutex_unlock(&workers_lock);
            return NULL;
        }
        served = w->go;
        pthread_mutex_unlock(&workers_lock);
        w->fn(w);
        pthread_mutex_lock(&workers_lock);
        w->done = served;
        pthread_cond_broadcast(&workers_cv);
        pthread_mutex_unlock(&workers_lock);
    }
}

static bool churn_threads(void)
{
    return cfg.thread_churn &&
           (cfg.max_thread_starts == 0 || thread_starts < cfg.max_thread_starts);
}

void worker_start(worker *w, void *(*fn)(void *), int index, uint64_t *rng, dq_queue *q)
{
    pthread_mutex_lock(&workers_lock);
    w->index = index;
    w->rng = rng_next(rng);
    w->q = dq_ref(q);
    w->fn = fn;
    w->go++;
    bool spawn = !w->running;
    if (spawn) {
        w->running = true;
        w->leave = false;
        thread_starts++;
    }
    pthread_cond_broadcast(&workers_cv);
    pthread_mutex_unlock(&workers_lock);
    if (spawn && pthread_create(&w->thread, NULL, worker_loop, w) != 0) {
        fprintf(stderr, "dq_stress: pthread_create failed\n");
        exit(2);
    }
}

/* Stop w's thread once it is idle, and join it. */
static void retire_thread(worker *w)
{
    pthread_mutex_lock(&workers_lock);
    w->leave = true;
    pthread_cond_broadcast(&workers_cv);
    pthread_mutex_unlock(&workers_lock);
    pthread_join(w->thread, NULL);
    w->running = false;
}

/* Wait for w's epoch to end; with thread churn, for its thread too. */
void worker_finish(worker *w)
{
    pthread_mutex_lock(&workers_lock);
    while (w->done != w->go)
        pthread_cond_wait(&workers_cv, &workers_lock);
    pthread_mutex_unlock(&workers_lock);
    if (churn_threads())
        retire_thread(w);
}

/* End of the run: every serving thread leaves. */
void workers_stop(void)
{
    for (int i = 0; i < n_workers; i++)
        if (workers[i].running)
            retire_thread(&workers[i]);
}

static void account_epoch(uint64_t index, int64_t quit_at)
{
    for (int s = 0; s < n_slots; s++) {
        uint32_t n = atomic_load(&slots[s].count);
        for (uint32_t i = 0; i < n; i++) {
            rec *r = &slots[s].recs[i];
            uint32_t f = atomic_load(&r->flags);
            bool fin = (f & (R_DELIVERED | R_DISCARDED)) != 0;
            if ((f & R_ACCEPTED) && !fin)
                violation("epoch %" PRIu64 " (%s): accepted message slot %d #%u "
                          "neither delivered nor discarded",
                          index, end_names[ep.mode], s, i);
            if (!(f & (R_ACCEPTED | R_REJECTED)))
                violation("epoch %" PRIu64 ": message slot %d #%u: post never returned",
                          index, s, i);
            /* barrier threads were stopped (their barriers removed) before
               the quit, so nothing can legitimately hold a due message */
            if (ep.mode == END_QUIT_SAFELY && (f & R_ACCEPTED) && (f & R_DISCARDED) &&
                !(f & R_BY_USER) && atomic_load(&r->when_hi) <= quit_at)
                violation("epoch %" PRIu64 ": quit_safely dropped slot %d #%u, due at "
                          "%" PRId64 ", before the quit at %" PRId64,
                          index, s, i, atomic_load(&r->when_hi), quit_at);
        }
    }
}

void run_epoch(uint64_t index, uint64_t *rng, int64_t epoch_ns)
{
    if (scenario == SC_LOOPER) {
        looper_run_epoch(index, rng, epoch_ns);
        return;
    }
    memset(&ep, 0, sizeof ep);
    ep.index = index;
    ep.mode = (enum end_mode)rng_below(rng, 3);
    ep.use_loop =
        ep.mode != END_UNREF && scenario != SC_LIVENESS && rng_below(rng, 4) == 0;
    atomic_fetch_add(&epoch_tag, 1);
    for (int s = 0; s < n_slots; s++)
        atomic_store(&slots[s].count, 0);
    delivery_checks_reset();
    loop_ticket = 0;
    for (int i = 0; i < IDLE_CTXS; i++)
        atomic_store(&idle_ctxs[i].state, 0);
    atomic_store(&consumer_id, NULL);
    liveness_reset();

    dq_options opts = { .on_discard = on_discard, .dispatch = consumer_dispatch };
    if (scenario == SC_LIVENESS) {
        /* never poll, the default poll, a long one */
        static const int64_t spins[] = { -1, 0, 200000 };
        opts.idle_spin_ns = spins[rng_below(rng, 3)];
    }
    dq_queue *q = dq_create(&opts);
    if (q == NULL) {
        violation("dq_create failed: %s", strerror(errno));
        return;
    }
    ep.q = q;
    worker *ws = workers;
    int k = 0;
    for (int i = 0; i < cfg.producers; i++)
        worker_start(&ws[k++], producer_main, i, rng, q);
    int first_barrier = k;
    for (int i = 0; i < cfg.barriers; i++)
        worker_start(&ws[k++],
                     scenario == SC_LIVENESS ? liveness_barrier_main : barrier_main,
                     cfg.producers + i, rng, q);
    for (int i = 0; i < cfg.removers; i++)
        worker_start(&ws[k++], remover_main, 0, rng, q);
    for (int i = 0; i < cfg.cancellers; i++)
        worker_start(&ws[k++], canceller_main, 0, rng, q);
    worker_start(&ws[k++], consumer_main, 0, rng, q);

    int64_t end = real_now() + epoch_ns;
    while (real_now() < end && !atomic_load(&run_stop))
        sleep_ns(1000000);

    int64_t quit_at = 0;
    if (ep.mode == END_QUIT_SAFELY) {
        /* barriers down first (what a standing barrier holds at a
           quit_safely is legitimately dropped); producers keep racing */
        atomic_store(&ep.stop_barriers, true);
        for (int i = first_barrier; i < first_barrier + cfg.barriers; i++)
            worker_finish(&ws[i]);
        quit_at = dq_now();
        dq_quit_safely(q);
    } else if (ep.mode == END_QUIT) {
        dq_quit(q);
    } else {
        atomic_store(&ep.stop_consumer, true);
    }
    /* let the racers meet the quit (or the consumer's unref) a moment */
    sleep_ns(epoch_ns / 20 + 1000000);
    atomic_store(&ep.stop_posting, true);
    atomic_store(&ep.stop_users, true);
    /* the driver's reference; with END_UNREF the last of all the threads'
       unrefs quits the queue and tears it down */
    dq_unref(q);
    for (int i = 0; i < n_workers; i++)
        if (ep.mode != END_QUIT_SAFELY || i < first_barrier ||
            i >= first_barrier + cfg.barriers)
            worker_finish(&ws[i]);
    account_epoch(index, quit_at);
}
