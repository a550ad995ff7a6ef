/* SPDX-License-Identifier: Apache-2.0 */
/* The shared heap and the branchless comparator. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include <deliqueue/heap.h>

typedef struct item { dq_heap_elem elem; dq_key key; } item;

Test(comparator, lexicographic_over_the_whole_range)
{
    const int64_t v[] = { INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX };
    const int64_t seqs[] = { 0, 1, 2, INT64_C(1) << 62, INT64_MAX - 1, INT64_MAX };
    for (size_t i = 0; i < 7; i++)
        for (size_t j = 0; j < 7; j++) {
            for (size_t k = 0; k < 7; k++) {
                /* three-way form: any when, any seq */
                dq_key a = { v[i], v[k] }, b = { v[j], v[6 - k] };
                int want = v[i] != v[j] ? (v[i] < v[j] ? -1 : 1)
                                        : (v[k] < v[6 - k] ? -1 : v[k] > v[6 - k]);
                cr_assert_eq(dq_key_cmp(a, b) < 0, want < 0, "cmp when %lld vs %lld",
                             (long long)v[i], (long long)v[j]);
                cr_assert_eq(dq_key_cmp(a, b) == 0, want == 0);
            }
            for (size_t k = 0; k < 6; k++)
                for (size_t l = 0; l < 6; l++) {
                    /* dq_key_less: any when, seq >= 0 */
                    dq_key a = { v[i], seqs[k] }, b = { v[j], seqs[l] };
                    bool want = v[i] != v[j] ? v[i] < v[j] : seqs[k] < seqs[l];
                    cr_assert_eq(dq_key_less(a, b), want, "less (%lld,%lld) vs (%lld,%lld)",
                                 (long long)v[i], (long long)seqs[k],
                                 (long long)v[j], (long long)seqs[l]);
                    cr_assert_eq(dq_key_less_branchy(a, b), want);
                }
        }
}

Test(comparator, front_key_orders_before_every_time)
{
    dq_key front = { DQ_KEY_FRONT, 5 }, later = { INT64_MAX, 1 }, zero = { 0, 1 };
    cr_assert(dq_key_less(front, later));
    cr_assert(dq_key_less(front, zero));
    cr_assert(!dq_key_less(later, front));
}

static void check_drain(dq_heap *h, size_t expect)
{
    dq_key prev = { INT64_MIN, 0 };
    size_t n = 0;
    dq_heap_elem *e;
    while ((e = dq_heap_pop(h)) != NULL) {
        item *it = (item *)e;
        cr_assert(!dq_key_less(it->key, prev), "heap order broken at pop %zu", n);
        cr_assert_eq(e->index, DQ_HEAP_NONE);
        prev = it->key;
        n++;
    }
    cr_assert_eq(n, expect);
}

Test(heap, random_pushes_pops_and_removes_keep_order)
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
            cr_assert_eq(dq_heap_push(&h, &it[i].elem, it[i].key), 0);
        }
        for (size_t i = 0; i < n; i += 3) {
            dq_heap_remove(&h, &it[i].elem);
            removed++;
        }
        check_drain(&h, n - removed);
        dq_heap_fini(&h);
    }
}

Test(heap, peek_is_minimum)
{
    item it[3] = { { .key = { 5, 1 } }, { .key = { 5, 0 } }, { .key = { 9, 0 } } };
    dq_heap h;
    dq_heap_init(&h);
    for (int i = 0; i < 3; i++)
        dq_heap_push(&h, &it[i].elem, it[i].key);
    cr_assert_eq(dq_heap_peek(&h), &it[1].elem);
    cr_assert_eq(dq_heap_peek_key(&h)->seq, 0);
    dq_heap_fini(&h);
    cr_assert_null(dq_heap_peek(&h));
}
