/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contender 4: Concurrency Kit handoff.  Producers ck_stack_push_upmc a
 * malloc'd bench_node; the consumer takes the whole stack with
 * ck_stack_batch_pop_upmc (one exchange) into its dq_heap.  The rest is
 * the handoff driver (handoff.h).
 */
#include <ck_stack.h>

#include "bench/contenders/handoff.h"

typedef struct ck_handoff {
    /* 16-byte alignment: the _mpmc operations on aarch64 need it; kept so
       the layout is the same on every target */
    _Alignas(16) ck_stack_t stack;
    char pad[64]; /* the stack top alone on its line */
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
    return e == NULL ? NULL
                     : (bench_node *)(void *)((char *)e - offsetof(bench_node, link));
}

static void init(void *q)
{
    ck_stack_init(&((ck_handoff *)q)->stack);
}

static void push(void *q, bench_node *n)
{
    ck_stack_push_upmc(&((ck_handoff *)q)->stack, entry_of(n));
}

static bool is_empty(const void *q)
{
    /* ck_pr_load: the consumer polls this (bench_idle_poll); the plain read
       of CK_STACK_ISEMPTY could be hoisted out of the loop */
    return ck_pr_load_ptr(&((const ck_handoff *)q)->stack.head) == NULL;
}

static bench_node *pop_all(void *q)
{
    return node_of(ck_stack_batch_pop_upmc(&((ck_handoff *)q)->stack));
}

static bench_node *next(const bench_node *n)
{
    return node_of(CK_STACK_NEXT((ck_stack_entry_t *)(void *)n->link));
}

HANDOFF_CONTENDER(bench_ck_handoff, "ck_handoff",
                  "ck_stack push_upmc + batch_pop_upmc into the consumer's dq_heap, "
                  "idle poll then futex",
                  ck_handoff);
