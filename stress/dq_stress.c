/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: a long-running validator of deliqueue under contention.
 *
 *   dq_stress --duration=SECONDS --seed=N --producers=N --removers=N
 *             --cancellers=N --barriers=N [--json=PATH]
 *             [--progress-interval=SECONDS] [--scenario=NAME]
 *             [--liveness-bound-ms=N] [--thread-churn=0|1]
 *             [--max-thread-starts=N] [--rss-bound-after=SECONDS]
 *
 * The run is a sequence of epochs.  Each epoch creates a queue, races
 * producers, removers (dq_remove/dq_has by criteria), cancellers (dq_cancel
 * with live and stale tokens), barrier threads (barrier + held sync message
 * + passing async message, idle handlers) and one consumer, then ends in one
 * of three ways while the producers still post and hold references:
 * dq_quit_safely, dq_quit, or the last dq_unref (teardown without a quit).
 * Then every message of the epoch is accounted for and the queue is gone.
 *
 * Invariants checked as they happen (VIOLATION on stderr at once):
 *   exactly once        a message is delivered or discarded at most once,
 *                       and at the epoch's end every accepted message was
 *                       (rejected ones never were); accepted == delivered +
 *                       discarded over the whole run
 *   never early         dq_now() after delivery >= the message's when, and
 *                       when is what was posted
 *   order               per producer and class (sync/async), protected
 *                       messages (never removed) posted with non-decreasing
 *                       when are delivered in posting order (FIFO for equal
 *                       when); across producers, a protected message that
 *                       was posted before a delivery began and is due
 *                       earlier must not come after it
 *   cancel/remove       a cancel that returned 0 reported exactly that
 *                       message to on_discard before returning; dq_remove's
 *                       count equals the discards it reported, each of which
 *                       matches its criteria; a token of a message already
 *                       delivered or discarded never cancels anything
 *   barriers            a sync message posted after a barrier is never
 *                       delivered before the barrier is removed; an async
 *                       message posted after it is delivered meanwhile
 *   idle handlers       run on the consumer thread only; one that returned
 *                       false is never run again
 *   quit_safely         nothing due at the quit is dropped
 *   liveness            (scenario liveness) a message that sorts before
 *                       every standing barrier (a front post, or a post
 *                       at a when read before the barriers were posted)
 *                       is not left undelivered for --liveness-bound-ms
 *                       while the consumer sits in one blocking call that
 *                       began before the post: a sleeping consumer is
 *                       woken for it.  Checked every 50 ms
 *   memory              by the library's own counts (dq_pool_stats): at
 *                       each epoch's end, with its queue torn down, no
 *                       node is in use or in limbo; at every progress
 *                       sample limbo is bounded and the pool's reserved
 *                       memory stays within what the workload can hold
 *                       at once (every record of an epoch posted, plus
 *                       every thread's cache).  Resident memory is shown
 *                       too, and checked (it must stay near its level
 *                       after the warm-up epochs) only natively: under
 *                       an emulator it is the emulator's
 *
 * --rss-bound-after=SECONDS (soaks): resident memory at that time is a
 * base, and resident memory above twice the base afterwards is a
 * violation, emulated or not (under QEMU it is the emulator's: this is
 * what shows that a long emulated soak stays bounded).
 *
 * The worker threads live for the whole run: each epoch hands them a role
 * and the new queue.  --thread-churn=1 starts and joins them every epoch
 * instead (the pool gives a thread's cached nodes back at its exit); under
 * an emulator at most --max-thread-starts (default 2000) are started.
 *
 * Output: a progress line on stderr every --progress-interval seconds, and
 * a one-line JSON summary as the last line of stdout (and in --json PATH).
 * Exit 0 pass, 1 violation, 2 usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue_internal/msg.h>

#include "stress/stress_util.h"

/* ---- configuration ------------------------------------------------------ */

typedef struct config {
    double duration;
    uint64_t seed;
    int producers, removers, cancellers, barriers;
    const char *json_path;
    double progress_interval;
    const char *scenario;
    int liveness_bound_ms;
    int thread_churn;
    uint64_t max_thread_starts; /* 0: no bound */
    double rss_bound_after;     /* 0: off */
} config;

/* How long a deliverable message may wait for a consumer asleep in one
   call: a wake-up is a scheduling latency, far below this natively; under
   sanitizers and QEMU every step is 10-50 times slower. */
#if defined(DQ_STRESS_SANITIZED) || defined(__aarch64__)
#define LIVENESS_BOUND_MS_DEFAULT 1000
#else
#define LIVENESS_BOUND_MS_DEFAULT 100
#endif

static config cfg = {
    .duration = 10,
    .seed = 1,
    .producers = 2,
    .removers = 1,
    .cancellers = 1,
    .barriers = 1,
    .progress_interval = 2,
    .scenario = "mixed",
    .liveness_bound_ms = LIVENESS_BOUND_MS_DEFAULT,
    .max_thread_starts = UINT64_MAX, /* resolved in parse_args */
};

/* scenarios: what the producers post and how long an epoch lasts */
enum scenario { SC_MIXED, SC_CHURN, SC_ORDER, SC_BARRIER, SC_LIVENESS };
static enum scenario scenario;
static const char *const scenario_names[] = { "mixed", "churn", "order", "barrier",
                                              "liveness" };
#define N_SCENARIOS 5

static char repro[1024];
static const char *argv0 = "dq_stress";

/* ---- small helpers -------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static int64_t real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    nanosleep(&ts, NULL);
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Whether this arm64 binary runs under a user-mode emulator (QEMU keeps
   the host's /proc/cpuinfo, which names an x86 vendor).  Then resident
   memory is the emulator's, not ours. */
static bool running_emulated(void)
{
#if defined(__aarch64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return false;
    char line[256];
    bool x86 = false;
    while (!x86 && fgets(line, sizeof line, f) != NULL)
        x86 = strncmp(line, "vendor_id", 9) == 0;
    fclose(f);
    return x86;
#else
    return false;
#endif
}

/* running_emulated(), read once by main before any other thread starts */
static bool emulated;

/* ---- counters and violations ---------------------------------------------- */

static _Atomic uint64_t n_ops, n_accepted, n_delivered, n_discarded;
static _Atomic uint64_t n_violations;
static _Atomic bool run_stop; /* the whole run ends (time or violation) */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void violation(const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&report_lock);
    uint64_t n = atomic_fetch_add(&n_violations, 1);
    if (n < 20) {
        fprintf(stderr, "VIOLATION: %s\n", what);
        fprintf(stderr, "repro: %s\n", repro);
        fflush(stderr);
    }
    pthread_mutex_unlock(&report_lock);
    atomic_store(&run_stop, true);
}

/* relaxed: statistics only */
static void count_ops(uint64_t n)
{
    atomic_fetch_add_explicit(&n_ops, n, memory_order_relaxed);
}

/* ---- message identity ------------------------------------------------------ *
 * arg1 = epoch tag (16 bits) << 16 | slot (16 bits); arg2 = index in the
 * slot's record array.  Slots: producers first, then barrier threads.
 * obj is one of match_objs[] (criteria) and what/target/callback too.
 */

#define MAX_SLOTS     256
#define RECS_PER_SLOT (1u << 17)

enum rec_flags {
    R_ACCEPTED = 1u, /* the post returned 0 */
    R_DELIVERED = 2u,
    R_DISCARDED = 4u,
    R_BY_USER = 8u,    /* discarded by a cancel/remove on a user thread */
    R_PROTECTED = 16u, /* never removed: the order checks apply */
    R_HELD = 32u,      /* sync, posted after the slot's barrier */
    R_RELEASED = 64u,  /* ... and that barrier is being removed */
    R_REJECTED = 128u, /* the post returned an error */
};

typedef struct rec {
    _Atomic uint32_t flags;
    _Atomic dq_token tok;
    /* bounds of the when the queue records; when_hi is INT64_MAX until the
       post returns (relaxed: the consumer may read it meanwhile) */
    int64_t when_lo;
    _Atomic int64_t when_hi;
    /* protected: ticket taken after the post returned, UINT64_MAX before */
    _Atomic uint64_t done_ticket;
    uint32_t pseq; /* protected: order within (slot, class) */
} rec;

typedef struct slot {
    rec *recs;
    _Atomic uint32_t count; /* records in use this epoch */
} slot;

static slot slots[MAX_SLOTS];
static int n_slots;
static _Atomic uint32_t epoch_tag;

/* protected-order bookkeeping, consumer only (per slot and class) */
static uint32_t last_pseq[MAX_SLOTS][2];
static int64_t class_max_when[2];
static uint64_t class_max_ticket[2];
/* a global ticket: protected posts take one after dq_post_at returns;
   the consumer reads it before each delivery call.  acq_rel/acquire so
   that "ticket < T" means the push happened before the consumer's sweep. */
static _Atomic uint64_t ticket;

static int target_prot; /* protected messages: never matched */
static int targets[4];  /* removable messages */
static int match_objs[4];
/* dq_loop runs these instead of dispatch: both check the delivery */
static void cb_a(dq_msg *m);
static void cb_b(dq_msg *m);
static void (*const callbacks[3])(dq_msg *) = { NULL, cb_a, cb_b };

static rec *rec_of(const dq_msg *m, const char *who)
{
    uint32_t a1 = (uint32_t)m->arg1;
    uint32_t tag = a1 >> 16, s = a1 & 0xffff;
    uint32_t i = (uint32_t)m->arg2;
    if (tag != (atomic_load_explicit(&epoch_tag, memory_order_relaxed) & 0xffff) ||
        s >= (uint32_t)n_slots || i >= RECS_PER_SLOT) {
        violation("%s: message from nowhere (arg1=%#x arg2=%d target=%p)", who, a1,
                  m->arg2, m->target);
        return NULL;
    }
    return &slots[s].recs[i];
}

/* ---- on_discard -------------------------------------------------------------- */

/* thread-local: what the current user call (cancel/remove) may discard */
static _Thread_local bool tl_user_call;
static _Thread_local const dq_match *tl_match;
static _Thread_local rec *tl_cancel_rec;
static _Thread_local uint32_t tl_discards;

static void on_discard(const dq_msg *m, void *ctx)
{
    (void)ctx;
    rec *r = rec_of(m, "discard");
    if (r == NULL)
        return;
    uint32_t add = R_DISCARDED | (tl_user_call ? R_BY_USER : 0);
    /* acq_rel: the flags word is the message's one arbiter */
    uint32_t old = atomic_fetch_or_explicit(&r->flags, add, memory_order_acq_rel);
    if (old & (R_DELIVERED | R_DISCARDED))
        violation("message slot %d #%d discarded after it was %s", m->arg1 & 0xffff,
                  m->arg2, (old & R_DELIVERED) ? "delivered" : "discarded");
    if (old & R_REJECTED)
        violation("rejected message slot %d #%d was discarded", m->arg1 & 0xffff,
                  m->arg2);
    if (tl_user_call) {
        tl_discards++;
        if (old & R_PROTECTED)
            violation("protected message slot %d #%d removed by a user call",
                      m->arg1 & 0xffff, m->arg2);
        if (tl_match != NULL && !dq_match_msg(tl_match, m))
            violation("dq_remove discarded a message that does not match "
                      "(slot %d #%d)",
                      m->arg1 & 0xffff, m->arg2);
        if (tl_cancel_rec != NULL && tl_cancel_rec != r)
            violation("dq_cancel discarded another message (slot %d #%d)",
                      m->arg1 & 0xffff, m->arg2);
    }
    atomic_fetch_add_explicit(&n_discarded, 1, memory_order_relaxed);
}

/* ---- delivery checks (consumer) ------------------------------------------------ */

static _Atomic(pthread_t *) consumer_id;

static void check_delivery(const dq_msg *m, uint64_t call_ticket)
{
    int64_t now = dq_now();
    rec *r = rec_of(m, "delivery");
    if (r == NULL)
        return;
    int slot_i = m->arg1 & 0xffff;
    uint32_t old =
        atomic_fetch_or_explicit(&r->flags, R_DELIVERED, memory_order_acq_rel);
    if (old & (R_DELIVERED | R_DISCARDED))
        violation("message slot %d #%d delivered after it was %s", slot_i, m->arg2,
                  (old & R_DELIVERED) ? "delivered" : "discarded");
    if (old & R_REJECTED)
        violation("rejected message slot %d #%d was delivered", slot_i, m->arg2);
    int64_t when_hi = atomic_load_explicit(&r->when_hi, memory_order_relaxed);
    if (m->when < r->when_lo || m->when > when_hi)
        violation("message slot %d #%d delivered with when=%" PRId64
                  " outside [%" PRId64 ", %" PRId64 "]",
                  slot_i, m->arg2, m->when, r->when_lo, when_hi);
    if (now < m->when)
        violation("message slot %d #%d delivered early: now=%" PRId64 " when=%" PRId64,
                  slot_i, m->arg2, now, m->when);
    if ((old & R_HELD) && !(old & R_RELEASED))
        violation("sync message slot %d #%d delivered while its barrier was up", slot_i,
                  m->arg2);
    if (old & R_PROTECTED) {
        int cls = (m->flags & DQ_ASYNC) ? 1 : 0;
        if (r->pseq <= last_pseq[slot_i][cls])
            violation("order: producer %d class %s delivered #%u after #%u "
                      "(posted later, due no later)",
                      slot_i, cls ? "async" : "sync", r->pseq, last_pseq[slot_i][cls]);
        last_pseq[slot_i][cls] = r->pseq;
        int64_t key = m->when == 0 ? INT64_MIN : m->when;
        uint64_t done = atomic_load_explicit(&r->done_ticket, memory_order_relaxed);
        if (key < class_max_when[cls] && done < class_max_ticket[cls])
            violation("order: %s message when=%" PRId64 " delivered after one due at "
                      "%" PRId64 " although it was posted before that delivery",
                      cls ? "async" : "sync", m->when, class_max_when[cls]);
        if (key >= class_max_when[cls]) {
            class_max_when[cls] = key;
            class_max_ticket[cls] = call_ticket;
        }
    }
    atomic_fetch_add_explicit(&n_delivered, 1, memory_order_relaxed);
}

/* ---- idle handlers ------------------------------------------------------------ */

#define IDLE_CTXS 64
typedef struct idle_ctx {
    _Atomic int state; /* 0 free, 1 installed, 2 returned false */
    _Atomic uint32_t runs;
    uint32_t keep_for; /* returns true this many times */
} idle_ctx;
static idle_ctx idle_ctxs[IDLE_CTXS];

static bool idle_handler(void *ctx)
{
    idle_ctx *c = ctx;
    pthread_t *cid = atomic_load(&consumer_id);
    if (cid == NULL || !pthread_equal(*cid, pthread_self()))
        violation("idle handler ran on a thread other than the consumer");
    if (atomic_load(&c->state) == 2)
        violation("idle handler ran again after returning false");
    uint32_t runs = atomic_fetch_add(&c->runs, 1) + 1;
    if (runs > c->keep_for) {
        atomic_store(&c->state, 2);
        return false;
    }
    return true;
}

/* ---- the epoch -------------------------------------------------------------- */

enum end_mode { END_QUIT_SAFELY, END_QUIT, END_UNREF };
static const char *const end_names[] = { "quit_safely", "quit", "unref" };

typedef struct epoch_state {
    dq_queue *q;
    _Atomic bool stop_posting;  /* producers and barrier threads stop */
    _Atomic bool stop_barriers; /* barrier threads stop (before quit_safely) */
    _Atomic bool stop_users;    /* removers and cancellers stop */
    _Atomic bool stop_consumer; /* END_UNREF: consumer leaves */
    enum end_mode mode;
    bool use_loop;
    uint64_t index;
} epoch_state;

static epoch_state ep;

typedef struct worker {
    pthread_t thread;
    int index; /* slot for producers/barrier threads */
    uint64_t rng;
    dq_queue *q;         /* this thread's own reference */
    void *(*fn)(void *); /* this epoch's role; it drops q */
    bool running;        /* a thread is serving this worker */
    bool leave;          /* its thread is to exit once idle */
    uint64_t go, done;   /* epochs handed over / finished (workers_lock) */
} worker;

static rec *slot_take(int s)
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

static void post_result(rec *r, int err, dq_token tok, const char *what)
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

/* ---- liveness ----------------------------------------------------------------- *
 * Liveness barrier threads (scenario liveness) post a barrier, let the
 * consumer go to sleep behind it, then post one probe: a sync message that
 * sorts before every standing barrier.  The probe is deliverable at once,
 * so the consumer must be woken for it: the barrier stays up until the
 * probe is delivered (or 3 bounds pass), so nothing else but the probe's
 * own post can end that sleep.  liveness_check (on the progress thread)
 * reports a probe left undelivered for the bound while the consumer sits
 * in one blocking call that began before the probe was posted.
 */

/* real_now() when the consumer entered its current blocking call, 0 when
   it is not in one.  seq_cst with the probes' fields, so the checker's
   reads make one consistent picture. */
static _Atomic int64_t consumer_call_since;

typedef struct probe {
    _Atomic int64_t posted_at; /* real_now() after the post; 0: none */
    _Atomic(rec *) r;
    const char *_Atomic way;
} probe;
static probe probes[MAX_SLOTS];
static _Atomic uint64_t n_probes; /* probes posted deliverable */
/* per barrier thread: a dq_now() reading no later than its standing
   barrier's due, INT64_MAX when it has none up */
static _Atomic int64_t barrier_floor[MAX_SLOTS];

/* The consumer thread's kernel state: 'S' asleep, 'R' running or ready to
   run (woken, waiting for a CPU), '?' unknown.  Under QEMU user mode the
   guest thread is a host thread, and /proc/self/task is the host's. */
static _Atomic pid_t consumer_tid;

static char consumer_thread_state(void)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat",
             (int)atomic_load(&consumer_tid));
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the name may hold spaces */
    return paren != NULL && paren[1] == ' ' ? paren[2] : '?';
}

static void liveness_check(int64_t now)
{
    int64_t bound = (int64_t)cfg.liveness_bound_ms * 1000000;
    for (int s = cfg.producers; s < n_slots; s++) {
        probe *p = &probes[s];
        int64_t posted = atomic_load(&p->posted_at);
        if (posted == 0 || now - posted <= bound)
            continue;
        int64_t since = atomic_load(&consumer_call_since);
        rec *r = atomic_load(&p->r);
        const char *way = atomic_load(&p->way);
        uint32_t f = r != NULL ? atomic_load(&r->flags) : R_DELIVERED;
        if ((f & (R_DELIVERED | R_DISCARDED)) || atomic_load(&p->posted_at) != posted)
            continue;
        if (since == 0 || since >= posted)
            continue;
        /* asleep, not merely waiting for a CPU (2 cores, and the farm runs
           tests side by side): a woken consumer is runnable */
        char state = consumer_thread_state();
        if (state != 'S' || atomic_load(&consumer_call_since) != since ||
            (atomic_load(&r->flags) & (R_DELIVERED | R_DISCARDED)))
            continue;
        violation("liveness: a deliverable sync message (%s, sorting before every "
                  "standing barrier) waited %.0f ms while the consumer slept in "
                  "one call that began before it was posted (bound %d ms)",
                  way, (double)(now - posted) / 1e6, cfg.liveness_bound_ms);
    }
}

/* Whether a sync message due at when sorts before every standing barrier
   of the other liveness threads (their floors are read after when was
   read, so a barrier they post later is due after it). */
static bool before_other_barriers(int self, int64_t when)
{
    for (int s = cfg.producers; s < n_slots; s++)
        if (s != self && atomic_load(&barrier_floor[s]) <= when)
            return false;
    return true;
}

static void *liveness_barrier_main(void *arg)
{
    worker *w = arg;
    dq_queue *q = w->q;
    int s = w->index;
    uint32_t tag = atomic_load(&epoch_tag) & 0xffff;
    int64_t bound = (int64_t)cfg.liveness_bound_ms * 1000000;
    static const char *const ways[] = {
        "dq_post_at_front",
        "dq_post_at an earlier when",
        "dq_post_at the clock read before the barrier post",
    };
    while (!atomic_load_explicit(&ep.stop_posting, memory_order_relaxed) &&
           !atomic_load_explicit(&ep.stop_barriers, memory_order_relaxed)) {
        /* the floor goes up before the clock read that bounds our
           barrier's due from below */
        int64_t before = dq_now();
        atomic_store(&barrier_floor[s], before);
        while (dq_now() <= before)
            ; /* our barrier's due is strictly later */
        dq_token b;
        int err = dq_post_sync_barrier(q, &b);
        count_ops(1);
        if (err != 0) {
            atomic_store(&barrier_floor[s], INT64_MAX);
            if (err != -ESHUTDOWN)
                violation("dq_post_sync_barrier returned %d", err);
            break;
        }
        /* let the consumer reach its sleep behind the barrier */
        sleep_ns(500000 + rng_below(&w->rng, 2000000));
        rec *r = slot_take(s);
        uint32_t way = rng_below(&w->rng, 3);
        int64_t when = way == 0   ? 0
                       : way == 1 ? before - 1 - rng_below(&w->rng, 1000)
                                  : before;
        if (when < 0)
            when = 0;
        if (r != NULL) {
            dq_msg m = { .target = &target_prot,
                         .what = 101,
                         .arg1 = (int32_t)(tag << 16 | (uint32_t)s),
                         .arg2 = (int32_t)(r - slots[s].recs) };
            dq_token tok;
            r->when_lo = when;
            atomic_store_explicit(&r->when_hi, when, memory_order_relaxed);
            bool deliverable = way == 0 || before_other_barriers(s, when);
            err = way == 0 ? dq_post_at_front(q, &m, &tok)
                           : dq_post_at(q, &m, when, &tok);
            post_result(r, err, tok, ways[way]);
            if (err == 0 && deliverable) {
                atomic_store(&probes[s].r, r);
                atomic_store(&probes[s].way, ways[way]);
                atomic_store(&probes[s].posted_at, real_now());
                atomic_fetch_add(&n_probes, 1);
                int64_t give_up = real_now() + 3 * bound;
                while (!(atomic_load(&r->flags) & (R_DELIVERED | R_DISCARDED)) &&
                       !atomic_load(&ep.stop_posting) &&
                       !atomic_load(&ep.stop_barriers) && !atomic_load(&run_stop) &&
                       real_now() < give_up)
                    sleep_ns(100000);
                atomic_store(&probes[s].posted_at, 0);
            }
        }
        err = dq_remove_sync_barrier(q, b);
        count_ops(1);
        if (err != 0 && err != -ENOENT) /* -ENOENT: after dq_quit */
            violation("dq_remove_sync_barrier returned %d", err);
        atomic_store(&barrier_floor[s], INT64_MAX);
        sleep_ns(rng_below(&w->rng, 300000));
    }
    dq_unref(q);
    return NULL;
}

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

static int64_t epoch_length_ns(void)
{
    double ms = cfg.duration * 1000 / 8; /* at least a few epochs */
    if (scenario == SC_CHURN)
        ms = 20;
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
static uint64_t thread_starts;
static worker *workers; /* every epoch's, in role order */
static int n_workers;

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

static void start(worker *w, void *(*fn)(void *), int index, uint64_t *rng, dq_queue *q)
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
static void finish(worker *w)
{
    pthread_mutex_lock(&workers_lock);
    while (w->done != w->go)
        pthread_cond_wait(&workers_cv, &workers_lock);
    pthread_mutex_unlock(&workers_lock);
    if (churn_threads())
        retire_thread(w);
}

/* End of the run: every serving thread leaves. */
static void workers_stop(void)
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

static void run_epoch(uint64_t index, uint64_t *rng, int64_t epoch_ns)
{
    memset(&ep, 0, sizeof ep);
    ep.index = index;
    ep.mode = (enum end_mode)rng_below(rng, 3);
    ep.use_loop =
        ep.mode != END_UNREF && scenario != SC_LIVENESS && rng_below(rng, 4) == 0;
    atomic_fetch_add(&epoch_tag, 1);
    for (int s = 0; s < n_slots; s++)
        atomic_store(&slots[s].count, 0);
    memset(last_pseq, 0, sizeof last_pseq);
    class_max_when[0] = class_max_when[1] = INT64_MIN;
    class_max_ticket[0] = class_max_ticket[1] = 0;
    loop_ticket = 0;
    for (int i = 0; i < IDLE_CTXS; i++)
        atomic_store(&idle_ctxs[i].state, 0);
    atomic_store(&consumer_id, NULL);
    for (int s = 0; s < MAX_SLOTS; s++) {
        atomic_store(&probes[s].posted_at, 0);
        atomic_store(&barrier_floor[s], INT64_MAX);
    }

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
        start(&ws[k++], producer_main, i, rng, q);
    int first_barrier = k;
    for (int i = 0; i < cfg.barriers; i++)
        start(&ws[k++], scenario == SC_LIVENESS ? liveness_barrier_main : barrier_main,
              cfg.producers + i, rng, q);
    for (int i = 0; i < cfg.removers; i++)
        start(&ws[k++], remover_main, 0, rng, q);
    for (int i = 0; i < cfg.cancellers; i++)
        start(&ws[k++], canceller_main, 0, rng, q);
    start(&ws[k++], consumer_main, 0, rng, q);

    int64_t end = real_now() + epoch_ns;
    while (real_now() < end && !atomic_load(&run_stop))
        sleep_ns(1000000);

    int64_t quit_at = 0;
    if (ep.mode == END_QUIT_SAFELY) {
        /* barriers down first (what a standing barrier holds at a
           quit_safely is legitimately dropped); producers keep racing */
        atomic_store(&ep.stop_barriers, true);
        for (int i = first_barrier; i < first_barrier + cfg.barriers; i++)
            finish(&ws[i]);
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
            finish(&ws[i]);
    account_epoch(index, quit_at);
}

/* ---- progress, summary -------------------------------------------------------- */

#define MAX_SAMPLES 4096
static double sample_t[MAX_SAMPLES], sample_rate[MAX_SAMPLES];
static struct dq_pool_stats sample_pool[MAX_SAMPLES];

/* The library's memory.  Limbo may hold every node of an epoch at once (a
   quit_safely trim or a wide dq_remove retires thousands in one looper
   step, freed two grace periods later), never more: more means grace
   periods stopped ending and retired nodes pile up across epochs. */
static uint64_t limbo_bound(void)
{
    return (uint64_t)n_slots * RECS_PER_SLOT;
}
static uint64_t pool_peak_reserved, pool_peak_in_use, pool_peak_limbo;
static pthread_mutex_t pool_peak_lock = PTHREAD_MUTEX_INITIALIZER;

/* The most the workload can hold at once, in bytes of the pool: every
   record of an epoch posted (in use or retired), a barrier per barrier
   thread, every thread's cache (a magazine and a stash of whole words),
   and a slab of rounding. */
static uint64_t pool_reserved_bound(void)
{
    uint64_t nodes = (uint64_t)n_slots * RECS_PER_SLOT + (uint64_t)cfg.barriers +
                     (uint64_t)(n_workers + 2) * (64 + 32 * 64);
    return nodes * 128 + nodes * 128 / 64 + (UINT64_C(4) << 20);
}

/* Read the pool's counts, keep the peaks, and check what holds at every
   moment.  Any thread. */
static void pool_sample(struct dq_pool_stats *ps)
{
    if (dq_pool_stats(ps) != 0) {
        violation("dq_pool_stats failed");
        return;
    }
    pthread_mutex_lock(&pool_peak_lock);
    if (ps->reserved_bytes > pool_peak_reserved)
        pool_peak_reserved = ps->reserved_bytes;
    if (ps->nodes_in_use > pool_peak_in_use)
        pool_peak_in_use = ps->nodes_in_use;
    if (ps->nodes_limbo > pool_peak_limbo)
        pool_peak_limbo = ps->nodes_limbo;
    pthread_mutex_unlock(&pool_peak_lock);
    if (ps->nodes_limbo > limbo_bound())
        violation("memory: %" PRIu64 " retired nodes wait in limbo, more than an epoch "
                  "ever posts (%" PRIu64 "): grace periods are not ending",
                  ps->nodes_limbo, limbo_bound());
    if (ps->reserved_bytes > pool_reserved_bound())
        violation("memory: the pool reserved %" PRIu64
                  " KiB, more than the workload can "
                  "ever hold (%" PRIu64 " KiB): nodes are not coming back",
                  ps->reserved_bytes / 1024, pool_reserved_bound() / 1024);
}

/* At an epoch's end its queue is torn down and every worker idle: every
   node must be back in the pool or in a thread's cache. */
static void pool_check_epoch_end(uint64_t index)
{
    struct dq_pool_stats ps;
    pool_sample(&ps);
    if (ps.queues != 0 || ps.nodes_in_use != 0 || ps.nodes_limbo != 0)
        violation(
            "memory: after epoch %" PRIu64 " (%s) tore its queue down, %" PRIu64
            " nodes are still in use and %" PRIu64 " in limbo (%" PRIu64 " queues "
            "live): nodes are leaking",
            index, end_names[ep.mode], ps.nodes_in_use, ps.nodes_limbo, ps.queues);
}
static int n_samples;
static long rss_start, rss_base;
static long rss_bound_base; /* --rss-bound-after's base (progress thread) */
static _Atomic long rss_peak;

static void note_rss(long rss)
{
    long old = atomic_load(&rss_peak);
    while (rss > old && !atomic_compare_exchange_weak(&rss_peak, &old, rss))
        ;
}
static _Atomic bool progress_done;
static int64_t run_start;
static _Atomic int64_t last_epoch_end; /* real_now() when an epoch last ended */
static _Atomic uint64_t epochs_done;
static int64_t hang_limit_ns;

static char *summary_json(double duration, long rss_end, bool pass);

/* An epoch that does not end is a hang (deadlock, lost wake-up, a walker
   looping in a cycle): report it as a violation and leave at once. */
static void watchdog_check(int64_t now)
{
    int64_t since = now - atomic_load(&last_epoch_end);
    if (since <= hang_limit_ns)
        return;
    violation("epoch %" PRIu64 " has not ended after %.1f s: hang (deadlock, lost "
              "wake-up or a cycle)",
              atomic_load(&epochs_done), (double)since / 1e9);
    char *j = summary_json((double)(now - run_start) / 1e9, rss_kb(), false);
    printf("%s\n", j);
    fflush(stdout);
    if (cfg.json_path != NULL) {
        FILE *f = fopen(cfg.json_path, "w");
        if (f != NULL) {
            fprintf(f, "%s\n", j);
            fclose(f);
        }
    }
    _exit(1);
}

static void *progress_main(void *arg)
{
    (void)arg;
    int64_t interval = (int64_t)(cfg.progress_interval * 1e9);
    int64_t next = run_start + interval;
    uint64_t last_ops = 0;
    int64_t last_t = run_start;
    while (!atomic_load(&progress_done)) {
        int64_t now = real_now();
        watchdog_check(now);
        if (scenario == SC_LIVENESS)
            liveness_check(now);
        if (now < next) {
            int64_t nap = next - now;
            sleep_ns(nap < 50000000 ? nap : 50000000);
            continue;
        }
        next += interval;
        uint64_t ops = atomic_load(&n_ops);
        long rss = rss_kb();
        note_rss(rss);
        double at = (double)(now - run_start) / 1e9;
        if (cfg.rss_bound_after > 0 && at >= cfg.rss_bound_after) {
            if (rss_bound_base == 0)
                rss_bound_base = rss;
            else if (rss > 2 * rss_bound_base)
                violation(
                    "resident memory grew from %ld kB at %.0f s to %ld kB at %.0f s "
                    "(more than twice)",
                    rss_bound_base, cfg.rss_bound_after, rss, at);
        }
        struct dq_pool_stats ps;
        pool_sample(&ps);
        double el = (double)(now - run_start) / 1e9;
        if (n_samples < MAX_SAMPLES) {
            sample_t[n_samples] = el;
            sample_rate[n_samples] =
                (double)(ops - last_ops) / ((double)(now - last_t) / 1e9);
            sample_pool[n_samples] = ps;
            n_samples++;
        }
        last_ops = ops;
        last_t = now;
        fprintf(stderr,
                "progress elapsed=%.1f ops=%" PRIu64 " delivered=%" PRIu64
                " discarded=%" PRIu64 " violations=%" PRIu64 " rss_kb=%ld"
                " pool_reserved_kb=%" PRIu64 " nodes_in_use=%" PRIu64
                " nodes_limbo=%" PRIu64 " nodes_cached=%" PRIu64 "\n",
                el, ops, atomic_load(&n_delivered), atomic_load(&n_discarded),
                atomic_load(&n_violations), rss, ps.reserved_bytes / 1024,
                ps.nodes_in_use, ps.nodes_limbo, ps.nodes_cached);
        fflush(stderr);
    }
    return NULL;
}

static void json_escape(char *out, size_t cap, const char *in)
{
    size_t o = 0;
    for (; *in && o + 7 < cap; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = 0;
}

static char *summary_json(double duration, long rss_end, bool pass)
{
    size_t cap = 65536 + (size_t)n_samples * 160;
    char *j = malloc(cap);
    char rep[2048], atom[128];
    json_escape(rep, sizeof rep, repro);
    json_escape(atom, sizeof atom, dq_atomics());
    size_t o = (size_t)snprintf(
        j, cap,
        "{\"binary\":\"dq_stress\",\"atomics\":\"%s\",\"seed\":%" PRIu64
        ",\"duration_s\":%.3f,\"ops\":%" PRIu64 ",\"accepted\":%" PRIu64
        ",\"delivered\":%" PRIu64 ",\"discarded\":%" PRIu64 ",\"violations\":%" PRIu64
        ",\"liveness_probes\":%" PRIu64
        ",\"rss_start_kb\":%ld,\"rss_end_kb\":%ld,\"peak_rss_kb\":%ld"
        ",\"rss_check\":\"%s\",\"pool_peak_reserved_kb\":%" PRIu64
        ",\"pool_peak_in_use\":%" PRIu64 ",\"pool_peak_limbo\":%" PRIu64
        ",\"thread_starts\":%" PRIu64 ",\"throughput\":[",
        atom, cfg.seed, duration, atomic_load(&n_ops), atomic_load(&n_accepted),
        atomic_load(&n_delivered), atomic_load(&n_discarded),
        atomic_load(&n_violations), atomic_load(&n_probes), rss_start, rss_end,
        atomic_load(&rss_peak),
        emulated ? "off: emulated, resident memory is the emulator's" : "native",
        pool_peak_reserved / 1024, pool_peak_in_use, pool_peak_limbo, thread_starts);
    for (int i = 0; i < n_samples; i++)
        o += (size_t)snprintf(j + o, cap - o, "%s[%.1f,%.0f]", i ? "," : "",
                              sample_t[i], sample_rate[i]);
    /* the library's counts over time: [elapsed, reserved KiB, in use,
       limbo, cached] */
    o += (size_t)snprintf(j + o, cap - o, "],\"pool\":[");
    for (int i = 0; i < n_samples; i++)
        o += (size_t)snprintf(
            j + o, cap - o, "%s[%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
            i ? "," : "", sample_t[i], sample_pool[i].reserved_bytes / 1024,
            sample_pool[i].nodes_in_use, sample_pool[i].nodes_limbo,
            sample_pool[i].nodes_cached);
    snprintf(j + o, cap - o, "],\"repro\":\"%s\",\"result\":\"%s\"}", rep,
             pass ? "pass" : "fail");
    return j;
}

/* ---- command line ----------------------------------------------------------- */

static void usage(const char *why)
{
    fprintf(stderr,
            "dq_stress: %s\n"
            "usage: dq_stress --duration=SECONDS --seed=N --producers=N --removers=N\n"
            "                 --cancellers=N --barriers=N [--json=PATH]\n"
            "                 [--progress-interval=SECONDS] [--scenario=NAME]\n"
            "                 [--liveness-bound-ms=N] [--thread-churn=0|1]\n"
            "                 [--max-thread-starts=N] [--rss-bound-after=SECONDS]\n"
            "scenarios: mixed (default), churn, order, barrier, liveness\n",
            why);
    exit(2);
}

static double parse_double(const char *name, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi)) {
        char why[256];
        snprintf(why, sizeof why, "bad value for --%s: '%s'", name, v);
        usage(why);
    }
    return d;
}

static uint64_t parse_u64(const char *name, const char *v, uint64_t hi)
{
    char *end;
    errno = 0;
    if (*v == '-' || *v == 0)
        goto bad;
    unsigned long long n = strtoull(v, &end, 0);
    if (errno || *end || n > hi)
        goto bad;
    return n;
bad:;
    char why[256];
    snprintf(why, sizeof why, "bad value for --%s: '%s'", name, v);
    usage(why);
    return 0;
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            usage("help");
        if (strncmp(a, "--", 2) != 0 || strchr(a, '=') == NULL) {
            char why[256];
            snprintf(why, sizeof why, "unexpected argument '%s'", a);
            usage(why);
        }
        const char *eq = strchr(a, '=');
        size_t nl = (size_t)(eq - a - 2);
        const char *v = eq + 1;
#define IS(n) (nl == strlen(n) && strncmp(a + 2, n, nl) == 0)
        if (IS("duration"))
            cfg.duration = parse_double("duration", v, 0, 1e7);
        else if (IS("seed"))
            cfg.seed = parse_u64("seed", v, UINT64_MAX);
        else if (IS("producers"))
            cfg.producers = (int)parse_u64("producers", v, 128);
        else if (IS("removers"))
            cfg.removers = (int)parse_u64("removers", v, 64);
        else if (IS("cancellers"))
            cfg.cancellers = (int)parse_u64("cancellers", v, 64);
        else if (IS("barriers"))
            cfg.barriers = (int)parse_u64("barriers", v, 64);
        else if (IS("json"))
            cfg.json_path = v;
        else if (IS("progress-interval"))
            cfg.progress_interval = parse_double("progress-interval", v, 0.01, 1e7);
        else if (IS("scenario"))
            cfg.scenario = v;
        else if (IS("thread-churn"))
            cfg.thread_churn = (int)parse_u64("thread-churn", v, 1);
        else if (IS("rss-bound-after"))
            cfg.rss_bound_after = parse_double("rss-bound-after", v, 0, 1e7);
        else if (IS("max-thread-starts"))
            cfg.max_thread_starts = parse_u64("max-thread-starts", v, UINT64_MAX - 1);
        else if (IS("liveness-bound-ms"))
            cfg.liveness_bound_ms = (int)parse_u64("liveness-bound-ms", v, 3600000);
        else {
            char why[256];
            snprintf(why, sizeof why, "unknown option '%.*s'", (int)(nl + 2), a);
            usage(why);
        }
#undef IS
    }
    bool found = false;
    for (int s = 0; s < N_SCENARIOS; s++)
        if (strcmp(cfg.scenario, scenario_names[s]) == 0) {
            scenario = (enum scenario)s;
            found = true;
        }
    if (!found)
        usage("unknown --scenario (mixed, churn, order, barrier, liveness)");
    if (cfg.producers < 1)
        usage("--producers must be at least 1");
    if ((scenario == SC_BARRIER || scenario == SC_LIVENESS) && cfg.barriers < 2)
        cfg.barriers = 2; /* barriers racing each other */
    if (cfg.liveness_bound_ms < 1)
        usage("--liveness-bound-ms must be at least 1");
    if (cfg.max_thread_starts == UINT64_MAX)
        cfg.max_thread_starts = emulated ? 2000 : 0;
    snprintf(repro, sizeof repro,
             "%s --duration=%g --seed=%" PRIu64 " --producers=%d --removers=%d "
             "--cancellers=%d --barriers=%d --progress-interval=%g --scenario=%s "
             "--liveness-bound-ms=%d --thread-churn=%d --max-thread-starts=%" PRIu64
             " --rss-bound-after=%g",
             argv0, cfg.duration, cfg.seed, cfg.producers, cfg.removers, cfg.cancellers,
             cfg.barriers, cfg.progress_interval, cfg.scenario, cfg.liveness_bound_ms,
             cfg.thread_churn, cfg.max_thread_starts, cfg.rss_bound_after);
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0] != NULL)
        argv0 = argv[0];
    emulated = running_emulated();
    parse_args(argc, argv);
    n_slots = cfg.producers + cfg.barriers;
    n_workers = cfg.producers + cfg.barriers + cfg.removers + cfg.cancellers + 1;
    workers = calloc((size_t)n_workers, sizeof *workers);
    if (workers == NULL) {
        fprintf(stderr, "dq_stress: out of memory\n");
        return 2;
    }
    if (n_slots > MAX_SLOTS)
        usage("too many producers + barriers");
    for (int s = 0; s < n_slots; s++) {
        slots[s].recs = calloc(RECS_PER_SLOT, sizeof(rec));
        if (slots[s].recs == NULL) {
            fprintf(stderr, "dq_stress: out of memory\n");
            return 2;
        }
    }
    /* touch every record once so that RSS starts where it stays */
    for (int s = 0; s < n_slots; s++)
        memset(slots[s].recs, 0, RECS_PER_SLOT * sizeof(rec));
    rss_start = rss_kb();
    note_rss(rss_start);
    run_start = real_now();
    atomic_store(&last_epoch_end, run_start);
    {
        int64_t e = epoch_length_ns();
        hang_limit_ns = 40 * e > 15000000000 ? 40 * e : 15000000000;
    }
    pthread_t progress;
    pthread_create(&progress, NULL, progress_main, NULL);

    uint64_t rng = cfg.seed ^ UINT64_C(0x5DEECE66D);
    int64_t epoch_ns = epoch_length_ns();
    int64_t deadline = run_start + (int64_t)(cfg.duration * 1e9);
#ifdef DQ_STRESS_SANITIZED
    const long rss_slack_kb = 512 * 1024; /* sanitizer quarantine, shadow */
#else
    const long rss_slack_kb = 96 * 1024;
#endif
    uint64_t index = 0;
    bool rss_checked = !emulated;
    do {
        run_epoch(index, &rng, epoch_ns);
        pool_check_epoch_end(index);
        atomic_store(&last_epoch_end, real_now());
        atomic_fetch_add(&epochs_done, 1);
        long rss = rss_kb();
        note_rss(rss);
        /* memory: after two warm-up epochs, RSS must stay near its level */
        if (index == 1)
            rss_base = rss;
        else if (rss_checked && index > 1 && rss > rss_base * 2 + rss_slack_kb)
            violation("resident memory grew from %ld kB to %ld kB over %" PRIu64
                      " epochs",
                      rss_base, rss, index - 1);
        index++;
    } while (real_now() < deadline && !atomic_load(&run_stop));

    workers_stop();
    double duration = (double)(real_now() - run_start) / 1e9;
    atomic_store(&progress_done, true);
    pthread_join(progress, NULL);
    long rss_end = rss_kb();
    note_rss(rss_end);
    if (atomic_load(&n_violations) == 0 &&
        atomic_load(&n_accepted) !=
            atomic_load(&n_delivered) + atomic_load(&n_discarded))
        violation("accepted %" PRIu64 " != delivered %" PRIu64 " + discarded %" PRIu64,
                  atomic_load(&n_accepted), atomic_load(&n_delivered),
                  atomic_load(&n_discarded));
    bool pass = atomic_load(&n_violations) == 0;
    char *j = summary_json(duration, rss_end, pass);
    fprintf(stderr, "dq_stress: %" PRIu64 " epochs, %" PRIu64 " liveness probes, %s\n",
            index, atomic_load(&n_probes), pass ? "pass" : "FAIL");
    printf("%s\n", j);
    fflush(stdout);
    if (cfg.json_path != NULL) {
        FILE *f = fopen(cfg.json_path, "w");
        if (f == NULL || fprintf(f, "%s\n", j) < 0 || fclose(f) != 0)
            fprintf(stderr, "dq_stress: cannot write %s: %s\n", cfg.json_path,
                    strerror(errno));
    }
    free(j);
    for (int s = 0; s < n_slots; s++)
        free(slots[s].recs);
    return pass ? 0 : 1;
}
