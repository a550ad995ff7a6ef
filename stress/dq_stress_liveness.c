/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: liveness (scenario liveness).  The barrier threads that post
 * probes behind their barriers, and the check, run on the progress
 * thread, that a probe never waits while the consumer sleeps.
 */
#include "stress/dq_stress.h"

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
_Atomic int64_t consumer_call_since;

typedef struct probe {
    _Atomic int64_t posted_at; /* real_now() after the post; 0: none */
    _Atomic(rec *) r;
    const char *_Atomic way;
} probe;
static probe probes[MAX_SLOTS];
_Atomic uint64_t n_probes; /* probes posted deliverable */
/* per barrier thread: a dq_now() reading no later than its standing
   barrier's due, INT64_MAX when it has none up */
static _Atomic int64_t barrier_floor[MAX_SLOTS];

void liveness_reset(void)
{
    for (int s = 0; s < MAX_SLOTS; s++) {
        atomic_store(&probes[s].posted_at, 0);
        atomic_store(&barrier_floor[s], INT64_MAX);
    }
}

/* The consumer thread's kernel state: 'S' asleep, 'R' running or ready to
   run (woken, waiting for a CPU), '?' unknown.  Under QEMU user mode the
   guest thread is a host thread, and /proc/self/task is the host's. */
_Atomic pid_t consumer_tid;

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

void liveness_check(int64_t now)
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

void *liveness_barrier_main(void *arg)
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
