/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dq_stress: the checks made as things happen.  Every message's record
 * (message identity), on_discard, the consumer's delivery checks, the
 * idle handlers, and the counters and violation() they report through.
 * The invariants are listed in dq_stress.h.
 */
#include "stress/dq_stress.h"

#include <stdarg.h>

/* ---- counters and violations ---------------------------------------------- */

_Atomic uint64_t n_ops, n_accepted, n_delivered, n_discarded;
_Atomic uint64_t n_violations;
_Atomic bool run_stop;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

void violation(const char *fmt, ...)
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

/* ---- message identity (the layout is in dq_stress.h) ---------------------- */

slot slots[MAX_SLOTS];
int n_slots;
_Atomic uint32_t epoch_tag;

/* protected-order bookkeeping, consumer only (per slot and class) */
static uint32_t last_pseq[MAX_SLOTS][2];
static int64_t class_max_when[2];
static uint64_t class_max_ticket[2];

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
_Thread_local bool tl_user_call;
_Thread_local const dq_match *tl_match;
_Thread_local rec *tl_cancel_rec;
_Thread_local uint32_t tl_discards;

void on_discard(const dq_msg *m, void *ctx)
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

_Atomic(pthread_t *) consumer_id;

void check_delivery(const dq_msg *m, uint64_t call_ticket)
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

void delivery_checks_reset(void)
{
    memset(last_pseq, 0, sizeof last_pseq);
    class_max_when[0] = class_max_when[1] = INT64_MIN;
    class_max_ticket[0] = class_max_ticket[1] = 0;
}

/* ---- idle handlers ------------------------------------------------------------ */

idle_ctx idle_ctxs[IDLE_CTXS];

bool idle_handler(void *ctx)
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
