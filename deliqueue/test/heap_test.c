/* SPDX-License-Identifier: Apache-2.0 */
/* The shared heap and the branchless comparator. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <deliqueue_internal/heap.h>

#include "leak_check.h"

TestSuite(comparator, .fini = leak_check);
TestSuite(heap, .fini = leak_check);

typedef struct item {
    dq_heap_elem elem;
    dq_key key;
} item;

Test(comparator, lexicographic_over_the_whole_range)
{
    const int64_t v[] = {
        INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX
    };
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
                    cr_assert_eq(dq_key_less(a, b), want,
                                 "less (%lld,%lld) vs (%lld,%lld)", (long long)v[i],
                                 (long long)seqs[k], (long long)v[j],
                                 (long long)seqs[l]);
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

struct heap_ops {
    int (*push)(dq_heap *h, dq_heap_elem *e, dq_key k);
    void (*remove)(dq_heap *h, dq_heap_elem *e);
    dq_heap_elem *(*pop)(dq_heap *h);
};
static const struct heap_ops by_offset = { dq_heap_push, dq_heap_remove, dq_heap_pop };

static void check_drain_with(const struct heap_ops *ops, dq_heap *h, size_t expect)
{
    dq_key prev = { INT64_MIN, 0 };
    size_t n = 0;
    dq_heap_elem *e;
    while ((e = ops->pop(h)) != NULL) {
        item *it = (item *)e;
        cr_assert(!dq_key_less(it->key, prev), "heap order broken at pop %zu", n);
        cr_assert_eq(e->index, DQ_HEAP_NONE);
        prev = it->key;
        n++;
    }
    cr_assert_eq(n, expect);
}

static void check_drain(dq_heap *h, size_t expect)
{
    check_drain_with(&by_offset, h, expect);
}

static void random_pushes_pops_and_removes(const struct heap_ops *ops)
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
            cr_assert_eq(ops->push(&h, &it[i].elem, it[i].key), 0);
        }
        for (size_t i = 0; i < n; i += 3) {
            ops->remove(&h, &it[i].elem);
            removed++;
        }
        check_drain_with(ops, &h, n - removed);
        dq_heap_fini(&h);
    }
}

Test(heap, random_pushes_pops_and_removes_keep_order)
{
    random_pushes_pops_and_removes(&by_offset);
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

/* The due run beside the binary part, against a model: a random mix of
   delayed pushes, due pushes (a clock that advances), front keys, pops and
   removals anywhere (holes in the run), checked after every step: the
   minimum, the size, and that iteration meets exactly the live elements
   at the positions they record. */
#define MODEL_MAX 400

/* How often check_against_model met 0, 1, 2 and 3 segments: the model
   must have seen the run wrap round its ring (3). */
static unsigned model_segments_seen[4];

static void check_against_model(const dq_heap *h, item *it, const bool *live, size_t n)
{
    const item *min = NULL;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!live[i])
            continue;
        count++;
        if (min == NULL || dq_key_less(it[i].key, min->key))
            min = &it[i];
    }
    cr_assert_eq(dq_heap_size(h), count);
    cr_assert_eq(dq_heap_peek(h), min ? &min->elem : NULL, "peek is not the minimum");
    size_t met = 0;
    static bool seen[MODEL_MAX];
    memset(seen, 0, sizeof(seen));
    dq_heap_segment seg[3];
    int k = dq_heap_segments(h, seg);
    cr_assert(k >= 0 && k <= 3);
    model_segments_seen[k]++;
    for (int j = 0; j < k; j++) {
        cr_assert_gt(seg[j].n, 0, "an empty segment");
        for (const dq_heap_slot *sl = seg[j].slots; sl < seg[j].slots + seg[j].n;
             sl++) {
            dq_heap_elem *e = sl->elem;
            if (e == NULL)
                continue;
            size_t x = (size_t)((item *)e - it);
            cr_assert(x < n && live[x], "iteration met a dead element");
            cr_assert_not(seen[x], "iteration met an element twice");
            seen[x] = true;
            if (h->count != 0 && seg[j].slots == h->slots) /* the binary part */
                cr_assert_eq(e->index, (uint32_t)(sl - h->slots));
            else
                cr_assert_eq(e->index, DQ_HEAP_RUN | (uint32_t)(sl - h->run));
            met++;
        }
    }
    cr_assert_eq(met, count, "iteration missed live elements");
    /* the element iterator: the same live elements, in segment order */
    dq_heap_iter iter = dq_heap_iter_start(h);
    for (dq_heap_elem *e; (e = dq_heap_iter_next(&iter)) != NULL; met--) {
        size_t x = (size_t)((item *)e - it);
        cr_assert(x < n && seen[x], "the iterator met an element the segments did not");
        seen[x] = false;
    }
    cr_assert_eq(met, 0, "the iterator missed live elements");
    if (h->run_len) {
        cr_assert_not_null(h->run[h->run_head].elem, "the run's first slot is a hole");
        cr_assert_not_null(dq_heap_run_last(h)->elem, "the run's last slot is a hole");
    }
}

Test(heap, due_run_matches_a_model)
{
    srand(11);
    static item it[MODEL_MAX];
    static bool live[MODEL_MAX];
    for (int round = 0; round < 60; round++) {
        dq_heap h;
        dq_heap_init(&h);
        size_t n = 0;
        int64_t now = 100, seq = 1, front_seq = -1;
        memset(live, 0, sizeof(live));
        for (int step = 0; step < 1500; step++) {
            int op = rand() % 10;
            if (op < 5 && n < MODEL_MAX) {
                item *x = &it[n];
                int kind = rand() % 8;
                /* due-now (the run's case), due in the past (may sort
                   before the run's last), delayed, or front */
                x->key.when = kind < 4   ? now
                              : kind < 5 ? now - rand() % 50
                              : kind < 7 ? now + 1 + rand() % 200
                                         : DQ_KEY_FRONT;
                x->key.seq = x->key.when == DQ_KEY_FRONT
                                 ? (INT64_C(1) << 40) + front_seq--
                                 : (INT64_C(1) << 41) + seq++;
                int err = rand() % 4 ? dq_heap_push_due(&h, &x->elem, x->key, now)
                                     : dq_heap_push(&h, &x->elem, x->key);
                cr_assert_eq(err, 0);
                live[n++] = true;
            } else if (op < 7) {
                dq_heap_elem *e = dq_heap_pop(&h);
                if (e != NULL) {
                    cr_assert_eq(e->index, DQ_HEAP_NONE);
                    live[(item *)e - it] = false;
                }
            } else if (op < 9 && n > 0) {
                size_t k = (size_t)rand() % n;
                if (live[k]) {
                    dq_heap_remove(&h, &it[k].elem);
                    cr_assert_eq(it[k].elem.index, DQ_HEAP_NONE);
                    live[k] = false;
                }
            } else {
                now += rand() % 20;
            }
            check_against_model(&h, it, live, n);
        }
        check_drain(&h, dq_heap_size(&h));
        dq_heap_fini(&h);
    }
    cr_assert_gt(model_segments_seen[3], 0, "the run never wrapped in the model");
    cr_assert_gt(model_segments_seen[1], 0);
}

Test(heap, due_run_grows_while_wrapped)
{
    /* steady FIFO traffic moves the run's head round the ring; a burst
       then grows it while its live slots wrap past the end */
    static item it[2000];
    dq_heap h;
    dq_heap_init(&h);
    int64_t seq = 1;
    size_t next = 0;
    for (int i = 0; i < 40; i++) {
        it[next].key = (dq_key){ 5, seq++ };
        cr_assert_eq(dq_heap_push_due(&h, &it[next].elem, it[next].key, 10), 0);
        next++;
    }
    for (int i = 0; i < 300; i++) { /* cap 64: the head wraps several times */
        cr_assert_eq(dq_heap_pop(&h), &it[next - 40].elem);
        it[next].key = (dq_key){ 5, seq++ };
        cr_assert_eq(dq_heap_push_due(&h, &it[next].elem, it[next].key, 10), 0);
        next++;
    }
    cr_assert_eq(h.count, 0, "every due push took the run");
    cr_assert(h.run_head + h.run_len > h.run_cap || h.run_head > 0);
    for (int i = 0; i < 1000; i++) {
        it[next].key = (dq_key){ 5, seq++ };
        cr_assert_eq(dq_heap_push_due(&h, &it[next].elem, it[next].key, 10), 0);
        next++;
    }
    cr_assert_eq(dq_heap_size(&h), 1040);
    for (size_t k = next - 1040; k < next; k++)
        cr_assert_eq(dq_heap_pop(&h), &it[k].elem, "FIFO order lost across the growth");
    cr_assert_null(dq_heap_pop(&h));
    dq_heap_fini(&h);
}

Test(heap, due_push_keeps_order_with_the_binary_part)
{
    /* a delayed key in the binary part, then due keys in the run, one of
       them due before the run's last (so it takes the binary part) */
    item it[4] = { { .key = { 50, 1 } },
                   { .key = { 10, 2 } },
                   { .key = { 12, 3 } },
                   { .key = { 11, 4 } } };
    dq_heap h;
    dq_heap_init(&h);
    cr_assert_eq(dq_heap_push_due(&h, &it[0].elem, it[0].key, 20), 0); /* not due */
    cr_assert_eq(dq_heap_push_due(&h, &it[1].elem, it[1].key, 20), 0);
    cr_assert_eq(dq_heap_push_due(&h, &it[2].elem, it[2].key, 20), 0);
    cr_assert_eq(dq_heap_push_due(&h, &it[3].elem, it[3].key, 20), 0); /* below 12 */
    cr_assert_eq(h.count, 2);
    cr_assert_eq(h.run_live, 2);
    const int order[] = { 1, 3, 2, 0 };
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dq_heap_pop(&h), &it[order[i]].elem);
    dq_heap_fini(&h);
}
