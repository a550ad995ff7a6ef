/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running a function on the consumer (core_invoke.c, below both sides):
 * the messages dq_invoke and dq_call post, the functions their callback
 * runs, and dq_call's record, which the caller waits on and whichever of
 * the delivery, a discard and a quit comes first completes.
 *
 * An invoke or call message is an ordinary callback message (dq_loop,
 * dq_loop_once, or a dq_next* caller running out.callback, runs it), with
 * the library's own target (dq_invoke_mark), what saying which kind,
 * and fn and its ctx in the payload: an invoke carries fn in arg1/arg2 and
 * ctx in obj; a call carries its record in obj.
 *
 * A call record's state, one word:
 *   CALL_PENDING -> CALL_RUNNING -> CALL_DONE     the callback ran fn
 *   CALL_PENDING -> CALL_DISCARDED                its message was discarded
 *   CALL_PENDING -> CALL_ABANDONED                the waiter gave up (dq_quit)
 * The callback and the waiter race for CALL_PENDING by CAS, so fn runs
 * only if no waiter has left; a discard happens only to a message never
 * delivered, so it races neither.  The record has two references, the
 * waiter's and the message's; the message's goes when its callback runs
 * or it is discarded (exactly one of the two).
 *
 * Who touches what: fn, ctx, q: written before the post, read-only then;
 * state, refs: atomics, any thread; ev: the waiter waits, a completer
 * signals; link: q->calls' lock.
 */
#ifndef DELIQUEUE_SRC_INVOKE_H
#define DELIQUEUE_SRC_INVOKE_H

#include "atomic.h"
#include <stdbool.h>
#include <stdint.h>

#include <deliqueue/deliqueue.h>

#include "queue.h"
#include "registry.h"
#include "wait.h"

/* The target of every invoke and call message (its address only). */
extern const char dq_invoke_mark;

#define DQ_INVOKE_WHAT_INVOKE 1 /* dq_invoke */
#define DQ_INVOKE_WHAT_CALL   2 /* dq_call */

enum dq_call_state {
    DQ_CALL_PENDING = 0,
    DQ_CALL_RUNNING,
    DQ_CALL_DONE,
    DQ_CALL_DISCARDED,
    DQ_CALL_ABANDONED,
};

typedef struct dq_call_record {
    void (*fn)(void *ctx);
    void *ctx;
    dq_queue *q;
    _Atomic(uint32_t) state;
    _Atomic(uint32_t) refs;
    dq_event ev;
    dq_reg_link link; /* on q->calls while the waiter waits */
} dq_call_record;

static inline bool dq_invoke_is_call(const void *target, int32_t what)
{
    return target == &dq_invoke_mark && what == DQ_INVOKE_WHAT_CALL;
}

/* dq_invoke's message: runs fn(ctx) when its callback runs. */
void dq_invoke_msg(dq_msg *m, void (*fn)(void *ctx), void *ctx);

/* A new record for dq_call (two references, on q->calls), or NULL. */
dq_call_record *dq_call_new(dq_queue *q, void (*fn)(void *ctx), void *ctx);
/* Its message: runs fn(ctx) when its callback runs, unless the waiter
   has left. */
void dq_call_msg(dq_msg *m, dq_call_record *c);
/* The waiter is done with it: off q->calls, and its reference dropped. */
void dq_call_leave(dq_call_record *c);
/* Its message was not accepted: off q->calls, and freed. */
void dq_call_unposted(dq_call_record *c);
/* A call message was discarded (dq_report_discard): CALL_DISCARDED, the
   waiter signalled, the message's reference dropped. */
void dq_call_discarded(void *obj);
/* Wait for the record to reach a final state (CALL_DONE and after), the
   deadline (real time; INT64_MAX: none), or a dq_quit, which the waiter
   answers by abandoning a call whose fn has not started.  Returns the
   state: CALL_PENDING or CALL_RUNNING when the deadline came first. */
uint32_t dq_call_wait(dq_call_record *c, int64_t deadline);
/* dq_quit: signal every waiter on q, so that each sees the quit at once
   (whatever the consumer is doing) and leaves with -ESHUTDOWN if fn has
   not started. */
void dq_calls_release(dq_queue *q);

#endif /* DELIQUEUE_SRC_INVOKE_H */
