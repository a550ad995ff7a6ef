/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 1: deliqueue itself, through its public API only; and its twin,
 * the same code as a separate contender (its own queue in every scenario):
 * the A/A control.  Two identical contenders differ only by where and when
 * they ran, so the twin's ratios to deliqueue show how far this run's noise
 * alone moves a ratio, and a contender that ties with deliqueue inside
 * that spread is not measurably better or worse (queue_bench's targets).
 */
#include <deliqueue/deliqueue.h>

#include "bench/contender.h"

static void *create(void)
{
    dq_queue *q = dq_create(NULL);
    if (q != NULL)
        (void)dq_set_name(q, "bench"); /* in trace events: dq:bench */
    return q;
}

static void destroy(void *q)
{
    dq_quit(q);
    dq_unref(q);
}

static int post_at(void *q, const dq_msg *m, int64_t when, dq_token *tok)
{
    return dq_post_at(q, m, when, tok);
}

static int try_next(void *q, dq_msg *out)
{
    return dq_try_next(q, out);
}

static int next_until(void *q, dq_msg *out, int64_t deadline)
{
    return dq_next_until(q, out, deadline);
}

static int cancel(void *q, dq_token tok)
{
    return dq_cancel(q, tok);
}

static size_t remove_matching(void *q, const dq_match *m)
{
    return dq_remove(q, m);
}

/* deliqueue and its twin differ in nothing but their names */
#define DELIQUEUE_CONTENDER(NAME, DESIGN)                                          \
    {                                                                              \
        .name = NAME, .design = DESIGN, .caps = BENCH_CONSUMES | BENCH_REMOVE_ANY, \
        .create = create, .destroy = destroy, .post_at = post_at,                  \
        .try_next = try_next, .next_until = next_until, .cancel = cancel,          \
        .remove = remove_matching,                                                 \
    }

const bench_contender bench_deliqueue = DELIQUEUE_CONTENDER(
    "deliqueue", "Treiber stack of posts + looper-owned dq_heap, tombstone removal");

const bench_contender bench_deliqueue_twin = DELIQUEUE_CONTENDER(
    "deliqueue_twin",
    "the same deliqueue code as a second contender: the A/A control (noise alone)");
