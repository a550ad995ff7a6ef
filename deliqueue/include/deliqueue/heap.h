/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intrusive indexed binary min-heap on dq_key, shared by the deliqueue
 * looper and every baseline that needs a consumer heap.
 *
 * Thread contract: none.  A heap belongs to one thread (the looper) or is
 * used under the caller's lock.  No atomics.
 *
 * Slots carry the key beside the element pointer, so sifting compares keys
 * that sit in the slot array (contiguous) instead of chasing pointers; each
 * element records its slot index so it can be removed from anywhere in
 * O(log n).
 *
 * DQ_HEAP_DEFINE(prefix, less) generates the functions for one comparator;
 * the library uses dq_heap_* (branchless dq_key_less), the benchmark also
 * instantiates the branchy comparator to measure the difference.
 */
#ifndef DELIQUEUE_HEAP_H
#define DELIQUEUE_HEAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <deliqueue/msg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Embedded in each element.  DQ_HEAP_NONE when not in a heap. */
typedef struct dq_heap_elem {
    uint32_t index;
} dq_heap_elem;

#define DQ_HEAP_NONE UINT32_MAX

typedef struct dq_heap_slot {
    dq_key        key;
    dq_heap_elem *elem;
} dq_heap_slot;

typedef struct dq_heap {
    dq_heap_slot *slots;
    uint32_t      count;
    uint32_t      capacity;
} dq_heap;

static inline void dq_heap_init(dq_heap *h)
{
    h->slots = NULL;
    h->count = 0;
    h->capacity = 0;
}

static inline void dq_heap_fini(dq_heap *h)
{
    free(h->slots);
    dq_heap_init(h);
}

/* 0 or -ENOMEM; the heap is unchanged on failure. */
static inline int dq_heap_reserve(dq_heap *h, uint32_t want)
{
    if (want <= h->capacity)
        return 0;
    if (want > UINT32_MAX / 2)
        return -ENOMEM;
    uint32_t cap = h->capacity ? h->capacity : 64;
    while (cap < want)
        cap *= 2;
    dq_heap_slot *s = realloc(h->slots, (size_t)cap * sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    h->slots = s;
    h->capacity = cap;
    return 0;
}

static inline dq_heap_elem *dq_heap_peek(const dq_heap *h)
{
    return h->count ? h->slots[0].elem : NULL;
}

static inline const dq_key *dq_heap_peek_key(const dq_heap *h)
{
    return h->count ? &h->slots[0].key : NULL;
}

/* The last child index the sift-down loop may look at.  The mutant stops
   one short and so never compares against the last element. */
#ifdef DQ_MUTANT_SIFT_OFF_BY_ONE
#define DQ_HEAP_SIFT_LIMIT(n) ((n) - 1)
#else
#define DQ_HEAP_SIFT_LIMIT(n) (n)
#endif

#define DQ_HEAP_DEFINE(P, LESS)                                               \
    static inline void P##_place(dq_heap *h, uint32_t i, dq_heap_slot s)      \
    {                                                                         \
        h->slots[i] = s;                                                      \
        s.elem->index = i;                                                    \
    }                                                                         \
                                                                              \
    static inline void P##_sift_up(dq_heap *h, uint32_t i, dq_heap_slot s)    \
    {                                                                         \
        while (i > 0) {                                                       \
            uint32_t parent = (i - 1) / 2;                                    \
            if (!LESS(s.key, h->slots[parent].key))                           \
                break;                                                        \
            P##_place(h, i, h->slots[parent]);                                \
            i = parent;                                                       \
        }                                                                     \
        P##_place(h, i, s);                                                   \
    }                                                                         \
                                                                              \
    static inline void P##_sift_down(dq_heap *h, uint32_t i, dq_heap_slot s)  \
    {                                                                         \
        uint32_t n = h->count;                                                \
        for (;;) {                                                            \
            uint32_t child = 2 * i + 1;                                       \
            if (child >= DQ_HEAP_SIFT_LIMIT(n))                               \
                break;                                                        \
            /* pick the smaller child without a branch on the comparison */  \
            uint32_t right = child + 1;                                       \
            child += (uint32_t)(right < n &&                                  \
                                LESS(h->slots[right].key, h->slots[child].key)); \
            if (!LESS(h->slots[child].key, s.key))                            \
                break;                                                        \
            P##_place(h, i, h->slots[child]);                                 \
            i = child;                                                        \
        }                                                                     \
        P##_place(h, i, s);                                                   \
    }                                                                         \
                                                                              \
    /* Insert e with key k.  0 or -ENOMEM (e not inserted). */                \
    static inline int P##_push(dq_heap *h, dq_heap_elem *e, dq_key k)         \
    {                                                                         \
        if (h->count == h->capacity) {                                        \
            int err = dq_heap_reserve(h, h->count + 1);                       \
            if (err)                                                          \
                return err;                                                   \
        }                                                                     \
        dq_heap_slot s = { k, e };                                            \
        P##_sift_up(h, h->count++, s);                                        \
        return 0;                                                             \
    }                                                                         \
                                                                              \
    /* Remove e, which must be in h. */                                       \
    static inline void P##_remove(dq_heap *h, dq_heap_elem *e)                \
    {                                                                         \
        uint32_t i = e->index;                                                \
        e->index = DQ_HEAP_NONE;                                              \
        dq_heap_slot last = h->slots[--h->count];                             \
        if (i == h->count)                                                    \
            return;                                                           \
        if (i > 0 && LESS(last.key, h->slots[(i - 1) / 2].key))               \
            P##_sift_up(h, i, last);                                          \
        else                                                                  \
            P##_sift_down(h, i, last);                                        \
    }                                                                         \
                                                                              \
    static inline dq_heap_elem *P##_pop(dq_heap *h)                           \
    {                                                                         \
        dq_heap_elem *top = dq_heap_peek(h);                                  \
        if (top != NULL)                                                      \
            P##_remove(h, top);                                               \
        return top;                                                           \
    }

DQ_HEAP_DEFINE(dq_heap, dq_key_less)

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_HEAP_H */
