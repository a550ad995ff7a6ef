/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 5: liburcu handoff.  Producers cds_lfs_push a malloc'd
 * bench_node; the consumer takes the whole stack with __cds_lfs_pop_all
 * (one exchange; the "__" variant because this consumer is the only
 * popper) into its dq_heap (handoff.h).  The inline (_LGPL_SOURCE)
 * versions are used, as Concurrency Kit's are inline.
 * cancel: a tombstone from any thread, freed lazily by the consumer.
 * remove: consumer thread only (the heap is private to it).
 */
#define _LGPL_SOURCE 1
#include <stdlib.h>
#include <urcu/lfstack.h>

#include "bench/contenders/handoff.h"

typedef struct urcu_handoff {
    struct __cds_lfs_stack stack;
    char pad[64];               /* the stack top alone on its line */
    handoff_looper looper;
} urcu_handoff;

_Static_assert(sizeof(struct cds_lfs_node) == sizeof(((bench_node *)0)->link),
               "a cds_lfs_node is one pointer");

static struct cds_lfs_node *lfs_of(bench_node *n)
{
    return (struct cds_lfs_node *)(void *)n->link;
}

static bench_node *node_of(struct cds_lfs_node *e)
{
    return (bench_node *)(void *)((char *)e - offsetof(bench_node, link));
}

static void *create(void)
{
    urcu_handoff *q = aligned_alloc(64, (sizeof(urcu_handoff) + 63) / 64 * 64);
    if (q == NULL)
        return NULL;
    __cds_lfs_init(&q->stack);
    handoff_init(&q->looper);
    return q;
}

static void drain(void *qv)
{
    urcu_handoff *q = qv;
    if (cds_lfs_empty(&q->stack))
        return;
    struct cds_lfs_head *head = __cds_lfs_pop_all(&q->stack);
    bench_node *newest_first = NULL, *last = NULL;
    struct cds_lfs_node *e, *next;
    cds_lfs_for_each_safe(head, e, next) {
        bench_node *n = node_of(e);
        n->batch_next = NULL;
        if (last)
            last->batch_next = n;
        else
            newest_first = n;
        last = n;
    }
    handoff_absorb(&q->looper, newest_first);
}

static bool still_empty(const void *stack)
{
    return cds_lfs_empty((struct __cds_lfs_stack *)(uintptr_t)stack);
}

static void destroy(void *qv)
{
    urcu_handoff *q = qv;
    drain(q);
    bench_heap_free_all(&q->looper.heap);
    free(q);
}

static int post_at(void *qv, const dq_msg *m, int64_t when, dq_token *tok)
{
    urcu_handoff *q = qv;
    int err;
    bench_node *n = bench_node_new(m, when, &err);
    if (n == NULL)
        return err;
    if (tok)
        *tok = (dq_token)(uintptr_t)n;
    cds_lfs_node_init(lfs_of(n));
    cds_lfs_push(&q->stack, lfs_of(n));
    handoff_producer_wake(&q->looper);
    return 0;
}

static int try_next(void *qv, dq_msg *out)
{
    urcu_handoff *q = qv;
    return handoff_try_next(&q->looper, out, drain, q);
}

static int next_until(void *qv, dq_msg *out, int64_t deadline)
{
    urcu_handoff *q = qv;
    return handoff_next_until(&q->looper, out, deadline, drain, q, still_empty,
                              &q->stack);
}

static int cancel(void *qv, dq_token tok)
{
    (void)qv;
    if (tok == 0)
        return -EINVAL;
    return bench_node_cancel((bench_node *)(uintptr_t)tok);
}

static size_t remove_matching(void *qv, const dq_match *m)
{
    urcu_handoff *q = qv;
    drain(q);
    return bench_heap_remove_matching(&q->looper.heap, m);
}

const bench_contender bench_urcu_handoff = {
    .name = "urcu_handoff",
    .design = "liburcu cds_lfs_push + __cds_lfs_pop_all into the consumer's dq_heap, idle poll then futex",
    .caps = BENCH_CONSUMES | BENCH_REMOVE_LOOPER,
    .create = create,
    .destroy = destroy,
    .post_at = post_at,
    .try_next = try_next,
    .next_until = next_until,
    .cancel = cancel,
    .remove = remove_matching,
};
