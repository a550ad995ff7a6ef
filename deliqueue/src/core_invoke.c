/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor below both sides (invoke.h): invoke and call messages, the
 * callbacks that run them on the consumer, and dq_call's records, which
 * the any-thread side (any_invoke.c) waits on and a delivery, a discard
 * (core.c's dq_report_discard) or a quit completes.  Calls only down: the
 * wait.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "invoke.h"

const char dq_invoke_mark = 0;

/* ---- dq_invoke's messages ----------------------------------------------- */

/* fn travels in arg1 and arg2 as its bytes (a function pointer is no
   object pointer, so not in obj); ctx in obj. */
_Static_assert(sizeof(void (*)(void *)) <= 2 * sizeof(int32_t),
               "a function pointer fits in arg1 and arg2");

static void invoke_run(dq_msg *m)
{
    unsigned char bytes[2 * sizeof(int32_t)];
    memcpy(bytes, &m->arg1, sizeof(int32_t));
    memcpy(bytes + sizeof(int32_t), &m->arg2, sizeof(int32_t));
    void (*fn)(void *ctx);
    memcpy(&fn, bytes, sizeof(fn));
    fn(m->obj);
}

void dq_invoke_msg(dq_msg *m, void (*fn)(void *ctx), void *ctx)
{
    unsigned char bytes[2 * sizeof(int32_t)] = { 0 };
    memcpy(bytes, &fn, sizeof(fn));
    memset(m, 0, sizeof(*m));
    m->target = &dq_invoke_mark;
    m->what = DQ_INVOKE_WHAT_INVOKE;
    memcpy(&m->arg1, bytes, sizeof(int32_t));
    memcpy(&m->arg2, bytes + sizeof(int32_t), sizeof(int32_t));
    m->obj = ctx;
    m->callback = invoke_run;
}

/* ---- dq_call's records -------------------------------------------------- */

static void call_unref(dq_call_record *c)
{
    /* acq_rel: the last one out sees every use of the other's */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
        dq_event_fini(&c->ev);
        free(c);
    }
}

/* Move a record to a final state and tell the waiter.  The store and the
   bump are both releases: a waiter that reads the bumped count (acquire)
   reads the state too, and one that read the count before it is woken by
   the bump (dq_event_wait compares the count). */
static void call_complete(dq_call_record *c, uint32_t state)
{
    atomic_store_explicit(&c->state, state, memory_order_release);
    dq_event_signal(&c->ev);
}

static void call_run(dq_msg *m)
{
    dq_call_record *c = (dq_call_record *)m->obj;
    uint32_t expect = DQ_CALL_PENDING;
    /* acquire: a waiter that abandoned it wrote nothing we read; the CAS
       only decides between fn and the waiter's leaving.  Relaxed would
       do, acquire keeps the reasoning local. */
    if (atomic_compare_exchange_strong_explicit(&c->state, &expect, DQ_CALL_RUNNING,
                                                memory_order_acquire,
                                                memory_order_relaxed)) {
        c->fn(c->ctx);
        /* release (call_complete): what fn wrote happens before the
           waiter's acquire of CALL_DONE, and so before dq_call returns 0 */
        call_complete(c, DQ_CALL_DONE);
    }
    call_unref(c);
}

dq_call_record *dq_call_new(dq_queue *q, void (*fn)(void *ctx), void *ctx)
{
    dq_call_record *c = (dq_call_record *)malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    if (dq_event_init(&c->ev) != 0) {
        free(c);
        return NULL;
    }
    c->fn = fn;
    c->ctx = ctx;
    c->q = q;
    atomic_init(&c->state, DQ_CALL_PENDING);
    atomic_init(&c->refs, 2);
    dq_registry_add(&q->calls, &c->link);
    return c;
}

void dq_call_msg(dq_msg *m, dq_call_record *c)
{
    memset(m, 0, sizeof(*m));
    m->target = &dq_invoke_mark;
    m->what = DQ_INVOKE_WHAT_CALL;
    m->obj = c;
    m->callback = call_run;
}

void dq_call_leave(dq_call_record *c)
{
    dq_registry_remove(&c->q->calls, &c->link);
    call_unref(c);
}

void dq_call_unposted(dq_call_record *c)
{
    dq_registry_remove(&c->q->calls, &c->link);
    dq_event_fini(&c->ev);
    free(c);
}

void dq_call_discarded(void *obj)
{
    dq_call_record *c = (dq_call_record *)obj;
    /* only a message never delivered is discarded, so call_run never
       runs for it, and the waiter changes PENDING only to ABANDONED,
       which a discard after it overrides harmlessly (the waiter has its
       answer) */
    call_complete(c, DQ_CALL_DISCARDED);
    call_unref(c);
}

void dq_calls_release(dq_queue *q)
{
    /* the lock keeps every record on the list alive (its waiter takes it
       off under the lock before dropping its reference) */
    pthread_mutex_lock(&q->calls.lock);
    for (dq_reg_link *l = q->calls.head; l != NULL; l = l->next)
        dq_event_signal(&dq_reg_entry(l, dq_call_record, link)->ev);
    pthread_mutex_unlock(&q->calls.lock);
}

/* Wait for the record to reach a final state, or the deadline (real
   time), or a quit (dq_quit releases every waiter: dq_calls_release).
   Returns the state; CALL_PENDING or CALL_RUNNING when the deadline came
   first. */
uint32_t dq_call_wait(dq_call_record *c, int64_t deadline)
{
    for (;;) {
        uint32_t seen = dq_event_read(&c->ev);
        /* acquire: pairs with call_complete's release, so fn's writes
           are visible once we read CALL_DONE */
        uint32_t st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st >= DQ_CALL_DONE)
            return st;
        /* acquire: the mode dq_quit raised before it signalled us */
        if (st == DQ_CALL_PENDING &&
            atomic_load_explicit(&c->q->quit_mode, memory_order_acquire) ==
                DQ_QUIT_NOW) {
            /* acquire on success: nothing to see; the CAS decides between
               us and call_run, so fn never runs once we leave */
            if (atomic_compare_exchange_strong_explicit(
                    &c->state, &st, DQ_CALL_ABANDONED, memory_order_acquire,
                    memory_order_acquire))
                return DQ_CALL_ABANDONED;
            continue;
        }
        if (deadline != INT64_MAX && dq_clock_real() >= deadline)
            return st;
        /* real time, whatever clock q runs on */
        dq_event_wait(&c->ev, seen, deadline);
    }
}
