/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: a long-running validator of deliqueue under contention.
 *
 *   dq_stress --duration=SECONDS --seed=N --producers=N --removers=N
 *             --cancellers=N --barriers=N [--json=PATH]
 *             [--progress-interval=SECONDS] [--scenario=NAME]
 *             [--liveness-bound-ms=N] [--thread-churn=0|1]
 *             [--max-thread-starts=N] [--rss-bound-after=SECONDS]
 *   dq_stress --help       (every flag, what it sets, its default)
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
 * Scenario looper runs the looper API instead (its producers only; the
 * removers, cancellers and barrier threads sit out): producers race
 * dq_invoke, dq_call with timeouts from 0 to 50 ms, repeating posts in
 * both modes cancelled at random (from producers, from the consumer and
 * from inside their own delivery, sometimes twice), and dq_wake, against
 * a consumer on dq_loop or dq_loop_once whose callbacks also invoke and
 * call inline; each epoch ends in a dq_quit or a dq_quit_safely at a
 * random moment while the producers go on.  Checked:
 *   dq_call             returns 0, -ETIMEDOUT or -ESHUTDOWN; fn ran exactly
 *                       once for 0 (visible to the caller at return), and
 *                       never for the others (a fn that runs after its
 *                       call answered -ETIMEDOUT is caught as it runs);
 *                       the discards of call messages number at least the
 *                       timeouts and at most the calls whose fn never ran
 *   dq_invoke           an accepted invoke ran or was discarded exactly
 *                       once, a refused one neither
 *   repeating posts     an accepted post's end is reported exactly once;
 *                       dq_cancel answers 0 once, with the end already
 *                       reported, and -ENOENT for a live post only when
 *                       another cancel or a quit got there; no occurrence
 *                       due after a dq_cancel returned 0 is delivered, and
 *                       at most one taken before it returned; occurrences
 *                       never early, fixed rate on the grid first + k *
 *                       period and increasing, fixed delay at least a
 *                       period apart
 *   dq_wake             returns 0 or -ESHUTDOWN; dq_loop_once reports no
 *                       more wakes than were sent
 *   identity            the consumer's callbacks see dq_is_consumer(q) and
 *                       dq_current() == q; producers are not the consumer
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
 *
 * The files, and what each keeps to itself:
 *
 *   dq_stress_checks.c    the counters and violation(), message identity
 *                         (the records of every slot), on_discard, the
 *                         delivery checks, the idle handlers
 *   dq_stress_epoch.c     the epoch: its roles (producers, removers,
 *                         cancellers, barrier threads, the consumer), the
 *                         worker threads that serve them, and the driver
 *                         that runs one epoch and accounts for it
 *   dq_stress_liveness.c  the liveness barrier threads and their checker
 *   dq_stress_looper.c    scenario looper: its producers, consumer,
 *                         records and the accounting at each epoch's end
 *   dq_stress_report.c    progress lines, the memory samples and checks,
 *                         the watchdog, the JSON summary
 *   dq_stress_cli.c       the configuration, the command line, main
 *
 * This header is internal to dq_stress: what more than one of them uses.
 */
#ifndef STRESS_DQ_STRESS_H
#define STRESS_DQ_STRESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <unistd.h>

#include <deliqueue/deliqueue.h>
#include <deliqueue_internal/msg.h>

#include "stress/stress_util.h"

/* ---- configuration (dq_stress_cli.c) -------------------------------------- */

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

extern config cfg;

/* scenarios: what the producers post and how long an epoch lasts */
enum scenario { SC_MIXED, SC_CHURN, SC_ORDER, SC_BARRIER, SC_LIVENESS, SC_LOOPER };
extern enum scenario scenario;

extern char repro[1024];

/* running_emulated(), read once by main before any other thread starts */
extern bool emulated;

/* ---- small helpers -------------------------------------------------------- */

static inline uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rng_next(s) % n);
}

static inline int64_t real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void sleep_ns(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    nanosleep(&ts, NULL);
}

/* ---- counters and violations (dq_stress_checks.c) ------------------------- */

extern _Atomic uint64_t n_ops, n_accepted, n_delivered, n_discarded;
extern _Atomic uint64_t n_violations;
extern _Atomic bool run_stop; /* the whole run ends (time or violation) */

void violation(const char *fmt, ...);

/* relaxed: statistics only */
static inline void count_ops(uint64_t n)
{
    atomic_fetch_add_explicit(&n_ops, n, memory_order_relaxed);
}

/* ---- message identity (dq_stress_checks.c) -------------------------------- *
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

extern slot slots[MAX_SLOTS];
extern int n_slots;
extern _Atomic uint32_t epoch_tag;

/* ---- on_discard (dq_stress_checks.c) -------------------------------------- */

/* thread-local: what the current user call (cancel/remove) may discard */
extern _Thread_local bool tl_user_call;
extern _Thread_local const dq_match *tl_match;
extern _Thread_local rec *tl_cancel_rec;
extern _Thread_local uint32_t tl_discards;

void on_discard(const dq_msg *m, void *ctx);

/* ---- delivery checks (dq_stress_checks.c) --------------------------------- */

extern _Atomic(pthread_t *) consumer_id;

void check_delivery(const dq_msg *m, uint64_t call_ticket);
/* The protected-order bookkeeping starts over (each epoch, before its
   threads start). */
void delivery_checks_reset(void);

/* ---- idle handlers (dq_stress_checks.c) ----------------------------------- */

#define IDLE_CTXS 64
typedef struct idle_ctx {
    _Atomic int state; /* 0 free, 1 installed, 2 returned false */
    _Atomic uint32_t runs;
    uint32_t keep_for; /* returns true this many times */
} idle_ctx;
extern idle_ctx idle_ctxs[IDLE_CTXS];

bool idle_handler(void *ctx);

/* ---- the epoch (dq_stress_epoch.c) ---------------------------------------- */

enum end_mode { END_QUIT_SAFELY, END_QUIT, END_UNREF };
extern const char *const end_names[];

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

extern epoch_state ep;

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

extern int target_prot; /* protected messages: never matched */

rec *slot_take(int s);
void post_result(rec *r, int err, dq_token tok, const char *what);

/* ---- epoch driver (dq_stress_epoch.c) ------------------------------------- */

extern uint64_t thread_starts;
extern worker *workers; /* every epoch's, in role order */
extern int n_workers;

int64_t epoch_length_ns(void);
void run_epoch(uint64_t index, uint64_t *rng, int64_t epoch_ns);
/* Hand w a role and a reference to q for this epoch; wait for it to end. */
void worker_start(worker *w, void *(*fn)(void *), int index, uint64_t *rng,
                  dq_queue *q);
void worker_finish(worker *w);
/* End of the run: every serving thread leaves. */
void workers_stop(void);

/* ---- liveness (dq_stress_liveness.c) -------------------------------------- */

/* real_now() when the consumer entered its current blocking call, 0 when
   it is not in one.  seq_cst with the probes' fields, so the checker's
   reads make one consistent picture. */
extern _Atomic int64_t consumer_call_since;
extern _Atomic uint64_t n_probes; /* probes posted deliverable */
/* the consumer thread's kernel thread id (for its state in /proc) */
extern _Atomic pid_t consumer_tid;

void *liveness_barrier_main(void *arg);
void liveness_check(int64_t now);
/* No probe posted, no barrier up (each epoch, before its threads start). */
void liveness_reset(void);

/* ---- the looper API (dq_stress_looper.c) --------------------------------- */

/* One epoch of scenario looper (run_epoch hands it over). */
void looper_run_epoch(uint64_t index, uint64_t *rng, int64_t epoch_ns);
/* What the run exercised, one line on stderr (main, at the end). */
void looper_report(void);

/* ---- progress, summary (dq_stress_report.c) ------------------------------- */

extern long rss_start;
extern _Atomic bool progress_done;
extern int64_t run_start;
extern _Atomic int64_t last_epoch_end; /* real_now() when an epoch last ended */
extern _Atomic uint64_t epochs_done;
extern int64_t hang_limit_ns;

long rss_kb(void);
void note_rss(long rss);
void pool_check_epoch_end(uint64_t index);
void *progress_main(void *arg);
char *summary_json(double duration, long rss_end, bool pass);

#endif /* STRESS_DQ_STRESS_H */
