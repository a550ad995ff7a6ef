/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 4: Concurrency Kit handoff.  Producers ck_stack_push_upmc a
 * malloc'd bench_node; the consumer takes the whole stack with
 * ck_stack_batch_pop_upmc (one exchange) into its dq_heap (handoff.h).
 * cancel: a tombstone from any thread, freed lazily by the consumer.
 * remove: consumer thread only (the heap is private to it).
 */
#include <ck_stack.h>
#include <stdlib.h>

#include "bench/contenders/handoff.h"

typedef struct ck_handoff {
    /* 16-byte alignment: the _mpmc operations on aarch64 need it; kept so
       the layout is the same on every target */
    _Alignas(16) ck_stack_t stack;
    char pad[64];               /* the stack top alone on its line */
    handoff_looper looper;
} ck_handoff;

_Static_assert(sizeof(ck_stack_entry_t) == sizeof(((bench_node *)0)->link),
               "a ck_stack_entry is one pointer");

static ck_stack_entry_t *entry_of(bench_node *n)
{
    return (ck_stack_entry_t *)(void *)n->link;
}

static bench_node *node_of(ck_stack_entry_t *e)
{
    return (bench_node *)(void *)((char *)e - offsetof(bench_node, link));
}

static void *create(void)
{
    ck_handoff *q = aligned_alloc(64, (sizeof(ck_handoff) + 63) / 64 * 64);
    if (q == NULL)
        return NULL;
    ck_stack_init(&q->stack);
    handoff_init(&q->looper);
    return q;
}

static void drain(void *qv)
{
    ck_handoff *q = qv;
    if (CK_STACK_ISEMPTY(&q->stack))
        return;
    ck_stack_entry_t *e = ck_stack_batch_pop_upmc(&q->stack);
    bench_node *newest_first = NULL, *last = NULL;
    for (; e != NULL; e = CK_STACK_NEXT(e)) {
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
    /* ck_pr_load: the consumer polls this (bench_idle_poll); the plain read
       of CK_STACK_ISEMPTY could be hoisted out of the loop */
    return ck_pr_load_ptr(&((const ck_stack_t *)stack)->head) == NULL;
}

static void destroy(void *qv)
{
    ck_handoff *q = qv;
    drain(q);
    bench_heap_free_all(&q->looper.heap);
    free(q);
}

static int post_at(void *qv, const dq_msg *m, int64_t when, dq_token *tok)
{
    ck_handoff *q = qv;
    int err;
    bench_node *n = bench_node_new(m, when, &err);
    if (n == NULL)
        return err;
    if (tok)
        *tok = (dq_token)(uintptr_t)n;
    ck_stack_push_upmc(&q->stack, entry_of(n));
    handoff_producer_wake(&q->looper);
    return 0;
}

static int try_next(void *qv, dq_msg *out)
{
    ck_handoff *q = qv;
    return handoff_try_next(&q->looper, out, drain, q);
}

static int next_until(void *qv, dq_msg *out, int64_t deadline)
{
    ck_handoff *q = qv;
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
    ck_handoff *q = qv;
    drain(q);
    return bench_heap_remove_matching(&q->looper.heap, m);
}

const bench_contender bench_ck_handoff = {
    .name = "ck_handoff",
    .design = "ck_stack push_upmc + batch_pop_upmc into the consumer's dq_heap, idle poll then futex",
    .caps = BENCH_CONSUMES | BENCH_REMOVE_LOOPER,
    .create = create,
    .destroy = destroy,
    .post_at = post_at,
    .try_next = try_next,
    .next_until = next_until,
    .cancel = cancel,
    .remove = remove_matching,
};
