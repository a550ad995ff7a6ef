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
 * O(log n).  Beside the binary part, a due run (see struct dq_heap) takes
 * keys already due in O(1): push_due with the caller's clock.
 *
 * DQ_HEAP_DEFINE_WITH(prefix, less, sift_down) generates the functions for
 * one comparator and one shape of sift-down; the library uses dq_heap_*
 * (branchless dq_key_less, chosen between siblings by
 * dq_heap_pick_smaller).  Other instantiations (the baselines' comparators
 * and sift-down by index) live with the benchmarks, in bench/baselines.
 */
#ifndef DELIQUEUE_HEAP_H
#define DELIQUEUE_HEAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "msg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Embedded in each element.  DQ_HEAP_NONE when not in a heap. */
typedef struct dq_heap_elem {
    uint32_t index;
} dq_heap_elem;

#define DQ_HEAP_NONE UINT32_MAX

typedef struct dq_heap_slot {
    dq_key key;
    dq_heap_elem *elem;
} dq_heap_slot;

/* The binary heap (slots[0 .. count)) and beside it the due run: a ring
   of slots whose live keys never decrease from run_head on, filled only
   by dq_heap_push_due with keys already due, so that a due-now message
   costs O(1) however many delayed ones the binary part holds (the legacy
   list's tail fast path, for the messages that are due anyway).  The
   minimum is the smaller of the two fronts.  An element records where it
   is: a binary-heap index, or DQ_HEAP_RUN | its ring position.  A run
   element removed from the middle leaves a hole (elem NULL); the ring's
   first and last slots are always live. */
typedef struct dq_heap {
    dq_heap_slot *slots;
    uint32_t count;
    uint32_t capacity;
    dq_heap_slot *run;
    uint32_t run_head; /* ring position of the run's first slot */
    uint32_t run_len;  /* slots from run_head to its last live one */
    uint32_t run_live; /* live elements in the run */
    uint32_t run_cap;  /* 0 or a power of two */
} dq_heap;

#define DQ_HEAP_RUN (UINT32_C(1) << 31) /* in an elem's index: a run position */

static inline void dq_heap_init(dq_heap *h)
{
    h->slots = NULL;
    h->count = 0;
    h->capacity = 0;
    h->run = NULL;
    h->run_head = h->run_len = h->run_live = h->run_cap = 0;
}

static inline void dq_heap_fini(dq_heap *h)
{
    free(h->slots);
    free(h->run);
    dq_heap_init(h);
}

/* Elements in the heap, both parts. */
static inline uint32_t dq_heap_size(const dq_heap *h)
{
    return h->count + h->run_live;
}

/* Iteration in no particular order, as at most three runs of contiguous
   slots: the binary part, then the due run from run_head (two runs when
   the ring wraps).  A slot of the run may be a hole (elem NULL).  A scan
   walks each run with a pointer and nothing else to index (a remove at
   depth spends its time there).  Removing elements while iterating moves
   others: collect first. */
typedef struct dq_heap_segment {
    const dq_heap_slot *slots;
    uint32_t n;
} dq_heap_segment;

/* Fills seg[0 .. k) with the non-empty runs and returns k (0 to 3). */
static inline int dq_heap_segments(const dq_heap *h, dq_heap_segment seg[3])
{
    int k = 0;
    if (h->count != 0)
        seg[k++] = (dq_heap_segment){ h->slots, h->count };
    if (h->run_len != 0) {
        /* run_head < run_cap: the run's slots are [run_head, run_cap), then
           [0, the rest) */
        uint32_t to_end = h->run_cap - h->run_head;
        uint32_t first = h->run_len < to_end ? h->run_len : to_end;
        seg[k++] = (dq_heap_segment){ &h->run[h->run_head], first };
        if (first < h->run_len)
            seg[k++] = (dq_heap_segment){ h->run, h->run_len - first };
    }
    return k;
}

/* The live elements one at a time over the segments, holes skipped, for
   scans off the hot path:
       dq_heap_iter it = dq_heap_iter_start(h);
       for (dq_heap_elem *e; (e = dq_heap_iter_next(&it)) != NULL;) ... */
typedef struct dq_heap_iter {
    dq_heap_segment seg[3];
    int k, i;   /* segments, the current one */
    uint32_t j; /* the next slot of seg[i] */
} dq_heap_iter;

static inline dq_heap_iter dq_heap_iter_start(const dq_heap *h)
{
    dq_heap_iter it;
    it.k = dq_heap_segments(h, it.seg);
    it.i = 0;
    it.j = 0;
    return it;
}

static inline dq_heap_elem *dq_heap_iter_next(dq_heap_iter *it)
{
    for (; it->i < it->k; it->i++, it->j = 0)
        while (it->j < it->seg[it->i].n) {
            dq_heap_elem *e = it->seg[it->i].slots[it->j++].elem;
            if (e != NULL)
                return e;
        }
    return NULL;
}

/* 0 or -ENOMEM; the heap is unchanged on failure. */
static inline int dq_heap_reserve(dq_heap *h, uint32_t want)
{
    if (want <= h->capacity)
        return 0;
    if (want > UINT32_MAX / 2)
        return -ENOMEM;
#if SIZE_MAX <= UINT32_MAX
    /* keeps the byte size, and the sift-down's offsets (2 * off + one
       slot, off below the size), inside a 32-bit size_t */
    if (want > SIZE_MAX / 4 / sizeof(dq_heap_slot))
        return -ENOMEM;
#endif
    uint32_t cap = h->capacity ? h->capacity : 64;
    while (cap < want)
        cap *= 2;
    dq_heap_slot *s = (dq_heap_slot *)realloc(h->slots, (size_t)cap * sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    h->slots = s;
    h->capacity = cap;
    return 0;
}

/* Room for `more` appends to the run without allocating.  0 or -ENOMEM
   (the heap unchanged).  Growing keeps every live element's ring
   position except those of a wrapped end, which move past the old
   capacity (and are told so). */
static inline int dq_heap_reserve_run(dq_heap *h, uint32_t more)
{
    if (more <= h->run_cap - h->run_len)
        return 0;
    if (more > (UINT32_C(1) << 30) - h->run_len)
        return -ENOMEM;
    uint32_t old = h->run_cap, cap = old ? old : 64;
    while (cap - h->run_len < more)
        cap *= 2;
    dq_heap_slot *ring = (dq_heap_slot *)realloc(h->run, (size_t)cap * sizeof(*ring));
    if (ring == NULL)
        return -ENOMEM;
    /* [run_head, run_head + run_len) wrapped past old: move the wrapped
       part, ring[0 .. wrapped), to ring[old ..) (cap >= 2 * old) */
    uint32_t end = h->run_head + h->run_len;
    uint32_t wrapped = end > old ? end - old : 0;
    for (uint32_t j = 0; j < wrapped; j++) {
        ring[old + j] = ring[j];
        if (ring[old + j].elem != NULL)
            ring[old + j].elem->index = DQ_HEAP_RUN | (old + j);
    }
    h->run = ring;
    h->run_cap = cap;
    return 0;
}

/* The run's last slot (live), or NULL if the run is empty. */
static inline const dq_heap_slot *dq_heap_run_last(const dq_heap *h)
{
    return h->run_len ? &h->run[(h->run_head + h->run_len - 1) & (h->run_cap - 1)]
                      : NULL;
}

/* Append e with key k to the run, which has room (dq_heap_reserve_run)
   and whose last key is not above k. */
static inline void dq_heap_run_append(dq_heap *h, dq_heap_elem *e, dq_key k)
{
    uint32_t pos = (h->run_head + h->run_len) & (h->run_cap - 1);
    h->run[pos].key = k;
    h->run[pos].elem = e;
    e->index = DQ_HEAP_RUN | pos;
    h->run_len++;
    h->run_live++;
}

/* Take the run element at ring position pos out of the run.  A hole at
   either end is dropped at once, so both ends stay live and a hole costs
   one step of the end that passes it. */
static inline void dq_heap_run_take(dq_heap *h, uint32_t pos)
{
    uint32_t mask = h->run_cap - 1;
    h->run[pos].elem = NULL;
    if (--h->run_live == 0) {
        h->run_head = h->run_len = 0;
        return;
    }
    uint32_t offset = (pos - h->run_head) & mask;
    if (offset == 0) {
        do {
            h->run_head = (h->run_head + 1) & mask;
            h->run_len--;
        } while (h->run[h->run_head].elem == NULL);
    } else if (offset == h->run_len - 1) {
        do
            h->run_len--;
        while (h->run[(h->run_head + h->run_len - 1) & mask].elem == NULL);
    }
}

/* The library's sift-down, DQ_HEAP_SIFT_DOWN_BY_OFFSET (bench/RESULTS.md,
   "The sift-down's offsets"): byte offsets into the slot array and
   dq_heap_pick_smaller, which feeds dq_key_less's compare-with-borrow
   straight into a conditional select of the right sibling's offset.  A
   left child's offset is 2 * off + one slot, a single lea, where an index
   takes three steps (2i + 1, times 3, times 8) before the children's keys
   can load; all of them are on the critical path of every level (key
   loads, compare, choice, next level's address).  With a setcc choice the
   offsets need more address arithmetic after it and measure slower than
   indices, so other comparators use a sift-down by index
   (bench/baselines).

   The limit of the left child, as an index (unit 1) or an offset (unit
   one slot). */
#define DQ_HEAP_SIFT_LIMIT(end, unit) (end)

#define DQ_HEAP_SLOT_SIZE sizeof(dq_heap_slot)

static inline dq_heap_slot *dq_heap_slot_at(dq_heap_slot *slots, size_t off)
{
    return (dq_heap_slot *)(void *)((char *)slots + off);
}

/* Prefetch the grandchildren of the slot at byte offset off, four slots
   from 4 * off + 3 slots on (2 or 3 cache lines: the first, the last and
   the one 64 bytes on cover them), while this level's compare decides
   which two of them the next level reads.  The address may lie beyond the
   array at the bottom levels; it is formed as an integer (no pointer
   arithmetic past the object) and a prefetch never faults. */
static inline void dq_heap_prefetch_grandchildren(const dq_heap_slot *slots, size_t off)
{
#if defined(__GNUC__)
    uintptr_t g = (uintptr_t)slots + 4 * off + 3 * DQ_HEAP_SLOT_SIZE;
    __builtin_prefetch((const void *)g);
    __builtin_prefetch((const void *)(g + 64));
    __builtin_prefetch((const void *)(g + 4 * DQ_HEAP_SLOT_SIZE - 1));
#else
    (void)slots;
    (void)off;
#endif
}

/* Of the siblings at byte offsets c and c + one slot (both in the heap),
   the offset of the smaller. */
static inline size_t dq_heap_pick_smaller(dq_heap_slot *slots, size_t c)
{
    size_t right = c + DQ_HEAP_SLOT_SIZE;
    const dq_key *l = &dq_heap_slot_at(slots, c)->key;
    const dq_key *r = &dq_heap_slot_at(slots, right)->key;
#if !(defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)))
    /* portable */
    return c + DQ_HEAP_SLOT_SIZE * (size_t)dq_key_less(*r, *l);
#elif defined(__x86_64__)
    /* right < left as one signed 128-bit subtraction (seq >= 0, as
       dq_key_less requires), then cmovl */
    int64_t borrow_sink = r->when;
    __asm__("cmp   %[lseq], %[rseq]\n\t"
            "sbb   %[lwhen], %[sink]\n\t"
            "cmovl %[right], %[pick]"
            : [sink] "+r"(borrow_sink), [pick] "+r"(c)
            : [rseq] "r"(r->seq), [lseq] "rm"(l->seq), [lwhen] "rm"(l->when),
              [right] "r"(right)
            : "cc");
    return c;
#else
    __asm__("cmp  %[rseq], %[lseq]\n\t"
            "sbcs xzr, %[rwhen], %[lwhen]\n\t"
            "csel %[pick], %[right], %[pick], lt"
            : [pick] "+r"(c)
            : [rseq] "r"(r->seq), [lseq] "r"(l->seq), [rwhen] "r"(r->when),
              [lwhen] "r"(l->when), [right] "r"(right)
            : "cc");
    return c;
#endif
}

#define DQ_HEAP_SIFT_DOWN_BY_OFFSET(P, LESS)                                         \
    static inline void P##_place_at(dq_heap_slot *slots, size_t off, dq_heap_slot s) \
    {                                                                                \
        *dq_heap_slot_at(slots, off) = s;                                            \
        s.elem->index = (uint32_t)(off / DQ_HEAP_SLOT_SIZE);                         \
    }                                                                                \
                                                                                     \
    static inline void P##_sift_down(dq_heap *h, uint32_t i, dq_heap_slot s)         \
    {                                                                                \
        dq_heap_slot *slots = h->slots;                                              \
        const size_t end = (size_t)h->count * DQ_HEAP_SLOT_SIZE;                     \
        size_t off = (size_t)i * DQ_HEAP_SLOT_SIZE;                                  \
        for (;;) {                                                                   \
            size_t child = 2 * off + DQ_HEAP_SLOT_SIZE;                              \
            if (child >= DQ_HEAP_SIFT_LIMIT(end, DQ_HEAP_SLOT_SIZE))                 \
                break;                                                               \
            dq_heap_prefetch_grandchildren(slots, off);                              \
            if (child + DQ_HEAP_SLOT_SIZE < end)                                     \
                child = dq_heap_pick_smaller(slots, child);                          \
            const dq_heap_slot *c = dq_heap_slot_at(slots, child);                   \
            if (!LESS(c->key, s.key))                                                \
                break;                                                               \
            P##_place_at(slots, off, *c);                                            \
            off = child;                                                             \
        }                                                                            \
        P##_place_at(slots, off, s);                                                 \
    }

/* Whether key k may follow the run's last slot (NULL: empty run). */
#define DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) ((last) == NULL || !LESS(k, (last)->key))

/* A heap type P ordered by LESS, with the sift-down SIFT_DOWN(P, LESS)
   (the library's own is BY_OFFSET, whose choice is dq_key_less's). */

#define DQ_HEAP_DEFINE_WITH(P, LESS, SIFT_DOWN)                                        \
    static inline void P##_place(dq_heap *h, uint32_t i, dq_heap_slot s)               \
    {                                                                                  \
        h->slots[i] = s;                                                               \
        s.elem->index = i;                                                             \
    }                                                                                  \
                                                                                       \
    static inline void P##_sift_up(dq_heap *h, uint32_t i, dq_heap_slot s)             \
    {                                                                                  \
        while (i > 0) {                                                                \
            uint32_t parent = (i - 1) / 2;                                             \
            if (!LESS(s.key, h->slots[parent].key))                                    \
                break;                                                                 \
            P##_place(h, i, h->slots[parent]);                                         \
            i = parent;                                                                \
        }                                                                              \
        P##_place(h, i, s);                                                            \
    }                                                                                  \
                                                                                       \
    SIFT_DOWN(P, LESS)                                                                 \
                                                                                       \
    /* Insert e with key k into the binary part.  0 or -ENOMEM (e not   \
       inserted). */              \
    static inline int P##_push(dq_heap *h, dq_heap_elem *e, dq_key k)                  \
    {                                                                                  \
        if (h->count == h->capacity) {                                                 \
            int err = dq_heap_reserve(h, h->count + 1);                                \
            if (err)                                                                   \
                return err;                                                            \
        }                                                                              \
        dq_heap_slot s = { k, e };                                                     \
        P##_sift_up(h, h->count++, s);                                                 \
        return 0;                                                                      \
    }                                                                                  \
                                                                                       \
    /* Insert e with key k, into the run when k is due at now (any time    \
       not after the real present: a stale now only costs the fast path)  \
       and not below the run's last key, else into the binary part.  0 or \
       -ENOMEM (e not inserted). */           \
    static inline int P##_push_due(dq_heap *h, dq_heap_elem *e, dq_key k, int64_t now) \
    {                                                                                  \
        const dq_heap_slot *last = dq_heap_run_last(h);                                \
        if (k.when <= now && DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) &&                 \
            dq_heap_reserve_run(h, 1) == 0) {                                          \
            dq_heap_run_append(h, e, k);                                               \
            return 0;                                                                  \
        }                                                                              \
        return P##_push(h, e, k);                                                      \
    }                                                                                  \
                                                                                       \
    /* The slot of the minimum, or NULL when the heap is empty. */                     \
    static inline const dq_heap_slot *P##_min_slot(const dq_heap *h)                   \
    {                                                                                  \
        if (h->run_len == 0)                                                           \
            return h->count ? &h->slots[0] : NULL;                                     \
        const dq_heap_slot *r = &h->run[h->run_head];                                  \
        return h->count && LESS(h->slots[0].key, r->key) ? &h->slots[0] : r;           \
    }                                                                                  \
                                                                                       \
    static inline dq_heap_elem *P##_peek(const dq_heap *h)                             \
    {                                                                                  \
        const dq_heap_slot *s = P##_min_slot(h);                                       \
        return s ? s->elem : NULL;                                                     \
    }                                                                                  \
                                                                                       \
    static inline const dq_key *P##_peek_key(const dq_heap *h)                         \
    {                                                                                  \
        const dq_heap_slot *s = P##_min_slot(h);                                       \
        return s ? &s->key : NULL;                                                     \
    }                                                                                  \
                                                                                       \
    /* Remove e, which must be in h. */                                                \
    static inline void P##_remove(dq_heap *h, dq_heap_elem *e)                         \
    {                                                                                  \
        uint32_t i = e->index;                                                         \
        e->index = DQ_HEAP_NONE;                                                       \
        if (i & DQ_HEAP_RUN) {                                                         \
            dq_heap_run_take(h, i & ~DQ_HEAP_RUN);                                     \
            return;                                                                    \
        }                                                                              \
        dq_heap_slot last = h->slots[--h->count];                                      \
        if (i == h->count)                                                             \
            return;                                                                    \
        if (i > 0 && LESS(last.key, h->slots[(i - 1) / 2].key))                        \
            P##_sift_up(h, i, last);                                                   \
        else                                                                           \
            P##_sift_down(h, i, last);                                                 \
    }                                                                                  \
                                                                                       \
    /* Take out the minimum (NULL: empty).  Not P##_remove: the minimum's \
       place is known, so no test of where it is and no sift-up. */            \
    static inline dq_heap_elem *P##_pop(dq_heap *h)                                    \
    {                                                                                  \
        const dq_heap_slot *min = P##_min_slot(h);                                     \
        if (min == NULL)                                                               \
            return NULL;                                                               \
        dq_heap_elem *top = min->elem;                                                 \
        top->index = DQ_HEAP_NONE;                                                     \
        if (min != h->slots) {                                                         \
            dq_heap_run_take(h, h->run_head);                                          \
            return top;                                                                \
        }                                                                              \
        dq_heap_slot last = h->slots[--h->count];                                      \
        if (h->count != 0)                                                             \
            P##_sift_down(h, 0, last);                                                 \
        return top;                                                                    \
    }

DQ_HEAP_DEFINE_WITH(dq_heap, dq_key_less, DQ_HEAP_SIFT_DOWN_BY_OFFSET)

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_HEAP_H */
