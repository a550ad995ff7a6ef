/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: the looper API under contention (scenario looper).
 * Producers race dq_invoke, dq_call with short timeouts, repeating posts
 * in both modes that they cancel at random, and dq_wake, against one
 * consumer on dq_loop or dq_loop_once whose callbacks invoke, call and
 * cancel too; each epoch ends with a dq_quit or a dq_quit_safely at a
 * random moment while the producers still post, so the -ESHUTDOWN paths
 * run.  The invariants are listed in dq_stress.h ("looper").
 */
#include "stress/dq_stress.h"

#include <limits.h>
#include <sys/syscall.h>

/* ---- records ---------------------------------------------------------------- *
 * One set per producer, and one for the consumer's inline calls (the last).
 * Every field is atomic: the consumer, the producer that owns the record
 * and the threads that discard race on them.
 */

#define LP_CALLS     8192
#define LP_INVOKES   8192
#define LP_REPS      1024
#define LP_LIVE_REPS 6 /* a producer's repeating posts not yet cancelled */
#define LP_PENDING   INT_MIN

typedef struct lp_call {
    _Atomic uint32_t ran;
    _Atomic int result; /* LP_PENDING until dq_call returned */
} lp_call;

typedef struct lp_invoke {
    _Atomic uint32_t ran, discarded;
    _Atomic int result;
} lp_invoke;

typedef struct lp_rep {
    _Atomic dq_token tok; /* 0 until the post returned */
    _Atomic int result;
    _Atomic uint32_t delivered, ends;
    _Atomic uint32_t cancel_tries, cancel_wins;
    /* after a cancel answered 0: dq_now() then, and the deliveries seen
       then; `cancelled` is stored last with release */
    _Atomic int64_t cancel_at;
    _Atomic uint32_t delivered_at_cancel;
    _Atomic bool cancelled;
    int64_t first, period; /* written before the post */
    uint32_t mode;
    int64_t last_when; /* consumer only */
} lp_rep;

typedef struct lp_set {
    lp_call calls[LP_CALLS];
    lp_invoke invokes[LP_INVOKES];
    lp_rep reps[LP_REPS];
    _Atomic uint32_t n_calls, n_invokes, n_reps; /* owner writes, release */
    uint32_t live[LP_LIVE_REPS], n_live;         /* owner only */
} lp_set;

static lp_set *sets; /* cfg.producers + 1 */
static int n_sets;

static struct {
    dq_queue *q;
    _Atomic bool stop_posting;
    _Atomic bool quitting; /* set (seq_cst) before the driver's quit call */
    bool use_loop_once;
    bool quit_safely;
    _Atomic uint64_t call_discards; /* on_discard of dq_call messages */
    _Atomic uint64_t wakes_sent;    /* incremented before each dq_wake */
    uint64_t woken;                 /* consumer only */
} lp;

static int lp_target; /* the repeating posts' target */

/* what the run exercised (driver only, summed at each epoch's end) */
static uint64_t tot_calls[3], tot_invokes, tot_invokes_discarded, tot_reps,
    tot_cancelled, tot_occurrences, tot_woken;

/* ---- the functions the consumer runs ------------------------------------ */

static void check_on_consumer(const char *who)
{
    if (!dq_is_consumer(lp.q))
        violation("looper: %s ran on a thread that is not the consumer", who);
    if (dq_current() != lp.q)
        violation("looper: dq_current() inside %s is %p, not the queue %p", who,
                  (void *)dq_current(), (void *)lp.q);
}

static void call_fn(void *ctx)
{
    lp_call *c = ctx;
    check_on_consumer("a dq_call function");
    if (atomic_fetch_add_explicit(&c->ran, 1, memory_order_acq_rel) != 0)
        violation("looper: a dq_call function ran twice");
    /* acquire: the caller stores its result with release after dq_call
       returned, so a timed-out call seen here ran after its -ETIMEDOUT */
    if (atomic_load_explicit(&c->result, memory_order_acquire) == -ETIMEDOUT)
        violation("looper: a dq_call function ran after its dq_call returned "
                  "-ETIMEDOUT");
    count_ops(1);
}

static void invoke_fn(void *ctx)
{
    lp_invoke *v = ctx;
    check_on_consumer("a dq_invoke function");
    uint32_t old = atomic_fetch_add_explicit(&v->ran, 1, memory_order_acq_rel);
    if (old != 0 || atomic_load(&v->discarded) != 0)
        violation("looper: a dq_invoke function ran after it %s",
                  old ? "ran" : "was discarded");
    atomic_fetch_add_explicit(&n_delivered, 1, memory_order_relaxed);
    count_ops(1);
}

static lp_invoke *invoke_of(const void *obj)
{
    for (int s = 0; s < n_sets; s++) {
        const lp_invoke *base = sets[s].invokes;
        if ((const char *)obj >= (const char *)base &&
            (const char *)obj < (const char *)(base + LP_INVOKES))
            return (lp_invoke *)obj;
    }
    return NULL;
}

/* Invoke and call messages are the library's (dq_is_invoke); DESIGN.md,
   "Invoke and call": an invoke carries its ctx in obj, a call its own
   record, so an obj among our invoke records is an invoke's. */
static void lp_on_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    if (dq_is_invoke(m)) {
        lp_invoke *v = invoke_of(m->obj);
        if (v == NULL) {
            atomic_fetch_add_explicit(&lp.call_discards, 1, memory_order_relaxed);
            return;
        }
        uint32_t old =
            atomic_fetch_add_explicit(&v->discarded, 1, memory_order_acq_rel);
        if (old != 0 || atomic_load(&v->ran) != 0)
            violation("looper: a dq_invoke message discarded after it %s",
                      old ? "was discarded" : "ran");
        atomic_fetch_add_explicit(&n_discarded, 1, memory_order_relaxed);
        return;
    }
    uint32_t a1 = (uint32_t)m->arg1, s = a1 & 0xffff, i = (uint32_t)m->arg2;
    if (m->target != &lp_target || (a1 >> 16) != (atomic_load(&epoch_tag) & 0xffff) ||
        s >= (uint32_t)n_sets || i >= LP_REPS) {
        violation("looper: on_discard of a message from nowhere (arg1=%#x arg2=%d)", a1,
                  m->arg2);
        return;
    }
    lp_rep *r = &sets[s].reps[i];
    if (atomic_fetch_add_explicit(&r->ends, 1, memory_order_acq_rel) != 0)
        violation("looper: the end of repeating post %u #%u reported twice", s, i);
    atomic_fetch_add_explicit(&n_discarded, 1, memory_order_relaxed);
}

static int cancel_rep(lp_rep *r, const char *where)
{
    dq_token tok = atomic_load_explicit(&r->tok, memory_order_acquire);
    if (tok == 0)
        return 1;
    atomic_fetch_add(&r->cancel_tries, 1);
    int err = dq_cancel(lp.q, tok);
    count_ops(1);
    if (err == 0) {
        int64_t now = dq_now();
        if (atomic_fetch_add(&r->cancel_wins, 1) != 0)
            violation("looper: dq_cancel of a repeating post answered 0 twice");
        if (atomic_load(&r->ends) != 1)
            violation("looper: dq_cancel (%s) answered 0 with the post's end "
                      "reported %u times",
                      where, atomic_load(&r->ends));
        atomic_store(&r->cancel_at, now);
        atomic_store(&r->delivered_at_cancel, atomic_load(&r->delivered));
        atomic_store_explicit(&r->cancelled, true, memory_order_release);
    } else if (err == -ENOENT) {
        /* another cancel (ours raced it) or a quit ended it; neither:
           a live post that dq_cancel failed to find */
        if (atomic_load(&r->cancel_tries) == 1 && atomic_load(&r->cancel_wins) == 0 &&
            !atomic_load(&lp.quitting) && atomic_load(&r->ends) == 0)
            violation("looper: dq_cancel (%s) of a live repeating post answered "
                      "-ENOENT",
                      where);
    } else {
        violation("looper: dq_cancel of a repeating post returned %d", err);
    }
    return err;
}

static void rep_cb(dq_msg *m)
{
    int64_t now = dq_now();
    uint32_t a1 = (uint32_t)m->arg1, s = a1 & 0xffff, i = (uint32_t)m->arg2;
    if ((a1 >> 16) != (atomic_load(&epoch_tag) & 0xffff) || s >= (uint32_t)n_sets ||
        i >= LP_REPS) {
        violation("looper: a delivery from nowhere (arg1=%#x arg2=%d)", a1, m->arg2);
        return;
    }
    lp_rep *r = &sets[s].reps[i];
    check_on_consumer("a repeating post's callback");
    /* acquire: cancel_at was stored before `cancelled`.  An occurrence
       taken before the cancel returned was due before then (never early),
       so one due later was taken after: delivered after the cancel */
    if (atomic_load_explicit(&r->cancelled, memory_order_acquire) &&
        m->when > atomic_load(&r->cancel_at))
        violation("looper: repeating post %u #%u (%s) delivered an occurrence due at "
                  "%" PRId64 " after its dq_cancel returned 0 at %" PRId64,
                  s, i, r->mode == DQ_FIXED_RATE ? "fixed rate" : "fixed delay",
                  m->when, atomic_load(&r->cancel_at));
    if (now < m->when)
        violation("looper: occurrence delivered early (now %" PRId64 ", due %" PRId64
                  ")",
                  now, m->when);
    if (r->mode == DQ_FIXED_RATE) {
        if (m->when < r->first || (m->when - r->first) % r->period != 0)
            violation("looper: fixed-rate occurrence due at %" PRId64
                      ", off the grid first %" PRId64 " + k * %" PRId64,
                      m->when, r->first, r->period);
        if (r->last_when != 0 && m->when <= r->last_when)
            violation("looper: fixed-rate occurrence due at %" PRId64
                      " after one due at %" PRId64,
                      m->when, r->last_when);
    } else if (r->last_when != 0 && m->when - r->last_when < r->period) {
        violation("looper: fixed-delay occurrences due %" PRId64
                  " ns apart, period %" PRId64,
                  m->when - r->last_when, r->period);
    }
    r->last_when = m->when;
    atomic_fetch_add_explicit(&r->delivered, 1, memory_order_release);
    count_ops(1);
}

/* ---- the consumer's own calls (inline) ------------------------------------- */

static void consumer_extras(uint64_t *rng)
{
    lp_set *st = &sets[n_sets - 1];
    uint32_t k = rng_below(rng, 64);
    if (k == 0) {
        uint32_t n = atomic_load_explicit(&st->n_calls, memory_order_relaxed);
        if (n >= LP_CALLS)
            return;
        lp_call *c = &st->calls[n];
        atomic_store(&c->result, LP_PENDING);
        atomic_store_explicit(&st->n_calls, n + 1, memory_order_release);
        int err = dq_call(lp.q, call_fn, c, 1000000);
        atomic_store_explicit(&c->result, err, memory_order_release);
        if (err == 0 && atomic_load(&c->ran) != 1)
            violation("looper: an inline dq_call answered 0 without running fn");
        if (err != 0 && err != -ESHUTDOWN)
            violation("looper: an inline dq_call returned %d", err);
    } else if (k == 1) {
        uint32_t n = atomic_load_explicit(&st->n_invokes, memory_order_relaxed);
        if (n >= LP_INVOKES)
            return;
        lp_invoke *v = &st->invokes[n];
        atomic_store(&v->result, LP_PENDING);
        atomic_store_explicit(&st->n_invokes, n + 1, memory_order_release);
        int err = dq_invoke(lp.q, invoke_fn, v);
        atomic_store(&v->result, err);
        if (err == 0) {
            atomic_fetch_add_explicit(&n_accepted, 1, memory_order_relaxed);
            if (atomic_load(&v->ran) != 1)
                violation("looper: an inline dq_invoke answered 0 without running fn");
        } else if (err != -ESHUTDOWN) {
            violation("looper: an inline dq_invoke returned %d", err);
        }
    } else if (k == 2) {
        /* cancel some producer's post, maybe the one being delivered */
        int s = (int)rng_below(rng, (uint32_t)(n_sets - 1));
        uint32_t n = atomic_load_explicit(&sets[s].n_reps, memory_order_acquire);
        if (n > 0)
            cancel_rep(&sets[s].reps[n - 1], "on the consumer");
    }
}

static uint64_t consumer_rng; /* consumer only */

static void rep_cb_outer(dq_msg *m)
{
    rep_cb(m);
    /* a cancel from inside its own delivery */
    if (rng_below(&consumer_rng, 8) == 0) {
        uint32_t s = (uint32_t)m->arg1 & 0xffff, i = (uint32_t)m->arg2;
        if (s < (uint32_t)n_sets && i < LP_REPS)
            cancel_rep(&sets[s].reps[i], "inside its own delivery");
    }
    consumer_extras(&consumer_rng);
}

static void *lp_consumer_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    consumer_rng = w->rng;
    atomic_store(&consumer_tid, (pid_t)syscall(SYS_gettid));
    if (!lp.use_loop_once) {
        int err = dq_loop(q);
        if (err != 0)
            violation("looper: dq_loop returned %d", err);
        dq_unref(q);
        return NULL;
    }
    for (;;) {
        int64_t deadline = dq_now() + (int64_t)rng_below(&consumer_rng, 3000000);
        int rc = dq_loop_once(q, deadline);
        count_ops(1);
        if (rc == -ESHUTDOWN)
            break;
        if (rc == DQ_ONCE_WOKEN) {
            /* each wake reported ends a distinct dq_wake whose increment
               happens before it (coalesced: never more reports than wakes) */
            lp.woken++;
            uint64_t sent = atomic_load_explicit(&lp.wakes_sent, memory_order_relaxed);
            if (lp.woken > sent)
                violation("looper: dq_loop_once reported %" PRIu64 " wakes, %" PRIu64
                          " were sent",
                          lp.woken, sent);
        } else if (rc != DQ_ONCE_MESSAGE && rc != DQ_ONCE_TIMEOUT) {
            violation("looper: dq_loop_once returned %d", rc);
            break;
        }
        consumer_extras(&consumer_rng);
    }
    dq_unref(q);
    return NULL;
}

/* ---- producers -------------------------------------------------------------- */

static void producer_call(worker *w, lp_set *st)
{
    uint32_t n = atomic_load_explicit(&st->n_calls, memory_order_relaxed);
    if (n >= LP_CALLS)
        return;
    lp_call *c = &st->calls[n];
    atomic_store(&c->result, LP_PENDING);
    atomic_store_explicit(&st->n_calls, n + 1, memory_order_release);
    static const int64_t timeouts[] = { 0, 1000, 20000, 200000, 2000000, 50000000 };
    int64_t timeout = timeouts[rng_below(&w->rng, 6)];
    if (dq_is_consumer(lp.q))
        violation("looper: dq_is_consumer is true on a producer");
    int err = dq_call(lp.q, call_fn, c, timeout);
    count_ops(1);
    atomic_store_explicit(&c->result, err, memory_order_release);
    if (err != 0 && err != -ETIMEDOUT && err != -ESHUTDOWN)
        violation("looper: dq_call returned %d (expected 0, -ETIMEDOUT or -ESHUTDOWN)",
                  err);
    /* acquire: fn's increment happens before dq_call returns 0 */
    uint32_t ran = atomic_load_explicit(&c->ran, memory_order_acquire);
    if (err == 0 && ran != 1)
        violation("looper: dq_call answered 0 but fn ran %u times", ran);
    if (err != 0 && ran != 0)
        violation("looper: dq_call answered %d but fn ran", err);
}

static void producer_invoke(worker *w, lp_set *st)
{
    (void)w;
    uint32_t n = atomic_load_explicit(&st->n_invokes, memory_order_relaxed);
    if (n >= LP_INVOKES)
        return;
    lp_invoke *v = &st->invokes[n];
    atomic_store(&v->result, LP_PENDING);
    atomic_store_explicit(&st->n_invokes, n + 1, memory_order_release);
    int err = dq_invoke(lp.q, invoke_fn, v);
    count_ops(1);
    atomic_store(&v->result, err);
    if (err == 0)
        atomic_fetch_add_explicit(&n_accepted, 1, memory_order_relaxed);
    else if (err != -ESHUTDOWN)
        violation("looper: dq_invoke returned %d", err);
}

static void producer_repeat(worker *w, lp_set *st, int s)
{
    uint32_t n = atomic_load_explicit(&st->n_reps, memory_order_relaxed);
    if (n >= LP_REPS || st->n_live >= LP_LIVE_REPS)
        return;
    lp_rep *r = &st->reps[n];
    atomic_store(&r->result, LP_PENDING);
    r->mode = rng_below(&w->rng, 2) ? DQ_FIXED_RATE : DQ_FIXED_DELAY;
    r->period = 100000 + (int64_t)rng_below(&w->rng, 900000);
    r->first = dq_now() + (int64_t)rng_below(&w->rng, 300000);
    r->last_when = 0;
    atomic_store_explicit(&st->n_reps, n + 1, memory_order_release);
    dq_msg m = { .target = &lp_target,
                 .what = 7,
                 .arg1 =
                     (int32_t)((atomic_load(&epoch_tag) & 0xffff) << 16 | (uint32_t)s),
                 .arg2 = (int32_t)n,
                 .callback = rep_cb_outer };
    dq_token tok = 0;
    int err = dq_post_repeating(lp.q, &m, r->first, r->period, r->mode, &tok);
    count_ops(1);
    atomic_store(&r->result, err);
    if (err == 0) {
        atomic_fetch_add_explicit(&n_accepted, 1, memory_order_relaxed);
        atomic_store_explicit(&r->tok, tok, memory_order_release);
        st->live[st->n_live++] = n;
    } else if (err != -ESHUTDOWN) {
        violation("looper: dq_post_repeating returned %d", err);
    }
}

static void producer_cancel(worker *w, lp_set *st)
{
    if (st->n_live == 0)
        return;
    uint32_t j = rng_below(&w->rng, st->n_live);
    lp_rep *r = &st->reps[st->live[j]];
    st->live[j] = st->live[--st->n_live];
    if (cancel_rep(r, "on a producer") == 0 && rng_below(&w->rng, 4) == 0) {
        int err = dq_cancel(lp.q, atomic_load(&r->tok));
        count_ops(1);
        if (err != -ENOENT)
            violation("looper: a second dq_cancel of a repeating post returned %d",
                      err);
    }
}

static void *lp_producer_main(void *arg)
{
    worker *w = arg;
    int s = w->index;
    lp_set *st = &sets[s];
    while (!atomic_load_explicit(&lp.stop_posting, memory_order_relaxed)) {
        uint32_t k = rng_below(&w->rng, 100);
        if (k < 30) {
            producer_invoke(w, st);
        } else if (k < 55) {
            producer_call(w, st);
        } else if (k < 70) {
            producer_repeat(w, st, s);
        } else if (k < 85) {
            producer_cancel(w, st);
        } else {
            atomic_fetch_add_explicit(&lp.wakes_sent, 1, memory_order_relaxed);
            int err = dq_wake(lp.q);
            count_ops(1);
            if (err != 0 && err != -ESHUTDOWN)
                violation("looper: dq_wake returned %d", err);
        }
        if (rng_below(&w->rng, 4) == 0)
            sleep_ns(rng_below(&w->rng, 100000));
    }
    dq_unref(w->q);
    return NULL;
}

/* ---- the epoch -------------------------------------------------------------- */

static void account(uint64_t index)
{
    uint64_t timed_out = 0, not_run = 0;
    const char *end = lp.quit_safely ? "quit_safely" : "quit";
    for (int s = 0; s < n_sets; s++) {
        lp_set *st = &sets[s];
        uint32_t nc = atomic_load(&st->n_calls);
        for (uint32_t i = 0; i < nc; i++) {
            lp_call *c = &st->calls[i];
            int res = atomic_load(&c->result);
            uint32_t ran = atomic_load(&c->ran);
            if (res == -ETIMEDOUT)
                timed_out++;
            tot_calls[res == 0 ? 0 : res == -ETIMEDOUT ? 1 : 2]++;
            if (ran == 0 && res != 0)
                not_run++;
            if (ran != 0 && res != 0)
                violation("looper: epoch %" PRIu64 " (%s): a dq_call that returned %d "
                          "had its fn run",
                          index, end, res);
            if (ran == 1 && res == 0) {
                atomic_fetch_add_explicit(&n_accepted, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&n_delivered, 1, memory_order_relaxed);
            }
        }
        uint32_t ni = atomic_load(&st->n_invokes);
        for (uint32_t i = 0; i < ni; i++) {
            lp_invoke *v = &st->invokes[i];
            int res = atomic_load(&v->result);
            uint32_t both = atomic_load(&v->ran) + atomic_load(&v->discarded);
            tot_invokes += res == 0;
            tot_invokes_discarded += atomic_load(&v->discarded);
            if (res == 0 && both != 1)
                violation("looper: epoch %" PRIu64
                          " (%s): an accepted dq_invoke ran or "
                          "was discarded %u times, not once",
                          index, end, both);
            if (res != 0 && both != 0)
                violation("looper: epoch %" PRIu64 ": a dq_invoke that returned %d "
                          "ran or was discarded",
                          index, res);
        }
        uint32_t nr = atomic_load(&st->n_reps);
        for (uint32_t i = 0; i < nr; i++) {
            lp_rep *r = &st->reps[i];
            int res = atomic_load(&r->result);
            uint32_t ends = atomic_load(&r->ends);
            tot_reps += res == 0;
            tot_cancelled += atomic_load(&r->cancelled);
            tot_occurrences += atomic_load(&r->delivered);
            if (res == 0 && ends != 1)
                violation("looper: epoch %" PRIu64 " (%s): repeating post %d #%u: its "
                          "end reported %u times, not once",
                          index, end, s, i, ends);
            if (res != 0 && (ends != 0 || atomic_load(&r->delivered) != 0))
                violation("looper: epoch %" PRIu64
                          ": a repeating post that returned %d "
                          "was delivered or ended",
                          index, res);
            /* one occurrence may have been taken before the cancel
               returned and run after it; none later */
            if (atomic_load(&r->cancelled) &&
                atomic_load(&r->delivered) > atomic_load(&r->delivered_at_cancel) + 1)
                violation("looper: epoch %" PRIu64
                          ": repeating post %d #%u delivered %u "
                          "times, %u when its dq_cancel returned 0",
                          index, s, i, atomic_load(&r->delivered),
                          atomic_load(&r->delivered_at_cancel));
        }
    }
    tot_woken += lp.woken;
    uint64_t disc = atomic_load(&lp.call_discards);
    if (disc < timed_out || disc > not_run)
        violation("looper: epoch %" PRIu64 " (%s): %" PRIu64 " dq_call messages "
                  "discarded; %" PRIu64 " calls timed out and %" PRIu64
                  " did not run (each timeout discards its message once)",
                  index, end, disc, timed_out, not_run);
    atomic_fetch_add_explicit(&n_accepted, disc, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_discarded, disc, memory_order_relaxed);
}

void looper_run_epoch(uint64_t index, uint64_t *rng, int64_t epoch_ns)
{
    if (sets == NULL) {
        n_sets = cfg.producers + 1;
        sets = calloc((size_t)n_sets, sizeof *sets);
        if (sets == NULL) {
            fprintf(stderr, "dq_stress: out of memory\n");
            exit(2);
        }
    }
    for (int s = 0; s < n_sets; s++) {
        atomic_store(&sets[s].n_calls, 0);
        atomic_store(&sets[s].n_invokes, 0);
        atomic_store(&sets[s].n_reps, 0);
        sets[s].n_live = 0;
        memset(sets[s].calls, 0, sizeof sets[s].calls);
        memset(sets[s].invokes, 0, sizeof sets[s].invokes);
        memset(sets[s].reps, 0, sizeof sets[s].reps);
    }
    atomic_fetch_add(&epoch_tag, 1);
    atomic_store(&lp.stop_posting, false);
    atomic_store(&lp.quitting, false);
    atomic_store(&lp.call_discards, 0);
    atomic_store(&lp.wakes_sent, 0);
    lp.woken = 0;
    lp.use_loop_once = rng_below(rng, 4) != 0;
    lp.quit_safely = rng_below(rng, 2) == 0;

    dq_options opts = { .on_discard = lp_on_discard };
    dq_queue *q = dq_create(&opts);
    if (q == NULL) {
        violation("dq_create failed: %s", strerror(errno));
        return;
    }
    lp.q = q;
    for (int i = 0; i < cfg.producers; i++)
        worker_start(&workers[i], lp_producer_main, i, rng, q);
    worker_start(&workers[cfg.producers], lp_consumer_main, 0, rng, q);

    /* the quit comes anywhere in the second half of the epoch, and the
       producers go on a while after it */
    int64_t end =
        real_now() + epoch_ns / 2 + (int64_t)rng_below(rng, (uint32_t)(epoch_ns / 2));
    while (real_now() < end && !atomic_load(&run_stop))
        sleep_ns(1000000);
    atomic_store(&lp.quitting, true);
    if (lp.quit_safely)
        dq_quit_safely(q);
    else
        dq_quit(q);
    sleep_ns(epoch_ns / 10 + 1000000);
    atomic_store(&lp.stop_posting, true);
    dq_unref(q);
    for (int i = 0; i <= cfg.producers; i++)
        worker_finish(&workers[i]);
    account(index);
}

void looper_report(void)
{
    fprintf(stderr,
            "looper: dq_call 0: %" PRIu64 ", -ETIMEDOUT: %" PRIu64
            ", -ESHUTDOWN: %" PRIu64 "; dq_invoke accepted %" PRIu64 " (%" PRIu64
            " discarded); repeating posts %" PRIu64 " (%" PRIu64 " cancelled, %" PRIu64
            " occurrences); wakes reported %" PRIu64 "\n",
            tot_calls[0], tot_calls[1], tot_calls[2], tot_invokes,
            tot_invokes_discarded, tot_reps, tot_cancelled, tot_occurrences, tot_woken);
}
