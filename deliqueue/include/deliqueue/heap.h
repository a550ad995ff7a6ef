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
 * DQ_HEAP_DEFINE(prefix, less) generates the functions for one comparator,
 * DQ_HEAP_DEFINE_PICK(prefix, less, pick) with its own choice of the
 * smaller child; the library uses dq_heap_* (branchless dq_key_less, and
 * dq_heap_pick_smaller), the benchmark also instantiates the branchy
 * comparator to measure the difference.
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
    uint32_t      count;
    uint32_t      capacity;
    dq_heap_slot *run;
    uint32_t      run_head; /* ring position of the run's first slot */
    uint32_t      run_len;  /* slots from run_head to its last live one */
    uint32_t      run_live; /* live elements in the run */
    uint32_t      run_cap;  /* 0 or a power of two */
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
    uint32_t            n;
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
    int             k, i; /* segments, the current one */
    uint32_t        j;    /* the next slot of seg[i] */
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
    return h->run_len
               ? &h->run[(h->run_head + h->run_len - 1) & (h->run_cap - 1)]
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

/* The last child index the sift-down loop may look at.  The mutant stops
   one short and so never compares against the last element. */
#ifdef DQ_MUTANT_SIFT_OFF_BY_ONE
#define DQ_HEAP_SIFT_LIMIT(n) ((n) - 1)
#else
#define DQ_HEAP_SIFT_LIMIT(n) (n)
#endif

/* The sift-down's choice between siblings c and c + 1 (both < count):
   the index of the smaller.  The generic form adds LESS's 0/1; compilers
   materialise it with setcc and an add.  The library's own heap uses
   dq_heap_pick_smaller, which feeds dq_key_less's compare-with-borrow
   straight into a conditional select: one instruction less on the
   sift-down's critical path (key loads, compare, choice, next level's
   address), which is what keeps it level with the branchy comparator
   when keys never tie and that comparator's branch is always predicted
   (bench/RESULTS.md, target 4). */
#define DQ_HEAP_PICK_BY_LESS(LESS, slots, c)                                  \
    ((c) + (uint32_t)LESS((slots)[(c) + 1].key, (slots)[c].key))

static inline uint32_t dq_heap_pick_smaller(const dq_heap_slot *slots, uint32_t c)
{
#if defined(DQ_MUTANT_PICK_LARGER)
    /* mutant: the select's condition inverted (ge for lt), so the
       sift-down follows the larger child */
    return c + (uint32_t)!dq_key_less(slots[c + 1].key, slots[c].key);
#elif defined(DQ_MUTANT_CMP_SUB_OVERFLOW)
    /* that mutant is in dq_key_less: let the choice go through it too */
    return DQ_HEAP_PICK_BY_LESS(dq_key_less, slots, c);
#elif defined(__x86_64__) && defined(__GNUC__)
    /* right < left as one signed 128-bit subtraction (seq >= 0, as
       dq_key_less requires), then cmovl */
    uint32_t right = c + 1;
    int64_t borrow_sink = slots[right].key.when;
    __asm__("cmp   %[lseq], %[rseq]\n\t"
            "sbb   %[lwhen], %[sink]\n\t"
            "cmovl %[right], %[pick]"
            : [sink] "+r"(borrow_sink), [pick] "+r"(c)
            : [rseq] "r"(slots[right].key.seq), [lseq] "rm"(slots[c].key.seq),
              [lwhen] "rm"(slots[c].key.when), [right] "r"(right)
            : "cc");
    return c;
#elif defined(__aarch64__) && defined(__GNUC__)
    uint32_t right = c + 1;
    __asm__("cmp  %[rseq], %[lseq]\n\t"
            "sbcs xzr, %[rwhen], %[lwhen]\n\t"
            "csel %w[pick], %w[right], %w[pick], lt"
            : [pick] "+r"(c)
            : [rseq] "r"(slots[right].key.seq), [lseq] "r"(slots[c].key.seq),
              [rwhen] "r"(slots[right].key.when), [lwhen] "r"(slots[c].key.when),
              [right] "r"(right)
            : "cc");
    return c;
#else
    return DQ_HEAP_PICK_BY_LESS(dq_key_less, slots, c);
#endif
}

/* Whether key k may follow the run's last slot (NULL: empty run).  The
   mutant appends every due key, so a due key posted with an earlier time
   (another producer's clock read, a post "at" a past time) lands behind
   later ones. */
#ifdef DQ_MUTANT_RUN_UNSORTED
#define DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) ((void)(last), true)
#else
#define DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) ((last) == NULL || !LESS(k, (last)->key))
#endif

#define DQ_HEAP_PICK_LIBRARY(LESS, slots, c) dq_heap_pick_smaller(slots, c)

/* A heap type P ordered by LESS, whose sift-down picks the smaller child
   with PICK(LESS, slots, c) (DQ_HEAP_PICK_BY_LESS, or the library's). */
#define DQ_HEAP_DEFINE(P, LESS) DQ_HEAP_DEFINE_PICK(P, LESS, DQ_HEAP_PICK_BY_LESS)

#define DQ_HEAP_DEFINE_PICK(P, LESS, PICK)                                    \
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
            /* the smaller child, without a branch on the comparison */     \
            if (child + 1 < n)                                                \
                child = PICK(LESS, h->slots, child);                          \
            if (!LESS(h->slots[child].key, s.key))                            \
                break;                                                        \
            P##_place(h, i, h->slots[child]);                                 \
            i = child;                                                        \
        }                                                                     \
        P##_place(h, i, s);                                                   \
    }                                                                         \
                                                                              \
    /* Insert e with key k into the binary part.  0 or -ENOMEM (e not   \
       inserted). */                                                      \
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
    /* Insert e with key k, into the run when k is due at now (any time    \
       not after the real present: a stale now only costs the fast path)  \
       and not below the run's last key, else into the binary part.  0 or \
       -ENOMEM (e not inserted). */                                       \
    static inline int P##_push_due(dq_heap *h, dq_heap_elem *e, dq_key k,     \
                                   int64_t now)                               \
    {                                                                         \
        const dq_heap_slot *last = dq_heap_run_last(h);                       \
        if (k.when <= now && DQ_HEAP_RUN_SORTS_AFTER(LESS, k, last) &&        \
            dq_heap_reserve_run(h, 1) == 0) {                                 \
            dq_heap_run_append(h, e, k);                                      \
            return 0;                                                         \
        }                                                                     \
        return P##_push(h, e, k);                                             \
    }                                                                         \
                                                                              \
    /* The slot of the minimum, or NULL when the heap is empty. */           \
    static inline const dq_heap_slot *P##_min_slot(const dq_heap *h)          \
    {                                                                         \
        if (h->run_len == 0)                                                  \
            return h->count ? &h->slots[0] : NULL;                            \
        const dq_heap_slot *r = &h->run[h->run_head];                         \
        return h->count && LESS(h->slots[0].key, r->key) ? &h->slots[0] : r;  \
    }                                                                         \
                                                                              \
    static inline dq_heap_elem *P##_peek(const dq_heap *h)                    \
    {                                                                         \
        const dq_heap_slot *s = P##_min_slot(h);                              \
        return s ? s->elem : NULL;                                            \
    }                                                                         \
                                                                              \
    static inline const dq_key *P##_peek_key(const dq_heap *h)                \
    {                                                                         \
        const dq_heap_slot *s = P##_min_slot(h);                              \
        return s ? &s->key : NULL;                                            \
    }                                                                         \
                                                                              \
    /* Remove e, which must be in h. */                                       \
    static inline void P##_remove(dq_heap *h, dq_heap_elem *e)                \
    {                                                                         \
        uint32_t i = e->index;                                                \
        e->index = DQ_HEAP_NONE;                                              \
        if (i & DQ_HEAP_RUN) {                                                \
            dq_heap_run_take(h, i & ~DQ_HEAP_RUN);                            \
            return;                                                           \
        }                                                                     \
        dq_heap_slot last = h->slots[--h->count];                             \
        if (i == h->count)                                                    \
            return;                                                           \
        if (i > 0 && LESS(last.key, h->slots[(i - 1) / 2].key))               \
            P##_sift_up(h, i, last);                                          \
        else                                                                  \
            P##_sift_down(h, i, last);                                        \
    }                                                                         \
                                                                              \
    /* Take out the minimum (NULL: empty).  Not P##_remove: the minimum's \
       place is known, so no test of where it is and no sift-up. */       \
    static inline dq_heap_elem *P##_pop(dq_heap *h)                           \
    {                                                                         \
        const dq_heap_slot *min = P##_min_slot(h);                            \
        if (min == NULL)                                                      \
            return NULL;                                                      \
        dq_heap_elem *top = min->elem;                                        \
        top->index = DQ_HEAP_NONE;                                            \
        if (min != h->slots) {                                                \
            dq_heap_run_take(h, h->run_head);                                 \
            return top;                                                       \
        }                                                                     \
        dq_heap_slot last = h->slots[--h->count];                             \
        if (h->count != 0)                                                    \
            P##_sift_down(h, 0, last);                                        \
        return top;                                                           \
    }

DQ_HEAP_DEFINE_PICK(dq_heap, dq_key_less, DQ_HEAP_PICK_LIBRARY)

#ifdef __cplusplus
}
#endif
#endif /* DELIQUEUE_HEAP_H */
