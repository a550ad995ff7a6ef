/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 5: liburcu handoff.  Producers cds_lfs_push a malloc'd
 * bench_node; the consumer takes the whole stack with __cds_lfs_pop_all
 * (one exchange; the "__" variant because this consumer is the only
 * popper) into its dq_heap.  The inline (_LGPL_SOURCE) versions are used,
 * as Concurrency Kit's are inline.  The rest is the handoff driver
 * (handoff.h).
 */
#define _LGPL_SOURCE 1
#include <urcu/lfstack.h>

#include "bench/contenders/handoff.h"

typedef struct urcu_handoff {
    struct __cds_lfs_stack stack;
    char pad[64]; /* the stack top alone on its line */
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
    return e == NULL ? NULL
                     : (bench_node *)(void *)((char *)e - offsetof(bench_node, link));
}

static void init(void *q)
{
    __cds_lfs_init(&((urcu_handoff *)q)->stack);
}

static void push(void *q, bench_node *n)
{
    cds_lfs_node_init(lfs_of(n));
    cds_lfs_push(&((urcu_handoff *)q)->stack, lfs_of(n));
}

static bool is_empty(const void *q)
{
    return cds_lfs_empty((struct __cds_lfs_stack *)(uintptr_t) &
                         ((const urcu_handoff *)q)->stack);
}

static bench_node *pop_all(void *q)
{
    struct cds_lfs_head *head = __cds_lfs_pop_all(&((urcu_handoff *)q)->stack);
    return head == NULL ? NULL : node_of(&head->node);
}

static bench_node *next(const bench_node *n)
{
    return node_of(((const struct cds_lfs_node *)(const void *)n->link)->next);
}

HANDOFF_CONTENDER(
    bench_urcu_handoff, "urcu_handoff",
    "liburcu cds_lfs_push + __cds_lfs_pop_all into the consumer's dq_heap, "
    "idle poll then futex",
    urcu_handoff);
