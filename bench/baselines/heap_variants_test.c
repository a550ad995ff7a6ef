/* SPDX-License-Identifier: Apache-2.0 */
/* The baselines' comparator and sift-down agree with the library's. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "bench/baselines/heap_variants.h"

typedef struct item {
    dq_heap_elem elem;
    dq_key key;
} item;

DQ_HEAP_DEFINE(index_heap, dq_key_less)
DQ_HEAP_DEFINE(branchy_heap, dq_key_less_branchy)

Test(heap_variants, the_branchy_comparator_agrees_with_dq_key_less)
{
    const int64_t v[] = {
        INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX
    };
    const int64_t seqs[] = { 0, 1, 2, INT64_C(1) << 62, INT64_MAX - 1, INT64_MAX };
    for (size_t i = 0; i < 7; i++)
        for (size_t j = 0; j < 7; j++)
            for (size_t k = 0; k < 6; k++)
                for (size_t l = 0; l < 6; l++) {
                    dq_key a = { v[i], seqs[k] }, b = { v[j], seqs[l] };
                    cr_assert_eq(dq_key_less_branchy(a, b), dq_key_less(a, b),
                                 "(%lld,%lld) vs (%lld,%lld)", (long long)v[i],
                                 (long long)seqs[k], (long long)v[j],
                                 (long long)seqs[l]);
                }
}

/* A random mix of pushes (front keys among them), removals and pops; every
   pop is the smallest left. */
static void check_order(int (*push)(dq_heap *, dq_heap_elem *, dq_key),
                        void (*remove)(dq_heap *, dq_heap_elem *),
                        dq_heap_elem *(*pop)(dq_heap *))
{
    srand(7);
    for (int round = 0; round < 3000; round++) {
        item it[48];
        dq_heap h;
        dq_heap_init(&h);
        size_t n = 1 + (size_t)rand() % 48, removed = 0;
        for (size_t i = 0; i < n; i++) {
            it[i].key = (dq_key){ rand() % 8, (int64_t)i };
            if (rand() % 5 == 0)
                it[i].key.when = DQ_KEY_FRONT;
            cr_assert_eq(push(&h, &it[i].elem, it[i].key), 0);
        }
        for (size_t i = 0; i < n; i += 3) {
            remove(&h, &it[i].elem);
            removed++;
        }
        dq_key prev = { INT64_MIN, 0 };
        size_t popped = 0;
        for (dq_heap_elem *e; (e = pop(&h)) != NULL; popped++) {
            item *x = (item *)e;
            cr_assert(!dq_key_less(x->key, prev), "heap order broken at pop %zu",
                      popped);
            cr_assert_eq(e->index, DQ_HEAP_NONE);
            prev = x->key;
        }
        cr_assert_eq(popped, n - removed);
        dq_heap_fini(&h);
    }
}

Test(heap_variants, the_sift_down_by_index_keeps_the_order)
{
    check_order(index_heap_push, index_heap_remove, index_heap_pop);
}

Test(heap_variants, the_branchy_heap_keeps_the_order)
{
    check_order(branchy_heap_push, branchy_heap_remove, branchy_heap_pop);
}
